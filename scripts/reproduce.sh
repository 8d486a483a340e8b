#!/usr/bin/env bash
# The main job: builds hscm and runs every implemented experiment on built-in defaults.
# The report (Markdown, JSON, SVG plots) lands in ./report. Extra arguments go to
# `hscm reproduce` (e.g. --quick for a seconds-long smoke run).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
export PATH="$HOME/.cargo/bin:$PATH"
cargo build --release --locked -p hscm-cli
# The cache-simulator section compares itself with libCacheSim when this finds it.
HSCM_LIBCACHESIM_PYTHON=$(bash scripts/libcachesim-env.sh) || {
  echo "reproduce: could not install libCacheSim's Python package; its comparison is skipped" >&2
  HSCM_LIBCACHESIM_PYTHON=""
}
export HSCM_LIBCACHESIM_PYTHON
# The key-value section replays real YCSB 0.17 traces, recorded here by the reference
# implementation (a Java run of a few seconds) unless they are already there.
if [ ! -f target/ycsb-traces/ycsb-3-run.txt ]; then
  bash scripts/ycsb-traces.sh target/ycsb-traces ||
    echo "reproduce: could not record YCSB traces; the key-value replay rows are skipped" >&2
fi
# The Python package's section: its benchmarks and the WARM sensitivity sweep
# (examples/warm_sweep.py, on the local executor), run here, read by the report.
if PY=$(bash scripts/python-env.sh); then
  quick=""
  for a in "$@"; do [ "$a" = "--quick" ] && quick="--quick"; done
  mkdir -p report/python
  rm -rf report/python/warm-sweep
  "$PY" -m hscm.bench $quick --out report/python/bench.json
  "$PY" examples/warm_sweep.py --out report/python/warm-sweep
else
  echo "reproduce: could not build the Python package; its section is skipped" >&2
fi
exec ./target/release/hscm reproduce --out report "$@"

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
exec ./target/release/hscm reproduce --out report "$@"

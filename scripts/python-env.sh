#!/usr/bin/env bash
# Builds the hscm Python package (one abi3 wheel for CPython >= 3.11, with maturin)
# into target/wheels and installs it, with what it needs and what its tests, sweeps and
# examples use (pandas, pyarrow, Dask, Ray, matplotlib, pytest; prometheus_client parses
# the service's metrics in its tests), into a private
# environment, target/py. Prints that environment's python. Idempotent: packages are
# installed once; the wheel is rebuilt and reinstalled on every call (cargo rebuilds
# only what changed).
#
#   PY=$(bash scripts/python-env.sh)            # release build
#   PY=$(bash scripts/python-env.sh --debug)    # unoptimised, quicker to build (tests)
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$HOME/.cargo/bin:$PATH"
PROFILE=release
[ "${1:-}" = "--debug" ] && PROFILE=dev
ENV=target/py
PY=$PWD/$ENV/bin/python
# The versions the package was written and tested against (docs/python.md).
PACKAGES=(maturin==1.16.0 numpy==2.4.6 pandas==3.1.1 pyarrow==26.0.1 tqdm==4.70.1
  "dask[distributed]==2026.8.0" ray==2.60.0 matplotlib==3.11.2 pytest==9.2.0
  prometheus_client==0.26.0)
if ! "$PY" -c "import maturin, pandas, pyarrow, dask.distributed, ray, matplotlib, pytest, tqdm, prometheus_client" 2>/dev/null; then
  bash scripts/make-venv.sh "$ENV"
  "$PY" -m pip install -q --disable-pip-version-check "${PACKAGES[@]}" >&2
fi
rm -f target/wheels/hscm-*.whl
"$PY" -m maturin build --quiet --profile "$PROFILE" --locked \
  -m crates/hscm-py/Cargo.toml -o target/wheels >&2
"$PY" -m pip install -q --disable-pip-version-check --no-deps --force-reinstall target/wheels/hscm-*.whl >&2
echo "$PY"

#!/usr/bin/env bash
# Makes a private Python environment (target/pyenv) holding libCacheSim's Python package,
# the established simulator `scripts/libcachesim_compare.py` checks hscm against, and
# prints that environment's python. Idempotent; installs Debian's python3-venv first
# when the machine's python3 cannot make environments.
#
#   PY=$(bash scripts/libcachesim-env.sh)
set -euo pipefail
cd "$(dirname "$0")/.."
# The version the comparison was written and checked against (docs/vmsim.md).
VERSION=0.3.5
ENV=target/pyenv
PY=$PWD/$ENV/bin/python
if ! "$PY" -c "import libcachesim" 2>/dev/null; then
  bash scripts/make-venv.sh "$ENV"
  "$PY" -m pip install -q --disable-pip-version-check "libcachesim==$VERSION" >&2
fi
echo "$PY"

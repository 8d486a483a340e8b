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
  if ! python3 -m venv --help >/dev/null 2>&1 || ! python3 -c "import ensurepip" 2>/dev/null; then
    SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
    $SUDO apt-get update -qq >&2
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq python3-venv >&2
  fi
  rm -rf "$ENV"
  python3 -m venv "$ENV" >&2
  "$PY" -m pip install -q --disable-pip-version-check "libcachesim==$VERSION" >&2
fi
echo "$PY"

#!/usr/bin/env bash
# Makes a fresh Python virtual environment at $1 (removing what is there), installing
# Debian's python3-venv first when the machine's python3 cannot make environments.
# Used by scripts/libcachesim-env.sh and scripts/python-env.sh.
set -euo pipefail
ENV=$1
if ! python3 -m venv --help >/dev/null 2>&1 || ! python3 -c "import ensurepip" 2>/dev/null; then
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq >&2
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq python3-venv >&2
fi
rm -rf "$ENV"
python3 -m venv "$ENV" >&2

#!/usr/bin/env bash
# Makes target/moto, a private Python environment holding moto's local S3 server, for
# the NBD home's S3 test (nbdkit's S3 plugin in front of it: crates/hscm-durable/tests/
# nbd_home.rs). Prints the server's path. Idempotent: installs once.
#
#   bash scripts/moto-env.sh      # -> .../target/moto/bin/moto_server
set -euo pipefail
cd "$(dirname "$0")/.."
ENV=target/moto
SERVER=$PWD/$ENV/bin/moto_server
if ! "$PWD/$ENV/bin/python" -c "import moto.server, flask" 2>/dev/null; then
  bash scripts/make-venv.sh "$ENV"
  "$PWD/$ENV/bin/python" -m pip install -q --disable-pip-version-check "moto[server]==5.2.5" >&2
fi
echo "$SERVER"

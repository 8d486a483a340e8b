#!/usr/bin/env bash
# How soon a large volume served by `hscm nbd` answers its first correct read, while
# it is still warming: creates a volume (default 8G), writes a pattern near its end,
# stops the server, drops the page cache (when root), starts `hscm nbd` again and
# times from the start of the process to the first read that returns the pattern
# (qemu-io, retried every 20 ms). Prints one JSON line.
#
#   bash scripts/nbd-first-read.sh [SIZE] [DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
SIZE=${1:-8G}
DIR=$(mktemp -d "${2:-${TMPDIR:-/tmp}}/hscm-first-read.XXXXXX")
trap 'kill $PID 2>/dev/null || true; rm -rf "$DIR"' EXIT
HSCM=${HSCM:-target/release/hscm}
[ -x "$HSCM" ] || cargo build --release -q -p hscm-cli
SOCK="$DIR/s.sock"
URI="nbd+unix:///?socket=$SOCK"
"$HSCM" volume create "$DIR/v.hscm" --size "$SIZE" >/dev/null
BYTES=$(stat -c %s "$DIR/v.hscm")
OFF=$(( (BYTES / 2) - (1 << 20) ))   # mid-volume: cold until the loader gets there
"$HSCM" nbd "$DIR/v.hscm" --socket "$SOCK" >/dev/null 2>&1 & PID=$!
until [ -S "$SOCK" ]; do sleep 0.02; done
qemu-io -f raw "$URI" -c "write -P 0x5c $OFF 64k" >/dev/null
kill -TERM $PID; wait $PID || true
sync
if [ "$(id -u)" -eq 0 ]; then echo 3 > /proc/sys/vm/drop_caches; fi
START=$(date +%s%N)
"$HSCM" nbd "$DIR/v.hscm" --socket "$SOCK" >/dev/null 2>&1 & PID=$!
correct() {
  local out
  out=$(qemu-io -f raw -r "$URI" -c "read -P 0x5c $OFF 64k" 2>&1) || return 1
  grep -q "^read" <<<"$out" && ! grep -q "verification failed" <<<"$out"
}
until [ -S "$SOCK" ] && correct; do
  sleep 0.02
done
END=$(date +%s%N)
echo "{\"size\": \"$SIZE\", \"first_correct_read_ms\": $(( (END - START) / 1000000 ))}"

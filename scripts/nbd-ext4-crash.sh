#!/usr/bin/env bash
# ext4 on the NBD export, end to end without the kernel's nbd module: `hscm nbd` serves
# a volume, nbdfuse shows it as a file, a loop device (direct I/O) makes that a block
# device, and ext4 lives on it. Each round mounts it, writes files with fsync (file and
# directory) and records each one once its fsyncs returned, kills the server with
# SIGKILL mid-write, tears the stack down, restarts the server, lets a mount replay
# ext4's journal, runs `e2fsck -fn` (must be clean) and checks every recorded file.
# Needs root, /dev/fuse and loop devices.
#
#   HSCM=target/release/hscm bash scripts/nbd-ext4-crash.sh [ROUNDS] [DURABILITY]
set -euo pipefail
ROUNDS=${1:-20}
DURABILITY=${2:-immediate}
HSCM=${HSCM:-$(cd "$(dirname "$0")/.." && pwd)/target/release/hscm}
[ -x "$HSCM" ] || { echo "no hscm binary at $HSCM (set HSCM)" >&2; exit 2; }
[ "$(id -u)" -eq 0 ] || { echo "needs root (loop devices, mount)" >&2; exit 2; }
for t in nbdfuse fusermount3 losetup mkfs.ext4 e2fsck; do
  command -v $t >/dev/null || { echo "$t is missing: run scripts/setup.sh" >&2; exit 2; }
done
W=$(mktemp -d "${TMPDIR:-/tmp}/hscm-ext4.XXXXXX")
SOCK="$W/s.sock"; FUSE=""; MNT="$W/mnt"; LOOP=""; SERVER=""; WRITER=""; ATTACHES=0
mkdir -p "$MNT"

start_server() {
  # A server killed with SIGKILL leaves its socket behind: wait for the new one.
  rm -f "$SOCK"
  "$HSCM" nbd "$W/v.hscm" --socket "$SOCK" >/dev/null 2>>"$W/server.log" & SERVER=$!
  for _ in $(seq 500); do [ -S "$SOCK" ] && return 0; sleep 0.02; done
  echo "server did not start" >&2; return 1
}
attach() {
  # A fresh mount point each time: a FUSE mount torn down lazily after the server
  # died may linger a moment, and must not be mistaken for the new one.
  ATTACHES=$((ATTACHES + 1)); FUSE="$W/fuse.$ATTACHES"; mkdir -p "$FUSE"
  nbdfuse "$FUSE/disk" --unix "$SOCK" 2>>"$W/nbdfuse.log" &
  for _ in $(seq 1000); do mountpoint -q "$FUSE" && [ -s "$FUSE/disk" ] && break; sleep 0.02; done
  if ! LOOP=$(losetup --find --show --direct-io=on "$FUSE/disk"); then
    echo "nbdfuse did not show the export:" >&2; tail -5 "$W/nbdfuse.log" "$W/server.log" >&2
    return 1
  fi
}
detach() {
  # After the server died, I/O fails: unmount lazily if need be, never hang here.
  if mountpoint -q "$MNT"; then umount "$MNT" 2>/dev/null || umount -l "$MNT"; fi
  [ -n "$LOOP" ] && { losetup -d "$LOOP" 2>/dev/null || true; LOOP=""; }
  if [ -n "$FUSE" ]; then
    fusermount3 -u "$FUSE" 2>/dev/null || fusermount3 -uz "$FUSE" 2>/dev/null || true
  fi
}
cleanup() {
  [ -n "$WRITER" ] && kill -9 "$WRITER" 2>/dev/null || true
  detach || true
  [ -n "$SERVER" ] && kill -9 "$SERVER" 2>/dev/null || true
  rm -rf "$W"
}
trap cleanup EXIT

"$HSCM" volume create "$W/v.hscm" --size 256M --durability "$DURABILITY" >/dev/null
start_server
attach
mkfs.ext4 -q -F "$LOOP"
detach
kill -TERM $SERVER; wait $SERVER || true

WRITER_PY='
import hashlib, os, sys
mnt, rnd = sys.argv[1], sys.argv[2]
d = os.path.join(mnt, "r" + rnd)
os.makedirs(d, exist_ok=True)
fd = os.open(mnt, os.O_RDONLY); os.fsync(fd); os.close(fd)
i = 0
while True:
    i += 1
    data = os.urandom(4096 * (1 + i % 16))
    p = os.path.join(d, "f%d" % i)
    with open(p, "wb") as f:
        f.write(data); f.flush(); os.fsync(f.fileno())
    fd = os.open(d, os.O_RDONLY); os.fsync(fd); os.close(fd)
    print(p, hashlib.sha256(data).hexdigest(), flush=True)
'
total=0
for round in $(seq 1 "$ROUNDS"); do
  start_server
  attach
  mount "$LOOP" "$MNT"
  python3 -c "$WRITER_PY" "$MNT" "$round" > "$W/acks" 2>/dev/null & WRITER=$!
  sleep "0.$(( 3 + round % 5 ))"
  kill -9 $SERVER; wait $SERVER 2>/dev/null || true
  kill -9 $WRITER 2>/dev/null || true; wait $WRITER 2>/dev/null || true; WRITER=""
  detach
  start_server
  attach
  mount "$LOOP" "$MNT"   # replays ext4's journal
  umount "$MNT"
  if ! e2fsck -fn "$LOOP" > "$W/fsck.log" 2>&1; then
    echo "round $round: e2fsck -fn found problems:" >&2; cat "$W/fsck.log" >&2; exit 1
  fi
  mount -o ro "$LOOP" "$MNT"
  n=0
  while read -r path sum; do
    got=$(sha256sum "$path" 2>/dev/null | cut -d" " -f1 || true)
    if [ "$got" != "$sum" ]; then echo "round $round: $path lost or changed" >&2; exit 1; fi
    n=$((n + 1))
  done < "$W/acks"
  total=$((total + n))
  umount "$MNT"
  detach
  kill -TERM $SERVER; wait $SERVER || true
  echo "round $round: e2fsck clean, $n fsync'ed files intact"
done
echo "{\"rounds\": $ROUNDS, \"durability\": \"$DURABILITY\", \"fsynced_files_checked\": $total, \"lost\": 0}"

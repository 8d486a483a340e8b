#!/usr/bin/env bash
# How soon `hscm mount` of a large volume serves its first file correctly, while the
# volume still warms: creates a volume with a file system (default 8G), fills half of
# it with files, writes a marked file last, unmounts, drops the page cache (when
# root), then times from the start of `hscm mount` to the first read of the marked
# file that returns its contents (retried every 20 ms). Prints one JSON line.
#
#   bash scripts/fs/first-read.sh [SIZE] [DIR]
set -euo pipefail
cd "$(dirname "$0")/../.."
SIZE=${1:-8G}
DIR=$(mktemp -d "${2:-${TMPDIR:-/tmp}}/hscm-fs-first-read.XXXXXX")
MNT="$DIR/mnt"
cleanup() {
  fusermount3 -uz "$MNT" 2>/dev/null || true
  rm -rf "$DIR"
}
trap cleanup EXIT
HSCM=${HSCM:-target/release/hscm}
[ -x "$HSCM" ] || cargo build --release -q -p hscm-cli
mkdir "$MNT"
"$HSCM" volume create "$DIR/v.hscm" --size "$SIZE" --fs >/dev/null
"$HSCM" mount "$DIR/v.hscm" "$MNT" --durability on-flush >/dev/null
# Half the volume in 64 MiB files, so the marked file's blocks lie late and cold.
BYTES=$(( $(stat -f -c '%b' "$MNT") * $(stat -f -c '%S' "$MNT") ))
for i in $(seq 1 $(( BYTES / 2 / (64 << 20) ))); do
  head -c $((64 << 20)) /dev/urandom > "$MNT/fill$i"
done
head -c $((1 << 20)) /dev/urandom > "$DIR/marked"
cp "$DIR/marked" "$MNT/marked"
"$HSCM" umount "$MNT" >/dev/null
sync
if [ "$(id -u)" -eq 0 ]; then echo 3 > /proc/sys/vm/drop_caches; fi
START=$(date +%s%N)
"$HSCM" mount "$DIR/v.hscm" "$MNT" >/dev/null
until cmp -s "$DIR/marked" "$MNT/marked"; do
  sleep 0.02
done
END=$(date +%s%N)
"$HSCM" umount "$MNT" >/dev/null
echo "{\"size\": \"$SIZE\", \"first_file_read_ms\": $(( (END - START) / 1000000 ))}"

#!/usr/bin/env bash
# A long fsx run against `hscm mount`: RUNS runs of OPS operations each (default
# 10 x 100,000 = 1,000,000), seeds 101, 102, …, on one on-flush mount, served as
# `hscm mount` serves it (as root: FUSE passthrough, reads, writes and mmap in the
# file's RAM, home at fsync and close; HSCM_MOUNT_FLAGS=--no-passthrough for the
# classic path, the kernel's writeback cache on), with scripts/fs/fsx.toml (mmap
# reads and writes, truncate, fallocate, punch hole, copy_file_range, fsync).
#
# Why several processes: fsx 0.3.2 maps the file for each mmap read and never unmaps
# it, so one process gains a mapping per mmap read; its msync and munmap then walk
# them all (it grows slower and slower), and it dies at vm.max_map_count. Each run
# starts clean.
#
#   bash scripts/fs/fsx-long.sh [RUNS] [OPS] [DIR]
set -euo pipefail
cd "$(dirname "$0")/../.."
RUNS=${1:-10}
OPS=${2:-100000}
DIR=$(mktemp -d "${3:-${TMPDIR:-/tmp}}/hscm-fsx-long.XXXXXX")
MNT="$DIR/mnt"
cleanup() {
  "$HSCM" umount "$MNT" >/dev/null 2>&1 || fusermount3 -uz "$MNT" 2>/dev/null || true
  rm -rf "$DIR"
}
HSCM=${HSCM:-target/release/hscm}
trap cleanup EXIT
[ -x "$HSCM" ] || cargo build --release -q -p hscm-cli
command -v fsx >/dev/null || { echo "fsx is not installed: run scripts/setup.sh" >&2; exit 1; }
mkdir "$MNT" "$DIR/log"
"$HSCM" volume create "$DIR/v.hscm" --size 1G --fs >/dev/null
"$HSCM" mount "$DIR/v.hscm" "$MNT" --durability on-flush ${HSCM_MOUNT_FLAGS:-} >/dev/null
for run in $(seq 1 "$RUNS"); do
  seed=$((100 + run))
  rm -f "$MNT/fsx"
  start=$(date +%s)
  if ! fsx -f scripts/fs/fsx.toml -N "$OPS" -S "$seed" -q -P "$DIR/log" "$MNT/fsx"; then
    echo "run $run (seed $seed): fsx found a difference; its logs: $DIR/log" >&2
    trap - EXIT
    exit 1
  fi
  echo "run $run of $RUNS (seed $seed): $OPS operations, no miscompare, $(( $(date +%s) - start )) s"
done
echo "$((RUNS * OPS)) operations in $RUNS runs, no miscompare"

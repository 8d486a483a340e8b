#!/usr/bin/env bash
# How background writes slow a foreground "append + fdatasync" loop on this disk: the
# measurement behind the journal's checkpoint design (docs/design.md, "Write
# throughput"). Prints the foreground sync latency alone, beside 20k/s of random 4 KiB
# writes, and beside 300 MB/s of sequential 1 MiB writes; then random-write IOPS at
# queue depth 32 (io_uring) and from 4 blocking threads.
#
# Usage: bash scripts/fio-flush-interference.sh [DIR]   (default: the current directory)
# Writes two 512 MiB scratch files in DIR and removes them.
set -euo pipefail
dir=${1:-.}
command -v fio >/dev/null || {
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq fio
}
fg="$dir/fio-fg.$$" bg="$dir/fio-bg.$$"
trap 'rm -f "$fg" "$bg"' EXIT
common=(--direct=1 --runtime=4 --time_based --size=512M)
foreground=(--name=fg --filename="$fg" --rw=write --bs=36k --fdatasync=1)

sync_line() { grep -E "^\s+sync \(usec\)" | head -1 | sed 's/^ *//'; }
iops_line() { grep -E "^\s+write: IOPS" | head -1 | sed 's/^ *//; s/,.*//'; }

echo "36 KiB append + fdatasync, alone:"
fio "${common[@]}" "${foreground[@]}" | sync_line
echo "... beside 20k/s random 4 KiB writes (io_uring, depth 8):"
fio "${common[@]}" "${foreground[@]}" \
  --name=bg --filename="$bg" --rw=randwrite --bs=4k --ioengine=io_uring --iodepth=8 --rate_iops=20000 | sync_line
echo "... beside 300 MB/s sequential 1 MiB writes (io_uring, depth 8):"
fio "${common[@]}" "${foreground[@]}" \
  --name=bg --filename="$bg" --rw=write --bs=1m --ioengine=io_uring --iodepth=8 --rate=300m | sync_line
echo "random 4 KiB writes, io_uring depth 32 / 4 blocking threads:"
fio "${common[@]}" --name=q32 --filename="$bg" --rw=randwrite --bs=4k --ioengine=io_uring --iodepth=32 | iops_line
fio "${common[@]}" --name=t4 --filename="$bg" --rw=randwrite --bs=4k --ioengine=psync --numjobs=4 --group_reporting | iops_line

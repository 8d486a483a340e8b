#!/usr/bin/env python3
"""What logging costs the flash under /var/log: device bytes written and flushes per
logged line, for hscm mount in immediate and on-flush mode, ext4, and log2ram's way (a
tmpfs, copied to ext4 at its interval), each on a loop device of its own, measured at
that device (/sys/block/loopN/stat), so every layer's writes count: the file system's
journal and metadata included.

The logging is shaped like a Debian machine's: rsyslog appends each line to
/var/log/syslog with write(2) and no fsync (its default), and journald appends a
larger record per line to its journal file and fsyncs that file at its sync point
(SyncIntervalSec, 5 minutes by default, and at once after a message of priority
CRIT or above); the run ends at one such sync point. log2ram's copy (rsync --inplace
to its disk directory, then a sync) runs once, at the end: the run is shorter than its
interval (hourly by default). Root only (loop devices, mounts).

    sudo python3 scripts/log-wear.py                 # 2,000 lines over 10 s
    sudo python3 scripts/log-wear.py --lines 500 --seconds 3 --json
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SIZE = 256 << 20

LOSES = {
    "hscm-immediate": "nothing: every write durable when it returns",
    "hscm-on-flush": "what came since the last fsync: rsyslog's lines since journald's last sync point (up to 5 min; none of CRIT and above)",
    "ext4": "rsyslog's lines not yet written back (up to ~35 s: 30 s dirty expiry plus the 5 s journal commit); journald's since its last sync point",
    "log2ram": "everything since its last copy (up to 1 hour by default), journald's synced records too",
}


def sh(*args: str) -> str:
    done = subprocess.run(list(args), text=True, capture_output=True)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(args)}: exit {done.returncode}: {done.stderr.strip()}")
    return done.stdout


def device_counts(loop: str) -> tuple[int, int]:
    """(bytes written, flush requests) of a block device so far."""
    fields = Path(f"/sys/block/{Path(loop).name}/stat").read_text().split()
    flushes = int(fields[15]) if len(fields) > 15 else 0
    return int(fields[6]) * 512, flushes


def log(dir: Path, lines: int, seconds: float) -> None:
    """Writes `lines` lines over `seconds`, as rsyslog and journald would, then
    reaches journald's sync point (fsync of its journal)."""
    (dir / "journal").mkdir(exist_ok=True)
    syslog = os.open(dir / "syslog", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o640)
    journal = os.open(dir / "journal" / "system.journal", os.O_RDWR | os.O_CREAT, 0o640)
    start = time.monotonic()
    offset = 0
    try:
        for n in range(lines):
            stamp = time.strftime("%b %d %H:%M:%S")
            line = f"{stamp} host app[{4000 + n % 7}]: request {n} served in {n % 97} ms from 10.0.0.{n % 250}\n"
            os.write(syslog, line.encode())
            # A journal entry carries the message and its fields, about twice the line.
            entry = (f"MESSAGE={line.strip()}\n_PID={4000 + n % 7}\n_COMM=app\n_HOSTNAME=host\n"
                     f"PRIORITY=6\n_BOOT_ID=0123456789abcdef0123456789abcdef\n").encode()
            os.pwrite(journal, entry, offset)
            offset += len(entry)
            wait = start + seconds * (n + 1) / lines - time.monotonic()
            if wait > 0:
                time.sleep(wait)
        os.fsync(journal)
    finally:
        os.close(syslog)
        os.close(journal)


class Loop:
    def __init__(self, scratch: Path, name: str) -> None:
        self.image = scratch / f"{name}.img"
        with open(self.image, "wb") as f:
            f.truncate(SIZE)
        self.dev = sh("losetup", "--find", "--show", str(self.image)).strip()

    def close(self) -> None:
        subprocess.run(["losetup", "-d", self.dev], check=False)


def run_target(name: str, scratch: Path, hscm: str, lines: int, seconds: float) -> dict:
    loop = Loop(scratch, name)
    at = scratch / name
    at.mkdir()
    daemon = None
    tmpfs = None
    try:
        if name.startswith("hscm"):
            mode = name.removeprefix("hscm-")
            sh(hscm, "volume", "create", loop.dev, "--size", str(SIZE - (16 << 20)), "--fs", "--force")
            daemon = subprocess.Popen([hscm, "mount", loop.dev, str(at), "--durability", mode, "--foreground"],
                                      stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
            if not daemon.stdout.readline().startswith("mounted"):
                raise RuntimeError(f"hscm mount of {loop.dev} did not say mounted")
            where = at
        else:
            # Inode tables and journal zeroed now, not by ext4lazyinit during the run.
            sh("mkfs.ext4", "-F", "-q", "-E", "lazy_itable_init=0,lazy_journal_init=0", loop.dev)
            sh("mount", loop.dev, str(at))
            where = at
            if name == "log2ram":
                tmpfs = scratch / "log2ram-ram"
                tmpfs.mkdir()
                sh("mount", "-t", "tmpfs", "-o", "size=64M", "tmpfs", str(tmpfs))
                where = tmpfs
        sh("sync")
        before = device_counts(loop.dev)
        log(where, lines, seconds)
        if name == "log2ram":
            # log2ram's copy at its interval: rsync when installed, as log2ram does.
            sh("rsync", "-aX", "--inplace", "--no-whole-file", f"{tmpfs}/", f"{at}/")
            sh("sync", "-f", str(at))
        after = device_counts(loop.dev)
    finally:
        if daemon is not None:
            subprocess.run([hscm, "umount", str(at)], check=False, capture_output=True)
            daemon.wait(timeout=60)
        else:
            if tmpfs is not None:
                subprocess.run(["umount", str(tmpfs)], check=False)
            subprocess.run(["umount", str(at)], check=False)
        loop.close()
    written, flushes = after[0] - before[0], after[1] - before[1]
    return {"fs": name, "lines": lines, "seconds": seconds, "device_bytes": written, "flushes": flushes,
            "bytes_per_line": written / lines, "flushes_per_line": flushes / lines, "loses_at_power_cut": LOSES[name]}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--lines", type=int, default=2000, help="lines logged (default 2000)")
    p.add_argument("--seconds", type=float, default=10.0, help="over how long (default 10)")
    p.add_argument("--hscm", default=str(REPO / "target/release/hscm"), help="the hscm binary")
    p.add_argument("--only", help="comma-separated: hscm-immediate,hscm-on-flush,ext4,log2ram")
    p.add_argument("--json", action="store_true", help="one JSON object per file system")
    a = p.parse_args()
    if os.geteuid() != 0:
        print("log-wear: needs root (loop devices and mounts)", file=sys.stderr)
        return 2
    if a.lines < 1 or a.seconds < 0:
        print("log-wear: --lines must be at least 1 and --seconds not negative", file=sys.stderr)
        return 2
    if not Path(a.hscm).exists():
        print(f"log-wear: no hscm binary at {a.hscm}: cargo build --release, or --hscm PATH", file=sys.stderr)
        return 2
    names = a.only.split(",") if a.only else list(LOSES)
    for n in names:
        if n not in LOSES:
            print(f"log-wear: unknown file system {n!r} in --only (one of {', '.join(LOSES)})", file=sys.stderr)
            return 2
    scratch = Path(tempfile.mkdtemp(prefix="hscm-log-wear-", dir="/var/tmp"))
    rows = []
    try:
        for n in names:
            print(f"log-wear: {n}: {a.lines} lines over {a.seconds:g} s", file=sys.stderr)
            rows.append(run_target(n, scratch, a.hscm, a.lines, a.seconds))
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    ext4 = next((r for r in rows if r["fs"] == "ext4"), None)
    for r in rows:
        r["bytes_vs_ext4"] = r["device_bytes"] / ext4["device_bytes"] if ext4 and ext4["device_bytes"] else None
    if a.json:
        for r in rows:
            print(json.dumps(r))
        return 0
    print(f"| file system | device bytes | per line | flushes | per line | vs ext4 | lost at a power cut |")
    print("|---|---:|---:|---:|---:|---:|---|")
    for r in rows:
        ratio = f"{r['bytes_vs_ext4']:.2f}x" if r["bytes_vs_ext4"] is not None else "-"
        print(f"| {r['fs']} | {r['device_bytes'] / 1024:,.0f} KiB | {r['bytes_per_line']:,.0f} B | {r['flushes']:,} | "
              f"{r['flushes_per_line']:.2f} | {ratio} | {r['loses_at_power_cut']} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""Fills a directory past what its file system holds, one way, as whoever runs it.

    fill.py DIR write|map|files [MIB]

write: one file by write(2) in 1 MiB pieces; map: one file made MIB long by
ftruncate and written through a shared mapping; files: MIB files of 1 MiB each.
Prints `ok NAME` for each file whose every write and whose close succeeded (its
bytes are pattern(NAME)), `error NAME ERRNO` for the first failure of a file.
Used by crates/hscm-cli/tests/mount_truth.rs: what was acknowledged must be there
after a remount, and nothing may succeed that is then lost.
"""
import mmap
import os
import sys

MIB = 1 << 20


def pattern(name: str, n: int) -> bytes:
    seed = sum(name.encode()) % 251
    unit = bytes((seed + k) % 251 + 1 for k in range(4096))
    return (unit * (n // len(unit) + 1))[:n]


def one_file(path: str, name: str, mib: int) -> None:
    try:
        fd = os.open(path, os.O_CREAT | os.O_WRONLY | os.O_TRUNC, 0o644)
    except OSError as e:
        print(f"error {name} {e.errno}", flush=True)
        return
    data = memoryview(pattern(name, mib * MIB))
    try:
        done = 0
        while done < len(data):
            # A write that does not fit is short; the next one says ENOSPC.
            done += os.write(fd, data[done:done + MIB])
    except OSError as e:
        print(f"error {name} {e.errno}", flush=True)
        os.close(fd)
        return
    try:
        os.close(fd)
    except OSError as e:
        print(f"error {name} {e.errno}", flush=True)
        return
    print(f"ok {name}", flush=True)


def main() -> None:
    d, how = sys.argv[1], sys.argv[2]
    mib = int(sys.argv[3]) if len(sys.argv) > 3 else 512
    if how == "write":
        one_file(f"{d}/big", "big", mib)
    elif how == "files":
        for i in range(mib):
            one_file(f"{d}/f{i}", f"f{i}", 1)
    elif how == "map":
        fd = os.open(f"{d}/mapped", os.O_CREAT | os.O_RDWR | os.O_TRUNC, 0o644)
        os.ftruncate(fd, mib * MIB)
        m = mmap.mmap(fd, mib * MIB, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
        os.close(fd)
        data = pattern("mapped", mib * MIB)
        # Past the bound: SIGBUS (a mapping of the file's RAM itself, as on
        # tmpfs), or the msync's ENOSPC (a mapping of the page cache, whose pages
        # the file system refuses when they are written back).
        for k in range(mib):
            m[k * MIB:(k + 1) * MIB] = data[k * MIB:(k + 1) * MIB]
        try:
            m.flush()
        except OSError as e:
            print(f"error mapped {e.errno}", flush=True)
            return
        m.close()
        print("ok mapped", flush=True)
    else:
        sys.exit(f"fill.py: unknown way {how!r}")


if __name__ == "__main__":
    main()

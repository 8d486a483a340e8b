#!/usr/bin/env python3
"""Installs the Debian package on this machine and starts a unit from it, as a user
would: `dpkg -i`, the installed units through `systemd-analyze verify`, then
hscm-nbd@pkgtest (socket-activated) started from the installed unit files, readiness
awaited, `hscm status` and an NBD client pointed at it, SIGTERM, `dpkg --purge`.

Where systemd is PID 1 it starts the units with systemctl. Elsewhere (CI's
containers) it does what systemd would: `systemd-socket-activate` holds the socket
the .socket unit names and runs the .service unit's ExecStart with NOTIFY_SOCKET and
WATCHDOG_USEC set. Needs root; scripts/test.sh runs it."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
UNITS = Path("/usr/lib/systemd/system")
INSTANCE = "pkgtest"
VOLUME = Path(f"/var/lib/hscm/{INSTANCE}.hscm")
CONFIG = Path(f"/etc/hscm/{INSTANCE}.toml")
# As systemd starts a system unit: no per-user runtime directory.
ENV = {k: v for k, v in os.environ.items() if k not in ("XDG_RUNTIME_DIR", "NOTIFY_SOCKET")}


def run(*args: str, **kw) -> subprocess.CompletedProcess:
    return subprocess.run(list(args), check=True, text=True, capture_output=True, env=ENV, **kw)


def fail(why: str) -> None:
    print(f"package-test: FAILED: {why}", file=sys.stderr)
    sys.exit(1)


def unit_value(unit: str, key: str) -> str:
    text = (UNITS / unit).read_text()
    m = re.search(rf"^{key}=(.*)$", text, re.M)
    if not m:
        fail(f"{unit} has no {key}=")
    return m.group(1).replace("%i", INSTANCE).replace("%I", INSTANCE)


def wait_for(what: str, ready, timeout: float = 30.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        got = ready()
        if got:
            return got
        time.sleep(0.1)
    fail(f"timed out waiting for {what}")


def notifications(sock: socket.socket, until: str, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    seen = []
    while time.monotonic() < deadline:
        try:
            msg = sock.recv(4096).decode()
        except TimeoutError:
            continue
        seen.append(msg)
        if until in msg.split("\n"):
            return
    fail(f"no {until} from the unit (got {seen})")


def mounted_at(point: Path) -> str | None:
    """The type of what /proc/mounts has at `point`, if anything."""
    for line in Path("/proc/mounts").read_text().splitlines():
        fields = line.split()
        if fields[1] == str(point):
            return fields[2]
    return None


def fstab_mount() -> None:
    """mount(8)'s way in, through the installed /usr/sbin/mount.fuse.hscm: `mount -a`
    over an fstab line of type fuse.hscm, a file written, plain `umount`, then
    `mount -t fuse.hscm` again and the file read back; a bad option fails by name."""
    if os.readlink("/usr/sbin/mount.fuse.hscm") not in ("../bin/hscm", "/usr/bin/hscm"):
        fail("/usr/sbin/mount.fuse.hscm does not lead to /usr/bin/hscm")
    tmp = Path(tempfile.mkdtemp())
    volume, point = tmp / "fstab.hscm", tmp / "mnt"
    point.mkdir()
    run("/usr/bin/hscm", "volume", "create", str(volume), "--size", "64M", "--fs")
    fstab = tmp / "fstab"
    fstab.write_text(f"{volume} {point} fuse.hscm durability=on-flush,ram=32M,nofail,x-systemd.after=local-fs.target 0 0\n")
    try:
        run("mount", "-a", "-T", str(fstab))
        if mounted_at(point) != "fuse.hscm":
            fail(f"mount -a with an fstab line of type fuse.hscm mounted nothing at {point}")
        (point / "kept").write_text("from fstab\n")
        run("umount", str(point))
        # The mount's process commits and closes the volume after the unmount.
        wait_for("the mount's process to end", lambda: subprocess.run(
            ["pgrep", "-f", f"hscm mount {volume}"], capture_output=True).returncode != 0)
        run("mount", "-t", "fuse.hscm", str(volume), str(point), "-o", "durability=immediate,ro")
        if (point / "kept").read_text() != "from fstab\n":
            fail("a file written on the fstab mount was not there after umount and mount -t fuse.hscm")
        run("/usr/bin/hscm", "umount", str(point))
        bad = subprocess.run(["mount", "-t", "fuse.hscm", str(volume), str(point), "-o", "bogus"],
                             capture_output=True, text=True, env=ENV)
        if bad.returncode == 0 or "bogus" not in bad.stderr:
            fail(f"mount -o bogus: rc {bad.returncode}, {bad.stderr!r}")
        print("package-test: mount -a (fstab), umount, mount -t fuse.hscm: ok")
    finally:
        if mounted_at(point):
            subprocess.run(["umount", "-l", str(point)], check=False)
        shutil.rmtree(tmp, ignore_errors=True)


def main() -> None:
    if os.geteuid() != 0:
        print("package-test: needs root (dpkg -i); skipped")
        return
    installed = subprocess.run(["dpkg-query", "-W", "-f=${Status}", "hscm"], capture_output=True, text=True)
    if "installed" in installed.stdout.split():
        fail("an hscm package is installed already; this test installs and removes its own")
    deb = subprocess.run(["bash", str(REPO / "scripts/package.sh"), "--debug"], check=True,
                         text=True, stdout=subprocess.PIPE).stdout.strip().splitlines()[-1]
    # Debian's policy checker, clean but for the maintainer's address, which is a
    # placeholder until the package has a maintainer with a mail host.
    policy = subprocess.run(["lintian", "--suppress-tags",
                             "bogus-mail-host,bogus-mail-host-in-debian-changelog", str(REPO / deb)],
                            capture_output=True, text=True)
    said = [line for line in policy.stdout.splitlines() if re.match(r"^[EWI]: ", line)]
    if policy.returncode != 0 or said:
        fail("lintian on the package:\n" + "\n".join(said) + policy.stderr)
    print(f"package-test: installing {deb}")
    run("dpkg", "-i", deb)
    server = None
    # The socket file systemd-socket-activate made here, removed at the end.
    our_socket = None
    try:
        for path in ["/usr/bin/hscm", "/usr/share/man/man1/hscm-nbd.1.gz",
                     "/usr/share/bash-completion/completions/hscm",
                     "/usr/share/doc/hscm/examples/hscm.toml", "/usr/share/hscm/grafana/hscm.json"]:
            if not os.path.exists(path):
                fail(f"the package did not install {path}")
        sections = run("readelf", "-S", "--wide", "/usr/bin/hscm").stdout
        if ".debug_info" in sections:
            fail("/usr/bin/hscm ships its debug symbols; they belong in hscm-dbgsym")
        ddeb = (REPO / deb).with_name(Path(deb).name.replace("hscm_", "hscm-dbgsym_")).with_suffix(".ddeb")
        debug_files = subprocess.run(["dpkg-deb", "-c", str(ddeb)], capture_output=True, text=True).stdout
        if "/usr/lib/debug/.build-id/" not in debug_files:
            fail(f"{ddeb} holds no debug symbols by build id")
        if oct(os.stat("/var/lib/hscm").st_mode & 0o777) != "0o700" or not os.path.isdir("/etc/hscm"):
            fail("postinst did not make /etc/hscm and a 0700 /var/lib/hscm")
        verify = subprocess.run(
            ["systemd-analyze", "verify", "--man=no",
             *[str(UNITS / u) for u in (f"hscm-mount@{INSTANCE}.service", f"hscm-nbd@{INSTANCE}.socket",
                                        f"hscm-nbd@{INSTANCE}.service", f"hscm-serve@{INSTANCE}.service")]],
            capture_output=True, text=True)
        if verify.returncode != 0 or verify.stderr.strip() or verify.stdout.strip():
            fail(f"systemd-analyze verify of the installed units: {verify.stderr}{verify.stdout}")
        run("/usr/bin/hscm", "config", "check", "/usr/share/doc/hscm/examples/hscm.toml")
        fstab_mount()
        run("/usr/bin/hscm", "volume", "create", str(VOLUME), "--size", "64M")
        CONFIG.write_text(f'[nbd]\nvolume = "{VOLUME}"\nmetrics = "127.0.0.1:0"\n')
        listen = unit_value("hscm-nbd@.socket", "ListenStream")
        uri = f"nbd+unix:///?socket={listen}"
        if Path("/run/systemd/system").is_dir():
            run("systemctl", "daemon-reload")
            run("systemctl", "start", f"hscm-nbd@{INSTANCE}.socket")
            run("nbdinfo", "--size", uri)  # activates the service
            wait_for("the unit to be active", lambda: subprocess.run(
                ["systemctl", "is-active", "--quiet", f"hscm-nbd@{INSTANCE}.service"]).returncode == 0)
        else:
            exec_start = unit_value("hscm-nbd@.service", "ExecStart").split()
            tmp = Path(tempfile.mkdtemp())
            notify = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
            notify.bind(str(tmp / "notify"))
            notify.settimeout(1.0)
            Path(listen).parent.mkdir(mode=0o700, parents=True, exist_ok=True)
            # A socket file an earlier run left (a listening socket's file outlives
            # it) would pass the wait below at once and refuse nbdinfo.
            Path(listen).unlink(missing_ok=True)
            our_socket = Path(listen)
            # The shell's exec keeps the PID that WATCHDOG_PID names.
            server = subprocess.Popen(
                ["systemd-socket-activate", "-l", listen,
                 "-E", f"NOTIFY_SOCKET={tmp / 'notify'}", "-E", "WATCHDOG_USEC=2000000",
                 "sh", "-c", 'WATCHDOG_PID=$$ exec "$0" "$@"', *exec_start],
                env=ENV, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
            wait_for("the socket", lambda: os.path.exists(listen))
            size = run("nbdinfo", "--size", uri).stdout.strip()
            if size != str(64 << 20):
                fail(f"nbdinfo --size: {size}")
            notifications(notify, "READY=1")
            notifications(notify, "WATCHDOG=1")
        listed = json.loads(run("/usr/bin/hscm", "status", "--json").stdout)
        mine = [s for s in listed if s["volume"] == str(VOLUME)]
        if len(mine) != 1 or mine[0]["frontend"] != "nbd" or not mine[0]["health"]["ok"]:
            fail(f"hscm status does not see the unit's export: {listed}")
        if mine[0]["clients"]["total"] < 1:
            fail(f"hscm status counts no client: {mine[0]}")
        print(f"package-test: hscm-nbd@{INSTANCE} serves {uri} (pid {mine[0]['pid']}); hscm status sees it")
        if server is not None:
            os.kill(mine[0]["pid"], signal.SIGTERM)
            notifications(notify, "STOPPING=1")
            if server.wait(60) != 0:
                fail(f"the export did not stop cleanly: {server.stderr.read()}")
            server = None
        else:
            run("systemctl", "stop", f"hscm-nbd@{INSTANCE}.service", f"hscm-nbd@{INSTANCE}.socket")
    finally:
        if server is not None and server.poll() is None:
            server.kill()
            server.wait()
        for p in (CONFIG, VOLUME):
            p.unlink(missing_ok=True)
        if our_socket is not None:
            our_socket.unlink(missing_ok=True)
        subprocess.run(["dpkg", "--purge", "hscm"], check=False, capture_output=True)
    if os.path.exists("/usr/bin/hscm"):
        fail("dpkg --purge left /usr/bin/hscm")
    print("package-test: ok (installed, served, seen by hscm status, stopped, removed)")


if __name__ == "__main__":
    main()

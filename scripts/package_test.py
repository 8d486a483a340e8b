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


def main() -> None:
    if os.geteuid() != 0:
        print("package-test: needs root (dpkg -i); skipped")
        return
    installed = subprocess.run(["dpkg-query", "-W", "-f=${Status}", "hscm"], capture_output=True, text=True)
    if "installed" in installed.stdout.split():
        fail("an hscm package is installed already; this test installs and removes its own")
    deb = subprocess.run(["bash", str(REPO / "scripts/package.sh"), "--debug"], check=True,
                         text=True, stdout=subprocess.PIPE).stdout.strip().splitlines()[-1]
    print(f"package-test: installing {deb}")
    run("dpkg", "-i", deb)
    server = None
    try:
        for path in ["/usr/bin/hscm", "/usr/share/man/man1/hscm-nbd.1.gz",
                     "/usr/share/bash-completion/completions/hscm",
                     "/usr/share/doc/hscm/examples/hscm.toml", "/usr/share/hscm/grafana/hscm.json"]:
            if not os.path.exists(path):
                fail(f"the package did not install {path}")
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
        subprocess.run(["dpkg", "--purge", "hscm"], check=False, capture_output=True)
    if os.path.exists("/usr/bin/hscm"):
        fail("dpkg --purge left /usr/bin/hscm")
    print("package-test: ok (installed, served, seen by hscm status, stopped, removed)")


if __name__ == "__main__":
    main()

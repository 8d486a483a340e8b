"""hscm as a service, driven as its users drive it: `--metrics` scraped and parsed by
Prometheus's own Python parser while clients write, checked against `hscm status
--json`; the Grafana dashboard's queries against live scrapes; the systemd units;
a mount started the way its unit starts it, stopped with SIGTERM; configuration
errors. Run by scripts/test.sh (HSCM_BIN names the binary)."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import threading
import time
import urllib.request
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

REPO = Path(__file__).resolve().parents[3]
HSCM = str(Path(os.environ.get("HSCM_BIN", REPO / "target" / "debug" / "hscm")))
CAN_MOUNT = os.geteuid() == 0 and os.path.exists("/dev/fuse")


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    """A private runtime directory: `hscm status` sees this test's instances only."""
    run = tmp_path / "run"
    run.mkdir(mode=0o700)
    e = dict(os.environ, XDG_RUNTIME_DIR=str(run))
    for var in ("NOTIFY_SOCKET", "WATCHDOG_USEC", "WATCHDOG_PID", "LISTEN_FDS", "LISTEN_PID"):
        e.pop(var, None)
    return e


def hscm(*args: str, env: dict[str, str], check: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run([HSCM, *args], env=env, capture_output=True, text=True, check=check, timeout=120)


def status_of(target: Path, env: dict[str, str]) -> dict:
    return json.loads(hscm("status", str(target), "--json", env=env).stdout)


def wait_for(what: str, ready, timeout: float = 30.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        got = ready()
        if got:
            return got
        time.sleep(0.05)
    pytest.fail(f"timed out waiting for {what}")


Samples = dict[tuple[str, tuple], float]


def scrape(url: str) -> tuple[Samples, set[str]]:
    """Every sample of one scrape, and the metric names it has. The parser raises on
    anything that is not the exposition format."""
    text = urllib.request.urlopen(url, timeout=10).read().decode()
    samples: Samples = {}
    names: set[str] = set()
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            samples[(s.name, tuple(sorted(s.labels.items())))] = s.value
            names.add(s.name)
    return samples, names


def counters(st: dict) -> dict[tuple[str, tuple], float]:
    """What `hscm status --json` says of the counters the metrics export."""
    out = {
        ("hscm_device_writes_total", ()): st["device"]["writes"],
        ("hscm_device_written_bytes_total", ()): st["device"]["written_bytes"],
        ("hscm_device_syncs_total", ()): st["device"]["syncs"],
        ("hscm_device_reads_total", ()): st["device"]["reads"],
        ("hscm_clients_total", ()): st["clients"]["total"],
    }
    for op in st["ops"]:
        labels = (("op", op["op"]),)
        out[("hscm_operations_total", labels)] = op["count"]
        out[("hscm_operation_bytes_total", labels)] = op["bytes"]
        out[("hscm_operation_errors_total", labels)] = op["errors"]
        out[("hscm_operation_duration_seconds_count", labels)] = sum(op["latency_buckets"])
    for kind, n in st["errors"].items():
        out[("hscm_errors_total", (("kind", kind),))] = n
    for t in st["tiers"]:
        labels = (("tier", t["tier"]),)
        out[("hscm_tier_hits_total", labels)] = t["hits"]
        out[("hscm_tier_misses_total", labels)] = t["misses"]
    return out


def check_agreement(url: str, target: Path, env: dict[str, str], busy: bool) -> set[str]:
    """Scrape, status, scrape: every counter in the status lies between the two
    scrapes (equal to both when nothing moves). Returns the metric names seen."""
    before, names = scrape(url)
    st = status_of(target, env)
    after, _ = scrape(url)
    for key, value in counters(st).items():
        assert key in before, f"{key} is in hscm status but not in the metrics"
        assert before[key] <= value <= after[key], f"{key}: {before[key]} <= {value} <= {after[key]}"
        if not busy:
            assert before[key] == after[key], f"{key} moved while idle"
    if busy:
        ops = {o["op"]: o["count"] for o in st["ops"]}
        assert sum(ops.values()) > 0, f"no requests counted under load: {st['ops']}"
    return names


class Load:
    """A client writing in a loop until stopped."""

    def __init__(self, step) -> None:
        self.stop = threading.Event()
        self.rounds = 0
        self.error: BaseException | None = None

        def run() -> None:
            try:
                while not self.stop.is_set():
                    step(self.rounds)
                    self.rounds += 1
            except BaseException as e:  # reported by finish()
                self.error = e

        self.thread = threading.Thread(target=run, daemon=True)
        self.thread.start()

    def finish(self) -> None:
        self.stop.set()
        self.thread.join(60)
        assert self.error is None, self.error
        assert self.rounds > 0


def start_nbd(volume: Path, sock: Path, env: dict[str, str], *extra: str) -> subprocess.Popen:
    p = subprocess.Popen(
        [HSCM, "nbd", str(volume), "--socket", str(sock), "--metrics", "127.0.0.1:0", *extra],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    uri = p.stdout.readline().strip()
    assert uri.startswith("nbd+unix://"), p.stderr.read()
    return p


def stop(p: subprocess.Popen) -> None:
    p.send_signal(signal.SIGTERM)
    assert p.wait(60) == 0, p.stderr.read() if p.stderr else ""


def nbd_load(tmp_path: Path, sock: Path) -> Load:
    src = tmp_path / "src.img"
    src.write_bytes(os.urandom(4 << 20))
    uri = f"nbd+unix:///?socket={sock}"
    return Load(lambda _: subprocess.run(["nbdcopy", "--flush", str(src), uri], check=True, timeout=60))


def nbd_families(tmp_path: Path, env: dict[str, str], kind: str) -> set[str]:
    """Serves a volume of `kind` (journal: flat with a journal; write-back: flat in
    write-back mode; tiered) and checks its metrics under load."""
    tiered = kind == "tiered"
    volume = tmp_path / f"{kind}.hscm"
    create = ["volume", "create", str(volume), "--size", "64M"]
    create += {"tiered": ["--ram", "8M"], "journal": ["--journal", "4M"], "write-back": []}[kind]
    hscm(*create, env=env)
    sock = tmp_path / "nbd.sock"
    server = start_nbd(volume, sock, env, *(["--durability", "write-back"] if kind == "write-back" else []))
    try:
        st = wait_for("the status socket", lambda: hscm("status", str(volume), "--json", env=env, check=False).returncode == 0 and status_of(volume, env))
        assert st["frontend"] == "nbd" and st["kind"] == ("tiered" if tiered else "flat")
        assert st["health"] == {"ok": True, "reason": None}
        url = st["metrics_address"]
        load = nbd_load(tmp_path, sock)
        wait_for("requests under load", lambda: load.rounds > 0)
        names = check_agreement(url, volume, env, busy=True)
        load.finish()
        check_agreement(url, volume, env, busy=False)
        st = status_of(volume, env)
        writes = next(o for o in st["ops"] if o["op"] == "write")
        assert writes["bytes"] >= load.rounds * (4 << 20)
        assert st["device"]["writes"] > 0 and st["device"]["syncs"] > 0
        if tiered:
            assert [t["tier"] for t in st["tiers"]] == ["dram"]
        elif kind == "journal":
            assert st["journal"]["size_bytes"] > 0
            assert st["device"]["written_bytes"] >= writes["bytes"]
        else:
            assert st["durability"] == "write-back" and st["dirty_max_bytes"] > 0
        listed = json.loads(hscm("status", "--json", env=env).stdout)
        assert [s["volume"] for s in listed if s["pid"] == server.pid] == [str(volume)]
    finally:
        stop(server)
    # Gone from the listing once stopped.
    assert server.pid not in [s["pid"] for s in json.loads(hscm("status", "--json", env=env).stdout)]
    return names


_seen: dict[str, set[str]] = {}


@pytest.mark.parametrize("kind", ["journal", "write-back", "tiered"])
def test_nbd_metrics_parse_and_agree_with_status_under_load(tmp_path: Path, env: dict[str, str], kind: str) -> None:
    _seen[kind] = nbd_families(tmp_path, env, kind)


def test_the_shared_memory_server_is_listed_and_scraped(tmp_path: Path, env: dict[str, str]) -> None:
    volume = tmp_path / "shm.hscm"
    hscm("volume", "create", str(volume), "--size", "16M", env=env)
    name = f"hscm-test-{os.getpid()}"
    server = subprocess.Popen([HSCM, "serve", str(volume), "--shm", name, "--metrics", "127.0.0.1:0"],
                              env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        st = wait_for("the status socket", lambda: hscm("status", str(volume), "--json", env=env, check=False).returncode == 0 and status_of(volume, env))
        assert st["frontend"] == "serve" and st["kind"] == "flat" and st["address"].endswith(f"{name}.sock")
        assert [o["op"] for o in st["ops"]] == ["read", "write", "flush", "discard", "write_zeroes"]
        check_agreement(st["metrics_address"], volume, env, busy=False)
    finally:
        stop(server)


@pytest.mark.skipif(not CAN_MOUNT, reason="mounting needs root and /dev/fuse")
def test_mount_metrics_parse_and_agree_with_status_under_load(tmp_path: Path, env: dict[str, str]) -> None:
    volume, mnt = tmp_path / "fs.hscm", tmp_path / "mnt"
    mnt.mkdir()
    hscm("volume", "create", str(volume), "--size", "64M", "--fs", env=env)
    hscm("mount", str(volume), str(mnt), "--metrics", "127.0.0.1:0", env=env)
    try:
        st = status_of(mnt, env)
        assert st["frontend"] == "mount" and st["kind"] == "fs"
        url = st["metrics_address"]

        def write(i: int) -> None:
            path = mnt / f"f{i % 8}"
            with open(path, "wb") as f:
                f.write(os.urandom(256 << 10))
                os.fsync(f.fileno())

        load = Load(write)
        wait_for("writes under load", lambda: load.rounds > 0)
        names = check_agreement(url, mnt, env, busy=True)
        load.finish()
        check_agreement(url, mnt, env, busy=False)
        st = status_of(mnt, env)
        fs = st["fs"]
        assert 0 < fs["free_bytes"] < fs["size_bytes"] and fs["files"] > fs["free_files"]
        assert st["used_bytes"] > 0
        assert st["device"]["written_bytes"] > 0 and st["device"]["syncs"] > 0
        _seen["mount"] = names
    finally:
        hscm("umount", str(mnt), env=env)


def test_every_dashboard_query_names_a_metric_a_live_scrape_has() -> None:
    if not {"journal", "write-back", "tiered"} <= set(_seen):
        pytest.skip("needs the NBD scrapes of this module")
    if CAN_MOUNT and "mount" not in _seen:
        pytest.fail("the mount's scrape did not run")
    live = set().union(*_seen.values())
    dashboard = json.loads((REPO / "dist" / "grafana" / "hscm.json").read_text())
    exprs = [t["expr"] for p in dashboard["panels"] for t in p["targets"]]
    assert exprs
    missing = set()
    for expr in exprs:
        for name in re.findall(r"\bhscm_[a-z_]+", expr):
            if name not in live:
                missing.add(name)
    # The file-system panels need the mount's scrape.
    if not CAN_MOUNT:
        missing = {m for m in missing if not m.startswith("hscm_fs_") and m != "hscm_volume_used_bytes"}
    assert not missing, f"the dashboard asks for metrics no scrape has: {sorted(missing)}"


def test_the_units_pass_systemd_analyze_verify(tmp_path: Path) -> None:
    analyze = shutil.which("systemd-analyze")
    assert analyze, "systemd-analyze is missing (scripts/setup.sh installs systemd)"
    units = REPO / "dist" / "systemd"
    for unit in units.iterdir():
        # The binary the units name must exist for verify: this build's.
        text = unit.read_text().replace("/usr/bin/hscm", HSCM)
        (tmp_path / unit.name).write_text(text)
    instances = ["hscm-mount@log.service", "hscm-nbd@disk.socket", "hscm-nbd@disk.service", "hscm-serve@shm.service"]
    assert {u.replace("@log", "@").replace("@disk", "@").replace("@shm", "@") for u in instances} == {u.name for u in units.iterdir()}
    r = subprocess.run([analyze, "verify", "--man=no", *[str(tmp_path / u) for u in instances]], capture_output=True, text=True)
    # verify reports unknown keys and bad values as warnings with status 0: any
    # output is a failure.
    assert r.returncode == 0 and not r.stderr.strip() and not r.stdout.strip(), r.stderr + r.stdout


def notify_socket(tmp_path: Path) -> tuple[socket.socket, str]:
    path = str(tmp_path / "notify.sock")
    s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    s.bind(path)
    s.settimeout(1.0)
    return s, path


def messages(s: socket.socket, until: str, timeout: float = 30.0) -> list[str]:
    """Datagrams until one holds `until`."""
    got: list[str] = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            got.append(s.recv(4096).decode())
        except TimeoutError:
            continue
        if any(until in m.split("\n") for m in got[-1:]):
            return got
    pytest.fail(f"no {until} from the service manager's point of view; got {got}")


@pytest.mark.skipif(not CAN_MOUNT, reason="mounting needs root and /dev/fuse")
def test_a_mount_started_like_its_unit_is_ready_watched_and_stops_cleanly_on_sigterm(tmp_path: Path, env: dict[str, str]) -> None:
    volume, mnt = tmp_path / "log.hscm", tmp_path / "log"
    mnt.mkdir()
    hscm("volume", "create", str(volume), "--size", "64M", "--fs", env=env)
    config = tmp_path / "log.toml"
    config.write_text(f'[mount]\nvolume = "{volume}"\nmountpoint = "{mnt}"\ndurability = "immediate"\n')
    notify, path = notify_socket(tmp_path)
    unit_env = dict(env, NOTIFY_SOCKET=path, WATCHDOG_USEC="400000")
    # As hscm-mount@.service's ExecStart; systemd names the watched process, which the
    # shell's exec keeps.
    p = subprocess.Popen(["sh", "-c", 'WATCHDOG_PID=$$ exec "$0" "$@"', HSCM, "mount", "--foreground", "--config", str(config)], env=unit_env,
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        got = messages(notify, "READY=1")
        assert os.path.ismount(mnt)
        files = {f"app{i}.log": os.urandom(1000 + 4096 * i) for i in range(20)}
        for name, data in files.items():
            (mnt / name).write_bytes(data)
        (mnt / "app0.log").rename(mnt / "app0.log.1")
        files["app0.log.1"] = files.pop("app0.log")
        got += messages(notify, "WATCHDOG=1")
        p.send_signal(signal.SIGTERM)
        got += messages(notify, "STOPPING=1")
        assert p.wait(60) == 0, p.stderr.read()
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
            subprocess.run(["umount", "-l", str(mnt)], check=False)
    assert not os.path.ismount(mnt)
    # Reopened, everything acknowledged is there.
    hscm("mount", str(volume), str(mnt), env=env)
    try:
        assert sorted(os.listdir(mnt)) == sorted(files)
        for name, data in files.items():
            assert (mnt / name).read_bytes() == data, name
    finally:
        hscm("umount", str(mnt), env=env)


def test_a_bad_configuration_is_an_error_naming_the_file_line_and_key(tmp_path: Path, env: dict[str, str]) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text('[nbd]\nvolume = "/nonexistent"\nworkerz = 4\n')
    for args in (["config", "check", str(bad)], ["nbd", "--config", str(bad)]):
        r = hscm(*args, env=env, check=False)
        assert r.returncode == 1, r
        assert f"{bad}:3:1: unknown key `workerz` in [nbd]" in r.stderr, r.stderr
    bad.write_text('[nbd]\ndirty-max = "lots"\n')
    r = hscm("config", "check", str(bad), env=env, check=False)
    assert r.returncode == 1 and f"{bad}:2:1: `dirty-max`" in r.stderr, r.stderr
    bad.write_text('[mount\nvolume = 1\n')
    r = hscm("config", "check", str(bad), env=env, check=False)
    assert r.returncode == 1 and f"{bad}:1:" in r.stderr and "not valid TOML" in r.stderr, r.stderr
    good = REPO / "dist" / "config" / "example.toml"
    r = hscm("config", "check", str(good), "--json", env=env)
    assert json.loads(r.stdout) == {"file": str(good), "ok": True, "sections": ["mount", "nbd", "serve"]}

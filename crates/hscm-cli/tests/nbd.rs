//! `hscm nbd` against real NBD clients (libnbd's nbdinfo, nbdcopy and nbdsh, qemu-io),
//! installed by scripts/setup.sh: what they write reads back, across a restart too.

use crate::util;

use std::path::Path;
use std::process::{Child, Command, Stdio};

use util::{fs_volume, hscm, run, signal, spawn_until_line, text};

/// A real client tool, or a failure that says how to get it.
fn tool(name: &str) -> Command {
    assert!(
        hscm_lab::installed(name),
        "{name} is not installed: run scripts/setup.sh"
    );
    Command::new(name)
}

/// `hscm nbd VOLUME --socket SOCKET ARGS` as a child, and the URI it printed.
fn serve(volume: &Path, socket: &Path, args: &[&str]) -> (Child, String) {
    let mut cmd = hscm();
    cmd.arg("nbd")
        .arg(volume)
        .arg("--socket")
        .arg(socket)
        .args(args);
    spawn_until_line(&mut cmd, "nbd+unix:///")
}

fn stop(mut child: Child) {
    signal(child.id(), 15);
    let status = child.wait().unwrap();
    assert!(status.success(), "hscm nbd ended with {status}");
}

fn ok(cmd: &mut Command) -> String {
    let o = cmd.output().unwrap();
    assert!(o.status.success(), "{cmd:?}: {}", text(&o));
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// qemu-io's commands `cmds` on the export at `uri` (read-only with `read_only`); any
/// failed pattern check fails the test.
fn qemu_io(uri: &str, read_only: bool, cmds: &[&str]) {
    let mut c = tool("qemu-io");
    c.args(["-f", "raw"]);
    if read_only {
        c.arg("-r");
    }
    c.arg(uri);
    for cmd in cmds {
        c.args(["-c", cmd]);
    }
    let out = ok(&mut c);
    assert!(!out.contains("fail"), "{out}");
}

fn volume(dir: &Path, durability: &str) -> std::path::PathBuf {
    util::volume_with(dir, "32M", durability, &[])
}

#[test]
fn nbdinfo_sees_every_capability_the_volume_has() {
    let dir = tempfile::tempdir().unwrap();
    let v = volume(dir.path(), "on-flush");
    let (server, uri) = serve(&v, &dir.path().join("s.sock"), &[]);
    let info: serde_json::Value =
        serde_json::from_str(&ok(tool("nbdinfo").arg("--json").arg(&uri))).unwrap();
    let export = &info["exports"][0];
    assert_eq!(export["export-size"], 32 << 20);
    for cap in [
        "can_flush",
        "can_fua",
        "can_multi_conn",
        "can_trim",
        "can_zero",
        "can_cache",
    ] {
        assert_eq!(export[cap], true, "{cap} in {export}");
    }
    assert_eq!(export["is_read_only"], false);
    assert_eq!(export["block_size_minimum"], 1);
    assert_eq!(export["block_size_preferred"], 4096);
    assert_eq!(info["protocol"], "newstyle-fixed");
    assert!(export["contexts"]
        .as_array()
        .unwrap()
        .iter()
        .any(|c| c == "base:allocation"));
    stop(server);
}

#[test]
fn qemu_io_patterns_and_an_nbdcopy_round_trip_survive_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let v = volume(dir.path(), "immediate");
    let sock = dir.path().join("s.sock");
    let (server, uri) = serve(&v, &sock, &[]);
    qemu_io(
        &uri,
        false,
        &[
            "write -P 0xab 0 1M",
            "write -P 0xcd 3M 64k",
            "write -P 0x11 5000 3000", // unaligned
            "write -z 8M 1M",
            "discard 9M 64k",
        ],
    );
    let src = dir.path().join("src.bin");
    let data: Vec<u8> = (0..4u32 << 20)
        .map(|i| (i.wrapping_mul(2654435761) >> 24) as u8)
        .collect();
    std::fs::write(&src, &data).unwrap();
    stop(server);

    // After a clean stop and a restart, everything acknowledged is there.
    let (server, uri) = serve(&v, &sock, &[]);
    qemu_io(
        &uri,
        true,
        &[
            "read -P 0xab 0 4096",
            "read -P 0x11 5000 3000",
            "read -P 0xab 8000 1040384",
            "read -P 0xcd 3M 64k",
            "read -P 0 8M 1M",
            "read -P 0 9M 64k",
        ],
    );

    // nbdcopy both ways, compared byte for byte.
    let big = dir.path().join("big.hscm");
    let o = run(&["volume", "create", big.to_str().unwrap(), "--size", "4M"]);
    assert!(o.status.success(), "{}", text(&o));
    stop(server);
    let (server, uri) = serve(&big, &dir.path().join("b.sock"), &[]);
    ok(tool("nbdcopy").arg(&src).arg(&uri));
    let back = dir.path().join("back.bin");
    ok(tool("nbdcopy").arg(&uri).arg(&back));
    assert!(
        std::fs::read(&back).unwrap() == data,
        "nbdcopy round trip differs"
    );
    stop(server);
}

#[test]
fn nbdsh_drives_zero_trim_flush_and_block_status() {
    let dir = tempfile::tempdir().unwrap();
    let v = volume(dir.path(), "on-flush");
    let (server, uri) = serve(&v, &dir.path().join("s.sock"), &[]);
    let script = format!(
        r#"
import nbd
h = nbd.NBD()
h.add_meta_context(nbd.CONTEXT_BASE_ALLOCATION)
h.connect_uri({uri:?})
assert h.can_meta_context(nbd.CONTEXT_BASE_ALLOCATION)
h.pwrite(b"\x5a" * 65536, 65536, nbd.CMD_FLAG_FUA)
assert h.pread(65536, 65536) == b"\x5a" * 65536
h.zero(4096, 65536 + 4096, nbd.CMD_FLAG_NO_HOLE)
h.trim(4096, 65536 + 8192)
h.flush()
# Zeroed [69632, 73728), trimmed [73728, 77824): 8 KiB of zeroes inside the data.
assert h.pread(65536, 65536) == b"\x5a" * 4096 + b"\0" * 8192 + b"\x5a" * (65536 - 12288)
runs = []
def got(ctx, offset, entries, err):
    runs.extend(entries)
h.block_status(4 * 65536, 0, got)
Z = nbd.STATE_ZERO
assert runs == [65536, Z, 4096, 0, 8192, Z, 53248, 0, 131072, Z], runs
runs.clear()
h.block_status(65536, 65536, got)
assert runs == [4096, 0, 8192, Z, 53248, 0], runs
h.cache(65536, 0)
try:
    h.pread(16, (32 << 20) - 8)
    raise SystemExit("a read past the end succeeded")
except nbd.Error as e:
    assert e.errnum in (22,), e
h.shutdown()
print("ok")
"#
    );
    // nbdsh is Debian's python3-libnbd: run its module with the system Python, which
    // has it, whatever python3 comes first on PATH.
    tool("nbdsh");
    let out = ok(Command::new("/usr/bin/python3").arg("-c").arg(&script));
    assert!(out.contains("ok"), "{out}");
    stop(server);
}

/// A volume made with `--fs` serves its blocks over NBD too (for a backup or an
/// inspection): the export starts with the file system's superblock.
#[test]
fn a_file_system_volume_is_exported_as_its_blocks() {
    let dir = tempfile::tempdir().unwrap();
    let v = fs_volume(dir.path(), "16M", "immediate");
    let sock = dir.path().join("s.sock");
    let (server, uri) = serve(&v, &sock, &["--read-only"]);
    let script = format!(
        r#"
import nbd
h = nbd.NBD()
h.connect_uri("{uri}")
assert h.get_size() == 16 << 20, h.get_size()
assert h.pread(6, 0) == b"HSCMFS", h.pread(6, 0)
h.shutdown()
print("ok")
"#
    );
    tool("nbdsh");
    let out = ok(Command::new("/usr/bin/python3").arg("-c").arg(&script));
    assert!(out.contains("ok"), "{out}");
    stop(server);
}

#[test]
fn libnbd_tools_start_it_themselves_by_socket_activation() {
    let dir = tempfile::tempdir().unwrap();
    let v = volume(dir.path(), "immediate");
    let out = ok(tool("nbdinfo")
        .arg("--size")
        .arg("--")
        .arg("[")
        .arg(env!("CARGO_BIN_EXE_hscm"))
        .arg("nbd")
        .arg(&v)
        .arg("]"));
    assert_eq!(out.trim(), (32u64 << 20).to_string());
}

#[test]
fn a_read_only_export_refuses_a_write() {
    let dir = tempfile::tempdir().unwrap();
    let v = volume(dir.path(), "immediate");
    let (server, uri) = serve(&v, &dir.path().join("s.sock"), &["--read-only"]);
    let o = tool("qemu-io")
        .args(["-f", "raw", &uri, "-c", "write 0 4k"])
        .output()
        .unwrap();
    assert!(
        !o.status.success() || text(&o).contains("fail") || text(&o).contains("read-only"),
        "{}",
        text(&o)
    );
    stop(server);
}

#[test]
fn bench_nbd_json_contract() {
    tool("fio");
    tool("nbdkit");
    let dir = tempfile::tempdir().unwrap();
    let o = run(&[
        "bench",
        "nbd",
        "--seconds",
        "0.1",
        "--size",
        "4M",
        "--dir",
        dir.path().to_str().unwrap(),
        "--json",
    ]);
    assert!(o.status.success(), "{}", text(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let rows = v["rows"].as_array().unwrap();
    for r in rows {
        for field in [
            "workload",
            "bs",
            "qd",
            "jobs",
            "target",
            "durability",
            "iops",
            "p50_us",
            "p99_us",
        ] {
            assert!(r.get(field).is_some(), "{field} missing from {r}");
        }
        assert!(r["iops"].as_f64().unwrap() > 0.0, "{r}");
    }
    for target in ["hscm", "nbdkit-memory", "nbdkit-file", "nbdkit-file-fua"] {
        assert!(
            rows.iter().any(|r| r["target"] == target),
            "{target} did not run"
        );
    }
    let ratios = v["ratios"].as_object().unwrap();
    assert!(ratios.contains_key("randread qd1x1 hscm-on-flush/nbdkit-memory"));
    assert!(ratios.contains_key("randwrite qd1x1 hscm-immediate/nbdkit-file-fua"));
    assert!(ratios.contains_key("randwrite qd16x4 hscm-write-back/nbdkit-memory"));
    assert!(ratios.contains_key("randrw qd1x1 hscm-write-back/nbdkit-memory"));
    let flush = v["flush"].as_array().unwrap();
    let patterns: Vec<&str> = flush
        .iter()
        .map(|r| r["pattern"].as_str().unwrap())
        .collect();
    assert_eq!(patterns, ["sequential-1m", "random-4k"]);
    for r in flush {
        // A quarter of the 4 MiB export is dirty before each flush.
        assert_eq!(r["dirty_bytes"], 1 << 20, "{r}");
        for field in [
            "flush_ms",
            "device_write_ms",
            "device_sync_ms",
            "flush_vs_device",
            "device_random_ms",
        ] {
            assert!(r[field].as_f64().unwrap() > 0.0, "{field} in {r}");
        }
        assert!(r["home_runs"].as_u64().unwrap() > 0, "{r}");
    }
    assert!(
        util::entries(dir.path()).is_empty(),
        "scratch data left behind"
    );
}

/// A libnbd client (Debian's python3-libnbd) that writes stamped 4 KiB blocks at
/// random offsets until it is stopped, printing what the server acknowledged: in
/// immediate mode every write as it returns, in on-flush and write-back mode each
/// batch once the FLUSH after it returns.
const WRITER: &str = r#"
import nbd, random, sys
uri, seed, mode = sys.argv[1], int(sys.argv[2]), sys.argv[3]
h = nbd.NBD()
h.connect_uri(uri)
blocks = h.get_size() // 4096
rng = random.Random(seed)
seq = 0
batch = []
while True:
    seq += 1
    b = rng.randrange(blocks)
    stamp = ("%d:%d:%d;" % (seed, b, seq)).encode()
    h.pwrite((stamp * (4096 // len(stamp) + 1))[:4096], b * 4096)
    if mode == "immediate":
        print(b, seq, flush=True)
    else:
        batch.append((b, seq))
        if len(batch) == 8:
            h.flush()
            for b, s in batch:
                print(b, s, flush=True)
            batch = []
"#;

/// Every block whose last acknowledged write is known must hold that write (or a
/// later one that was in flight when the server died).
const VERIFIER: &str = r#"
import nbd, sys
uri, seed = sys.argv[1], int(sys.argv[2])
acked = {}
for line in open(sys.argv[3]):
    parts = line.split()
    if len(parts) == 2:
        acked[int(parts[0])] = int(parts[1])
h = nbd.NBD()
h.connect_uri(uri)
bad = 0
for b, seq in acked.items():
    data = h.pread(4096, b * 4096)
    head = data[: data.index(b";") if b";" in data else 0].decode(errors="replace")
    try:
        s, blk, got = (int(x) for x in head.split(":"))
    except ValueError:
        s, blk, got = -1, -1, -1
    if s != seed or blk != b or got < seq:
        bad += 1
        print("block", b, "wants >=", seq, "has", head, file=sys.stderr)
print(len(acked), bad)
"#;

fn kill_loop(durability: &str, rounds: u64) {
    let dir = tempfile::tempdir().unwrap();
    let v = volume(dir.path(), durability);
    kill_loop_on(dir.path(), &v, durability, rounds);
}

fn kill_loop_on(dir: &Path, v: &Path, durability: &str, rounds: u64) {
    tool("nbdsh");
    let v = v.to_path_buf();
    let sock = dir.join("s.sock");
    let mut total_acked = 0;
    for round in 0..rounds {
        let (mut server, uri) = serve(&v, &sock, &[]);
        let acks = dir.join(format!("acks-{round}.txt"));
        let seed = round + 1;
        let mut writer = Command::new("/usr/bin/python3")
            .args(["-c", WRITER, &uri, &seed.to_string(), durability])
            .stdout(std::fs::File::create(&acks).unwrap())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        // Let it write for a while, then pull the plug on the server.
        let ms = 150 + (round * 37) % 250;
        std::thread::sleep(std::time::Duration::from_millis(ms));
        signal(server.id(), 9);
        let _ = server.wait();
        let _ = writer.wait();
        let (server, uri) = serve(&v, &sock, &[]);
        let out = ok(Command::new("/usr/bin/python3").args([
            "-c",
            VERIFIER,
            &uri,
            &seed.to_string(),
            acks.to_str().unwrap(),
        ]));
        let mut it = out.split_whitespace().map(|x| x.parse::<u64>().unwrap());
        let (acked, bad) = (it.next().unwrap(), it.next().unwrap());
        assert_eq!(
            bad, 0,
            "round {round}: {bad} of {acked} acknowledged blocks lost"
        );
        total_acked += acked;
        stop(server);
    }
    assert!(
        total_acked > rounds * 10,
        "the writer hardly wrote ({total_acked})"
    );
}

#[test]
fn kill_9_loses_no_acknowledged_write_in_immediate_mode() {
    kill_loop("immediate", 20);
}

#[test]
fn kill_9_loses_nothing_flushed_in_on_flush_mode() {
    kill_loop("on-flush", 20);
}

/// Write-back: the server acknowledges writes from RAM; a kill -9 may lose what no
/// FLUSH covered, never what one did.
#[test]
fn kill_9_loses_nothing_flushed_in_write_back_mode() {
    kill_loop("write-back", 20);
}

#[test]
fn fio_verifies_its_crc32c_blocks_before_and_after_a_kill_9() {
    let dir = tempfile::tempdir().unwrap();
    let v = volume(dir.path(), "immediate");
    let sock = dir.path().join("s.sock");
    assert!(
        hscm_lab::installed("fio"),
        "fio is not installed: run scripts/setup.sh"
    );
    let fio = |uri: &str, extra: &[&str]| crate::util::fio_verify(dir.path(), uri, "16M", extra);
    let (server, uri) = serve(&v, &sock, &[]);
    // Writes every block with a checksummed header, then reads them all back.
    fio(&uri, &["--do_verify=1"]);
    signal(server.id(), 9);
    let mut server = server;
    let _ = server.wait();
    // After SIGKILL and a restart, the same blocks verify again.
    let (server, uri) = serve(&v, &sock, &[]);
    fio(&uri, &["--verify_only=1"]);
    stop(server);
}

/// ext4 on the export through nbdfuse and a loop device, 20 rounds of SIGKILL
/// mid-write per durability mode: e2fsck -fn clean and every fsync'ed file intact
/// (scripts/nbd-ext4-crash.sh does the work; it needs root, /dev/fuse and loop devices,
/// which this project's machines have).
fn ext4_rounds(durability: &str) {
    for t in ["nbdfuse", "fusermount3"] {
        tool(t);
    }
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/nbd-ext4-crash.sh");
    let o = Command::new("bash")
        .arg(&script)
        .args(["20", durability])
        .env("HSCM", env!("CARGO_BIN_EXE_hscm"))
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", text(&o));
    let out = String::from_utf8_lossy(&o.stdout);
    let summary: serde_json::Value =
        serde_json::from_str(out.lines().last().unwrap_or("")).expect("a JSON summary line");
    assert_eq!(summary["rounds"], 20);
    assert_eq!(summary["lost"], 0);
    assert!(
        summary["fsynced_files_checked"].as_u64().unwrap() >= 20,
        "{summary}"
    );
}

#[test]
fn ext4_over_nbdfuse_survives_kill_9_in_immediate_mode() {
    ext4_rounds("immediate");
}

#[test]
fn ext4_over_nbdfuse_survives_kill_9_in_on_flush_mode() {
    ext4_rounds("on-flush");
}

#[test]
fn ext4_over_nbdfuse_survives_kill_9_in_write_back_mode() {
    ext4_rounds("write-back");
}

#[test]
fn bad_places_and_volumes_are_clear_errors_that_touch_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let v = volume(dir.path(), "immediate");
    let vs = v.to_str().unwrap();

    // No such volume: nothing is created, not even the socket.
    let sock = dir.path().join("missing.sock");
    let o = run(&["nbd", "missing.hscm", "--socket", sock.to_str().unwrap()]);
    util::assert_clean_failure(&o, "missing volume");
    assert!(util::stderr(&o).contains("missing.hscm"), "{}", text(&o));
    assert!(!sock.exists(), "a socket was left behind");

    // A regular file where the socket should go is refused and kept.
    let in_the_way = dir.path().join("data.txt");
    std::fs::write(&in_the_way, b"keep me").unwrap();
    let o = run(&["nbd", vs, "--socket", in_the_way.to_str().unwrap()]);
    util::assert_clean_failure(&o, "file in the way");
    assert!(
        util::stderr(&o).contains("not a socket is in the way"),
        "{}",
        text(&o)
    );
    assert_eq!(std::fs::read(&in_the_way).unwrap(), b"keep me");

    // An address that is not one.
    let o = run(&["nbd", vs, "--listen", "no-such-host-name.invalid:x"]);
    util::assert_clean_failure(&o, "bad address");
    assert!(
        util::stderr(&o).contains("cannot listen on"),
        "{}",
        text(&o)
    );

    let o = run(&["bench", "nbd", "--seconds", "0"]);
    util::assert_clean_failure(&o, "zero seconds");
    assert!(
        util::stderr(&o).contains("--seconds must be positive"),
        "{}",
        text(&o)
    );

    // A volume another server has open: refused, and that server keeps serving.
    let (server, uri) = serve(&v, &dir.path().join("s.sock"), &[]);
    let o = run(&[
        "nbd",
        vs,
        "--socket",
        dir.path().join("t.sock").to_str().unwrap(),
    ]);
    assert!(!o.status.success(), "{}", text(&o));
    assert!(
        text(&o).contains("stop the process that has it open"),
        "{}",
        text(&o)
    );
    let out = ok(tool("qemu-io").args(["-f", "raw", "-r", &uri, "-c", "read -P 0 0 4k"]));
    assert!(!out.contains("fail"), "{out}");
    stop(server);
}

/// A tiered volume (a quarter of it in DRAM) through the same NBD export: qemu-io's
/// patterns read back across a restart, and kill -9 loses no acknowledged write.
#[test]
fn a_tiered_volume_is_served_over_nbd_and_survives_kill_9() {
    let saved = tiered_over_nbd(&["--policy", "s3fifo"]);
    assert_eq!(saved["mode"], "write-through", "{saved}");
}

/// The same with a write-back fast tier beside it: after every kill -9 the fast tier's
/// records bring back what was acknowledged there and not yet written home.
#[test]
fn a_tiered_volume_with_a_write_back_fast_tier_survives_kill_9_over_nbd() {
    let saved = tiered_over_nbd(&["--fast-tier", "t.fast", "--fast-size", "4M"]);
    assert_eq!(saved["mode"], "write-back", "{saved}");
    assert_eq!(saved["session"]["tiers"][1]["tier"], "fast", "{saved}");
}

/// Creates a 32 MiB tiered volume with 8 MiB of DRAM and `extra` flags, serves it:
/// qemu-io patterns, counters while it serves, a restart, then ten kill -9 rounds.
/// Returns the counters the first server saved at its clean close.
fn tiered_over_nbd(extra: &[&str]) -> serde_json::Value {
    let dir = tempfile::tempdir().unwrap();
    let v = dir.path().join("t.tier");
    let mut args = vec![
        "volume",
        "create",
        v.to_str().unwrap(),
        "--size",
        "32M",
        "--ram",
        "8M",
    ];
    args.extend_from_slice(extra);
    let o = run(&args);
    assert!(o.status.success(), "{}", text(&o));
    let sock = dir.path().join("s.sock");
    let (server, uri) = serve(&v, &sock, &[]);
    let info: serde_json::Value =
        serde_json::from_str(&ok(tool("nbdinfo").arg("--json").arg(&uri))).unwrap();
    assert_eq!(info["exports"][0]["export-size"], 32 << 20);
    qemu_io(
        &uri,
        false,
        &[
            "write -P 0xab 0 12M",
            "write -P 0x11 5000 3000",
            "write -z 20M 1M",
        ],
    );
    // While it serves, `hscm volume stats` reads the counters the server saves.
    let mut saved = serde_json::Value::Null;
    for _ in 0..50 {
        let o = run(&["volume", "stats", v.to_str().unwrap(), "--json"]);
        assert!(o.status.success(), "{}", text(&o));
        saved = serde_json::from_slice::<serde_json::Value>(&o.stdout).unwrap()["saved"].clone();
        if saved["session"]["requests"].as_u64().unwrap_or(0) > 0 {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(200));
    }
    assert_eq!(saved["state"], "open", "{saved}");
    assert!(
        saved["session"]["requests"].as_u64().unwrap() > 0,
        "{saved}"
    );
    stop(server);
    let o = run(&["volume", "stats", v.to_str().unwrap(), "--json"]);
    let after: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(after["saved"]["state"], "closed", "{after}");
    let (server, uri) = serve(&v, &sock, &[]);
    qemu_io(
        &uri,
        true,
        &[
            "read -P 0xab 0 4096",
            "read -P 0x11 5000 3000",
            "read -P 0xab 8000 12574720",
            "read -P 0 20M 1M",
        ],
    );
    stop(server);
    kill_loop_on(dir.path(), &v, "immediate", 10);
    after["saved"].clone()
}

#[test]
fn bench_nbd_strangers_json_contract() {
    let dir = tempfile::tempdir().unwrap();
    let o = run(&[
        "bench",
        "nbd-strangers",
        "--idle",
        "20",
        "--stalled",
        "2",
        "--seconds",
        "0.2",
        "--size",
        "64M",
        "--dir",
        dir.path().to_str().unwrap(),
        "--json",
    ]);
    assert!(o.status.success(), "{}", text(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let phases = v["phases"].as_array().unwrap();
    let names: Vec<&str> = phases
        .iter()
        .map(|p| p["phase"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["unloaded", "idle", "stalled"]);
    for p in phases {
        for key in [
            "connections",
            "rss_mib",
            "rss_above_unloaded_mib",
            "reads",
            "p50_us",
            "p99_us",
            "p50_ratio",
        ] {
            assert!(p[key].is_number(), "{key} in {p}");
        }
        assert!(p["reads"].as_u64().unwrap() > 0);
    }
    assert!(v["within_bounds"].is_boolean());
}

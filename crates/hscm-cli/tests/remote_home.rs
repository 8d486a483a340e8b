//! Volumes whose home is an NBD export (issue 52), through the CLI as a user runs it:
//! the flat volume, the tiered volume and the file system on nbdkit, qemu-nbd over
//! qcow2 and another `hscm nbd`; libnbd's nbdcopy and nbdinfo as the clients; a home
//! killed under a serving volume.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::util::*;

fn random_file(path: &Path, len: usize, seed: u8) -> Vec<u8> {
    let mut x = (seed as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    let bytes: Vec<u8> = (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect();
    std::fs::write(path, &bytes).unwrap();
    bytes
}

/// Copies `data` into the export at `socket` with nbdcopy, then (after `between`)
/// reads it back with nbdcopy: the same bytes.
fn nbdcopy_round_trip(dir: &Path, socket: &Path, len: usize, seed: u8) -> PathBuf {
    let input = dir.join(format!("in-{seed}"));
    random_file(&input, len, seed);
    let uri = unix_uri(socket, "");
    let o = tool("nbdcopy", &[input.to_str().unwrap(), &uri]);
    assert!(o.status.success(), "nbdcopy in: {}", text(&o));
    input
}

fn nbdcopy_equal(dir: &Path, socket: &Path, input: &Path) {
    let out = dir.join("out");
    let _ = std::fs::remove_file(&out);
    let o = tool("nbdcopy", &[&unix_uri(socket, ""), out.to_str().unwrap()]);
    assert!(o.status.success(), "nbdcopy out: {}", text(&o));
    let want = std::fs::read(input).unwrap();
    let got = std::fs::read(&out).unwrap();
    assert!(got[..want.len()] == want[..], "the bytes read back differ");
}

#[test]
fn flat_and_tiered_volumes_on_nbdkit_give_libnbd_the_same_bytes_after_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let _home = nbdkit(&dir.path().join("home"), &["memory", "96M"]);
    let home = unix_uri(&dir.path().join("home"), "");
    let served = dir.path().join("served");

    let o = run(&["volume", "create", &home, "--size", "32M"]);
    assert!(o.status.success(), "{}", text(&o));
    // A home that holds a volume is not taken again without --force.
    let o = run(&["volume", "create", &home, "--size", "32M"]);
    assert_clean_failure(&o, "create on an export holding a volume");
    assert!(stderr(&o).contains("already exists"), "{}", text(&o));
    let info = ok_json(&["volume", "info", &home, "--json"]);
    assert_eq!(info["volume_size"], 32 << 20, "{info}");

    let input = {
        let _nbd = hscm_nbd(&home, &served);
        let o = tool("nbdinfo", &[&unix_uri(&served, "")]);
        assert!(text(&o).contains("33554432"), "{}", text(&o));
        nbdcopy_round_trip(dir.path(), &served, 32 << 20, 1)
    };
    {
        let _nbd = hscm_nbd(&home, &served);
        nbdcopy_equal(dir.path(), &served, &input);
    }

    let fast = dir.path().join("fast.img");
    let o = run(&[
        "volume",
        "create",
        &home,
        "--size",
        "64M",
        "--ram",
        "8M",
        "--fast-tier",
        fast.to_str().unwrap(),
        "--fast-size",
        "16M",
        "--force",
    ]);
    assert!(o.status.success(), "{}", text(&o));
    let input = {
        let _nbd = hscm_nbd(&home, &served);
        nbdcopy_round_trip(dir.path(), &served, 64 << 20, 2)
    };
    let _nbd = hscm_nbd(&home, &served);
    nbdcopy_equal(dir.path(), &served, &input);
    // A relative fast-tier path means nothing beside a home on the network.
    let o = run(&[
        "volume",
        "create",
        &home,
        "--size",
        "64M",
        "--ram",
        "8M",
        "--fast-tier",
        "fast.img",
        "--fast-size",
        "16M",
        "--force",
    ]);
    assert_clean_failure(&o, "relative fast tier");
    assert!(stderr(&o).contains("must be absolute"), "{}", text(&o));
}

#[test]
fn another_hscm_as_home_over_tcp() {
    let dir = tempfile::tempdir().unwrap();
    let lower = volume_with(dir.path(), "48M", "immediate", &[]);
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let listen = format!("127.0.0.1:{port}");
    // Over TCP the home authenticates its client: TLS with a pre-shared key, the
    // client on the same OpenSSL PSK suites as the server.
    let keys = dir.path().join("keys.psk");
    std::fs::write(
        &keys,
        "alice:8e1f0c9d2a3b4c5d6e7f8091a2b3c4d5e6f708192a3b4c5d6e7f8091a2b3c4d5\n",
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&keys, std::fs::Permissions::from_mode(0o600)).unwrap();
    let mut cmd = hscm();
    cmd.arg("nbd").arg(&lower).args([
        "--listen",
        &listen,
        "--export",
        "lower",
        "--tls",
        "require",
        "--tls-psk",
        keys.to_str().unwrap(),
    ]);
    let _lower = Proc(spawn_until_line(&mut cmd, "nbd").0);
    let home = format!(
        "nbds://alice@127.0.0.1:{port}/lower?tls-psk-file={}",
        keys.display()
    );
    let o = run(&[
        "volume",
        "create",
        &home,
        "--size",
        "32M",
        "--durability",
        "on-flush",
    ]);
    assert!(o.status.success(), "{}", text(&o));
    let served = dir.path().join("upper");
    let input = {
        let _upper = hscm_nbd(&home, &served);
        nbdcopy_round_trip(dir.path(), &served, 32 << 20, 3)
    };
    let _upper = hscm_nbd(&home, &served);
    nbdcopy_equal(dir.path(), &served, &input);
}

#[test]
fn a_file_system_on_qemu_nbd_over_qcow2() {
    if unsafe_to_mount() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let image = dir.path().join("disk.qcow2");
    let o = tool(
        "qemu-img",
        &[
            "create",
            "-q",
            "-f",
            "qcow2",
            image.to_str().unwrap(),
            "64M",
        ],
    );
    assert!(o.status.success(), "{}", text(&o));
    let sock = dir.path().join("q");
    let mut child = Command::new("qemu-nbd")
        .args([
            "-f",
            "qcow2",
            "-t",
            "-k",
            sock.to_str().unwrap(),
            "--shared=8",
        ])
        .arg(&image)
        .stderr(Stdio::null())
        .spawn()
        .expect("qemu-nbd");
    wait_for(&sock, &mut child);
    let _q = Proc(child);
    let home = unix_uri(&sock, "");
    let o = run(&["volume", "create", &home, "--size", "48M", "--fs"]);
    assert!(o.status.success(), "{}", text(&o));
    let at = dir.path().join("mnt");
    std::fs::create_dir(&at).unwrap();
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    {
        let _m = Proc(mount_foreground(Path::new(&home), &at, &[]));
        let o = tool("cp", &["-r", src.to_str().unwrap(), at.to_str().unwrap()]);
        assert!(o.status.success(), "{}", text(&o));
        let o = tool("sync", &["-f", at.join("src").to_str().unwrap()]);
        assert!(o.status.success(), "{}", text(&o));
        let o = tool("fusermount3", &["-u", at.to_str().unwrap()]);
        assert!(o.status.success(), "{}", text(&o));
    }
    let _m = Proc(mount_foreground(Path::new(&home), &at, &[]));
    let o = tool(
        "diff",
        &[
            "-r",
            src.to_str().unwrap(),
            at.join("src").to_str().unwrap(),
        ],
    );
    assert!(
        o.status.success(),
        "the tree differs after a remount: {}",
        text(&o)
    );
    let o = tool("fusermount3", &["-u", at.to_str().unwrap()]);
    assert!(o.status.success(), "{}", text(&o));
}

/// Mounting needs /dev/fuse and root (the mount tests' own rule).
fn unsafe_to_mount() -> bool {
    !Path::new("/dev/fuse").exists() || !rustix::process::geteuid().is_root()
}

#[test]
fn a_home_killed_under_a_serving_volume_fails_writes_at_the_deadline_and_is_taken_back() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("disk");
    std::fs::write(&file, vec![0u8; 40 << 20]).unwrap();
    let sock = dir.path().join("home");
    let home_proc = nbdkit(&sock, &["file", file.to_str().unwrap()]);
    let home = unix_uri(&sock, "&timeout=2");
    let o = run(&["volume", "create", &home, "--size", "32M"]);
    assert!(o.status.success(), "{}", text(&o));
    let served = dir.path().join("served");
    let nbd = hscm_nbd(&home, &served);
    let input = nbdcopy_round_trip(dir.path(), &served, 32 << 20, 4);

    drop(home_proc);
    let started = Instant::now();
    let one = dir.path().join("one-block");
    std::fs::write(&one, vec![b'x'; 4096]).unwrap();
    let o = tool("nbdcopy", &[one.to_str().unwrap(), &unix_uri(&served, "")]);
    let took = started.elapsed();
    assert!(
        !o.status.success(),
        "a write acknowledged with the home gone"
    );
    assert!(
        stderr(&o).contains("write at offset 0 failed"),
        "{}",
        text(&o)
    );
    assert!(
        took < Duration::from_secs(20),
        "the write hung for {took:?}"
    );
    let status = ok_json(&["status", "--json"]);
    let me = status
        .as_array()
        .unwrap()
        .iter()
        .find(|s| {
            s["address"]
                .as_str()
                .is_some_and(|a| a.contains(served.to_str().unwrap()))
        })
        .unwrap_or_else(|| panic!("hscm status does not list the server: {status}"));
    assert_eq!(me["health"]["ok"], false, "{me}");
    assert_eq!(me["home"]["reachable"], false, "{me}");
    assert!(
        me["home"]["last_error"]
            .as_str()
            .unwrap()
            .contains("no answer within 2.0 s"),
        "{me}"
    );
    // What the RAM copy holds is still served.
    nbdcopy_equal(dir.path(), &served, &input);

    // The home comes back: the served volume takes writes again by itself.
    let _home = nbdkit(&sock, &["file", file.to_str().unwrap()]);
    let deadline = Instant::now() + Duration::from_secs(30);
    while !tool("nbdcopy", &[one.to_str().unwrap(), &unix_uri(&served, "")])
        .status
        .success()
    {
        assert!(
            Instant::now() < deadline,
            "the volume did not take writes again"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    let status = ok_json(&["status", "--json"]);
    assert!(
        status.to_string().contains("\"reachable\":true"),
        "hscm status does not show the home back: {status}"
    );
    drop(nbd);

    // Every acknowledged byte is on the home: the first block written after the return.
    let o = run(&["volume", "check", &home]);
    assert!(o.status.success(), "{}", text(&o));
    let mut expected = std::fs::read(&input).unwrap();
    expected[..4096].fill(b'x');
    let expected_file = dir.path().join("expected");
    std::fs::write(&expected_file, &expected).unwrap();
    let _nbd = hscm_nbd(&home, &served);
    nbdcopy_equal(dir.path(), &served, &expected_file);
}

/// `hscm bench remote`, short: every target at every point and added RTT, in the JSON
/// contract, with the ratios the issue's targets are read against.
#[test]
fn bench_remote_json_measures_every_target_at_every_rtt() {
    let o = run(&[
        "bench",
        "remote",
        "--seconds",
        "0.2",
        "--size",
        "16M",
        "--rtt-ms",
        "0,1",
        "--json",
    ]);
    assert!(o.status.success(), "{}", text(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let rows = v["rows"].as_array().unwrap();
    for rtt in [0.0, 1.0] {
        for target in ["direct", "flat-local", "flat-remote", "tier-remote"] {
            for workload in ["randread", "randwrite", "read", "write"] {
                let r = rows
                    .iter()
                    .find(|r| {
                        r["target"] == target
                            && r["workload"] == workload
                            && r["rtt_ms"].as_f64() == Some(rtt)
                    })
                    .unwrap_or_else(|| panic!("no {workload} row for {target} at {rtt} ms"));
                assert!(r["iops"].as_f64().unwrap() > 0.0, "{r}");
                for field in ["bs", "qd", "jobs", "mbps", "p50_us", "p99_us"] {
                    assert!(!r[field].is_null(), "{field} missing: {r}");
                }
            }
        }
        let hot = rows
            .iter()
            .find(|r| r["workload"] == "randread-hot" && r["rtt_ms"].as_f64() == Some(rtt))
            .expect("the tier's DRAM-hit point");
        assert!(hot["hit_ratio"].as_f64().unwrap() > 0.9, "{hot}");
    }
    let ratios = v["ratios"].as_object().unwrap();
    assert!(ratios.contains_key("randread 4096 qd1x1 rtt1 flat-remote/flat-local"));
    assert!(ratios.contains_key("randwrite 4096 qd16x4 rtt1 flat-remote/direct"));
    assert!(ratios.contains_key("randread 4096 qd1x1 rtt1 tier-remote/direct p50"));
    let o = run(&["bench", "remote", "--rtt-ms", "-3"]);
    assert!(!o.status.success());
}

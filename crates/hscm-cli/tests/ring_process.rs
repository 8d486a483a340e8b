//! The shared-memory transport across real processes: `hscm serve` as a child, writers
//! as children, and kill -9 on either side.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Stdio};
use std::time::Duration;

use crate::util;

use hscm_ring::{Client, ClientOptions};
use hscm_volume::testing::check_restarted_block;
use hscm_volume::{CreateOptions, OpenOptions, Volume};
use util::{hscm, wait_until};

const BLOCK: u64 = 4096;
const SIZE: u64 = 4 << 20;

fn start_server(volume: &Path, socket: &Path) -> Child {
    util::serve(volume, socket)
}

fn start_writer(socket: &Path, seed: u64) -> (Child, std::thread::JoinHandle<Vec<String>>) {
    let mut child = hscm()
        .args(["debug", "ring-writer"])
        .arg(socket)
        .args(["--seed", &seed.to_string(), "--block", &BLOCK.to_string()])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn writer");
    let stdout = child.stdout.take().unwrap();
    let reader = std::thread::spawn(move || {
        BufReader::new(stdout)
            .lines()
            .map_while(Result::ok)
            .collect()
    });
    (child, reader)
}

/// Folds a writer's "W b v" / "A b v" lines into the per-block oracle.
fn record(lines: &[String], acked: &mut [u64], attempted: &mut [u64]) -> usize {
    let mut acks = 0;
    for l in lines {
        let f: Vec<&str> = l.split_whitespace().collect();
        if f.len() != 3 {
            continue;
        }
        let (b, v): (usize, u64) = (f[1].parse().unwrap(), f[2].parse().unwrap());
        match f[0] {
            "W" => attempted[b] = attempted[b].max(v),
            "A" => {
                acked[b] = acked[b].max(v);
                acks += 1;
            }
            _ => {}
        }
    }
    acks
}

fn new_volume(dir: &Path) -> std::path::PathBuf {
    let path = dir.join("ring.hscm");
    Volume::create(
        &path,
        SIZE,
        &CreateOptions {
            chunk_size: 64 << 10,
            ..Default::default()
        },
    )
    .unwrap();
    path
}

fn verify(volume: &Path, acked: &[u64], attempted: &[u64]) {
    let vol = Volume::open(volume, &OpenOptions::default()).unwrap();
    let mut buf = vec![0u8; BLOCK as usize];
    for b in 0..acked.len() {
        vol.read_at(b as u64 * BLOCK, &mut buf).unwrap();
        if let Err(e) = check_restarted_block(b as u64, &buf, acked[b], attempted[b]) {
            panic!("{e}");
        }
    }
}

/// kill -9 the server while a client writes through it, restart it, repeat: every
/// write the client saw acknowledged is on the volume.
#[test]
fn killing_the_server_loses_no_acknowledged_write() {
    let dir = tempfile::tempdir().unwrap();
    let volume = new_volume(dir.path());
    let socket = dir.path().join("s.sock");
    let n = (SIZE / BLOCK) as usize;
    let (mut acked, mut attempted) = (vec![0u64; n], vec![0u64; n]);
    let mut total = 0;
    for round in 1..=4u64 {
        let mut server = start_server(&volume, &socket);
        let (mut writer, reader) = start_writer(&socket, round);
        std::thread::sleep(Duration::from_millis(50 + 30 * round));
        server.kill().unwrap(); // SIGKILL, mid-stream
        server.wait().unwrap();
        // The writer notices and exits with an error instead of hanging.
        assert!(
            wait_until(Duration::from_secs(10), || writer
                .try_wait()
                .unwrap()
                .is_some()),
            "writer hangs after the server died"
        );
        assert!(!writer.wait().unwrap().success());
        total += record(&reader.join().unwrap(), &mut acked, &mut attempted);
    }
    assert!(total > 20, "only {total} writes acknowledged across rounds");
    verify(&volume, &acked, &attempted);
}

/// kill -9 clients mid-command, many times: the server stays up, keeps serving new
/// clients, and every acknowledged write is readable through it.
#[test]
fn killed_clients_leave_the_server_serving() {
    let dir = tempfile::tempdir().unwrap();
    let volume = new_volume(dir.path());
    let socket = dir.path().join("s.sock");
    let mut server = start_server(&volume, &socket);
    let n = (SIZE / BLOCK) as usize;
    let (mut acked, mut attempted) = (vec![0u64; n], vec![0u64; n]);
    for round in 1..=6u64 {
        let (mut writer, reader) = start_writer(&socket, round);
        std::thread::sleep(Duration::from_millis(20 + 15 * round));
        writer.kill().unwrap();
        writer.wait().unwrap();
        record(&reader.join().unwrap(), &mut acked, &mut attempted);
        assert!(
            server.try_wait().unwrap().is_none(),
            "server died with its client"
        );
    }
    let client = Client::connect(&socket, &ClientOptions::default()).unwrap();
    let mut q = client.queue().unwrap();
    let mut buf = vec![0u8; BLOCK as usize];
    for b in 0..n {
        q.read(b as u64 * BLOCK / 512, &mut buf).unwrap();
        if let Err(e) = check_restarted_block(b as u64, &buf, acked[b], attempted[b]) {
            panic!("{e}");
        }
    }
    drop(q);
    drop(client);
    // A clean stop (SIGTERM) closes the volume; it reopens with the same contents.
    rustix_kill(&server);
    assert!(wait_until(Duration::from_secs(10), || server
        .try_wait()
        .unwrap()
        .is_some()));
    verify(&volume, &acked, &attempted);
}

fn rustix_kill(child: &Child) {
    util::signal(child.id(), 15);
}

#[test]
fn the_socket_is_private_and_a_second_server_is_refused() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let volume = new_volume(dir.path());
    let socket = dir.path().join("s.sock");
    let mut server = start_server(&volume, &socket);
    let mode = std::fs::metadata(&socket).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600);
    // The same volume: its owner's lock refuses it. Another volume on the same
    // socket: the socket refuses it.
    let other_dir = tempfile::tempdir().unwrap();
    let other = new_volume(other_dir.path());
    for (vol, says) in [(&volume, "is in use"), (&other, "already")] {
        let out = hscm()
            .arg("serve")
            .arg(vol)
            .arg("--shm")
            .arg(&socket)
            .output()
            .unwrap();
        assert!(!out.status.success());
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(says), "{err}");
    }
    server.kill().unwrap();
    server.wait().unwrap();
}

/// A server another user runs (one that could have squatted the endpoint's name) is
/// refused by the client library before it sends anything: the kernel's peer
/// credentials say who answered.
#[test]
fn a_server_run_by_another_user_is_not_trusted() {
    use std::os::unix::fs::PermissionsExt;
    if !rustix::process::geteuid().is_root() {
        eprintln!("skipped: needs root to run a server as another user");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let theirs = dir.path().join("theirs");
    std::fs::create_dir(&theirs).unwrap();
    let volume = new_volume(&theirs);
    let chown = std::process::Command::new("chown")
        .args(["-R", "65534:65534"])
        .arg(&theirs)
        .status()
        .unwrap();
    assert!(chown.success());
    let socket = theirs.join("s.sock");
    let mut server = std::process::Command::new("setpriv")
        .args(["--reuid=65534", "--regid=65534", "--clear-groups"])
        .arg(env!("CARGO_BIN_EXE_hscm"))
        .arg("serve")
        .arg(&volume)
        .arg("--shm")
        .arg(&socket)
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    assert!(wait_until(Duration::from_secs(20), || socket.exists()));
    let err = Client::connect(&socket, &ClientOptions::default())
        .err()
        .expect("refused");
    let msg = err.to_string();
    assert!(
        msg.contains("uid 65534") && msg.contains("not trusting"),
        "{msg}"
    );
    // The library's rule: its own user's servers and root's.
    assert!(hscm_ring::trusted_server(1000, 1000));
    assert!(hscm_ring::trusted_server(0, 1000));
    assert!(!hscm_ring::trusted_server(65534, 0));
    server.kill().unwrap();
    server.wait().unwrap();
}

/// `hscm serve` opens through the serving layer: a tiered volume and a volume with a
/// file system are served over shared memory like a flat one (the file-system
/// volume as its blocks, its superblock first), and what a client wrote is there
/// after a clean stop; the tiered volume's counters say it closed cleanly.
#[test]
fn every_kind_of_volume_is_served_over_shared_memory() {
    let dir = tempfile::tempdir().unwrap();
    let tiered = util::tiered_volume(dir.path(), "16M", "2M");
    let with_fs = util::fs_volume(dir.path(), "16M", "immediate");
    for (volume, kind) in [(&tiered, "tiered"), (&with_fs, "fs")] {
        let socket = dir.path().join(format!("{kind}.sock"));
        let mut server = start_server(volume, &socket);
        let client = Client::connect(&socket, &ClientOptions::default()).unwrap();
        let mut q = client.queue().unwrap();
        let mut first = vec![0u8; 4096];
        q.read(0, &mut first).unwrap();
        if kind == "fs" {
            assert_eq!(&first[..6], b"HSCMFS", "the file system's superblock");
        }
        // Past the file system's metadata: the last block of the volume.
        let last = (16 << 20) - BLOCK;
        q.write(
            last / 512,
            &[0xc3; BLOCK as usize],
            hscm_ring::WriteFlags::default(),
        )
        .unwrap();
        q.flush().unwrap();
        drop(q);
        drop(client);
        rustix_kill(&server);
        assert!(server.wait().unwrap().success(), "{kind}: a clean stop");
        let mut server = start_server(volume, &socket);
        let client = Client::connect(&socket, &ClientOptions::default()).unwrap();
        let mut q = client.queue().unwrap();
        let mut back = vec![0u8; BLOCK as usize];
        q.read(last / 512, &mut back).unwrap();
        assert_eq!(back, vec![0xc3; BLOCK as usize], "{kind}");
        drop(q);
        drop(client);
        rustix_kill(&server);
        assert!(server.wait().unwrap().success());
    }
    let stats = util::ok_json(&["volume", "stats", tiered.to_str().unwrap(), "--json"]);
    assert_eq!(stats["saved"]["state"], "closed", "{stats}");
}

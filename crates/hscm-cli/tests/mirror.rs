//! A mirrored home through the CLI as an operator runs it (issue 53, docs/mirror.md):
//! `hscm volume create --mirror` onto an nbdkit export standing for the second
//! machine, `hscm nbd` serving it to four writers sharing an NBD client that record
//! what was acknowledged, the primary killed with SIGKILL mid-write, the replica
//! promoted and served, the old primary unable to acknowledge a write, and the old
//! primary's copy rejoining and resynced until it is equal byte for byte; three
//! machines in network namespaces with lossy, then cut links; a tiered volume on a
//! mirror; tar, git and `rm -rf` on a mirrored file system.

use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use hscm_durable::device::{AlignedBuf, Backend};
use hscm_durable::mirror::META_LEN;
use hscm_durable::nbd::{NbdBackend, NbdUri};

use crate::util::*;

const SIZE: u64 = 16 << 20;
const BLOCK: u64 = 4096;
/// Blocks the client writes (the volume's last block holds the client's owner
/// record, so it is left out).
const BLOCKS: u64 = SIZE / BLOCK - 2;

/// An NBD client that gives each request `timeout` seconds; it takes the export
/// over from an earlier client of this test that died with its server.
fn client_with(socket: &Path, timeout: u32) -> NbdBackend {
    let query = format!("&timeout={timeout}&take-over");
    NbdBackend::open(&NbdUri::parse(&unix_uri(socket, &query)).unwrap(), true).unwrap()
}

fn client(socket: &Path) -> NbdBackend {
    client_with(socket, 2)
}

/// The block the `seq`-th write goes to and what it holds.
fn write_for(seq: u64) -> (u64, AlignedBuf) {
    let at = (seq * 7919) % BLOCKS * BLOCK;
    let mut b = AlignedBuf::zeroed(BLOCK as usize);
    for (i, chunk) in b.chunks_mut(8).enumerate() {
        chunk.copy_from_slice(&(seq ^ (i as u64) << 40).to_le_bytes());
    }
    (at, b)
}

fn member_file(path: &Path) {
    // Larger than the member needs: an export may be.
    let f = std::fs::File::create(path).unwrap();
    f.set_len(SIZE + (8 << 20)).unwrap();
}

fn mirror_json(path: &Path) -> serde_json::Value {
    ok_json(&["volume", "mirror", path.to_str().unwrap(), "--json"])
}

fn status_of(socket: &Path) -> serde_json::Value {
    let all = ok_json(&["status", "--json"]);
    all.as_array()
        .unwrap()
        .iter()
        .find(|s| {
            s["address"]
                .as_str()
                .is_some_and(|a| a.contains(socket.to_str().unwrap()))
        })
        .cloned()
        .unwrap_or_else(|| panic!("hscm status does not list {}: {all}", socket.display()))
}

/// `file` exported by nbdkit on a socket beside it (standing for its machine's
/// server), and the URI the primary reaches it by.
fn export(file: &Path) -> (Proc, String) {
    let socket = file.with_extension("sock");
    let server = nbdkit(&socket, &["file", file.to_str().unwrap()]);
    (server, unix_uri(&socket, "&timeout=2"))
}

/// As [`export`], with the server keeping writes in a volatile cache until a flush
/// or FUA write reaches the file (nbdkit's cache filter in write-back mode): killing
/// it is a power cut of that machine's disk.
fn export_volatile(file: &Path) -> (Proc, String) {
    let socket = file.with_extension("sock");
    let server = nbdkit(
        &socket,
        &[
            "--filter=cache",
            "file",
            file.to_str().unwrap(),
            "cache=writeback",
        ],
    );
    (server, unix_uri(&socket, "&timeout=2"))
}

/// `hscm status` of the server at `socket` once `n` of its mirror's members are in
/// sync (at most a minute).
fn wait_in_sync(socket: &Path, n: u64) -> serde_json::Value {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let s = status_of(socket);
        if s["mirror"]["in_sync"] == n {
            return s;
        }
        assert!(
            Instant::now() < deadline,
            "the members never got in sync: {s}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// SIGTERM, as systemd stops a server: a clean stop, which the headers record.
fn stop_cleanly(mut server: Proc) {
    signal(server.0.id(), 15);
    server.0.wait().unwrap();
}

/// Every member's file holds the primary's data region, byte for byte.
fn assert_members_equal(primary: &Path, members: &[&Path]) {
    let header = mirror_json(primary);
    let data_len = header["data_bytes"].as_u64().unwrap() as usize;
    let data = META_LEN as usize..META_LEN as usize + data_len;
    let fa = std::fs::read(primary).unwrap();
    for f in members {
        let fm = std::fs::read(f).unwrap();
        let differ: Vec<usize> = data
            .clone()
            .step_by(4096)
            .filter(|&at| fm[at..at + 4096] != fa[at..at + 4096])
            .map(|at| at - META_LEN as usize)
            .collect();
        assert!(
            differ.is_empty(),
            "{} differs in {} blocks, the first at {:?}; the mirror: {header}",
            f.display(),
            differ.len(),
            differ.first()
        );
    }
}

/// `hscm volume create A --size 16M --mirror URI`.
fn create_mirrored(a: &Path, uri: &str) {
    create_mirrored_sized(a, uri, "16M");
}

fn create_mirrored_sized(a: &Path, uri: &str, size: &str) {
    let o = run(&[
        "volume",
        "create",
        a.to_str().unwrap(),
        "--size",
        size,
        "--mirror",
        uri,
    ]);
    assert!(o.status.success(), "{}", text(&o));
}

/// `writers` threads sharing one client of the server at `served` write durably
/// (writer w: sequence numbers w, w + writers, ...; each block once, since there are
/// fewer writes than blocks) until `at_least` are acknowledged in all, then the
/// server is killed with SIGKILL. Returns how many each had acknowledged.
fn write_then_kill(served: &Path, mut primary: Proc, writers: u64, at_least: u64) -> Vec<u64> {
    let acked: Arc<Vec<Mutex<u64>>> = Arc::new((0..writers).map(|_| Mutex::new(0)).collect());
    let c = Arc::new(client(served));
    let threads: Vec<_> = (0..writers)
        .map(|w| {
            let (acked, c) = (acked.clone(), c.clone());
            std::thread::spawn(move || {
                for i in 0..BLOCKS / writers {
                    let (at, data) = write_for(w + i * writers);
                    if c.write_durable_at(at, &data).is_err() {
                        return;
                    }
                    *acked[w as usize].lock().unwrap() = i + 1;
                }
            })
        })
        .collect();
    let total = || acked.iter().map(|a| *a.lock().unwrap()).sum::<u64>();
    assert!(wait_until(Duration::from_secs(30), || total() >= at_least));
    primary.0.kill().unwrap();
    primary.0.wait().unwrap();
    threads.into_iter().for_each(|t| t.join().unwrap());
    let acked: Vec<u64> = acked.iter().map(|a| *a.lock().unwrap()).collect();
    assert!(
        acked.iter().all(|&n| n < BLOCKS / writers),
        "a writer ran out of blocks before the kill: {acked:?}"
    );
    acked
}

/// Every write [`write_then_kill`]'s writers had acknowledged reads back as written.
fn assert_acknowledged(c: &NbdBackend, acked: &[u64], when: &str) {
    let writers = acked.len() as u64;
    for (w, &n) in acked.iter().enumerate() {
        for i in 0..n {
            let seq = w as u64 + i * writers;
            let (at, want) = write_for(seq);
            let mut got = AlignedBuf::zeroed(BLOCK as usize);
            c.read_at(at, &mut got).unwrap();
            assert!(
                got[..] == want[..],
                "acknowledged write {seq} at {at} (writer {w}) is lost {when}"
            );
        }
    }
}

#[test]
fn a_primary_killed_mid_write_loses_nothing_acknowledged_once_its_replica_is_promoted() {
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = (dir.path().join("a.hscm"), dir.path().join("b.member"));
    member_file(&b);
    // Killed after the primary: both machines lose power, the replica's disk what it
    // had not flushed.
    let (b_server, b_uri) = export_volatile(&b);
    create_mirrored(&a, &b_uri);
    let m = mirror_json(&a);
    assert_eq!(m["role"], "primary", "{m}");
    assert_eq!(m["members"].as_array().unwrap().len(), 2, "{m}");
    assert_eq!(m["quorum"], 2, "{m}");
    let m = mirror_json(&b);
    assert_eq!(m["role"], "replica", "{m}");

    // Writers share a client, each write acknowledged durably, several in flight at
    // once, while the primary is killed. Writer w writes sequence numbers w, w +
    // WRITERS, ...; each block is written once (fewer writes than blocks), so an
    // acknowledged write must read back as written.
    let served = dir.path().join("served.sock");
    let primary = hscm_nbd(a.to_str().unwrap(), &served);
    let s = status_of(&served);
    assert_eq!(s["mirror"]["in_sync"], 2, "{s}");
    let acked = write_then_kill(&served, primary, 4, 300);

    // The replica's machine stops exporting it and promotes it. Two members: no
    // majority without the dead one, so only the operator can vouch (--force).
    drop(b_server);
    let o = run(&["volume", "promote", b.to_str().unwrap()]);
    assert!(!o.status.success());
    assert!(stderr(&o).contains("--force"), "{}", text(&o));
    let p = ok_json(&[
        "volume",
        "promote",
        b.to_str().unwrap(),
        "--force",
        "--json",
    ]);
    assert_eq!(p["generation"], 2, "{p}");
    let b_served = dir.path().join("b-served.sock");
    let new_primary = hscm_nbd(b.to_str().unwrap(), &b_served);
    let c = client(&b_served);
    // Every write the old primary acknowledged is there (each writer's one in
    // flight at the kill may be there or not).
    assert_acknowledged(&c, &acked, "after the promotion");
    drop(c);

    // The old primary, started again, is cut off from its member: it serves reads but
    // acknowledges no write.
    let old_served = dir.path().join("old.sock");
    let old = hscm_nbd(a.to_str().unwrap(), &old_served);
    let uri = NbdUri::parse(&unix_uri(&old_served, "&timeout=2")).unwrap();
    let reader = NbdBackend::open(&uri, false).unwrap();
    let mut got = AlignedBuf::zeroed(BLOCK as usize);
    reader.read_at(0, &mut got).unwrap();
    drop(reader);
    // Even the client's claim (a write to the export's last block) is refused.
    let (at, data) = write_for(1 << 40);
    let uri = NbdUri::parse(&unix_uri(&old_served, "&timeout=2&take-over")).unwrap();
    match NbdBackend::open(&uri, true) {
        Err(e) => assert!(e.to_string().contains("failed a write"), "{e}"),
        Ok(oc) => assert!(oc.write_durable_at(at, &data).is_err()),
    }
    let s = status_of(&old_served);
    assert_eq!(s["health"]["ok"], false, "{s}");
    assert_eq!(s["mirror"]["in_sync"], 1, "{s}");
    drop(old);
    drop(new_primary);

    // The old primary's copy rejoins as a replica: exported, and named at a new
    // promotion of the primary; resync gives it a full copy.
    let (_a_server, a_uri) = export(&a);
    let p = ok_json(&[
        "volume",
        "promote",
        b.to_str().unwrap(),
        "--mirror",
        &a_uri,
        "--json",
    ]);
    assert_eq!(p["generation"], 3, "{p}");
    let new_primary = hscm_nbd(b.to_str().unwrap(), &b_served);
    let s = wait_in_sync(&b_served, 2);
    assert_eq!(s["mirror"]["members"][1]["state"], "in-sync", "{s}");
    let c = client(&b_served);
    for seq in 0..50 {
        let (at, data) = write_for(seq + (1 << 20));
        c.write_durable_at(at, &data).unwrap();
    }
    drop(c);
    stop_cleanly(new_primary);
    assert_members_equal(&b, &[&a]);
    let m = mirror_json(&b);
    assert_eq!(m["members"][1]["state"], "in-sync", "{m}");
    assert_eq!(m["clean"], true, "{m}");
}

/// The primary's machine crashes and comes back (no promotion): `hscm nbd` killed
/// with SIGKILL under writers, started again on the same copy. The header says the
/// stop was not clean, so a write in flight at the kill may be on one copy and not
/// the other, but only in the extents the activity log lists: the writers keep to the
/// first 16 MiB of a 64 MiB volume, and the member is given those extents (4 MiB
/// each), not a full copy. Every acknowledged write is there and both end equal
/// byte for byte.
#[test]
fn a_primary_restarted_after_a_crash_copies_only_its_active_extents_and_keeps_every_write() {
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = (dir.path().join("a.hscm"), dir.path().join("b.member"));
    std::fs::File::create(&b)
        .unwrap()
        .set_len(4 * SIZE + (8 << 20))
        .unwrap();
    let (_b_server, b_uri) = export(&b);
    create_mirrored_sized(&a, &b_uri, "64M");
    let served = dir.path().join("served.sock");
    let primary = hscm_nbd(a.to_str().unwrap(), &served);
    let acked = write_then_kill(&served, primary, 1, 200);
    assert_eq!(mirror_json(&a)["clean"], false);
    assert_eq!(mirror_json(&a)["activity_log"], true);

    let primary = hscm_nbd(a.to_str().unwrap(), &served);
    let s = wait_in_sync(&served, 2);
    let copied = s["mirror"]["members"][1]["copied_bytes"].as_u64().unwrap();
    assert!(
        copied > 0 && copied <= SIZE + (8 << 20),
        "after a crash the member gets the extents written into (16 MiB, and those of the \
         volume's header and the last block), not a full copy of 64 MiB: {s}"
    );
    let c = client(&served);
    assert_acknowledged(&c, &acked, "after the restart");
    // What a crash would copy now: the extents written since the restart, the 4 MiB
    // of this write (in the first 16 MiB) and of the client's claim (the last block).
    let (at, data) = write_for(1 << 30);
    c.write_durable_at(at, &data).unwrap();
    let s = status_of(&served);
    assert_eq!(s["mirror"]["crash_copy_bytes"], 8 << 20, "{s}");
    drop(c);
    stop_cleanly(primary);
    assert_members_equal(&a, &[&b]);
}

/// fio, a real client, over a mirror: random 4 KiB writes at queue depth 8 through its
/// NBD engine, each block carrying fio's own CRC-32C, read back and checked; then the
/// primary killed with SIGKILL and started again (the member resynced from the
/// activity log), and every block checked again by fio; after a clean stop both
/// members hold the same bytes.
#[test]
fn fio_verifies_its_blocks_on_a_mirror_before_and_after_a_kill_9_of_the_primary() {
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = (dir.path().join("a.hscm"), dir.path().join("b.member"));
    member_file(&b);
    let (_b_server, b_uri) = export(&b);
    create_mirrored(&a, &b_uri);
    let served = dir.path().join("served.sock");
    let uri = unix_uri(&served, "");
    let fio = |extra: &[&str]| fio_verify(dir.path(), &uri, "12M", extra);
    let primary = hscm_nbd(a.to_str().unwrap(), &served);
    fio(&["--do_verify=1"]);
    let mut primary = primary;
    signal(primary.0.id(), 9);
    primary.0.wait().unwrap();
    let primary = hscm_nbd(a.to_str().unwrap(), &served);
    wait_in_sync(&served, 2);
    fio(&["--verify_only=1"]);
    stop_cleanly(primary);
    assert_members_equal(&a, &[&b]);
}

/// A second machine: a network namespace joined to this one by a veth pair, with
/// addresses no route leads to from outside, removed when dropped.
struct Machine {
    name: String,
    host_end: String,
    /// Its address, as the primary reaches it.
    address: String,
}

impl Machine {
    fn new(tag: u8) -> Machine {
        let pid = std::process::id();
        let name = format!("hscm-m{tag}-{pid}");
        let host_end = format!("hm{tag}-{}", pid % 100_000);
        let peer = format!("pm{tag}-{}", pid % 100_000);
        let subnet = format!("10.{}.{}", 200 + tag, pid % 250);
        let ip = |args: &[&str]| {
            let o = tool("ip", args);
            assert!(o.status.success(), "ip {args:?}: {}", text(&o));
        };
        ip(&["netns", "add", &name]);
        let m = Machine {
            name: name.clone(),
            host_end: host_end.clone(),
            address: format!("{subnet}.2"),
        };
        ip(&[
            "link", "add", &host_end, "type", "veth", "peer", "name", &peer,
        ]);
        ip(&["link", "set", &peer, "netns", &name]);
        ip(&["addr", "add", &format!("{subnet}.1/30"), "dev", &host_end]);
        ip(&["link", "set", &host_end, "up"]);
        ip(&[
            "-n",
            &name,
            "addr",
            "add",
            &format!("{subnet}.2/30"),
            "dev",
            &peer,
        ]);
        ip(&["-n", &name, "link", "set", &peer, "up"]);
        ip(&["-n", &name, "link", "set", "lo", "up"]);
        m
    }

    /// nbdkit serving `file` on this machine's address.
    fn export(&self, file: &Path, port: u16) -> Proc {
        let mut child = std::process::Command::new("ip")
            .args([
                "netns",
                "exec",
                &self.name,
                "nbdkit",
                "-f",
                "--exit-with-parent",
            ])
            .args(["-i", &self.address, "-p", &port.to_string()])
            .args(["file", file.to_str().unwrap()])
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("nbdkit (scripts/setup.sh installs it)");
        let deadline = Instant::now() + Duration::from_secs(20);
        while std::net::TcpStream::connect((self.address.as_str(), port)).is_err() {
            assert!(
                child.try_wait().unwrap().is_none(),
                "nbdkit in {} ended",
                self.name
            );
            assert!(
                Instant::now() < deadline,
                "nbdkit in {} never listened",
                self.name
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        Proc(child)
    }

    /// Drops `percent` of the packets it sends and receives at random (nftables in
    /// its namespace: this kernel has no sch_netem), or none (0); returns how many
    /// were dropped so far.
    fn lossy(&self, percent: u32) -> u64 {
        let nft = |args: &[&str]| {
            let mut all = vec!["netns", "exec", &self.name, "nft"];
            all.extend_from_slice(args);
            let o = tool("ip", &all);
            assert!(
                o.status.success(),
                "nft {args:?} (scripts/setup.sh installs nftables): {}",
                text(&o)
            );
            String::from_utf8_lossy(&o.stdout).into_owned()
        };
        let listed = nft(&["list", "ruleset"]);
        let words: Vec<&str> = listed.split_whitespace().collect();
        let dropped = words
            .windows(2)
            .filter(|w| w[0] == "packets")
            .filter_map(|w| w[1].parse::<u64>().ok())
            .sum();
        if listed.contains("table inet loss") {
            nft(&["delete", "table", "inet", "loss"]);
        }
        if percent > 0 {
            nft(&["add", "table", "inet", "loss"]);
            for hook in ["input", "output"] {
                let spec = format!("{{ type filter hook {hook} priority 0; }}");
                nft(&["add", "chain", "inet", "loss", hook, &spec]);
                let share = percent.to_string();
                nft(&[
                    "add", "rule", "inet", "loss", hook, "numgen", "random", "mod", "100", "<",
                    &share, "counter", "drop",
                ]);
            }
        }
        dropped
    }

    /// Cuts the link to it, or mends it.
    fn link(&self, up: bool) {
        let o = tool(
            "ip",
            &[
                "link",
                "set",
                &self.host_end,
                if up { "up" } else { "down" },
            ],
        );
        assert!(o.status.success(), "{}", text(&o));
    }
}

impl Drop for Machine {
    fn drop(&mut self) {
        let _ = tool("ip", &["link", "del", &self.host_end]);
        let _ = tool("ip", &["netns", "del", &self.name]);
    }
}

fn can_make_machines() -> bool {
    rustix::process::geteuid().is_root() && tool("ip", &["netns", "list"]).status.success()
}

/// Three machines: the primary here, two replicas in network namespaces over TCP.
/// Links that drop packets slow writes but lose none. A link cut leaves a majority, so writes go on; the member that was cut off is
/// resynced with what it missed once the link is mended, and ends equal byte for byte.
/// Both links cut: no quorum, writes refused, and accepted again once one returns.
#[test]
fn replicas_on_other_machines_survive_cut_links_and_end_equal() {
    if !can_make_machines() {
        eprintln!("skipped: network namespaces need root");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let (m1, m2) = (Machine::new(1), Machine::new(2));
    let (f1, f2) = (dir.path().join("r1"), dir.path().join("r2"));
    member_file(&f1);
    member_file(&f2);
    let _s1 = m1.export(&f1, 10809);
    let _s2 = m2.export(&f2, 10809);
    let uri = |m: &Machine| format!("nbd://{}:10809/?timeout=2", m.address);
    let a = dir.path().join("a.hscm");
    let o = run(&[
        "volume",
        "create",
        a.to_str().unwrap(),
        "--size",
        "16M",
        "--mirror",
        &uri(&m1),
        "--mirror",
        &uri(&m2),
    ]);
    assert!(o.status.success(), "{}", text(&o));
    let served = dir.path().join("served.sock");
    let primary = hscm_nbd(a.to_str().unwrap(), &served);
    // Longer than a member's deadline (2 s), which a write meets once a link is cut.
    let c = client_with(&served, 20);
    for seq in 0..200 {
        let (at, data) = write_for(seq);
        c.write_durable_at(at, &data).unwrap();
    }
    // Lossy links to both (5% of packets dropped each way): TCP sends them again, so
    // writes go on; a member whose answer came later than its deadline drops out and
    // is resynced.
    m1.lossy(5);
    m2.lossy(5);
    for seq in 200..400 {
        let (at, data) = write_for(seq);
        c.write_durable_at(at, &data).unwrap();
    }
    let dropped = m1.lossy(0) + m2.lossy(0);
    assert!(dropped > 0, "no packet was dropped on the lossy links");
    wait_in_sync(&served, 3);
    // One link cut: two of three are a majority.
    m1.link(false);
    for seq in 400..600 {
        let (at, data) = write_for(seq);
        c.write_durable_at(at, &data).unwrap();
    }
    let s = status_of(&served);
    assert_eq!(s["mirror"]["in_sync"], 2, "{s}");
    assert_eq!(s["mirror"]["members"][1]["state"], "behind", "{s}");
    let missed = s["mirror"]["members"][1]["to_copy_bytes"].as_u64().unwrap();
    assert!(missed > 0 && missed < SIZE, "{s}");
    // Both cut: no quorum; the write is refused, not acknowledged.
    m2.link(false);
    let (at, data) = write_for(600);
    assert!(c.write_durable_at(at, &data).is_err());
    m1.link(true);
    m2.link(true);
    let s = wait_in_sync(&served, 3);
    let copied = s["mirror"]["members"][1]["copied_bytes"].as_u64().unwrap();
    assert!(copied < SIZE, "a cut-off member got a full copy: {s}");
    // Writes pass again (the volume lets them in once a flush passes).
    assert!(wait_until(Duration::from_secs(30), || {
        let (at, data) = write_for(601);
        c.write_durable_at(at, &data).is_ok()
    }));
    drop(c);
    stop_cleanly(primary);
    assert_members_equal(&a, &[&f1, &f2]);
}

/// A tiered volume (DRAM over its home, larger than the DRAM) on a mirrored home, as
/// an operator makes and serves it: what an NBD client copied in reads back equal
/// after a clean stop and a restart, both members hold it byte for byte, `hscm status`
/// lists the mirror; a fast tier, which acknowledges writes on this machine alone, is
/// refused with the reason.
#[test]
fn a_tiered_volume_on_a_mirror_is_on_both_members_and_a_fast_tier_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let member = dir.path().join("member.img");
    member_file(&member);
    let (_member_server, uri) = export(&member);
    let primary = dir.path().join("tiered.hscm");
    let p = primary.to_str().unwrap();
    let fast = dir.path().join("fast.img");
    let o = run(&[
        "volume",
        "create",
        p,
        "--size",
        "16M",
        "--ram",
        "4M",
        "--fast-tier",
        fast.to_str().unwrap(),
        "--fast-size",
        "8M",
        "--mirror",
        &uri,
    ]);
    assert_clean_failure(&o, "a mirrored tiered volume with a fast tier");
    assert!(
        stderr(&o).contains("fast tier acknowledges"),
        "{}",
        text(&o)
    );
    assert!(
        !primary.exists() && !fast.exists(),
        "nothing is left behind"
    );

    let o = run(&[
        "volume", "create", p, "--size", "16M", "--ram", "4M", "--mirror", &uri,
    ]);
    assert!(o.status.success(), "{}", text(&o));
    let socket = dir.path().join("served.sock");
    let input = dir.path().join("input");
    let bytes: Vec<u8> = (0..SIZE as usize)
        .map(|i| ((i as u64 * 2654435761) >> 13) as u8)
        .collect();
    std::fs::write(&input, &bytes).unwrap();
    let served = hscm_nbd(p, &socket);
    let o = tool(
        "nbdcopy",
        &[input.to_str().unwrap(), &unix_uri(&socket, "")],
    );
    assert!(o.status.success(), "nbdcopy in: {}", text(&o));
    let s = status_of(&socket);
    assert_eq!(s["kind"], "tiered", "{s}");
    assert_eq!(s["mirror"]["in_sync"], 2, "{s}");
    stop_cleanly(served);
    assert_members_equal(&primary, &[&member]);

    let _served = hscm_nbd(p, &socket);
    let out = dir.path().join("output");
    let o = tool("nbdcopy", &[&unix_uri(&socket, ""), out.to_str().unwrap()]);
    assert!(o.status.success(), "nbdcopy out: {}", text(&o));
    assert!(
        std::fs::read(&out).unwrap() == bytes,
        "the bytes read back differ"
    );
}

/// The work people bring to a RAM file system, on one whose home is mirrored: a tree
/// of small files unpacked with tar, committed with git, part of it removed with
/// `rm -rf`; after the unmount both members hold the same bytes, and mounted again
/// the tree equals its source and `git fsck` is clean.
#[test]
fn tar_git_and_rm_on_a_mirrored_file_system_end_equal_on_both_members() {
    let Some(_memory) = crate::mount_truth::root_and_memory() else {
        return;
    };
    use crate::mount_passthrough::Mounted;
    use crate::mount_truth::git;
    let dir = tempfile::tempdir().unwrap();
    let member = dir.path().join("member.img");
    std::fs::File::create(&member)
        .unwrap()
        .set_len(80 << 20)
        .unwrap();
    let (_member_server, uri) = export(&member);
    let v = dir.path().join("fs.hscm");
    let o = run(&[
        "volume",
        "create",
        v.to_str().unwrap(),
        "--size",
        "64M",
        "--fs",
        "--mirror",
        &uri,
    ]);
    assert!(o.status.success(), "{}", text(&o));

    // The source: 600 small files in 30 directories, packed with tar.
    let src = dir.path().join("src");
    for i in 0..600usize {
        let d = src.join(format!("d{}", i % 30));
        std::fs::create_dir_all(&d).unwrap();
        let body: Vec<u8> = (0..(i * 37) % 5000 + 1)
            .map(|j| (i * 31 + j) as u8)
            .collect();
        std::fs::write(d.join(format!("f{i}.rs")), body).unwrap();
    }
    let tarball = dir.path().join("src.tar");
    let o = tool(
        "tar",
        &[
            "-cf",
            tarball.to_str().unwrap(),
            "-C",
            dir.path().to_str().unwrap(),
            "src",
        ],
    );
    assert!(o.status.success(), "{}", text(&o));

    let at = dir.path().join("mnt");
    let m = Mounted::new(&v, &at);
    let o = tool(
        "tar",
        &["-xf", tarball.to_str().unwrap(), "-C", at.to_str().unwrap()],
    );
    assert!(o.status.success(), "{}", text(&o));
    let tree = m.path("src");
    git(&tree, &["init", "-q", "-b", "main"]);
    git(&tree, &["add", "-A"]);
    git(&tree, &["commit", "-q", "-m", "unpacked"]);
    // A third of the tree removed with rm -rf and copied back.
    let third: Vec<String> = (20..30).map(|i| format!("d{i}")).collect();
    let mut rm = vec!["-rf"];
    let doomed: Vec<String> = third
        .iter()
        .map(|d| tree.join(d).display().to_string())
        .collect();
    rm.extend(doomed.iter().map(String::as_str));
    let o = tool("rm", &rm);
    assert!(o.status.success(), "{}", text(&o));
    assert!(third.iter().all(|d| !tree.join(d).exists()));
    for d in &third {
        let o = tool(
            "cp",
            &["-r", src.join(d).to_str().unwrap(), tree.to_str().unwrap()],
        );
        assert!(o.status.success(), "{}", text(&o));
    }
    m.unmount();
    assert_members_equal(&v, &[&member]);

    let m = Mounted::new(&v, &at);
    let tree = m.path("src");
    assert!(git(&tree, &["status", "--porcelain"]).is_empty());
    git(&tree, &["fsck", "--full"]);
    let o = tool(
        "diff",
        &[
            "-r",
            "--exclude=.git",
            src.to_str().unwrap(),
            tree.to_str().unwrap(),
        ],
    );
    assert!(
        o.status.success(),
        "the unpacked tree differs: {}",
        text(&o)
    );
    m.unmount();
}

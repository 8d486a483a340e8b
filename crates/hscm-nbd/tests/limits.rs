//! What a stranger can hold: connections past the limit are closed at once, a
//! handshake that never ends and an idle client are dropped, a client that never
//! reads its replies holds a piece of one and is cut at a stop, so that a SIGTERM
//! finishes within its grace period whatever clients do.

mod client;

use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use client::*;
use hscm_block::MemTarget;
use hscm_nbd::{Endpoint, ExportOptions, ListenLimits, Listener, Server};

struct Serving {
    _dir: tempfile::TempDir,
    path: std::path::PathBuf,
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

fn serve(size: usize, export: ExportOptions, limits: ListenLimits) -> Serving {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.sock");
    let listener = Listener::bind(&Endpoint::Unix(path.clone())).unwrap();
    let server = Arc::new(Server::new(Arc::new(MemTarget::new(size)), export));
    let stop = Arc::new(AtomicBool::new(false));
    let s = stop.clone();
    let thread = std::thread::spawn(move || listener.serve_with(server, s, &limits).unwrap());
    Serving {
        _dir: dir,
        path,
        stop,
        thread: Some(thread),
    }
}

impl Serving {
    /// Stops the server; how long it took to return.
    fn stop(&mut self) -> Duration {
        let start = Instant::now();
        self.stop.store(true, Ordering::Relaxed);
        self.thread.take().unwrap().join().unwrap();
        start.elapsed()
    }
}

fn export() -> ExportOptions {
    ExportOptions {
        name: "disk".into(),
        ..ExportOptions::default()
    }
}

#[test]
fn connections_past_the_limit_are_closed_at_once() {
    let mut s = serve(
        1 << 20,
        export(),
        ListenLimits {
            max_connections: 2,
            ..ListenLimits::default()
        },
    );
    // Both past their handshake: nothing to give way.
    let mut a = connect(&s.path);
    go(&mut a, "disk");
    let mut b = connect(&s.path);
    go(&mut b, "disk");
    std::thread::sleep(Duration::from_millis(100));
    let mut c = UnixStream::connect(&s.path).unwrap();
    c.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut buf = [0u8; 18];
    assert_eq!(
        c.read(&mut buf).unwrap_or(0),
        0,
        "the third is closed without a greeting"
    );
    drop(a);
    std::thread::sleep(Duration::from_millis(100));
    let mut d = connect(&s.path);
    go(&mut d, "disk");
    assert_eq!(
        read(&mut d, 1, 0, 512).unwrap().len(),
        512,
        "room again once one left"
    );
    assert_eq!(
        read(&mut b, 2, 0, 512).unwrap().len(),
        512,
        "b is served still"
    );
    drop((b, d));
    s.stop();
}

/// Connections that have proved nothing cannot hold the slots: at the cap the
/// oldest one still in its handshake gives way to a newcomer, which is served.
#[test]
fn at_the_cap_the_oldest_handshake_gives_way() {
    let mut s = serve(
        1 << 20,
        export(),
        ListenLimits {
            max_connections: 4,
            ..ListenLimits::default()
        },
    );
    let mut served = connect(&s.path);
    go(&mut served, "disk");
    let mut stalled: Vec<UnixStream> = (0..3).map(|_| connect(&s.path)).collect();
    std::thread::sleep(Duration::from_millis(50));
    let mut newcomer = connect(&s.path);
    go(&mut newcomer, "disk");
    assert_eq!(read(&mut newcomer, 1, 0, 512).unwrap().len(), 512);
    assert!(is_closed(&mut stalled[0]), "the oldest handshake was cut");
    assert_eq!(
        read(&mut served, 2, 0, 512).unwrap().len(),
        512,
        "a served client never is"
    );
    // The others are still there (their handshake goes on).
    send_option(&mut stalled[2], OPT_LIST, &[]);
    assert_eq!(option_reply(&mut stalled[2]).1, REP_SERVER);
    s.stop();
}

/// The handshake has a deadline from accept, not a limit per read: a client that
/// sends a cheap option well within the per-read limit, again and again, is cut
/// at the deadline; and more options than any client needs end the connection.
#[test]
fn a_handshake_is_cut_at_its_deadline_and_after_too_many_options() {
    let mut s = serve(
        1 << 20,
        export(),
        ListenLimits {
            handshake_deadline: Duration::from_millis(600),
            ..ListenLimits::default()
        },
    );
    let mut drip = connect(&s.path);
    let start = Instant::now();
    let mut answered = 0;
    while start.elapsed() < Duration::from_secs(5) {
        std::thread::sleep(Duration::from_millis(100));
        let mut header = IHAVEOPT.to_be_bytes().to_vec();
        header.extend_from_slice(&OPT_LIST.to_be_bytes());
        header.extend_from_slice(&0u32.to_be_bytes());
        if drip.write_all(&header).is_err() {
            break;
        }
        let mut h = [0u8; 20];
        if drip.read_exact(&mut h).is_err() {
            break;
        }
        let len = u32::from_be_bytes(h[16..20].try_into().unwrap());
        let mut rest = vec![0u8; len as usize];
        if drip.read_exact(&mut rest).is_err() {
            break;
        }
        // The ACK after the SERVER reply.
        if drip.read_exact(&mut h).is_err() {
            break;
        }
        answered += 1;
    }
    let lasted = start.elapsed();
    assert!(answered >= 2, "the options were answered before the cut");
    assert!(
        lasted < Duration::from_secs(2),
        "a dripping handshake lasted {lasted:?} against a 600 ms deadline"
    );
    let mut chatty = connect(&s.path);
    let mut replies = 0;
    for _ in 0..40 {
        send_option(&mut chatty, OPT_LIST, &[]);
        let mut h = [0u8; 20];
        if chatty.read_exact(&mut h).is_err() {
            break;
        }
        let len = u32::from_be_bytes(h[16..20].try_into().unwrap());
        let mut rest = vec![0u8; len as usize];
        chatty.read_exact(&mut rest).unwrap();
        chatty.read_exact(&mut h).unwrap();
        replies += 1;
    }
    assert_eq!(replies, 32, "32 options answered, then the connection ends");
    s.stop();
}

#[test]
fn a_handshake_that_never_ends_and_an_idle_client_are_dropped() {
    let mut s = serve(
        1 << 20,
        ExportOptions {
            handshake_timeout: Duration::from_millis(300),
            idle_timeout: Some(Duration::from_millis(300)),
            ..export()
        },
        ListenLimits::default(),
    );
    let mut silent = connect(&s.path);
    let mut idle = connect(&s.path);
    go(&mut idle, "disk");
    std::thread::sleep(Duration::from_millis(1000));
    assert!(is_closed(&mut silent), "dropped mid-handshake");
    assert!(is_closed(&mut idle), "dropped when idle");
    // A busy client is not idle.
    let mut busy = connect(&s.path);
    go(&mut busy, "disk");
    for i in 0..8 {
        std::thread::sleep(Duration::from_millis(100));
        assert_eq!(read(&mut busy, i, 0, 4096).unwrap().len(), 4096);
    }
    s.stop();
}

#[test]
fn a_client_that_never_reads_cannot_hold_up_a_stop() {
    let mut s = serve(
        64 << 20,
        export(),
        ListenLimits {
            grace: Duration::from_millis(500),
            ..ListenLimits::default()
        },
    );
    let mut stalled = Vec::new();
    for i in 0..4 {
        let mut c = connect(&s.path);
        go_sized(&mut c, "disk", 64 << 20);
        // Two 32 MiB reads, never read back: the server blocks writing the reply.
        request(&mut c, CMD_READ, 0, i, 0, 32 << 20);
        request(&mut c, CMD_READ, 0, i + 100, 0, 32 << 20);
        stalled.push(c);
    }
    // A well-behaved client meanwhile is served.
    let mut good = connect(&s.path);
    go_sized(&mut good, "disk", 64 << 20);
    assert_eq!(read(&mut good, 1, 4096, 4096).unwrap().len(), 4096);
    std::thread::sleep(Duration::from_millis(300));
    let took = s.stop();
    assert!(took < Duration::from_secs(5), "the stop took {took:?}");
    for c in &mut stalled {
        let _ = c.write_all(&[0u8; 28]);
    }
}

#[test]
fn large_reads_arrive_whole_in_pieces() {
    let mut s = serve(64 << 20, export(), ListenLimits::default());
    let mut c = connect(&s.path);
    go_sized(&mut c, "disk", 64 << 20);
    let data: Vec<u8> = (0..(3 << 20) + 123).map(|i| (i * 31 % 251) as u8).collect();
    for (i, chunk) in data.chunks(1 << 20).enumerate() {
        assert_eq!(write(&mut c, i as u64, 4096 + (i << 20) as u64, chunk), 0);
    }
    let back = read(&mut c, 9, 4096, data.len() as u32).unwrap();
    assert!(
        back == data,
        "a read larger than a piece is the bytes written"
    );
    s.stop();
}

/// A Unix socket is bound in a private directory, made 0600 and renamed into place:
/// it is never reachable with a looser mode, and nothing is left beside it.
#[test]
fn a_unix_socket_is_private_from_its_first_moment() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.sock");
    let listener = Listener::bind(&Endpoint::Unix(path.clone())).unwrap();
    let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600);
    let beside: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(beside, vec![std::ffi::OsString::from("s.sock")]);
    UnixStream::connect(&path).unwrap();
    drop(listener);
}

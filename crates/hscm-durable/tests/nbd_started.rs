//! Started writes on the NBD client home (`Backend::start_write_through`): a write that
//! returns at once and completes by its callback, from the connection's helper thread.
//! Each callback is called exactly once, with Ok only for a write the server
//! acknowledged with FUA; callers waiting beside started writes on the same
//! connection get their own answers; a connection lost under started writes sends
//! them again; and the backend dropped by a callback (its last owner) ends cleanly.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{mpsc, Arc};
use std::time::Duration;

use hscm_durable::device::{Backend, WriteDone};
use hscm_durable::nbd::{NbdBackend, NbdUri};

mod support;
use support::{CuttableRelay, Server};

const BLOCK: usize = 4096;

fn open(uri: &str) -> NbdBackend {
    NbdBackend::open(&NbdUri::parse(uri).unwrap(), true).unwrap()
}

/// Starts a write of `byte` over block `block`, its outcome sent to `tx`; where the
/// backend cannot start it now, writes it the waiting way (as the volume does).
fn start(b: &NbdBackend, block: u64, byte: u8, tx: &mpsc::Sender<(u64, u8, std::io::Result<()>)>) {
    let data = vec![byte; BLOCK];
    let tx = tx.clone();
    let done: WriteDone = Box::new(move |r| {
        let _ = tx.send((block, byte, r));
    });
    if let Err(done) = b.start_write_through(block * BLOCK as u64, &data, done) {
        done(b.write_through_at(block * BLOCK as u64, &data));
    }
}

fn assert_block(b: &NbdBackend, block: u64, byte: u8) {
    let mut got = vec![0u8; BLOCK];
    b.read_at(block * BLOCK as u64, &mut got).unwrap();
    assert!(
        got.iter().all(|&x| x == byte),
        "block {block} holds {} where its acknowledged write put {byte}",
        got[0]
    );
}

/// Started writes share one connection with callers that wait (reads, plain writes,
/// flushes): every started write hears Ok once, every caller gets its own bytes.
#[test]
fn started_writes_and_waiting_callers_share_a_connection() {
    let dir = tempfile::tempdir().unwrap();
    let s = Server::nbdkit(&dir.path().join("s"), &["memory", "16M"]);
    let b = Arc::new(open(&s.uri("&connections=1")));
    let (tx, rx) = mpsc::channel();
    // Waiting callers on blocks 2000.. meanwhile.
    let waiting: Vec<_> = (0..4u64)
        .map(|t| {
            let b = b.clone();
            std::thread::spawn(move || {
                for round in 0..50u8 {
                    let at = (2000 + t) * BLOCK as u64;
                    let data = vec![round ^ t as u8; BLOCK];
                    b.write_at(at, &data).unwrap();
                    if round % 10 == 0 {
                        b.sync().unwrap();
                    }
                    let mut got = vec![0u8; BLOCK];
                    b.read_at(at, &mut got).unwrap();
                    assert_eq!(got, data, "caller {t} got another's bytes");
                }
            })
        })
        .collect();
    // 64 writes in flight at a time on blocks 0..64, eight rounds, each block written
    // again only once its last write completed (the volume holds a range that long).
    let mut last = [0u8; 64];
    for round in 1..=8u8 {
        for block in 0..64u64 {
            start(&b, block, round.wrapping_mul(37) ^ block as u8, &tx);
        }
        for _ in 0..64 {
            let (block, byte, r) = rx.recv_timeout(Duration::from_secs(30)).unwrap();
            r.unwrap_or_else(|e| panic!("started write of block {block} failed: {e}"));
            last[block as usize] = byte;
        }
    }
    for w in waiting {
        w.join().unwrap();
    }
    assert!(rx.try_recv().is_err(), "a callback was called twice");
    for (block, &byte) in last.iter().enumerate() {
        assert_block(&b, block as u64, byte);
    }
}

/// Connections cut again and again under started writes: each completes Ok in the
/// end (sent again over a new connection) and the export holds it.
#[test]
fn started_writes_survive_dropped_connections() {
    let dir = tempfile::tempdir().unwrap();
    let s = Server::nbdkit(&dir.path().join("s"), &["--threads=1", "memory", "16M"]);
    let relay = CuttableRelay::start(&s.socket);
    let b = Arc::new(open(&format!("nbd://127.0.0.1:{}/?timeout=20", relay.port)));
    let (tx, rx) = mpsc::channel();
    let starter = {
        let b = b.clone();
        std::thread::spawn(move || {
            let mut acked = Vec::new();
            for round in 0..40u64 {
                for block in 0..32u64 {
                    start(&b, round * 32 + block, (round + block) as u8 | 1, &tx);
                }
                for _ in 0..32 {
                    let (block, byte, r) = rx.recv_timeout(Duration::from_secs(60)).unwrap();
                    r.unwrap_or_else(|e| panic!("started write of block {block} failed: {e}"));
                    acked.push((block, byte));
                }
            }
            acked
        })
    };
    let mut cuts = 0;
    for _ in 0..40 {
        if starter.is_finished() {
            break;
        }
        std::thread::sleep(Duration::from_millis(30));
        cuts += relay.cut();
    }
    let acked = starter.join().expect("every started write completes Ok");
    assert!(cuts > 0, "no connection was cut while the writes ran");
    assert_eq!(acked.len(), 40 * 32);
    for (block, byte) in acked {
        assert_block(&b, block, byte);
    }
}

/// A server that stops answering: started writes fail at their deadline, each once,
/// with an error that says so (never Ok for a write the server did not acknowledge).
#[test]
fn started_writes_to_a_silent_server_fail_at_the_deadline() {
    let dir = tempfile::tempdir().unwrap();
    let s = Server::nbdkit(&dir.path().join("s"), &["memory", "16M"]);
    let b = open(&s.uri("&timeout=2"));
    s.signal("-STOP");
    let (tx, rx) = mpsc::channel();
    for block in 0..8 {
        start(&b, block, 7, &tx);
    }
    for _ in 0..8 {
        let (block, _, r) = rx.recv_timeout(Duration::from_secs(30)).unwrap();
        let e = r.expect_err("no write is Ok that the server never answered");
        assert!(
            e.to_string().contains("no answer"),
            "block {block}: the error says what happened: {e}"
        );
    }
    assert!(rx.recv_timeout(Duration::from_millis(200)).is_err());
    s.signal("-CONT");
}

/// The backend's last owner is a started write's callback, running on the helper
/// thread: dropping it there ends every helper without waiting for itself.
#[test]
fn a_callback_may_drop_the_last_owner_of_the_backend() {
    let dir = tempfile::tempdir().unwrap();
    let s = Server::nbdkit(&dir.path().join("s"), &["memory", "16M"]);
    let b = Arc::new(open(&s.uri("")));
    let (tx, rx) = mpsc::channel();
    let calls = Arc::new(AtomicUsize::new(0));
    for block in 0..16u64 {
        let keep = b.clone();
        let calls = calls.clone();
        let tx = tx.clone();
        let done: WriteDone = Box::new(move |r| {
            calls.fetch_add(1, Ordering::SeqCst);
            drop(keep);
            let _ = tx.send(r);
        });
        let data = vec![3u8; BLOCK];
        if let Err(done) = b.start_write_through(block * BLOCK as u64, &data, done) {
            done(b.write_through_at(block * BLOCK as u64, &data));
        }
    }
    drop(b);
    for _ in 0..16 {
        rx.recv_timeout(Duration::from_secs(30)).unwrap().unwrap();
    }
    assert_eq!(calls.load(Ordering::SeqCst), 16);
    // The last owner let the export go (from a thread of its own): a new opener
    // gets in.
    let uri = NbdUri::parse(&s.uri("")).unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    let again = loop {
        match NbdBackend::open(&uri, true) {
            Ok(b) => break b,
            Err(e) if std::time::Instant::now() > deadline => panic!("never released: {e}"),
            Err(_) => std::thread::sleep(Duration::from_millis(50)),
        }
    };
    assert_block(&again, 15, 3);
}

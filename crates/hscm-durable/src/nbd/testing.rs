//! The fuzz target's driver (feature `testing`): the client against a server whose
//! every byte is given, so a hostile or broken server can be played byte by byte.

use std::io::Write;
use std::os::unix::net::UnixListener;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use super::wire::*;
use super::{NbdBackend, NbdUri};
use crate::device::Backend;

/// A server greeting that negotiates structured replies and gives an export of `size`
/// bytes with `flags`: what a well-behaved server sends until the transmission phase
/// (the client's own messages are read and ignored).
pub fn handshake(size: u64, flags: u16) -> Vec<u8> {
    let mut b = Vec::new();
    b.extend_from_slice(&NBD_MAGIC.to_be_bytes());
    b.extend_from_slice(&IHAVEOPT.to_be_bytes());
    b.extend_from_slice(&(FLAG_FIXED_NEWSTYLE | FLAG_NO_ZEROES).to_be_bytes());
    let reply = |b: &mut Vec<u8>, option: u32, kind: u32, data: &[u8]| {
        b.extend_from_slice(&REPLY_MAGIC.to_be_bytes());
        b.extend_from_slice(&option.to_be_bytes());
        b.extend_from_slice(&kind.to_be_bytes());
        b.extend_from_slice(&(data.len() as u32).to_be_bytes());
        b.extend_from_slice(data);
    };
    reply(&mut b, OPT_STRUCTURED_REPLY, REP_ACK, &[]);
    let mut info = INFO_EXPORT.to_be_bytes().to_vec();
    info.extend_from_slice(&size.to_be_bytes());
    info.extend_from_slice(&(flags | TX_HAS_FLAGS).to_be_bytes());
    reply(&mut b, OPT_GO, REP_INFO, &info);
    reply(&mut b, OPT_GO, REP_ACK, &[]);
    b
}

/// Connects the client to a server that sends `server` on every connection (and reads
/// whatever the client sends), then asks it for a read, a write and a flush. Every
/// failure is fine; a panic or a hang is a bug (requests have a 50 ms deadline).
/// Whether the client got through the handshake.
pub fn run_client(server: &[u8]) -> bool {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let dir = std::env::temp_dir().join(format!(
        "hscm-nbd-client-fuzz-{}-{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    ));
    std::fs::create_dir_all(&dir).expect("a scratch directory");
    let socket = dir.join("s");
    let listener = UnixListener::bind(&socket).expect("a listening socket");
    listener.set_nonblocking(true).expect("non-blocking accept");
    let stop = Arc::new(AtomicBool::new(false));
    let bytes = server.to_vec();
    let s = stop.clone();
    let serving = std::thread::spawn(move || {
        while !s.load(Ordering::Relaxed) {
            match listener.accept() {
                Ok((mut conn, _)) => {
                    let _ = conn.set_nonblocking(false);
                    let mut drain = conn.try_clone().expect("a second handle");
                    std::thread::spawn(move || {
                        let _ = std::io::copy(&mut drain, &mut std::io::sink());
                    });
                    let _ = conn.write_all(&bytes);
                    let _ = conn.shutdown(std::net::Shutdown::Write);
                }
                Err(_) => std::thread::sleep(std::time::Duration::from_millis(1)),
            }
        }
    });
    let uri = NbdUri::parse(&format!(
        "nbd+unix:///?socket={}&timeout=0.05&connections=2",
        socket.display()
    ))
    .expect("a valid URI");
    let opened = NbdBackend::open_unclaimed(&uri);
    let got_in = opened.is_ok();
    if let Ok(b) = opened {
        let n = b.len().min(8192) as usize;
        let mut buf = vec![0u8; n];
        let _ = b.read_at(0, &mut buf);
        let _ = b.write_at(0, &buf);
        let _ = b.write_many(&[(0, &buf[..]), (n as u64, &buf[..])]);
        let _ = b.sync();
        let _ = b.trim(0, n as u64);
        let _ = b.write_zeroes_at(0, n as u64);
        let _ = b.read_vectored_at(0, &mut [&mut buf[..]]);
    }
    stop.store(true, Ordering::Relaxed);
    serving.join().expect("the scripted server");
    let _ = std::fs::remove_dir_all(&dir);
    got_in
}

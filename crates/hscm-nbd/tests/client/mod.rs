//! A raw NBD client for the tests: it speaks the protocol byte by byte, so a test can
//! get any of it wrong on purpose.
#![allow(dead_code)] // each test binary uses part of it

use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use hscm_block::{BlockTarget, MemTarget};
pub use hscm_nbd::proto::*;
use hscm_nbd::{Endpoint, ExportOptions, Listener, Server};

pub const SIZE: u64 = 1 << 20;

/// A server on a Unix socket in a temporary directory, stopped when dropped.
pub struct Running {
    _dir: tempfile::TempDir,
    pub path: PathBuf,
    pub stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Drop for Running {
    fn drop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            t.join().unwrap();
        }
    }
}

/// A server of a memory target of SIZE bytes, as the export "disk".
pub fn start(read_only: bool) -> Running {
    start_with(
        Arc::new(MemTarget::new(SIZE as usize)),
        ExportOptions {
            name: "disk".into(),
            read_only,
            ..ExportOptions::default()
        },
    )
}

pub fn start_with(target: Arc<dyn BlockTarget>, export: ExportOptions) -> Running {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.sock");
    let listener = Listener::bind(&Endpoint::Unix(path.clone())).unwrap();
    let server = Arc::new(Server::new(target, export));
    let stop = Arc::new(AtomicBool::new(false));
    let s = stop.clone();
    let thread = std::thread::spawn(move || listener.serve(server, s).unwrap());
    Running {
        _dir: dir,
        path,
        stop,
        thread: Some(thread),
    }
}

/// A client mid-handshake: the greeting read, the client flags sent.
pub fn connect(path: &Path) -> UnixStream {
    let mut s = UnixStream::connect(path).unwrap();
    s.set_read_timeout(Some(std::time::Duration::from_secs(10)))
        .unwrap();
    let mut hello = [0u8; 18];
    s.read_exact(&mut hello).unwrap();
    assert_eq!(
        u64::from_be_bytes(hello[0..8].try_into().unwrap()),
        NBD_MAGIC
    );
    assert_eq!(
        u64::from_be_bytes(hello[8..16].try_into().unwrap()),
        IHAVEOPT
    );
    let flags = u16::from_be_bytes([hello[16], hello[17]]);
    assert_eq!(flags, FLAG_FIXED_NEWSTYLE | FLAG_NO_ZEROES);
    s.write_all(&(CLIENT_FIXED_NEWSTYLE | CLIENT_NO_ZEROES).to_be_bytes())
        .unwrap();
    s
}

pub fn send_option(s: &mut UnixStream, option: u32, data: &[u8]) {
    let mut v = IHAVEOPT.to_be_bytes().to_vec();
    v.extend_from_slice(&option.to_be_bytes());
    v.extend_from_slice(&(data.len() as u32).to_be_bytes());
    v.extend_from_slice(data);
    s.write_all(&v).unwrap();
}

/// One option reply: (option, reply type, data).
pub fn option_reply(s: &mut UnixStream) -> (u32, u32, Vec<u8>) {
    let mut h = [0u8; 20];
    s.read_exact(&mut h).unwrap();
    assert_eq!(u64::from_be_bytes(h[0..8].try_into().unwrap()), REPLY_MAGIC);
    let opt = u32::from_be_bytes(h[8..12].try_into().unwrap());
    let kind = u32::from_be_bytes(h[12..16].try_into().unwrap());
    let len = u32::from_be_bytes(h[16..20].try_into().unwrap());
    let mut data = vec![0u8; len as usize];
    s.read_exact(&mut data).unwrap();
    (opt, kind, data)
}

pub fn info_request(name: &str, infos: &[u16]) -> Vec<u8> {
    let mut v = (name.len() as u32).to_be_bytes().to_vec();
    v.extend_from_slice(name.as_bytes());
    v.extend_from_slice(&(infos.len() as u16).to_be_bytes());
    for i in infos {
        v.extend_from_slice(&i.to_be_bytes());
    }
    v
}

/// Negotiates with NBD_OPT_GO and returns the transmission flags.
pub fn go(s: &mut UnixStream, name: &str) -> u16 {
    go_sized(s, name, SIZE)
}

/// [`go`] with an export of `size` bytes.
pub fn go_sized(s: &mut UnixStream, name: &str, size: u64) -> u16 {
    send_option(s, OPT_GO, &info_request(name, &[]));
    let mut flags = None;
    loop {
        let (opt, kind, data) = option_reply(s);
        assert_eq!(opt, OPT_GO);
        match kind {
            REP_INFO => {
                if u16::from_be_bytes([data[0], data[1]]) == INFO_EXPORT {
                    assert_eq!(u64::from_be_bytes(data[2..10].try_into().unwrap()), size);
                    flags = Some(u16::from_be_bytes([data[10], data[11]]));
                }
            }
            REP_ACK => return flags.expect("NBD_INFO_EXPORT before the ACK"),
            other => panic!("unexpected reply {other:#x}"),
        }
    }
}

pub fn request(s: &mut UnixStream, kind: u16, flags: u16, cookie: u64, offset: u64, len: u32) {
    let mut v = REQUEST_MAGIC.to_be_bytes().to_vec();
    v.extend_from_slice(&flags.to_be_bytes());
    v.extend_from_slice(&kind.to_be_bytes());
    v.extend_from_slice(&cookie.to_be_bytes());
    v.extend_from_slice(&offset.to_be_bytes());
    v.extend_from_slice(&len.to_be_bytes());
    s.write_all(&v).unwrap();
}

/// A simple reply: (error, cookie).
pub fn simple_reply(s: &mut UnixStream) -> (u32, u64) {
    let mut h = [0u8; 16];
    s.read_exact(&mut h).unwrap();
    assert_eq!(
        u32::from_be_bytes(h[0..4].try_into().unwrap()),
        SIMPLE_REPLY_MAGIC
    );
    (
        u32::from_be_bytes(h[4..8].try_into().unwrap()),
        u64::from_be_bytes(h[8..16].try_into().unwrap()),
    )
}

pub fn write(s: &mut UnixStream, cookie: u64, offset: u64, data: &[u8]) -> u32 {
    request(
        s,
        CMD_WRITE,
        CMD_FLAG_FUA,
        cookie,
        offset,
        data.len() as u32,
    );
    s.write_all(data).unwrap();
    let (err, c) = simple_reply(s);
    assert_eq!(c, cookie);
    err
}

pub fn read(s: &mut UnixStream, cookie: u64, offset: u64, len: u32) -> Result<Vec<u8>, u32> {
    request(s, CMD_READ, 0, cookie, offset, len);
    let (err, c) = simple_reply(s);
    assert_eq!(c, cookie);
    if err != 0 {
        return Err(err);
    }
    let mut data = vec![0u8; len as usize];
    s.read_exact(&mut data).unwrap();
    Ok(data)
}

/// The connection was closed by the server.
pub fn is_closed(s: &mut UnixStream) -> bool {
    let mut b = [0u8; 1];
    matches!(s.read(&mut b), Ok(0) | Err(_))
}

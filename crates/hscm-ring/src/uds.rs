//! The baseline the ring is measured against: the same commands over a Unix stream
//! socket (request header, then data for writes; reply header, then data for reads),
//! one server thread per connection, as a local NBD-style server would do it.

use crate::WriteFlags;
use std::io::{Read, Write};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use hscm_block::BlockTarget;

use crate::error::{Error, Result};
use crate::proto::{parse, Request, Status, FLAG_FUA, OP_READ, OP_WRITE};
use crate::region::{Geometry, PROTOCOL_SECTOR};
use crate::ring::SqEntry;

const REQUEST: usize = 24;
const REPLY: usize = 8;
/// Largest transfer one request may carry.
pub const MAX_TRANSFER: u64 = 16 << 20;

fn encode(e: &SqEntry) -> [u8; REQUEST] {
    let mut b = [0u8; REQUEST];
    b[0] = e.opcode;
    b[1] = e.flags;
    b[4..8].copy_from_slice(&e.count.to_le_bytes());
    b[8..16].copy_from_slice(&e.start.to_le_bytes());
    b
}

fn decode(b: &[u8; REQUEST]) -> SqEntry {
    SqEntry {
        opcode: b[0],
        flags: b[1],
        count: u32::from_le_bytes(b[4..8].try_into().unwrap()),
        start: u64::from_le_bytes(b[8..16].try_into().unwrap()),
        ..Default::default()
    }
}

/// Serves `target` on a Unix socket until the process ends or the listener fails.
pub fn spawn_server<T: BlockTarget + ?Sized + 'static>(
    path: &Path,
    target: Arc<T>,
) -> Result<PathBuf> {
    let _ = std::fs::remove_file(path);
    let listener = UnixListener::bind(path).map_err(Error::io("binding the baseline socket"))?;
    std::thread::Builder::new()
        .name("hscm-uds-accept".into())
        .spawn(move || {
            for stream in listener.incoming().flatten() {
                let target = target.clone();
                let _ = std::thread::Builder::new()
                    .name("hscm-uds-worker".into())
                    .spawn(move || serve(stream, target.as_ref()));
            }
        })
        .map_err(Error::io("starting the baseline server"))?;
    Ok(path.to_path_buf())
}

fn serve<T: BlockTarget + ?Sized>(mut s: UnixStream, target: &T) -> std::io::Result<()> {
    // The request's data is addressed from offset 0 of this per-connection buffer.
    let geometry = Geometry {
        queues: 1,
        depth: 2,
        db_len: MAX_TRANSFER,
        volume_size: target.size(),
    };
    let mut buf = vec![0u8; REPLY + MAX_TRANSFER as usize];
    let mut req = [0u8; REQUEST];
    loop {
        s.read_exact(&mut req)?;
        let entry = decode(&req);
        let (status, len) = match parse(&entry, &geometry) {
            Ok(Request::Read { offset, len, .. }) => {
                match target.read_at(offset, &mut buf[REPLY..REPLY + len as usize]) {
                    Ok(()) => (Status::Ok, len),
                    Err(_) => (Status::IoError, 0),
                }
            }
            Ok(Request::Write {
                offset, len, flags, ..
            }) => {
                s.read_exact(&mut buf[REPLY..REPLY + len as usize])?;
                let data = &buf[REPLY..REPLY + len as usize];
                match target.write_at(offset, data, flags) {
                    Ok(()) => (Status::Ok, 0),
                    Err(_) => (Status::IoError, 0),
                }
            }
            Ok(Request::Flush) => (target.flush().map_or(Status::IoError, |()| Status::Ok), 0),
            Ok(Request::Discard { .. }) => (Status::BadOpcode, 0),
            // A bad write's data would follow; the stream cannot be resynchronised.
            Err(_) if entry.opcode == OP_WRITE => return Ok(()),
            Err(st) => (st, 0),
        };
        buf[0..4].copy_from_slice(&(status as u32).to_le_bytes());
        buf[4..8].copy_from_slice(&(len as u32).to_le_bytes());
        s.write_all(&buf[..REPLY + len as usize])?;
    }
}

/// A blocking client of the baseline server.
pub struct UdsClient {
    stream: UnixStream,
}

impl UdsClient {
    pub fn connect(path: &Path) -> Result<UdsClient> {
        let stream = UnixStream::connect(path).map_err(Error::io("connecting to the baseline"))?;
        Ok(UdsClient { stream })
    }

    fn reply(&mut self) -> Result<u32> {
        let mut r = [0u8; REPLY];
        self.stream
            .read_exact(&mut r)
            .map_err(Error::io("baseline reply"))?;
        let status = u32::from_le_bytes(r[0..4].try_into().unwrap());
        match Status::from_code(status) {
            Some(Status::Ok) => Ok(u32::from_le_bytes(r[4..8].try_into().unwrap())),
            Some(s) => Err(Error::Command(s)),
            None => Err(Error::Protocol(format!("baseline status {status}"))),
        }
    }

    pub fn read(&mut self, sector: u64, buf: &mut [u8]) -> Result<()> {
        let e = SqEntry {
            opcode: OP_READ,
            start: sector,
            count: (buf.len() as u64 / PROTOCOL_SECTOR) as u32,
            ..Default::default()
        };
        self.stream
            .write_all(&encode(&e))
            .map_err(Error::io("baseline request"))?;
        self.reply()?;
        self.stream
            .read_exact(buf)
            .map_err(Error::io("baseline data"))
    }

    pub fn write(&mut self, sector: u64, data: &[u8], flags: WriteFlags) -> Result<()> {
        let e = SqEntry {
            opcode: OP_WRITE,
            start: sector,
            count: (data.len() as u64 / PROTOCOL_SECTOR) as u32,
            flags: if flags.fua { FLAG_FUA } else { 0 },
            ..Default::default()
        };
        self.stream
            .write_all(&encode(&e))
            .map_err(Error::io("baseline request"))?;
        self.stream
            .write_all(data)
            .map_err(Error::io("baseline data"))?;
        self.reply().map(|_| ())
    }
}

//! A home on any NBD export: [`NbdBackend`] is a [`Backend`] that speaks NBD to a
//! server (nbdkit, qemu-nbd, another `hscm nbd`, or any other), so every engine can
//! keep its durable copy on storage another machine, or a distributed store, holds.
//!
//! What it promises, in the device layer's terms (see [`crate::device`]): `write_at`
//! returns Ok once the server acknowledged the write; `sync` returns Ok once a FLUSH
//! the server acknowledged covers every write that returned Ok before it. Between the
//! two, the client keeps a copy of each acknowledged but unflushed block (at most
//! [`REPLAY_MAX`] bytes; a write past it flushes first), and after a lost connection
//! writes them again before anything else: a server killed and restarted, which may
//! have lost what it had not flushed (qcow2's cached metadata, a plugin's cache), gets
//! it back before the flush that has to cover it.
//!
//! Failures: every request has a deadline (the URI's `timeout`); a lost connection is
//! made again with backoff until then, and the requests it held go out again (reads,
//! and writes the server never acknowledged; a flush after them). Past the deadline the
//! call fails with an error naming the export and what went wrong; nothing is
//! reported as written that the server did not acknowledge.

mod backend;
mod mux;
pub mod owner;
pub mod psk;
mod session;
mod stream;
#[cfg(any(test, feature = "testing"))]
pub mod testing;
pub mod uri;
pub mod wire;

use std::collections::BTreeMap;
use std::io;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use parking_lot::{Mutex, RwLock};

use crate::device::{DeviceError, RemoteHealth, IO_ALIGN};
pub use backend::NbdBackend;
use mux::Conn;
use session::{ConnectError, Data, Export, Op, Session};
use stream::TlsClient;
pub use uri::{is_nbd_uri, NbdUri};
use wire::*;

/// Acknowledged but unflushed bytes the client keeps to write again after a lost
/// connection; a write that would keep more flushes first.
pub const REPLAY_MAX: u64 = 64 << 20;
/// The largest request sent: servers must accept 32 MiB (the spec's default maximum
/// payload), and the export's own maximum where it says a smaller one.
const MAX_REQUEST: u32 = 32 << 20;
/// Requests and bytes in flight on one connection.
const MAX_IN_FLIGHT: usize = 64;
const MAX_BYTES_IN_FLIGHT: u64 = 64 << 20;
/// The first pause before connecting again; it doubles up to the cap.
const FIRST_BACKOFF: Duration = Duration::from_millis(20);
const MAX_BACKOFF: Duration = Duration::from_secs(1);

/// The copy of acknowledged, unflushed blocks, by block offset, and when each was
/// acknowledged (a flush clears what was acknowledged before it was sent).
#[derive(Default)]
struct Replay {
    blocks: BTreeMap<u64, (u64, Box<[u8]>)>,
    bytes: u64,
    seq: u64,
}

/// What every caller of an [`NbdBackend`] and its helper threads share: the
/// connections, the replay copy and the owner claim.
pub struct NbdClient {
    /// This client, for the threads that retry a started write after a lost connection.
    me: Weak<NbdClient>,
    uri: NbdUri,
    tls: Option<TlsClient>,
    export: Export,
    writable: bool,
    /// Each shared by every caller at once (see [`mux`]).
    conns: Vec<Conn>,
    next: AtomicUsize,
    /// Normal requests hold it shared; writing the replay copy again holds it alone,
    /// so no newer write is in flight while an older copy goes out.
    gate: RwLock<()>,
    replay: Mutex<Replay>,
    needs_replay: AtomicBool,
    max_request: u32,
    health: Arc<RemoteHealth>,
    /// The export less its owner block: what engines see ([`owner`]).
    usable: u64,
    /// This opener's claim (None for a read-only open).
    owner: Mutex<Option<owner::OwnerRecord>>,
    /// Why writes are refused since another opener took the export over.
    fenced: Mutex<Option<String>>,
    /// Started writes ([`started`]) queued or out on a connection.
    started: AtomicUsize,
    /// Set when the backend is dropped: its helper threads leave.
    stopping: AtomicBool,
}

impl NbdBackend {
    /// Connects to the export `uri` names and checks it can hold a volume: writable
    /// when asked, blocks no larger than [`IO_ALIGN`].
    pub fn open(uri: &NbdUri, writable: bool) -> Result<NbdBackend, DeviceError> {
        Self::open_as(uri, writable, writable)
    }

    /// Writable without claiming the export: for the scripted servers of the fuzz
    /// driver, which answer no owner-record reads.
    #[cfg(any(test, feature = "testing"))]
    pub fn open_unclaimed(uri: &NbdUri) -> Result<NbdBackend, DeviceError> {
        Self::open_as(uri, true, false)
    }

    fn open_as(uri: &NbdUri, writable: bool, claim: bool) -> Result<NbdBackend, DeviceError> {
        let tls = if uri.tls {
            Some(TlsClient::for_uri(uri).map_err(DeviceError::Invalid)?)
        } else {
            None
        };
        let deadline = Instant::now() + uri.timeout;
        let (first, export) =
            connect_with_backoff(uri, tls.as_ref(), deadline).map_err(|e| DeviceError::Io {
                what: format!("cannot reach {uri}"),
                source: e,
            })?;
        if writable && export.has(TX_READ_ONLY) {
            return Err(DeviceError::Invalid(format!(
                "{uri}: the server exports it read-only"
            )));
        }
        if export.min_block as u64 > IO_ALIGN || !export.min_block.is_power_of_two() {
            return Err(DeviceError::Invalid(format!(
                "{uri}: the export's smallest block is {} bytes; hscm writes {IO_ALIGN}-byte blocks \
                 (for nbdkit, `--filter=blocksize` makes any export take them: docs/remote.md)",
                export.min_block
            )));
        }
        let multi = export.has(TX_CAN_MULTI_CONN);
        let wanted = uri
            .connections
            .unwrap_or(if multi { uri::DEFAULT_CONNECTIONS } else { 1 });
        let count = if multi { wanted } else { 1 };
        if wanted > count {
            tracing::warn!(
                "{uri}: the server does not allow several connections to one export; using one"
            );
        }
        let mut conns = vec![Conn::new(first)];
        for _ in 1..count {
            let (s, _) =
                connect_with_backoff(uri, tls.as_ref(), deadline).map_err(|e| DeviceError::Io {
                    what: format!("cannot open a second connection to {uri}"),
                    source: e,
                })?;
            conns.push(Conn::new(s));
        }
        let max_request = MAX_REQUEST.min(export.max_block.max(IO_ALIGN as u32)) / IO_ALIGN as u32
            * IO_ALIGN as u32;
        if export.size < 2 * owner::OWNER_BLOCK {
            return Err(DeviceError::Invalid(format!(
                "{uri}: the export has {} bytes; hscm keeps its last {} for the owner record",
                export.size,
                owner::OWNER_BLOCK
            )));
        }
        let health = Arc::new(RemoteHealth::default());
        health.reachable.store(true, Ordering::Relaxed);
        let client = Arc::new_cyclic(|me| NbdClient {
            me: me.clone(),
            uri: uri.clone(),
            tls,
            export,
            writable,
            conns,
            next: AtomicUsize::new(0),
            gate: RwLock::new(()),
            replay: Mutex::new(Replay::default()),
            needs_replay: AtomicBool::new(false),
            max_request,
            health,
            usable: (export.size - owner::OWNER_BLOCK) / IO_ALIGN * IO_ALIGN,
            owner: Mutex::new(None),
            fenced: Mutex::new(None),
            started: AtomicUsize::new(0),
            stopping: AtomicBool::new(false),
        });
        if claim {
            let mine = client
                .owner_io()
                .claim(&uri.to_string(), uri.take_over)
                .map_err(|e| match e.kind() {
                    io::ErrorKind::PermissionDenied => DeviceError::Invalid(e.to_string()),
                    _ => DeviceError::Io {
                        what: format!("cannot claim {uri}"),
                        source: e,
                    },
                })?;
            *client.owner.lock() = Some(mine);
        }
        Ok(NbdBackend::around(client))
    }
}

impl NbdClient {
    /// The owner block's reads and durable writes, past what engines see.
    fn owner_io(&self) -> owner::Claim<'_> {
        owner::Claim(self)
    }

    /// Who holds the export now (None: nobody has claimed it, or it is not hscm's).
    pub fn owner_record(&self) -> io::Result<Option<owner::OwnerRecord>> {
        self.owner_io().current()
    }

    /// Reads the owner record now: Ok while this opener still owns the export (or
    /// opened it read-only); PermissionDenied, and every later write refused, once
    /// another took it over. A mirror calls it before writing when its lease on the
    /// export is old, since writes with FUA check nothing themselves.
    pub fn verify_owner(&self) -> io::Result<()> {
        self.check_owner()
    }

    /// Ok while this opener still owns the export (or opened it read-only); once
    /// another took it over, every later write fails too.
    fn check_owner(&self) -> io::Result<()> {
        if let Some(why) = self.fenced.lock().clone() {
            return Err(io::Error::new(io::ErrorKind::PermissionDenied, why));
        }
        let Some(mine) = self.owner.lock().clone() else {
            return Ok(());
        };
        self.owner_io()
            .check(&self.uri.to_string(), &mine)
            .inspect_err(|e| {
                if e.kind() == io::ErrorKind::PermissionDenied {
                    *self.fenced.lock() = Some(e.to_string());
                }
            })
    }

    pub fn uri(&self) -> &NbdUri {
        &self.uri
    }

    /// Connections open to the server (more than one where it allows multi-conn).
    pub fn connections(&self) -> usize {
        self.conns.len()
    }

    pub fn health(&self) -> Arc<RemoteHealth> {
        self.health.clone()
    }

    /// Whether the export takes flushes (a server that does not has no cache to
    /// flush: its acknowledged writes are as durable as it makes anything).
    pub fn can_flush(&self) -> bool {
        self.export.has(TX_SEND_FLUSH)
    }

    /// Writes `buf` with FUA where the server takes it (durable when it returns,
    /// without flushing anything else), else writes and flushes.
    pub fn write_durable_at(&self, offset: u64, buf: &[u8]) -> io::Result<()> {
        self.write_durable_overlapped(offset, buf, &mut || {})
    }

    /// As [`Self::write_durable_at`], calling `meanwhile` exactly once: as soon as the
    /// write is on its way (or before returning, where it never went out). So the
    /// caller's own work, such as a local copy's write and sync, overlaps the round
    /// trip without a thread of its own.
    pub fn write_durable_overlapped(
        &self,
        offset: u64,
        buf: &[u8],
        meanwhile: &mut dyn FnMut(),
    ) -> io::Result<()> {
        let mut hook: Option<&mut dyn FnMut()> = Some(meanwhile);
        let result = if self.export.has(TX_SEND_FUA) {
            self.checked(offset, buf.len() as u64, "write")
                .and_then(|()| {
                    let mut ops = self.split(CMD_WRITE, CMD_FLAG_FUA, offset, Data::Write(buf));
                    self.run_with(&mut ops, &mut hook)
                })
        } else {
            if let Some(f) = hook.take() {
                f();
            }
            self.write_plain(offset, buf).and_then(|()| self.flush())
        };
        if let Some(f) = hook.take() {
            f();
        }
        result
    }

    /// Zeroes a range on the server: NBD_CMD_WRITE_ZEROES where offered (no bytes
    /// sent), made durable before returning, so nothing of it needs the replay copy.
    pub fn write_zeroes_at(&self, offset: u64, len: u64) -> io::Result<()> {
        self.checked(offset, len, "write zeroes")?;
        if !self.export.has(TX_SEND_WRITE_ZEROES) {
            return zero_by_writing(self, offset, len);
        }
        let fua = self.export.has(TX_SEND_FUA);
        let mut ops = Vec::new();
        let mut at = offset;
        while at < offset + len {
            let n = (offset + len - at).min(self.max_request as u64);
            let flags = if fua { CMD_FLAG_FUA } else { 0 };
            ops.push(Op::new(CMD_WRITE_ZEROES, flags, at, n as u32, Data::None));
            at += n;
        }
        self.run(&mut ops)?;
        if fua {
            Ok(())
        } else {
            self.flush()
        }
    }

    /// Writes `buf` (acknowledged, not yet durable: the replay copy keeps it until a
    /// flush covers it, and a write that would keep too much flushes first).
    fn write_plain(&self, offset: u64, buf: &[u8]) -> io::Result<()> {
        self.checked(offset, buf.len() as u64, "write")?;
        if self.replay.lock().bytes + buf.len() as u64 > REPLAY_MAX {
            self.flush()?;
        }
        let mut ops = self.split(CMD_WRITE, 0, offset, Data::Write(buf));
        self.run(&mut ops)
    }

    /// Tells the server a range is no longer needed (NBD_CMD_TRIM, where offered; a
    /// hint it may ignore, so without it nothing is done).
    pub fn trim(&self, offset: u64, len: u64) -> io::Result<()> {
        self.checked(offset, len, "trim")?;
        if !self.export.has(TX_SEND_TRIM) {
            return Ok(());
        }
        let mut ops = Vec::new();
        let mut at = offset;
        while at < offset + len {
            let n = (offset + len - at).min(self.max_request as u64);
            ops.push(Op::new(CMD_TRIM, 0, at, n as u32, Data::None));
            at += n;
        }
        self.run(&mut ops)
    }

    fn checked(&self, offset: u64, len: u64, what: &str) -> io::Result<()> {
        if offset.checked_add(len).is_none_or(|end| end > self.usable) {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!(
                    "{}: {what} of {len} bytes at {offset} runs past the export's {} bytes",
                    self.uri, self.usable
                ),
            ));
        }
        if !self.writable && what != "read" {
            return Err(io::Error::new(
                io::ErrorKind::PermissionDenied,
                format!("{}: opened read-only", self.uri),
            ));
        }
        if what != "read" {
            if let Some(why) = self.fenced.lock().clone() {
                return Err(io::Error::new(io::ErrorKind::PermissionDenied, why));
            }
        }
        Ok(())
    }

    /// One request per piece of at most `max_request` bytes.
    fn split<'a>(&self, kind: u16, flags: u16, offset: u64, data: Data<'a>) -> Vec<Op<'a>> {
        let step = self.max_request as usize;
        match data {
            Data::Read(buf) => buf
                .chunks_mut(step)
                .enumerate()
                .map(|(i, c)| {
                    let at = offset + (i * step) as u64;
                    Op::new(kind, flags, at, c.len() as u32, Data::Read(c))
                })
                .collect(),
            Data::Write(buf) => buf
                .chunks(step)
                .enumerate()
                .map(|(i, c)| {
                    let at = offset + (i * step) as u64;
                    Op::new(kind, flags, at, c.len() as u32, Data::Write(c))
                })
                .collect(),
            Data::None => vec![Op::new(kind, flags, offset, 0, Data::None)],
            // Not made by callers of `split`; sent whole if it ever is.
            Data::Owned(v) => vec![Op::new(kind, flags, offset, v.len() as u32, Data::Owned(v))],
        }
    }

    /// A connection: the least loaded, starting from the next in turn.
    fn pick(&self) -> usize {
        let n = self.conns.len();
        let start = self.next.fetch_add(1, Ordering::Relaxed) % n;
        (0..n)
            .map(|i| (start + i) % n)
            .min_by_key(|&i| self.conns[i].load())
            .unwrap_or(start)
    }

    /// Keeps a copy of an acknowledged write until a flush covers it.
    fn keep_for_replay(&self, offset: u64, bytes: &[u8]) {
        if !self.can_flush() {
            return;
        }
        let mut r = self.replay.lock();
        r.seq += 1;
        let seq = r.seq;
        for (i, block) in bytes.chunks(IO_ALIGN as usize).enumerate() {
            let at = offset + i as u64 * IO_ALIGN;
            let added = block.len() as u64;
            if let Some((_, old)) = r.blocks.insert(at, (seq, block.into())) {
                r.bytes -= old.len() as u64;
            }
            r.bytes += added;
        }
    }

    /// A durable write (FUA) the server acknowledged over `[offset, offset + len)`,
    /// with its bytes (None: zeroes): the replay copy of every block it covers goes,
    /// and one it covers in part takes its bytes, so that writing the copy again after
    /// a lost connection never undoes it.
    fn forget_replay_of(&self, offset: u64, len: u64, bytes: Option<&[u8]>) {
        let mut r = self.replay.lock();
        if r.blocks.is_empty() {
            return;
        }
        let end = offset.saturating_add(len);
        // Kept blocks are at most IO_ALIGN long: any that overlaps starts past this.
        let first = offset.saturating_sub(IO_ALIGN - 1);
        let touched: Vec<u64> = r.blocks.range(first..end).map(|(at, _)| *at).collect();
        for at in touched {
            let Some((_, block)) = r.blocks.get_mut(&at) else {
                continue;
            };
            let block_end = at + block.len() as u64;
            if offset <= at && block_end <= end {
                let freed = block.len() as u64;
                r.blocks.remove(&at);
                r.bytes -= freed;
                continue;
            }
            let (from, to) = (offset.max(at), end.min(block_end));
            let part = &mut block[(from - at) as usize..(to - at) as usize];
            match bytes {
                Some(b) => {
                    part.copy_from_slice(&b[(from - offset) as usize..(to - offset) as usize])
                }
                None => part.fill(0),
            }
        }
    }

    /// Writes every kept block again on connection `conn` (made anew), with no other
    /// request in flight.
    fn replay_all(&self, conn: usize, deadline: Instant) -> io::Result<()> {
        let _alone = self.gate.write();
        if !self.needs_replay.load(Ordering::Acquire) {
            return Ok(());
        }
        // Started writes went out under the gate shared: each is answered soon, or
        // lost and handed to a thread that sends it again after this.
        while self.started.load(Ordering::Acquire) > 0 {
            if Instant::now() >= deadline {
                return Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    "started writes are still out",
                ));
            }
            std::thread::park_timeout(Duration::from_millis(1));
        }
        // An opener another took over while the link was down must not write its
        // old blocks over the new owner's.
        let mine = self.owner.lock().clone();
        if let Some(mine) = mine {
            let mut block = vec![0u8; owner::OWNER_BLOCK as usize];
            let at = self.export.size - owner::OWNER_BLOCK;
            let mut read = [Op::new(
                CMD_READ,
                0,
                at,
                block.len() as u32,
                Data::Read(&mut block),
            )];
            self.submit(&self.conns[conn], &mut read, deadline, &mut None)?;
            if let Some((_, msg)) = read[0].error.take() {
                return Err(io::Error::other(format!("reading the owner record: {msg}")));
            }
            match owner::OwnerRecord::decode(&block) {
                Some(r) if r.token == mine.token => {}
                other => {
                    let e = match other {
                        Some(r) => owner::fenced(&self.uri.to_string(), &r),
                        None => io::Error::new(
                            io::ErrorKind::PermissionDenied,
                            format!(
                                "{}: its owner record was overwritten; writes refused",
                                self.uri
                            ),
                        ),
                    };
                    *self.fenced.lock() = Some(e.to_string());
                    return Err(mark(ConnectError::permanent(e.to_string())));
                }
            }
        }
        let copy: Vec<(u64, Box<[u8]>)> = self
            .replay
            .lock()
            .blocks
            .iter()
            .map(|(at, (_, b))| (*at, b.clone()))
            .collect();
        let mut ops: Vec<Op<'_>> = copy
            .iter()
            .map(|(at, b)| Op::new(CMD_WRITE, 0, *at, b.len() as u32, Data::Write(b)))
            .collect();
        let covered = self.replay.lock().seq;
        let conn = &self.conns[conn];
        let result = self
            .submit(conn, &mut ops, deadline, &mut None)
            .and_then(|()| {
                if let Some(o) = ops.iter().find(|o| o.error.is_some()) {
                    return Err(io::Error::other(format!(
                        "writing again what the server had acknowledged: {}",
                        o.error.clone().expect("found").1
                    )));
                }
                if !self.can_flush() {
                    return Ok(());
                }
                // Flushed at once, what was written again need not be written a third time
                // if the connection drops once more.
                let mut flush = [Op::new(CMD_FLUSH, 0, 0, 0, Data::None)];
                self.submit(conn, &mut flush, deadline, &mut None)?;
                match flush[0].error.take() {
                    Some((_, msg)) => Err(io::Error::other(format!(
                        "flushing what was written again: {msg}"
                    ))),
                    None => Ok(()),
                }
            });
        match result {
            Ok(()) => {
                self.forget_flushed(covered);
                // The others may still hold connections to a server that is gone:
                // they find out on their next request and make them again.
                self.needs_replay.store(false, Ordering::Release);
                Ok(())
            }
            Err(e) => {
                conn.close();
                Err(e)
            }
        }
    }

    /// NBD_CMD_FLUSH, then forgets the replay copy of what it covered. First checks
    /// that this opener still owns the export: a flush is what makes writes count,
    /// and one another opener took over must not.
    fn flush(&self) -> io::Result<()> {
        self.check_owner()?;
        self.flush_unchecked()
    }

    fn flush_unchecked(&self) -> io::Result<()> {
        if !self.can_flush() {
            return Ok(());
        }
        let covered = self.replay.lock().seq;
        let mut ops = [Op::new(CMD_FLUSH, 0, 0, 0, Data::None)];
        self.run(&mut ops)?;
        self.forget_flushed(covered);
        Ok(())
    }

    /// Drops the replay copy of every write acknowledged up to `covered`, which a
    /// flush the server acknowledged now covers.
    fn forget_flushed(&self, covered: u64) {
        let mut r = self.replay.lock();
        let mut freed = 0;
        r.blocks.retain(|_, (seq, b)| {
            let keep = *seq > covered;
            if !keep {
                freed += b.len() as u64;
            }
            keep
        });
        r.bytes -= freed;
    }
}

impl owner::OwnerIo for NbdClient {
    fn read_owner(&self, buf: &mut [u8]) -> io::Result<()> {
        let at = self.export.size - owner::OWNER_BLOCK;
        let mut ops = self.split(CMD_READ, 0, at, Data::Read(buf));
        self.run(&mut ops)
    }

    fn write_owner(&self, bytes: &[u8]) -> io::Result<()> {
        let at = self.export.size - owner::OWNER_BLOCK;
        if self.export.has(TX_SEND_FUA) {
            let mut ops = self.split(CMD_WRITE, CMD_FLAG_FUA, at, Data::Write(bytes));
            self.run(&mut ops)
        } else {
            let mut ops = self.split(CMD_WRITE, 0, at, Data::Write(bytes));
            self.run(&mut ops)?;
            self.flush_unchecked()
        }
    }
}

/// A connection error carries whether it is permanent in its kind (InvalidData) and
/// a marker in the message, so [`NbdClient::run`] stops retrying at once.
fn mark(e: ConnectError) -> io::Error {
    if e.permanent {
        io::Error::new(
            io::ErrorKind::InvalidData,
            PermanentError(e.error.to_string()),
        )
    } else {
        e.error
    }
}

#[derive(Debug)]
struct PermanentError(String);
impl std::fmt::Display for PermanentError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}
impl std::error::Error for PermanentError {}

fn is_permanent(e: &io::Error) -> bool {
    e.get_ref()
        .is_some_and(|inner| inner.is::<PermanentError>())
}

fn connect_with_backoff(
    uri: &NbdUri,
    tls: Option<&TlsClient>,
    deadline: Instant,
) -> io::Result<(Session, Export)> {
    let started = Instant::now();
    let mut backoff = FIRST_BACKOFF;
    loop {
        let e = match Session::connect(uri, tls, deadline) {
            Ok(done) => return Ok(done),
            Err(e) if e.permanent => return Err(e.error),
            Err(e) => e.error,
        };
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            // The last real failure (refused, reset), not the deadline it ran into.
            return Err(io::Error::new(
                e.kind(),
                format!("{e} (tried for {:.1} s)", started.elapsed().as_secs_f64()),
            ));
        }
        std::thread::sleep(backoff.min(left));
        backoff = (backoff * 2).min(MAX_BACKOFF);
        if Instant::now() >= deadline {
            return Err(io::Error::new(
                e.kind(),
                format!("{e} (tried for {:.1} s)", started.elapsed().as_secs_f64()),
            ));
        }
    }
}

fn command(kind: u16) -> &'static str {
    match kind {
        CMD_READ => "read",
        CMD_WRITE => "write",
        CMD_FLUSH => "flush",
        CMD_TRIM => "trim",
        CMD_WRITE_ZEROES => "write-zeroes",
        _ => "request",
    }
}

fn zero_by_writing(c: &NbdClient, offset: u64, len: u64) -> io::Result<()> {
    let zeros = vec![0u8; len.min(4 << 20) as usize];
    let mut at = offset;
    while at < offset + len {
        let n = (offset + len - at).min(zeros.len() as u64) as usize;
        c.write_plain(at, &zeros[..n])?;
        at += n as u64;
    }
    c.flush()
}

impl NbdClient {
    /// Lets the export go (the owner record says nobody holds it), unless another
    /// opener took it over meanwhile.
    fn release_owner(&self) {
        let mine = self.owner.lock().take();
        if let Some(mine) = mine.filter(|_| self.fenced.lock().is_none()) {
            if let Err(e) = self.owner_io().release(&mine) {
                tracing::warn!("{}: could not release the owner record: {e}", self.uri);
            }
        }
    }
}

impl Drop for NbdClient {
    fn drop(&mut self) {
        // A client never wrapped in a backend (its claim failed) still holds it.
        self.release_owner();
        for c in &self.conns {
            c.close();
        }
    }
}

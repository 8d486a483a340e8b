//! The client library: connect to a server, claim a queue pair per thread, and either
//! call blocking reads and writes (split into pipelined chunks) or drive the rings
//! directly with submit/complete.

use hscm_block::WriteFlags;
use std::fs::File;
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;

use crate::buddy::{Block, Buddy};
use crate::error::{Error, Result};
use crate::proto::{self, Status};
use crate::region::{Geometry, QueuePairView, Region, QP_BROKEN, SECTOR, SERVER_CLOSED};
use crate::ring::{end_sleep, prepare_sleep, Consumer, CqEntry, Producer, SqEntry};
use crate::wait::{ring, sleep_on, WaitMode, BUSY_SPIN};
use crate::wire::{self, peer_alive, Hello, LIVENESS_PERIOD};

/// What a client asks the server for, and how it behaves.
#[derive(Debug, Clone)]
pub struct ClientOptions {
    /// Queue pairs in the region (one per thread that does I/O); 0 = server default.
    pub queues: u32,
    /// Entries per SQ and CQ; 0 = server default.
    pub depth: u32,
    /// Data-buffer bytes shared by the client's queues; 0 = server default.
    pub db_len: u64,
    /// Largest command a blocking call issues; larger requests are split and pipelined.
    pub chunk: u64,
    pub wait: WaitMode,
}

impl Default for ClientOptions {
    fn default() -> Self {
        ClientOptions {
            queues: 0,
            depth: 0,
            db_len: 0,
            chunk: 128 * 1024,
            wait: WaitMode::adaptive(),
        }
    }
}

struct Shared {
    stream: UnixStream,
    region: Region,
    buddy: Mutex<Buddy>,
    /// The buddy's free bytes, mirrored on every change (under its lock) so a queue
    /// deciding whether to keep a spare lease reads it without taking the lock: two
    /// atomic read-modify-writes fewer between one blocking call and the next.
    free_bytes: AtomicU64,
    claimed: Vec<AtomicBool>,
    /// Set while some queue waits for buffer space: others then return their spares.
    pressure: AtomicBool,
}

impl Shared {
    /// Reserves `bytes` of the data buffer, or None while no free block is that large.
    fn lease(self: &Arc<Shared>, bytes: u64) -> Option<Lease> {
        let block = {
            let mut buddy = self.buddy.lock();
            let block = buddy.alloc(bytes)?;
            self.free_bytes.store(buddy.free_bytes(), Ordering::Relaxed);
            block
        };
        Some(Lease {
            shared: self.clone(),
            block,
            len: bytes,
        })
    }

    fn check_server(&self) -> Result<()> {
        if self.region.server_state().load(Ordering::Acquire) == SERVER_CLOSED {
            return Err(Error::Disconnected);
        }
        Ok(())
    }
}

/// Fails once the server has stopped serving queue `index` (it saw an impossible ring
/// index there).
fn check_broken(qp: &QueuePairView<'_>, index: u32) -> Result<()> {
    if qp.state.load(Ordering::Acquire) == QP_BROKEN {
        return Err(Error::QueueBroken {
            queue: index,
            reason: "the server saw an impossible ring index".into(),
        });
    }
    Ok(())
}

/// A connection to a server: one region, several queue pairs, one data buffer.
#[derive(Clone)]
pub struct Client {
    shared: Arc<Shared>,
    chunk: u64,
    wait: WaitMode,
}

impl Client {
    /// Connects to the server's control socket and maps the region it hands over.
    pub fn connect(path: &Path, opts: &ClientOptions) -> Result<Client> {
        let mut stream = UnixStream::connect(path).map_err(|e| Error::Io {
            what: format!("connecting to {}", path.display()),
            source: e,
        })?;
        check_server(&stream, path)?;
        let hello = Hello {
            queues: opts.queues,
            depth: opts.depth,
            db_len: opts.db_len,
        };
        if let Err(e) = wire::send_hello(&mut stream, &hello) {
            // A busy server refuses without reading the hello and closes; its reason
            // is still waiting in the socket, and is the error worth reporting.
            return Err(match wire::recv_reply(&mut stream) {
                Err(refused @ Error::Refused(_)) => refused,
                _ => e,
            });
        }
        let (fd, region_len) = wire::recv_reply(&mut stream)?;
        let file = File::from(fd);
        let region = Region::attach(&file)?;
        if region.geometry().region_len() != region_len {
            return Err(Error::BadRegion(
                "reply and region disagree on its length".into(),
            ));
        }
        let g = region.geometry();
        let chunk = opts
            .chunk
            .max(SECTOR)
            .next_multiple_of(SECTOR)
            // With several queues a piece never needs more than half the buffer, the
            // half that kept spares always leave free (Queue::may_keep).
            .min(if g.queues > 1 { g.db_len / 2 } else { g.db_len })
            .min(u64::from(u32::MAX) / SECTOR * SECTOR);
        Ok(Client {
            shared: Arc::new(Shared {
                stream,
                buddy: Mutex::new(Buddy::new(g.db_len, SECTOR as u32)),
                free_bytes: AtomicU64::new(g.db_len),
                claimed: (0..g.queues).map(|_| AtomicBool::new(false)).collect(),
                pressure: AtomicBool::new(false),
                region,
            }),
            chunk,
            wait: opts.wait,
        })
    }

    pub fn geometry(&self) -> Geometry {
        self.shared.region.geometry()
    }

    /// Claims a free queue pair for the calling thread.
    pub fn queue(&self) -> Result<Queue> {
        let g = self.geometry();
        for (i, c) in self.shared.claimed.iter().enumerate() {
            if c.compare_exchange(false, true, Ordering::AcqRel, Ordering::Relaxed)
                .is_ok()
            {
                let qp = self.shared.region.queue_pair(i as u32);
                let depth = g.depth;
                return Ok(Queue {
                    shared: self.shared.clone(),
                    index: i as u32,
                    sq_tail: qp.sq_tail.load(Ordering::Relaxed),
                    sq_seen_head: qp.sq_tail.load(Ordering::Relaxed).wrapping_sub(depth),
                    cq_head: qp.cq_head.load(Ordering::Relaxed),
                    pending: (0..depth).map(|_| None).collect(),
                    free_slots: (0..depth as u16).rev().collect(),
                    generation: 0,
                    chunk: self.chunk,
                    wait: self.wait,
                    spare: None,
                    piece_of: Vec::new(),
                    in_flight_bytes: 0,
                });
            }
        }
        Err(Error::Invalid(format!(
            "all {} queue pairs are in use",
            g.queues
        )))
    }

    /// Reserves `bytes` of the data buffer, or None while it is all in use.
    pub fn lease(&self, bytes: u64) -> Option<Lease> {
        self.shared.lease(bytes)
    }
}

/// A piece of the data buffer reserved for one command; freed when dropped.
pub struct Lease {
    shared: Arc<Shared>,
    block: Block,
    len: u64,
}

impl Lease {
    pub fn len(&self) -> u64 {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Index of the lease in the data buffer, in sectors (the SQ entry's buffer field).
    pub fn index(&self) -> u32 {
        (self.block.offset / SECTOR) as u32
    }

    pub fn write(&mut self, at: u64, src: &[u8]) {
        assert!(at + src.len() as u64 <= self.len, "write past the lease");
        self.shared.region.db_write(self.block.offset + at, src);
    }

    /// The same block, used for `len` bytes (at most the block's size).
    fn resized(mut self, len: u64) -> Lease {
        debug_assert!(len <= self.block.len);
        self.len = len;
        self
    }

    pub fn read(&self, at: u64, dst: &mut [u8]) {
        assert!(at + dst.len() as u64 <= self.len, "read past the lease");
        self.shared.region.db_read(self.block.offset + at, dst);
    }

    /// The lease's bytes where they are, for a lease no command is using: a held
    /// `Lease` is one (while a command runs the queue keeps its lease).
    fn in_place(&self) -> &[u8] {
        // SAFETY: the buddy allocator gave this block to this lease alone, and no
        // command naming it is in flight (above), so the server does not write it
        // while the borrow of self lives.
        unsafe {
            self.shared
                .region
                .db_slice(self.block.offset, self.len as usize)
        }
    }
}

impl Drop for Lease {
    fn drop(&mut self) {
        let mut buddy = self.shared.buddy.lock();
        buddy.free(self.block);
        self.shared
            .free_bytes
            .store(buddy.free_bytes(), Ordering::Relaxed);
    }
}

/// A command for [`Queue::submit`]. Sectors are 512 bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    Read {
        sector: u64,
        count: u32,
    },
    Write {
        sector: u64,
        count: u32,
        flags: WriteFlags,
    },
    ReadBytes {
        offset: u64,
        len: u32,
    },
    WriteBytes {
        offset: u64,
        len: u32,
        flags: WriteFlags,
    },
    Flush,
    Discard {
        sector: u64,
        count: u32,
        flags: WriteFlags,
    },
}

impl Op {
    fn entry(&self, buffer: u32) -> SqEntry {
        let none = WriteFlags::NONE;
        let (opcode, start, count, flags) = match *self {
            Op::Read { sector, count } => (proto::OP_READ, sector, count, none),
            Op::Write {
                sector,
                count,
                flags,
            } => (proto::OP_WRITE, sector, count, flags),
            Op::ReadBytes { offset, len } => (proto::OP_READ_BYTES, offset, len, none),
            Op::WriteBytes { offset, len, flags } => (proto::OP_WRITE_BYTES, offset, len, flags),
            Op::Flush => (proto::OP_FLUSH, 0, 0, none),
            Op::Discard {
                sector,
                count,
                flags,
            } => (proto::OP_DISCARD, sector, count, flags),
        };
        SqEntry {
            opcode,
            start,
            count,
            buffer,
            flags: if flags.fua { proto::FLAG_FUA } else { 0 },
            ..Default::default()
        }
    }

    fn buffer_bytes(&self) -> u64 {
        match *self {
            Op::Read { count, .. } | Op::Write { count, .. } => u64::from(count) * SECTOR,
            Op::ReadBytes { len, .. } | Op::WriteBytes { len, .. } => u64::from(len),
            Op::Flush | Op::Discard { .. } => 0,
        }
    }
}

/// A finished command: its id, how it ended, and its lease back for reading.
pub struct Completion {
    pub id: u32,
    /// Bytes transferred, or the status the server answered.
    pub result: std::result::Result<u32, Status>,
    pub lease: Option<Lease>,
}

/// One blocking transfer, split into chunks by [`Queue::io`].
struct Transfer {
    write: bool,
    /// Byte-range commands (any offset/length) rather than whole sectors.
    bytes_mode: bool,
    offset: u64,
    len: usize,
    flags: WriteFlags,
}

/// One queue pair, owned by one thread (Send, not Sync): no locks on its fast path.
pub struct Queue {
    shared: Arc<Shared>,
    index: u32,
    sq_tail: u32,
    /// The server's SQ head as last read (see [`Producer::room_for`]).
    sq_seen_head: u32,
    cq_head: u32,
    /// Leases of commands in flight, by slot (the low 16 bits of the command id).
    pending: Vec<Option<Option<Lease>>>,
    free_slots: Vec<u16>,
    generation: u16,
    chunk: u64,
    wait: WaitMode,
    /// The last lease a blocking call finished with, kept for the next one so the
    /// common case skips the shared allocator.
    spare: Option<Lease>,
    /// Which piece of a blocking call each slot carries (kept to avoid an allocation
    /// per call).
    piece_of: Vec<usize>,
    /// Data-buffer bytes of the commands in flight: an adaptive wait spins longer for
    /// more (see [`WaitMode::spin_for`]).
    in_flight_bytes: u64,
}

impl Queue {
    pub fn index(&self) -> u32 {
        self.index
    }

    /// Commands submitted and not yet completed.
    pub fn in_flight(&self) -> u32 {
        self.pending.len() as u32 - self.free_slots.len() as u32
    }

    pub fn set_wait(&mut self, wait: WaitMode) {
        self.wait = wait;
    }

    pub fn client_lease(&self, bytes: u64) -> Option<Lease> {
        self.shared.lease(bytes)
    }

    /// Queues one command. Its lease must hold the command's bytes (write data already
    /// in place). Fails when `depth` commands are already in flight.
    pub fn submit(&mut self, op: Op, lease: Option<Lease>) -> Result<u32> {
        let need = op.buffer_bytes();
        let index = match (&lease, need) {
            (_, 0) => 0,
            (Some(l), n) if l.len() >= n => l.index(),
            _ => {
                return Err(Error::Invalid(format!(
                    "{op:?} needs a lease of {need} bytes"
                )))
            }
        };
        let slot = self.claim_slot(lease)?;
        let mut entry = op.entry(if need == 0 { 0 } else { index });
        entry.id = slot;
        self.push(&entry)?;
        Ok(slot)
    }

    /// Queues an entry exactly as given (no checks): for protocol tests and fuzzing.
    /// Its completion comes back with id `entry.id` replaced by the returned id.
    #[cfg(feature = "testing")]
    pub fn submit_raw(&mut self, entry: SqEntry) -> Result<u32> {
        let id = self.claim_slot(None)?;
        self.push(&SqEntry { id, ..entry })?;
        Ok(id)
    }

    /// Publishes `tail` as this queue's SQ tail, whatever it is: for protocol tests of
    /// what the server does with an impossible index. The queue is unusable afterwards.
    #[cfg(feature = "testing")]
    pub fn publish_raw_sq_tail(&mut self, tail: u32) {
        let qp = self.shared.region.queue_pair(self.index);
        qp.sq_tail.store(tail, Ordering::Release);
        ring(self.shared.region.server_doorbell());
    }

    /// Frees the slot of a command that is over, returning its lease (None when no
    /// command holds the slot).
    fn forget_slot(&mut self, slot: usize) -> Option<Option<Lease>> {
        let lease = self.pending.get_mut(slot).and_then(Option::take)?;
        self.in_flight_bytes -= lease.as_ref().map_or(0, Lease::len);
        self.free_slots.push(slot as u16);
        Some(lease)
    }

    fn claim_slot(&mut self, lease: Option<Lease>) -> Result<u32> {
        self.shared.check_server()?;
        let slot = self
            .free_slots
            .pop()
            .ok_or_else(|| Error::Invalid("queue full: reap completions first".into()))?;
        self.in_flight_bytes += lease.as_ref().map_or(0, Lease::len);
        self.pending[slot as usize] = Some(lease);
        self.generation = self.generation.wrapping_add(1);
        Ok(u32::from(slot) | u32::from(self.generation) << 16)
    }

    fn push(&mut self, entry: &SqEntry) -> Result<()> {
        let g = self.shared.region.geometry();
        let qp = self.shared.region.queue_pair(self.index);
        let mut sq = Producer::at(
            qp.sq_head,
            qp.sq_tail,
            g.depth,
            self.sq_tail,
            self.sq_seen_head,
        );
        // In flight <= depth, so the SQ has room unless the server's head is wrong.
        if !sq.room_for(1).is_ok_and(|n| n > 0) {
            drop(self.forget_slot((entry.id & 0xffff) as usize));
            return Err(Error::Protocol(format!(
                "SQ of queue {} has no room with {} commands in flight: the server's head is wrong",
                self.index,
                self.in_flight()
            )));
        }
        qp.sq[sq.slot(0)].fill(entry, sq.position());
        sq.publish(1);
        self.sq_tail = sq.position();
        self.sq_seen_head = sq.seen_head();
        ring(self.shared.region.server_doorbell());
        Ok(())
    }

    /// The next completion if one is ready.
    pub fn try_complete(&mut self) -> Result<Option<Completion>> {
        let qp = self.shared.region.queue_pair(self.index);
        match self.take_cq(&qp) {
            Some(e) => self.accept(e).map(Some),
            None => {
                check_broken(&qp, self.index)?;
                Ok(None)
            }
        }
    }

    /// Waits for the next completion (spinning or sleeping per the wait mode).
    pub fn complete(&mut self) -> Result<Completion> {
        if self.in_flight() == 0 {
            return Err(Error::Invalid("nothing in flight".into()));
        }
        let e = self.wait_cq()?;
        self.accept(e)
    }

    /// The CQ entry at this queue's head, if the server has put it there, with its slot
    /// handed back.
    fn take_cq(&self, qp: &QueuePairView<'_>) -> Option<CqEntry> {
        let depth = qp.cq.len() as u32;
        // Only the slot at the head is polled (see crate::ring).
        let mut cq = Consumer::at(qp.cq_head, qp.cq_tail, depth, self.cq_head);
        let e = qp.cq[cq.slot(0)].take(cq.position())?;
        cq.release(1);
        Some(e)
    }

    /// A taken completion's bookkeeping: the head moves on, the command's slot and
    /// lease come back, its status is decoded.
    fn accept(&mut self, e: CqEntry) -> Result<Completion> {
        self.cq_head = self.cq_head.wrapping_add(1);
        let slot = (e.id & 0xffff) as usize;
        let Some(lease) = self.forget_slot(slot) else {
            return Err(Error::Protocol(format!(
                "completion for unknown command id {:#x}",
                e.id
            )));
        };
        let result = match Status::from_code(e.status) {
            Some(Status::Ok) => Ok(e.len),
            Some(s) => Err(s),
            None => Err(Status::IoError),
        };
        Ok(Completion {
            id: e.id,
            result,
            lease,
        })
    }

    /// Polls (and, per the wait mode, sleeps) until the CQ entry at the head arrives.
    /// The queue pair is located once: each poll is one load of the slot's mark, the
    /// shortest loop between the server's store and this side seeing it. The queue's
    /// state and the clock are read once per 32 polls.
    fn wait_cq(&self) -> Result<CqEntry> {
        let qp = self.shared.region.queue_pair(self.index);
        // A completion already waiting costs no clock read.
        if let Some(e) = self.take_cq(&qp) {
            return Ok(e);
        }
        let start = Instant::now();
        let spin = self.wait.spin_for(self.in_flight_bytes);
        let mut spins = 0u32;
        let mut last_check = start;
        // Adaptive: poll for BUSY_SPIN, then give the core to whoever else is runnable
        // (the server, on a machine with fewer cores than threads) between polls, then
        // sleep.
        let mut busy = true;
        loop {
            if let Some(e) = self.take_cq(&qp) {
                return Ok(e);
            }
            spins = spins.wrapping_add(1);
            let every_32 = spins % 32 == 0;
            if every_32 {
                check_broken(&qp, self.index)?;
            }
            let spinning = match spin {
                None => true,
                Some(d) if d.is_zero() => false,
                Some(_) if !every_32 => true,
                Some(d) => {
                    let waited = start.elapsed();
                    busy = waited < BUSY_SPIN;
                    waited < d
                }
            };
            if spinning {
                if busy || spin.is_none() {
                    std::hint::spin_loop();
                } else {
                    std::thread::yield_now();
                }
                if spin.is_none() && spins % 4096 == 0 && last_check.elapsed() > LIVENESS_PERIOD {
                    last_check = Instant::now();
                    self.check_alive()?;
                }
                continue;
            }
            check_broken(&qp, self.index)?;
            let w = prepare_sleep(qp.cq_doorbell);
            let ready = Consumer::at(qp.cq_head, qp.cq_tail, qp.cq.len() as u32, self.cq_head)
                .available()
                .map_err(|b| {
                    Error::Protocol(format!(
                        "CQ tail {} is more than a ring ahead of head {}",
                        b.theirs, b.ours
                    ))
                })?;
            if ready == 0 {
                sleep_on(qp.cq_doorbell, w, LIVENESS_PERIOD);
            }
            end_sleep(qp.cq_doorbell);
            if ready == 0 && last_check.elapsed() >= LIVENESS_PERIOD {
                last_check = Instant::now();
                self.check_alive()?;
            }
        }
    }

    fn check_alive(&self) -> Result<()> {
        self.shared.check_server()?;
        if !peer_alive(&self.shared.stream) {
            return Err(Error::Disconnected);
        }
        Ok(())
    }

    /// Whether a finished lease may stay with this queue for its next call: only while
    /// nobody waits for space and half the buffer stays free for the other queues, so
    /// spares can never starve them.
    fn may_keep(&self) -> bool {
        !self.shared.pressure.load(Ordering::Relaxed)
            && self.shared.free_bytes.load(Ordering::Relaxed)
                >= self.shared.region.geometry().db_len / 2
    }

    /// A lease of `bytes`, waiting for other queues of this client to return space.
    fn lease_waiting(&mut self, bytes: u64) -> Result<Lease> {
        let mut tries = 0u32;
        loop {
            if let Some(l) = self.client_lease(bytes) {
                if tries > 0 {
                    self.shared.pressure.store(false, Ordering::Relaxed);
                }
                return Ok(l);
            }
            self.shared.pressure.store(true, Ordering::Relaxed);
            tries += 1;
            if tries % 1024 == 0 {
                self.check_alive()?;
            }
            std::thread::yield_now();
        }
    }

    /// A lease of `bytes` for a queue with nothing in flight: the spare if it is large
    /// enough, else (the spare given back first) one waited for.
    fn spare_or_wait(&mut self, bytes: u64) -> Result<Lease> {
        match self.spare.take_if(|l| l.block.len >= bytes) {
            Some(l) => Ok(l.resized(bytes)),
            None => {
                self.spare = None;
                self.lease_waiting(bytes)
            }
        }
    }

    /// Keeps a finished lease as the spare if there is none and keeping is fair
    /// ([`Queue::may_keep`]); frees it otherwise.
    fn keep_spare(&mut self, lease: Lease) {
        if self.spare.is_none() && self.may_keep() {
            self.spare = Some(lease);
        }
    }

    /// Drains every command in flight (after an error), keeping the first error.
    fn drain(&mut self) {
        while self.in_flight() > 0 {
            if self.complete().is_err() {
                break;
            }
        }
    }

    fn io(
        &mut self,
        t: Transfer,
        mut fill: impl FnMut(usize, &mut Lease),
        mut take: impl FnMut(usize, &Lease),
    ) -> Result<()> {
        let Transfer {
            write,
            bytes_mode,
            offset,
            len,
            flags,
        } = t;
        if !bytes_mode && (offset % SECTOR != 0 || len as u64 % SECTOR != 0) {
            return Err(Error::Invalid(format!(
                "sector I/O of {len} bytes at {offset} is not in whole 512-byte sectors"
            )));
        }
        let chunk = self.chunk as usize;
        let pieces = len.div_ceil(chunk);
        let mut piece_of = std::mem::take(&mut self.piece_of);
        piece_of.resize(self.pending.len(), usize::MAX);
        let mut next = 0;
        let mut done = 0;
        let mut first_error: Option<Error> = None;
        while done < pieces {
            while first_error.is_none() && next < pieces && (self.free_slots.len() as u32) > 0 {
                let at = next * chunk;
                let n = chunk.min(len - at);
                let mut lease = if self.in_flight() == 0 {
                    self.spare_or_wait(n as u64)?
                } else if let Some(l) = self.spare.take_if(|l| l.block.len >= n as u64) {
                    l.resized(n as u64)
                } else {
                    match self.client_lease(n as u64) {
                        Some(l) => l,
                        None => break,
                    }
                };
                if write {
                    fill(at, &mut lease);
                }
                let pos = offset + at as u64;
                let op = match (write, bytes_mode) {
                    (false, false) => Op::Read {
                        sector: pos / SECTOR,
                        count: (n as u64 / SECTOR) as u32,
                    },
                    (true, false) => Op::Write {
                        sector: pos / SECTOR,
                        count: (n as u64 / SECTOR) as u32,
                        flags,
                    },
                    (false, true) => Op::ReadBytes {
                        offset: pos,
                        len: n as u32,
                    },
                    (true, true) => Op::WriteBytes {
                        offset: pos,
                        len: n as u32,
                        flags,
                    },
                };
                let id = self.submit(op, Some(lease))?;
                piece_of[(id & 0xffff) as usize] = next;
                next += 1;
            }
            if self.in_flight() == 0 {
                break;
            }
            let c = self.complete()?;
            let piece = piece_of[(c.id & 0xffff) as usize];
            done += 1;
            match c.result {
                Ok(_) if !write => {
                    if let Some(l) = &c.lease {
                        take(piece * chunk, l);
                    }
                }
                Ok(_) => {}
                Err(s) => {
                    first_error.get_or_insert(Error::Command(s));
                }
            }
            if let Some(l) = c.lease {
                self.keep_spare(l);
            }
            if first_error.is_some() && next < pieces {
                // Stop issuing; collect what is in flight.
                self.drain();
                break;
            }
        }
        self.piece_of = piece_of;
        match first_error {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }

    /// Reads whole sectors starting at `sector` into `buf` (a multiple of 512 bytes).
    pub fn read(&mut self, sector: u64, buf: &mut [u8]) -> Result<()> {
        self.read_into(false, sector_offset(sector)?, buf)
    }

    /// Reads any byte range of the volume.
    pub fn read_bytes(&mut self, offset: u64, buf: &mut [u8]) -> Result<()> {
        self.read_into(true, offset, buf)
    }

    /// Writes whole sectors. `WriteFlags::FUA` makes the write durable when this
    /// returns; without it the target's own durability applies (see docs/design.md).
    pub fn write(&mut self, sector: u64, data: &[u8], flags: WriteFlags) -> Result<()> {
        self.write_from(false, sector_offset(sector)?, data, flags)
    }

    /// Writes any byte range of the volume.
    pub fn write_bytes(&mut self, offset: u64, data: &[u8], flags: WriteFlags) -> Result<()> {
        self.write_from(true, offset, data, flags)
    }

    /// Reads `len` bytes at byte `offset` and hands them to `f` where the server put
    /// them, in this client's data buffer: the only copy is the server's, from the
    /// volume's RAM (the paper's single transfer into the host buffer). One command,
    /// whatever the split size: pipelining pieces pays only when each is copied out
    /// while the next is read. Needs `len` contiguous bytes of the data buffer and no
    /// other command in flight on this queue.
    pub fn read_in_place<R>(
        &mut self,
        offset: u64,
        len: usize,
        f: impl FnOnce(&[u8]) -> R,
    ) -> Result<R> {
        if len == 0 {
            return Ok(f(&[]));
        }
        let db_len = self.shared.region.geometry().db_len;
        if len as u64 > db_len || len > u32::MAX as usize {
            return Err(Error::Invalid(format!(
                "an in-place read of {len} bytes needs that much contiguous data buffer; this client's is {db_len} bytes (read_bytes splits instead)"
            )));
        }
        if self.in_flight() > 0 {
            return Err(Error::Invalid(format!(
                "an in-place read needs an idle queue; {} commands are in flight (reap them first)",
                self.in_flight()
            )));
        }
        let lease = self.spare_or_wait(len as u64)?;
        self.submit(
            Op::ReadBytes {
                offset,
                len: len as u32,
            },
            Some(lease),
        )?;
        let c = self.complete()?;
        let lease = c.lease.ok_or_else(|| {
            Error::Protocol(format!(
                "completion {:#x} came back without its lease",
                c.id
            ))
        })?;
        let out = match c.result {
            Ok(n) if n as usize == len => Ok(f(lease.in_place())),
            Ok(n) => Err(Error::Protocol(format!(
                "read of {len} bytes at {offset} completed with {n}"
            ))),
            Err(s) => Err(Error::Command(s)),
        };
        self.keep_spare(lease);
        out
    }

    fn read_into(&mut self, bytes_mode: bool, offset: u64, buf: &mut [u8]) -> Result<()> {
        let t = Transfer {
            write: false,
            bytes_mode,
            offset,
            len: buf.len(),
            flags: WriteFlags::NONE,
        };
        // Each lease holds exactly its piece.
        self.io(
            t,
            |_, _| {},
            |at, l| l.read(0, &mut buf[at..at + l.len() as usize]),
        )
    }

    fn write_from(
        &mut self,
        bytes_mode: bool,
        offset: u64,
        data: &[u8],
        flags: WriteFlags,
    ) -> Result<()> {
        let t = Transfer {
            write: true,
            bytes_mode,
            offset,
            len: data.len(),
            flags,
        };
        self.io(
            t,
            |at, l| l.write(0, &data[at..at + l.len() as usize]),
            |_, _| {},
        )
    }

    fn single(&mut self, op: Op) -> Result<()> {
        self.submit(op, None)?;
        match self.complete()?.result {
            Ok(_) => Ok(()),
            Err(s) => Err(Error::Command(s)),
        }
    }

    /// Makes every completed write durable.
    pub fn flush(&mut self) -> Result<()> {
        self.single(Op::Flush)
    }

    /// The sectors read as zeros afterwards.
    pub fn discard(&mut self, sector: u64, count: u32, flags: WriteFlags) -> Result<()> {
        self.single(Op::Discard {
            sector,
            count,
            flags,
        })
    }
}

impl Drop for Queue {
    fn drop(&mut self) {
        // Completions still owed to this queue must not reach its next owner.
        self.drain();
        self.spare = None;
        if self.in_flight() == 0 {
            self.shared.claimed[self.index as usize].store(false, Ordering::Release);
        }
    }
}

fn sector_offset(sector: u64) -> Result<u64> {
    sector
        .checked_mul(SECTOR)
        .ok_or_else(|| Error::Invalid(format!("sector {sector} is beyond any volume")))
}

/// Whether a server running as `server_uid` may serve a client running as `my_uid`:
/// one of the client's own, or root's. Anyone else could have bound the socket's
/// name first (in /dev/shm, which every user may write) to read what the client
/// writes.
pub fn trusted_server(server_uid: u32, my_uid: u32) -> bool {
    server_uid == my_uid || server_uid == 0
}

/// Refuses a server that runs as another user than this process's or root
/// (SO_PEERCRED, which the kernel fills in: the peer cannot lie about it).
fn check_server(stream: &UnixStream, path: &Path) -> Result<()> {
    let peer = rustix::net::sockopt::get_socket_peercred(stream).map_err(|e| Error::Io {
        what: format!("asking who serves {}", path.display()),
        source: e.into(),
    })?;
    let me = rustix::process::geteuid().as_raw();
    if !trusted_server(peer.uid.as_raw(), me) {
        return Err(Error::Refused(format!(
            "the server at {} runs as uid {}, neither this process's uid {me} nor root: not trusting it with data",
            path.display(),
            peer.uid.as_raw()
        )));
    }
    Ok(())
}

/// Waits `timeout` for `path` to accept connections (a server starting up).
pub fn wait_for_server(path: &Path, timeout: Duration) -> Result<()> {
    let start = Instant::now();
    loop {
        match UnixStream::connect(path) {
            Ok(_) => return Ok(()),
            Err(e) if start.elapsed() > timeout => {
                return Err(Error::Io {
                    what: format!("waiting for {}", path.display()),
                    source: e,
                })
            }
            Err(_) => std::thread::sleep(Duration::from_millis(10)),
        }
    }
}

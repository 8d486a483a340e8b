//! One queue pair, owned by one thread: commands submitted to its SQ, completions
//! taken from its CQ, and how a thread waits for them.

mod blocking;

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Instant;

use hscm_block::WriteFlags;

use crate::error::{Error, Result};
use crate::proto::{self, Status};
use crate::region::{QueuePairView, PROTOCOL_SECTOR};
use crate::ring::{end_sleep, prepare_sleep, Consumer, CqEntry, Producer, SqEntry};
use crate::wait::{ring, sleep_on, WaitMode, BUSY_SPIN};
use crate::wire::{peer_alive, LIVENESS_PERIOD};

use super::{check_broken, Lease, Shared};

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
            Op::Read { count, .. } | Op::Write { count, .. } => u64::from(count) * PROTOCOL_SECTOR,
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
    /// The queue of pair `index`, which the caller has just claimed.
    pub(super) fn claimed(shared: Arc<Shared>, index: u32, chunk: u64, wait: WaitMode) -> Queue {
        let qp = shared.region.queue_pair(index);
        let depth = shared.region.geometry().depth;
        Queue {
            sq_tail: qp.sq_tail.load(Ordering::Relaxed),
            sq_seen_head: qp.sq_tail.load(Ordering::Relaxed).wrapping_sub(depth),
            cq_head: qp.cq_head.load(Ordering::Relaxed),
            pending: (0..depth).map(|_| None).collect(),
            free_slots: (0..depth as u16).rev().collect(),
            generation: 0,
            chunk,
            wait,
            spare: None,
            piece_of: Vec::new(),
            in_flight_bytes: 0,
            shared,
            index,
        }
    }

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

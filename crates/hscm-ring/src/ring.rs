//! Single-producer single-consumer rings over index words in shared memory, and the
//! sleep/wake handshake both sides use before blocking.
//!
//! Each ring has a producer-owned `tail` and a consumer-owned `head`, free-running
//! `u32` counters; ring position `p` lives in slot `p & (depth - 1)`. The producer
//! fills a slot with relaxed stores and marks it last, with a release store of the
//! slot's `seq` word (`p + 1`, so a zeroed region shows nothing filled), then
//! publishes `tail`. The consumer's fast path polls the slot at its head: an acquire
//! load of `seq` equal to `head + 1` means the slot holds that position, whole. It
//! copies the entry out and hands the slot back with a release store of `head`.
//!
//! Polling the slot rather than the tail is NVMe's phase tag in another form: each
//! command then crosses between the cores as one cache line, not two (slot and tail).
//! The tail stays for the side about to sleep, which checks it once (and for the
//! plausibility checks). The peer is another process and may be hostile: every index
//! read from it is checked (never more than `depth` ahead) before use, and a `seq`
//! that is wrong only means "not filled yet".

use crate::atomic::{AtomicU32, AtomicU64, Ordering};

/// The peer published an index that cannot be right (more than `depth` slots ahead).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Implausible {
    pub ours: u32,
    pub theirs: u32,
}

/// One submission-queue entry as it sits in shared memory (32 bytes, see docs/ring.md).
#[repr(C)]
pub struct SqSlot {
    pub id: AtomicU32,
    /// opcode | flags << 8 | reserved << 16.
    pub op: AtomicU32,
    pub count: AtomicU32,
    pub buffer: AtomicU32,
    pub start: AtomicU64,
    pub reserved: AtomicU32,
    /// Ring position + 1 of the entry the slot holds (see the module comment).
    pub seq: AtomicU32,
}

/// One completion-queue entry (16 bytes).
#[repr(C)]
pub struct CqSlot {
    pub id: AtomicU32,
    pub status: AtomicU32,
    pub len: AtomicU32,
    /// Ring position + 1 of the entry the slot holds.
    pub seq: AtomicU32,
}

/// A submission-queue entry copied out of (or about to go into) shared memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct SqEntry {
    pub id: u32,
    pub opcode: u8,
    pub flags: u8,
    pub reserved16: u16,
    pub count: u32,
    pub buffer: u32,
    pub start: u64,
    pub reserved32: u32,
}

/// A completion-queue entry copied out of shared memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct CqEntry {
    pub id: u32,
    pub status: u32,
    pub len: u32,
}

/// The `seq` word that marks a slot as holding ring position `pos`.
fn seq_of(pos: u32) -> u32 {
    pos.wrapping_add(1)
}

impl SqSlot {
    /// Fills the slot with `e` as ring position `pos`; the mark goes last.
    pub fn fill(&self, e: &SqEntry, pos: u32) {
        self.id.store(e.id, Ordering::Relaxed);
        let op = u32::from(e.opcode) | u32::from(e.flags) << 8 | u32::from(e.reserved16) << 16;
        self.op.store(op, Ordering::Relaxed);
        self.count.store(e.count, Ordering::Relaxed);
        self.buffer.store(e.buffer, Ordering::Relaxed);
        self.start.store(e.start, Ordering::Relaxed);
        self.reserved.store(e.reserved32, Ordering::Relaxed);
        self.seq.store(seq_of(pos), Ordering::Release);
    }

    /// The entry at ring position `pos`, if the slot is marked as holding it. One read
    /// of every field: whatever the peer does afterwards, the server works on this
    /// copy, so a value cannot change between validation and use.
    pub fn take(&self, pos: u32) -> Option<SqEntry> {
        if self.seq.load(Ordering::Acquire) != seq_of(pos) {
            return None;
        }
        let op = self.op.load(Ordering::Relaxed);
        Some(SqEntry {
            id: self.id.load(Ordering::Relaxed),
            opcode: op as u8,
            flags: (op >> 8) as u8,
            reserved16: (op >> 16) as u16,
            count: self.count.load(Ordering::Relaxed),
            buffer: self.buffer.load(Ordering::Relaxed),
            start: self.start.load(Ordering::Relaxed),
            reserved32: self.reserved.load(Ordering::Relaxed),
        })
    }
}

impl CqSlot {
    /// Fills the slot with `e` as ring position `pos`; the mark goes last.
    pub fn fill(&self, e: &CqEntry, pos: u32) {
        self.id.store(e.id, Ordering::Relaxed);
        self.status.store(e.status, Ordering::Relaxed);
        self.len.store(e.len, Ordering::Relaxed);
        self.seq.store(seq_of(pos), Ordering::Release);
    }

    /// The entry at ring position `pos`, if the slot is marked as holding it.
    pub fn take(&self, pos: u32) -> Option<CqEntry> {
        if self.seq.load(Ordering::Acquire) != seq_of(pos) {
            return None;
        }
        Some(CqEntry {
            id: self.id.load(Ordering::Relaxed),
            status: self.status.load(Ordering::Relaxed),
            len: self.len.load(Ordering::Relaxed),
        })
    }
}

/// The producing side of one ring. Owns the tail; the index it last published is kept
/// locally so the peer cannot move it.
pub struct Producer<'a> {
    head: &'a AtomicU32,
    tail: &'a AtomicU32,
    mask: u32,
    local_tail: u32,
    /// The consumer's head as last read: room it proved stays room (heads only move
    /// forward), so [`Producer::room_for`] reads the peer's line only when that runs out.
    seen_head: u32,
}

impl<'a> Producer<'a> {
    /// `depth` is a power of two. Starts from whatever tail the region holds.
    pub fn new(head: &'a AtomicU32, tail: &'a AtomicU32, depth: u32) -> Producer<'a> {
        debug_assert!(depth.is_power_of_two());
        let local_tail = tail.load(Ordering::Relaxed);
        Producer {
            head,
            tail,
            mask: depth - 1,
            local_tail,
            seen_head: local_tail.wrapping_sub(depth),
        }
    }

    /// Resumes at a tail this side published earlier and the head it last saw (both
    /// kept outside the shared region).
    pub fn at(
        head: &'a AtomicU32,
        tail: &'a AtomicU32,
        depth: u32,
        local_tail: u32,
        seen_head: u32,
    ) -> Producer<'a> {
        debug_assert!(depth.is_power_of_two());
        Producer {
            head,
            tail,
            mask: depth - 1,
            local_tail,
            seen_head,
        }
    }

    pub fn position(&self) -> u32 {
        self.local_tail
    }

    /// The consumer's head as this side last read it (to resume with [`Producer::at`]).
    pub fn seen_head(&self) -> u32 {
        self.seen_head
    }

    /// At least `want` free slots if there are, without touching the consumer's line
    /// while the head seen last already proves them; otherwise the exact count, read
    /// afresh. Cross-core traffic per command is what QD1 latency is made of.
    pub fn room_for(&mut self, want: u32) -> Result<u32, Implausible> {
        let proven = (self.mask + 1).wrapping_sub(self.local_tail.wrapping_sub(self.seen_head));
        if proven <= self.mask + 1 && proven >= want {
            return Ok(proven);
        }
        let head = self.head.load(Ordering::Acquire);
        let free = self.free_given(head)?;
        self.seen_head = head;
        Ok(free)
    }

    /// Slots the producer may fill now.
    pub fn free(&self) -> Result<u32, Implausible> {
        self.free_given(self.head.load(Ordering::Acquire))
    }

    fn free_given(&self, head: u32) -> Result<u32, Implausible> {
        let used = self.local_tail.wrapping_sub(head);
        if used > self.mask + 1 {
            return Err(Implausible {
                ours: self.local_tail,
                theirs: head,
            });
        }
        Ok(self.mask + 1 - used)
    }

    /// Index of the `k`-th free slot (k < free()).
    pub fn slot(&self, k: u32) -> usize {
        (self.local_tail.wrapping_add(k) & self.mask) as usize
    }

    /// Makes the next `n` filled slots visible to the consumer.
    pub fn publish(&mut self, n: u32) {
        self.local_tail = self.local_tail.wrapping_add(n);
        self.tail.store(self.local_tail, Ordering::Release);
    }
}

/// The consuming side of one ring. Owns the head.
pub struct Consumer<'a> {
    head: &'a AtomicU32,
    tail: &'a AtomicU32,
    mask: u32,
    local_head: u32,
}

impl<'a> Consumer<'a> {
    pub fn new(head: &'a AtomicU32, tail: &'a AtomicU32, depth: u32) -> Consumer<'a> {
        debug_assert!(depth.is_power_of_two());
        Consumer {
            head,
            tail,
            mask: depth - 1,
            local_head: head.load(Ordering::Relaxed),
        }
    }

    pub fn at(
        head: &'a AtomicU32,
        tail: &'a AtomicU32,
        depth: u32,
        local_head: u32,
    ) -> Consumer<'a> {
        debug_assert!(depth.is_power_of_two());
        Consumer {
            head,
            tail,
            mask: depth - 1,
            local_head,
        }
    }

    pub fn position(&self) -> u32 {
        self.local_head
    }

    /// Slots the published tail shows ready. The tail may lag the head: the consumer
    /// takes a slot as soon as its mark shows, which can be before the producer's
    /// store of the tail lands; either way it is never more than a ring away.
    pub fn available(&self) -> Result<u32, Implausible> {
        let tail = self.tail.load(Ordering::Acquire);
        let ahead = tail.wrapping_sub(self.local_head);
        let behind = self.local_head.wrapping_sub(tail);
        if ahead <= self.mask + 1 {
            Ok(ahead)
        } else if behind <= self.mask + 1 {
            Ok(0)
        } else {
            Err(Implausible {
                ours: self.local_head,
                theirs: tail,
            })
        }
    }

    pub fn slot(&self, k: u32) -> usize {
        (self.local_head.wrapping_add(k) & self.mask) as usize
    }

    /// Returns `n` read slots to the producer.
    pub fn release(&mut self, n: u32) {
        self.local_head = self.local_head.wrapping_add(n);
        self.head.store(self.local_head, Ordering::Release);
    }
}

/// The doorbell: one word per direction holding a "sleeping" bit (bit 0) and a counter
/// (the other bits). The sleeper sets the bit with an atomic read-modify-write, checks
/// for work once more, and blocks while the word is unchanged; the waker, after
/// publishing its work, bumps the counter with another read-modify-write and issues a
/// futex wake only when the bit was set. Both sides read-modify-write the same word, so
/// their operations are totally ordered: either the sleeper's comes second and it sees
/// the work (acquire on the waker's release), or the waker's comes second and it sees
/// the bit and has changed the word the sleeper waits on. This needs only
/// acquire/release, which is what loom can check (tests/loom.rs).
pub fn prepare_sleep(doorbell: &AtomicU32) -> u32 {
    doorbell.fetch_or(1, Ordering::AcqRel) | 1
}

/// The sleeper is awake again (it found work or returned from its wait).
pub fn end_sleep(doorbell: &AtomicU32) {
    doorbell.fetch_and(!1, Ordering::Relaxed);
}

/// Called by the waker after publishing work: true when the sleeper may be blocked and
/// the caller must issue the futex wake.
pub fn ring_doorbell(doorbell: &AtomicU32) -> bool {
    doorbell.fetch_add(2, Ordering::AcqRel) & 1 != 0
}

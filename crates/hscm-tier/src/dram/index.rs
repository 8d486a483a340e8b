//! The DRAM tier's hit path, shared by every thread without the volume's lock: which
//! slot each block is in (a table with an entry per block of the volume, read and
//! changed under one of 64 reader-writer locks, the block's shard), the slots' bytes,
//! and a log of the reads served here, in the order they were served, for the policy
//! to hear of later.
//!
//! The table is a direct index, not a hash map: a lookup is one load, where a map
//! costs a hash and a probe (the difference is most of what a hit costs beyond the
//! copy). It takes 4 bytes per block of the volume (0.1% of its size with 4 KiB
//! blocks) of address space, in an anonymous mapping whose pages the kernel fills
//! only when written: 4 KiB of memory per 1,024 consecutive blocks that ever held
//! one in DRAM.
//!
//! Who may touch a slot's bytes, and how:
//! - A read served here holds the shard lock of the block (shared) while it copies,
//!   and copies only a slot whose block is *published* (its bytes filled).
//! - Everything else goes through [`super::Dram`], which lives under the volume's
//!   lock, so one thread at a time. It fills a slot before publishing it (no reader
//!   looks at it meanwhile), and changes the bytes of a published slot only under the
//!   shard's lock held exclusively.
//! - A slot changes block only when its old block leaves the map, under the shard
//!   lock held exclusively, so a reader copying it has finished.
//!
//! The policy is told of hits later, under the volume's lock, in the order they were
//! served: whoever takes the lock first applies the log (a miss does before it
//! inserts), so one client's requests reach the policy, and the sequential cutoff, in
//! its order. That is what keeps `hscm volume replay` equal to `hscm sim cache`.

use std::ptr::NonNull;
use std::sync::atomic::{AtomicU32, Ordering};

use crossbeam_queue::ArrayQueue;
use memmap2::MmapMut;
use parking_lot::RwLock;

/// Shards of the block map: enough that threads reading different blocks rarely meet
/// on one lock.
const SHARDS: usize = 64;
/// Reads served here waiting for the policy, per stripe of the log: twice the slots,
/// from 1,024 to 32,768 (several milliseconds of hits from one thread, so the
/// background thread that applies the log, which may wait for the volume's lock, stays
/// ahead). When a stripe is full, the next hit there takes the volume's lock and
/// applies the log itself.
fn log_capacity(slots: usize) -> usize {
    (2 * slots).clamp(1 << 10, 1 << 15)
}
/// Stripes of the log. A thread always logs to the same stripe, so its reads stay in
/// order, and threads on different stripes do not contend for one queue's tail (one
/// queue for all was the hit path's bottleneck on four threads).
const LOG_STRIPES: usize = 8;
/// The longest read served here: a read of several blocks is copied aside and handed
/// on only once every block was found (a half-served read would hand its first
/// blocks twice), so it is bounded.
pub(crate) const MAX_HIT_READ: usize = 256 << 10;

/// A read served from DRAM: every block it touched was a hit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct HitRead {
    pub(crate) offset: u64,
    pub(crate) len: u64,
    /// The slot its first block was read from (so the policy's side need not look it
    /// up again).
    pub(crate) slot: u32,
}

/// What [`DramIndex::serve`] did.
pub(crate) enum Served {
    /// Served and logged for the policy.
    Logged,
    /// Served; the log was full, so the caller applies it and then this read.
    LogFull(HitRead),
    /// Some block was missing or not filled: nothing was handed on.
    No,
}

/// A table entry: 0 when the block is not cached, else its slot + 1, with this bit
/// set once the slot holds the block's bytes.
const PUBLISHED: u32 = 1 << 31;

/// Block → entry, zero until written.
struct BlockTable {
    _map: MmapMut,
    entries: NonNull<AtomicU32>,
    len: usize,
}

// SAFETY: the entries are atomics; the mapping is owned and never moves.
unsafe impl Send for BlockTable {}
// SAFETY: as above.
unsafe impl Sync for BlockTable {}

impl BlockTable {
    fn new(blocks: usize) -> std::io::Result<BlockTable> {
        let mut map = MmapMut::map_anon((blocks * 4).max(1))?;
        let entries = NonNull::new(map.as_mut_ptr().cast::<AtomicU32>())
            .expect("a mapping is not at address 0");
        Ok(BlockTable {
            _map: map,
            entries,
            len: blocks,
        })
    }

    /// `None` for a block past the volume's end.
    fn entry(&self, block: u64) -> Option<&AtomicU32> {
        let i = usize::try_from(block).ok().filter(|&i| i < self.len)?;
        // SAFETY: `i < len`; the mapping is page-aligned (so aligned for `AtomicU32`,
        // which has `u32`'s layout), zero-filled (a valid `AtomicU32`), lives as long
        // as `self`, and is only ever reached through atomics.
        Some(unsafe { &*self.entries.as_ptr().add(i) })
    }
}

/// The slots' memory: one anonymous mapping, page-aligned (device I/O into a slot may
/// bypass the page cache), populated lazily (opening costs nothing whatever its size)
/// and advised for huge pages (random hits then rarely miss the TLB). Reached only
/// through a raw pointer, so that no reference ever spans slots that other threads use.
struct Arena {
    /// Owns the mapping; never dereferenced after `base` was taken.
    _map: MmapMut,
    base: NonNull<u8>,
    len: usize,
    block: usize,
}

// SAFETY: the arena is plain memory; which thread may read or write which slot is
// governed by the rules in the module comment, which `DramIndex` and `Dram` follow.
unsafe impl Send for Arena {}
// SAFETY: as above; no method hands out a reference without the caller's rule holding.
unsafe impl Sync for Arena {}

impl Arena {
    fn new(len: usize, block: usize) -> std::io::Result<Arena> {
        let mut map = MmapMut::map_anon(len.max(1))?;
        #[cfg(all(target_os = "linux", not(miri)))]
        {
            let _ = map.advise(memmap2::Advice::HugePage);
        }
        let base = NonNull::new(map.as_mut_ptr()).expect("a mapping is not at address 0");
        Ok(Arena {
            _map: map,
            base,
            len,
            block,
        })
    }

    fn range(&self, slot: u32) -> usize {
        let at = slot as usize * self.block;
        assert!(at + self.block <= self.len, "slot {slot} is past the arena");
        at
    }

    /// # Safety
    /// No thread may write the slot while the returned slice lives.
    unsafe fn bytes(&self, slot: u32) -> &[u8] {
        let at = self.range(slot);
        // SAFETY: in bounds (checked above); the caller rules out concurrent writes.
        unsafe { std::slice::from_raw_parts(self.base.as_ptr().add(at), self.block) }
    }

    /// # Safety
    /// No other thread may read or write the slot while the returned slice lives.
    #[allow(clippy::mut_from_ref)]
    unsafe fn bytes_mut(&self, slot: u32) -> &mut [u8] {
        let at = self.range(slot);
        // SAFETY: in bounds (checked above); the caller rules out any other access.
        unsafe { std::slice::from_raw_parts_mut(self.base.as_ptr().add(at), self.block) }
    }

    /// Asks the CPU to start fetching the first 4 KiB of `[within, within + len)` of a
    /// slot before the copy: a lone copy otherwise meets its cache misses one after
    /// another (the flat volume does the same, `hscm_volume`'s `RamImage`).
    #[inline]
    fn prefetch(&self, slot: u32, within: usize, len: usize) {
        #[cfg(all(target_arch = "x86_64", not(miri)))]
        {
            use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
            let start = self.range(slot) + within;
            let end = (start + len.min(4096)).min(self.len);
            let mut at = start & !63;
            while at < end {
                // SAFETY: `at < self.len`, so the pointer is inside the mapping. A
                // prefetch is a hint: it reads nothing architecturally, writes nothing
                // and never faults. Every DRAM hit runs this (the reference tests).
                unsafe { _mm_prefetch::<_MM_HINT_T0>(self.base.as_ptr().add(at) as *const i8) };
                at += 64;
            }
        }
        #[cfg(not(all(target_arch = "x86_64", not(miri))))]
        let _ = (slot, within, len);
    }
}

pub(crate) struct DramIndex {
    /// Held shared while a reader looks up and copies a block, exclusively while the
    /// volume's side changes the block's entry or its published bytes.
    shards: Box<[RwLock<()>]>,
    table: BlockTable,
    arena: Arena,
    block: usize,
    log: Box<[ArrayQueue<HitRead>]>,
}

/// This thread's stripe of the log: given out in turn at a thread's first hit.
fn log_stripe() -> usize {
    use std::sync::atomic::AtomicUsize;
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    thread_local! {
        static STRIPE: usize = NEXT.fetch_add(1, Ordering::Relaxed) % LOG_STRIPES;
    }
    STRIPE.with(|s| *s)
}

thread_local! {
    /// Where a read of several blocks is gathered before it is handed on.
    static GATHER: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
}

impl DramIndex {
    /// The index of a volume of `blocks` blocks of `block` bytes with `slots` slots.
    pub(crate) fn new(blocks: u64, slots: usize, block: usize) -> std::io::Result<DramIndex> {
        Self::with_log(blocks, slots, block, log_capacity(slots))
    }

    fn with_log(blocks: u64, slots: usize, block: usize, log: usize) -> std::io::Result<DramIndex> {
        let blocks = usize::try_from(blocks).map_err(|_| std::io::ErrorKind::OutOfMemory)?;
        Ok(DramIndex {
            shards: (0..SHARDS).map(|_| RwLock::new(())).collect(),
            table: BlockTable::new(blocks)?,
            arena: Arena::new(slots * block, block)?,
            block,
            log: (0..LOG_STRIPES).map(|_| ArrayQueue::new(log)).collect(),
        })
    }

    fn shard(&self, block: u64) -> &RwLock<()> {
        // Fibonacci hashing: consecutive blocks land in different shards.
        let i = (block.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 58) as usize % SHARDS;
        &self.shards[i]
    }

    /// Serves `[offset, offset + len)` if every block it touches is cached and filled:
    /// hands it to `sink` block by block, as the volume's read path does, and logs it
    /// for the policy. Hands nothing on otherwise.
    pub(crate) fn serve(
        &self,
        offset: u64,
        len: usize,
        sink: &mut dyn FnMut(usize, &[u8]),
    ) -> Served {
        let bs = self.block as u64;
        let end = offset + len as u64;
        let first = offset / bs;
        let last = (end - 1) / bs;
        let served = if first == last {
            self.copy_block(first, (offset % bs) as usize, len, &mut |b| sink(0, b))
        } else if len <= MAX_HIT_READ {
            self.serve_gathered(offset, len, sink)
        } else {
            None
        };
        let Some(slot) = served else {
            return Served::No;
        };
        let hit = HitRead {
            offset,
            len: len as u64,
            slot,
        };
        match self.log[log_stripe()].push(hit) {
            Ok(()) => Served::Logged,
            Err(hit) => Served::LogFull(hit),
        }
    }

    /// A read of several blocks: copied aside block by block, handed on once whole.
    fn serve_gathered(
        &self,
        offset: u64,
        len: usize,
        sink: &mut dyn FnMut(usize, &[u8]),
    ) -> Option<u32> {
        let bs = self.block as u64;
        let end = offset + len as u64;
        GATHER.with_borrow_mut(|gather| {
            gather.resize(len, 0);
            let mut first_slot = None;
            let mut at = offset;
            while at < end {
                let within = (at % bs) as usize;
                let n = ((bs - at % bs).min(end - at)) as usize;
                let pos = (at - offset) as usize;
                let dst = &mut gather[pos..pos + n];
                let slot = self.copy_block(at / bs, within, n, &mut |b| dst.copy_from_slice(b))?;
                first_slot.get_or_insert(slot);
                at += n as u64;
            }
            let mut at = offset;
            while at < end {
                let n = ((bs - at % bs).min(end - at)) as usize;
                let pos = (at - offset) as usize;
                sink(pos, &gather[pos..pos + n]);
                at += n as u64;
            }
            first_slot
        })
    }

    /// Hands `[within, within + len)` of `block` to `to` if it is cached and filled;
    /// returns its slot.
    fn copy_block(
        &self,
        block: u64,
        within: usize,
        len: usize,
        to: &mut dyn FnMut(&[u8]),
    ) -> Option<u32> {
        let _shard = self.shard(block).read();
        let entry = self.table.entry(block)?.load(Ordering::Relaxed);
        if entry & PUBLISHED == 0 {
            return None;
        }
        let slot = (entry & !PUBLISHED) - 1;
        self.arena.prefetch(slot, within, len);
        // SAFETY: the block is published and this thread holds its shard's lock shared:
        // its slot's bytes change only under that lock held exclusively, and the slot
        // moves to another block only once this one left the map, under it too.
        let bytes = unsafe { self.arena.bytes(slot) };
        to(&bytes[within..within + len]);
        Some(slot)
    }

    /// The oldest read not yet told to the policy.
    /// The stripes are taken in turn, each emptied before the next: one thread's reads
    /// come out in its order.
    pub(crate) fn next_logged(&self) -> Option<HitRead> {
        self.log.iter().find_map(ArrayQueue::pop)
    }

    /// Stripes holding reads: about how many threads have been hitting lately.
    pub(crate) fn busy_stripes(&self) -> usize {
        self.log.iter().filter(|q| !q.is_empty()).count()
    }

    /// Sets `block`'s entry, with its shard held exclusively (the caller is
    /// [`super::Dram`]).
    fn set(&self, block: u64, entry: u32) {
        let _shard = self.shard(block).write();
        if let Some(e) = self.table.entry(block) {
            e.store(entry, Ordering::Relaxed);
        }
    }

    /// `block` now owns `slot`, not filled yet.
    pub(super) fn map(&self, block: u64, slot: u32) {
        assert!(slot < PUBLISHED - 1, "slot {slot} does not fit an entry");
        self.set(block, slot + 1);
    }

    /// `block` leaves the tier; once this returns no reader is copying its slot.
    pub(super) fn unmap(&self, block: u64) {
        self.set(block, 0);
    }

    /// `block`'s slot (if it has one) holds its bytes: readers may copy it from now on.
    pub(super) fn publish(&self, block: u64) {
        let _shard = self.shard(block).write();
        if let Some(e) = self.table.entry(block) {
            let v = e.load(Ordering::Relaxed);
            if v != 0 {
                e.store(v | PUBLISHED, Ordering::Relaxed);
            }
        }
    }

    /// # Safety
    /// Only [`super::Dram`] calls this, from `&self` (so no `&mut Dram` method writes
    /// any slot meanwhile).
    pub(super) unsafe fn slot(&self, slot: u32) -> &[u8] {
        // SAFETY: writes happen only from `&mut Dram`, which cannot coexist with the
        // caller's `&Dram`; other threads only read.
        unsafe { self.arena.bytes(slot) }
    }

    /// A slot whose block is not published, to fill.
    ///
    /// # Safety
    /// Only [`super::Dram`] calls this, from `&mut self`, for a slot owned by a block it
    /// has not published (or by none).
    #[allow(clippy::mut_from_ref)]
    pub(super) unsafe fn unpublished_mut(&self, slot: u32) -> &mut [u8] {
        // SAFETY: readers copy only published slots, and `&mut Dram` excludes every
        // other writer and every reader that goes through `Dram`.
        unsafe { self.arena.bytes_mut(slot) }
    }

    /// Changes the bytes of `block`'s published slot with readers kept out meanwhile.
    /// The caller is [`super::Dram`], from `&mut self`.
    pub(super) fn write_published(&self, block: u64, f: impl FnOnce(&mut [u8])) -> bool {
        let _shard = self.shard(block).write();
        let entry = self
            .table
            .entry(block)
            .map_or(0, |e| e.load(Ordering::Relaxed));
        if entry == 0 {
            return false;
        }
        // SAFETY: the shard's lock held exclusively keeps out every reader of a
        // published slot, and `&mut Dram` in the caller every other writer.
        f(unsafe { self.arena.bytes_mut((entry & !PUBLISHED) - 1) });
        true
    }

    pub(crate) fn prefetch(&self, slot: u32, within: usize, len: usize) {
        self.arena.prefetch(slot, within, len);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;

    const BS: usize = 64;

    fn stamp(buf: &mut [u8], block: u64, version: u8) {
        buf.fill(version);
        buf[..8].copy_from_slice(&block.to_le_bytes());
    }

    fn check(bytes: &[u8], block: u64) {
        assert_eq!(&bytes[..8], &block.to_le_bytes(), "a slot of another block");
        let v = bytes[8];
        assert!(bytes[8..].iter().all(|&b| b == v), "a torn block");
    }

    /// One writer maps, fills, publishes, rewrites and evicts blocks through four
    /// slots while readers copy: every copy is whole and of the block asked for.
    #[test]
    fn readers_never_see_a_torn_or_foreign_slot() {
        let index = Arc::new(DramIndex::with_log(8, 4, BS, 1 << 12).unwrap());
        let stop = Arc::new(AtomicBool::new(false));
        let readers: Vec<_> = (0..2)
            .map(|r| {
                let (index, stop) = (index.clone(), stop.clone());
                std::thread::spawn(move || {
                    let mut served = 0u64;
                    let mut block = r as u64;
                    while !stop.load(Ordering::Relaxed) {
                        block = (block + 1) % 8;
                        let mut sink = |_: usize, b: &[u8]| check(b, block);
                        if !matches!(index.serve(block * BS as u64, BS, &mut sink), Served::No) {
                            served += 1;
                        }
                        while index.next_logged().is_some() {}
                    }
                    served
                })
            })
            .collect();
        // The writer: blocks 0..8 take turns in the four slots.
        let mut owner: [Option<u64>; 4] = [None; 4];
        for round in 0..if cfg!(miri) { 40 } else { 20_000 } {
            let slot = round % 4;
            if let Some(old) = owner[slot] {
                if round % 3 == 0 {
                    assert!(index.write_published(old, |b| stamp(b, old, round as u8)));
                    continue;
                }
                index.unmap(old);
            }
            let block = (round as u64 * 5) % 8;
            if owner.contains(&Some(block)) {
                owner[slot] = None;
                continue;
            }
            index.map(block, slot as u32);
            // SAFETY: the test plays `Dram`: this thread is the only writer, and the
            // block is not published yet.
            stamp(
                unsafe { index.unpublished_mut(slot as u32) },
                block,
                round as u8,
            );
            index.publish(block);
            owner[slot] = Some(block);
        }
        stop.store(true, Ordering::Relaxed);
        for r in readers {
            r.join().unwrap();
        }
    }

    /// A read of several blocks is served whole or not at all; a full log hands the
    /// read back to the caller.
    #[test]
    fn multi_block_reads_are_all_or_nothing() {
        let index = DramIndex::with_log(16, 4, BS, 1).unwrap();
        for (slot, block) in [(0u32, 10u64), (1, 11)] {
            index.map(block, slot);
            // SAFETY: only this thread touches the index.
            stamp(unsafe { index.unpublished_mut(slot) }, block, 7);
            index.publish(block);
        }
        let mut got = Vec::new();
        let read = |got: &mut Vec<(usize, usize)>, offset: u64, len: usize| {
            index.serve(offset, len, &mut |pos, b| got.push((pos, b.len())))
        };
        // Blocks 10 and 11, starting mid-block.
        assert!(matches!(read(&mut got, 10 * 64 + 16, 100), Served::Logged));
        assert_eq!(got, vec![(0, 48), (48, 52)]);
        assert_eq!(
            index.next_logged(),
            Some(HitRead {
                offset: 10 * 64 + 16,
                len: 100,
                slot: 0
            })
        );
        // Block 12 is not cached: nothing is handed on.
        got.clear();
        assert!(matches!(read(&mut got, 11 * 64, 128), Served::No));
        assert!(got.is_empty());
        // An unpublished block is a miss too.
        index.map(12, 2);
        assert!(matches!(read(&mut got, 12 * 64, 64), Served::No));
        // The log holds one read: the second comes back.
        assert!(matches!(read(&mut got, 10 * 64, 64), Served::Logged));
        assert!(matches!(read(&mut got, 11 * 64, 64), Served::LogFull(h) if h.offset == 11 * 64));
    }
}

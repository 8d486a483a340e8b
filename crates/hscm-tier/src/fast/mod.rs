//! The durable fast tier: a file or device standing for SCM, Optane or NVMe between
//! DRAM and home. It caches blocks (inclusive of nothing: DRAM copies whatever is
//! authoritative) under its own policy from `hscm-policy`, and in write-back mode it
//! holds writes durably before home has them.
//!
//! The rules that keep every acknowledged write and never serve a stale one:
//!
//! 1. A write never overwrites the only durable copy of a block: a dirty write goes to
//!    a free slot with a record carrying a higher sequence number; recovery takes the
//!    highest valid sequence per block.
//! 2. The replaced slot is not reused at once. It waits until the write that replaced
//!    it is durable, then gets a free record, and is reused only once that record is
//!    durable too (the retirement queue, drained in order). Otherwise a later reuse of
//!    the newest slot could leave an older dirty record as the block's "newest", and
//!    recovery would write that old version over home.
//! 3. Write-back first syncs the fast device (home's copy is overwritten in place and
//!    may tear, so what replaces it must be durable here), copies dirty blocks home in
//!    block order (long runs), syncs home, then writes clean records and syncs the
//!    fast device. A crash in between leaves them
//!    dirty, and writing them home again is idempotent, so after recovery the dirty
//!    count is at most what was dirty plus what was in flight.
//! 4. After a crash only dirty records are trusted (clean ones may describe blocks home
//!    has since rewritten); after a clean close the whole table was written exactly, so
//!    clean ones are trusted too and the tier comes back warm.

mod layout;
mod recover;
mod writeback;

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Instant;

use hscm_durable::device::AlignedBuf;
use hscm_policy::cache::{CacheOutcome, CachePolicy, PolicySpec};
use rustc_hash::{FxHashMap as HashMap, FxHashSet as HashSet};

use crate::device::Device;
use crate::dram::TierStats;
use crate::header::{FastConfig, WriteMode, HEADER_LEN};

pub(crate) use layout::Layout;
use layout::{Record, SlotState, State, RECORD};
pub use recover::Recovery;
pub(crate) use recover::{format, read_layout};
pub(crate) use writeback::Copied;

/// What went wrong, and on which device: the volume treats a failed home as fatal for
/// writes, and a failed fast tier by its write mode.
#[derive(Debug)]
pub(crate) enum Failure {
    Fast(String, std::io::Error),
    Home(String, std::io::Error),
}

type Outcome<T> = Result<T, Failure>;

/// A cached block.
#[derive(Debug, Clone, Copy)]
struct Live {
    slot: u32,
    seq: u64,
    data_crc: u32,
    /// Home lacks this version.
    dirty: bool,
    /// When it became dirty (for the dirty age and the age-triggered write-back).
    dirty_since: Option<Instant>,
    /// The device write of its record (0: durable already); write-back copies home
    /// only versions whose record is durable (rule 3).
    record: u64,
}

/// A slot on its way back to the free list (rule 2).
#[derive(Debug)]
struct Retired {
    slot: u32,
    block: u64,
    /// The fast-device write that must be durable before the free record is written
    /// (0: none, home already holds the block).
    after: u64,
    /// The free record's write, once written.
    freed: Option<u64>,
}

pub(crate) struct FastTier {
    pub(crate) dev: Arc<Device>,
    layout: Layout,
    pub(crate) mode: WriteMode,
    policy: Box<dyn CachePolicy>,
    map: HashMap<u64, Live>,
    free: Vec<u32>,
    retired: VecDeque<Retired>,
    /// Slots retired so far, and the state [`FastTier::reclaim`] last ran in (the
    /// durable mark of the device and this count).
    retirements: u64,
    reclaimed_at: Option<(u64, u64)>,
    /// Blocks with slots in the retirement queue (their old records may still say dirty).
    lagging: HashMap<u64, u32>,
    /// The record table as the device should hold it; written a sector at a time.
    table: AlignedBuf,
    seq: u64,
    dirty: u64,
    /// Home's block size and where its data starts.
    block: u64,
    /// A run of dirty blocks on its way home (1 MiB or one block).
    bulk: Option<AlignedBuf>,
    evicted: Vec<u64>,
    /// A record (its sequence number and its write) whose durability lets the state
    /// page's watermark move up to it, so recovery checks the data of fewer slots.
    mark: (u64, u64),
    /// The watermark last written to the state page.
    watermark: u64,
    /// The device failed while holding dirty blocks: the tier still answers for them
    /// (reads may work) but admits nothing more.
    pub(crate) failed: bool,
    pub(crate) stats: TierStats,
}

/// Dirty share above which the background write-back starts, and where it stops.
pub const WRITEBACK_HIGH: f64 = 0.5;
pub const WRITEBACK_LOW: f64 = 0.25;
/// Records between two moves of the durable watermark: a sixteenth of the slots,
/// from 8 to 4096 (so recovery checks the data of at most a few thousand slots past
/// the last mark, and small tiers move it often).
fn mark_every(slots: u32) -> u64 {
    (u64::from(slots) / 16).clamp(8, 4096)
}
/// Dirty blocks older than this are written back whatever the share.
pub const WRITEBACK_AGE: std::time::Duration = std::time::Duration::from_secs(5);

impl FastTier {
    fn empty(dev: Arc<Device>, layout: Layout, cfg: &FastConfig, block: u32) -> FastTier {
        let spec = PolicySpec {
            eviction: cfg.eviction,
            admission: cfg.admission,
            history: None,
        };
        FastTier {
            dev,
            layout,
            mode: cfg.mode,
            policy: spec.build(cfg.size),
            map: HashMap::default(),
            free: (0..layout.slots).rev().collect(),
            retired: VecDeque::new(),
            retirements: 0,
            reclaimed_at: None,
            lagging: HashMap::default(),
            table: AlignedBuf::zeroed(layout.records_len() as usize),
            seq: 0,
            dirty: 0,
            block: u64::from(block),
            bulk: Some(AlignedBuf::zeroed((block as usize).max(1 << 20))),
            evicted: Vec::new(),
            mark: (0, 0),
            watermark: 0,
            failed: false,
            stats: TierStats {
                tier: "fast".into(),
                capacity_bytes: cfg.size,
                ..TierStats::default()
            },
        }
    }

    fn fast_err(&self, what: String) -> impl FnOnce(std::io::Error) -> Failure {
        let what = format!("{what} on the fast tier {}", self.dev.describe());
        move |e| Failure::Fast(what, e)
    }

    fn home_offset(&self, block: u64) -> u64 {
        HEADER_LEN + block * self.block
    }

    /// True when `block` is in the tier.
    pub(crate) fn contains(&self, block: u64) -> bool {
        self.map.contains_key(&block)
    }

    /// The block's slot if cached, recording the hit or the miss.
    pub(crate) fn find(&mut self, block: u64, write: bool) -> Option<u32> {
        self.policy.prefetch(block);
        let slot = self.map.get(&block).map(|live| live.slot);
        if slot.is_some() {
            let held = self.policy.lookup(block);
            // Except after a device failed mid-eviction: the policy dropped blocks
            // the tier still holds (one of them perhaps the only copy), and the
            // tier admits nothing more.
            debug_assert!(
                held || self.failed,
                "the policy holds every block the tier maps"
            );
        }
        self.stats.count_lookup(slot.is_some(), write);
        slot
    }

    pub(crate) fn read_slot(&self, slot: u32, buf: &mut [u8]) -> Outcome<()> {
        self.dev
            .read_at(self.layout.slot_offset(slot), buf)
            .map_err(self.fast_err(format!("cannot read slot {slot}")))
    }

    /// Reads the tier's copy of `block` if it has one (no counters, no policy): the
    /// authoritative copy when it is dirty.
    pub(crate) fn peek(&self, block: u64, buf: &mut [u8]) -> Outcome<bool> {
        match self.map.get(&block) {
            Some(live) => self.read_slot(live.slot, buf).map(|()| true),
            None => Ok(false),
        }
    }

    /// After a read miss fetched `data` from home: admits the block (clean) if the
    /// policy takes it, or counts why not.
    pub(crate) fn offer_clean(
        &mut self,
        home: &Device,
        block: u64,
        data: &[u8],
        sequential: bool,
    ) -> Outcome<()> {
        if sequential {
            self.stats.bypassed_sequential += 1;
            return Ok(());
        }
        if self.failed {
            return Ok(());
        }
        match self.insert(home, block, false)? {
            CacheOutcome::Inserted => {}
            _ => {
                self.stats.bypassed_admission += 1;
                return Ok(());
            }
        }
        let slot = self.alloc()?;
        self.dev
            .write_at(self.layout.slot_offset(slot), data)
            .map_err(self.fast_err(format!("cannot write block {block} to slot {slot}")))?;
        // No record: a clean copy is only trusted after a clean close, which writes
        // the whole table; after a crash it is dropped (home has the block).
        self.map.insert(
            block,
            Live {
                slot,
                seq: 0,
                data_crc: crc32c::crc32c(data),
                dirty: false,
                dirty_since: None,
                record: 0,
            },
        );
        self.stats.promotions += 1;
        Ok(())
    }

    /// Write-through: home already holds `data`; refreshes the tier's copy in place if
    /// it has one (a clean copy may be overwritten: home has the bytes).
    pub(crate) fn refresh_clean(&mut self, block: u64, data: &[u8]) -> Outcome<()> {
        let Some(live) = self.map.get_mut(&block) else {
            return Ok(());
        };
        live.data_crc = crc32c::crc32c(data);
        let slot = live.slot;
        self.dev
            .write_at(self.layout.slot_offset(slot), data)
            .map(|_| ())
            .map_err(self.fast_err(format!("cannot write block {block} to slot {slot}")))
    }

    /// Write-back: puts a new version of `block` in a fresh slot with a dirty record
    /// (rule 1) and returns the device write that makes it durable once synced. Writes
    /// pass any admission filter (they must land somewhere durable); a policy that
    /// cannot hold the block at all (S3-FIFO whose small queue is under a block) gets
    /// None, and the caller writes the block home, after any old record of it on the
    /// tier is durably free.
    pub(crate) fn write_dirty(
        &mut self,
        home: &Device,
        block: u64,
        data: &[u8],
    ) -> Outcome<Option<u64>> {
        if !self.map.contains_key(&block)
            && self.insert(home, block, true)? != CacheOutcome::Inserted
        {
            self.stats.bypassed_admission += 1;
            if self.lagging.contains_key(&block) {
                self.settle()?;
            }
            return Ok(None);
        }
        let slot = self.alloc()?;
        self.seq += 1;
        let mut live = Live {
            slot,
            seq: self.seq,
            data_crc: crc32c::crc32c(data),
            dirty: true,
            dirty_since: None,
            record: 0,
        };
        self.dev
            .write_at(self.layout.slot_offset(slot), data)
            .map_err(self.fast_err(format!("cannot write block {block} to slot {slot}")))?;
        let written = self.write_record(
            slot,
            Record {
                block,
                seq: live.seq,
                state: SlotState::Dirty,
                data_crc: live.data_crc,
            },
        )?;
        live.record = written;
        let since = match self.map.insert(block, live) {
            Some(old) => {
                self.retire(old.slot, block, written);
                if old.dirty {
                    old.dirty_since
                } else {
                    self.dirty += 1;
                    Some(Instant::now())
                }
            }
            None => {
                self.dirty += 1;
                self.stats.promotions += 1;
                Some(Instant::now())
            }
        };
        self.map.get_mut(&block).expect("just inserted").dirty_since = since;
        self.advance_watermark(written)?;
        Ok(Some(written))
    }

    /// Every [`mark_every`] records: once the marked record is durable (every earlier
    /// one is too: a sync covers every write before it), writes the state page's
    /// watermark up to it (unsynced: durable at a later sync, and true already) and
    /// marks the newest record.
    fn advance_watermark(&mut self, newest: u64) -> Outcome<()> {
        let (seq, write) = self.mark;
        if self.seq < seq + mark_every(self.layout.slots) {
            return Ok(());
        }
        if write > 0 {
            if !self.dev.is_durable(write) {
                return Ok(());
            }
            self.write_watermark(seq)?;
        }
        self.mark = (self.seq, newest);
        Ok(())
    }

    /// Writes the state page's watermark (unsynced): every record up to `durable_seq`
    /// must be durable already.
    fn write_watermark(&mut self, durable_seq: u64) -> Outcome<()> {
        State {
            clean: false,
            durable_seq,
        }
        .write(self.dev.dev.as_ref())
        .map_err(self.fast_err("cannot write the state page".into()))?;
        self.watermark = self.watermark.max(durable_seq);
        Ok(())
    }

    /// The newest sequence number written (for [`FastTier::after_flush`]).
    pub(crate) fn seq(&self) -> u64 {
        self.seq
    }

    /// After a flush made every record up to `durable_seq` durable: when that leaves
    /// more than [`mark_every`] records past the watermark, moves it and syncs once
    /// more, so a crash now costs recovery at most that many data checks (a flush
    /// with a long unchecked tail behind it pays one extra sync).
    pub(crate) fn after_flush(&mut self, durable_seq: u64) -> Outcome<()> {
        if durable_seq < self.watermark + mark_every(self.layout.slots) {
            return Ok(());
        }
        self.write_watermark(durable_seq)?;
        self.sync_fast()
    }

    /// Inserts `block` into the policy (forced past an admission filter when `force`)
    /// and handles what it evicts.
    fn insert(&mut self, home: &Device, block: u64, force: bool) -> Outcome<CacheOutcome> {
        let mut evicted = std::mem::take(&mut self.evicted);
        evicted.clear();
        let mut outcome = CacheOutcome::Bypassed;
        for _ in 0..if force { 2 } else { 1 } {
            outcome = self
                .policy
                .insert_evicting(block, self.block, &mut |k| evicted.push(k));
            if outcome == CacheOutcome::Inserted {
                break;
            }
        }
        let result = evicted.iter().try_for_each(|&k| self.evict(home, k));
        self.evicted = evicted;
        result.map(|()| outcome)
    }

    /// A block leaves the tier: a dirty one is written home first (a demotion).
    fn evict(&mut self, home: &Device, block: u64) -> Outcome<()> {
        // A block the policy took while a device failed before it got its slot.
        let Some(&live) = self.map.get(&block) else {
            return Ok(());
        };
        self.stats.evictions += 1;
        if live.dirty {
            self.write_home(home, &[block])?;
            self.stats.demotions += 1;
        }
        let live = self.map.remove(&block).expect("still cached");
        if live.seq > 0 || self.lagging.contains_key(&block) {
            // Its record may say dirty, or an older record of the block is still on
            // its way out: rule 2.
            self.retire(live.slot, block, 0);
        } else {
            self.free.push(live.slot);
        }
        Ok(())
    }

    fn retire(&mut self, slot: u32, block: u64, after: u64) {
        self.retirements += 1;
        *self.lagging.entry(block).or_default() += 1;
        self.retired.push_back(Retired {
            slot,
            block,
            after,
            freed: None,
        });
    }

    /// Moves retired slots along: a free record once what replaced them is durable,
    /// the free list once that record is, in order (rule 2). Of one block's retired
    /// slots, a free record is written only once the earlier ones' are durable: unsynced
    /// writes persist in any subset, and a newer record freed before an older dirty
    /// one would leave the older as the block's newest.
    ///
    /// What it can do depends only on the retirement queue and on which device writes
    /// are durable, so it returns at once when neither changed since its last pass: a
    /// full free list's every allocation then costs nothing here, instead of a walk of
    /// the whole queue.
    fn reclaim(&mut self) -> Outcome<()> {
        let state = (self.dev.synced_upto(), self.retirements);
        if self.reclaimed_at == Some(state) {
            return Ok(());
        }
        let mut waiting: HashSet<u64> = HashSet::default();
        for i in 0..self.retired.len() {
            let r = &self.retired[i];
            if r.freed.is_some_and(|w| self.dev.is_durable(w)) {
                continue;
            }
            let block = r.block;
            if r.freed.is_none()
                && (r.after == 0 || self.dev.is_durable(r.after))
                && !waiting.contains(&block)
            {
                let slot = r.slot;
                let written = self.write_record(slot, Record::FREE)?;
                self.retired[i].freed = Some(written);
            }
            waiting.insert(block);
        }
        while let Some(r) = self.retired.front() {
            match r.freed {
                Some(w) if self.dev.is_durable(w) => {
                    let r = self.retired.pop_front().expect("front");
                    self.free.push(r.slot);
                    let n = self.lagging.get_mut(&r.block).expect("counted");
                    *n -= 1;
                    if *n == 0 {
                        self.lagging.remove(&r.block);
                    }
                }
                _ => break,
            }
        }
        self.reclaimed_at = Some(state);
        Ok(())
    }

    /// Syncs and reclaims until no retired slot is left: every superseded record on
    /// the device is then durably free.
    fn settle(&mut self) -> Outcome<()> {
        let mut rounds = 0;
        while !self.retired.is_empty() {
            self.sync_fast()?;
            self.reclaim()?;
            rounds += 1;
            // Each round frees at least the oldest retired slot of every block.
            assert!(
                rounds <= self.layout.slots as usize + 2,
                "retirement stalled"
            );
        }
        Ok(())
    }

    /// A free slot; syncs the fast device (twice at most) when every free one is still
    /// waiting on a sync.
    fn alloc(&mut self) -> Outcome<u32> {
        if self.free.is_empty() {
            self.reclaim()?;
        }
        for _ in 0..2 {
            if !self.free.is_empty() {
                break;
            }
            self.sync_fast()?;
            self.reclaim()?;
        }
        Ok(self
            .free
            .pop()
            .expect("the reserve outnumbers what waits for two syncs"))
    }

    fn sync_fast(&self) -> Outcome<()> {
        self.dev.sync().map_err(self.fast_err("sync failed".into()))
    }

    /// Writes `record` for `slot` (its whole sector, from the table mirror).
    fn write_record(&mut self, slot: u32, record: Record) -> Outcome<u64> {
        let (at, sector) = self.layout.record_sector(slot);
        let i = slot as usize * RECORD;
        record.encode(&mut self.table[i..i + RECORD]);
        self.dev
            .write_at(at, &self.table[sector..sector + layout::IO_ALIGN])
            .map_err(self.fast_err(format!("cannot write the record of slot {slot}")))
    }

    /// Copies `blocks` (dirty, sorted) home in runs of consecutive blocks, syncs home,
    /// then marks them clean and syncs the fast device (rule 3), all at once: a
    /// demotion. The volume's write-back runs the same steps without its lock.
    fn write_home(&mut self, home: &Device, blocks: &[u64]) -> Outcome<()> {
        // Home's copy is overwritten in place, and a cut can tear it: the version
        // replacing it must be durable here first, or a torn home block could be all
        // that is left of an acknowledged write.
        self.sync_fast()?;
        // Lent out while the runs go home (it is taken and put back only here).
        let mut bulk = self.bulk.take().expect("the bulk buffer is home");
        let result = self.write_runs(home, blocks, &mut bulk);
        self.bulk = Some(bulk);
        let copied = result?;
        home.sync()
            .map_err(|e| Failure::Home(format!("sync of {} failed", home.describe()), e))?;
        let durable_seq = self.record_clean(&copied)?;
        self.sync_fast()?;
        self.mark_clean(&copied, durable_seq).map(drop)
    }

    fn write_runs(
        &mut self,
        home: &Device,
        blocks: &[u64],
        bulk: &mut [u8],
    ) -> Outcome<Vec<Copied>> {
        let mut copied = Vec::new();
        let mut i = 0;
        while i < blocks.len() {
            let (used, run) = self.copy_run(&blocks[i..], bulk)?;
            i += used;
            let Some(first) = run.first().map(|c| c.block) else {
                continue;
            };
            let bytes = run.len() * self.block as usize;
            home.write_at(self.home_offset(first), &bulk[..bytes])
                .map_err(|e| {
                    Failure::Home(
                        format!("cannot write blocks {first}.. back to {}", home.describe()),
                        e,
                    )
                })?;
            self.count_run();
            copied.extend(run);
        }
        Ok(copied)
    }

    /// Blocks whose only durable copy is here.
    pub(crate) fn dirty_blocks(&self) -> u64 {
        self.dirty
    }

    /// Dirty blocks, sorted (for the error when the tier fails with dirty data).
    pub(crate) fn dirty_list(&self) -> Vec<u64> {
        let mut v: Vec<u64> = self
            .map
            .iter()
            .filter(|(_, l)| l.dirty)
            .map(|(&b, _)| b)
            .collect();
        v.sort_unstable();
        v
    }

    pub(crate) fn snapshot(&self) -> TierStats {
        let now = Instant::now();
        let oldest = self
            .map
            .values()
            .filter_map(|l| l.dirty_since)
            .min()
            .map_or(0, |t| now.duration_since(t).as_millis() as u64);
        TierStats {
            occupancy_bytes: self.policy.used(),
            dirty_bytes: self.dirty * self.block,
            dirty_age_ms: oldest,
            ..self.stats.clone()
        }
    }

    /// Sets the table mirror to what the tier holds now: a record per cached block
    /// (a clean copy never given one gets a sequence above every other), every other
    /// slot free. What a clean close and a recovery write whole.
    fn rebuild_table(&mut self) {
        let next = self.seq + 1;
        let Self {
            table, map, layout, ..
        } = self;
        for slot in 0..layout.slots {
            let i = slot as usize * RECORD;
            Record::FREE.encode(&mut table[i..i + RECORD]);
        }
        for (&block, live) in map.iter() {
            let i = live.slot as usize * RECORD;
            Record {
                block,
                seq: if live.seq == 0 { next } else { live.seq },
                state: if live.dirty {
                    SlotState::Dirty
                } else {
                    SlotState::Clean
                },
                data_crc: live.data_crc,
            }
            .encode(&mut table[i..i + RECORD]);
        }
    }

    /// A clean close: writes the table exactly as it stands (free slots free) and syncs,
    /// then marks the state sector clean and syncs, so the next open trusts clean
    /// records too and comes back warm.
    pub(crate) fn close(&mut self) -> Outcome<()> {
        // First every superseded record durably free, so no half-written table can
        // leave one as a block's newest.
        self.settle()?;
        self.rebuild_table();
        let dev = self.dev.dev.as_ref();
        let err = |what: &str| {
            let what = format!("{what} on the fast tier {}", self.dev.describe());
            move |e| Failure::Fast(what, e)
        };
        layout::write_table(dev, &self.table).map_err(err("cannot write the records"))?;
        self.dev.dev.sync().map_err(err("sync failed"))?;
        State {
            clean: true,
            durable_seq: self.seq,
        }
        .write(dev)
        .map_err(err("cannot write the state sector"))?;
        self.dev.dev.sync().map_err(err("sync failed"))
    }
}

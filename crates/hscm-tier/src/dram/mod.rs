//! The DRAM tier: an arena of block-sized slots, the cache policy that decides which
//! blocks hold them (hscm-policy's, the code `hscm sim cache` runs), and the counters.
//! Hits are served without the volume's lock ([`index`]); everything else here runs
//! under it.

mod index;

use std::sync::Arc;

use rustc_hash::FxHashMap as HashMap;

use hscm_policy::cache::{CacheOutcome, CachePolicy, PolicySpec, SequentialCutoff};
use serde::{Deserialize, Serialize};

pub(crate) use index::{DramIndex, HitRead, Served};

use crate::header::TierConfig;

/// Where a block's bytes are for the request being served.
pub(crate) enum Place {
    /// Cached in DRAM at this slot; `fresh` when it was just admitted and must be
    /// filled from home before use.
    Slot { slot: u32, fresh: bool },
    /// Not cached (declined by admission, or part of a long sequential run; the
    /// counters say which): the request goes to home.
    Bypassed,
}

/// Counters of one tier, as `hscm volume stats` reports them.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct TierStats {
    pub tier: String,
    /// Block lookups that found the block in this tier (reads and writes).
    pub hits: u64,
    pub misses: u64,
    pub read_hits: u64,
    pub read_misses: u64,
    pub write_hits: u64,
    pub write_misses: u64,
    /// Misses served without entering the tier, by reason.
    pub bypassed_admission: u64,
    pub bypassed_sequential: u64,
    /// Blocks that entered the tier, and that left it to make room.
    pub promotions: u64,
    pub evictions: u64,
    /// Dirty blocks that left the fast tier to make room, written home first.
    pub demotions: u64,
    /// Blocks the fast tier wrote home (write-back), and in how many runs.
    pub written_back: u64,
    pub writeback_runs: u64,
    /// Bytes whose only durable copy is in this tier, and how long the oldest of them
    /// has waited (milliseconds).
    pub dirty_bytes: u64,
    pub dirty_age_ms: u64,
    pub occupancy_bytes: u64,
    pub capacity_bytes: u64,
    /// Requests by what the blocks that reached this tier found here: all of them,
    /// some, or none (a request none of whose blocks reached the tier is not counted).
    pub request_hits: u64,
    pub request_partial_hits: u64,
    pub request_misses: u64,
    /// Blocks put back from the saved hot list when the volume opened.
    pub restored: u64,
    /// Of those, filled from home by the background loader (a request for one not yet
    /// filled fills it itself).
    pub warmed: u64,
}

impl TierStats {
    /// Each counter of `self` combined with `other`'s by `f`; occupancy, capacity and
    /// the dirty state are `self`'s (the later state).
    fn zip(&self, other: &TierStats, f: impl Fn(u64, u64) -> u64) -> TierStats {
        TierStats {
            tier: self.tier.clone(),
            hits: f(self.hits, other.hits),
            misses: f(self.misses, other.misses),
            read_hits: f(self.read_hits, other.read_hits),
            read_misses: f(self.read_misses, other.read_misses),
            write_hits: f(self.write_hits, other.write_hits),
            write_misses: f(self.write_misses, other.write_misses),
            bypassed_admission: f(self.bypassed_admission, other.bypassed_admission),
            bypassed_sequential: f(self.bypassed_sequential, other.bypassed_sequential),
            promotions: f(self.promotions, other.promotions),
            evictions: f(self.evictions, other.evictions),
            demotions: f(self.demotions, other.demotions),
            written_back: f(self.written_back, other.written_back),
            writeback_runs: f(self.writeback_runs, other.writeback_runs),
            dirty_bytes: self.dirty_bytes,
            dirty_age_ms: self.dirty_age_ms,
            restored: f(self.restored, other.restored),
            request_hits: f(self.request_hits, other.request_hits),
            request_partial_hits: f(self.request_partial_hits, other.request_partial_hits),
            request_misses: f(self.request_misses, other.request_misses),
            warmed: f(self.warmed, other.warmed),
            occupancy_bytes: self.occupancy_bytes,
            capacity_bytes: self.capacity_bytes,
        }
    }

    /// What happened since `before` (an earlier snapshot of the same tier).
    pub fn since(&self, before: &TierStats) -> TierStats {
        self.zip(before, u64::saturating_sub)
    }

    /// `self`'s counters added to `earlier`'s (a later session on top of earlier ones).
    pub fn plus(&self, earlier: &TierStats) -> TierStats {
        self.zip(earlier, u64::saturating_add)
    }

    /// Counts one lookup of a block in this tier.
    #[inline]
    pub(crate) fn count_lookup(&mut self, hit: bool, write: bool) {
        match (hit, write) {
            (true, true) => self.write_hits += 1,
            (true, false) => self.read_hits += 1,
            (false, true) => self.write_misses += 1,
            (false, false) => self.read_misses += 1,
        }
        if hit {
            self.hits += 1;
        } else {
            self.misses += 1;
        }
    }

    /// Counts one request, given this tier's counters before it.
    pub(crate) fn count_request(&mut self, before: (u64, u64)) {
        let hits = self.hits - before.0;
        let misses = self.misses - before.1;
        match (hits, misses) {
            (0, 0) => {}
            (_, 0) => self.request_hits += 1,
            (0, _) => self.request_misses += 1,
            _ => self.request_partial_hits += 1,
        }
    }

    /// Its lookups so far, for [`TierStats::count_request`].
    pub(crate) fn lookups(&self) -> (u64, u64) {
        (self.hits, self.misses)
    }

    /// Hits over lookups (0 with none).
    pub fn hit_ratio(&self) -> f64 {
        self.hits as f64 / (self.hits + self.misses).max(1) as f64
    }
}

/// What the tier knows of one cached block.
struct Entry {
    slot: u32,
    /// The slot holds the block's bytes (false until filled from home: a fill that
    /// failed, or a block restored at open and not warmed yet).
    filled: bool,
}

/// No block: a free slot in [`Dram::slot_block`].
const NO_BLOCK: u64 = u64::MAX;

pub(crate) struct Dram {
    policy: Box<dyn CachePolicy>,
    /// Cached block → its slot, and whether the slot holds its bytes yet.
    cached: HashMap<u64, Entry>,
    /// Per slot: its block ([`NO_BLOCK`] when free), so a logged hit that names its
    /// slot needs no map lookup; and its last use, for the hot list a clean close saves.
    slot_block: Vec<u64>,
    slot_use: Vec<u64>,
    /// The slots, and which block each holds, as the lock-free hit path sees them.
    index: Arc<DramIndex>,
    block: usize,
    free: Vec<u32>,
    evicted: Vec<u64>,
    sequential: SequentialCutoff,
    clock: u64,
    pub(crate) stats: TierStats,
}

impl Dram {
    pub(crate) fn new(cfg: &TierConfig) -> std::io::Result<Dram> {
        let slots = cfg.ram_blocks() as usize;
        let spec = PolicySpec {
            eviction: cfg.eviction,
            admission: cfg.admission,
            history: None,
        };
        Ok(Dram {
            policy: spec.build(cfg.ram),
            cached: HashMap::with_capacity_and_hasher(slots, Default::default()),
            index: Arc::new(DramIndex::new(
                cfg.size / u64::from(cfg.block),
                slots,
                cfg.block as usize,
            )?),
            slot_block: vec![NO_BLOCK; slots],
            slot_use: vec![0; slots],
            block: cfg.block as usize,
            free: (0..slots as u32).rev().collect(),
            evicted: Vec::new(),
            sequential: SequentialCutoff::new(cfg.sequential_cutoff),
            clock: 0,
            stats: TierStats {
                tier: "dram".into(),
                capacity_bytes: cfg.ram,
                ..TierStats::default()
            },
        })
    }

    /// Notes a request for the sequential cutoff: true when it should bypass DRAM.
    pub(crate) fn sequential(&mut self, offset: u64, len: u64) -> bool {
        self.sequential.is_sequential(offset, len)
    }

    /// One block of a request: a hit, or a miss admitted (evicting as the policy
    /// says) or bypassed.
    pub(crate) fn place(&mut self, block: u64, write: bool, sequential: bool) -> Place {
        self.place_reading(block, write, sequential, None)
    }

    /// [`Dram::place`] for a read of `(within, len)` of the block: on a hit, the CPU
    /// starts fetching those bytes while the policy records the hit.
    ///
    /// The tier's own map answers first: it holds exactly the blocks the policy holds
    /// (every eviction is reported), so it decides hit or miss, and the policy's
    /// entry is fetched meanwhile. A policy's lookup of a missing key changes nothing,
    /// so a miss goes straight to insertion: the same decisions as `lookup` then
    /// `insert`, which is what the simulator does.
    pub(crate) fn place_reading(
        &mut self,
        block: u64,
        write: bool,
        sequential: bool,
        read: Option<(usize, usize)>,
    ) -> Place {
        self.clock += 1;
        self.policy.prefetch(block);
        if let Some(e) = self.cached.get(&block) {
            let (slot, fresh) = (e.slot, !e.filled);
            self.slot_use[slot as usize] = self.clock;
            if let (Some((within, len)), false) = (read, fresh) {
                self.prefetch(slot, within, len);
            }
            let held = self.policy.lookup(block);
            debug_assert!(held, "the policy holds every block the tier maps");
            self.stats.count_lookup(true, write);
            return Place::Slot { slot, fresh };
        }
        self.stats.count_lookup(false, write);
        if sequential {
            self.stats.bypassed_sequential += 1;
            return Place::Bypassed;
        }
        let mut evicted = std::mem::take(&mut self.evicted);
        evicted.clear();
        let outcome = self
            .policy
            .insert_evicting(block, self.block as u64, &mut |k| evicted.push(k));
        self.release(&evicted);
        self.stats.evictions += evicted.len() as u64;
        self.evicted = evicted;
        match outcome {
            CacheOutcome::Inserted => {
                let slot = self.take_slot(block);
                self.stats.promotions += 1;
                Place::Slot { slot, fresh: true }
            }
            CacheOutcome::Bypassed | CacheOutcome::Hit => {
                self.stats.bypassed_admission += 1;
                Place::Bypassed
            }
        }
    }

    /// Puts `blocks` (coldest first, so a recency policy ends with them in their old
    /// order) into the policy with slots not yet filled, admitting past any admission
    /// filter: the restart path. Returns how many it placed.
    pub(crate) fn restore(&mut self, blocks: impl Iterator<Item = u64>) -> u64 {
        let mut placed = 0;
        for block in blocks {
            if self.cached.contains_key(&block) || self.free.is_empty() {
                continue;
            }
            self.clock += 1;
            let mut evicted = std::mem::take(&mut self.evicted);
            evicted.clear();
            let size = self.block as u64;
            let mut outcome = CacheOutcome::Bypassed;
            // An admission filter admits a block on its second request.
            for _ in 0..2 {
                outcome = self
                    .policy
                    .insert_evicting(block, size, &mut |k| evicted.push(k));
                if outcome == CacheOutcome::Inserted {
                    break;
                }
            }
            self.release(&evicted);
            self.evicted = evicted;
            if outcome == CacheOutcome::Inserted {
                self.take_slot(block);
                placed += 1;
            }
        }
        self.stats.restored += placed;
        placed
    }

    /// Gives `block`, just admitted by the policy, a free slot, not filled yet.
    fn take_slot(&mut self, block: u64) -> u32 {
        let slot = self
            .free
            .pop()
            .expect("the policy holds at most as many blocks as there are slots");
        self.cached.insert(
            block,
            Entry {
                slot,
                filled: false,
            },
        );
        self.slot_block[slot as usize] = block;
        self.slot_use[slot as usize] = self.clock;
        self.index.map(block, slot);
        slot
    }

    /// Frees the slots of `evicted`, which the policy has just let go.
    fn release(&mut self, evicted: &[u64]) {
        for k in evicted {
            let e = self.cached.remove(k).expect("an evicted block held a slot");
            self.index.unmap(*k);
            self.slot_block[e.slot as usize] = NO_BLOCK;
            self.free.push(e.slot);
        }
    }

    /// The slot of `block` if it is cached but not filled yet.
    pub(crate) fn unfilled(&self, block: u64) -> Option<u32> {
        self.cached
            .get(&block)
            .filter(|e| !e.filled)
            .map(|e| e.slot)
    }

    /// Asks the CPU to start fetching the bytes a hit will copy.
    #[inline]
    pub(crate) fn prefetch(&self, slot: u32, within: usize, len: usize) {
        self.index.prefetch(slot, within, len);
    }

    /// The index the lock-free hit path reads.
    pub(crate) fn index(&self) -> &Arc<DramIndex> {
        &self.index
    }

    /// A slot's bytes, to read under the volume's lock.
    pub(crate) fn slot(&self, slot: u32) -> &[u8] {
        // SAFETY: `&self` rules out every `&mut self` method, the only writers.
        unsafe { self.index.slot(slot) }
    }

    /// The slot of `block`, cached and not filled yet, to fill; then
    /// [`Dram::set_filled`] publishes it.
    pub(crate) fn unfilled_mut(&mut self, block: u64) -> Option<&mut [u8]> {
        let slot = self.unfilled(block)?;
        // SAFETY: `&mut self` rules out every other writer and every reader through
        // `Dram`; the block is not published, so the hit path does not read the slot.
        Some(unsafe { self.index.unpublished_mut(slot) })
    }

    /// Changes the bytes of `block`'s slot (cached, filled or not) with `f`; a filled
    /// slot is changed with the hit path kept out of it meanwhile.
    pub(crate) fn write_slot(&mut self, block: u64, f: impl FnOnce(&mut [u8])) {
        if let Some(buf) = self.unfilled_mut(block) {
            f(buf);
        } else {
            let done = self.index.write_published(block, f);
            debug_assert!(done, "block {block} is cached");
        }
    }

    /// Marks `block`'s slot as holding its bytes: from now on the hit path serves it.
    pub(crate) fn set_filled(&mut self, block: u64) {
        if let Some(e) = self.cached.get_mut(&block) {
            if !e.filled {
                e.filled = true;
                self.index.publish(block);
            }
        }
    }

    /// Starts fetching what [`Dram::record_hit_read`] will touch for `hit`.
    pub(crate) fn prefetch_hit(&self, hit: &HitRead) {
        self.policy.prefetch(hit.offset / self.block as u64);
    }

    /// Tells the policy, the cutoff and the counters of a read the hit path served,
    /// as [`Dram::place_reading`] would have; returns the blocks it touched.
    pub(crate) fn record_hit_read(&mut self, hit: HitRead) -> u64 {
        let bs = self.block as u64;
        // Hits never depend on the cutoff, but the runs it tracks include them.
        self.sequential.is_sequential(hit.offset, hit.len);
        let (first, last) = (hit.offset / bs, (hit.offset + hit.len - 1) / bs);
        for block in first..=last {
            self.clock += 1;
            let slot = if block == first && self.slot_block[hit.slot as usize] == block {
                Some(hit.slot)
            } else {
                self.cached.get(&block).map(|e| e.slot)
            };
            // A block evicted since the read copied it (by another client's miss) is
            // a hit all the same; the policy no longer holds it.
            if let Some(slot) = slot {
                self.slot_use[slot as usize] = self.clock;
                self.policy.lookup(block);
            }
            self.stats.count_lookup(true, false);
        }
        last - first + 1
    }

    pub(crate) fn snapshot(&self) -> TierStats {
        TierStats {
            occupancy_bytes: self.policy.used(),
            ..self.stats.clone()
        }
    }

    /// Cached blocks (filled or not), hottest (most recently used) first.
    pub(crate) fn hot_list(&self) -> Vec<u64> {
        let mut blocks: Vec<(u64, u64)> = self
            .cached
            .iter()
            .map(|(&b, e)| (self.slot_use[e.slot as usize], b))
            .collect();
        blocks.sort_unstable_by(|a, b| b.cmp(a));
        blocks.into_iter().map(|(_, b)| b).collect()
    }
}

//! The DRAM tier: an arena of block-sized slots, the cache policy that decides which
//! blocks hold them (hscm-policy's, the code `hscm sim cache` runs), and the counters.

use std::collections::HashMap;

use hscm_policy::cache::{CacheOutcome, CachePolicy, PolicySpec};
use hscm_volume::AlignedBuf;
use serde::Serialize;

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
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct TierStats {
    pub tier: &'static str,
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
    pub occupancy_bytes: u64,
    pub capacity_bytes: u64,
    /// Blocks put back from the saved hot list when the volume opened.
    pub restored: u64,
    /// Of those, filled from home by the background loader (a request for one not yet
    /// filled fills it itself).
    pub warmed: u64,
}

/// Recent sequential runs (bcache's sequential cutoff, simplified to the last few
/// streams): a request that starts where a run ended extends it.
struct Streams {
    /// (next offset, run length in bytes, last use)
    runs: [(u64, u64, u64); 16],
    clock: u64,
}

impl Streams {
    fn new() -> Streams {
        Streams {
            runs: [(u64::MAX, 0, 0); 16],
            clock: 0,
        }
    }

    /// Records a request and returns the length of the sequential run it belongs to.
    fn observe(&mut self, offset: u64, len: u64) -> u64 {
        self.clock += 1;
        let end = offset + len;
        if let Some(r) = self.runs.iter_mut().find(|r| r.0 == offset) {
            r.0 = end;
            r.1 += len;
            r.2 = self.clock;
            return r.1;
        }
        let oldest = self
            .runs
            .iter_mut()
            .min_by_key(|r| r.2)
            .expect("sixteen runs");
        *oldest = (end, len, self.clock);
        len
    }
}

pub(crate) struct Dram {
    policy: Box<dyn CachePolicy>,
    slot_of: HashMap<u64, u32>,
    arena: AlignedBuf,
    block: usize,
    free: Vec<u32>,
    /// Slots whose bytes are not the block's (a fill from home failed).
    valid: Vec<bool>,
    evicted: Vec<u64>,
    streams: Streams,
    cutoff: u64,
    /// Last use of each slot's block, for the hot list a clean close saves.
    last_use: Vec<u64>,
    clock: u64,
    pub(crate) stats: TierStats,
}

impl Dram {
    pub(crate) fn new(cfg: &TierConfig) -> Dram {
        let slots = cfg.ram_blocks() as usize;
        let spec = PolicySpec {
            eviction: cfg.eviction,
            admission: cfg.admission,
            history: None,
        };
        Dram {
            policy: spec.build(cfg.ram),
            slot_of: HashMap::with_capacity(slots),
            arena: AlignedBuf::zeroed(cfg.ram as usize),
            block: cfg.block as usize,
            free: (0..slots as u32).rev().collect(),
            valid: vec![false; slots],
            evicted: Vec::new(),
            streams: Streams::new(),
            cutoff: cfg.sequential_cutoff,
            last_use: vec![0; slots],
            clock: 0,
            stats: TierStats {
                tier: "dram",
                capacity_bytes: cfg.ram,
                ..TierStats::default()
            },
        }
    }

    /// Notes a request for the sequential cutoff: true when it should bypass DRAM.
    pub(crate) fn sequential(&mut self, offset: u64, len: u64) -> bool {
        let run = self.streams.observe(offset, len);
        self.cutoff > 0 && run > self.cutoff
    }

    /// One block of a request: a hit, or a miss admitted (evicting as the policy
    /// says) or bypassed.
    pub(crate) fn place(&mut self, block: u64, write: bool, sequential: bool) -> Place {
        self.clock += 1;
        let s = &mut self.stats;
        if self.policy.lookup(block) {
            s.hits += 1;
            if write {
                s.write_hits += 1;
            } else {
                s.read_hits += 1;
            }
            let slot = self.slot_of[&block];
            self.last_use[slot as usize] = self.clock;
            return Place::Slot {
                slot,
                fresh: !self.valid[slot as usize],
            };
        }
        s.misses += 1;
        if write {
            s.write_misses += 1;
        } else {
            s.read_misses += 1;
        }
        if sequential {
            s.bypassed_sequential += 1;
            return Place::Bypassed;
        }
        let mut evicted = std::mem::take(&mut self.evicted);
        evicted.clear();
        let outcome = self
            .policy
            .insert_evicting(block, self.block as u64, &mut |k| evicted.push(k));
        for k in &evicted {
            let slot = self
                .slot_of
                .remove(k)
                .expect("an evicted block held a slot");
            self.valid[slot as usize] = false;
            self.free.push(slot);
        }
        self.stats.evictions += evicted.len() as u64;
        self.evicted = evicted;
        match outcome {
            CacheOutcome::Inserted => {
                let slot = self
                    .free
                    .pop()
                    .expect("the policy holds at most as many blocks as there are slots");
                self.slot_of.insert(block, slot);
                self.last_use[slot as usize] = self.clock;
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
            if self.slot_of.contains_key(&block) || self.free.is_empty() {
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
            for k in &evicted {
                let slot = self
                    .slot_of
                    .remove(k)
                    .expect("an evicted block held a slot");
                self.valid[slot as usize] = false;
                self.free.push(slot);
            }
            self.evicted = evicted;
            if outcome == CacheOutcome::Inserted {
                let slot = self.free.pop().expect("a slot per cached block");
                self.slot_of.insert(block, slot);
                self.valid[slot as usize] = false;
                self.last_use[slot as usize] = self.clock;
                placed += 1;
            }
        }
        self.stats.restored += placed;
        placed
    }

    /// The slot of `block` if it is cached but not filled yet.
    pub(crate) fn unfilled(&self, block: u64) -> Option<u32> {
        self.slot_of
            .get(&block)
            .copied()
            .filter(|&s| !self.valid[s as usize])
    }

    pub(crate) fn slot(&self, slot: u32) -> &[u8] {
        let at = slot as usize * self.block;
        &self.arena[at..at + self.block]
    }

    pub(crate) fn slot_mut(&mut self, slot: u32) -> &mut [u8] {
        let at = slot as usize * self.block;
        &mut self.arena[at..at + self.block]
    }

    pub(crate) fn set_valid(&mut self, slot: u32, valid: bool) {
        self.valid[slot as usize] = valid;
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
            .slot_of
            .iter()
            .map(|(&b, &s)| (self.last_use[s as usize], b))
            .collect();
        blocks.sort_unstable_by(|a, b| b.cmp(a));
        blocks.into_iter().map(|(_, b)| b).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_run_counts_only_requests_that_continue_it() {
        let mut s = Streams::new();
        assert_eq!(s.observe(0, 4096), 4096);
        assert_eq!(s.observe(4096, 4096), 8192);
        assert_eq!(s.observe(1 << 20, 4096), 4096);
        assert_eq!(s.observe(8192, 8192), 16384);
    }
}

//! Set-associative, write-back, write-allocate caches with LRU replacement.

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct CacheLevel {
    pub bytes: u64,
    pub ways: u32,
    /// Added to the access time on a hit at this level, in core cycles.
    pub hit_cycles: u32,
}

/// The seed paper's Table 1 (sizes); associativities and the L2 hit time are ours.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct CacheConfig {
    pub line: u64,
    pub l1i: CacheLevel,
    pub l1d: CacheLevel,
    pub l2: CacheLevel,
}

impl Default for CacheConfig {
    fn default() -> Self {
        Self {
            line: 64,
            l1i: CacheLevel {
                bytes: 32 << 10,
                ways: 4,
                hit_cycles: 0,
            },
            l1d: CacheLevel {
                bytes: 32 << 10,
                ways: 4,
                hit_cycles: 0,
            },
            l2: CacheLevel {
                bytes: 512 << 10,
                ways: 8,
                hit_cycles: 10,
            },
        }
    }
}

const INVALID: u64 = u64::MAX;

/// One cache. Tags are line numbers (address / line size).
pub(crate) struct Cache {
    sets: u64,
    ways: usize,
    tags: Vec<u64>,
    dirty: Vec<bool>,
    stamp: Vec<u64>,
    clock: u64,
    pub(crate) hits: u64,
    pub(crate) misses: u64,
}

pub(crate) struct Outcome {
    pub hit: bool,
    /// A dirty line pushed out to make room.
    pub writeback: Option<u64>,
}

impl Cache {
    pub(crate) fn new(level: &CacheLevel, line: u64) -> Self {
        let lines = (level.bytes / line).max(1);
        let ways = (level.ways as u64).clamp(1, lines);
        let sets = (lines / ways).max(1);
        let n = (sets * ways) as usize;
        Self {
            sets,
            ways: ways as usize,
            tags: vec![INVALID; n],
            dirty: vec![false; n],
            stamp: vec![0; n],
            clock: 0,
            hits: 0,
            misses: 0,
        }
    }

    /// Looks up `line`; on a miss allocates it (the caller fetches it if needed).
    pub(crate) fn access(&mut self, line: u64, write: bool) -> Outcome {
        self.clock += 1;
        let base = (line % self.sets) as usize * self.ways;
        let set = base..base + self.ways;
        if let Some(i) = self.tags[set.clone()].iter().position(|&t| t == line) {
            let i = base + i;
            self.stamp[i] = self.clock;
            self.dirty[i] |= write;
            self.hits += 1;
            return Outcome {
                hit: true,
                writeback: None,
            };
        }
        self.misses += 1;
        let victim = set
            .min_by_key(|&i| {
                if self.tags[i] == INVALID {
                    0
                } else {
                    self.stamp[i]
                }
            })
            .expect("at least one way");
        let writeback =
            (self.tags[victim] != INVALID && self.dirty[victim]).then_some(self.tags[victim]);
        self.tags[victim] = line;
        self.dirty[victim] = write;
        self.stamp[victim] = self.clock;
        Outcome {
            hit: false,
            writeback,
        }
    }

    pub(crate) fn hit_rate(&self) -> Option<f64> {
        let n = self.hits + self.misses;
        (n > 0).then(|| self.hits as f64 / n as f64)
    }
}

/// What the hierarchy needs from memory for one reference.
#[derive(Default)]
pub(crate) struct HierarchyResult {
    /// Core cycles spent in the caches.
    pub cycles: u32,
    /// Line to read from memory (an L2 miss).
    pub fill: Option<u64>,
    /// Dirty lines leaving L2 (at most two: one from the L1 victim, one from the fill).
    pub writebacks: [Option<u64>; 2],
}

pub(crate) struct Hierarchy {
    pub(crate) l1i: Cache,
    pub(crate) l1d: Cache,
    pub(crate) l2: Cache,
    l2_hit_cycles: u32,
    l1_hit_cycles: u32,
}

impl Hierarchy {
    pub(crate) fn new(c: &CacheConfig) -> Self {
        Self {
            l1i: Cache::new(&c.l1i, c.line),
            l1d: Cache::new(&c.l1d, c.line),
            l2: Cache::new(&c.l2, c.line),
            l2_hit_cycles: c.l2.hit_cycles,
            l1_hit_cycles: c.l1d.hit_cycles,
        }
    }

    pub(crate) fn access(&mut self, line: u64, write: bool, fetch: bool) -> HierarchyResult {
        let l1 = if fetch { &mut self.l1i } else { &mut self.l1d };
        let o1 = l1.access(line, write);
        let mut r = HierarchyResult {
            cycles: self.l1_hit_cycles,
            ..Default::default()
        };
        if o1.hit {
            return r;
        }
        // The L1 victim goes down first: written into L2 whole, no fetch needed.
        if let Some(v) = o1.writeback {
            let o = self.l2.access(v, true);
            r.writebacks[0] = o.writeback;
        }
        let o2 = self.l2.access(line, false);
        r.cycles += self.l2_hit_cycles;
        if !o2.hit {
            r.fill = Some(line);
            r.writebacks[1] = o2.writeback;
        }
        r
    }
}

/// Turns a pre-cache reference stream into the memory requests it causes (L2 misses as
/// reads, dirty L2 evictions as writes), each carrying the instructions retired since
/// the previous request: how post-cache traces are made from lackey traces.
pub struct CacheFilter {
    h: Hierarchy,
    line: u64,
    pending: u64,
}

impl CacheFilter {
    pub fn new(c: &CacheConfig) -> Self {
        Self {
            h: Hierarchy::new(c),
            line: c.line,
            pending: 0,
        }
    }

    pub fn push(&mut self, r: &hscm_trace::MemRef, out: &mut Vec<hscm_trace::MemRef>) {
        use hscm_trace::{Access, MemRef};
        self.pending += r.delta;
        let hr = self.h.access(
            r.addr / self.line,
            r.kind == Access::Write,
            r.kind == Access::Fetch,
        );
        let mut emit = |addr: u64, kind: Access, pending: &mut u64| {
            out.push(MemRef {
                addr,
                kind,
                size: 64,
                delta: std::mem::take(pending),
            })
        };
        for wb in hr.writebacks.into_iter().flatten() {
            emit(wb * self.line, Access::Write, &mut self.pending);
        }
        if let Some(fill) = hr.fill {
            emit(fill * self.line, Access::Read, &mut self.pending);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lru_within_a_set_and_dirty_writebacks() {
        let mut c = Cache::new(
            &CacheLevel {
                bytes: 4 * 64,
                ways: 2,
                hit_cycles: 0,
            },
            64,
        );
        // 2 sets × 2 ways; lines 0, 2, 4 share set 0.
        assert!(!c.access(0, true).hit);
        assert!(!c.access(2, false).hit);
        assert!(c.access(0, false).hit); // 2 is now LRU
        let o = c.access(4, false);
        assert!(!o.hit && o.writeback.is_none()); // evicted clean 2
        let o = c.access(2, false); // evicts 0 (dirty)
        assert_eq!(o.writeback, Some(0));
        assert_eq!((c.hits, c.misses), (1, 4));
    }

    #[test]
    fn a_working_set_that_fits_l2_stops_missing() {
        let mut h = Hierarchy::new(&CacheConfig::default());
        let lines = (256 << 10) / 64;
        let mut fills = 0;
        for pass in 0..3 {
            for l in 0..lines {
                if h.access(l, pass == 0, false).fill.is_some() {
                    fills += 1;
                }
            }
        }
        assert_eq!(fills, lines);
        assert!(h.l1d.hit_rate().unwrap() < 0.01);
        assert!(h.l2.hit_rate().unwrap() > 0.6);
    }
}

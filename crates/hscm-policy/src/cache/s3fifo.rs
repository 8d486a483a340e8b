//! S3-FIFO.

use super::{CacheOutcome, CachePolicy};

/// S3-FIFO as its authors' reference implementation (libCacheSim's `S3FIFO.c`) defines
/// it, decision for decision, so the two give identical miss ratios:
///
/// * a small FIFO of 10% of the bytes, a main FIFO of the rest, a ghost FIFO of keys
///   holding 90% of the bytes; objects of 10% of the cache or more are never cached;
/// * a hit adds one to the object's frequency; a miss whose key is in the ghost goes to
///   main, others to small (to main while small is full before the first eviction);
/// * when the cache is full it evicts from main if main is over its share or small is
///   empty, else from small; small's oldest objects with a frequency of at least
///   `threshold` (default 2) move to main until one without goes to the ghost; main's
///   oldest objects with a non-zero frequency go round again with it capped at 3 and
///   lowered by one, until one without leaves.
///
/// Per-key state lives in one prefetchable table; the queues hold keys only. Ghost hits
/// leave their queue entry behind, recognised later as stale by its sequence number.
pub struct S3FifoCache {
    capacity: u64,
    small_cap: u64,
    main_cap: u64,
    ghost_cap: u64,
    small_used: u64,
    main_used: u64,
    ghost_used: u64,
    ghost_live: usize,
    threshold: u64,
    has_evicted: bool,
    /// key → (queue tag and frequency, or ghost sequence, in `stamp`), size
    map: crate::table::StampTable,
    small: std::collections::VecDeque<u64>,
    main: std::collections::VecDeque<u64>,
    ghost: std::collections::VecDeque<(u64, u64)>,
    ghost_seq: u64,
}

const S3_TAG_SHIFT: u32 = 62;
const S3_SMALL: u64 = 1;
const S3_MAIN: u64 = 2;
const S3_GHOST: u64 = 3;
const S3_LOW: u64 = (1 << S3_TAG_SHIFT) - 1;

#[inline]
fn s3_stamp(tag: u64, low: u64) -> u64 {
    (tag << S3_TAG_SHIFT) | (low & S3_LOW)
}

impl S3FifoCache {
    /// libCacheSim's defaults: small queue 10%, ghost 90%, move-to-main threshold 2.
    pub fn new(capacity: u64) -> Self {
        Self::with_threshold(capacity, 2)
    }

    /// `threshold`: hits an object needs while in the small queue to move to main.
    pub fn with_threshold(capacity: u64, threshold: u64) -> Self {
        // The same float arithmetic as libCacheSim, so the shares round alike.
        let small_cap = (capacity as f64 * 0.1) as u64;
        Self {
            capacity,
            small_cap,
            main_cap: capacity - small_cap,
            ghost_cap: (capacity as f64 * 0.9) as u64,
            small_used: 0,
            main_used: 0,
            ghost_used: 0,
            ghost_live: 0,
            threshold: threshold.max(1),
            has_evicted: false,
            map: crate::table::StampTable::new(),
            small: Default::default(),
            main: Default::default(),
            ghost: Default::default(),
            ghost_seq: 0,
        }
    }

    fn evict(&mut self, evicted: &mut impl FnMut(u64)) {
        self.has_evicted = true;
        if self.main_used > self.main_cap || self.small_used == 0 {
            self.evict_main(evicted);
        } else {
            self.evict_small(evicted);
        }
    }

    fn evict_small(&mut self, evicted: &mut impl FnMut(u64)) {
        while let Some(key) = self.small.pop_front() {
            let e = self.map.get_mut(key).expect("queued keys are in the table");
            let (freq, size) = (e.stamp & S3_LOW, e.size);
            self.small_used -= size;
            if freq >= self.threshold {
                e.stamp = s3_stamp(S3_MAIN, 0);
                self.main.push_back(key);
                self.main_used += size;
            } else {
                self.send_to_ghost(key, size);
                evicted(key);
                return;
            }
        }
    }

    fn evict_main(&mut self, evicted: &mut impl FnMut(u64)) {
        while let Some(key) = self.main.pop_front() {
            let e = self.map.get_mut(key).expect("queued keys are in the table");
            let freq = e.stamp & S3_LOW;
            if freq >= 1 {
                e.stamp = s3_stamp(S3_MAIN, freq.min(3) - 1);
                self.main.push_back(key);
            } else {
                let size = e.size;
                self.map.remove(key);
                self.main_used -= size;
                evicted(key);
                return;
            }
        }
    }

    /// Turns a table entry just taken out of the small queue into a ghost entry.
    fn send_to_ghost(&mut self, key: u64, size: u64) {
        if size > self.ghost_cap {
            self.map.remove(key);
            return;
        }
        while self.ghost_used + size > self.ghost_cap {
            let (k, seq) = self.ghost.pop_front().expect("ghost bytes imply entries");
            if self
                .map
                .get(k)
                .is_some_and(|e| e.stamp == s3_stamp(S3_GHOST, seq))
            {
                let e = self.map.remove(k).expect("just found");
                self.ghost_used -= e.size;
                self.ghost_live -= 1;
            }
        }
        self.ghost_seq += 1;
        let e = self.map.get_mut(key).expect("caller's key");
        e.stamp = s3_stamp(S3_GHOST, self.ghost_seq);
        self.ghost.push_back((key, self.ghost_seq));
        self.ghost_used += size;
        self.ghost_live += 1;
        if self.ghost.len() > 2 * self.ghost_live + 4096 {
            let map = &self.map;
            self.ghost.retain(|&(k, seq)| {
                map.get(k)
                    .is_some_and(|e| e.stamp == s3_stamp(S3_GHOST, seq))
            });
        }
    }
}

impl S3FifoCache {
    fn insert_with(&mut self, key: u64, size: u64, evicted: &mut impl FnMut(u64)) -> CacheOutcome {
        let mut hit_on_ghost = false;
        if let Some(e) = self.map.get_mut(key) {
            debug_assert!(
                e.stamp >> S3_TAG_SHIFT == S3_GHOST,
                "insert of a cached key"
            );
            let size = e.size;
            self.map.remove(key);
            self.ghost_used -= size;
            self.ghost_live -= 1;
            hit_on_ghost = true;
        }
        if size > self.small_cap {
            return CacheOutcome::Bypassed;
        }
        while self.small_used + self.main_used + size > self.capacity {
            self.evict(evicted);
        }
        let to_main = if hit_on_ghost {
            true
        } else if size >= self.small_cap {
            // As the reference: such an object would flush the whole small queue.
            return CacheOutcome::Bypassed;
        } else {
            !self.has_evicted && self.small_used >= self.small_cap
        };
        if to_main {
            self.map.insert_new(key, s3_stamp(S3_MAIN, 0), size);
            self.main.push_back(key);
            self.main_used += size;
        } else {
            self.map.insert_new(key, s3_stamp(S3_SMALL, 0), size);
            self.small.push_back(key);
            self.small_used += size;
        }
        CacheOutcome::Inserted
    }
}

impl CachePolicy for S3FifoCache {
    fn lookup(&mut self, key: u64) -> bool {
        match self.map.get_mut(key) {
            Some(e) if e.stamp >> S3_TAG_SHIFT != S3_GHOST => {
                if e.stamp & S3_LOW < S3_LOW {
                    e.stamp += 1;
                }
                true
            }
            _ => false,
        }
    }
    inserts_through_insert_with!();
    #[inline]
    fn prefetch(&self, key: u64) {
        self.map.prefetch(key);
    }
    fn used(&self) -> u64 {
        self.small_used + self.main_used
    }
}

//! RaPP, rank-based page placement (Ramos, Gorbatov & Bianchini, ICS 2011), the seed
//! paper's baseline.
//!
//! Pages are ranked with the Multi-Queue algorithm (Zhou et al., 2001): a page
//! referenced n times sits in queue min(⌊log2 n⌋, queues − 1), LRU inside each queue.
//! A page not referenced for `lifetime` accesses drops one queue (its count with it),
//! so rank tracks both frequency and recency. A page in the slow device that reaches
//! the `threshold` queue migrates to the fast device. Writes can weigh more than reads
//! (PCM writes are the costly ones).
//!
//! Parameters: RaPP uses MQ with 16 queues and migrates pages reaching a threshold
//! queue; the exact threshold and lifetime it used are tuned per workload in the paper
//! and we could not check them here, so our defaults (threshold queue 5, lifetime
//! 10,000 memory accesses, write weight 1) are our choice, all configurable.

use std::hash::Hash;

use serde::{Deserialize, Serialize};

use crate::Lru;

#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct RappConfig {
    pub queues: usize,
    pub threshold_queue: usize,
    pub lifetime: u64,
    pub read_weight: u32,
    pub write_weight: u32,
}

impl Default for RappConfig {
    fn default() -> Self {
        Self {
            queues: 16,
            threshold_queue: 5,
            lifetime: 10_000,
            read_weight: 1,
            write_weight: 1,
        }
    }
}

#[derive(Default, Clone, Copy)]
struct Entry {
    count: u64,
    expires: u64,
}

pub struct Rapp<K> {
    config: RappConfig,
    queues: Vec<Lru<K, Entry>>,
    now: u64,
    demotions: u64,
}

impl<K: Copy + Eq + Hash> Rapp<K> {
    pub fn new(config: RappConfig) -> Self {
        let n = config.queues.max(1);
        Self {
            config,
            queues: (0..n).map(|_| Lru::new()).collect(),
            now: 0,
            demotions: 0,
        }
    }

    fn queue_of(&self, count: u64) -> usize {
        let q = 63 - count.max(1).leading_zeros() as usize;
        q.min(self.queues.len() - 1)
    }

    /// Ranks one access; true when the page is in the slow device and should migrate.
    pub fn on_access(&mut self, page: K, in_slow: bool, is_write: bool) -> bool {
        self.now += 1;
        let weight = u64::from(if is_write {
            self.config.write_weight
        } else {
            self.config.read_weight
        });
        let mut entry = Entry::default();
        for q in &mut self.queues {
            if let Some(e) = q.remove(&page) {
                entry = e;
                break;
            }
        }
        entry.count = entry.count.saturating_add(weight.max(1));
        entry.expires = self.now + self.config.lifetime;
        let q = self.queue_of(entry.count);
        self.queues[q].insert(page, entry);
        self.expire();
        in_slow && q >= self.config.threshold_queue
    }

    /// MQ's aging: the least recent page of each queue above 0, once expired, drops to
    /// the queue below with its count halved.
    fn expire(&mut self) {
        for q in 1..self.queues.len() {
            let expired = matches!(self.queues[q].oldest(), Some((_, e)) if e.expires < self.now);
            if expired {
                let (k, mut e) = self.queues[q].pop_oldest().expect("checked above");
                e.count = 1 << (q - 1);
                e.expires = self.now + self.config.lifetime;
                self.queues[q - 1].insert(k, e);
                self.demotions += 1;
            }
        }
    }

    /// Queue of a page, if ranked.
    pub fn rank(&self, page: &K) -> Option<usize> {
        self.queues.iter().position(|q| q.contains(page))
    }

    pub fn tracked(&self) -> usize {
        self.queues.iter().map(Lru::len).sum()
    }

    pub fn demotions(&self) -> u64 {
        self.demotions
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_page_climbs_one_queue_per_doubling_and_migrates_at_the_threshold() {
        let mut r = Rapp::new(RappConfig {
            threshold_queue: 3,
            ..RappConfig::default()
        });
        let mut migrated_at = None;
        for n in 1..=10u64 {
            if r.on_access(42u64, true, false) && migrated_at.is_none() {
                migrated_at = Some(n);
            }
        }
        assert_eq!(migrated_at, Some(8)); // queue 3 = counts 8..15
        assert_eq!(r.rank(&42), Some(3));
        // Pages already in the fast device are ranked but never migrate.
        for _ in 0..20 {
            assert!(!r.on_access(7u64, false, true));
        }
    }

    #[test]
    fn idle_pages_age_down() {
        let mut r = Rapp::new(RappConfig {
            lifetime: 5,
            ..RappConfig::default()
        });
        for _ in 0..4 {
            r.on_access(1u64, false, false);
        }
        assert_eq!(r.rank(&1), Some(2));
        for i in 0..20u64 {
            r.on_access(100 + i, false, false);
        }
        assert!(r.rank(&1).unwrap() < 2, "rank {:?}", r.rank(&1));
        assert!(r.demotions() > 0);
    }

    #[test]
    fn writes_can_weigh_more() {
        let mut r = Rapp::new(RappConfig {
            threshold_queue: 3,
            write_weight: 4,
            ..RappConfig::default()
        });
        assert!(!r.on_access(1u64, true, true)); // 4 → queue 2
        assert!(r.on_access(1, true, true)); // 8 → queue 3
    }
}

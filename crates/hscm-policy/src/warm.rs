//! WARM (write-aware, row-buffer-miss) migration, as the seed paper's §2.3 and §4.1.
//!
//! A row written while it lives in the slow device (PCM) enters a bounded counter table.
//! Later writes to it, and row-buffer misses on it, add to its counter (weights
//! configurable); at the threshold it migrates to the fast device (DRAM). A bounded
//! remap table records migrated rows; when it is full it is reset (every migrated row
//! goes back) before the next migration.

use std::hash::Hash;

use rustc_hash::FxHashSet as HashSet;

use serde::{Deserialize, Serialize};

use crate::Lru;

/// Budgets and weights. Defaults are the paper's: 4 KB of counters, 16 KB of remap
/// table, threshold 1, a write and a row-buffer miss each worth 1.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct WarmConfig {
    pub counter_bytes: usize,
    /// Bytes per counter entry: a row tag of up to 20 bits plus a small counter.
    pub counter_entry_bytes: usize,
    pub remap_bytes: usize,
    /// Bytes per remap entry: two row numbers.
    pub remap_entry_bytes: usize,
    pub threshold: u32,
    pub write_weight: u32,
    pub miss_weight: u32,
}

impl Default for WarmConfig {
    fn default() -> Self {
        Self {
            counter_bytes: 4096,
            counter_entry_bytes: 4,
            remap_bytes: 16384,
            remap_entry_bytes: 8,
            threshold: 1,
            write_weight: 1,
            miss_weight: 1,
        }
    }
}

impl WarmConfig {
    pub fn counter_entries(&self) -> usize {
        (self.counter_bytes / self.counter_entry_bytes.max(1)).max(1)
    }
    pub fn remap_entries(&self) -> usize {
        (self.remap_bytes / self.remap_entry_bytes.max(1)).max(1)
    }
}

/// WARM's decisions are the migration layer's.
pub type WarmDecision<K> = crate::migration::MigrationDecision<K>;

pub struct Warm<K> {
    config: WarmConfig,
    counters: Lru<K, u32>,
    remapped: HashSet<K>,
    resets: u64,
    counter_evictions: u64,
}

impl<K: Copy + Eq + Hash> Warm<K> {
    pub fn new(config: WarmConfig) -> Self {
        Self {
            config,
            counters: Lru::new(),
            remapped: HashSet::default(),
            resets: 0,
            counter_evictions: 0,
        }
    }

    pub fn config(&self) -> &WarmConfig {
        &self.config
    }

    /// An access served by the slow device. `row_hit` says whether it hit the open row.
    pub fn on_slow_access(&mut self, row: K, is_write: bool, row_hit: bool) -> WarmDecision<K> {
        let add = u32::from(is_write) * self.config.write_weight
            + u32::from(!row_hit) * self.config.miss_weight;
        let count = match self.counters.touch(&row) {
            Some(c) => {
                *c = c.saturating_add(add);
                *c
            }
            None if is_write => {
                if self.counters.len() >= self.config.counter_entries() {
                    self.counters.pop_oldest();
                    self.counter_evictions += 1;
                }
                self.counters.insert(row, 0);
                0
            }
            None => return WarmDecision::Stay,
        };
        if count < self.config.threshold {
            return WarmDecision::Stay;
        }
        self.counters.remove(&row);
        if self.remapped.len() >= self.config.remap_entries() {
            self.resets += 1;
            let restore: Vec<K> = self.remapped.drain().collect();
            self.remapped.insert(row);
            return WarmDecision::ResetThenMigrate {
                restore,
                migrate: row,
            };
        }
        self.remapped.insert(row);
        WarmDecision::Migrate(row)
    }

    /// The controller moved `row` back to the slow device on its own (e.g. evicted it
    /// from the fast device to make room).
    pub fn forget(&mut self, row: &K) {
        self.remapped.remove(row);
    }

    pub fn is_remapped(&self, row: &K) -> bool {
        self.remapped.contains(row)
    }

    pub fn remapped_len(&self) -> usize {
        self.remapped.len()
    }

    pub fn resets(&self) -> u64 {
        self.resets
    }

    pub fn counter_evictions(&self) -> u64 {
        self.counter_evictions
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_read_alone_never_enters_the_table() {
        let mut w = Warm::new(WarmConfig::default());
        for _ in 0..10 {
            assert_eq!(w.on_slow_access(7u64, false, false), WarmDecision::Stay);
        }
    }

    #[test]
    fn threshold_one_migrates_on_the_second_write_or_a_later_miss() {
        let mut w = Warm::new(WarmConfig::default());
        assert_eq!(w.on_slow_access(1u64, true, true), WarmDecision::Stay);
        assert_eq!(w.on_slow_access(1, true, true), WarmDecision::Migrate(1));
        assert!(w.is_remapped(&1));
        assert_eq!(w.on_slow_access(2, true, false), WarmDecision::Stay);
        assert_eq!(w.on_slow_access(2, false, true), WarmDecision::Stay);
        assert_eq!(w.on_slow_access(2, false, false), WarmDecision::Migrate(2));
    }

    #[test]
    fn weights_and_threshold_are_honoured() {
        let mut w = Warm::new(WarmConfig {
            threshold: 4,
            write_weight: 2,
            miss_weight: 1,
            ..WarmConfig::default()
        });
        assert_eq!(w.on_slow_access(1u64, true, false), WarmDecision::Stay); // enters: 0
        assert_eq!(w.on_slow_access(1, true, true), WarmDecision::Stay); // 2
        assert_eq!(w.on_slow_access(1, false, false), WarmDecision::Stay); // 3
        assert_eq!(w.on_slow_access(1, true, false), WarmDecision::Migrate(1)); // 6
    }

    #[test]
    fn counter_table_is_bounded_and_forgets_the_least_recent() {
        let mut w = Warm::new(WarmConfig {
            counter_bytes: 8,
            counter_entry_bytes: 4,
            ..WarmConfig::default()
        });
        w.on_slow_access(1u64, true, true);
        w.on_slow_access(2, true, true);
        w.on_slow_access(3, true, true); // evicts 1
        assert_eq!(w.counter_evictions(), 1);
        assert_eq!(w.on_slow_access(1, true, true), WarmDecision::Stay); // re-enters at 0
        assert_eq!(w.on_slow_access(3, true, true), WarmDecision::Migrate(3));
    }

    #[test]
    fn a_full_remap_table_resets_before_the_next_migration() {
        let mut w = Warm::new(WarmConfig {
            remap_bytes: 16,
            remap_entry_bytes: 8,
            ..WarmConfig::default()
        });
        for r in [1u64, 2] {
            w.on_slow_access(r, true, true);
            assert_eq!(w.on_slow_access(r, true, true), WarmDecision::Migrate(r));
        }
        w.on_slow_access(3, true, true);
        match w.on_slow_access(3, true, true) {
            WarmDecision::ResetThenMigrate {
                mut restore,
                migrate,
            } => {
                restore.sort();
                assert_eq!(restore, vec![1, 2]);
                assert_eq!(migrate, 3);
            }
            d => panic!("expected a reset, got {d:?}"),
        }
        assert_eq!(w.resets(), 1);
        assert_eq!(w.remapped_len(), 1);
    }
}

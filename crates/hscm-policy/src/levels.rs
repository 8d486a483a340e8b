//! Hot and cold range lists (the Sprint-AEP paper, §III-C): keys grouped into hotness
//! levels 1..=10, least-recently-used order inside each level. A prefetcher walks the
//! hot lists of a device from the top level down, most recent first, and makes room by
//! evicting from the bottom of the cold lists of the cache.

use std::hash::Hash;

use rustc_hash::FxHashMap as HashMap;

use crate::Lru;

/// Number of hotness levels (the paper's HRL1..HRL10 / CRL1..CRL10).
pub const LEVELS: u8 = 10;

/// The level of an access count: 1 for 0-1 accesses, then one level per doubling,
/// capped at [`LEVELS`].
pub fn level_of(hotness: u32) -> u8 {
    let log = 31 - hotness.max(1).leading_zeros();
    (1 + log).min(LEVELS as u32) as u8
}

/// Keys in hotness levels, each level an LRU list.
pub struct LeveledLru<K> {
    levels: Vec<Lru<K, ()>>,
    level: HashMap<K, u8>,
}

impl<K: Copy + Eq + Hash> Default for LeveledLru<K> {
    fn default() -> Self {
        Self::new()
    }
}

impl<K: Copy + Eq + Hash> LeveledLru<K> {
    pub fn new() -> Self {
        Self {
            levels: (0..LEVELS).map(|_| Lru::new()).collect(),
            level: HashMap::default(),
        }
    }

    pub fn len(&self) -> usize {
        self.level.len()
    }

    pub fn is_empty(&self) -> bool {
        self.level.is_empty()
    }

    pub fn contains(&self, key: &K) -> bool {
        self.level.contains_key(key)
    }

    /// The key's level, if listed.
    pub fn level(&self, key: &K) -> Option<u8> {
        self.level.get(key).copied()
    }

    /// Lists `key` (or moves it) as the most recent entry of the level for `hotness`.
    pub fn touch(&mut self, key: K, hotness: u32) {
        let to = level_of(hotness);
        if let Some(from) = self.level.insert(key, to) {
            if from != to {
                self.levels[from as usize - 1].remove(&key);
            }
        }
        self.levels[to as usize - 1].insert(key, ());
    }

    pub fn remove(&mut self, key: &K) -> bool {
        match self.level.remove(key) {
            Some(l) => {
                self.levels[l as usize - 1].remove(key);
                true
            }
            None => false,
        }
    }

    /// The highest non-empty level (the paper's Hmax), or 0 when empty.
    pub fn max_level(&self) -> u8 {
        (1..=LEVELS)
            .rev()
            .find(|&l| !self.levels[l as usize - 1].is_empty())
            .unwrap_or(0)
    }

    /// The lowest non-empty level (the paper's Hmin), or 0 when empty.
    pub fn min_level(&self) -> u8 {
        (1..=LEVELS)
            .find(|&l| !self.levels[l as usize - 1].is_empty())
            .unwrap_or(0)
    }

    /// Keys from the hottest level down, most recent first within a level.
    pub fn hottest(&self) -> impl Iterator<Item = (u8, K)> + '_ {
        (1..=LEVELS)
            .rev()
            .flat_map(move |l| self.levels[l as usize - 1].keys().map(move |&k| (l, k)))
    }

    /// The least recent key of the lowest level, without removing it.
    pub fn coldest(&self) -> Option<(u8, K)> {
        let l = self.min_level();
        (l > 0).then(|| (l, *self.levels[l as usize - 1].oldest().unwrap().0))
    }

    /// Removes and returns [`Self::coldest`].
    pub fn pop_coldest(&mut self) -> Option<(u8, K)> {
        let (l, k) = self.coldest()?;
        self.remove(&k);
        Some((l, k))
    }

    pub fn clear(&mut self) {
        self.levels.iter_mut().for_each(Lru::clear);
        self.level.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn levels_double() {
        assert_eq!(level_of(0), 1);
        assert_eq!(level_of(1), 1);
        assert_eq!(level_of(2), 2);
        assert_eq!(level_of(3), 2);
        assert_eq!(level_of(4), 3);
        assert_eq!(level_of(511), 9);
        assert_eq!(level_of(512), 10);
        assert_eq!(level_of(u32::MAX), 10);
    }

    #[derive(Debug, Clone)]
    enum Op {
        Touch(u8, u32),
        Remove(u8),
        PopColdest,
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            4 => (0u8..24, 0u32..2000).prop_map(|(k, h)| Op::Touch(k, h)),
            1 => (0u8..24).prop_map(Op::Remove),
            1 => Just(Op::PopColdest),
        ]
    }

    proptest! {
        /// Against a model that stamps every touch: `hottest` is (level desc, stamp desc)
        /// and `pop_coldest` takes the minimum (level asc, stamp asc).
        #[test]
        fn matches_a_stamped_model(ops in proptest::collection::vec(op(), 0..200)) {
            let mut lists = LeveledLru::new();
            let mut model: Vec<(u8, u64, u8)> = Vec::new(); // (key, stamp, level)
            for (stamp, op) in ops.into_iter().enumerate() {
                match op {
                    Op::Touch(k, h) => {
                        lists.touch(k, h);
                        model.retain(|e| e.0 != k);
                        model.push((k, stamp as u64, level_of(h)));
                    }
                    Op::Remove(k) => {
                        let had = model.iter().any(|e| e.0 == k);
                        model.retain(|e| e.0 != k);
                        prop_assert_eq!(lists.remove(&k), had);
                    }
                    Op::PopColdest => {
                        let want = model.iter().min_by_key(|e| (e.2, e.1)).copied();
                        model.retain(|e| Some(e.0) != want.map(|w| w.0));
                        prop_assert_eq!(lists.pop_coldest(), want.map(|w| (w.2, w.0)));
                    }
                }
                let mut sorted = model.clone();
                sorted.sort_by_key(|e| (std::cmp::Reverse(e.2), std::cmp::Reverse(e.1)));
                let want: Vec<(u8, u8)> = sorted.iter().map(|e| (e.2, e.0)).collect();
                let got: Vec<(u8, u8)> = lists.hottest().collect();
                prop_assert_eq!(got, want);
                prop_assert_eq!(lists.len(), model.len());
                prop_assert_eq!(lists.max_level(), model.iter().map(|e| e.2).max().unwrap_or(0));
                prop_assert_eq!(lists.min_level(), model.iter().map(|e| e.2).min().unwrap_or(0));
            }
        }
    }
}

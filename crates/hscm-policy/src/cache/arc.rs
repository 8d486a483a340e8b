//! ARC.

use super::{CacheOutcome, CachePolicy};

/// ARC with list sizes in bytes (for unit sizes, exactly Megiddo & Modha's ARC).
///
/// The four lists (T1, T2 and their ghosts B1, B2) share one prefetchable table that
/// says which list a key is in and since when; each list's order is a log of (key,
/// stamp) entries, live only while the table still holds that stamp for the key, so
/// moving a key between lists or to the MRU end is one table write and one append.
pub struct ArcCache {
    c: u64,
    p: f64,
    /// key → (list and stamp in `stamp`), size
    map: crate::table::StampTable,
    logs: [std::collections::VecDeque<(u64, u64)>; 4],
    /// Live entries per list.
    live: [usize; 4],
    bytes: [u64; 4],
    clock: u64,
}

const T1: usize = 0;
const T2: usize = 1;
const B1: usize = 2;
const B2: usize = 3;
const ARC_LIST_SHIFT: u32 = 60;
/// A key taken out of one list and not yet put in another (never matches a log entry).
const ARC_MOVING: u64 = 7 << ARC_LIST_SHIFT;

impl ArcCache {
    pub fn new(capacity: u64) -> Self {
        Self {
            c: capacity,
            p: 0.0,
            map: crate::table::StampTable::new(),
            logs: Default::default(),
            live: [0; 4],
            bytes: [0; 4],
            clock: 0,
        }
    }

    #[inline]
    fn stamp(list: usize, seq: u64) -> u64 {
        ((list as u64 + 1) << ARC_LIST_SHIFT) | seq
    }

    /// Which list `key` is in.
    #[inline]
    fn list_of(&self, key: u64) -> Option<usize> {
        let list = (self.map.get(key)?.stamp >> ARC_LIST_SHIFT) as usize;
        (1..=4).contains(&list).then(|| list - 1)
    }

    /// Takes `key` out of `list` (its table entry stays, marked as moving).
    fn take(&mut self, key: u64, list: usize) -> u64 {
        let e = self.map.get_mut(key).expect("listed keys are in the table");
        e.stamp = ARC_MOVING;
        self.live[list] -= 1;
        self.bytes[list] -= e.size;
        e.size
    }

    /// Puts `key` (new, or moving) at `list`'s most recent end.
    fn push(&mut self, list: usize, key: u64, size: u64) {
        self.clock += 1;
        let stamp = Self::stamp(list, self.clock);
        match self.map.get_mut(key) {
            Some(e) => {
                e.stamp = stamp;
                e.size = size;
            }
            None => self.map.insert_new(key, stamp, size),
        }
        self.logs[list].push_back((key, self.clock));
        self.live[list] += 1;
        self.bytes[list] += size;
        if self.logs[list].len() > 2 * self.live[list] + 4096 {
            let map = &self.map;
            self.logs[list].retain(|&(k, seq)| {
                map.get(k)
                    .is_some_and(|e| e.stamp == Self::stamp(list, seq))
            });
        }
    }

    /// Takes `list`'s least recent key out (its table entry stays, marked as moving).
    fn pop_oldest(&mut self, list: usize) -> Option<(u64, u64)> {
        while let Some((k, seq)) = self.logs[list].pop_front() {
            if self
                .map
                .get(k)
                .is_some_and(|e| e.stamp == Self::stamp(list, seq))
            {
                return Some((k, self.take(k, list)));
            }
        }
        None
    }

    /// Drops `list`'s least recent key from the directory.
    fn drop_oldest(&mut self, list: usize) {
        if let Some((k, _)) = self.pop_oldest(list) {
            self.map.remove(k);
        }
    }

    /// ARC's REPLACE: evict from T1 into B1 or from T2 into B2 until `need` fits.
    fn replace(&mut self, need: u64, in_b2: bool, evicted: &mut impl FnMut(u64)) {
        while self.bytes[T1] + self.bytes[T2] + need > self.c {
            let t1 = self.bytes[T1];
            let from_t1 = t1 > 0
                && ((t1 as f64) > self.p || (in_b2 && t1 as f64 == self.p) || self.bytes[T2] == 0);
            let (from, to) = if from_t1 { (T1, B1) } else { (T2, B2) };
            let (k, s) = self.pop_oldest(from).expect("a non-empty list");
            self.push(to, k, s);
            evicted(k);
        }
    }

    fn directory_bytes(&self) -> u64 {
        self.bytes.iter().sum()
    }

    fn trim_ghosts(&mut self) {
        // |T1| + |B1| <= c and the whole directory <= 2c.
        while self.bytes[T1] + self.bytes[B1] > self.c && self.live[B1] > 0 {
            self.drop_oldest(B1);
        }
        while self.directory_bytes() > 2 * self.c && self.live[B2] > 0 {
            self.drop_oldest(B2);
        }
    }
}

impl ArcCache {
    fn insert_with(&mut self, key: u64, size: u64, evicted: &mut impl FnMut(u64)) -> CacheOutcome {
        let found = self.list_of(key);
        debug_assert!(!matches!(found, Some(T1 | T2)), "insert of a cached key");
        if size > self.c {
            return CacheOutcome::Bypassed;
        }
        match found {
            Some(ghost @ (B1 | B2)) => {
                // A ghost hit grows its side's target by the other ghost's size ratio.
                let s = self.take(key, ghost);
                let other = if ghost == B1 { B2 } else { B1 };
                let (own, rest) = (self.bytes[ghost] + s, self.bytes[other]);
                let delta = if own >= rest {
                    1.0
                } else {
                    rest as f64 / own as f64
                };
                let step = delta * size as f64;
                self.p = if ghost == B1 {
                    (self.p + step).min(self.c as f64)
                } else {
                    (self.p - step).max(0.0)
                };
                self.replace(size, ghost == B2, evicted);
                self.push(T2, key, size);
            }
            _ => {
                // Case IV: a miss in the whole directory.
                if self.bytes[T1] + self.bytes[B1] + size > self.c {
                    if self.bytes[T1] + size <= self.c {
                        while self.bytes[T1] + self.bytes[B1] + size > self.c && self.live[B1] > 0 {
                            self.drop_oldest(B1);
                        }
                    } else {
                        while self.bytes[T1] + size > self.c {
                            if let Some((k, _)) = self.pop_oldest(T1) {
                                self.map.remove(k);
                                evicted(k);
                            }
                        }
                    }
                    // With unequal sizes T2 may still leave too little room.
                    self.replace(size, false, evicted);
                } else if self.directory_bytes() + size > self.c {
                    while self.directory_bytes() + size > 2 * self.c && self.live[B2] > 0 {
                        self.drop_oldest(B2);
                    }
                    self.replace(size, false, evicted);
                }
                self.push(T1, key, size);
            }
        }
        self.trim_ghosts();
        CacheOutcome::Inserted
    }
}

impl CachePolicy for ArcCache {
    fn lookup(&mut self, key: u64) -> bool {
        match self.list_of(key) {
            Some(list @ (T1 | T2)) => {
                let s = self.take(key, list);
                self.push(T2, key, s);
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
        self.bytes[T1] + self.bytes[T2]
    }
}

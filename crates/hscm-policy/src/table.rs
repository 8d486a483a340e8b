//! A small open-addressing hash table (linear probing, backward-shift deletion) from u64
//! keys to (stamp, size), built so a caller can prefetch a key's slot ahead of use:
//! cache simulation is bound by these lookups' memory misses.

#[derive(Clone, Copy, Default)]
pub(crate) struct Slot {
    pub key: u64,
    /// 0 marks an empty slot; live stamps start at 1.
    pub stamp: u64,
    pub size: u64,
}

pub(crate) struct StampTable {
    slots: Vec<Slot>,
    shift: u32,
    len: usize,
}

impl StampTable {
    pub(crate) fn new() -> Self {
        Self {
            slots: vec![Slot::default(); 1024],
            shift: 64 - 10,
            len: 0,
        }
    }

    pub(crate) fn len(&self) -> usize {
        self.len
    }

    #[inline]
    fn home(&self, key: u64) -> usize {
        // Fibonacci hashing: the top bits of key × 2^64/φ.
        (key.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> self.shift) as usize
    }

    #[inline]
    fn mask(&self) -> usize {
        self.slots.len() - 1
    }

    #[inline]
    fn find(&self, key: u64) -> Option<usize> {
        let mask = self.mask();
        let mut i = self.home(key);
        loop {
            let s = &self.slots[i];
            if s.stamp == 0 {
                return None;
            }
            if s.key == key {
                return Some(i);
            }
            i = (i + 1) & mask;
        }
    }

    #[inline]
    pub(crate) fn get(&self, key: u64) -> Option<&Slot> {
        self.find(key).map(|i| &self.slots[i])
    }

    #[inline]
    pub(crate) fn get_mut(&mut self, key: u64) -> Option<&mut Slot> {
        self.find(key).map(|i| &mut self.slots[i])
    }

    /// Inserts a key that is not present.
    pub(crate) fn insert_new(&mut self, key: u64, stamp: u64, size: u64) {
        debug_assert!(stamp != 0 && self.find(key).is_none());
        if (self.len + 1) * 2 > self.slots.len() {
            self.grow();
        }
        let mask = self.mask();
        let mut i = self.home(key);
        while self.slots[i].stamp != 0 {
            i = (i + 1) & mask;
        }
        self.slots[i] = Slot { key, stamp, size };
        self.len += 1;
    }

    pub(crate) fn remove(&mut self, key: u64) -> Option<Slot> {
        let mut hole = self.find(key)?;
        let removed = self.slots[hole];
        let mask = self.mask();
        // Backward shift: pull later members of the probe run into the hole when the
        // hole lies between their home and where they sit.
        let mut j = (hole + 1) & mask;
        while self.slots[j].stamp != 0 {
            let home = self.home(self.slots[j].key);
            if (j.wrapping_sub(home) & mask) >= (j.wrapping_sub(hole) & mask) {
                self.slots[hole] = self.slots[j];
                hole = j;
            }
            j = (j + 1) & mask;
        }
        self.slots[hole] = Slot::default();
        self.len -= 1;
        Some(removed)
    }

    fn grow(&mut self) {
        let old = std::mem::take(&mut self.slots);
        self.slots = vec![Slot::default(); old.len() * 2];
        self.shift -= 1;
        self.len = 0;
        for s in old.into_iter().filter(|s| s.stamp != 0) {
            self.insert_new(s.key, s.stamp, s.size);
        }
    }

    /// Asks the CPU to start loading `key`'s home slot.
    #[inline]
    pub(crate) fn prefetch(&self, key: u64) {
        prefetch_slot(&self.slots, self.home(key));
    }
}

/// Asks the CPU to start loading `slots[i]`.
#[inline]
fn prefetch_slot<T>(slots: &[T], i: usize) {
    #[cfg(target_arch = "x86_64")]
    {
        let p = slots.as_ptr().wrapping_add(i);
        // SAFETY: a prefetch is only a hint: it reads nothing into the program and
        // never faults, whatever the address; callers pass i < slots.len() anyway.
        // SSE, its target feature, is part of x86_64's baseline.
        unsafe {
            core::arch::x86_64::_mm_prefetch::<{ core::arch::x86_64::_MM_HINT_T0 }>(p.cast::<i8>())
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = (slots, i);
}

/// Keys and the offsets replay placed them at, insert-only, in 16-byte slots (the key,
/// then its offset + 1; 0 marks an empty slot): a million keys take 32 MiB, where the
/// 24-byte [`StampTable`] takes 48.
pub(crate) struct OffsetTable {
    slots: Vec<(u64, u64)>,
    shift: u32,
    len: usize,
}

impl OffsetTable {
    pub(crate) fn new() -> Self {
        Self {
            slots: vec![(0, 0); 1024],
            shift: 64 - 10,
            len: 0,
        }
    }

    #[inline]
    fn home(&self, key: u64) -> usize {
        (key.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> self.shift) as usize
    }

    #[inline]
    pub(crate) fn get(&self, key: u64) -> Option<u64> {
        let mask = self.slots.len() - 1;
        let mut i = self.home(key);
        loop {
            let (k, v) = self.slots[i];
            if v == 0 {
                return None;
            }
            if k == key {
                return Some(v - 1);
            }
            i = (i + 1) & mask;
        }
    }

    /// Inserts a key that is not present (an offset below u64::MAX).
    pub(crate) fn insert_new(&mut self, key: u64, offset: u64) {
        debug_assert!(self.get(key).is_none() && offset < u64::MAX);
        if (self.len + 1) * 2 > self.slots.len() {
            let doubled = vec![(0, 0); self.slots.len() * 2];
            let old = std::mem::replace(&mut self.slots, doubled);
            self.shift -= 1;
            self.len = 0;
            for (k, v) in old.into_iter().filter(|&(_, v)| v != 0) {
                self.insert_new(k, v - 1);
            }
        }
        let mask = self.slots.len() - 1;
        let mut i = self.home(key);
        while self.slots[i].1 != 0 {
            i = (i + 1) & mask;
        }
        self.slots[i] = (key, offset + 1);
        self.len += 1;
    }

    #[inline]
    pub(crate) fn prefetch(&self, key: u64) {
        prefetch_slot(&self.slots, self.home(key));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::HashMap;

    proptest! {
        /// Against std's HashMap, through growth and deletions that shift probe runs.
        #[test]
        fn behaves_like_a_map(ops in proptest::collection::vec((0u64..600, any::<bool>()), 0..5000)) {
            let mut t = StampTable::new();
            let mut m: HashMap<u64, u64> = HashMap::new();
            for (i, (k, insert)) in ops.into_iter().enumerate() {
                // Keys that collide in the low bits after hashing stress the probing.
                let key = k.wrapping_mul(1 << 20);
                t.prefetch(key);
                if insert {
                    if let Some(s) = t.get_mut(key) {
                        s.stamp = i as u64 + 1;
                    } else {
                        t.insert_new(key, i as u64 + 1, k);
                    }
                    m.insert(key, i as u64 + 1);
                } else {
                    prop_assert_eq!(t.remove(key).map(|s| s.stamp), m.remove(&key));
                }
                prop_assert_eq!(t.len(), m.len());
            }
            for (k, v) in &m {
                prop_assert_eq!(t.get(*k).map(|s| s.stamp), Some(*v));
            }
        }

        /// The offset table against std's HashMap, through growth, offset 0 included.
        #[test]
        fn offsets_behave_like_a_map(keys in proptest::collection::vec(0u64..3000, 0..5000)) {
            let mut t = OffsetTable::new();
            let mut m: HashMap<u64, u64> = HashMap::new();
            for (i, k) in keys.into_iter().enumerate() {
                let key = k.wrapping_mul(1 << 20);
                t.prefetch(key);
                prop_assert_eq!(t.get(key), m.get(&key).copied());
                if let std::collections::hash_map::Entry::Vacant(e) = m.entry(key) {
                    t.insert_new(key, i as u64);
                    e.insert(i as u64);
                }
            }
            for (k, v) in &m {
                prop_assert_eq!(t.get(*k), Some(*v));
            }
        }
    }
}

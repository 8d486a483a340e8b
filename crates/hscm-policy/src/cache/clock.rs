//! CLOCK (second chance).

use super::{CacheOutcome, CachePolicy};

/// CLOCK as second-chance FIFO: a hit sets the object's reference bit; eviction looks
/// at the oldest object, and a referenced one loses its bit and goes round again. The
/// bits live in a prefetchable table, the order in a plain queue.
pub struct ClockCache {
    capacity: u64,
    used: u64,
    /// key → (1 = unreferenced, 2 = referenced; in `stamp`), size
    map: crate::table::StampTable,
    queue: std::collections::VecDeque<u64>,
}

const UNREFERENCED: u64 = 1;
const REFERENCED: u64 = 2;

impl ClockCache {
    pub fn new(capacity: u64) -> Self {
        Self {
            capacity,
            used: 0,
            map: crate::table::StampTable::new(),
            queue: Default::default(),
        }
    }
}

impl ClockCache {
    fn insert_with(&mut self, key: u64, size: u64, evicted: &mut impl FnMut(u64)) -> CacheOutcome {
        if size > self.capacity {
            return CacheOutcome::Bypassed;
        }
        while self.used + size > self.capacity {
            let k = self.queue.pop_front().expect("used > 0 means entries");
            let e = self.map.get_mut(k).expect("queued keys are cached");
            if e.stamp == REFERENCED {
                e.stamp = UNREFERENCED;
                self.queue.push_back(k);
            } else {
                let e = self.map.remove(k).expect("just found");
                self.used -= e.size;
                evicted(k);
            }
        }
        if let Some(&k) = self.queue.front() {
            self.map.prefetch(k);
        }
        self.map.insert_new(key, UNREFERENCED, size);
        self.queue.push_back(key);
        self.used += size;
        CacheOutcome::Inserted
    }
}

impl CachePolicy for ClockCache {
    fn prefetch(&self, key: u64) {
        self.map.prefetch(key);
    }
    fn lookup(&mut self, key: u64) -> bool {
        match self.map.get_mut(key) {
            Some(e) => {
                e.stamp = REFERENCED;
                true
            }
            None => false,
        }
    }
    inserts_through_insert_with!();
    fn used(&self) -> u64 {
        self.used
    }
}

//! FIFO: objects leave in the order they came, hits or not.

use super::{make_room, CacheOutcome, CachePolicy};
use crate::Lru;

pub struct FifoCache {
    capacity: u64,
    used: u64,
    map: Lru<u64, u64>,
}

impl FifoCache {
    pub fn new(capacity: u64) -> Self {
        Self {
            capacity,
            used: 0,
            map: Lru::new(),
        }
    }
}

impl FifoCache {
    fn insert_with(&mut self, key: u64, size: u64, evicted: &mut impl FnMut(u64)) -> CacheOutcome {
        if size > self.capacity {
            return CacheOutcome::Bypassed;
        }
        make_room(
            &mut self.map,
            &mut self.used,
            self.capacity,
            size,
            |s| *s,
            evicted,
        );
        self.map.insert(key, size);
        self.used += size;
        CacheOutcome::Inserted
    }
}

impl CachePolicy for FifoCache {
    fn lookup(&mut self, key: u64) -> bool {
        self.map.contains(&key)
    }
    inserts_through_insert_with!();
    fn used(&self) -> u64 {
        self.used
    }
}

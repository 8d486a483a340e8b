//! Exact LRU.

use super::{CacheOutcome, CachePolicy};

/// Exact LRU, built for speed: each object's last-use stamp lives in the hash map, and
/// every access appends (key, stamp) to a log; eviction pops the log's oldest entries,
/// skipping those a later access made stale, so the first live one is the least
/// recently used object. A hit costs one hash probe and a sequential append instead of
/// relinking list neighbours scattered in memory. The log is compacted when it grows
/// past eight entries per cached object, so memory stays proportional to the cache.
pub struct LruCache {
    capacity: u64,
    used: u64,
    clock: u64,
    /// key → (last use, size)
    map: crate::table::StampTable,
    log: std::collections::VecDeque<(u64, u64)>,
}

impl LruCache {
    pub fn new(capacity: u64) -> Self {
        Self {
            capacity,
            used: 0,
            clock: 0,
            map: crate::table::StampTable::new(),
            log: Default::default(),
        }
    }

    #[inline]
    pub(crate) fn hit(&mut self, key: u64) -> bool {
        match self.map.get_mut(key) {
            Some(e) => {
                self.clock += 1;
                e.stamp = self.clock;
                self.log.push_back((key, self.clock));
                self.compact_if_needed();
                true
            }
            None => false,
        }
    }

    /// Entries in the access log (live and stale), for tests of its bound.
    #[doc(hidden)]
    pub fn log_len(&self) -> usize {
        self.log.len()
    }

    fn compact_if_needed(&mut self) {
        if self.log.len() > 8 * self.map.len() + 4096 {
            let map = &self.map;
            self.log
                .retain(|&(k, stamp)| map.get(k).is_some_and(|e| e.stamp == stamp));
        }
    }

    fn insert_with(&mut self, key: u64, size: u64, evicted: &mut impl FnMut(u64)) -> CacheOutcome {
        if size > self.capacity {
            return CacheOutcome::Bypassed;
        }
        while self.used + size > self.capacity {
            let (k, stamp) = self
                .log
                .pop_front()
                .expect("cached objects have log entries");
            if self.map.get(k).is_some_and(|e| e.stamp == stamp) {
                let e = self.map.remove(k).expect("just found");
                self.used -= e.size;
                evicted(k);
            }
        }
        // The next eviction starts at the log's front: start loading its slot now.
        if let Some(&(k, _)) = self.log.front() {
            self.map.prefetch(k);
        }
        self.clock += 1;
        self.map.insert_new(key, self.clock, size);
        self.log.push_back((key, self.clock));
        self.used += size;
        self.compact_if_needed();
        CacheOutcome::Inserted
    }
}

impl CachePolicy for LruCache {
    #[inline]
    fn lookup(&mut self, key: u64) -> bool {
        self.hit(key)
    }
    inserts_through_insert_with!();
    #[inline]
    fn prefetch(&self, key: u64) {
        self.map.prefetch(key);
    }
    fn used(&self) -> u64 {
        self.used
    }
}

//! Byte-sized object caches: which requests hit, which misses are admitted. Every policy
//! counts capacity in bytes (give every object size 1 to count objects). An object
//! larger than the whole cache is never admitted.
//!
//! LRU, FIFO, CLOCK (second chance: new objects start unreferenced), SIEVE (Zhang et
//! al., NSDI 2024), S3-FIFO (Yang et al., SOSP 2023: 10% small queue, ghost as large
//! as the main queue's object count, frequencies capped at 3), ARC (Megiddo & Modha,
//! FAST 2003, with list sizes in bytes) and AC-LRU: LRU that admits an object only on
//! its second access within the ghost history (Park & Bahn, the seed paper's AC-cache).

use crate::Lru;

/// What one request did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CacheOutcome {
    Hit,
    /// A miss whose object now sits in the cache.
    Inserted,
    /// A miss the policy chose not to cache (admission control, or too large).
    Bypassed,
}

/// A cache policy over u64 keys.
pub trait CachePolicy: Send {
    fn access(&mut self, key: u64, size: u64) -> CacheOutcome;
    /// A hint that `key` will be asked for soon (lets a policy start a memory load).
    fn prefetch(&self, _key: u64) {}
    /// Bytes currently cached.
    fn used(&self) -> u64;
}

/// Evicts from `lru`'s oldest end until `need` more bytes fit under `capacity`.
fn make_room<V: Default>(
    lru: &mut Lru<u64, V>,
    used: &mut u64,
    capacity: u64,
    need: u64,
    size_of: impl Fn(&V) -> u64,
) {
    while *used + need > capacity {
        match lru.pop_oldest() {
            Some((_, v)) => *used -= size_of(&v),
            None => break,
        }
    }
}

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
    fn hit(&mut self, key: u64) -> bool {
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

    fn insert(&mut self, key: u64, size: u64) -> CacheOutcome {
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
    fn access(&mut self, key: u64, size: u64) -> CacheOutcome {
        if self.hit(key) {
            return CacheOutcome::Hit;
        }
        self.insert(key, size)
    }
    #[inline]
    fn prefetch(&self, key: u64) {
        self.map.prefetch(key);
    }
    fn used(&self) -> u64 {
        self.used
    }
}

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

impl CachePolicy for FifoCache {
    fn access(&mut self, key: u64, size: u64) -> CacheOutcome {
        if self.map.contains(&key) {
            return CacheOutcome::Hit;
        }
        if size > self.capacity {
            return CacheOutcome::Bypassed;
        }
        make_room(&mut self.map, &mut self.used, self.capacity, size, |s| *s);
        self.map.insert(key, size);
        self.used += size;
        CacheOutcome::Inserted
    }
    fn used(&self) -> u64 {
        self.used
    }
}

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

impl CachePolicy for ClockCache {
    fn prefetch(&self, key: u64) {
        self.map.prefetch(key);
    }
    fn access(&mut self, key: u64, size: u64) -> CacheOutcome {
        if let Some(e) = self.map.get_mut(key) {
            e.stamp = REFERENCED;
            return CacheOutcome::Hit;
        }
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
    fn used(&self) -> u64 {
        self.used
    }
}

/// AC-LRU: LRU behind an admission filter. A miss is admitted only if the key was
/// missed before and is still in the ghost history; otherwise it is remembered there
/// and bypassed. The history is unbounded, or an LRU list of `ghost_entries` keys.
pub struct AcLruCache {
    lru: LruCache,
    ghost: Ghost,
}

enum Ghost {
    Unbounded(crate::table::StampTable),
    Bounded(Lru<u64, ()>, usize),
}

impl AcLruCache {
    /// `ghost_entries`: None for an unbounded history.
    pub fn new(capacity: u64, ghost_entries: Option<usize>) -> Self {
        Self {
            lru: LruCache::new(capacity),
            ghost: match ghost_entries {
                None => Ghost::Unbounded(crate::table::StampTable::new()),
                Some(n) => Ghost::Bounded(Lru::new(), n.max(1)),
            },
        }
    }
}

impl CachePolicy for AcLruCache {
    fn prefetch(&self, key: u64) {
        self.lru.prefetch(key);
        if let Ghost::Unbounded(set) = &self.ghost {
            set.prefetch(key);
        }
    }
    fn access(&mut self, key: u64, size: u64) -> CacheOutcome {
        if self.lru.hit(key) {
            return CacheOutcome::Hit;
        }
        let seen = match &mut self.ghost {
            Ghost::Unbounded(set) => {
                if set.remove(key).is_some() {
                    true
                } else {
                    set.insert_new(key, 1, 0);
                    false
                }
            }
            Ghost::Bounded(lru, n) => {
                if lru.remove(&key).is_some() {
                    true
                } else {
                    if lru.len() >= *n {
                        lru.pop_oldest();
                    }
                    lru.insert(key, ());
                    false
                }
            }
        };
        if seen {
            self.lru.insert(key, size)
        } else {
            CacheOutcome::Bypassed
        }
    }
    fn used(&self) -> u64 {
        self.lru.used
    }
}

/// SIEVE: one FIFO queue with a visited bit per object and a hand that moves from the
/// oldest object towards newer ones, clearing visited bits, evicting the first object
/// without one; new objects go in at the head.
pub struct SieveCache {
    capacity: u64,
    used: u64,
    index: rustc_hash::FxHashMap<u64, u32>,
    nodes: Vec<SieveNode>,
    free: Vec<u32>,
    head: u32,
    tail: u32,
    hand: u32,
}

const NIL: u32 = u32::MAX;

#[derive(Clone, Copy)]
struct SieveNode {
    key: u64,
    size: u64,
    visited: bool,
    /// Towards the head (newer).
    newer: u32,
    /// Towards the tail (older).
    older: u32,
}

impl SieveCache {
    pub fn new(capacity: u64) -> Self {
        Self {
            capacity,
            used: 0,
            index: Default::default(),
            nodes: Vec::new(),
            free: Vec::new(),
            head: NIL,
            tail: NIL,
            hand: NIL,
        }
    }

    fn unlink(&mut self, i: u32) {
        let SieveNode { newer, older, .. } = self.nodes[i as usize];
        if newer == NIL {
            self.head = older;
        } else {
            self.nodes[newer as usize].older = older;
        }
        if older == NIL {
            self.tail = newer;
        } else {
            self.nodes[older as usize].newer = newer;
        }
    }

    fn evict(&mut self) {
        let mut i = if self.hand == NIL {
            self.tail
        } else {
            self.hand
        };
        while self.nodes[i as usize].visited {
            self.nodes[i as usize].visited = false;
            i = self.nodes[i as usize].newer;
            if i == NIL {
                i = self.tail;
            }
        }
        self.hand = self.nodes[i as usize].newer;
        self.unlink(i);
        let n = self.nodes[i as usize];
        self.index.remove(&n.key);
        self.used -= n.size;
        self.free.push(i);
    }
}

impl CachePolicy for SieveCache {
    fn access(&mut self, key: u64, size: u64) -> CacheOutcome {
        if let Some(&i) = self.index.get(&key) {
            self.nodes[i as usize].visited = true;
            return CacheOutcome::Hit;
        }
        if size > self.capacity {
            return CacheOutcome::Bypassed;
        }
        while self.used + size > self.capacity {
            self.evict();
        }
        let node = SieveNode {
            key,
            size,
            visited: false,
            newer: NIL,
            older: self.head,
        };
        let i = match self.free.pop() {
            Some(i) => {
                self.nodes[i as usize] = node;
                i
            }
            None => {
                self.nodes.push(node);
                (self.nodes.len() - 1) as u32
            }
        };
        if self.head == NIL {
            self.tail = i;
        } else {
            self.nodes[self.head as usize].newer = i;
        }
        self.head = i;
        self.index.insert(key, i);
        self.used += size;
        CacheOutcome::Inserted
    }
    fn used(&self) -> u64 {
        self.used
    }
}

/// S3-FIFO: a small FIFO (10% of the bytes) filters one-hit wonders; objects hit while
/// in it move to the main FIFO; evicted small-queue objects leave their key in a ghost
/// FIFO, and a miss found there goes straight to the main queue. Main-queue objects
/// with a non-zero frequency are reinserted with it decremented.
pub struct S3FifoCache {
    small_cap: u64,
    main_cap: u64,
    small_used: u64,
    main_used: u64,
    /// (size, frequency 0..=3)
    small: Lru<u64, (u64, u8)>,
    main: Lru<u64, (u64, u8)>,
    ghost: Lru<u64, ()>,
}

impl S3FifoCache {
    pub fn new(capacity: u64) -> Self {
        let small_cap = (capacity / 10).max(1).min(capacity);
        Self {
            small_cap,
            main_cap: capacity - small_cap,
            small_used: 0,
            main_used: 0,
            small: Lru::new(),
            main: Lru::new(),
            ghost: Lru::new(),
        }
    }

    fn insert_main(&mut self, key: u64, size: u64, freq: u8) {
        while self.main_used + size > self.main_cap && !self.main.is_empty() {
            let (k, (s, f)) = self.main.pop_oldest().expect("non-empty");
            if f > 0 {
                self.main.insert(k, (s, f - 1));
            } else {
                self.main_used -= s;
            }
        }
        self.main.insert(key, (size, freq));
        self.main_used += size;
    }

    fn evict_small(&mut self) {
        let (k, (s, f)) = self.small.pop_oldest().expect("caller checked");
        self.small_used -= s;
        if f > 0 {
            self.insert_main(k, s, 0);
        } else {
            let ghost_cap = self.main.len().max(1);
            while self.ghost.len() >= ghost_cap {
                self.ghost.pop_oldest();
            }
            self.ghost.insert(k, ());
        }
    }
}

impl CachePolicy for S3FifoCache {
    fn access(&mut self, key: u64, size: u64) -> CacheOutcome {
        if let Some(e) = self.small.peek_mut(&key) {
            e.1 = (e.1 + 1).min(3);
            return CacheOutcome::Hit;
        }
        if let Some(e) = self.main.peek_mut(&key) {
            e.1 = (e.1 + 1).min(3);
            return CacheOutcome::Hit;
        }
        if size > self.small_cap + self.main_cap {
            return CacheOutcome::Bypassed;
        }
        if self.ghost.remove(&key).is_some() || size > self.small_cap {
            self.insert_main(key, size, 0);
        } else {
            while self.small_used + size > self.small_cap {
                self.evict_small();
            }
            self.small.insert(key, (size, 0));
            self.small_used += size;
        }
        // Objects promoted from the small queue may have overfilled main.
        while self.main_used > self.main_cap {
            let (k, (s, f)) = self.main.pop_oldest().expect("over capacity means entries");
            if f > 0 {
                self.main.insert(k, (s, f - 1));
            } else {
                self.main_used -= s;
            }
        }
        CacheOutcome::Inserted
    }
    fn used(&self) -> u64 {
        self.small_used + self.main_used
    }
}

/// ARC with list sizes in bytes (for unit sizes, exactly Megiddo & Modha's ARC).
pub struct ArcCache {
    c: u64,
    p: f64,
    t1: Lru<u64, u64>,
    t2: Lru<u64, u64>,
    b1: Lru<u64, u64>,
    b2: Lru<u64, u64>,
    t1_bytes: u64,
    t2_bytes: u64,
    b1_bytes: u64,
    b2_bytes: u64,
}

impl ArcCache {
    pub fn new(capacity: u64) -> Self {
        Self {
            c: capacity,
            p: 0.0,
            t1: Lru::new(),
            t2: Lru::new(),
            b1: Lru::new(),
            b2: Lru::new(),
            t1_bytes: 0,
            t2_bytes: 0,
            b1_bytes: 0,
            b2_bytes: 0,
        }
    }

    /// ARC's REPLACE: evict from T1 into B1 or from T2 into B2 until `need` fits.
    fn replace(&mut self, need: u64, in_b2: bool) {
        while self.t1_bytes + self.t2_bytes + need > self.c {
            let from_t1 = self.t1_bytes > 0
                && ((self.t1_bytes as f64) > self.p
                    || (in_b2 && self.t1_bytes as f64 == self.p)
                    || self.t2_bytes == 0);
            if from_t1 {
                let (k, s) = self.t1.pop_oldest().expect("t1 non-empty");
                self.t1_bytes -= s;
                self.b1.insert(k, s);
                self.b1_bytes += s;
            } else {
                let (k, s) = self.t2.pop_oldest().expect("t2 non-empty");
                self.t2_bytes -= s;
                self.b2.insert(k, s);
                self.b2_bytes += s;
            }
        }
    }

    fn trim_ghosts(&mut self) {
        // |T1| + |B1| <= c and the whole directory <= 2c.
        while self.t1_bytes + self.b1_bytes > self.c && !self.b1.is_empty() {
            let (_, s) = self.b1.pop_oldest().expect("non-empty");
            self.b1_bytes -= s;
        }
        while self.t1_bytes + self.t2_bytes + self.b1_bytes + self.b2_bytes > 2 * self.c
            && !self.b2.is_empty()
        {
            let (_, s) = self.b2.pop_oldest().expect("non-empty");
            self.b2_bytes -= s;
        }
    }
}

impl CachePolicy for ArcCache {
    fn access(&mut self, key: u64, size: u64) -> CacheOutcome {
        if let Some(s) = self.t1.remove(&key) {
            self.t1_bytes -= s;
            self.t2.insert(key, s);
            self.t2_bytes += s;
            return CacheOutcome::Hit;
        }
        if self.t2.touch(&key).is_some() {
            return CacheOutcome::Hit;
        }
        if size > self.c {
            return CacheOutcome::Bypassed;
        }
        let c = self.c as f64;
        if let Some(s) = self.b1.remove(&key) {
            self.b1_bytes -= s;
            let delta = if self.b1_bytes + s >= self.b2_bytes {
                1.0
            } else {
                self.b2_bytes as f64 / (self.b1_bytes + s) as f64
            };
            self.p = (self.p + delta * size as f64).min(c);
            self.replace(size, false);
            self.t2.insert(key, size);
            self.t2_bytes += size;
        } else if let Some(s) = self.b2.remove(&key) {
            self.b2_bytes -= s;
            let delta = if self.b2_bytes + s >= self.b1_bytes {
                1.0
            } else {
                self.b1_bytes as f64 / (self.b2_bytes + s) as f64
            };
            self.p = (self.p - delta * size as f64).max(0.0);
            self.replace(size, true);
            self.t2.insert(key, size);
            self.t2_bytes += size;
        } else {
            // Case IV: a miss in the whole directory.
            if self.t1_bytes + self.b1_bytes + size > self.c {
                if self.t1_bytes + size <= self.c {
                    while self.t1_bytes + self.b1_bytes + size > self.c && !self.b1.is_empty() {
                        let (_, s) = self.b1.pop_oldest().expect("non-empty");
                        self.b1_bytes -= s;
                    }
                    self.replace(size, false);
                } else {
                    while self.t1_bytes + size > self.c {
                        let (_, s) = self.t1.pop_oldest().expect("t1 holds more than c - size");
                        self.t1_bytes -= s;
                    }
                    // With unequal sizes T2 may still leave too little room.
                    self.replace(size, false);
                }
            } else if self.t1_bytes + self.t2_bytes + self.b1_bytes + self.b2_bytes + size > self.c
            {
                while self.t1_bytes + self.t2_bytes + self.b1_bytes + self.b2_bytes + size
                    > 2 * self.c
                    && !self.b2.is_empty()
                {
                    let (_, s) = self.b2.pop_oldest().expect("non-empty");
                    self.b2_bytes -= s;
                }
                self.replace(size, false);
            }
            self.t1.insert(key, size);
            self.t1_bytes += size;
        }
        self.trim_ghosts();
        CacheOutcome::Inserted
    }
    fn used(&self) -> u64 {
        self.t1_bytes + self.t2_bytes
    }
}

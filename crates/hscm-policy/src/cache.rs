//! Byte-sized object caches: which requests hit, which misses are admitted. Every policy
//! counts capacity in bytes (give every object size 1 to count objects). An object
//! larger than the whole cache is never admitted.
//!
//! LRU, FIFO, CLOCK (second chance: new objects start unreferenced), SIEVE (Zhang et
//! al., NSDI 2024), S3-FIFO (Yang et al., SOSP 2023, as its authors' libCacheSim
//! implements it), ARC (Megiddo & Modha,
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

    fn evict(&mut self) {
        self.has_evicted = true;
        if self.main_used > self.main_cap || self.small_used == 0 {
            self.evict_main();
        } else {
            self.evict_small();
        }
    }

    fn evict_small(&mut self) {
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
                return;
            }
        }
    }

    fn evict_main(&mut self) {
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

impl CachePolicy for S3FifoCache {
    fn access(&mut self, key: u64, size: u64) -> CacheOutcome {
        let mut hit_on_ghost = false;
        if let Some(e) = self.map.get_mut(key) {
            if e.stamp >> S3_TAG_SHIFT == S3_GHOST {
                let size = e.size;
                self.map.remove(key);
                self.ghost_used -= size;
                self.ghost_live -= 1;
                hit_on_ghost = true;
            } else {
                if e.stamp & S3_LOW < S3_LOW {
                    e.stamp += 1;
                }
                return CacheOutcome::Hit;
            }
        }
        if size > self.small_cap {
            return CacheOutcome::Bypassed;
        }
        while self.small_used + self.main_used + size > self.capacity {
            self.evict();
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
    #[inline]
    fn prefetch(&self, key: u64) {
        self.map.prefetch(key);
    }
    fn used(&self) -> u64 {
        self.small_used + self.main_used
    }
}

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
    fn replace(&mut self, need: u64, in_b2: bool) {
        while self.bytes[T1] + self.bytes[T2] + need > self.c {
            let t1 = self.bytes[T1];
            let from_t1 = t1 > 0
                && ((t1 as f64) > self.p || (in_b2 && t1 as f64 == self.p) || self.bytes[T2] == 0);
            let (from, to) = if from_t1 { (T1, B1) } else { (T2, B2) };
            let (k, s) = self.pop_oldest(from).expect("a non-empty list");
            self.push(to, k, s);
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

impl CachePolicy for ArcCache {
    fn access(&mut self, key: u64, size: u64) -> CacheOutcome {
        let found = self.list_of(key);
        if let Some(list @ (T1 | T2)) = found {
            let s = self.take(key, list);
            self.push(T2, key, s);
            return CacheOutcome::Hit;
        }
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
                self.replace(size, ghost == B2);
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
                            self.drop_oldest(T1);
                        }
                    }
                    // With unequal sizes T2 may still leave too little room.
                    self.replace(size, false);
                } else if self.directory_bytes() + size > self.c {
                    while self.directory_bytes() + size > 2 * self.c && self.live[B2] > 0 {
                        self.drop_oldest(B2);
                    }
                    self.replace(size, false);
                }
                self.push(T1, key, size);
            }
        }
        self.trim_ghosts();
        CacheOutcome::Inserted
    }
    #[inline]
    fn prefetch(&self, key: u64) {
        self.map.prefetch(key);
    }
    fn used(&self) -> u64 {
        self.bytes[T1] + self.bytes[T2]
    }
}

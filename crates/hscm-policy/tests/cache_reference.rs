//! Every cache policy against a simple, independent reference implementation written
//! from the algorithm's description (unit-size objects): identical hit/miss decisions
//! on every request of seeded skewed traces, hence identical miss ratios.

use std::collections::{HashSet, VecDeque};

use hscm_policy::cache::{
    AcLruCache, ArcCache, CacheOutcome, CachePolicy, ClockCache, FifoCache, LruCache, S3FifoCache,
    SieveCache,
};
use proptest::prelude::*;

trait Reference {
    fn hit(&mut self, key: u64) -> bool;
}

struct RefLru {
    c: usize,
    v: Vec<u64>, // front = most recent
}
impl Reference for RefLru {
    fn hit(&mut self, k: u64) -> bool {
        if let Some(p) = self.v.iter().position(|&x| x == k) {
            self.v.remove(p);
            self.v.insert(0, k);
            return true;
        }
        if self.v.len() == self.c {
            self.v.pop();
        }
        self.v.insert(0, k);
        false
    }
}

struct RefFifo {
    c: usize,
    q: VecDeque<u64>,
}
impl Reference for RefFifo {
    fn hit(&mut self, k: u64) -> bool {
        if self.q.contains(&k) {
            return true;
        }
        if self.q.len() == self.c {
            self.q.pop_front();
        }
        self.q.push_back(k);
        false
    }
}

/// Textbook CLOCK: a circular array of slots and a hand.
struct RefClock {
    slots: Vec<Option<(u64, bool)>>,
    hand: usize,
}
impl Reference for RefClock {
    fn hit(&mut self, k: u64) -> bool {
        if let Some(s) = self.slots.iter_mut().flatten().find(|s| s.0 == k) {
            s.1 = true;
            return true;
        }
        if let Some(free) = self.slots.iter().position(Option::is_none) {
            self.slots[free] = Some((k, false));
            return false;
        }
        loop {
            let n = self.slots.len();
            let s = self.slots[self.hand].as_mut().expect("full");
            if s.1 {
                s.1 = false;
                self.hand = (self.hand + 1) % n;
            } else {
                *s = (k, false);
                self.hand = (self.hand + 1) % n;
                return false;
            }
        }
    }
}

struct RefAcLru {
    lru: RefLru,
    seen: HashSet<u64>,
}
impl Reference for RefAcLru {
    fn hit(&mut self, k: u64) -> bool {
        if self.lru.v.contains(&k) {
            return self.lru.hit(k);
        }
        if self.seen.remove(&k) {
            self.lru.hit(k);
        } else {
            self.seen.insert(k);
        }
        false
    }
}

/// ARC as printed in Megiddo & Modha (FAST 2003), Fig. 4, unit sizes.
struct RefArc {
    c: usize,
    p: f64,
    t1: Vec<u64>,
    t2: Vec<u64>,
    b1: Vec<u64>,
    b2: Vec<u64>, // front = MRU
}
impl RefArc {
    fn replace(&mut self, in_b2: bool) {
        let t1 = self.t1.len() as f64;
        if !self.t1.is_empty() && ((in_b2 && t1 == self.p) || t1 > self.p || self.t2.is_empty()) {
            let x = self.t1.pop().unwrap();
            self.b1.insert(0, x);
        } else {
            let x = self.t2.pop().unwrap();
            self.b2.insert(0, x);
        }
    }
}
impl Reference for RefArc {
    fn hit(&mut self, x: u64) -> bool {
        let pos = |v: &Vec<u64>| v.iter().position(|&y| y == x);
        if let Some(i) = pos(&self.t1) {
            self.t1.remove(i);
            self.t2.insert(0, x);
            return true;
        }
        if let Some(i) = pos(&self.t2) {
            self.t2.remove(i);
            self.t2.insert(0, x);
            return true;
        }
        let c = self.c as f64;
        if pos(&self.b1).is_some() {
            let d = if self.b1.len() >= self.b2.len() {
                1.0
            } else {
                self.b2.len() as f64 / self.b1.len() as f64
            };
            self.p = (self.p + d).min(c);
            self.replace(false);
            self.b1.retain(|&y| y != x);
            self.t2.insert(0, x);
            return false;
        }
        if pos(&self.b2).is_some() {
            let d = if self.b2.len() >= self.b1.len() {
                1.0
            } else {
                self.b1.len() as f64 / self.b2.len() as f64
            };
            self.p = (self.p - d).max(0.0);
            self.replace(true);
            self.b2.retain(|&y| y != x);
            self.t2.insert(0, x);
            return false;
        }
        let l1 = self.t1.len() + self.b1.len();
        let total = l1 + self.t2.len() + self.b2.len();
        if l1 == self.c {
            if self.t1.len() < self.c {
                self.b1.pop();
                self.replace(false);
            } else {
                self.t1.pop();
            }
        } else if total >= self.c {
            if total == 2 * self.c {
                self.b2.pop();
            }
            self.replace(false);
        }
        self.t1.insert(0, x);
        false
    }
}

/// SIEVE from its paper: a queue (index 0 oldest), visited bits, and a hand that walks
/// from old to new, clearing bits, and evicts the first unvisited object.
struct RefSieve {
    c: usize,
    q: Vec<(u64, bool)>,
    hand: Option<usize>,
}
impl Reference for RefSieve {
    fn hit(&mut self, k: u64) -> bool {
        if let Some(e) = self.q.iter_mut().find(|e| e.0 == k) {
            e.1 = true;
            return true;
        }
        if self.q.len() == self.c {
            let mut i = self.hand.unwrap_or(0);
            while self.q[i].1 {
                self.q[i].1 = false;
                i = (i + 1) % self.q.len();
            }
            self.q.remove(i);
            // The hand rests on the next newer object; past the newest it restarts.
            self.hand = (i < self.q.len()).then_some(i);
        }
        self.q.push((k, false));
        false
    }
}

/// S3-FIFO as libCacheSim's S3FIFO.c behaves, in unit sizes: small (10%), main and
/// ghost (90%) FIFOs as plain queues searched linearly.
struct RefS3Fifo {
    c: usize,
    small_cap: usize,
    ghost_cap: usize,
    small: VecDeque<(u64, u64)>,
    main: VecDeque<(u64, u64)>,
    ghost: VecDeque<u64>,
    evicted_once: bool,
}
impl RefS3Fifo {
    fn new(c: usize) -> Self {
        RefS3Fifo {
            c,
            small_cap: (c as f64 * 0.1) as usize,
            ghost_cap: (c as f64 * 0.9) as usize,
            small: VecDeque::new(),
            main: VecDeque::new(),
            ghost: VecDeque::new(),
            evicted_once: false,
        }
    }
    fn evict(&mut self) {
        self.evicted_once = true;
        if self.main.len() > self.c - self.small_cap || self.small.is_empty() {
            while let Some((k, f)) = self.main.pop_front() {
                if f == 0 {
                    break;
                }
                self.main.push_back((k, f.min(3) - 1));
            }
        } else {
            while let Some((k, f)) = self.small.pop_front() {
                if f >= 2 {
                    self.main.push_back((k, 0));
                    continue;
                }
                if self.ghost_cap > 0 {
                    if self.ghost.len() == self.ghost_cap {
                        self.ghost.pop_front();
                    }
                    self.ghost.push_back(k);
                }
                break;
            }
        }
    }
}
impl Reference for RefS3Fifo {
    fn hit(&mut self, k: u64) -> bool {
        if let Some(e) = self.small.iter_mut().find(|e| e.0 == k) {
            e.1 += 1;
            return true;
        }
        let in_ghost = match self.ghost.iter().position(|&g| g == k) {
            Some(p) => {
                self.ghost.remove(p);
                true
            }
            None => false,
        };
        if let Some(e) = self.main.iter_mut().find(|e| e.0 == k) {
            e.1 += 1;
            return true;
        }
        if self.small_cap < 1 {
            return false;
        }
        while self.small.len() + self.main.len() + 1 > self.c {
            self.evict();
        }
        if in_ghost || (!self.evicted_once && self.small.len() >= self.small_cap) {
            self.main.push_back((k, 0));
        } else if self.small_cap > 1 {
            self.small.push_back((k, 0));
        }
        false
    }
}

fn trace(seed: u64, n: usize, keys: u64) -> Vec<u64> {
    // A skewed, seeded trace: squares of uniform draws concentrate on small keys, and
    // a sprinkle of one-time keys (the case admission control is for).
    let mut x = seed | 1;
    (0..n)
        .map(|i| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            if i % 7 == 3 {
                1_000_000 + i as u64
            } else {
                let u = (x % 10_000) as f64 / 10_000.0;
                (u * u * keys as f64) as u64
            }
        })
        .collect()
}

fn compare(
    name: &str,
    ours: &mut dyn CachePolicy,
    reference: &mut dyn Reference,
    t: &[u64],
) -> Result<f64, TestCaseError> {
    let mut misses = 0;
    for (i, &k) in t.iter().enumerate() {
        let got = ours.access(k, 1) == CacheOutcome::Hit;
        let want = reference.hit(k);
        prop_assert_eq!(got, want, "{}: request {} key {}", name, i, k);
        misses += usize::from(!got);
    }
    Ok(misses as f64 / t.len() as f64)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]
    #[test]
    fn policies_match_their_references(seed in any::<u64>(), c in 1usize..40, keys in 5u64..120) {
        let t = trace(seed, 3000, keys);
        compare("LruCache", &mut LruCache::new(c as u64), &mut RefLru { c, v: vec![] }, &t)?;
        compare("FifoCache", &mut FifoCache::new(c as u64), &mut RefFifo { c, q: VecDeque::new() }, &t)?;
        compare("ClockCache", &mut ClockCache::new(c as u64), &mut RefClock { slots: vec![None; c], hand: 0 }, &t)?;
        compare("AcLruCache", &mut AcLruCache::new(c as u64, None), &mut RefAcLru { lru: RefLru { c, v: vec![] }, seen: HashSet::new() }, &t)?;
        compare("ArcCache", &mut ArcCache::new(c as u64), &mut RefArc { c, p: 0.0, t1: vec![], t2: vec![], b1: vec![], b2: vec![] }, &t)?;
        compare("SieveCache", &mut SieveCache::new(c as u64), &mut RefSieve { c, q: vec![], hand: None }, &t)?;
    }

    /// S3-FIFO needs caches of 20 objects or more before its small queue holds two.
    #[test]
    fn s3fifo_matches_its_reference(seed in any::<u64>(), c in 10usize..300, keys in 20u64..900) {
        let t = trace(seed, 6000, keys);
        compare("S3FifoCache", &mut S3FifoCache::new(c as u64), &mut RefS3Fifo::new(c), &t)?;
    }
}

#[test]
fn admission_control_skips_one_time_keys_and_sieve_s3fifo_beat_fifo_on_skew() {
    let t = trace(42, 50_000, 2000);
    let run = |p: &mut dyn CachePolicy| {
        let (mut miss, mut bypass) = (0, 0);
        for &k in &t {
            match p.access(k, 1) {
                CacheOutcome::Hit => {}
                CacheOutcome::Inserted => miss += 1,
                CacheOutcome::Bypassed => {
                    miss += 1;
                    bypass += 1
                }
            }
            assert!(p.used() <= 200);
        }
        (miss as f64 / t.len() as f64, bypass)
    };
    let (lru, _) = run(&mut LruCache::new(200));
    let (ac, bypassed) = run(&mut AcLruCache::new(200, None));
    let (ac_bounded, _) = run(&mut AcLruCache::new(200, Some(400)));
    let (fifo, _) = run(&mut FifoCache::new(200));
    let (sieve, _) = run(&mut SieveCache::new(200));
    let (s3, _) = run(&mut S3FifoCache::new(200));
    assert!(
        bypassed > 7000,
        "every one-time key is bypassed: {bypassed}"
    );
    assert!(
        ac < lru && ac_bounded < lru,
        "ac {ac} bounded {ac_bounded} lru {lru}"
    );
    assert!(
        sieve < fifo && s3 < fifo,
        "sieve {sieve} s3 {s3} fifo {fifo}"
    );
}

#[test]
fn variable_sizes_never_overfill_and_oversized_objects_bypass() {
    let caches: Vec<Box<dyn CachePolicy>> = vec![
        Box::new(LruCache::new(10_000)),
        Box::new(FifoCache::new(10_000)),
        Box::new(ClockCache::new(10_000)),
        Box::new(AcLruCache::new(10_000, Some(100))),
        Box::new(SieveCache::new(10_000)),
        Box::new(S3FifoCache::new(10_000)),
        Box::new(ArcCache::new(10_000)),
    ];
    let t = trace(7, 20_000, 500);
    for (i, mut c) in caches.into_iter().enumerate() {
        assert_eq!(c.access(999_999_999, 10_001), CacheOutcome::Bypassed);
        for &k in &t {
            let size = 1 + (k * 37) % 3000;
            c.access(k, size);
            assert!(c.used() <= 10_000, "cache {i}: {}", c.used());
        }
    }
}

/// Long enough for LRU's access log to be compacted many times over.
#[test]
fn lru_stays_exact_across_log_compactions() {
    // A long all-hit phase (40 keys in a 50-object cache) grows the log until it is
    // compacted; then a mixed phase evicts through compacted logs.
    let mut t: Vec<u64> = (0..30_000u64).map(|i| (i * 7) % 40).collect();
    t.extend(trace(99, 200_000, 400));
    let mut ours = LruCache::new(50);
    let mut reference = RefLru { c: 50, v: vec![] };
    let mut longest = 0;
    for (i, &k) in t.iter().enumerate() {
        assert_eq!(
            ours.access(k, 1) == CacheOutcome::Hit,
            reference.hit(k),
            "request {i}"
        );
        longest = longest.max(ours.log_len());
    }
    assert!(
        longest <= 8 * 50 + 4096 + 1,
        "the log is bounded: {longest}"
    );
    assert!(
        longest > 4096,
        "the all-hit phase reached the compaction threshold: {longest}"
    );
    let mut ac = AcLruCache::new(50, None);
    let mut ac_ref = RefAcLru {
        lru: RefLru { c: 50, v: vec![] },
        seen: HashSet::new(),
    };
    for (i, &k) in t.iter().enumerate() {
        assert_eq!(
            ac.access(k, 1) == CacheOutcome::Hit,
            ac_ref.hit(k),
            "AC-LRU request {i}"
        );
    }
}

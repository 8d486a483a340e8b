//! File-cache simulation and the access-time model.

use std::collections::BinaryHeap;

use hscm_policy::cache::{
    AdmissionName, CacheOutcome, CachePolicy, EvictionName, FirstTouch, PolicySpec,
};
use hscm_trace::{Request, TraceError};
use rustc_hash::FxHashMap;
use serde::Serialize;

use crate::VmError;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum PolicyName {
    Lru,
    AcLru,
    Clock,
    Fifo,
    Arc,
    S3fifo,
    Sieve,
    Belady,
}

impl PolicyName {
    pub const ALL: [PolicyName; 8] = [
        Self::Lru,
        Self::AcLru,
        Self::Clock,
        Self::Fifo,
        Self::Arc,
        Self::S3fifo,
        Self::Sieve,
        Self::Belady,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Self::Lru => "lru",
            Self::AcLru => "ac-lru",
            Self::Clock => "clock",
            Self::Fifo => "fifo",
            Self::Arc => "arc",
            Self::S3fifo => "s3fifo",
            Self::Sieve => "sieve",
            Self::Belady => "belady",
        }
    }

    pub fn from_name(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|p| p.name() == s)
    }

    /// The online policy this names (built by hscm-policy's factory); None for Belady
    /// (it needs the future, see [`run_belady`]).
    pub fn spec(self, ghost_entries: Option<usize>) -> Option<PolicySpec> {
        let eviction = |e| Some(PolicySpec::eviction(e));
        match self {
            Self::Lru => eviction(EvictionName::Lru),
            Self::AcLru => Some(PolicySpec::ac_lru(ghost_entries)),
            Self::Clock => eviction(EvictionName::Clock),
            Self::Fifo => eviction(EvictionName::Fifo),
            Self::Arc => eviction(EvictionName::Arc),
            Self::S3fifo => eviction(EvictionName::S3fifo),
            Self::Sieve => eviction(EvictionName::Sieve),
            Self::Belady => None,
        }
    }
}

/// Storage behind the cache, per 4 KiB block: t = a cache hit, T = a storage access,
/// Tm = a storage access that also inserts into the cache (eq. 1-3).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct StorageProfile {
    pub name: &'static str,
    pub hit_us: f64,
    pub storage_us: f64,
    pub storage_insert_us: f64,
}

/// A cache hit serves 4 KiB from DRAM through the file system: 1 µs (our round figure).
/// Inserting copies the block into the cache as well: 0.5 µs more (our assumption; it
/// puts the SCM break-even at the paper's two hits).
const HIT_US: f64 = 1.0;
const INSERT_US: f64 = 0.5;

impl StorageProfile {
    pub const NAMES: &'static [&'static str] = &["hdd", "ssd", "scm", "dram"];

    pub fn from_name(s: &str) -> Option<Self> {
        let storage_us = match s {
            // A 7200 rpm disk: ~5 ms per random block.
            "hdd" => 5000.0,
            // A NAND SSD: ~80 µs per random 4 KiB read.
            "ssd" => 80.0,
            // The seed paper's §2 case: storage 30% slower than a cache access (its
            // Fig. 1 measures exactly this gap for DRAM behind the I/O stack).
            "scm" => 1.3 * HIT_US,
            // DRAM as storage with no stack overhead: the bound where caching never pays.
            "dram" => HIT_US,
            _ => return None,
        };
        let name = Self::NAMES.iter().find(|n| **n == s).copied()?;
        Some(Self {
            name,
            hit_us: HIT_US,
            storage_us,
            storage_insert_us: storage_us + INSERT_US,
        })
    }

    /// Eq. 3: caching an item pays off when it is accessed more than this many times
    /// while cached (n > (Tm − t) / (T − t)); infinite when storage is as fast as a hit.
    pub fn break_even(&self) -> f64 {
        (self.storage_insert_us - self.hit_us) / (self.storage_us - self.hit_us)
    }

    /// The smallest whole number of hits after insertion that makes caching pay.
    pub fn break_even_hits(&self) -> Option<u64> {
        let n = self.break_even();
        n.is_finite()
            .then(|| (n.floor() as u64 + 1).saturating_sub(1).max(1))
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct AccessTime {
    pub profile: String,
    pub with_cache_s: f64,
    pub without_cache_s: f64,
    /// 1 − with / without: the time caching saves.
    pub gain: f64,
}

/// One cache run. Field names are a stable contract (`--json`).
#[derive(Debug, Clone, Serialize)]
pub struct CacheResult {
    pub trace: String,
    pub policy: String,
    pub cache_size: u64,
    /// `bytes` or `objects`.
    pub size_unit: &'static str,
    pub requests: u64,
    pub hits: u64,
    pub miss_ratio: f64,
    pub byte_miss_ratio: f64,
    pub inserted: u64,
    pub bypassed: u64,
    /// Of `bypassed`: misses not admitted because they belonged to a sequential run
    /// longer than `sequential_cutoff`.
    pub bypassed_sequential: u64,
    /// The cutoff this run applied (0: none).
    pub sequential_cutoff: u64,
    pub bytes_inserted: u64,
    pub access_time: AccessTime,
    pub access_times: Vec<AccessTime>,
    pub requests_per_s: f64,
}

/// Tallies outcomes and access times.
struct Tally {
    requests: u64,
    hits: u64,
    bytes: u64,
    miss_bytes: u64,
    inserted: u64,
    bypassed: u64,
    bytes_inserted: u64,
    blocks_hit: f64,
    blocks_inserted: f64,
    blocks_bypassed: f64,
}

impl Tally {
    fn new() -> Self {
        Self {
            requests: 0,
            hits: 0,
            bytes: 0,
            miss_bytes: 0,
            inserted: 0,
            bypassed: 0,
            bytes_inserted: 0,
            blocks_hit: 0.0,
            blocks_inserted: 0.0,
            blocks_bypassed: 0.0,
        }
    }

    #[inline]
    fn add(&mut self, outcome: CacheOutcome, size: u64) {
        self.requests += 1;
        self.bytes += size;
        let blocks = size as f64 / 4096.0;
        match outcome {
            CacheOutcome::Hit => {
                self.hits += 1;
                self.blocks_hit += blocks;
            }
            CacheOutcome::Inserted => {
                self.inserted += 1;
                self.miss_bytes += size;
                self.bytes_inserted += size;
                self.blocks_inserted += blocks;
            }
            CacheOutcome::Bypassed => {
                self.bypassed += 1;
                self.miss_bytes += size;
                self.blocks_bypassed += blocks;
            }
        }
    }

    fn finish(
        &self,
        trace: &str,
        policy: &str,
        cache_size: u64,
        unit: &'static str,
        profiles: &[StorageProfile],
        secs: f64,
    ) -> CacheResult {
        let times: Vec<AccessTime> = profiles
            .iter()
            .map(|p| {
                let with = (self.blocks_hit * p.hit_us
                    + self.blocks_inserted * p.storage_insert_us
                    + self.blocks_bypassed * p.storage_us)
                    * 1e-6;
                let without = (self.blocks_hit + self.blocks_inserted + self.blocks_bypassed)
                    * p.storage_us
                    * 1e-6;
                AccessTime {
                    profile: p.name.to_string(),
                    with_cache_s: with,
                    without_cache_s: without,
                    gain: if without > 0.0 {
                        1.0 - with / without
                    } else {
                        0.0
                    },
                }
            })
            .collect();
        let n = self.requests.max(1) as f64;
        CacheResult {
            trace: trace.to_string(),
            policy: policy.to_string(),
            cache_size,
            size_unit: unit,
            requests: self.requests,
            hits: self.hits,
            miss_ratio: (self.requests - self.hits) as f64 / n,
            byte_miss_ratio: self.miss_bytes as f64 / self.bytes.max(1) as f64,
            inserted: self.inserted,
            bypassed: self.bypassed,
            bypassed_sequential: 0,
            sequential_cutoff: 0,
            bytes_inserted: self.bytes_inserted,
            access_time: times.first().cloned().unwrap_or(AccessTime {
                profile: String::new(),
                with_cache_s: 0.0,
                without_cache_s: 0.0,
                gain: 0.0,
            }),
            access_times: times,
            requests_per_s: self.requests as f64 / secs.max(1e-9),
        }
    }
}

/// What a run needs besides the requests.
pub struct CacheRun<'a> {
    pub trace: &'a str,
    pub policy: PolicyName,
    pub capacity: u64,
    /// Count objects (every object weighs 1) instead of bytes.
    pub objects: bool,
    pub ghost_entries: Option<usize>,
    /// An admission filter in front of the policy (`None`: the policy's own).
    pub admission: Option<AdmissionName>,
    /// The first is the headline `access_time`.
    pub profiles: &'a [StorageProfile],
    /// The tiered volume's sequential cutoff in bytes (0: off), applied as `hscm
    /// volume replay` meets it: each key is placed at the next free offset on its
    /// first request (replay's first-touch placement), and a request whose run of
    /// consecutive offsets is longer than the cutoff is not admitted on a miss.
    /// Online policies only (Belady and the one-pass LRU have no volume to agree with).
    pub sequential_cutoff: u64,
}

/// Runs an online policy over `requests`.
pub fn run(
    spec: &CacheRun,
    requests: impl Iterator<Item = Result<Request, TraceError>>,
    progress: &mut dyn FnMut(u64),
) -> Result<CacheResult, VmError> {
    let start = std::time::Instant::now();
    let mut tally = Tally::new();
    let unit = if spec.objects { "objects" } else { "bytes" };
    let online = spec.policy.spec(spec.ghost_entries);
    let online = match (online, spec.admission) {
        (None, Some(a)) => {
            return Err(VmError::Config(format!(
                "belady is offline: it takes no admission filter ({})",
                a.name()
            )))
        }
        (Some(s), Some(a)) if s.admission.is_some() => {
            return Err(VmError::Config(format!(
                "{} has its own admission filter; put {} in front of an eviction policy (lru, fifo, …) instead",
                spec.policy.name(),
                a.name()
            )))
        }
        (Some(s), Some(a)) => Some(PolicySpec {
            admission: Some(a),
            ..s
        }),
        (online, None) => online,
    };
    let policy_name = online.map_or_else(|| spec.policy.name().to_string(), |s| s.name());
    let mut bypassed_sequential = 0;
    let mut applied_cutoff = 0;
    if let Some(online) = online {
        let mut cache = online.build(spec.capacity);
        let mut placement = FirstTouch::new(spec.sequential_cutoff);
        applied_cutoff = spec.sequential_cutoff;
        // Look a few requests ahead so the policy can start loading their entries
        // while it serves the current one.
        const AHEAD: usize = 8;
        let mut requests = requests;
        let mut window: std::collections::VecDeque<Request> =
            std::collections::VecDeque::with_capacity(AHEAD + 1);
        for r in requests.by_ref().take(AHEAD) {
            let r = r?;
            cache.prefetch(r.key);
            placement.prefetch(r.key);
            window.push_back(r);
        }
        while let Some(r) = window.pop_front() {
            if let Some(next) = requests.next() {
                let next = next?;
                cache.prefetch(next.key);
                placement.prefetch(next.key);
                window.push_back(next);
            }
            let weight = if spec.objects { 1 } else { u64::from(r.size) };
            let outcome = if placement.is_sequential(r.key, u64::from(r.size)) {
                // As the volume does: a hit is a hit; a miss is not admitted.
                bypassed_sequential += 1;
                if cache.lookup(r.key) {
                    CacheOutcome::Hit
                } else {
                    CacheOutcome::Bypassed
                }
            } else {
                cache.access(r.key, weight)
            };
            tally.add(outcome, u64::from(r.size));
            if tally.requests & 0xfffff == 0 {
                progress(tally.requests);
            }
        }
    } else {
        let all: Vec<Request> = requests.collect::<Result<_, _>>()?;
        run_belady_into(&all, spec.capacity, spec.objects, &mut tally);
    }
    progress(tally.requests);
    let mut result = tally.finish(
        spec.trace,
        &policy_name,
        spec.capacity,
        unit,
        spec.profiles,
        start.elapsed().as_secs_f64(),
    );
    result.bypassed_sequential = bypassed_sequential;
    result.sequential_cutoff = applied_cutoff;
    Ok(result)
}

/// Belady's MIN: on a miss, evict the cached objects whose next use is farthest (or
/// never); an object never used again is not admitted. Exact for unit sizes; with
/// unequal sizes a heuristic (the optimum is NP-hard), stated as such in the docs.
/// Needs the whole trace in memory (next-use times), unlike the online policies.
fn run_belady_into(all: &[Request], capacity: u64, objects: bool, tally: &mut Tally) {
    let next = next_uses(all);
    // Cached: key → (next use, weight); heap of (next use, key) with lazy deletion.
    let mut cached: FxHashMap<u64, (u64, u64)> = FxHashMap::default();
    let mut heap: BinaryHeap<(u64, u64)> = BinaryHeap::new();
    let mut used = 0u64;
    for (i, r) in all.iter().enumerate() {
        let w = if objects { 1 } else { u64::from(r.size) };
        if let Some(e) = cached.get_mut(&r.key) {
            e.0 = next[i];
            heap.push((next[i], r.key));
            tally.add(CacheOutcome::Hit, u64::from(r.size));
            continue;
        }
        if next[i] == u64::MAX || w > capacity {
            tally.add(CacheOutcome::Bypassed, u64::from(r.size));
            continue;
        }
        // Evict farther-used objects while they are farther than this one.
        let mut admitted = true;
        while used + w > capacity {
            let Some(&(nu, k)) = heap.peek() else { break };
            match cached.get(&k) {
                Some(&(cur, _)) if cur == nu => {
                    if nu < next[i] {
                        admitted = false;
                        break;
                    }
                    heap.pop();
                    let (_, kw) = cached.remove(&k).expect("present");
                    used -= kw;
                }
                _ => {
                    heap.pop();
                }
            }
        }
        if admitted && used + w <= capacity {
            cached.insert(r.key, (next[i], w));
            heap.push((next[i], r.key));
            used += w;
            tally.add(CacheOutcome::Inserted, u64::from(r.size));
        } else {
            tally.add(CacheOutcome::Bypassed, u64::from(r.size));
        }
    }
}

/// LRU at every size in `capacities` from one pass over the trace: object counts
/// (`objects`) or bytes (then every object must fit the smallest size).
pub fn lru_one_pass(
    trace: &str,
    capacities: &[u64],
    objects: bool,
    profiles: &[StorageProfile],
    requests: impl Iterator<Item = Result<Request, TraceError>>,
    progress: &mut dyn FnMut(u64),
) -> Result<Vec<CacheResult>, VmError> {
    let start = std::time::Instant::now();
    // Totals ride along with the pass.
    let mut total = (0u64, 0u64);
    let counting = requests.inspect(|r| {
        if let Ok(r) = r {
            total.0 += 1;
            total.1 += u64::from(r.size);
        }
    });
    let hits: Vec<(u64, u64)> = if objects {
        let sd = crate::mrc::stack_distances(counting, progress)?;
        capacities.iter().map(|&c| sd.hits(c)).collect()
    } else {
        crate::mrc::byte_hits(capacities, counting, progress)?
    };
    let (requests_n, bytes) = total;
    let secs = start.elapsed().as_secs_f64();
    Ok(capacities
        .iter()
        .zip(hits)
        .map(|(&c, (hits, hit_bytes))| {
            let misses = requests_n - hits;
            let miss_bytes = bytes - hit_bytes;
            let t = Tally {
                requests: requests_n,
                hits,
                bytes,
                miss_bytes,
                inserted: misses,
                bypassed: 0,
                bytes_inserted: miss_bytes,
                blocks_hit: hit_bytes as f64 / 4096.0,
                blocks_inserted: miss_bytes as f64 / 4096.0,
                blocks_bypassed: 0.0,
            };
            // Every size shares the one pass's time.
            t.finish(
                trace,
                "lru",
                c,
                if objects { "objects" } else { "bytes" },
                profiles,
                secs,
            )
        })
        .collect())
}

/// For each request, the index of its key's next request (u64::MAX if none): what
/// Belady needs, and what oracleGeneral traces carry.
pub fn next_uses(all: &[Request]) -> Vec<u64> {
    let mut next = vec![u64::MAX; all.len()];
    let mut last: FxHashMap<u64, usize> = FxHashMap::default();
    for i in (0..all.len()).rev() {
        if let Some(&j) = last.get(&all[i].key) {
            next[i] = j as u64;
        }
        last.insert(all[i].key, i);
    }
    next
}

/// Distinct objects and their bytes (for cache sizes given as a share of the footprint).
pub fn footprint(
    requests: impl Iterator<Item = Result<Request, TraceError>>,
) -> Result<(u64, u64), VmError> {
    let mut seen: FxHashMap<u64, u32> = FxHashMap::default();
    for r in requests {
        let r = r?;
        seen.entry(r.key).or_insert(r.size);
    }
    Ok((
        seen.len() as u64,
        seen.values().map(|&s| u64::from(s)).sum(),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(key: u64) -> Result<Request, TraceError> {
        Ok(Request {
            key,
            size: 4096,
            write: false,
            time: 0,
            next: None,
        })
    }

    fn profiles() -> Vec<StorageProfile> {
        StorageProfile::NAMES
            .iter()
            .map(|n| StorageProfile::from_name(n).unwrap())
            .collect()
    }

    #[test]
    fn break_even_matches_the_paper() {
        let scm = StorageProfile::from_name("scm").unwrap();
        // (1.8 − 1) / (1.3 − 1) = 2.67: an item must be accessed 3 times, i.e. hit twice.
        assert!((scm.break_even() - 2.0 / 0.75).abs() < 1e-9);
        let hdd = StorageProfile::from_name("hdd").unwrap();
        assert!(hdd.break_even() < 1.001, "a single hit pays on a disk");
        assert!(StorageProfile::from_name("dram")
            .unwrap()
            .break_even()
            .is_infinite());
    }

    #[test]
    fn belady_is_optimal_on_a_classic_example() {
        // Capacity 3, the textbook reference string: MIN has 9 faults, LRU 12.
        let s = [
            7u64, 0, 1, 2, 0, 3, 0, 4, 2, 3, 0, 3, 2, 1, 2, 0, 1, 7, 0, 1,
        ];
        let p = profiles();
        let spec = |policy| CacheRun {
            trace: "t",
            policy,
            capacity: 3,
            objects: true,
            ghost_entries: None,
            admission: None,
            profiles: &p,
            sequential_cutoff: 0,
        };
        let b = run(
            &spec(PolicyName::Belady),
            s.iter().map(|&k| req(k)),
            &mut |_| {},
        )
        .unwrap();
        let l = run(
            &spec(PolicyName::Lru),
            s.iter().map(|&k| req(k)),
            &mut |_| {},
        )
        .unwrap();
        assert_eq!(l.requests - l.hits, 12);
        // Demand-paging MIN has 9; ours may also bypass, which the brute force allows too.
        assert_eq!(b.requests - b.hits, brute_force_min(&s, 3));
        assert!(b.requests - b.hits <= 9);
    }

    /// The true optimum (unit sizes, bypass allowed) by exhaustive search.
    fn brute_force_min(t: &[u64], cap: usize) -> u64 {
        fn go(
            t: &[u64],
            i: usize,
            cache: &mut Vec<u64>,
            cap: usize,
            memo: &mut std::collections::HashMap<(usize, Vec<u64>), u64>,
        ) -> u64 {
            if i == t.len() {
                return 0;
            }
            if cache.contains(&t[i]) {
                return go(t, i + 1, cache, cap, memo);
            }
            let mut key = cache.clone();
            key.sort_unstable();
            if let Some(&v) = memo.get(&(i, key.clone())) {
                return v;
            }
            // Bypass, or insert (evicting any one object when full).
            let mut best = go(t, i + 1, cache, cap, memo);
            if cache.len() < cap {
                cache.push(t[i]);
                best = best.min(go(t, i + 1, cache, cap, memo));
                cache.pop();
            } else {
                for j in 0..cache.len() {
                    let old = std::mem::replace(&mut cache[j], t[i]);
                    best = best.min(go(t, i + 1, cache, cap, memo));
                    cache[j] = old;
                }
            }
            let v = best + 1;
            memo.insert((i, key), v);
            v
        }
        go(t, 0, &mut Vec::new(), cap, &mut Default::default())
    }

    proptest::proptest! {
        #[test]
        fn belady_matches_the_exhaustive_optimum(t in proptest::collection::vec(0u64..6, 1..16), cap in 1u64..4) {
            let p = profiles();
            let spec = CacheRun { trace: "t", policy: PolicyName::Belady, capacity: cap, objects: true, ghost_entries: None, admission: None, profiles: &p, sequential_cutoff: 0 };
            let b = run(&spec, t.iter().map(|&k| req(k)), &mut |_| {}).unwrap();
            proptest::prop_assert_eq!(b.requests - b.hits, brute_force_min(&t, cap as usize));
        }
    }

    #[test]
    fn access_time_follows_eq_1_and_2() {
        let p = vec![StorageProfile::from_name("scm").unwrap()];
        let spec = CacheRun {
            trace: "t",
            policy: PolicyName::Lru,
            capacity: 1 << 20,
            objects: false,
            ghost_entries: None,
            admission: None,
            profiles: &p,
            sequential_cutoff: 0,
        };
        // One object accessed n = 3 times: Tc = Tm + 2t = 1.8 + 2 = 3.8 µs; Tx = 3T = 3.9 µs.
        let r = run(&spec, [1u64, 1, 1].iter().map(|&k| req(k)), &mut |_| {}).unwrap();
        assert!((r.access_time.with_cache_s - 3.8e-6).abs() < 1e-12);
        assert!((r.access_time.without_cache_s - 3.9e-6).abs() < 1e-12);
        assert!(r.access_time.gain > 0.0);
        // n = 2: caching loses (2.8 µs > 2.6 µs).
        let r = run(&spec, [1u64, 1].iter().map(|&k| req(k)), &mut |_| {}).unwrap();
        assert!(r.access_time.gain < 0.0);
    }
}

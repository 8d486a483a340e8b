//! LRU miss ratios for every cache size in one pass (Mattson's stack distances).
//!
//! A request's stack distance is the number of distinct keys used since its key's
//! previous use, plus one; an LRU cache of c objects hits exactly the requests with
//! distance ≤ c. Distances come from a Fenwick tree over "last use" positions; the
//! positions are renumbered whenever the tree fills, so memory stays proportional to the
//! number of distinct keys, not to the trace.

use hscm_trace::{Request, TraceError};
use rustc_hash::FxHashMap;

use crate::VmError;

struct Fenwick {
    tree: Vec<u32>,
}

impl Fenwick {
    fn new(n: usize) -> Self {
        Self {
            tree: vec![0; n + 1],
        }
    }
    fn add(&mut self, i: usize, v: i32) {
        let mut i = i + 1;
        while i < self.tree.len() {
            self.tree[i] = self.tree[i].wrapping_add_signed(v);
            i += i & i.wrapping_neg();
        }
    }
    /// Sum of positions [0, i).
    fn prefix(&self, i: usize) -> u32 {
        let mut i = i;
        let mut s = 0u32;
        while i > 0 {
            s += self.tree[i];
            i -= i & i.wrapping_neg();
        }
        s
    }
}

/// Per-distance hit counts (index d − 1) and bytes, plus the cold misses.
pub struct StackDistances {
    pub requests: u64,
    pub bytes: u64,
    pub hits_at: Vec<u64>,
    pub hit_bytes_at: Vec<u64>,
}

impl StackDistances {
    /// Hits and hit bytes of an LRU cache holding `c` objects.
    pub fn hits(&self, c: u64) -> (u64, u64) {
        let c = (c as usize).min(self.hits_at.len());
        (
            self.hits_at[..c].iter().sum(),
            self.hit_bytes_at[..c].iter().sum(),
        )
    }
}

pub fn stack_distances(
    requests: impl Iterator<Item = Result<Request, TraceError>>,
    progress: &mut dyn FnMut(u64),
) -> Result<StackDistances, VmError> {
    let mut last: FxHashMap<u64, u32> = FxHashMap::default();
    let mut cap = 1024usize;
    let mut fen = Fenwick::new(cap);
    let mut next = 0usize;
    let mut out = StackDistances {
        requests: 0,
        bytes: 0,
        hits_at: Vec::new(),
        hit_bytes_at: Vec::new(),
    };
    for r in requests {
        let r = r?;
        out.requests += 1;
        out.bytes += u64::from(r.size);
        if next == cap {
            // Renumber live positions 0..K in last-use order; grow if they fill half.
            let mut live: Vec<(u32, u64)> = last.iter().map(|(&k, &p)| (p, k)).collect();
            live.sort_unstable();
            if live.len() * 2 > cap {
                cap *= 2;
            }
            fen = Fenwick::new(cap);
            for (i, (_, k)) in live.iter().enumerate() {
                last.insert(*k, i as u32);
                fen.add(i, 1);
            }
            next = live.len();
        }
        if let Some(&p) = last.get(&r.key) {
            let d = (fen.prefix(next) - fen.prefix(p as usize + 1)) as usize; // distinct keys since
            if out.hits_at.len() <= d {
                out.hits_at.resize(d + 1, 0);
                out.hit_bytes_at.resize(d + 1, 0);
            }
            out.hits_at[d] += 1;
            out.hit_bytes_at[d] += u64::from(r.size);
            fen.add(p as usize, -1);
        }
        fen.add(next, 1);
        last.insert(r.key, next as u32);
        next += 1;
        if out.requests & 0xfffff == 0 {
            progress(out.requests);
        }
    }
    progress(out.requests);
    Ok(out)
}

/// A Fenwick tree of byte counts.
struct FenwickBytes {
    tree: Vec<u64>,
}

impl FenwickBytes {
    fn new(n: usize) -> Self {
        Self {
            tree: vec![0; n + 1],
        }
    }
    fn add(&mut self, i: usize, v: i64) {
        let mut i = i + 1;
        while i < self.tree.len() {
            self.tree[i] = self.tree[i].wrapping_add_signed(v);
            i += i & i.wrapping_neg();
        }
    }
    fn prefix(&self, i: usize) -> u64 {
        let mut i = i;
        let mut s = 0u64;
        while i > 0 {
            s = s.wrapping_add(self.tree[i]);
            i -= i & i.wrapping_neg();
        }
        s
    }
}

/// Hits and hit bytes of a byte-sized LRU cache at each of `capacities`, from one pass.
///
/// LRU keeps, after every request, the longest prefix of the recency order whose sizes
/// fit (it evicts from the old end only as far as it must), so a request hits exactly
/// when its object's size plus the sizes of the distinct objects used since its previous
/// use fit the capacity. An object larger than a capacity never enters that cache, which
/// one shared recency order cannot express, so every object must fit the smallest
/// capacity (an error otherwise).
pub fn byte_hits(
    capacities: &[u64],
    requests: impl Iterator<Item = Result<Request, TraceError>>,
    progress: &mut dyn FnMut(u64),
) -> Result<Vec<(u64, u64)>, VmError> {
    let min_cap = capacities.iter().copied().min().unwrap_or(0);
    let mut sorted: Vec<u64> = capacities.to_vec();
    sorted.sort_unstable();
    sorted.dedup();
    // hits_from[i]: requests whose byte distance D satisfies sorted[i-1] < D <= sorted[i].
    let mut hits_from = vec![0u64; sorted.len() + 1];
    let mut bytes_from = vec![0u64; sorted.len() + 1];
    let mut last: FxHashMap<u64, (u32, u32)> = FxHashMap::default();
    let mut cap = 1024usize;
    let mut fen = FenwickBytes::new(cap);
    let mut next = 0usize;
    let mut n = 0u64;
    for r in requests {
        let r = r?;
        n += 1;
        let size = u64::from(r.size);
        if size > min_cap {
            return Err(VmError::Config(format!(
                "object {} of {size} bytes is larger than the smallest cache size ({min_cap}): one-pass byte sweeps need every object to fit",
                r.key
            )));
        }
        if next == cap {
            let mut live: Vec<(u32, u64, u32)> =
                last.iter().map(|(&k, &(p, s))| (p, k, s)).collect();
            live.sort_unstable();
            if live.len() * 2 > cap {
                cap *= 2;
            }
            fen = FenwickBytes::new(cap);
            for (i, (_, k, s)) in live.iter().enumerate() {
                last.insert(*k, (i as u32, *s));
                fen.add(i, i64::from(*s));
            }
            next = live.len();
        }
        if let Some(&(p, old_size)) = last.get(&r.key) {
            let between = fen.prefix(next) - fen.prefix(p as usize + 1);
            let d = between + size;
            let slot = sorted.partition_point(|&c| c < d);
            hits_from[slot] += 1;
            bytes_from[slot] += size;
            fen.add(p as usize, -i64::from(old_size));
        }
        fen.add(next, size as i64);
        last.insert(r.key, (next as u32, r.size));
        next += 1;
        if n & 0xfffff == 0 {
            progress(n);
        }
    }
    progress(n);
    let mut out = Vec::with_capacity(capacities.len());
    for &c in capacities {
        let i = sorted
            .binary_search(&c)
            .expect("deduplicated from capacities");
        out.push((hits_from[..=i].iter().sum(), bytes_from[..=i].iter().sum()));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cache::{run, CacheRun, PolicyName, StorageProfile};
    use proptest::prelude::*;

    fn req(key: u64) -> Result<Request, TraceError> {
        Ok(Request {
            key,
            size: 1 + (key % 7) as u32,
            write: false,
            time: 0,
            next: None,
        })
    }

    proptest! {
        /// One pass gives, for every size, exactly what a separate LRU run gives.
        #[test]
        fn one_pass_equals_one_lru_run_per_size(keys in proptest::collection::vec(0u64..300, 1..4000)) {
            let sd = stack_distances(keys.iter().map(|&k| req(k)), &mut |_| {}).unwrap();
            let p = vec![StorageProfile::from_name("scm").unwrap()];
            for c in [1u64, 2, 5, 17, 64, 299, 1000] {
                let spec = CacheRun { trace: "t", policy: PolicyName::Lru, capacity: c, objects: true, ghost_entries: None, admission: None, profiles: &p, sequential_cutoff: 0 };
                let r = run(&spec, keys.iter().map(|&k| req(k)), &mut |_| {}).unwrap();
                prop_assert_eq!(sd.hits(c).0, r.hits, "size {}", c);
            }
        }
    }

    fn sized(key: u64) -> Result<Request, TraceError> {
        Ok(Request {
            key,
            size: 100 + ((key * 37) % 900) as u32,
            write: false,
            time: 0,
            next: None,
        })
    }

    proptest! {
        /// Byte-sized: one pass equals one byte-capacity LRU run per size.
        #[test]
        fn byte_one_pass_equals_per_size_runs(keys in proptest::collection::vec(0u64..400, 1..3000)) {
            let caps = [1000u64, 2500, 9999, 40_000, 400_000];
            let one = byte_hits(&caps, keys.iter().map(|&k| sized(k)), &mut |_| {}).unwrap();
            let p = vec![StorageProfile::from_name("scm").unwrap()];
            for (c, (hits, hit_bytes)) in caps.iter().zip(one) {
                let spec = CacheRun { trace: "t", policy: PolicyName::Lru, capacity: *c, objects: false, ghost_entries: None, admission: None, profiles: &p, sequential_cutoff: 0 };
                let r = run(&spec, keys.iter().map(|&k| sized(k)), &mut |_| {}).unwrap();
                prop_assert_eq!(hits, r.hits, "size {}", c);
                let miss_bytes = (r.byte_miss_ratio * keys.iter().map(|&k| 100 + (k * 37) % 900).sum::<u64>() as f64).round() as u64;
                let total: u64 = keys.iter().map(|&k| 100 + (k * 37) % 900).sum();
                prop_assert_eq!(hit_bytes, total - miss_bytes);
            }
        }
    }

    #[test]
    fn byte_sweep_refuses_objects_bigger_than_the_smallest_cache() {
        let e = byte_hits(&[500, 5000], [sized(13)].into_iter(), &mut |_| {})
            .err()
            .unwrap()
            .to_string();
        assert!(e.contains("larger than the smallest cache size"), "{e}");
    }

    #[test]
    fn renumbering_keeps_distances_exact() {
        // Far more requests than the initial tree: many renumberings.
        let keys: Vec<u64> = (0..50_000u64).map(|i| (i * 2_654_435_761) % 700).collect();
        let sd = stack_distances(keys.iter().map(|&k| req(k)), &mut |_| {}).unwrap();
        let p = vec![StorageProfile::from_name("scm").unwrap()];
        for c in [10u64, 100, 350, 699, 700] {
            let spec = CacheRun {
                trace: "t",
                policy: PolicyName::Lru,
                capacity: c,
                objects: true,
                ghost_entries: None,
                admission: None,
                profiles: &p,
                sequential_cutoff: 0,
            };
            let r = run(&spec, keys.iter().map(|&k| req(k)), &mut |_| {}).unwrap();
            assert_eq!(sd.hits(c).0, r.hits, "size {c}");
        }
    }
}

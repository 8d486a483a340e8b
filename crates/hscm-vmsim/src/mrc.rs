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
                let spec = CacheRun { trace: "t", policy: PolicyName::Lru, capacity: c, objects: true, ghost_entries: None, profiles: &p };
                let r = run(&spec, keys.iter().map(|&k| req(k)), &mut |_| {}).unwrap();
                prop_assert_eq!(sd.hits(c).0, r.hits, "size {}", c);
            }
        }
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
                profiles: &p,
            };
            let r = run(&spec, keys.iter().map(|&k| req(k)), &mut |_| {}).unwrap();
            assert_eq!(sd.hits(c).0, r.hits, "size {c}");
        }
    }
}

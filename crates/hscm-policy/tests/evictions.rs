//! What a policy reports evicting is exactly what left it: a real cache (the tiered
//! volume) frees or writes back the reported keys, so a key reported but still cached,
//! or gone but not reported, would lose or leak data. Checked for every eviction policy
//! behind every admission filter, with mixed object sizes, against a model built only
//! from the reports: a request hits exactly when the model holds its key, and the bytes
//! the model holds are the bytes the policy says it uses.

use std::collections::HashMap;

use hscm_policy::cache::{AdmissionName, CacheOutcome, EvictionName, PolicySpec};
use proptest::prelude::*;

fn specs() -> Vec<PolicySpec> {
    let mut out = Vec::new();
    for eviction in EvictionName::ALL {
        for admission in [
            None,
            Some(AdmissionName::SecondMiss),
            Some(AdmissionName::SeenBefore),
        ] {
            out.push(PolicySpec {
                eviction,
                admission,
                history: None,
            });
        }
    }
    out
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]
    #[test]
    fn reported_evictions_are_exactly_what_left_the_cache(
        capacity in 1u64..40,
        requests in proptest::collection::vec((0u64..60, 1u64..5), 1..3000),
    ) {
        for spec in specs() {
            let mut cache = spec.build(capacity);
            // key → size, for every key the reports say is cached.
            let mut model: HashMap<u64, u64> = HashMap::new();
            let mut evicted = Vec::new();
            for (i, &(key, size)) in requests.iter().enumerate() {
                // An object keeps its size across requests, as in a block cache.
                let size = model.get(&key).copied().unwrap_or(size);
                let hit = cache.lookup(key);
                prop_assert_eq!(
                    hit,
                    model.contains_key(&key),
                    "{}: request {} for key {}",
                    spec.name(),
                    i,
                    key
                );
                if !hit {
                    evicted.clear();
                    let outcome = cache.insert_evicting(key, size, &mut |k| evicted.push(k));
                    for k in &evicted {
                        prop_assert!(
                            model.remove(k).is_some(),
                            "{}: request {}: evicted {} which was not cached",
                            spec.name(),
                            i,
                            k
                        );
                    }
                    // S3-FIFO may make room and then bypass an object as large as its
                    // small queue (as libCacheSim's does): the room it made is reported.
                    if outcome == CacheOutcome::Inserted {
                        model.insert(key, size);
                    }
                }
                prop_assert_eq!(
                    cache.used(),
                    model.values().sum::<u64>(),
                    "{}: request {}",
                    spec.name(),
                    i
                );
            }
        }
    }
}

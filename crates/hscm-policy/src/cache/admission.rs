//! Admission: whether a miss is cached at all, decided apart from what the eviction
//! policy evicts (libCacheSim's admission algorithms are the pattern), so any filter
//! works over any eviction policy through [`Admitted`].
//!
//! Two filters admit on a repeated request, differing in what they remember:
//!
//! * [`SecondMiss`] forgets a key once it is admitted: an object that is evicted later
//!   needs two more misses to come back. This is hscm's AC-LRU since its first version,
//!   kept so its figures stay as they were.
//! * [`SeenBefore`] remembers every key ever requested (libCacheSim's bloom-filter
//!   admission, here with an exact set, so without false positives): an evicted object
//!   comes back on its next miss.
//!
//! Park & Bahn describe their AC-cache as "allowing the insertion of data into the file
//! cache only if it is used more than once"; read literally, that is [`SeenBefore`].
//! The paper does not say what happens to an object evicted after its admission.

use super::{CacheOutcome, CachePolicy, LruCache};
use crate::table::StampTable;
use crate::Lru;

/// Decides whether a missed object is cached.
pub trait Admission: Send {
    /// A miss of `key` (of `size` bytes): true to cache it.
    fn admit(&mut self, key: u64, size: u64) -> bool;
    /// A hint that `key` will be asked for soon.
    fn prefetch(&self, _key: u64) {}
}

/// Admits a key on its second miss within the history, and forgets it then. The
/// history is unbounded, or an LRU list of `entries` keys.
pub struct SecondMiss {
    ghost: Ghost,
}

enum Ghost {
    Unbounded(StampTable),
    Bounded(Lru<u64, ()>, usize),
}

impl SecondMiss {
    /// `entries`: None for an unbounded history.
    pub fn new(entries: Option<usize>) -> SecondMiss {
        SecondMiss {
            ghost: match entries {
                None => Ghost::Unbounded(StampTable::new()),
                Some(n) => Ghost::Bounded(Lru::new(), n.max(1)),
            },
        }
    }
}

impl Admission for SecondMiss {
    fn admit(&mut self, key: u64, _size: u64) -> bool {
        match &mut self.ghost {
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
        }
    }

    fn prefetch(&self, key: u64) {
        if let Ghost::Unbounded(set) = &self.ghost {
            set.prefetch(key);
        }
    }
}

/// Admits a key on any miss after its first request, remembering every key for good.
pub struct SeenBefore {
    seen: StampTable,
}

impl SeenBefore {
    pub fn new() -> SeenBefore {
        SeenBefore {
            seen: StampTable::new(),
        }
    }
}

impl Default for SeenBefore {
    fn default() -> Self {
        Self::new()
    }
}

impl Admission for SeenBefore {
    fn admit(&mut self, key: u64, _size: u64) -> bool {
        if self.seen.get(key).is_some() {
            true
        } else {
            self.seen.insert_new(key, 1, 0);
            false
        }
    }

    fn prefetch(&self, key: u64) {
        self.seen.prefetch(key);
    }
}

/// An eviction policy behind an admission filter: hits go to the policy; a miss is
/// inserted only if the filter admits it, else bypassed.
pub struct Admitted<C, A> {
    cache: C,
    admission: A,
}

impl<C: CachePolicy, A: Admission> Admitted<C, A> {
    pub fn over(cache: C, admission: A) -> Self {
        Admitted { cache, admission }
    }
}

/// AC-LRU (Park & Bahn's AC-cache): LRU behind [`SecondMiss`].
pub type AcLruCache = Admitted<LruCache, SecondMiss>;

impl Admitted<LruCache, SecondMiss> {
    /// `ghost_entries`: None for an unbounded history.
    pub fn new(capacity: u64, ghost_entries: Option<usize>) -> Self {
        Admitted::over(LruCache::new(capacity), SecondMiss::new(ghost_entries))
    }
}

impl<C: CachePolicy, A: Admission> CachePolicy for Admitted<C, A> {
    #[inline]
    fn lookup(&mut self, key: u64) -> bool {
        self.cache.lookup(key)
    }

    fn insert(&mut self, key: u64, size: u64) -> CacheOutcome {
        if self.admission.admit(key, size) {
            self.cache.insert(key, size)
        } else {
            CacheOutcome::Bypassed
        }
    }

    fn insert_evicting(
        &mut self,
        key: u64,
        size: u64,
        evicted: &mut dyn FnMut(u64),
    ) -> CacheOutcome {
        if self.admission.admit(key, size) {
            self.cache.insert_evicting(key, size, evicted)
        } else {
            CacheOutcome::Bypassed
        }
    }

    fn prefetch(&self, key: u64) {
        self.cache.prefetch(key);
        self.admission.prefetch(key);
    }

    fn used(&self) -> u64 {
        self.cache.used()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cache::FifoCache;

    /// The two filters differ exactly on an object evicted after its admission.
    #[test]
    fn second_miss_forgets_on_admission_and_seen_before_remembers() {
        // A cache of one object: a, a (admitted), b, b (admitted, evicts a), a.
        let trace = [1, 1, 2, 2, 1];
        let run = |c: &mut dyn CachePolicy| -> Vec<CacheOutcome> {
            trace.iter().map(|&k| c.access(k, 1)).collect()
        };
        use CacheOutcome::*;
        let second = run(&mut Admitted::over(LruCache::new(1), SecondMiss::new(None)));
        assert_eq!(second, [Bypassed, Inserted, Bypassed, Inserted, Bypassed]);
        let seen = run(&mut Admitted::over(LruCache::new(1), SeenBefore::new()));
        assert_eq!(seen, [Bypassed, Inserted, Bypassed, Inserted, Inserted]);
    }

    #[test]
    fn a_filter_works_over_any_eviction_policy() {
        let mut c = Admitted::over(FifoCache::new(10), SeenBefore::new());
        assert_eq!(c.access(7, 3), CacheOutcome::Bypassed);
        assert_eq!(c.access(7, 3), CacheOutcome::Inserted);
        assert_eq!(c.access(7, 3), CacheOutcome::Hit);
        assert_eq!(c.used(), 3);
    }
}

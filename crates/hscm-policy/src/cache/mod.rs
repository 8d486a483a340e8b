//! Byte-sized object caches: which requests hit, which misses are admitted. Every policy
//! counts capacity in bytes (give every object size 1 to count objects). An object
//! larger than the whole cache is never admitted.
//!
//! Eviction policies, one per file: LRU, FIFO, CLOCK (second chance: new objects start
//! unreferenced), SIEVE (Zhang et al., NSDI 2024), S3-FIFO (Yang et al., SOSP 2023, as
//! its authors' libCacheSim implements it) and ARC (Megiddo & Modha, FAST 2003, with
//! list sizes in bytes).
//!
//! Admission is separate (`admission`): a filter decides whether a miss is cached at
//! all, over any eviction policy ([`Admitted`]). AC-LRU (Park & Bahn's AC-cache) is LRU
//! behind the second-miss filter. [`PolicySpec`] builds any of them from a name.

/// The two insert methods of [`CachePolicy`] for a policy whose generic
/// `insert_with(key, size, evicted)` does the work: `insert` passes a sink the compiler
/// removes, so the simulators pay nothing for eviction reports.
macro_rules! inserts_through_insert_with {
    () => {
        #[inline]
        fn insert(&mut self, key: u64, size: u64) -> CacheOutcome {
            self.insert_with(key, size, &mut |_| {})
        }
        fn insert_evicting(
            &mut self,
            key: u64,
            size: u64,
            evicted: &mut dyn FnMut(u64),
        ) -> CacheOutcome {
            self.insert_with(key, size, &mut |k| evicted(k))
        }
    };
}

mod admission;
mod arc;
mod clock;
mod fifo;
mod lru;
mod s3fifo;
mod sequential;
mod sieve;
mod spec;

pub use admission::{AcLruCache, Admission, Admitted, SecondMiss, SeenBefore};
pub use arc::ArcCache;
pub use clock::ClockCache;
pub use fifo::FifoCache;
pub use lru::LruCache;
pub use s3fifo::S3FifoCache;
pub use sequential::{FirstTouch, SequentialCutoff, DEFAULT_SEQUENTIAL_CUTOFF};
pub use sieve::SieveCache;
pub use spec::{AdmissionName, EvictionName, PolicySpec};

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

/// A cache policy over u64 keys. A request is a [`CachePolicy::lookup`] and, on a
/// miss, an [`CachePolicy::insert`]; [`CachePolicy::access`] does both.
pub trait CachePolicy: Send {
    /// A request for `key`: if it is cached, records the use (as a hit) and returns
    /// true; otherwise changes nothing (ghost history included) and returns false.
    fn lookup(&mut self, key: u64) -> bool;
    /// Caches `key`, which [`CachePolicy::lookup`] just missed, evicting as the policy
    /// does (consulting its ghosts); `Bypassed` when the policy does not cache it.
    #[inline]
    fn insert(&mut self, key: u64, size: u64) -> CacheOutcome {
        self.insert_evicting(key, size, &mut |_| {})
    }
    /// [`CachePolicy::insert`], calling `evicted` with every key that leaves the cache
    /// to make room (a key moving to a ghost list has left it): what a real cache must
    /// write back or drop.
    fn insert_evicting(
        &mut self,
        key: u64,
        size: u64,
        evicted: &mut dyn FnMut(u64),
    ) -> CacheOutcome;
    /// One request: a hit, or a miss inserted or bypassed.
    #[inline]
    fn access(&mut self, key: u64, size: u64) -> CacheOutcome {
        if self.lookup(key) {
            CacheOutcome::Hit
        } else {
            self.insert(key, size)
        }
    }
    /// A hint that `key` will be asked for soon (lets a policy start a memory load).
    fn prefetch(&self, _key: u64) {}
    /// Bytes currently cached.
    fn used(&self) -> u64;
}

impl<C: CachePolicy + ?Sized> CachePolicy for Box<C> {
    #[inline]
    fn lookup(&mut self, key: u64) -> bool {
        (**self).lookup(key)
    }
    #[inline]
    fn insert(&mut self, key: u64, size: u64) -> CacheOutcome {
        (**self).insert(key, size)
    }
    fn insert_evicting(
        &mut self,
        key: u64,
        size: u64,
        evicted: &mut dyn FnMut(u64),
    ) -> CacheOutcome {
        (**self).insert_evicting(key, size, evicted)
    }
    #[inline]
    fn access(&mut self, key: u64, size: u64) -> CacheOutcome {
        (**self).access(key, size)
    }
    #[inline]
    fn prefetch(&self, key: u64) {
        (**self).prefetch(key)
    }
    fn used(&self) -> u64 {
        (**self).used()
    }
}

/// Evicts from `lru`'s oldest end until `need` more bytes fit under `capacity`.
pub(crate) fn make_room<V: Default>(
    lru: &mut Lru<u64, V>,
    used: &mut u64,
    capacity: u64,
    need: u64,
    size_of: impl Fn(&V) -> u64,
    evicted: &mut impl FnMut(u64),
) {
    while *used + need > capacity {
        match lru.pop_oldest() {
            Some((k, v)) => {
                *used -= size_of(&v);
                evicted(k);
            }
            None => break,
        }
    }
}

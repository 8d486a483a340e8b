//! Counters for any target, as a wrapper: a front-end that reports them pays for the
//! atomic adds; the engines' own hot paths do not.

use std::sync::atomic::{AtomicU64, Ordering};

use crate::{BlockTarget, Capabilities, Result, WriteFlags, ZeroFlags};

/// Requests and bytes a [`Counted`] target has served, and how many failed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CounterSnapshot {
    pub reads: u64,
    pub read_bytes: u64,
    pub writes: u64,
    pub write_bytes: u64,
    pub flushes: u64,
    pub discards: u64,
    pub discard_bytes: u64,
    pub zeroes: u64,
    pub zero_bytes: u64,
    pub errors: u64,
}

#[derive(Default)]
struct Counters {
    reads: AtomicU64,
    read_bytes: AtomicU64,
    writes: AtomicU64,
    write_bytes: AtomicU64,
    flushes: AtomicU64,
    discards: AtomicU64,
    discard_bytes: AtomicU64,
    zeroes: AtomicU64,
    zero_bytes: AtomicU64,
    errors: AtomicU64,
}

/// `T`, counting what it serves.
pub struct Counted<T> {
    inner: T,
    counters: Counters,
}

impl<T: BlockTarget> Counted<T> {
    pub fn new(inner: T) -> Counted<T> {
        Counted {
            inner,
            counters: Counters::default(),
        }
    }

    pub fn inner(&self) -> &T {
        &self.inner
    }

    pub fn into_inner(self) -> T {
        self.inner
    }

    pub fn snapshot(&self) -> CounterSnapshot {
        let c = &self.counters;
        let get = |a: &AtomicU64| a.load(Ordering::Relaxed);
        CounterSnapshot {
            reads: get(&c.reads),
            read_bytes: get(&c.read_bytes),
            writes: get(&c.writes),
            write_bytes: get(&c.write_bytes),
            flushes: get(&c.flushes),
            discards: get(&c.discards),
            discard_bytes: get(&c.discard_bytes),
            zeroes: get(&c.zeroes),
            zero_bytes: get(&c.zero_bytes),
            errors: get(&c.errors),
        }
    }

    /// Counts one request of `bytes` in `count` and `bytes_counter`, or an error.
    fn count<R>(
        &self,
        r: Result<R>,
        count: &AtomicU64,
        bytes_counter: Option<(&AtomicU64, u64)>,
    ) -> Result<R> {
        match &r {
            Ok(_) => {
                count.fetch_add(1, Ordering::Relaxed);
                if let Some((c, n)) = bytes_counter {
                    c.fetch_add(n, Ordering::Relaxed);
                }
            }
            Err(_) => {
                self.counters.errors.fetch_add(1, Ordering::Relaxed);
            }
        }
        r
    }
}

impl<T: BlockTarget> BlockTarget for Counted<T> {
    fn size(&self) -> u64 {
        self.inner.size()
    }

    fn capabilities(&self) -> Capabilities {
        self.inner.capabilities()
    }

    fn read_with(&self, offset: u64, len: usize, sink: &mut dyn FnMut(usize, &[u8])) -> Result<()> {
        let c = &self.counters;
        self.count(
            self.inner.read_with(offset, len, sink),
            &c.reads,
            Some((&c.read_bytes, len as u64)),
        )
    }

    fn write_at(&self, offset: u64, data: &[u8], flags: WriteFlags) -> Result<()> {
        let c = &self.counters;
        self.count(
            self.inner.write_at(offset, data, flags),
            &c.writes,
            Some((&c.write_bytes, data.len() as u64)),
        )
    }

    fn flush(&self) -> Result<()> {
        self.count(self.inner.flush(), &self.counters.flushes, None)
    }

    fn discard(&self, offset: u64, len: u64, flags: WriteFlags) -> Result<()> {
        let c = &self.counters;
        self.count(
            self.inner.discard(offset, len, flags),
            &c.discards,
            Some((&c.discard_bytes, len)),
        )
    }

    fn write_zeroes(&self, offset: u64, len: u64, flags: ZeroFlags) -> Result<()> {
        let c = &self.counters;
        self.count(
            self.inner.write_zeroes(offset, len, flags),
            &c.zeroes,
            Some((&c.zero_bytes, len)),
        )
    }
}

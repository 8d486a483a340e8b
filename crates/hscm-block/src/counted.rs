//! Counters and latencies for any target, as a wrapper: a front-end that reports them pays for the
//! atomic adds; the engines' own hot paths do not.

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Instant;

use crate::latency::{Latency, LatencySnapshot};

use crate::{BlockTarget, Capabilities, Result, WriteDone, WriteFlags, ZeroFlags};

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

/// The five kinds of request a target serves, as [`Counted::ops`] names them.
pub const OPS: [&str; 5] = ["read", "write", "flush", "discard", "write_zeroes"];

/// One kind of request: how many succeeded, their bytes, how many failed, and how
/// long each took (failures included). Front-ends that serve other requests than a
/// target's (a file system's) count theirs with it too.
///
/// Striped: each thread adds to its own cache line, so threads serving requests at
/// once do not pass the counters' lines back and forth on every request. A snapshot
/// sums the stripes.
#[derive(Debug, Default)]
pub struct OpCounter {
    stripes: [Stripe; STRIPES],
}

const STRIPES: usize = 8;

/// One thread's share; successes are the latencies recorded less the errors.
#[derive(Debug, Default)]
#[repr(align(128))]
struct Stripe {
    latency: Latency,
    bytes: AtomicU64,
    errors: AtomicU64,
}

/// This thread's stripe: threads take stripes in turn as they first count.
fn stripe() -> usize {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    thread_local! {
        static MINE: usize = NEXT.fetch_add(1, Ordering::Relaxed) % STRIPES;
    }
    MINE.with(|s| *s)
}

impl OpCounter {
    /// Counts one request that started at `started` and moved `bytes` if it succeeded.
    pub fn record(&self, started: Instant, ok: bool, bytes: u64) {
        let s = &self.stripes[stripe()];
        s.latency.record(started.elapsed());
        if ok {
            if bytes > 0 {
                s.bytes.fetch_add(bytes, Ordering::Relaxed);
            }
        } else {
            s.errors.fetch_add(1, Ordering::Relaxed);
        }
    }

    pub fn snapshot(&self, op: &'static str) -> OpSnapshot {
        let mut latency = LatencySnapshot::default();
        let (mut bytes, mut errors) = (0, 0);
        for s in &self.stripes {
            latency.add(&s.latency.snapshot());
            bytes += s.bytes.load(Ordering::Relaxed);
            errors += s.errors.load(Ordering::Relaxed);
        }
        OpSnapshot {
            op,
            count: latency.count().saturating_sub(errors),
            bytes,
            errors,
            latency,
        }
    }
}

/// What one kind of request did, for a front-end's metrics.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct OpSnapshot {
    /// One of [`OPS`].
    pub op: &'static str,
    pub count: u64,
    pub bytes: u64,
    pub errors: u64,
    pub latency: LatencySnapshot,
}

/// `T`, counting and timing what it serves.
pub struct Counted<T> {
    inner: T,
    /// Shared with the callbacks of started writes, which count when they complete.
    ops: Arc<[OpCounter; 5]>,
}

const READ: usize = 0;
const WRITE: usize = 1;
const FLUSH: usize = 2;
const DISCARD: usize = 3;
const ZEROES: usize = 4;

impl<T: BlockTarget> Counted<T> {
    pub fn new(inner: T) -> Counted<T> {
        Counted {
            inner,
            ops: Default::default(),
        }
    }

    pub fn inner(&self) -> &T {
        &self.inner
    }

    pub fn into_inner(self) -> T {
        self.inner
    }

    pub fn snapshot(&self) -> CounterSnapshot {
        let o = self.ops();
        CounterSnapshot {
            reads: o[READ].count,
            read_bytes: o[READ].bytes,
            writes: o[WRITE].count,
            write_bytes: o[WRITE].bytes,
            flushes: o[FLUSH].count,
            discards: o[DISCARD].count,
            discard_bytes: o[DISCARD].bytes,
            zeroes: o[ZEROES].count,
            zero_bytes: o[ZEROES].bytes,
            errors: o.iter().map(|op| op.errors).sum(),
        }
    }

    /// Every kind of request, in [`OPS`]'s order, with its latencies.
    pub fn ops(&self) -> Vec<OpSnapshot> {
        OPS.iter()
            .zip(self.ops.iter())
            .map(|(name, op)| op.snapshot(name))
            .collect()
    }

    /// Runs one request of kind `op` moving `bytes`, and counts and times it.
    fn count<R>(&self, op: usize, bytes: u64, run: impl FnOnce() -> Result<R>) -> Result<R> {
        let started = Instant::now();
        let r = run();
        self.ops[op].record(started, r.is_ok(), bytes);
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
        self.count(READ, len as u64, || self.inner.read_with(offset, len, sink))
    }

    fn write_at(&self, offset: u64, data: &[u8], flags: WriteFlags) -> Result<()> {
        self.count(WRITE, data.len() as u64, || {
            self.inner.write_at(offset, data, flags)
        })
    }

    fn start_write(
        &self,
        offset: u64,
        data: &[u8],
        flags: WriteFlags,
        done: WriteDone,
    ) -> std::result::Result<(), WriteDone> {
        let (ops, started, bytes) = (self.ops.clone(), Instant::now(), data.len() as u64);
        // Cleared where the write is not started: the caller then writes it with
        // `write_at`, which counts it, and calls the callback handed back.
        let counting = Arc::new(AtomicBool::new(true));
        let counts = counting.clone();
        let counted: WriteDone = Box::new(move |r: Result<()>| {
            if counts.load(Ordering::Acquire) {
                ops[WRITE].record(started, r.is_ok(), bytes);
            }
            done(r)
        });
        self.inner
            .start_write(offset, data, flags, counted)
            .inspect_err(|_| counting.store(false, Ordering::Release))
    }

    fn flush(&self) -> Result<()> {
        self.count(FLUSH, 0, || self.inner.flush())
    }

    fn discard(&self, offset: u64, len: u64, flags: WriteFlags) -> Result<()> {
        self.count(DISCARD, len, || self.inner.discard(offset, len, flags))
    }

    fn write_zeroes(&self, offset: u64, len: u64, flags: ZeroFlags) -> Result<()> {
        self.count(ZEROES, len, || self.inner.write_zeroes(offset, len, flags))
    }

    fn extents(&self, offset: u64, len: u64, only_first: bool) -> Result<Vec<crate::Extent>> {
        self.inner.extents(offset, len, only_first)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::MemTarget;

    #[test]
    fn counts_from_many_threads_add_up_across_stripes() {
        let t = Counted::new(MemTarget::new(1 << 20));
        std::thread::scope(|s| {
            for _ in 0..(STRIPES + 3) {
                s.spawn(|| {
                    for i in 0..100u64 {
                        t.write_at(i * 512, &[1u8; 512], WriteFlags::default())
                            .unwrap();
                        let mut buf = [0u8; 256];
                        t.read_at(i * 512, &mut buf).unwrap();
                    }
                    // Out of range: an error, not a success.
                    assert!(t.read_at(1 << 20, &mut [0u8; 1]).is_err());
                });
            }
        });
        let threads = (STRIPES + 3) as u64;
        let c = t.snapshot();
        assert_eq!(c.writes, 100 * threads);
        assert_eq!(c.write_bytes, 512 * 100 * threads);
        assert_eq!(c.reads, 100 * threads);
        assert_eq!(c.read_bytes, 256 * 100 * threads);
        assert_eq!(c.errors, threads);
        let read = &t.ops()[READ];
        assert_eq!(
            read.latency.count(),
            101 * threads,
            "failures are timed too"
        );
        assert_eq!(read.errors, threads);
    }
}

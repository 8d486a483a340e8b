//! What a volume asked of its device: reads, writes, bytes and syncs (the flash wear
//! a service's operator watches). A wrapper around the backend, so that every path
//! (requests, journal, checkpoints, write-back, the loader) is counted in one place.

use std::io;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use crate::backend::{Backend, WriteDone};

/// Device operations since the volume opened.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DeviceStats {
    pub reads: u64,
    pub read_bytes: u64,
    /// Write calls (a `write_many` counts each of its pieces).
    pub writes: u64,
    pub written_bytes: u64,
    pub syncs: u64,
}

#[derive(Debug, Default)]
pub(crate) struct DeviceCounters {
    reads: AtomicU64,
    read_bytes: AtomicU64,
    writes: AtomicU64,
    written_bytes: AtomicU64,
    syncs: AtomicU64,
}

impl DeviceCounters {
    pub(crate) fn snapshot(&self) -> DeviceStats {
        let get = |a: &AtomicU64| a.load(Ordering::Relaxed);
        DeviceStats {
            reads: get(&self.reads),
            read_bytes: get(&self.read_bytes),
            writes: get(&self.writes),
            written_bytes: get(&self.written_bytes),
            syncs: get(&self.syncs),
        }
    }

    fn add(counter: &AtomicU64, n: u64) {
        counter.fetch_add(n, Ordering::Relaxed);
    }
}

/// `inner`, counting into `counters` what reached the device (failed calls are not
/// counted: the volume reports those itself, and refuses writes after one).
pub(crate) struct CountingBackend {
    pub(crate) inner: Box<dyn Backend>,
    pub(crate) counters: Arc<DeviceCounters>,
}

impl Backend for CountingBackend {
    fn len(&self) -> u64 {
        self.inner.len()
    }

    fn read_at(&self, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        self.inner.read_at(offset, buf)?;
        DeviceCounters::add(&self.counters.reads, 1);
        DeviceCounters::add(&self.counters.read_bytes, buf.len() as u64);
        Ok(())
    }

    fn read_vectored_at(&self, offset: u64, bufs: &mut [&mut [u8]]) -> io::Result<()> {
        self.inner.read_vectored_at(offset, bufs)?;
        let bytes: usize = bufs.iter().map(|b| b.len()).sum();
        DeviceCounters::add(&self.counters.reads, 1);
        DeviceCounters::add(&self.counters.read_bytes, bytes as u64);
        Ok(())
    }

    fn write_at(&self, offset: u64, buf: &[u8]) -> io::Result<()> {
        self.inner.write_at(offset, buf)?;
        DeviceCounters::add(&self.counters.writes, 1);
        DeviceCounters::add(&self.counters.written_bytes, buf.len() as u64);
        Ok(())
    }

    fn write_many(&self, writes: &[(u64, &[u8])]) -> io::Result<()> {
        self.inner.write_many(writes)?;
        let bytes: usize = writes.iter().map(|(_, b)| b.len()).sum();
        DeviceCounters::add(&self.counters.writes, writes.len() as u64);
        DeviceCounters::add(&self.counters.written_bytes, bytes as u64);
        Ok(())
    }

    fn sync(&self) -> io::Result<()> {
        self.inner.sync()?;
        DeviceCounters::add(&self.counters.syncs, 1);
        Ok(())
    }

    fn prefers_write_through(&self) -> bool {
        self.inner.prefers_write_through()
    }

    fn write_through_at(&self, offset: u64, buf: &[u8]) -> io::Result<()> {
        self.inner.write_through_at(offset, buf)?;
        DeviceCounters::add(&self.counters.writes, 1);
        DeviceCounters::add(&self.counters.written_bytes, buf.len() as u64);
        DeviceCounters::add(&self.counters.syncs, 1);
        Ok(())
    }

    fn start_write_through(
        &self,
        offset: u64,
        buf: &[u8],
        done: WriteDone,
    ) -> Result<(), WriteDone> {
        let counters = self.counters.clone();
        let len = buf.len() as u64;
        // Cleared if the write is not started: the callback handed back is then
        // called after the caller's `write_through_at`, which counts it already.
        let started = Arc::new(AtomicBool::new(true));
        let counts = started.clone();
        let counted: WriteDone = Box::new(move |r: io::Result<()>| {
            if r.is_ok() && counts.load(Ordering::Acquire) {
                DeviceCounters::add(&counters.writes, 1);
                DeviceCounters::add(&counters.written_bytes, len);
                DeviceCounters::add(&counters.syncs, 1);
            }
            done(r)
        });
        self.inner
            .start_write_through(offset, buf, counted)
            .inspect_err(|_| started.store(false, Ordering::Release))
    }

    fn describe(&self) -> String {
        self.inner.describe()
    }

    fn is_direct(&self) -> bool {
        self.inner.is_direct()
    }

    fn exact_len(&self) -> bool {
        self.inner.exact_len()
    }

    fn remote_health(&self) -> Option<Arc<hscm_durable::device::RemoteHealth>> {
        self.inner.remote_health()
    }

    fn mirror_status(&self) -> Option<hscm_durable::mirror::MirrorStatus> {
        self.inner.mirror_status()
    }
}

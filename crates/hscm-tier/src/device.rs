//! A device (home or the fast tier) with its writes numbered, so the volume knows
//! which of them a completed sync covers: a replaced fast-tier slot may be reused only
//! once the write that replaced it is durable, and the group commit syncs a device only
//! when it has writes no sync has covered.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use hscm_durable::device::Backend;
use parking_lot::{Mutex, MutexGuard};

pub(crate) struct Device {
    pub(crate) dev: Arc<dyn Backend>,
    /// Writes completed (each gets the next number when it returns).
    written: AtomicU64,
    /// Every write numbered at or below this is durable.
    synced: AtomicU64,
    syncs: AtomicU64,
    /// Held across each data write, so that writes reach the device in the order they
    /// took it: the background write-back takes it before it lets go of the volume's
    /// lock, so a block it copied can never land after a newer copy written under it.
    order: Mutex<()>,
}

/// The device reserved for the next write ([`Device::reserve`]).
pub(crate) struct Reserved<'a> {
    device: &'a Device,
    _order: MutexGuard<'a, ()>,
}

impl Reserved<'_> {
    pub(crate) fn write_at(&self, offset: u64, buf: &[u8]) -> std::io::Result<u64> {
        self.device.write_unordered(offset, buf)
    }
}

impl Device {
    pub(crate) fn new(dev: Arc<dyn Backend>) -> Device {
        Device {
            dev,
            written: AtomicU64::new(0),
            synced: AtomicU64::new(0),
            syncs: AtomicU64::new(0),
            order: Mutex::new(()),
        }
    }

    pub(crate) fn describe(&self) -> String {
        self.dev.describe()
    }

    pub(crate) fn read_at(&self, offset: u64, buf: &mut [u8]) -> std::io::Result<()> {
        self.dev.read_at(offset, buf)
    }

    /// Writes and returns the write's number (durable once [`Device::is_durable`]).
    pub(crate) fn write_at(&self, offset: u64, buf: &[u8]) -> std::io::Result<u64> {
        self.reserve().write_at(offset, buf)
    }

    /// Takes the device's turn for a write: writes taken later wait for it.
    pub(crate) fn reserve(&self) -> Reserved<'_> {
        Reserved {
            device: self,
            _order: self.order.lock(),
        }
    }

    fn write_unordered(&self, offset: u64, buf: &[u8]) -> std::io::Result<u64> {
        self.dev.write_at(offset, buf)?;
        Ok(self.written.fetch_add(1, Ordering::SeqCst) + 1)
    }

    /// Syncs if any completed write is not covered yet.
    pub(crate) fn sync(&self) -> std::io::Result<()> {
        let upto = self.written.load(Ordering::SeqCst);
        if upto <= self.synced.load(Ordering::SeqCst) {
            return Ok(());
        }
        self.syncs.fetch_add(1, Ordering::Relaxed);
        self.dev.sync()?;
        self.synced.fetch_max(upto, Ordering::SeqCst);
        Ok(())
    }

    /// Every write numbered at or below this is durable (it only grows).
    pub(crate) fn synced_upto(&self) -> u64 {
        self.synced.load(Ordering::SeqCst)
    }

    pub(crate) fn is_durable(&self, write: u64) -> bool {
        self.synced.load(Ordering::SeqCst) >= write
    }

    pub(crate) fn syncs(&self) -> u64 {
        self.syncs.load(Ordering::Relaxed)
    }
}

//! Test tools: a backend that models a device with a volatile write cache and lets a
//! test inject errors and cut the power. Public so that every crate's tests (and the
//! CLI's fault drills) use the same model. The bytes and what a power cut leaves of
//! them are `hscm_durable::testing::CrashImage`, the model the key-value store's
//! power-cut tests use too.

use std::io;
use std::sync::Arc;

use parking_lot::Mutex;

use hscm_durable::testing::{Countdown, CrashImage};

use crate::backend::Backend;

pub mod volume_ops;

/// An in-memory device with a "live" image (what reads see) and a "durable" image
/// (what survives a power cut: only what a sync covered).
#[derive(Clone)]
pub struct FaultyBackend {
    inner: Arc<Mutex<Device>>,
    name: Arc<str>,
}

struct Device {
    image: CrashImage,
    faults: Countdown,
    sync_latency: std::time::Duration,
    read_latency: std::time::Duration,
    write_latency: std::time::Duration,
    /// Writes between their start and their landing, now and at the most.
    writes_in_flight: u64,
    most_writes_in_flight: u64,
    /// The next sync panics (a bug in a background thread, simulated).
    panic_on_sync: bool,
    powered: bool,
    /// Says it prefers durable writes of their own (FUA), as a network home does.
    write_through: bool,
}

impl FaultyBackend {
    pub fn new(len: usize, name: &str) -> FaultyBackend {
        Self::from_image(vec![0; len], name)
    }

    fn from_image(image: Vec<u8>, name: &str) -> FaultyBackend {
        FaultyBackend {
            inner: Arc::new(Mutex::new(Device {
                image: CrashImage::new(image),
                faults: Countdown::default(),
                sync_latency: std::time::Duration::ZERO,
                read_latency: std::time::Duration::ZERO,
                write_latency: std::time::Duration::ZERO,
                writes_in_flight: 0,
                most_writes_in_flight: 0,
                panic_on_sync: false,
                powered: true,
                write_through: false,
            })),
            name: name.into(),
        }
    }

    /// The `n`-th write from now (0 = the next) fails with `errno`, as do all after it.
    pub fn fail_write_after(&self, n: u64, errno: i32) {
        self.inner.lock().faults.fail_write_after(n, errno);
    }

    /// The `n`-th sync from now (0 = the next) fails with EIO, as do all after it.
    pub fn fail_sync_after(&self, n: u64) {
        self.inner.lock().faults.fail_sync_after(n);
    }

    /// The next sync panics in whichever thread calls it: a stand-in for a bug in a
    /// background thread, to test that the engine poisons itself rather than leave its
    /// writers waiting.
    pub fn panic_on_next_sync(&self) {
        self.inner.lock().panic_on_sync = true;
    }

    /// From now on the device says it prefers durable writes of their own (FUA,
    /// as an NBD home does), which a power cut keeps whatever else it drops.
    pub fn prefer_write_through(&self) {
        self.inner.lock().write_through = true;
    }

    /// Every sync takes this long (outside the device lock), as a real flush does.
    pub fn set_sync_latency(&self, latency: std::time::Duration) {
        self.inner.lock().sync_latency = latency;
    }

    /// Every read takes this long (outside the device lock), as a disk's seek does.
    pub fn set_read_latency(&self, latency: std::time::Duration) {
        self.inner.lock().read_latency = latency;
    }

    /// Every write (plain or durable) takes this long before it lands, outside the
    /// device lock, as a network round trip does: writes overlap meanwhile.
    pub fn set_write_latency(&self, latency: std::time::Duration) {
        self.inner.lock().write_latency = latency;
    }

    /// The most writes that were under way at once (see `set_write_latency`).
    pub fn most_writes_in_flight(&self) -> u64 {
        self.inner.lock().most_writes_in_flight
    }

    /// Waits out the write latency, counting the write as under way meanwhile.
    fn write_delay(&self) {
        let latency = {
            let mut d = self.inner.lock();
            d.writes_in_flight += 1;
            d.most_writes_in_flight = d.most_writes_in_flight.max(d.writes_in_flight);
            d.write_latency
        };
        if !latency.is_zero() {
            std::thread::sleep(latency);
        }
        self.inner.lock().writes_in_flight -= 1;
    }

    /// A write after its latency, plain or `durable` (one a power cut keeps), with
    /// the injected faults and a powered-off device answered as a device would.
    fn land(&self, offset: u64, buf: &[u8], durable: bool) -> io::Result<()> {
        self.write_delay();
        let mut d = self.inner.lock();
        if !d.powered {
            return Err(powered_off());
        }
        d.faults.write()?;
        let off = check_bounds(d.image.live().len(), offset, buf.len())?;
        if durable {
            d.image.write_durable(off, buf);
        } else {
            d.image.write(off, buf);
        }
        Ok(())
    }

    /// Cuts the power: this device answers EIO from now on, and the returned one
    /// holds what a restart would find — the durable image plus a random subset of
    /// the unsynced writes, each kept whole or torn at a 512-byte boundary.
    pub fn power_cut(&self, seed: u64) -> FaultyBackend {
        let mut d = self.inner.lock();
        d.powered = false;
        FaultyBackend::from_image(d.image.after_power_cut(seed), &self.name)
    }

    /// A copy of what reads currently see.
    pub fn live_image(&self) -> Vec<u8> {
        self.inner.lock().image.live().to_vec()
    }

    pub fn sync_count(&self) -> u64 {
        self.inner.lock().faults.syncs()
    }

    pub fn write_count(&self) -> u64 {
        self.inner.lock().faults.writes()
    }
}

fn check_bounds(len: usize, offset: u64, n: usize) -> io::Result<usize> {
    let off = usize::try_from(offset).map_err(|_| io::Error::from_raw_os_error(libc_einval()))?;
    if off.checked_add(n).is_none_or(|end| end > len) {
        return Err(io::Error::new(
            io::ErrorKind::UnexpectedEof,
            "past the end of the device",
        ));
    }
    Ok(off)
}

fn libc_einval() -> i32 {
    rustix::io::Errno::INVAL.raw_os_error()
}

fn powered_off() -> io::Error {
    io::Error::from_raw_os_error(rustix::io::Errno::IO.raw_os_error())
}

impl Backend for FaultyBackend {
    fn len(&self) -> u64 {
        self.inner.lock().image.live().len() as u64
    }

    fn read_at(&self, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        let latency = self.inner.lock().read_latency;
        if !latency.is_zero() {
            std::thread::sleep(latency);
        }
        let d = self.inner.lock();
        if !d.powered {
            return Err(powered_off());
        }
        let live = d.image.live();
        let off = check_bounds(live.len(), offset, buf.len())?;
        buf.copy_from_slice(&live[off..off + buf.len()]);
        Ok(())
    }

    fn write_at(&self, offset: u64, buf: &[u8]) -> io::Result<()> {
        self.land(offset, buf, false)
    }

    fn sync(&self) -> io::Result<()> {
        let latency = self.inner.lock().sync_latency;
        if !latency.is_zero() {
            std::thread::sleep(latency);
        }
        let mut d = self.inner.lock();
        if std::mem::take(&mut d.panic_on_sync) {
            drop(d);
            panic!("injected panic in sync");
        }
        if !d.powered {
            return Err(powered_off());
        }
        // Like Linux after a failed fsync: the unsynced data's fate is unknown, and a
        // retry cannot be trusted. It stays unsynced, so a power cut may drop it.
        d.faults.sync()?;
        d.image.sync();
        Ok(())
    }

    fn prefers_write_through(&self) -> bool {
        self.inner.lock().write_through
    }

    fn write_through_at(&self, offset: u64, buf: &[u8]) -> io::Result<()> {
        self.land(offset, buf, true)
    }

    fn describe(&self) -> String {
        self.name.to_string()
    }
}

/// A self-describing block for crash tests: it names its block number and version and
/// fills the rest from both, so a reader can tell which write it holds, or that it is torn.
pub fn stamped_block(block: u64, version: u64, len: usize) -> Vec<u8> {
    assert!(len >= 16, "a stamped block needs at least 16 bytes");
    let mut b = vec![0u8; len];
    b[..8].copy_from_slice(&block.to_le_bytes());
    b[8..16].copy_from_slice(&version.to_le_bytes());
    for (i, x) in b[16..].iter_mut().enumerate() {
        *x = (block.wrapping_mul(131) ^ version.wrapping_mul(17)).wrapping_add(i as u64) as u8;
    }
    b
}

/// The version a block written by [`stamped_block`] holds, or None if it is torn,
/// never written (zero), or belongs to another block.
pub fn stamped_version(block: u64, bytes: &[u8]) -> Option<u64> {
    let version = u64::from_le_bytes(bytes.get(8..16)?.try_into().ok()?);
    (bytes == stamped_block(block, version, bytes.len()).as_slice()).then_some(version)
}

/// The crash oracle for one stamped block after a restart: it must hold a version no
/// older than the last acknowledged one and no newer than the last attempted one. It
/// may be torn (or still zero) only where a newer write, never acknowledged, was in
/// flight: a device may tear an overwrite that no sync covered.
pub fn check_restarted_block(
    block: u64,
    bytes: &[u8],
    acked: u64,
    attempted: u64,
) -> Result<(), String> {
    match stamped_version(block, bytes) {
        Some(v) if v >= acked && v <= attempted => Ok(()),
        Some(v) => Err(format!(
            "block {block} holds v{v}; acknowledged v{acked}, attempted up to v{attempted}"
        )),
        None if acked == 0 || attempted > acked => Ok(()),
        None => Err(format!(
            "block {block} lost acknowledged v{acked} (torn or missing)"
        )),
    }
}

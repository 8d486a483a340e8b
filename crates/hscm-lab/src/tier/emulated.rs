//! Emulated devices: a real device (usually a file in tmpfs) behind a service-time
//! model, for hardware this machine does not have (a hard disk, a SATA SSD). Every
//! figure measured over one is a model's figure, and says so.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use hscm_volume::Backend;
use serde::Serialize;
use std::sync::Mutex;

/// A device's service times: what each request waits before the real device behind
/// serves it. Assumed figures, named where they come from.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct DeviceModel {
    pub name: &'static str,
    /// Positioning before a request that does not start where the previous one ended
    /// (seek plus rotation on a disk; nothing on flash).
    pub access_us: f64,
    /// Fixed cost of every read and every write (controller, flash read or program).
    pub read_us: f64,
    pub write_us: f64,
    /// Transfer rates, MB/s.
    pub read_mb_s: f64,
    pub write_mb_s: f64,
    /// A cache flush (what a sync waits for).
    pub sync_us: f64,
}

impl DeviceModel {
    /// A 7200 rpm desktop hard disk: 8.5 ms average seek (a typical datasheet figure)
    /// plus half a rotation, 60 s / 7200 / 2 = 4.17 ms, before a request that does not
    /// continue the previous one; 150 MB/s sustained; a cache flush 4.17 ms (half a
    /// rotation to reach the last cached sector).
    pub const HDD: DeviceModel = DeviceModel {
        name: "7200 rpm disk",
        access_us: 12_670.0,
        read_us: 0.0,
        write_us: 0.0,
        read_mb_s: 150.0,
        write_mb_s: 150.0,
        sync_us: 4_170.0,
    };

    /// A consumer SATA SSD at queue depth 1: 90 µs per 4 KiB read (about 11,000 IOPS),
    /// 30 µs to take a write into its cache, 500 MB/s either way (the SATA 3 link), and
    /// 500 µs for a cache flush. The SSD of a hybrid drive (the SSHD of Baek & Park 2020).
    pub const SSD: DeviceModel = DeviceModel {
        name: "SATA SSD",
        access_us: 0.0,
        read_us: 90.0,
        write_us: 30.0,
        read_mb_s: 500.0,
        write_mb_s: 500.0,
        sync_us: 500.0,
    };

    /// The modelled time of one request of `len` bytes.
    pub fn request_us(&self, write: bool, len: usize, sequential: bool) -> f64 {
        let (fixed, rate) = if write {
            (self.write_us, self.write_mb_s)
        } else {
            (self.read_us, self.read_mb_s)
        };
        let position = if sequential { 0.0 } else { self.access_us };
        position + fixed + len as f64 / rate
    }
}

/// Waits `us` microseconds precisely: sleeps the bulk of a long wait, spins the rest
/// (a sleep alone overshoots by tens of microseconds, more than an SSD read).
fn wait_us(us: f64) {
    if us <= 0.0 {
        return;
    }
    let until = Instant::now() + Duration::from_nanos((us * 1e3) as u64);
    if us > 2_000.0 {
        std::thread::sleep(Duration::from_nanos(((us - 1_000.0) * 1e3) as u64));
    }
    while Instant::now() < until {
        std::hint::spin_loop();
    }
}

/// `inner` behind `model`: each request waits its modelled time, then runs.
pub struct EmulatedDevice {
    inner: Arc<dyn Backend>,
    model: DeviceModel,
    /// Where the last request ended (a request starting there is sequential).
    next: Mutex<u64>,
    /// Modelled microseconds spent, in total (×1000, as nanoseconds).
    busy_ns: AtomicU64,
}

impl EmulatedDevice {
    pub fn new(inner: Arc<dyn Backend>, model: DeviceModel) -> EmulatedDevice {
        EmulatedDevice {
            inner,
            model,
            next: Mutex::new(u64::MAX),
            busy_ns: AtomicU64::new(0),
        }
    }

    /// Modelled time spent so far, seconds.
    pub fn busy_s(&self) -> f64 {
        self.busy_ns.load(Ordering::Relaxed) as f64 / 1e9
    }

    fn serve(&self, offset: u64, len: usize, write: bool) {
        let sequential = {
            let mut next = self.next.lock().unwrap_or_else(|e| e.into_inner());
            let s = *next == offset;
            *next = offset + len as u64;
            s
        };
        let us = self.model.request_us(write, len, sequential);
        self.busy_ns.fetch_add((us * 1e3) as u64, Ordering::Relaxed);
        wait_us(us);
    }
}

impl Backend for EmulatedDevice {
    fn len(&self) -> u64 {
        self.inner.len()
    }

    fn read_at(&self, offset: u64, buf: &mut [u8]) -> std::io::Result<()> {
        self.serve(offset, buf.len(), false);
        self.inner.read_at(offset, buf)
    }

    fn write_at(&self, offset: u64, buf: &[u8]) -> std::io::Result<()> {
        self.serve(offset, buf.len(), true);
        self.inner.write_at(offset, buf)
    }

    fn sync(&self) -> std::io::Result<()> {
        self.busy_ns
            .fetch_add((self.model.sync_us * 1e3) as u64, Ordering::Relaxed);
        wait_us(self.model.sync_us);
        self.inner.sync()
    }

    fn describe(&self) -> String {
        format!("{} (emulated {})", self.inner.describe(), self.model.name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_random_disk_read_costs_a_seek_and_a_sequential_one_only_the_transfer() {
        let hdd = DeviceModel::HDD;
        let random = hdd.request_us(false, 4096, false);
        let sequential = hdd.request_us(false, 4096, true);
        assert!((random - 12_697.3).abs() < 1.0, "{random}");
        assert!((sequential - 27.3).abs() < 0.1, "{sequential}");
        let ssd = DeviceModel::SSD;
        assert!((ssd.request_us(false, 4096, false) - 98.2).abs() < 0.1);
    }

    #[test]
    fn an_emulated_device_waits_its_model_and_keeps_the_data() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("d");
        let inner = hscm_volume::FileBackend::create(&path, 1 << 20, false).unwrap();
        let model = DeviceModel {
            name: "test",
            access_us: 1_000.0,
            ..DeviceModel::SSD
        };
        let dev = EmulatedDevice::new(Arc::new(inner), model);
        let data = hscm_volume::AlignedBuf::zeroed(4096);
        let t = Instant::now();
        dev.write_at(8192, &data).unwrap();
        dev.write_at(12288, &data).unwrap();
        let mut back = hscm_volume::AlignedBuf::zeroed(4096);
        dev.read_at(8192, &mut back).unwrap();
        let took = t.elapsed().as_secs_f64() * 1e6;
        // Two positionings (the first write and the read back), one sequential write.
        let modelled = 2_000.0 + 3.0 * 4096.0 / 500.0 + 2.0 * 30.0 + 90.0;
        assert!((dev.busy_s() * 1e6 - modelled).abs() < 1.0);
        assert!(took >= modelled, "{took} < {modelled}");
    }
}

//! hscm-kv: an energy-aware key-value store over several devices (Sprint-AEP, after
//! *Disperse Access Considered Energy Inefficient in Intel Optane DC Persistent Memory
//! Servers*).
//!
//! A hash of the key picks its home device. In [`Mode::Standard`] every request goes
//! home. In the Sprint modes only the *primary* devices serve requests: a primary
//! absorbs the writes meant for the idle devices it covers in durable buffer logs,
//! syncs each log home in one compact burst when it fills, and caches the idle devices'
//! values (on demand, and by prefetching their hottest keys), so idle devices see
//! compact bursts instead of scattered requests. A trial activates another primary
//! when that raises throughput by at least `alpha`.
//!
//! Durability: `put`/`delete` return once the record is on stable storage (fdatasync)
//! in its home log or in a buffer log; opening replays every buffer log home. Caches
//! are volatile copies and are dropped on open. See docs/design.md and docs/format.md.
//!
//! Every file goes through [`hscm_durable::Media`]: a real directory per device
//! ([`KvStore::open`]), or any media ([`KvStore::open_on`]), which is how the power-cut
//! tests run the same code over `hscm_durable::testing::FaultyDisks`.

mod check;
mod device;
mod error;
mod log;
pub mod record;
mod recovery;
mod shadow;
mod sprint;
mod trials;

pub use self::check::{check, CheckReport, CheckedFile};
use self::recovery::{create_device, replay_buffers};

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use hscm_model::Timeline;
use parking_lot::{Condvar, Mutex, RwLock};

use hscm_durable::lock::{self, Hold};
use hscm_durable::{DirMedia, Media, Poison};

use self::device::{Device, DATA_LOG};
use self::record::Kind;
use self::shadow::{Shadow, ShadowCounters};

pub use self::error::{Error, Result};

pub use self::record::{MAX_KEY, MAX_VALUE_LIMIT};

/// How requests reach devices.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Mode {
    /// Every device active; every request goes to its home device.
    Standard,
    /// Primaries absorb idle devices' writes and prefetch their hot data; parallel
    /// sync and prefetch.
    Sprint,
    /// Sprint without prefetching (the cache fills only on demand and from syncs).
    SprintNoPrefetch,
    /// Sprint with single-threaded sync and prefetch.
    SprintNoParallel,
}

impl Mode {
    pub const ALL: [Mode; 4] = [
        Mode::Standard,
        Mode::Sprint,
        Mode::SprintNoPrefetch,
        Mode::SprintNoParallel,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Mode::Standard => "standard",
            Mode::Sprint => "sprint",
            Mode::SprintNoPrefetch => "sprint-nopre",
            Mode::SprintNoParallel => "sprint-noparallel",
        }
    }

    pub fn from_name(name: &str) -> Option<Mode> {
        Mode::ALL.into_iter().find(|m| m.name() == name)
    }

    fn sprint(self) -> bool {
        self != Mode::Standard
    }
    fn prefetch(self) -> bool {
        matches!(self, Mode::Sprint | Mode::SprintNoParallel)
    }
    fn parallel(self) -> bool {
        matches!(self, Mode::Sprint | Mode::SprintNoPrefetch)
    }
}

/// How many primaries Sprint keeps.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Primaries {
    /// Start with as few as cover every idle device, then trial one more at a time.
    Auto,
    Fixed(usize),
}

/// Store parameters; the defaults are the paper's where it gives one.
#[derive(Debug, Clone)]
pub struct KvOptions {
    pub mode: Mode,
    /// Largest value accepted (bytes).
    pub max_value: usize,
    /// Buffer log capacity per idle device (bytes of log, overwritten records included).
    pub buffer_bytes: u64,
    /// A log syncs home when the buffer reaches this share of its capacity (paper: 0.8).
    pub sync_threshold: f64,
    /// Cache capacity per idle device covered (bytes of keys and values).
    pub cache_bytes: u64,
    /// A log sync writes home in runs of at most this many bytes, each synced before
    /// the next. The file system (ext4, data=ordered) makes an fdatasync's journal
    /// commit wait for data of any file whose blocks the same transaction allocated, so
    /// a client's one-record sync that lands behind a 3 MB home append waits for all
    /// of it; runs bound that wait. The burst stays back to back. Not in the paper.
    pub sync_piece: u64,
    /// Idle devices one primary covers at most (paper: M = 3).
    pub max_idle_per_primary: usize,
    /// Largest prefetch as a share of the cache (paper: 1/20).
    pub prefetch_fraction: f64,
    /// Reader threads of a parallel prefetch. (Parallel modes also sync all logs of a
    /// primary at once, one thread per log.)
    pub parallel_threads: usize,
    pub primaries: Primaries,
    /// Length of each throughput measurement in a primary trial (paper: "several
    /// seconds"; shorter by default so short runs settle).
    pub trial_window: Duration,
    /// Keep a new primary when write+read throughput gain reaches this (paper: 0.10).
    pub alpha: f64,
    /// Brackets per trial (k+1 then k again, after a first k window); every one must
    /// show the gain. The paper runs one; two keep noise from waking devices.
    pub trial_rounds: usize,
}

impl Default for KvOptions {
    fn default() -> Self {
        KvOptions {
            mode: Mode::Standard,
            max_value: 1 << 20,
            buffer_bytes: 4 << 20,
            sync_threshold: 0.8,
            sync_piece: 256 << 10,
            cache_bytes: 16 << 20,
            max_idle_per_primary: 3,
            prefetch_fraction: 1.0 / 20.0,
            parallel_threads: 4,
            primaries: Primaries::Auto,
            trial_window: Duration::from_millis(1000),
            alpha: 0.10,
            trial_rounds: 2,
        }
    }
}

/// One primary trial: throughput with `from` primaries against `from + 1`.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Trial {
    pub from: usize,
    pub to: usize,
    pub write_gain: f64,
    pub read_gain: f64,
    pub kept: bool,
}

/// Counters since the store opened.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct KvStats {
    /// Values read from each device on behalf of client requests.
    pub device_reads: Vec<u64>,
    /// Of those, reads of a device while it was idle (Sprint modes).
    pub idle_device_reads: u64,
    pub buffer_hits: u64,
    pub cache_hits: u64,
    pub prefetches: u64,
    pub prefetched_values: u64,
    pub log_syncs: u64,
    pub synced_bytes: u64,
    /// Wall time spent syncing logs (a batch of parallel syncs counts once) and
    /// prefetching.
    pub sync_seconds: f64,
    pub prefetch_seconds: f64,
    pub primaries: Vec<usize>,
    pub trials: Vec<Trial>,
    /// Torn record tails cut when the store opened (unacknowledged writes).
    pub torn_bytes_at_open: u64,
    /// Buffer-log records replayed home when the store opened.
    pub replayed_records: u64,
}

const MANIFEST: &str = "store.json";

#[derive(serde::Serialize, serde::Deserialize)]
struct Manifest {
    format: u32,
    devices: Vec<PathBuf>,
}

impl Manifest {
    fn read(dir: &Path) -> Result<Manifest> {
        let path = dir.join(MANIFEST);
        let text = std::fs::read_to_string(&path)
            .map_err(|e| Error::io(format!("{} (is this an hscm kv store?)", path.display()), e))?;
        let manifest: Manifest = serde_json::from_str(&text)
            .map_err(|e| Error::InvalidArgument(format!("{}: {e}", path.display())))?;
        if manifest.format != 1 || manifest.devices.is_empty() {
            return Err(Error::InvalidArgument(format!(
                "{}: unsupported format {} or no devices",
                path.display(),
                manifest.format
            )));
        }
        Ok(manifest)
    }
}

struct Layout {
    /// For each device: `Some` while it is idle, with what its primary keeps for it.
    shadows: Vec<Option<Arc<Shadow>>>,
    primaries: Vec<usize>,
    next_segment: u64,
}

#[derive(Default)]
struct Work {
    /// Primaries whose logs should sync, with the shadows they held when queued (the
    /// mover never takes the layout lock: writers waiting for buffer space hold it).
    sync: Vec<(usize, Vec<Arc<Shadow>>)>,
    prefetch: Vec<Arc<Shadow>>,
}

struct Inner {
    opts: KvOptions,
    devices: Vec<Device>,
    layout: RwLock<Layout>,
    seq: AtomicU64,
    failure: Arc<Poison>,
    counters: ShadowCounters,
    idle_reads: AtomicU64,
    reads: AtomicU64,
    writes: AtomicU64,
    work: Mutex<Work>,
    work_ready: Condvar,
    shutdown: AtomicBool,
    trials: Mutex<Vec<Trial>>,
    /// No primary trial is running or will run.
    settled: AtomicBool,
    torn_bytes: u64,
    replayed: u64,
    epoch: Instant,
}

/// The store. Cheap to share across threads by reference.
pub struct KvStore {
    inner: Arc<Inner>,
    threads: Vec<JoinHandle<()>>,
    /// Holds the store's lock until the store is dropped (none on media without a
    /// manifest: the caller owns them).
    _owner: Option<std::fs::File>,
}

impl KvStore {
    /// Creates an empty store in `dir` over `devices` device directories (created if
    /// absent; `None`: `dir/dev0..dev{n-1}`).
    pub fn create(dir: &Path, devices: usize, paths: Option<Vec<PathBuf>>) -> Result<()> {
        let paths =
            paths.unwrap_or_else(|| (0..devices).map(|i| format!("dev{i}").into()).collect());
        if paths.is_empty() {
            return Err(Error::InvalidArgument(
                "a store needs at least one device".into(),
            ));
        }
        let manifest = dir.join(MANIFEST);
        if manifest.exists() {
            return Err(Error::InvalidArgument(format!(
                "{} already holds a store",
                dir.display()
            )));
        }
        std::fs::create_dir_all(dir)
            .map_err(|e| Error::io(format!("creating {}", dir.display()), e))?;
        for p in &paths {
            let d = dir.join(p);
            std::fs::create_dir_all(&d)
                .map_err(|e| Error::io(format!("creating {}", d.display()), e))?;
            create_device(&DirMedia::new(d))?;
        }
        let text = serde_json::to_string_pretty(&Manifest {
            format: 1,
            devices: paths,
        })
        .expect("manifest serialises");
        let tmp = dir.join("store.json.tmp");
        std::fs::write(&tmp, text)
            .and_then(|_| std::fs::File::open(&tmp)?.sync_all())
            .and_then(|_| std::fs::rename(&tmp, &manifest))
            .and_then(|_| std::fs::File::open(dir)?.sync_all())
            .map_err(|e| Error::io(format!("writing {}", manifest.display()), e))
    }

    /// Opens a store: indexes every device, replays buffer logs home, drops caches.
    pub fn open(dir: &Path, opts: KvOptions) -> Result<KvStore> {
        let manifest = Manifest::read(dir)?;
        // One owner per store, as per volume (docs/design.md, "One owner"): the lock
        // on the manifest lives as long as the store.
        let manifest_path = dir.join(MANIFEST);
        let owner = std::fs::File::open(&manifest_path)
            .map_err(|e| Error::io(format!("cannot open {}", manifest_path.display()), e))?;
        lock::acquire(&owner, &manifest_path, Hold::Exclusive)?;
        let mut media: Vec<Arc<dyn Media>> = Vec::new();
        for p in &manifest.devices {
            let d = dir.join(p);
            if !d.is_dir() {
                return Err(Error::MissingDevice {
                    path: d.display().to_string(),
                    reason: "no such directory".into(),
                });
            }
            media.push(Arc::new(DirMedia::new(d)));
        }
        let mut store = KvStore::open_on(media, opts)?;
        store._owner = Some(owner);
        Ok(store)
    }

    /// Lays out an empty store on `media`, one per device (no manifest: the caller
    /// keeps track of them).
    pub fn create_on(media: &[Arc<dyn Media>]) -> Result<()> {
        if media.is_empty() {
            return Err(Error::InvalidArgument(
                "a store needs at least one device".into(),
            ));
        }
        for m in media {
            create_device(m.as_ref())?;
        }
        Ok(())
    }

    /// Opens a store on `media`, one per device, in the order they were created:
    /// indexes every device, replays buffer logs home, drops caches. The caller makes
    /// sure nobody else has them open.
    pub fn open_on(media: Vec<Arc<dyn Media>>, opts: KvOptions) -> Result<KvStore> {
        if opts.max_value > MAX_VALUE_LIMIT {
            return Err(Error::InvalidArgument(format!(
                "max_value {} is over the format's limit of {MAX_VALUE_LIMIT}",
                opts.max_value
            )));
        }
        if opts.max_idle_per_primary == 0 || !(0.0..=1.0).contains(&opts.sync_threshold) {
            return Err(Error::InvalidArgument(
                "max_idle_per_primary must be >= 1 and sync_threshold within 0..=1".into(),
            ));
        }
        if media.is_empty() {
            return Err(Error::InvalidArgument(
                "a store needs at least one device".into(),
            ));
        }
        let epoch = Instant::now();
        let failure = Arc::new(Poison::default());
        let mut devices = Vec::new();
        let mut max_seq = 0;
        let mut torn_bytes = 0;
        for (i, m) in media.into_iter().enumerate() {
            let opened = Device::open(i, m, epoch, failure.clone())?;
            max_seq = max_seq.max(opened.max_seq);
            torn_bytes += opened.torn_bytes;
            devices.push(opened.device);
        }
        let (replayed, replay_max_seq) = replay_buffers(&devices, opts.sync_piece)?;
        max_seq = max_seq.max(replay_max_seq);
        let n = devices.len();
        let inner = Arc::new(Inner {
            layout: RwLock::new(Layout {
                shadows: (0..n).map(|_| None).collect(),
                primaries: (0..n).collect(),
                next_segment: 1,
            }),
            opts,
            devices,
            seq: AtomicU64::new(max_seq + 1),
            failure,
            counters: ShadowCounters::default(),
            idle_reads: AtomicU64::new(0),
            reads: AtomicU64::new(0),
            writes: AtomicU64::new(0),
            work: Mutex::new(Work::default()),
            work_ready: Condvar::new(),
            shutdown: AtomicBool::new(false),
            trials: Mutex::new(Vec::new()),
            settled: AtomicBool::new(true),
            torn_bytes,
            replayed,
            epoch,
        });
        let mut threads = Vec::new();
        if inner.opts.mode.sprint() && n > 1 {
            let m = inner.opts.max_idle_per_primary;
            let first = match inner.opts.primaries {
                Primaries::Auto => n.div_ceil(m + 1),
                Primaries::Fixed(k) => k.clamp(n.div_ceil(m + 1), n),
            };
            inner.relayout(first)?;
            let bg = inner.clone();
            threads.push(
                std::thread::Builder::new()
                    .name("kv-mover".into())
                    .spawn(move || bg.guarded("sync", || bg.mover()))
                    .map_err(|e| Error::io("starting the sync thread", e))?,
            );
            if inner.opts.primaries == Primaries::Auto {
                inner.settled.store(false, Ordering::SeqCst);
                let bg = inner.clone();
                threads.push(
                    std::thread::Builder::new()
                        .name("kv-trials".into())
                        .spawn(move || {
                            bg.guarded("trial", || bg.trials());
                            bg.settled.store(true, Ordering::SeqCst);
                        })
                        .map_err(|e| Error::io("starting the trial thread", e))?,
                );
            }
        }
        Ok(KvStore {
            inner,
            threads,
            _owner: None,
        })
    }

    /// True once primary trials are over (always, unless Sprint with `Auto`).
    pub fn primaries_settled(&self) -> bool {
        self.inner.settled.load(Ordering::SeqCst)
    }

    pub fn devices(&self) -> usize {
        self.inner.devices.len()
    }

    pub fn mode(&self) -> Mode {
        self.inner.opts.mode
    }

    /// The device a key belongs to.
    pub fn home(&self, key: &[u8]) -> usize {
        self.inner.home(key)
    }

    /// Stores `value` under `key`; durable when it returns.
    pub fn put(&self, key: &[u8], value: &[u8]) -> Result<()> {
        self.inner.check(key, Some(value))?;
        self.inner.write(Kind::Put, key, value)
    }

    /// Removes `key` (a no-op for an absent key); durable when it returns.
    pub fn delete(&self, key: &[u8]) -> Result<()> {
        self.inner.check(key, None)?;
        self.inner.write(Kind::Delete, key, &[])
    }

    pub fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        self.inner.check(key, None)?;
        self.inner.get(key)
    }

    /// Writes many pairs straight to their home devices, one write and one sync per
    /// device (bulk load). Durable when it returns.
    pub fn load<'a>(&self, items: impl IntoIterator<Item = (&'a [u8], &'a [u8])>) -> Result<()> {
        let inner = &self.inner;
        let layout = inner.layout.write();
        // Buffered writes must reach home first, or the loaded values would be older
        // than what the buffers hold and lose to them.
        for s in layout.shadows.iter().flatten() {
            inner.sync_shadow(s)?;
        }
        let mut batches = vec![Vec::new(); inner.devices.len()];
        for (key, value) in items {
            inner.check(key, Some(value))?;
            let seq = inner.seq.fetch_add(1, Ordering::Relaxed);
            record::encode(&mut batches[inner.home(key)], seq, Kind::Put, key, value);
        }
        for (dev, batch) in inner.devices.iter().zip(batches) {
            if let Err(e) = dev.append_records(&batch, inner.opts.sync_piece) {
                return Err(inner.fail(e));
            }
        }
        // Cached copies of loaded keys are stale now.
        for s in layout.shadows.iter().flatten() {
            let mut st = s.state.lock();
            st.cache.clear();
            st.cache_bytes = 0;
            st.crl.clear();
        }
        Ok(())
    }

    /// Syncs every buffer log home (what a clean close does).
    pub fn sync_all(&self) -> Result<()> {
        let layout = self.inner.layout.read();
        for s in layout.shadows.iter().flatten() {
            self.inner.sync_shadow(s)?;
        }
        Ok(())
    }

    pub fn stats(&self) -> KvStats {
        let inner = &self.inner;
        let c = &inner.counters;
        KvStats {
            device_reads: inner
                .devices
                .iter()
                .map(|d| d.demand_reads.load(Ordering::Relaxed))
                .collect(),
            idle_device_reads: inner.idle_reads.load(Ordering::Relaxed),
            buffer_hits: c.buffer_hits.load(Ordering::Relaxed),
            cache_hits: c.cache_hits.load(Ordering::Relaxed),
            prefetches: c.prefetches.load(Ordering::Relaxed),
            prefetched_values: c.prefetched_values.load(Ordering::Relaxed),
            log_syncs: c.log_syncs.load(Ordering::Relaxed),
            synced_bytes: c.synced_bytes.load(Ordering::Relaxed),
            sync_seconds: c.sync_ns.load(Ordering::Relaxed) as f64 * 1e-9,
            prefetch_seconds: c.prefetch_ns.load(Ordering::Relaxed) as f64 * 1e-9,
            primaries: inner.layout.read().primaries.clone(),
            trials: inner.trials.lock().clone(),
            torn_bytes_at_open: inner.torn_bytes,
            replayed_records: inner.replayed,
        }
    }

    /// Nanoseconds since the store opened, on the clock of [`Self::timelines`].
    pub fn now_ns(&self) -> u64 {
        self.inner.epoch.elapsed().as_nanos() as u64
    }

    /// Each device's busy intervals so far.
    pub fn timelines(&self) -> Vec<Timeline> {
        self.inner
            .devices
            .iter()
            .map(|d| Timeline::from_intervals(d.disk.activity.spans()))
            .collect()
    }

    /// Stops background work, syncs every buffer log home and saves access counts.
    pub fn close(mut self) -> Result<()> {
        self.stop();
        self.sync_all()?;
        let layout = self.inner.layout.read();
        for s in layout.shadows.iter().flatten() {
            s.drop_cache(&self.inner.devices[s.primary]);
        }
        for d in &self.inner.devices {
            d.save_hotness()?;
        }
        Ok(())
    }

    fn stop(&mut self) {
        self.inner.shutdown.store(true, Ordering::SeqCst);
        {
            let _w = self.inner.work.lock();
            self.inner.work_ready.notify_all();
        }
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

impl Drop for KvStore {
    fn drop(&mut self) {
        self.stop();
    }
}

impl Inner {
    fn home(&self, key: &[u8]) -> usize {
        (crc32c::crc32c(key) as usize) % self.devices.len()
    }

    fn check(&self, key: &[u8], value: Option<&[u8]>) -> Result<()> {
        if key.is_empty() || key.len() > MAX_KEY {
            return Err(Error::BadKey {
                len: key.len(),
                max: MAX_KEY,
            });
        }
        if let Some(v) = value {
            if v.len() > self.opts.max_value {
                return Err(Error::ValueTooLarge {
                    len: v.len(),
                    max: self.opts.max_value,
                });
            }
        }
        Ok(())
    }

    /// Poisons the store after a failed write or sync: writes are refused from then on.
    fn fail(&self, e: Error) -> Error {
        let errno = match &e {
            Error::Io { source, .. } => source.raw_os_error(),
            _ => None,
        };
        self.failure.set(e.to_string(), errno);
        e
    }

    /// Runs a background thread's body; a panic there poisons the store.
    fn guarded(&self, thread: &str, body: impl FnOnce()) {
        if self.failure.guard(thread, body) {
            tracing::error!("the key-value store's {thread} thread panicked; writes are refused");
        }
    }

    fn write(&self, kind: Kind, key: &[u8], value: &[u8]) -> Result<()> {
        self.failure.check()?;
        let home = self.home(key);
        let layout = self.layout.read();
        self.writes.fetch_add(1, Ordering::Relaxed);
        self.devices[home].touch(key);
        let result = match &layout.shadows[home] {
            None => self.devices[home]
                .put(&self.seq, kind, key, value)
                .map(|_| ()),
            Some(s) => {
                let full = s.put(&self.seq, kind, key, value, self.opts.sync_threshold);
                if let Ok(true) = full {
                    self.queue_sync(&layout, s.primary);
                }
                full.map(|_| ())
            }
        };
        result.map_err(|e| self.fail(e))
    }

    fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        let home = self.home(key);
        let dev = &self.devices[home];
        let layout = self.layout.read();
        self.reads.fetch_add(1, Ordering::Relaxed);
        let (hot, loc) = dev.touch(key);
        let Some(s) = &layout.shadows[home] else {
            return loc.map(|l| dev.read(l)).transpose();
        };
        if let Some(found) = s.lookup(key, hot, &self.counters)? {
            return Ok(found);
        }
        // A primary miss: read the idle device, cache the value, and prefetch. Locate
        // again: a sync may have brought a newer value home since the touch.
        let Some(loc) = dev.locate(key) else {
            return Ok(None);
        };
        let value = dev.read(loc)?;
        self.idle_reads.fetch_add(1, Ordering::Relaxed);
        s.cache_insert(dev, vec![(key.into(), value.clone(), loc.seq, hot.max(1))])
            .map_err(|e| self.fail(e))?;
        if self.opts.mode.prefetch() && !s.prefetch_queued.swap(true, Ordering::AcqRel) {
            self.work.lock().prefetch.push(s.clone());
            self.work_ready.notify_one();
        }
        Ok(Some(value))
    }
}

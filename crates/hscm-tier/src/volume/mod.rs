//! The tiered volume: blocks live on the home device; the hot ones also in DRAM and,
//! with a fast tier, on a durable fast device between the two.
//!
//! Write-through: a write reaches home (a whole block per touched block, from an
//! aligned buffer) and is durable before it is acknowledged (group commit: concurrent
//! writers share syncs), so home always holds every acknowledged write. Write-back
//! (fast tier only): a write is durable on the fast tier instead, and a background
//! thread copies dirty blocks home in block order (`fast`'s module comment has the
//! rules). DRAM only ever holds a copy of the authoritative version: the fast tier's
//! when it is dirty there, home's otherwise. After a restart DRAM is refilled
//! hottest-first from the saved hot list.
//!
//! One lock guards the tiers and orders requests that change them; device I/O for
//! misses happens under it, so misses and writes are served one at a time (syncs
//! excepted). That keeps every request's view exact (a read sees each block before or
//! after a concurrent write, never half of it) at the cost of overlap between misses.
//! Two paths run outside it: DRAM hits (`dram::index`: the policy hears of them, in
//! order, when the lock is next taken) and the fast tier's write-back to home
//! (`writeback`).

mod io;
mod writeback;

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use hscm_durable::device::{AlignedBuf, Backend};
use hscm_durable::{home, GroupCommit, Poison};
use parking_lot::Mutex;

use crate::device::Device;
use crate::dram::{Dram, DramIndex, HitRead, TierStats};
use crate::fast::{FastTier, Recovery};
use crate::header::{TierConfig, WriteMode, HEADER_LEN};
use crate::snapshot::Counters;
use crate::{Error, Result};

/// The tier below DRAM.
struct Lower {
    /// None without a fast tier, or after it failed and the volume went pass-through.
    fast: Option<FastTier>,
    /// Why the fast tier is out of service, if it is.
    failure: Option<String>,
}

struct Inner {
    dram: Dram,
    lower: Lower,
    counters: Counters,
    /// One block, for writes that bypass DRAM.
    scratch: AlignedBuf,
    /// Runs of blocks that reads bypassing DRAM fetch in one request (1 MiB or a block).
    bulk: AlignedBuf,
}

impl Inner {
    /// Tells the policy of the reads the hit path served since, in their order: a batch
    /// at a time, each batch's policy entries fetched before any is used, so their
    /// cache misses overlap.
    fn apply_logged_hits(&mut self) {
        const BATCH: usize = 32;
        let mut batch = [None; BATCH];
        loop {
            let mut n = 0;
            while n < BATCH {
                let Some(hit) = self.dram.index().next_logged() else {
                    break;
                };
                self.dram.prefetch_hit(&hit);
                batch[n] = Some(hit);
                n += 1;
            }
            for hit in batch[..n].iter_mut().filter_map(Option::take) {
                self.record_hit(hit);
            }
            if n < BATCH {
                return;
            }
        }
    }

    fn record_hit(&mut self, hit: HitRead) {
        let blocks = self.dram.record_hit_read(hit);
        self.counters.count_request(blocks, blocks);
    }
}

/// What the volume's threads share.
struct Shared {
    cfg: TierConfig,
    /// DRAM's slots as the hit path reads them, without `inner`'s lock.
    dram_index: Arc<DramIndex>,
    home: Arc<Device>,
    /// The fast device, while it serves (the group commit syncs it in write-back mode).
    fast_dev: Option<Arc<Device>>,
    fast_active: AtomicBool,
    inner: Mutex<Inner>,
    /// The newest home write a request made (a [`Device`] write number): what a
    /// request's sync must cover on home in write-back mode.
    request_home_writes: AtomicU64,
    /// Write-back passes take turns (the background one and `write_back_all`).
    write_back_turn: Mutex<()>,
    stop: AtomicBool,
    poison: Poison,
}

pub struct TieredVolume {
    shared: Arc<Shared>,
    /// The background loader refilling DRAM from the saved hot list.
    loader: Option<std::thread::JoinHandle<()>>,
    /// The background write-back (write-back mode only).
    flusher: Option<std::thread::JoinHandle<()>>,
    /// Tells the policy of logged DRAM hits in the background.
    hits: Option<std::thread::JoinHandle<()>>,
    commit: GroupCommit,
    /// Writes that reached their device (tickets for the group commit).
    issued: AtomicU64,
    /// The lifetime counters saved before this session (see `snapshot`).
    base: Counters,
    recovery: Option<Recovery>,
    opened: std::time::Instant,
}

/// The warm-up: fills the restored blocks' slots, hottest first, one block per lock
/// hold so requests interleave. A request may fill one first; then it is skipped. A
/// read error leaves the slot for a request to fill (and report).
fn warm(shared: &Shared, hot: &[u64]) {
    for &block in hot {
        if shared.stop.load(Ordering::Relaxed) {
            return;
        }
        let mut guard = shared.inner.lock();
        let inner = &mut *guard;
        if inner.dram.unfilled(block).is_none() {
            continue;
        }
        let Inner {
            dram,
            lower,
            counters,
            ..
        } = inner;
        let buf = dram.unfilled_mut(block).expect("the slot is not filled");
        let from_fast = match &lower.fast {
            Some(f) => f.peek(block, buf).unwrap_or(false),
            None => false,
        };
        let ok = from_fast || {
            counters.home_reads += 1;
            shared
                .home
                .read_at(shared.cfg.home_offset(block), buf)
                .is_ok()
        };
        if ok {
            dram.set_filled(block);
            dram.stats.warmed += 1;
        }
    }
}

/// Applies the hit log in the background, on a CPU the hitting threads leave idle: the
/// policy's work for a hit (about a fifth of a flat read's cost with LRU) then runs
/// beside the hit path rather than on it. When as many threads are hitting as there
/// are CPUs (as many stripes of the log hold reads), it stays out of their way: each
/// applies its own share when its stripe fills, in its own cache, which costs the CPUs
/// less than handing every entry to another core. A request that takes the lock
/// applies the log first anyway. Wakes every millisecond while hits arrive, backing
/// off to 20 ms when none did.
fn apply_hits_loop(shared: &Shared) {
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    let (busy, idle) = (
        std::time::Duration::from_millis(1),
        std::time::Duration::from_millis(20),
    );
    let mut wait = busy;
    loop {
        std::thread::park_timeout(wait);
        if shared.stop.load(Ordering::Relaxed) {
            return;
        }
        let hitting = shared.dram_index.busy_stripes();
        if hitting == 0 {
            wait = (wait * 2).min(idle);
            continue;
        }
        wait = busy;
        if hitting < cpus {
            drop(shared.lock());
        }
    }
}

/// The background write-back: every 50 ms, writes back what the fast tier's marks ask
/// for. A failure is handled as a request's would be.
fn write_back_loop(shared: &Shared) {
    loop {
        // Woken early by a close.
        std::thread::park_timeout(std::time::Duration::from_millis(50));
        if shared.stop.load(Ordering::Relaxed) {
            return;
        }
        if shared.poison.get().is_some() {
            continue;
        }
        // A failure was handled inside (the tier out of service, or writes refused).
        let _ = shared.write_back_pass(false);
        if !shared.fast_active.load(Ordering::SeqCst) {
            return;
        }
    }
}

fn read_header(home: &dyn Backend) -> Result<(TierConfig, String)> {
    let h = crate::header::read_region(home, 0, HEADER_LEN as usize)
        .map_err(|e| Error::io(format!("cannot read the header of {}", home.describe()), e))?;
    let cfg = TierConfig::decode(&h, &home.describe())?;
    Ok((cfg, crate::header::read_fast_path(&h)))
}

/// Where the fast device named `named` in home's header is: relative to home's
/// directory unless absolute (and absolute beside a home on the network).
fn resolve_fast_path(home: &Path, named: &str) -> Result<PathBuf> {
    let p = Path::new(named);
    if p.is_absolute() {
        Ok(p.to_path_buf())
    } else if home::is_remote(home) {
        Err(Error::Config(format!(
            "the fast tier's path {named} is relative; with a home on the network ({}) it must be absolute",
            home.display()
        )))
    } else {
        Ok(home.parent().unwrap_or(Path::new(".")).join(p))
    }
}

impl TieredVolume {
    /// Formats `path` (a new file, or with `overwrite` an existing one) as a tiered
    /// volume without a fast tier and syncs it. Home holds a 4 KiB header, then the
    /// data, zero.
    pub fn create(path: &Path, cfg: &TierConfig, overwrite: bool) -> Result<()> {
        if cfg.fast.is_some() {
            return Err(Error::Config(
                "a volume with a fast tier is created with create_with_fast (it needs the fast device's path)".into(),
            ));
        }
        cfg.validate()?;
        let home = home::create(path, cfg.home_len(), overwrite)?;
        Self::format(home.as_ref(), cfg)
    }

    /// Formats `path` as home and `fast_path` (a file, created, or a device) as its
    /// fast tier; the header records `fast_path` as given (relative to home's
    /// directory unless absolute).
    pub fn create_with_fast(
        path: &Path,
        cfg: &TierConfig,
        fast_path: &Path,
        overwrite: bool,
    ) -> Result<()> {
        cfg.validate()?;
        let fast_cfg = cfg
            .fast
            .ok_or_else(|| Error::Config("the configuration has no fast tier".into()))?;
        let named = fast_path.to_string_lossy().into_owned();
        if named.len() > crate::header::MAX_FAST_PATH {
            return Err(Error::Config(format!(
                "the fast tier's path is {} bytes; the header holds {}",
                named.len(),
                crate::header::MAX_FAST_PATH
            )));
        }
        let fast_at = resolve_fast_path(path, &named)?;
        let home = home::create(path, cfg.home_len(), overwrite)?;
        let fast = home::create(&fast_at, fast_cfg.device_len(cfg.block), overwrite)?;
        Self::format_with(home.as_ref(), Some(fast.as_ref()), cfg, &named)
    }

    /// Writes the header of a new volume without a fast tier onto `home` and syncs it.
    pub fn format(home: &dyn Backend, cfg: &TierConfig) -> Result<()> {
        Self::format_with(home, None, cfg, "")
    }

    /// Formats `home` and, if the configuration has one, `fast` (named `fast_path` in
    /// home's header), and syncs both.
    pub fn format_with(
        home: &dyn Backend,
        fast: Option<&dyn Backend>,
        cfg: &TierConfig,
        fast_path: &str,
    ) -> Result<()> {
        cfg.validate()?;
        if home.len() < cfg.home_len() {
            return Err(Error::Config(format!(
                "{} holds {} bytes; a {}-byte volume with {} of DRAM needs {}",
                home.describe(),
                home.len(),
                cfg.size,
                cfg.ram,
                cfg.home_len()
            )));
        }
        match (cfg.fast, fast) {
            (Some(f), Some(dev)) => {
                let layout = f.layout(cfg.block);
                if dev.len() < layout.device_len() {
                    return Err(Error::Config(format!(
                        "{} holds {} bytes; a {}-byte fast tier of {}-byte blocks needs {}",
                        dev.describe(),
                        dev.len(),
                        f.size,
                        cfg.block,
                        layout.device_len()
                    )));
                }
                crate::fast::format(dev, &layout).map_err(|e| {
                    Error::io(format!("cannot format the fast tier {}", dev.describe()), e)
                })?;
            }
            (Some(_), None) => {
                return Err(Error::Config("the fast tier's device is missing".into()))
            }
            (None, _) => {}
        }
        let what = || format!("cannot write the header of {}", home.describe());
        crate::header::write_region(home, 0, &cfg.encode(fast_path))
            .map_err(|e| Error::io(what(), e))?;
        crate::hotlist::save(home, cfg, &[]).map_err(|e| Error::io(what(), e))?;
        home.sync().map_err(|e| Error::io(what(), e))?;
        Ok(())
    }

    /// Opens the tiered volume at `path` (and its fast tier, where the header names
    /// it) for reading and writing.
    pub fn open(path: &Path) -> Result<TieredVolume> {
        let home: Arc<dyn Backend> = Arc::from(home::open(path, true)?);
        let (cfg, named) = read_header(home.as_ref())?;
        let Some(fast_cfg) = cfg.fast else {
            return Self::open_with(home, None);
        };
        let fast_path = resolve_fast_path(path, &named)?;
        match home::open(&fast_path, true) {
            Ok(f) => Self::open_with(home, Some(Arc::from(f))),
            Err(e) if fast_cfg.mode == WriteMode::WriteThrough => {
                // Home holds every acknowledged write: serve without the fast tier.
                let mut vol = Self::open_with(home, None)?;
                vol.set_fast_failure(format!(
                    "the fast tier {} could not be opened ({e}); serving pass-through",
                    fast_path.display()
                ));
                Ok(vol)
            }
            Err(e) => Err(Error::FastTier {
                path: fast_path.display().to_string(),
                why: format!(
                    "cannot open it ({e}); in write-back mode it may hold the only copy of recent writes, so the volume is not opened without it"
                ),
            }),
        }
    }

    /// The configuration written in `path`'s header, without opening the volume or
    /// taking its lock, so it works while another process serves the volume: the header
    /// never changes after creation.
    pub fn inspect(path: &Path) -> Result<TierConfig> {
        Self::inspect_with_fast_path(path).map(|(cfg, _)| cfg)
    }

    /// [`TieredVolume::inspect`], with the fast device's path resolved (if any).
    pub fn inspect_with_fast_path(path: &Path) -> Result<(TierConfig, Option<PathBuf>)> {
        let name = path.display().to_string();
        let home = home::open_for_inspection(path)?;
        let mut h = AlignedBuf::zeroed(HEADER_LEN as usize);
        home.read_at(0, &mut h)
            .map_err(|e| Error::io(format!("cannot read the header of {name}"), e))?;
        let cfg = TierConfig::decode(&h, &name)?;
        let named = crate::header::read_fast_path(&h);
        let fast = cfg
            .fast
            .map(|_| resolve_fast_path(path, &named))
            .transpose()?;
        Ok((cfg, fast))
    }

    /// Opens the volume formatted on `home` (a file, a device, a test backend), without
    /// a fast tier; see [`TieredVolume::open_with`].
    pub fn open_on(home: Arc<dyn Backend>) -> Result<TieredVolume> {
        Self::open_with(home, None)
    }

    /// Opens the volume formatted on `home` with its fast tier on `fast`. It serves at
    /// once: the fast tier's dirty blocks (and after a clean close its clean ones) are
    /// back from its records, the blocks DRAM held at the last clean close are back in
    /// the policy already, and a background thread refills them hottest first. A
    /// volume whose header names a fast tier refuses to open without one in write-back
    /// mode (it may hold the only copy of recent writes).
    pub fn open_with(
        home: Arc<dyn Backend>,
        fast: Option<Arc<dyn Backend>>,
    ) -> Result<TieredVolume> {
        let (cfg, _) = read_header(home.as_ref())?;
        if home.len() < cfg.home_len() {
            return Err(Error::BadHeader {
                path: home.describe(),
                why: format!(
                    "the header asks for {} bytes of data and hot list; the device holds {}",
                    cfg.home_len() - HEADER_LEN,
                    home.len().saturating_sub(HEADER_LEN)
                ),
            });
        }
        let home = Arc::new(Device::new(home));
        let mut recovery = None;
        let fast_tier = match (cfg.fast, fast) {
            (Some(fcfg), Some(dev)) => {
                let expected = fcfg.layout(cfg.block);
                crate::fast::read_layout(dev.as_ref(), &expected).map_err(|why| {
                    Error::FastTier {
                        path: dev.describe(),
                        why,
                    }
                })?;
                let dev = Arc::new(Device::new(dev));
                let (tier, report) = FastTier::open(dev, expected, &fcfg, &home).map_err(
                    |f| match f {
                        crate::fast::Failure::Fast(what, e) | crate::fast::Failure::Home(what, e) => {
                            Error::io(what, e)
                        }
                    },
                )?;
                recovery = Some(report);
                Some(tier)
            }
            (Some(fcfg), None) if fcfg.mode == WriteMode::WriteBack => {
                return Err(Error::FastTier {
                    path: "(not given)".into(),
                    why: "the volume writes back through a fast tier, which may hold the only copy of recent writes; open it with its fast device".into(),
                })
            }
            _ => None,
        };
        let mut dram = Dram::new(&cfg).map_err(|e| {
            Error::io(
                format!("cannot map {} bytes of DRAM for the tier", cfg.ram),
                e,
            )
        })?;
        let hot = crate::hotlist::load(home.dev.as_ref(), &cfg);
        dram.restore(hot.iter().rev().copied());
        let fast_dev = fast_tier.as_ref().map(|f| f.dev.clone());
        let write_back = fast_tier
            .as_ref()
            .is_some_and(|f| f.mode == WriteMode::WriteBack);
        let shared = Arc::new(Shared {
            dram_index: dram.index().clone(),
            fast_active: AtomicBool::new(fast_tier.is_some()),
            fast_dev,
            inner: Mutex::new(Inner {
                dram,
                lower: Lower {
                    fast: fast_tier,
                    failure: None,
                },
                counters: Counters::default(),
                scratch: AlignedBuf::zeroed(cfg.block as usize),
                bulk: AlignedBuf::zeroed((cfg.block as usize).max(1 << 20)),
            }),
            write_back_turn: Mutex::new(()),
            request_home_writes: AtomicU64::new(0),
            cfg,
            home: home.clone(),
            stop: AtomicBool::new(false),
            poison: Poison::default(),
        });
        let loader = (!hot.is_empty()).then(|| {
            let shared = shared.clone();
            std::thread::Builder::new()
                .name("hscm-tier-warm".into())
                .spawn(move || warm(&shared, &hot))
                .expect("spawn the warm-up thread")
        });
        let hits = {
            let shared = shared.clone();
            Some(
                std::thread::Builder::new()
                    .name("hscm-tier-hits".into())
                    .spawn(move || apply_hits_loop(&shared))
                    .expect("spawn the hit log thread"),
            )
        };
        let flusher = write_back.then(|| {
            let shared = shared.clone();
            std::thread::Builder::new()
                .name("hscm-tier-writeback".into())
                .spawn(move || write_back_loop(&shared))
                .expect("spawn the write-back thread")
        });
        let base = crate::snapshot::load(home.dev.as_ref(), &cfg)
            .map(|s| s.lifetime)
            .unwrap_or_default();
        Ok(TieredVolume {
            base,
            shared,
            loader,
            flusher,
            hits,
            commit: GroupCommit::new(0),
            issued: AtomicU64::new(0),
            recovery,
            opened: std::time::Instant::now(),
        })
    }

    fn set_fast_failure(&mut self, why: String) {
        self.shared.inner.lock().lower.failure = Some(why);
    }

    /// Waits until the background loader has refilled DRAM (for tests and benchmarks).
    pub fn wait_warm(&mut self) {
        if let Some(l) = self.loader.take() {
            let _ = l.join();
        }
    }

    /// Flushes, closes the fast tier cleanly (its table written exactly, so the next
    /// open trusts its clean blocks too), saves the counters and the hot list (so the
    /// next open starts warm) and closes. Dirty blocks stay on the fast tier.
    pub fn close(mut self) -> Result<()> {
        self.stop_threads();
        self.flush()?;
        {
            let mut inner = self.shared.inner.lock();
            if let Some(Err(f)) = inner.lower.fast.as_mut().map(|f| f.close()) {
                self.shared.fail(&mut inner.lower, f)?;
            }
        }
        self.save_stats("closed")?;
        let hot = self.hot_list();
        crate::hotlist::save(self.shared.home.dev.as_ref(), &self.shared.cfg, &hot).map_err(|e| {
            Error::io(
                format!(
                    "cannot save the hot list on {}",
                    self.shared.home.describe()
                ),
                e,
            )
        })
    }

    fn stop_threads(&mut self) {
        self.shared.stop.store(true, Ordering::Relaxed);
        for t in [self.loader.take(), self.flusher.take(), self.hits.take()]
            .into_iter()
            .flatten()
        {
            t.thread().unpark();
            let _ = t.join();
        }
    }

    pub fn config(&self) -> &TierConfig {
        &self.shared.cfg
    }

    pub fn size(&self) -> u64 {
        self.shared.cfg.size
    }

    /// What opening the fast tier found (None without one).
    pub fn recovery(&self) -> Option<&Recovery> {
        self.recovery.as_ref()
    }

    /// Writes back every dirty block of the fast tier now (and syncs): a volume in
    /// write-back mode then holds everything on home too.
    pub fn write_back_all(&self) -> Result<u64> {
        self.shared.poison.check()?;
        self.shared.write_back_pass(true)
    }

    /// Blocks whose only durable copy is on the fast tier.
    pub fn dirty_blocks(&self) -> u64 {
        self.shared
            .inner
            .lock()
            .lower
            .fast
            .as_ref()
            .map_or(0, |f| f.dirty_blocks())
    }

    /// Why the fast tier is out of service (None while it serves, or without one).
    pub fn fast_failure(&self) -> Option<String> {
        self.shared.inner.lock().lower.failure.clone()
    }

    /// Returns once every write up to `ticket` is durable.
    fn sync_through(&self, ticket: u64) -> Result<()> {
        let shared = &self.shared;
        self.commit
            .wait(
                ticket,
                &shared.poison,
                || format!("sync of {}", shared.home.describe()),
                || self.issued.load(Ordering::SeqCst),
                || {
                    if let Some(f) = &shared.fast_dev {
                        if shared.fast_active.load(Ordering::SeqCst)
                            && shared
                                .cfg
                                .fast
                                .is_some_and(|c| c.mode == WriteMode::WriteBack)
                        {
                            f.sync()?;
                            // Home's other writes are the write-back's and demotions',
                            // which sync home themselves: a request waits on home only
                            // for what requests wrote there.
                            let wrote = shared.request_home_writes.load(Ordering::SeqCst);
                            if shared.home.is_durable(wrote) {
                                return Ok(());
                            }
                        }
                    }
                    shared.home.sync()
                },
            )
            .map_err(|e| match e {
                hscm_durable::CommitError::Poisoned(f) => Error::Failed(f),
                hscm_durable::CommitError::SyncFailed { reason, source } => {
                    Error::io(reason, source)
                }
                other => Error::io("sync", std::io::Error::other(other.to_string())),
            })
    }

    /// Makes every write completed before the call durable. After a failure it fails
    /// too, even with nothing left to sync: what the failed request left behind may not
    /// be durable, and a flush that succeeded would say it is.
    pub fn flush(&self) -> Result<()> {
        self.shared.poison.check()?;
        // Every dirty record written so far counted in `issued` under the lock, so
        // the sync below covers every sequence number up to `written`.
        let written = {
            let inner = self.shared.inner.lock();
            inner
                .lower
                .fast
                .as_ref()
                .filter(|f| f.mode == WriteMode::WriteBack)
                .map(|f| f.seq())
        };
        let ticket = self.issued.load(Ordering::SeqCst);
        self.sync_through(ticket)?;
        if let Some(seq) = written {
            let mut inner = self.shared.inner.lock();
            let moved = inner.lower.fast.as_mut().map(|f| f.after_flush(seq));
            if let Some(Err(f)) = moved {
                self.shared.fail(&mut inner.lower, f)?;
            }
        }
        Ok(())
    }

    /// This session's counters: requests by outcome, device reads, writes and syncs,
    /// and each tier's.
    pub fn stats(&self) -> Counters {
        let inner = self.shared.lock();
        let c = &inner.counters;
        let mut tiers = vec![TierStats {
            // Every block of a request looks in DRAM: its request counts are the
            // volume's.
            request_hits: c.request_hits,
            request_partial_hits: c.request_partial_hits,
            request_misses: c.request_misses,
            ..inner.dram.snapshot()
        }];
        tiers.extend(inner.lower.fast.as_ref().map(|f| f.snapshot()));
        // Write-back's runs are home writes too.
        let written_back: u64 = tiers.iter().map(|t| t.writeback_runs).sum();
        Counters {
            home_writes: inner.counters.home_writes + written_back,
            tiers,
            syncs: self.shared.home.syncs()
                + self.shared.fast_dev.as_ref().map_or(0, |f| f.syncs()),
            ..inner.counters.clone()
        }
    }

    /// The counters as `hscm volume stats` shows them: this session's, and the volume's
    /// lifetime ones (earlier sessions plus this one).
    pub fn snapshot(&self, state: &str) -> crate::snapshot::Snapshot {
        let session = self.stats();
        let session_s = self.opened.elapsed().as_secs_f64();
        let cfg = &self.shared.cfg;
        let dirty_bytes = self.dirty_blocks() * u64::from(cfg.block);
        crate::snapshot::Snapshot {
            state: state.to_string(),
            pid: std::process::id(),
            saved_at: std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_secs()),
            mode: cfg
                .fast
                .map_or(WriteMode::WriteThrough, |f| f.mode)
                .name()
                .into(),
            dirty_bytes,
            fast_failure: self.fast_failure(),
            session_s,
            writeback_blocks_per_s: session.tiers.iter().map(|t| t.written_back).sum::<u64>()
                as f64
                / session_s.max(1e-9),
            lifetime: self.base.plus(&session),
            session,
        }
    }

    /// Saves the counters on home (not synced: a report, not data), for `hscm volume
    /// stats` to read from another process; `state` is `open` while serving.
    pub fn save_stats(&self, state: &str) -> Result<()> {
        let home = self.shared.home.dev.as_ref();
        crate::snapshot::save(home, &self.shared.cfg, &self.snapshot(state)).map_err(|e| {
            Error::io(
                format!("cannot save the counters on {}", home.describe()),
                e,
            )
        })
    }

    /// Cached blocks, hottest first.
    pub fn hot_list(&self) -> Vec<u64> {
        self.shared.lock().dram.hot_list()
    }

    /// The first failure, once writes are refused.
    pub fn failure(&self) -> Option<hscm_durable::Failure> {
        self.shared.poison.get().cloned()
    }
}

impl Shared {
    /// The volume's lock, with the policy told of every hit served before it.
    fn lock(&self) -> parking_lot::MutexGuard<'_, Inner> {
        let mut inner = self.inner.lock();
        inner.apply_logged_hits();
        inner
    }

    /// Handles a device failure inside a request or the write-back, and returns the
    /// request's error. A failed home refuses writes from then on. A failed fast tier
    /// holding no dirty block is taken out of service (pass-through: home holds
    /// everything); one holding dirty blocks makes the volume refuse writes, naming
    /// blocks it can no longer reach, since home lacks their last versions.
    /// `Ok` when the volume went pass-through: the caller retries on home.
    fn fail(&self, lower: &mut Lower, failure: crate::fast::Failure) -> Result<()> {
        match failure {
            crate::fast::Failure::Home(what, e) => {
                self.poison.set(format!("{what}: {e}"), e.raw_os_error());
                // Reads go on; the fast tier admits nothing more (its policy and map
                // may disagree about the block whose write-back failed).
                if let Some(f) = lower.fast.as_mut() {
                    f.failed = true;
                }
                Err(Error::io(what, e))
            }
            crate::fast::Failure::Fast(what, e) => {
                let dirty = lower.fast.as_ref().map_or(Vec::new(), |f| f.dirty_list());
                if dirty.is_empty() {
                    lower.fast = None;
                    self.fast_active.store(false, Ordering::SeqCst);
                    lower.failure = Some(format!("{what}: {e}; serving pass-through"));
                    Ok(())
                } else {
                    let shown: Vec<String> = dirty.iter().take(8).map(|b| b.to_string()).collect();
                    let reason = format!(
                        "{what}: {e}; it holds the only copy of {} dirty block(s) ({}{}), so the volume is read-only",
                        dirty.len(),
                        shown.join(", "),
                        if dirty.len() > 8 { ", …" } else { "" }
                    );
                    lower.failure = Some(reason.clone());
                    if let Some(f) = lower.fast.as_mut() {
                        f.failed = true;
                    }
                    self.poison.set(reason, e.raw_os_error());
                    Err(Error::io(what, e))
                }
            }
        }
    }
}

impl Drop for TieredVolume {
    fn drop(&mut self) {
        self.stop_threads();
    }
}

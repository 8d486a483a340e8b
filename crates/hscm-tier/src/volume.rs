//! The tiered volume: blocks live on the home device; the hot ones also in DRAM.
//!
//! Write-through: a write reaches home (a whole block per touched block, from an
//! aligned buffer) before the DRAM copy is trusted, and is durable before it is
//! acknowledged (group commit: concurrent writers share syncs), so home always holds
//! every acknowledged write and a crash loses nothing and leaves nothing stale. DRAM is
//! a cache of home: after a restart it is refilled hottest-first from the saved hot list.
//!
//! One lock guards the DRAM tier and orders requests; device I/O for misses happens
//! under it, so requests are served one at a time (syncs excepted). That keeps every
//! request's view exact (a read sees each block before or after a concurrent write,
//! never half of it) at the cost of overlap between misses.

use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use hscm_durable::{GroupCommit, Poison};
use hscm_volume::{AlignedBuf, Backend, Durability, FileBackend};
use parking_lot::Mutex;

use crate::dram::{Dram, Place};
use crate::header::{TierConfig, HEADER_LEN};
use crate::{Error, Result};

use crate::snapshot::Counters;

struct Inner {
    dram: Dram,
    counters: Counters,
    /// One block, for writes that bypass DRAM.
    scratch: AlignedBuf,
    /// Runs of blocks that reads bypassing DRAM fetch in one request (1 MiB or a block).
    bulk: AlignedBuf,
}

pub struct TieredVolume {
    cfg: TierConfig,
    home: Arc<dyn Backend>,
    inner: Arc<Mutex<Inner>>,
    /// The background loader refilling DRAM from the saved hot list, and its stop flag.
    loader: Option<std::thread::JoinHandle<()>>,
    stop: Arc<AtomicBool>,
    commit: GroupCommit,
    /// Writes that reached home (tickets for the group commit).
    issued: AtomicU64,
    syncs: AtomicU64,
    poison: Poison,
    /// The lifetime counters saved before this session (see `snapshot`).
    base: Counters,
}

/// The warm-up: fills the restored blocks' slots from home, hottest first, one block
/// per lock hold so requests interleave. A request may fill one first; then it is
/// skipped. A read error leaves the slot for a request to fill (and report).
fn warm(
    home: &dyn Backend,
    inner: &Mutex<Inner>,
    cfg: &TierConfig,
    hot: &[u64],
    stop: &AtomicBool,
) {
    for &block in hot {
        if stop.load(Ordering::Relaxed) {
            return;
        }
        let mut guard = inner.lock();
        let inner = &mut *guard;
        let Some(slot) = inner.dram.unfilled(block) else {
            continue;
        };
        let at = cfg.home_offset(block);
        if home.read_at(at, inner.dram.slot_mut(slot)).is_ok() {
            inner.dram.set_filled(block);
            inner.dram.stats.warmed += 1;
            inner.counters.home_reads += 1;
        }
    }
}

fn read_header(home: &dyn Backend) -> Result<TierConfig> {
    let h = crate::header::read_region(home, 0, HEADER_LEN as usize)
        .map_err(|e| Error::io(format!("cannot read the header of {}", home.describe()), e))?;
    TierConfig::decode(&h, &home.describe())
}

impl TieredVolume {
    /// Formats `path` (a new file, or with `overwrite` an existing one) as a tiered
    /// volume and syncs it. Home holds a 4 KiB header, then the data, zero.
    pub fn create(path: &Path, cfg: &TierConfig, overwrite: bool) -> Result<()> {
        cfg.validate()?;
        let home = FileBackend::create(path, cfg.home_len(), overwrite)?;
        Self::format(&home, cfg)
    }

    /// Writes the header of a new volume onto `home` and syncs it.
    pub fn format(home: &dyn Backend, cfg: &TierConfig) -> Result<()> {
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
        let what = || format!("cannot write the header of {}", home.describe());
        crate::header::write_region(home, 0, &cfg.encode()).map_err(|e| Error::io(what(), e))?;
        crate::hotlist::save(home, cfg, &[]).map_err(|e| Error::io(what(), e))?;
        home.sync().map_err(|e| Error::io(what(), e))?;
        Ok(())
    }

    /// Opens the tiered volume at `path` for reading and writing.
    pub fn open(path: &Path) -> Result<TieredVolume> {
        let home = FileBackend::open(path, true)?;
        Self::open_on(Arc::new(home))
    }

    /// The configuration written in `path`'s header, without opening the volume or
    /// taking its lock, so it works while another process serves the volume: the header
    /// never changes after creation.
    pub fn inspect(path: &Path) -> Result<TierConfig> {
        use std::os::unix::fs::FileExt;
        let name = path.display().to_string();
        let f =
            std::fs::File::open(path).map_err(|e| Error::io(format!("cannot open {name}"), e))?;
        let mut h = vec![0u8; HEADER_LEN as usize];
        f.read_exact_at(&mut h, 0)
            .map_err(|e| Error::io(format!("cannot read the header of {name}"), e))?;
        TierConfig::decode(&h, &name)
    }

    /// Opens the volume formatted on `home` (a file, a device, a test backend). It
    /// serves at once; the blocks DRAM held at the last clean close are back in the
    /// policy already, and a background thread refills them from home hottest first.
    pub fn open_on(home: Arc<dyn Backend>) -> Result<TieredVolume> {
        let cfg = read_header(home.as_ref())?;
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
        let mut dram = Dram::new(&cfg).map_err(|e| {
            Error::io(
                format!("cannot map {} bytes of DRAM for the tier", cfg.ram),
                e,
            )
        })?;
        let hot = crate::hotlist::load(home.as_ref(), &cfg);
        dram.restore(hot.iter().rev().copied());
        let inner = Arc::new(Mutex::new(Inner {
            dram,
            counters: Counters::default(),
            scratch: AlignedBuf::zeroed(cfg.block as usize),
            bulk: AlignedBuf::zeroed((cfg.block as usize).max(1 << 20)),
        }));
        let stop = Arc::new(AtomicBool::new(false));
        let loader = (!hot.is_empty()).then(|| {
            let (home, inner, stop) = (home.clone(), inner.clone(), stop.clone());
            std::thread::Builder::new()
                .name("hscm-tier-warm".into())
                .spawn(move || warm(home.as_ref(), &inner, &cfg, &hot, &stop))
                .expect("spawn the warm-up thread")
        });
        let base = crate::snapshot::load(home.as_ref(), &cfg)
            .map(|s| s.lifetime)
            .unwrap_or_default();
        Ok(TieredVolume {
            base,
            inner,
            cfg,
            home,
            loader,
            stop,
            commit: GroupCommit::new(0),
            issued: AtomicU64::new(0),
            syncs: AtomicU64::new(0),
            poison: Poison::default(),
        })
    }

    /// Waits until the background loader has refilled DRAM (for tests and benchmarks).
    pub fn wait_warm(&mut self) {
        if let Some(l) = self.loader.take() {
            let _ = l.join();
        }
    }

    /// Flushes, saves the counters and the hot list (so the next open starts warm) and
    /// closes.
    pub fn close(mut self) -> Result<()> {
        self.stop_loader();
        self.flush()?;
        self.save_stats("closed")?;
        let hot = self.hot_list();
        crate::hotlist::save(self.home.as_ref(), &self.cfg, &hot).map_err(|e| {
            Error::io(
                format!("cannot save the hot list on {}", self.home.describe()),
                e,
            )
        })
    }

    fn stop_loader(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(l) = self.loader.take() {
            let _ = l.join();
        }
    }

    pub fn config(&self) -> &TierConfig {
        &self.cfg
    }

    pub fn size(&self) -> u64 {
        self.cfg.size
    }

    fn check(&self, offset: u64, len: u64) -> Result<()> {
        hscm_block::check_range(self.cfg.size, offset, len).map_err(|_| Error::OutOfRange {
            offset,
            len,
            size: self.cfg.size,
        })
    }

    fn home_offset(&self, block: u64) -> u64 {
        self.cfg.home_offset(block)
    }

    /// Hands `[offset, offset + len)` to `sink` block by block, as
    /// `(position within the request, bytes)`.
    pub fn read_with(
        &self,
        offset: u64,
        len: usize,
        sink: &mut dyn FnMut(usize, &[u8]),
    ) -> Result<()> {
        self.check(offset, len as u64)?;
        if len == 0 {
            return Ok(());
        }
        let bs = u64::from(self.cfg.block);
        let mut guard = self.inner.lock();
        let inner = &mut *guard;
        let sequential = inner.dram.sequential(offset, len as u64);
        let (mut hits, mut blocks) = (0, 0);
        // Consecutive bypassed blocks are read from home in one request (a scan that
        // skips DRAM reads at the device's sequential speed): (first block, blocks,
        // first byte of the request they cover).
        let mut run: Option<(u64, u64, u64)> = None;
        let max_run = inner.bulk.len() as u64 / bs;
        let mut at = offset;
        let end = offset + len as u64;
        while at < end {
            let block = at / bs;
            let within = (at % bs) as usize;
            let n = ((bs - at % bs).min(end - at)) as usize;
            let pos = (at - offset) as usize;
            blocks += 1;
            match inner
                .dram
                .place_reading(block, false, sequential, Some((within, n)))
            {
                Place::Slot { slot, fresh } => {
                    if let Some(r) = run.take() {
                        self.read_run(inner, r, at, offset, sink)?;
                    }
                    if fresh {
                        self.fill(&mut inner.counters, &mut inner.dram, slot, block)?;
                    } else {
                        hits += 1;
                    }
                    sink(pos, &inner.dram.slot(slot)[within..within + n]);
                }
                Place::Bypassed => {
                    run = match run {
                        Some((first, count, from)) if count < max_run => {
                            Some((first, count + 1, from))
                        }
                        Some(r) => {
                            self.read_run(inner, r, at, offset, sink)?;
                            Some((block, 1, at))
                        }
                        None => Some((block, 1, at)),
                    };
                }
            }
            at += n as u64;
        }
        if let Some(r) = run {
            self.read_run(inner, r, end, offset, sink)?;
        }
        inner.counters.count_request(hits, blocks);
        Ok(())
    }

    /// Reads a run of bypassed blocks from home in one request and hands the bytes the
    /// request wants, `[from, to)` of the volume, to `sink`.
    fn read_run(
        &self,
        inner: &mut Inner,
        (first, count, from): (u64, u64, u64),
        to: u64,
        offset: u64,
        sink: &mut dyn FnMut(usize, &[u8]),
    ) -> Result<()> {
        let bs = u64::from(self.cfg.block);
        let bytes = (count * bs) as usize;
        inner.counters.home_reads += 1;
        self.home
            .read_at(self.home_offset(first), &mut inner.bulk[..bytes])
            .map_err(|e| self.read_error(first, e))?;
        let skip = (from - first * bs) as usize;
        sink(
            (from - offset) as usize,
            &inner.bulk[skip..skip + (to - from) as usize],
        );
        Ok(())
    }

    /// Reads `buf.len()` bytes at `offset`.
    pub fn read_at(&self, offset: u64, buf: &mut [u8]) -> Result<()> {
        let len = buf.len();
        self.read_with(offset, len, &mut |at, piece| {
            buf[at..at + piece.len()].copy_from_slice(piece)
        })
    }

    /// Fills a just-admitted slot with its block from home.
    fn fill(&self, counters: &mut Counters, dram: &mut Dram, slot: u32, block: u64) -> Result<()> {
        counters.home_reads += 1;
        self.home
            .read_at(self.home_offset(block), dram.slot_mut(slot))
            .map_err(|e| self.read_error(block, e))?;
        dram.set_filled(block);
        Ok(())
    }

    fn read_error(&self, block: u64, e: std::io::Error) -> Error {
        Error::io(
            format!("cannot read block {block} from {}", self.home.describe()),
            e,
        )
    }

    /// Writes `data` at `offset`; durable on return when the volume's durability is
    /// `Immediate` or `fua` is set, else after the next flush.
    pub fn write_at(&self, offset: u64, data: &[u8], fua: bool) -> Result<()> {
        self.write_range(offset, data.len() as u64, fua, &mut |pos, dst| {
            dst.copy_from_slice(&data[pos..pos + dst.len()])
        })
    }

    /// Writes zeroes over `[offset, offset + len)` (also what a discard does).
    pub fn write_zeroes(&self, offset: u64, len: u64, fua: bool) -> Result<()> {
        self.write_range(offset, len, fua, &mut |_, dst| dst.fill(0))
    }

    /// The write path: `fill(position in the request, destination)` supplies the bytes.
    fn write_range(
        &self,
        offset: u64,
        len: u64,
        fua: bool,
        fill: &mut dyn FnMut(usize, &mut [u8]),
    ) -> Result<()> {
        self.check(offset, len)?;
        self.poison.check()?;
        if len == 0 {
            return Ok(());
        }
        let bs = u64::from(self.cfg.block);
        let ticket;
        {
            let mut guard = self.inner.lock();
            let inner = &mut *guard;
            // Checked again under the lock: a write that failed meanwhile poisoned it.
            self.poison.check()?;
            let sequential = inner.dram.sequential(offset, len);
            let (mut hits, mut blocks) = (0, 0);
            let mut at = offset;
            let end = offset + len;
            while at < end {
                let block = at / bs;
                let within = (at % bs) as usize;
                let n = ((bs - at % bs).min(end - at)) as usize;
                let pos = (at - offset) as usize;
                let whole = n as u64 == bs;
                blocks += 1;
                let home_at = self.home_offset(block);
                let result = match inner.dram.place(block, true, sequential) {
                    Place::Slot { slot, fresh } => {
                        if fresh && !whole {
                            self.fill(&mut inner.counters, &mut inner.dram, slot, block)?;
                        }
                        if !fresh {
                            hits += 1;
                        }
                        let bytes = inner.dram.slot_mut(slot);
                        fill(pos, &mut bytes[within..within + n]);
                        inner.dram.set_filled(block);
                        inner.counters.home_writes += 1;
                        self.home.write_at(home_at, inner.dram.slot(slot))
                    }
                    Place::Bypassed => {
                        if !whole {
                            inner.counters.home_reads += 1;
                            self.home
                                .read_at(home_at, &mut inner.scratch)
                                .map_err(|e| self.read_error(block, e))?;
                        }
                        fill(pos, &mut inner.scratch[within..within + n]);
                        inner.counters.home_writes += 1;
                        self.home.write_at(home_at, &inner.scratch)
                    }
                };
                if let Err(e) = result {
                    let reason = format!(
                        "write of block {block} to {} failed: {e}",
                        self.home.describe()
                    );
                    self.poison.set(reason, e.raw_os_error());
                    self.commit.wake_all();
                    return Err(Error::io(
                        format!("cannot write block {block} to {}", self.home.describe()),
                        e,
                    ));
                }
                at += n as u64;
            }
            inner.counters.count_request(hits, blocks);
            ticket = self.issued.fetch_add(1, Ordering::SeqCst) + 1;
        }
        if fua || self.cfg.durability == Durability::Immediate {
            self.sync_through(ticket)?;
        }
        Ok(())
    }

    /// Returns once every write up to `ticket` is durable on home.
    fn sync_through(&self, ticket: u64) -> Result<()> {
        self.commit
            .wait(
                ticket,
                &self.poison,
                || format!("sync of {}", self.home.describe()),
                || self.issued.load(Ordering::SeqCst),
                || {
                    self.syncs.fetch_add(1, Ordering::Relaxed);
                    self.home.sync()
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
        self.poison.check()?;
        let ticket = self.issued.load(Ordering::SeqCst);
        self.sync_through(ticket)
    }

    /// This session's counters: requests by outcome, device reads, writes and syncs,
    /// and each tier's.
    pub fn stats(&self) -> Counters {
        let inner = self.inner.lock();
        Counters {
            tiers: vec![inner.dram.snapshot()],
            syncs: self.syncs.load(Ordering::Relaxed),
            ..inner.counters.clone()
        }
    }

    /// Reads block `block` from home without touching the DRAM tier, its policy or its
    /// counters (home holds every completed write): what a replay rewrites so that
    /// replaying a trace leaves the volume's data as it was.
    pub fn peek_block(&self, block: u64, buf: &mut [u8]) -> Result<()> {
        let bs = u64::from(self.cfg.block);
        self.check(block.saturating_mul(bs), buf.len() as u64)?;
        let mut inner = self.inner.lock();
        self.home
            .read_at(self.home_offset(block), &mut inner.scratch)
            .map_err(|e| self.read_error(block, e))?;
        let n = buf.len().min(bs as usize);
        buf[..n].copy_from_slice(&inner.scratch[..n]);
        Ok(())
    }

    /// The counters as `hscm volume stats` shows them: this session's, and the volume's
    /// lifetime ones (earlier sessions plus this one).
    pub fn snapshot(&self, state: &str) -> crate::snapshot::Snapshot {
        let session = self.stats();
        crate::snapshot::Snapshot {
            state: state.to_string(),
            pid: std::process::id(),
            saved_at: std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_secs()),
            mode: "write-through".into(),
            dirty_bytes: 0,
            lifetime: self.base.plus(&session),
            session,
        }
    }

    /// Saves the counters on home (not synced: a report, not data), for `hscm volume
    /// stats` to read from another process; `state` is `open` while serving.
    pub fn save_stats(&self, state: &str) -> Result<()> {
        crate::snapshot::save(self.home.as_ref(), &self.cfg, &self.snapshot(state)).map_err(|e| {
            Error::io(
                format!("cannot save the counters on {}", self.home.describe()),
                e,
            )
        })
    }

    /// Cached blocks, hottest first.
    pub fn hot_list(&self) -> Vec<u64> {
        self.inner.lock().dram.hot_list()
    }

    /// The first failure, once writes are refused.
    pub fn failure(&self) -> Option<hscm_durable::Failure> {
        self.poison.get().cloned()
    }
}

impl Drop for TieredVolume {
    fn drop(&mut self) {
        self.stop_loader();
    }
}

//! Write-back sessions (`Durability::WriteBack`): a write is acknowledged once it is
//! in RAM; dirty sectors go home in passes, each one sorted sweep over the volume
//! followed by one sync. A pass runs in the background once half of `dirty_max` is
//! dirty (or after `WRITEBACK_AGE` with anything dirty), and on every flush, FUA write
//! and close. One pass at a time: two passes never have writes of the same sector in
//! flight, so home never goes back to an older version. A flush waits for a pass that
//! started after it arrived, so concurrent flushes share one pass and one sync.
//!
//! Why reads never wait: a pass copies each dirty chunk out of RAM under the chunk's
//! `ram` read lock (which readers share) and writes the copy home without any lock.
//! Writers of that chunk wait for the copy only.

use super::*;

/// The most dirty bytes a write-back session holds by default: a flush then writes at
/// most this much (about a quarter of a second at 1 GB/s).
pub const DEFAULT_DIRTY_MAX: u64 = 256 << 20;

/// Dirty sectors older than this go home even when few are dirty, so an idle volume
/// does not keep unflushed data in RAM indefinitely.
const WRITEBACK_AGE: Duration = Duration::from_secs(5);

/// Write-back figures, for `hscm volume info`, the NBD export's status and benchmarks.
#[derive(Debug, Clone, Default)]
pub struct WriteBackStats {
    /// The bound on dirty bytes this session was opened with.
    pub dirty_max: u64,
    /// Bytes changed in RAM and not yet captured by a pass.
    pub dirty_bytes: u64,
    /// Passes that wrote dirty sectors home and synced.
    pub passes: u64,
    /// Device writes those passes made (sorted runs).
    pub home_runs: u64,
    /// Bytes those passes wrote home.
    pub written_bytes: u64,
    /// Times a writer waited because `dirty_max` was reached.
    pub writer_waits: u64,
}

struct PassState {
    /// Passes started and the last one that ended with a sync (numbered in start order).
    started: u64,
    synced: u64,
    running: bool,
    stop: bool,
}

pub(super) struct WriteBack {
    dirty_max: u64,
    /// One bit per sector of the volume: changed in RAM since a pass captured it.
    bits: Box<[AtomicU64]>,
    dirty_bytes: AtomicU64,
    state: Mutex<PassState>,
    /// Pass completions and room freed for writers.
    done: Condvar,
    /// Wakes the background flusher.
    wake: Condvar,
    /// The pass leader's staging buffer (reused: fresh memory is slow here).
    staging: Mutex<Staging>,
    passes: AtomicU64,
    home_runs: AtomicU64,
    written_bytes: AtomicU64,
    writer_waits: AtomicU64,
    /// Writers waiting for room now: the flusher runs for them whatever is dirty.
    waiting_writers: AtomicUsize,
}

impl WriteBack {
    pub(super) fn new(volume_size: u64, dirty_max: u64) -> WriteBack {
        let sectors = volume_size.div_ceil(IO_ALIGN);
        WriteBack {
            // Below one sector no write could ever proceed.
            dirty_max: dirty_max.max(IO_ALIGN),
            bits: (0..sectors.div_ceil(64))
                .map(|_| AtomicU64::new(0))
                .collect(),
            dirty_bytes: AtomicU64::new(0),
            state: Mutex::new(PassState {
                started: 0,
                synced: 0,
                running: false,
                stop: false,
            }),
            done: Condvar::new(),
            wake: Condvar::new(),
            staging: Mutex::new(Vec::new()),
            passes: AtomicU64::new(0),
            home_runs: AtomicU64::new(0),
            written_bytes: AtomicU64::new(0),
            writer_waits: AtomicU64::new(0),
            waiting_writers: AtomicUsize::new(0),
        }
    }

    pub(super) fn stats(&self) -> WriteBackStats {
        WriteBackStats {
            dirty_max: self.dirty_max,
            dirty_bytes: self.dirty_bytes.load(Ordering::Relaxed),
            passes: self.passes.load(Ordering::Relaxed),
            home_runs: self.home_runs.load(Ordering::Relaxed),
            written_bytes: self.written_bytes.load(Ordering::Relaxed),
            writer_waits: self.writer_waits.load(Ordering::Relaxed),
        }
    }

    fn background_threshold(&self) -> u64 {
        self.dirty_max / 2
    }

    /// Wakes everyone who waits on a pass or for room (a failure, or a stop).
    pub(super) fn wake_all(&self) {
        let _st = self.state.lock();
        self.done.notify_all();
        self.wake.notify_all();
    }

    pub(super) fn stop(&self) {
        self.state.lock().stop = true;
        self.wake.notify_all();
    }
}

impl Shared {
    /// Waits, before a write of `len` bytes at `offset` takes any lock, until its
    /// sectors fit under `dirty_max` beside what is dirty; the background flusher is
    /// woken to make room. A write larger than the bound goes ahead once nothing is
    /// dirty. So the dirty amount stays within `dirty_max` plus the writes admitted
    /// at the same moment by other threads.
    pub(super) fn wait_for_room(&self, wb: &WriteBack, offset: u64, len: usize) -> Result<()> {
        let needed = align_up(offset + len as u64) - align_down(offset);
        let full = || {
            let dirty = wb.dirty_bytes.load(Ordering::Relaxed);
            dirty > 0 && dirty + needed > wb.dirty_max
        };
        if !full() {
            return Ok(());
        }
        wb.writer_waits.fetch_add(1, Ordering::Relaxed);
        wb.waiting_writers.fetch_add(1, Ordering::SeqCst);
        let mut st = wb.state.lock();
        let mut result = Ok(());
        while full() {
            if let Err(e) = self.refuse_writes() {
                result = Err(e);
                break;
            }
            wb.wake.notify_one();
            // Bounded: a pass may free room between our check and this wait.
            wb.done.wait_for(&mut st, Duration::from_millis(5));
        }
        wb.waiting_writers.fetch_sub(1, Ordering::SeqCst);
        result
    }

    /// A write-back session's write: loaded chunks get the bytes in RAM and their
    /// sectors marked dirty; runs of chunks not loaded yet go home directly, as in
    /// every mode (home stays current for them). The caller holds every io lock of
    /// `[start, start + sectors.len())`, and partial sectors' chunks are loaded.
    /// Returns the ticket of the home writes (0 when there were none).
    pub(super) fn write_back_locked(
        &self,
        wb: &WriteBack,
        offset: u64,
        data: &[u8],
        start: u64,
        sectors: &[u8],
    ) -> Result<u64> {
        let stop = start + sectors.len() as u64;
        let mut ticket = 0;
        let mut at = start;
        while at < stop {
            let c = self.chunk_of(at);
            let loaded = self.is_loaded(c);
            let mut run_end = self.chunk_range(c).1.min(stop);
            while run_end < stop && self.is_loaded(self.chunk_of(run_end)) == loaded {
                run_end = self.chunk_range(self.chunk_of(run_end)).1.min(stop);
            }
            if loaded {
                for c in self.chunk_of(at)..=self.chunk_of(run_end - 1) {
                    self.write_ram_of_chunk(c, offset, data, |s, e| {
                        let fresh =
                            mark_dirty(&wb.bits, align_down(s) / IO_ALIGN, align_up(e) / IO_ALIGN);
                        wb.dirty_bytes
                            .fetch_add(fresh * IO_ALIGN, Ordering::Relaxed);
                        self.chunks[c].dirty.store(true, Ordering::Release);
                    });
                }
            } else {
                // Chunk boundaries are sector multiples, so the part stays aligned.
                let part = &sectors[(at - start) as usize..(run_end - start) as usize];
                ticket = ticket.max(self.write_sectors_home(at, part)?);
            }
            at = run_end;
        }
        if wb.dirty_bytes.load(Ordering::Relaxed) >= wb.background_threshold() {
            wb.wake.notify_one();
        }
        Ok(ticket)
    }

    /// Makes every write completed before the call durable: waits for a pass that
    /// starts after it (leading one if none runs), which writes every dirty sector home
    /// and syncs. Concurrent callers share passes.
    pub(super) fn write_back(&self, wb: &WriteBack) -> Result<()> {
        let mut st = wb.state.lock();
        let needed = st.started + 1;
        loop {
            if let Some(failure) = self.failure.get() {
                return Err(failure.clone().into());
            }
            if st.synced >= needed {
                return Ok(());
            }
            if st.running {
                wb.done.wait(&mut st);
                continue;
            }
            st.running = true;
            st.started += 1;
            let me = st.started;
            let result = MutexGuard::unlocked(&mut st, || self.write_back_pass(wb));
            st.running = false;
            if result.is_ok() {
                st.synced = me;
            }
            wb.done.notify_all();
            result?;
        }
    }

    /// One pass: every dirty sector home in sorted runs, then one sync covering them
    /// and every home write completed before. Fails the volume on error.
    fn write_back_pass(&self, wb: &WriteBack) -> Result<()> {
        let mut staging = wb.staging.lock();
        let taken = self.write_dirty_home(
            &wb.bits,
            SpanRule::NearbyRuns,
            &wb.home_runs,
            Some(&wb.dirty_bytes),
            &mut staging,
            &|| {
                wb.done.notify_all();
            },
        );
        let written = taken.map_err(|e| {
            let why = format!("write-back of dirty sectors to {} failed: {e}", self.name);
            self.fail(why.clone(), e.raw_os_error());
            Error::io(why, e)
        })?;
        wb.written_bytes.fetch_add(written, Ordering::Relaxed);
        let ticket = self.completed.fetch_add(1, Ordering::SeqCst) + 1;
        self.wait_durable(ticket)?;
        wb.passes.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }

    /// The background flusher: a pass once half of `dirty_max` is dirty, or after
    /// `WRITEBACK_AGE` with anything dirty.
    pub(super) fn run_flusher(&self) {
        let Some(wb) = &self.writeback else {
            return;
        };
        // The staging buffers, faulted in now rather than by the first flush (fresh
        // memory is slow on the VMs measured: about 1 GB/s).
        checkpoint::fill_staging(&mut wb.staging.lock());
        loop {
            {
                let mut st = wb.state.lock();
                loop {
                    if st.stop || self.failure.get().is_some() {
                        return;
                    }
                    let dirty = wb.dirty_bytes.load(Ordering::Relaxed);
                    if dirty >= wb.background_threshold()
                        || (dirty > 0 && wb.waiting_writers.load(Ordering::SeqCst) > 0)
                    {
                        break;
                    }
                    if dirty == 0 {
                        wb.wake.wait(&mut st);
                    } else if wb.wake.wait_for(&mut st, WRITEBACK_AGE).timed_out() {
                        break;
                    }
                }
            }
            if let Err(e) = self.write_back(wb) {
                tracing::error!(volume = %self.name, "background write-back failed: {e}");
                return;
            }
        }
    }
}

//! Writes and their durability: the write path (in place, or through the journal), the
//! poison a failure sets, and group commit of in-place writes and flushes.

use super::*;

impl Shared {
    pub(super) fn refuse_writes(&self) -> Result<()> {
        if self.read_only {
            return Err(Error::ReadOnly {
                reason: format!("{} was opened read-only", self.name),
            });
        }
        self.failure.check().map_err(Error::from)?;
        self.check_home()
    }

    /// Runs a background thread's body. A panic there (a bug) poisons the volume, so
    /// writers waiting on that thread hear of it rather than wait forever, and ends any
    /// warm-up still running as failed.
    pub(super) fn guarded(&self, thread: &str, body: impl FnOnce()) {
        if self.failure.guard(thread, body) {
            tracing::error!(volume = %self.name, "the {thread} thread panicked; the volume now refuses writes");
            self.fail_wake();
            let mut st = self.load_state.lock();
            if *st == LoadState::Running {
                *st = LoadState::Failed(format!("the {thread} thread panicked"));
            }
            drop(st);
            self.load_cv.notify_all();
        }
    }

    /// Poisons the volume with its first failure (later ones are logged only) and wakes
    /// every writer that waits, so each hears it.
    pub(super) fn fail(&self, why: String, errno: Option<i32>) {
        tracing::error!(volume = %self.name, "{why}; the volume now refuses writes");
        self.failure.set(why, errno);
        self.fail_wake();
    }

    /// Wakes every writer waiting on a batch, a checkpoint or a sync, so that each
    /// sees the failure.
    pub(super) fn fail_wake(&self) {
        self.commit.wake_all();
        if let Some(wb) = &self.writeback {
            wb.wake_all();
        }
        if let Some(j) = &self.journal {
            // Under the lock: a writer that saw no failure a moment ago is waiting by
            // now, so it hears this. (Never called with the journal state held.)
            let _st = j.state.lock();
            j.cv.notify_all();
            j.checkpoint_cv.notify_all();
        }
    }

    pub(super) fn write_at(&self, offset: u64, data: &[u8], durability: Durability) -> Result<()> {
        self.refuse_writes()?;
        self.check_range(offset, data.len())?;
        if data.is_empty() {
            return Ok(());
        }
        if let Some(wb) = &self.writeback {
            self.wait_for_room(wb, offset, data.len())?;
        }
        let end = offset + data.len() as u64;
        let (first, last) = (self.chunk_of(offset), self.chunk_of(end - 1));
        let (start, stop) = (align_down(offset), align_up(end));
        // Written in place: this writer's sectors first (`ranges`: lock order), so it
        // may let its io locks go during the home write.
        let _sectors_held = (self.journal.is_none() && self.writeback.is_none())
            .then(|| self.writing.hold(start, stop));
        let mut io: Vec<MutexGuard<'_, ()>> =
            (first..=last).map(|c| self.chunks[c].io.lock()).collect();
        // A writer we queued behind may have failed the volume.
        self.refuse_writes()?;

        // The backend is written in whole sectors. Partial head/tail sectors are
        // completed from the RAM copy, never read back from the device, so their
        // chunks must be loaded first (paper case 3 only covers whole-sector writes).
        let head_partial = start != offset;
        let tail_partial = stop != end;
        let mut sectors = AlignedBuf::zeroed((stop - start) as usize);
        if self.ram_copy {
            if head_partial {
                self.ensure_loaded_locked(first)?;
            }
            if tail_partial {
                self.ensure_loaded_locked(last)?;
            }
            // SAFETY (both copies): we hold the io lock of the chunk, which every RAM
            // writer also holds, and the chunk is Loaded (ensured above).
            if head_partial {
                unsafe {
                    self.ram
                        .copy_out(start as usize, &mut sectors[..IO_ALIGN as usize])
                };
            }
            if tail_partial {
                let at = sectors.len() - IO_ALIGN as usize;
                unsafe {
                    self.ram
                        .copy_out((stop - IO_ALIGN) as usize, &mut sectors[at..])
                };
            }
        } else {
            // Home only: nothing is ever loaded, so home is current, and the io locks
            // we hold keep every other writer of these sectors out meanwhile.
            if head_partial {
                self.read_backend(start, &mut sectors[..IO_ALIGN as usize])?;
            }
            if tail_partial {
                let at = sectors.len() - IO_ALIGN as usize;
                self.read_backend(stop - IO_ALIGN, &mut sectors[at..])?;
            }
        }
        let skip = (offset - start) as usize;
        sectors[skip..skip + data.len()].copy_from_slice(data);
        // From here on the bytes are this private copy's: `data` may be memory another
        // process can change meanwhile (the ring's shared buffer), and RAM must get
        // exactly what goes home.
        let data = &sectors[skip..skip + data.len()];

        let ticket = match (&self.writeback, &self.journal) {
            (Some(wb), _) => self.write_back_locked(wb, offset, data, start, &sectors)?,
            (None, Some(j)) => self.write_journaled(j, start, &sectors, durability)?,
            (None, None) => {
                self.write_in_place(offset, data, start, &sectors, durability, &mut io)?
            }
        };
        drop(io);
        match (durability, &self.writeback) {
            // FUA in a write-back session: everything before it becomes durable too.
            (Durability::Immediate, Some(wb)) => self.write_back(wb),
            (Durability::Immediate, None) => self.wait_durable(ticket),
            (Durability::OnFlush | Durability::WriteBack, _) => Ok(()),
        }
    }

    /// Journal mode: Loaded chunks get journal records (the batch leader updates their
    /// RAM); runs of non-Loaded chunks go home directly (paper case 3). The caller holds
    /// every io lock of `[start, start + sectors.len())`. Returns the ticket to wait for.
    pub(super) fn write_journaled(
        &self,
        j: &Journal,
        start: u64,
        sectors: &[u8],
        durability: Durability,
    ) -> Result<u64> {
        let stop = start + sectors.len() as u64;
        let mut ticket = 0;
        let mut records = Vec::new();
        let mut at = start;
        while at < stop {
            let loaded = self.is_loaded(self.chunk_of(at));
            let mut end = self.chunk_range(self.chunk_of(at)).1.min(stop);
            while end < stop && self.is_loaded(self.chunk_of(end)) == loaded {
                end = self.chunk_range(self.chunk_of(end)).1.min(stop);
            }
            let part = &sectors[(at - start) as usize..(end - start) as usize];
            if loaded {
                let max = journal::max_payload(j.len) as usize;
                for (i, piece) in part.chunks(max).enumerate() {
                    records.push((at + (i * max) as u64, piece.to_vec()));
                }
            } else {
                // Chunk boundaries are sector multiples, so `part` stays 4 KiB-aligned.
                ticket = ticket.max(self.write_sectors_home(at, part)?);
            }
            at = end;
        }
        if !records.is_empty() {
            ticket = ticket.max(self.append(j, records, durability == Durability::Immediate)?);
        }
        Ok(ticket)
    }

    /// One device write of whole sectors at their home location; fails the volume on error.
    pub(super) fn write_sectors_home(&self, start: u64, sectors: &[u8]) -> Result<u64> {
        self.backend
            .write_at(self.header.data_offset() + start, sectors)
            .map_err(|e| self.home_write_failed("write", start, sectors.len(), e))?;
        Ok(self.completed.fetch_add(1, Ordering::SeqCst) + 1)
    }

    /// One durable device write of whole sectors at their home location (FUA on a
    /// network home); fails the volume on error.
    fn write_sectors_through(&self, start: u64, sectors: &[u8]) -> Result<()> {
        self.backend
            .write_through_at(self.header.data_offset() + start, sectors)
            .map_err(|e| self.home_write_failed("durable write", start, sectors.len(), e))
    }

    /// A failed write of `len` bytes at volume offset `start`: the volume waits for a
    /// network home that timed out (`away`), and fails for good on anything else.
    pub(super) fn home_write_failed(
        &self,
        what: &str,
        start: u64,
        len: usize,
        e: std::io::Error,
    ) -> Error {
        let why = format!(
            "{what} of {len} bytes at volume offset {start} to {} failed: {e}",
            self.name
        );
        if !self.home_failed(&why, &e, Some((start, len as u64))) {
            self.fail(why.clone(), e.raw_os_error());
        }
        Error::io(why, e)
    }

    /// Volumes without a journal: the write goes home, then to RAM of Loaded chunks.
    /// An immediate write to a home that prefers it (a network home with FUA) goes
    /// through durably on its own, one round trip, and needs no share of a sync:
    /// its ticket is 0, durable already.
    ///
    /// The caller holds the write's sectors (`ranges`) and `io`, the io locks of its
    /// chunks. When every one of them is Loaded, those locks are let go during the
    /// home write and taken again for RAM: the loader never touches a Loaded chunk
    /// again, and the held sectors keep every other writer of them out, so writers
    /// of other sectors in the same chunks overlap their round trips.
    pub(super) fn write_in_place<'a>(
        &'a self,
        offset: u64,
        data: &[u8],
        start: u64,
        sectors: &AlignedBuf,
        durability: Durability,
        io: &mut Vec<MutexGuard<'a, ()>>,
    ) -> Result<u64> {
        let end = offset + data.len() as u64;
        let (first, last) = (self.chunk_of(offset), self.chunk_of(end - 1));
        let all_loaded = (first..=last).all(|c| self.is_loaded(c));
        if all_loaded {
            io.clear();
        }
        let ticket = if durability == Durability::Immediate && self.backend.prefers_write_through()
        {
            self.write_sectors_through(start, sectors)?;
            0
        } else {
            self.write_sectors_home(start, sectors)?
        };
        if all_loaded {
            *io = (first..=last).map(|c| self.chunks[c].io.lock()).collect();
        }

        // Paper §3.3.1 case 2 for loaded chunks; unloaded ones (case 3) got the backend
        // write only, and the loader — which waits for the caller's io lock — picks it up.
        for c in first..=last {
            if self.is_loaded(c) {
                self.write_ram_of_chunk(c, offset, data, |_, _| {});
            }
        }
        Ok(ticket)
    }

    /// Copies the part of `data` (written at `offset`) that falls in Loaded chunk `c`
    /// into RAM under the chunk's `ram` write lock, then runs `also(start, end)` on that
    /// part's volume range while the lock is still held. The caller holds `c`'s io lock.
    pub(super) fn write_ram_of_chunk(
        &self,
        c: usize,
        offset: u64,
        data: &[u8],
        also: impl FnOnce(u64, u64),
    ) {
        let (cs, ce) = self.chunk_range(c);
        let (s, e) = (offset.max(cs), (offset + data.len() as u64).min(ce));
        let _excl = self.chunks[c].ram.write();
        // SAFETY: the caller holds chunk c's io lock, c is Loaded, and we hold its ram
        // write lock: exclusive (module invariant).
        unsafe {
            self.ram.copy_in(
                s as usize,
                &data[(s - offset) as usize..(e - offset) as usize],
            )
        };
        also(s, e);
    }

    pub(super) fn flush(&self) -> Result<()> {
        if self.read_only {
            return Ok(());
        }
        // A failed volume says so to every flush, even one whose writes were all
        // durable already: a success after a device error is what misleads callers.
        if let Some(failure) = self.failure.get() {
            return Err(failure.clone().into());
        }
        self.check_home()?;
        if let Some(wb) = &self.writeback {
            return self.write_back(wb);
        }
        let ticket = self.completed.load(Ordering::SeqCst);
        self.wait_durable(ticket)
    }

    /// Group commit (hscm_durable::GroupCommit): one sync covers every write
    /// completed before it started; writers arriving meanwhile share the next.
    pub(super) fn wait_durable(&self, ticket: u64) -> Result<()> {
        let what = || format!("sync of {}", self.name);
        let issued = || self.completed.load(Ordering::SeqCst);
        // A network home that times out is waited for, not a reason to fail for good
        // (`away`): its failed syncs are judged below, not by the group commit, which
        // would poison the volume. Its waiters still hear a real failure, or that the
        // home is away, from the sync they would lead.
        let may_go_away = self.home_can_go_away();
        let scratch = Poison::default();
        let poison = if may_go_away { &scratch } else { &self.failure };
        let sync = || {
            if may_go_away {
                let refused =
                    |e: Error| std::io::Error::new(std::io::ErrorKind::TimedOut, e.to_string());
                self.failure.check().map_err(|f| refused(f.into()))?;
                self.check_home().map_err(refused)?;
            }
            self.backend.sync()
        };
        match self.commit.wait(ticket, poison, what, issued, sync) {
            Ok(()) => Ok(()),
            Err(CommitError::SyncFailed { reason, source }) if may_go_away => {
                if let Some(failure) = self.failure.get() {
                    return Err(failure.clone().into());
                }
                if !self.home_failed(&reason, &source, None) {
                    self.fail(reason.clone(), source.raw_os_error());
                }
                Err(Error::io(reason, source))
            }
            Err(CommitError::SyncFailed { reason, source }) => {
                tracing::error!(volume = %self.name, "{reason}; the volume now refuses writes");
                self.fail_wake();
                Err(Error::io(reason, source))
            }
            Err(e) => Err(Error::from(e)),
        }
    }
}

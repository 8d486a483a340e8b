//! The journal: batches gathered by a leader (group commit of journaled writes), and
//! checkpoints that write dirty sectors home so the journal space can be reused.

use super::*;

impl Shared {
    /// Appends records to the journal and returns once they are written and in RAM
    /// (and durable, with `durable`). Whoever finds no batch in flight leads the next
    /// one: it takes the queue's head, writes it as one batch, applies it to RAM for
    /// every owner and, if any owner asked for durability, syncs before letting them go.
    /// Writers arriving meanwhile queue up, so one write and one sync serve them all.
    pub(super) fn append(
        &self,
        j: &Journal,
        records: Vec<(u64, Vec<u8>)>,
        durable: bool,
    ) -> Result<u64> {
        let mut st = j.state.lock();
        let first_id = st.next_id;
        for (start, data) in records {
            let id = st.next_id;
            st.next_id += 1;
            st.queue.push_back(Pending {
                id,
                start,
                data,
                durable,
            });
        }
        let last_id = st.next_id - 1;
        loop {
            if st.finished_id > last_id {
                // A durable record's leader synced before finishing its batch: nothing
                // left to wait for. Others only need the ticket for a later flush.
                return Ok(if durable {
                    0
                } else {
                    self.completed.load(Ordering::SeqCst)
                });
            }
            // A batch in flight may hold our records, and its leader writes RAM for us
            // under our io locks: never leave before it ends.
            if st.writing {
                j.cv.wait(&mut st);
                continue;
            }
            if let Some(failure) = self.failure.get() {
                // Ours never reached the device, or an earlier batch of the same chain failed.
                st.queue.retain(|p| p.id < first_id || p.id > last_id);
                return Err(failure.clone().into());
            }
            if st.queue.is_empty() {
                j.cv.wait(&mut st);
                continue;
            }
            // Lead. The claim comes first, so nobody else leads while we gather.
            st.writing = true;
            // Writers released by the last batch need a moment to come back, and with
            // more writers than cores they come back one by one; left alone, batches
            // settle at half the writers (one group in flight, the other queued). So a
            // leader that is not alone keeps yielding while records keep arriving, for
            // a moment much shorter than the sync it is about to share.
            if st.last_batch > 1 || st.queue.len() > 1 {
                let start = std::time::Instant::now();
                let (mut seen, mut last_arrival) = (st.queue.len(), start);
                while seen < st.recent_peak.max(2) {
                    MutexGuard::unlocked(&mut st, std::thread::yield_now);
                    let now = std::time::Instant::now();
                    if st.queue.len() > seen {
                        (seen, last_arrival) = (st.queue.len(), now);
                    }
                    if now - last_arrival >= GATHER_QUIET || now - start >= GATHER_WAIT {
                        break;
                    }
                }
            }
            // The longest queue prefix that fits one batch.
            let limit = journal::max_batch(j.len) - SECTOR;
            let (mut count, mut bytes) = (0usize, 0u64);
            for p in &st.queue {
                if count == journal::MAX_ENTRIES || bytes + p.data.len() as u64 > limit {
                    break;
                }
                count += 1;
                bytes += p.data.len() as u64;
            }
            let pos = journal::place(st.head, j.len);
            if pos + SECTOR + bytes - st.tail > j.len {
                // Give up the claim: the checkpoint that frees space waits for it.
                st.writing = false;
                st.checkpoint_wanted = true;
                j.checkpoint_cv.notify_all();
                j.cv.notify_all();
                // Gathering let go of the lock: a failure may have been announced since
                // the check above, and its wake-up would be missed.
                if self.failure.get().is_none() {
                    j.cv.wait(&mut st);
                }
                continue;
            }
            st.last_batch = count;
            // The largest batch of the last PEAK_WINDOW: how many writers there are.
            st.window_peak = st.window_peak.max(count);
            st.window_batches += 1;
            if st.window_batches == PEAK_WINDOW {
                st.recent_peak = st.window_peak;
                (st.window_peak, st.window_batches) = (0, 0);
            }
            let batch: Vec<Pending> = st.queue.drain(..count).collect();
            let (seq, nonce) = (st.next_seq, st.nonce);
            let needs_sync = batch.iter().any(|p| p.durable);
            let written = MutexGuard::unlocked(&mut st, || {
                let ticket = self.write_batch(j, seq, nonce, pos, &batch)?;
                if needs_sync {
                    self.wait_durable(ticket)?;
                }
                Ok::<(), Error>(())
            });
            st.writing = false;
            if written.is_ok() {
                st.next_seq += 1;
                st.head = pos + SECTOR + bytes;
                st.finished_id = batch.last().map_or(st.finished_id, |p| p.id + 1);
                if st.head - st.tail >= checkpoint_threshold(j.len) {
                    j.checkpoint_cv.notify_all();
                }
            }
            j.cv.notify_all();
        }
    }

    /// Writes one batch to the journal, then applies it to RAM; returns its ticket.
    /// Fails the volume on error.
    pub(super) fn write_batch(
        &self,
        j: &Journal,
        seq: u64,
        nonce: u64,
        pos: u64,
        batch: &[Pending],
    ) -> Result<u64> {
        let payloads: Vec<(u64, &[u8])> = batch.iter().map(|p| (p.start, &p.data[..])).collect();
        let buf = journal::encode_batch(&self.header.uuid, nonce, seq, pos, &payloads);
        if let Err(e) = self.backend.write_at(JOURNAL_OFFSET + pos % j.len, &buf) {
            let why = format!(
                "journal write of {} bytes ({} records) to {} failed: {e}",
                buf.len(),
                batch.len(),
                self.name
            );
            self.fail(why.clone(), e.raw_os_error());
            return Err(Error::io(why, e));
        }
        let ticket = self.completed.fetch_add(1, Ordering::SeqCst) + 1;
        j.batches.fetch_add(1, Ordering::Relaxed);
        j.records.fetch_add(batch.len() as u64, Ordering::Relaxed);
        for p in batch {
            let end = p.start + p.data.len() as u64;
            let mut at = p.start;
            while at < end {
                let c = self.chunk_of(at);
                let e = self.chunk_range(c).1.min(end);
                let _excl = self.chunks[c].ram.write();
                // SAFETY: the record's owner holds chunk c's io lock and waits for us
                // (module invariant), the chunk is Loaded (checked by the owner under
                // that lock), and we hold its ram write lock: exclusive.
                unsafe {
                    self.ram.copy_in(
                        at as usize,
                        &p.data[(at - p.start) as usize..(e - p.start) as usize],
                    )
                };
                mark_dirty(&j.dirty, at / SECTOR, e / SECTOR);
                self.chunks[c].dirty.store(true, Ordering::Release);
                at = e;
            }
        }
        Ok(ticket)
    }

    /// Writes every change captured since the last checkpoint home, syncs, and moves
    /// the replay start past them, freeing their journal space.
    pub(super) fn checkpoint(&self) -> Result<()> {
        let Some(j) = &self.journal else {
            return Ok(());
        };
        // Held for the whole checkpoint: one at a time, and its staging buffer.
        let mut staging = j.checkpoint_lock.lock();
        self.refuse_writes()?;
        // Every batch before (seq, pos) is written and applied to RAM once no batch is
        // in flight; batches after it may or may not be captured below, and replay from
        // (seq, pos) covers them either way.
        let (seq, pos, generation, nonce) = {
            let mut st = j.state.lock();
            while st.writing {
                j.cv.wait(&mut st);
            }
            if st.head == st.tail {
                return Ok(());
            }
            (st.next_seq, st.head, st.generation, st.nonce)
        };
        let fail = |what: String, e: std::io::Error| {
            let why = format!("checkpoint of {}: {what} failed: {e}", self.name);
            self.fail(why.clone(), e.raw_os_error());
            Error::io(why, e)
        };
        self.write_dirty_home(
            &j.dirty,
            SpanRule::WholeDenseChunks,
            &j.home_runs,
            None,
            &mut staging,
            &|| {},
        )
        .map_err(|e| fail("writing dirty sectors home".into(), e))?;
        self.backend
            .sync()
            .map_err(|e| fail("sync of home writes".into(), e))?;
        let ck = Checkpoint {
            generation: generation + 1,
            next_seq: seq,
            log_pos: pos,
            nonce,
        };
        ck.persist(self.backend.as_ref(), &self.header.uuid)
            .map_err(|e| fail("writing the checkpoint record".into(), e))?;
        let mut st = j.state.lock();
        st.tail = pos;
        st.generation = ck.generation;
        j.checkpoints.fetch_add(1, Ordering::Relaxed);
        drop(st);
        j.cv.notify_all();
        Ok(())
    }

    /// Copies every sector marked in `dirty` out of RAM (clearing its bit, and taking
    /// its bytes off `dirty_count` if given) and writes it home in ascending runs.
    /// Staging buffers, reused from one pass to the next (fresh memory is costly: every
    /// page must be faulted in and zeroed), take turns: full ones are written home by
    /// helper threads (up to `STAGING_BUFFERS - 1` at once) while the next is filled, so
    /// copying overlaps the device's writes and the device has more than one; runs
    /// that continue each other across chunks leave as one write. `after_write` runs
    /// after each buffer is written. No sync. Returns the bytes written. Used by the
    /// journal's checkpoints and by write-back passes.
    pub(super) fn write_dirty_home(
        &self,
        dirty: &[AtomicU64],
        rule: SpanRule,
        home_runs: &AtomicU64,
        dirty_count: Option<&AtomicU64>,
        staging: &mut Staging,
        after_write: &(dyn Fn() + Sync),
    ) -> std::io::Result<u64> {
        let mut free = std::mem::take(staging);
        fill_staging(&mut free);
        let mut written = 0u64;
        let result = std::thread::scope(|scope| {
            let mut stage = free.pop().expect("staging buffers");
            let mut inflight = std::collections::VecDeque::new();
            // Waits for the oldest write in flight, whose buffer becomes free again.
            let land = |inflight: &mut std::collections::VecDeque<
                std::thread::ScopedJoinHandle<'_, _>,
            >,
                        free: &mut Staging|
             -> std::io::Result<()> {
                let Some(handle) = inflight.pop_front() else {
                    return Ok(());
                };
                let (buf, result): (AlignedBuf, std::io::Result<()>) =
                    handle.join().map_err(|_| {
                        std::io::Error::other("the thread writing dirty sectors home panicked")
                    })?;
                free.push(buf);
                after_write();
                result
            };
            let mut run = || -> std::io::Result<()> {
                // (volume offset, where in the stage, length)
                let mut staged: Vec<(u64, usize, usize)> = Vec::new();
                let mut used = 0usize;
                for (c, chunk) in self.chunks.iter().enumerate() {
                    if !chunk.dirty.load(Ordering::Acquire) {
                        continue;
                    }
                    let (cs, ce) = self.chunk_range(c);
                    let chunk_len = (ce - cs) as usize;
                    // A chunk never waits on device I/O while its ram lock is held: send
                    // the stage home first.
                    if used + chunk_len > stage.len() && !staged.is_empty() {
                        if free.is_empty() {
                            land(&mut inflight, &mut free)?;
                        }
                        let runs = std::mem::take(&mut staged);
                        written += run_bytes(&runs);
                        let full = std::mem::replace(
                            &mut stage,
                            free.pop().expect("the other staging buffer"),
                        );
                        inflight.push_back(scope.spawn(move || {
                            let r = self.write_runs_home(home_runs, &full, &runs);
                            (full, r)
                        }));
                        used = 0;
                    }
                    let oversized = chunk_len > stage.len();
                    let mut own;
                    let buf: &mut [u8] = if oversized {
                        own = AlignedBuf::zeroed(chunk_len);
                        &mut own
                    } else {
                        &mut stage[used..]
                    };
                    let mut runs: Vec<(u64, usize, usize)> = Vec::new();
                    {
                        let _shared = chunk.ram.read();
                        chunk.dirty.store(false, Ordering::Relaxed);
                        let taken = take_dirty(dirty, cs / SECTOR, ce / SECTOR);
                        if let Some(count) = dirty_count {
                            count.fetch_sub(taken.len() as u64 * SECTOR, Ordering::Relaxed);
                        }
                        let mut at = 0usize;
                        for (first, last) in dirty_spans(&taken, rule) {
                            let len = ((last - first + 1) * SECTOR) as usize;
                            // SAFETY: chunk c is Loaded (only Loaded chunks get dirty
                            // bits) and we hold its ram read lock, so no writer changes
                            // these bytes.
                            unsafe {
                                self.ram
                                    .copy_out((first * SECTOR) as usize, &mut buf[at..at + len])
                            };
                            runs.push((first * SECTOR, at, len));
                            at += len;
                        }
                    }
                    if oversized {
                        while !inflight.is_empty() {
                            land(&mut inflight, &mut free)?;
                        }
                        written += run_bytes(&runs);
                        self.write_runs_home(home_runs, buf, &runs)?;
                        after_write();
                        continue;
                    }
                    let base = used;
                    for (off, at, len) in runs {
                        let at = base + at;
                        match staged.last_mut() {
                            // Continues the previous run on the device and in the stage.
                            Some(last)
                                if last.0 + last.2 as u64 == off && last.1 + last.2 == at =>
                            {
                                last.2 += len
                            }
                            _ => staged.push((off, at, len)),
                        }
                        used = at + len;
                    }
                }
                if !staged.is_empty() {
                    written += run_bytes(&staged);
                    let r = self.write_runs_home(home_runs, &stage, &staged);
                    after_write();
                    r?;
                }
                Ok(())
            };
            let mut result = run();
            // Every write in flight (after an error too: keep their buffers).
            while !inflight.is_empty() {
                let landed = land(&mut inflight, &mut free);
                result = result.and(landed);
            }
            free.push(stage);
            result
        });
        *staging = free;
        result.map(|()| written)
    }

    /// Writes runs `(volume offset, where in buf, length)` home, many at once.
    pub(super) fn write_runs_home(
        &self,
        home_runs: &AtomicU64,
        buf: &[u8],
        runs: &[(u64, usize, usize)],
    ) -> std::io::Result<()> {
        let data_offset = self.header.data_offset();
        let writes: Vec<(u64, &[u8])> = runs
            .iter()
            .map(|&(off, at, len)| (data_offset + off, &buf[at..at + len]))
            .collect();
        home_runs.fetch_add(writes.len() as u64, Ordering::Relaxed);
        self.backend.write_many(&writes)
    }

    /// Checkpoints past the threshold, when a writer waits for space, or after a quiet
    /// second with anything in the journal.
    pub(super) fn run_checkpointer(&self) {
        let Some(j) = &self.journal else {
            return;
        };
        loop {
            {
                let mut st = j.state.lock();
                loop {
                    if st.stop {
                        return;
                    }
                    let used = st.head - st.tail;
                    if st.checkpoint_wanted || used >= checkpoint_threshold(j.len) {
                        break;
                    }
                    if used == 0 {
                        j.checkpoint_cv.wait(&mut st);
                    } else if j
                        .checkpoint_cv
                        .wait_for(&mut st, CHECKPOINT_IDLE)
                        .timed_out()
                    {
                        break;
                    }
                }
                st.checkpoint_wanted = false;
            }
            if let Err(e) = self.checkpoint() {
                tracing::error!(volume = %self.name, "checkpoint failed: {e}");
                // Writers waiting for space must see the failure.
                j.cv.notify_all();
                return;
            }
        }
    }
}

/// Tops `staging` up to `STAGING_BUFFERS` buffers, each written once so its pages are
/// faulted in now rather than during a pass.
pub(super) fn fill_staging(staging: &mut Staging) {
    while staging.len() < STAGING_BUFFERS {
        let mut buf = AlignedBuf::zeroed(STAGING_BYTES);
        buf.fill(0);
        staging.push(buf);
    }
}

/// Bytes that runs `(volume offset, where in the stage, length)` cover.
fn run_bytes(runs: &[(u64, usize, usize)]) -> u64 {
    runs.iter().map(|&(_, _, len)| len as u64).sum()
}

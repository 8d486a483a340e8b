//! Checkpoints: dirty sectors written home in large sequential runs, so the journal
//! space their records took can be reused (the batches themselves: `batch.rs`).

use super::*;

impl Shared {
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
                        let taken = take_dirty(dirty, cs / IO_ALIGN, ce / IO_ALIGN);
                        if let Some(count) = dirty_count {
                            count.fetch_sub(taken.len() as u64 * IO_ALIGN, Ordering::Relaxed);
                        }
                        let mut at = 0usize;
                        for (first, last) in dirty_spans(&taken, rule) {
                            let len = ((last - first + 1) * IO_ALIGN) as usize;
                            // SAFETY: chunk c is Loaded (only Loaded chunks get dirty
                            // bits) and we hold its ram read lock, so no writer changes
                            // these bytes.
                            unsafe {
                                self.ram
                                    .copy_out((first * IO_ALIGN) as usize, &mut buf[at..at + len])
                            };
                            runs.push((first * IO_ALIGN, at, len));
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

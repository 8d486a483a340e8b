//! The journal's batches: writers queue their records, whoever finds no batch in
//! flight leads the next one (one device write and one sync for all of them, the
//! group commit of journaled writes).

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
            let limit = journal::max_batch(j.len) - IO_ALIGN;
            let (mut count, mut bytes) = (0usize, 0u64);
            for p in &st.queue {
                if count == journal::MAX_ENTRIES || bytes + p.data.len() as u64 > limit {
                    break;
                }
                count += 1;
                bytes += p.data.len() as u64;
            }
            let pos = journal::place(st.head, j.len);
            if pos + IO_ALIGN + bytes - st.tail > j.len {
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
                st.head = pos + IO_ALIGN + bytes;
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
                mark_dirty(&j.dirty, at / IO_ALIGN, e / IO_ALIGN);
                self.chunks[c].dirty.store(true, Ordering::Release);
                at = e;
            }
        }
        Ok(ticket)
    }
}

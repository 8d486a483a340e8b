//! Bringing members back in sync: reach an absent member again, copy the chunks its
//! bitmap marks (everything, for a full copy) with writes held per batch, then flush
//! it and count it in sync.

use super::*;
use open::check_member;

impl Inner {
    pub(super) fn resync_loop(&self) {
        while !self.stop.load(Ordering::Relaxed) && self.fenced.lock().is_none() {
            for r in &self.remotes {
                if self.stop.load(Ordering::Relaxed) {
                    return;
                }
                if let Err(e) = self.resync(r) {
                    if e.kind() == io::ErrorKind::PermissionDenied {
                        let _ = self.fence(&e);
                        return;
                    }
                    tracing::debug!("{}: resync of {}: {e}", self.path.display(), r.uri);
                }
            }
            std::thread::sleep(RESYNC_EVERY);
        }
    }

    /// One round of bringing `r` back: reach it, copy what it lacks, count it in sync.
    fn resync(&self, r: &Remote) -> io::Result<()> {
        if r.takes_writes() {
            return Ok(());
        }
        if r.absent.lock().is_some() {
            if Instant::now() < *r.next_try.lock() {
                return Ok(());
            }
            *r.next_try.lock() = Instant::now() + RETRY_ABSENT;
            let link = match r.link() {
                Some(l) => l,
                None => {
                    let opened = NbdBackend::open(&r.uri, true).map_err(|e| match e {
                        DeviceError::Invalid(why) => err(io::ErrorKind::PermissionDenied, why),
                        other => io::Error::other(other.to_string()),
                    })?;
                    let h = self.header.lock().clone();
                    check_member(&opened, &h, &h.members[r.slot])
                        .map_err(|e| err(io::ErrorKind::PermissionDenied, e.to_string()))?;
                    let l = Arc::new(opened);
                    *r.link.write() = Some(l.clone());
                    l
                }
            };
            link.verify_owner()?;
            *r.lease.lock() = Some(Instant::now());
            *r.absent.lock() = None;
            tracing::info!(
                "{}: mirror member {} answers again",
                self.path.display(),
                r.uri
            );
        }
        let link = r.link().ok_or_else(|| io::Error::other("no connection"))?;
        let (chunk, data_len) = {
            let h = self.header.lock();
            (h.chunk, h.data_len)
        };
        {
            let mut bits = r.bits.lock();
            if *r.state.lock() == MemberState::NeedsFull && !bits.full_copy_started {
                for c in 0..data_len.div_ceil(chunk) {
                    bits.mark(c);
                }
                bits.full_copy_started = true;
            }
        }
        loop {
            if self.stop.load(Ordering::Relaxed) {
                return Ok(());
            }
            let shared_out = self.gate.write();
            let batch = r.bits.lock().take(RESYNC_BATCH);
            if batch.is_empty() {
                // Nothing left and no write in flight: flushed, it is in sync.
                let flushed = self.renew_lease(r, &link).and_then(|()| link.sync());
                if let Err(e) = flushed {
                    return Err(self.resync_failed(r, e, &[]));
                }
                *r.state.lock() = MemberState::InSync;
                {
                    let mut bits = r.bits.lock();
                    bits.full_copy_started = false;
                    for (w, word) in bits.persisted.clone().iter().enumerate() {
                        if *word != 0 {
                            bits.changed_blocks.insert(w / WORDS_PER_BLOCK);
                        }
                    }
                    bits.persisted.iter_mut().for_each(|w| *w = 0);
                    bits.unflushed.clear();
                }
                drop(shared_out);
                self.persist_bitmaps()?;
                self.local.sync()?;
                self.commit_header()?;
                tracing::info!(
                    "{}: mirror member {} is in sync",
                    self.path.display(),
                    r.uri
                );
                return Ok(());
            }
            // Runs of neighbouring chunks (the whole batch, in a full copy) are read
            // and sent as one piece each: fewer, larger requests on both sides.
            let mut pieces = Vec::new();
            for run in batch.chunk_by(|a, b| b == &(a + 1)) {
                let at = run[0] * chunk;
                let end = ((run[run.len() - 1] + 1) * chunk).min(data_len);
                let n = (end - at) as usize;
                let mut buf = AlignedBuf::zeroed(n);
                if let Err(e) = self.local.read_at(META_LEN + at, &mut buf) {
                    r.bits.lock().put_back(&batch);
                    return Err(e);
                }
                pieces.push((META_LEN + at, buf));
            }
            let refs: Vec<(u64, &[u8])> = pieces.iter().map(|(a, b)| (*a, &b[..])).collect();
            let wrote = self
                .renew_lease(r, &link)
                .and_then(|()| link.write_many(&refs));
            if let Err(e) = wrote {
                return Err(self.resync_failed(r, e, &batch));
            }
            let bytes: u64 = pieces.iter().map(|(_, b)| b.len() as u64).sum();
            r.copied.fetch_add(bytes, Ordering::Relaxed);
            drop(shared_out);
        }
    }

    fn resync_failed(&self, r: &Remote, e: io::Error, batch: &[u64]) -> io::Error {
        r.bits.lock().put_back(batch);
        if e.kind() != io::ErrorKind::PermissionDenied {
            *r.absent.lock() = Some(e.to_string());
            *r.next_try.lock() = Instant::now() + RETRY_ABSENT;
        }
        e
    }
}

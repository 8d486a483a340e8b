//! Sprint's background work: queued log syncs and prefetches (the mover thread), and
//! re-planning which devices are primaries.

use super::*;

impl Inner {
    pub(crate) fn queue_sync(&self, layout: &Layout, primary: usize) {
        let mut w = self.work.lock();
        if !w.sync.iter().any(|(p, _)| *p == primary) {
            let shadows = layout
                .shadows
                .iter()
                .flatten()
                .filter(|s| s.primary == primary)
                .cloned()
                .collect();
            w.sync.push((primary, shadows));
            self.work_ready.notify_one();
        }
    }

    pub(crate) fn sync_shadow(&self, s: &Shadow) -> Result<()> {
        s.sync(
            &self.devices[s.primary],
            &self.devices[s.idle],
            &self.counters,
            self.opts.sync_piece,
        )
        .map_err(|e| self.fail(e))
    }

    /// Syncs every log of `primary` home: in parallel (one thread per log) or in turn.
    pub(crate) fn sync_logs(&self, shadows: &[Arc<Shadow>]) -> Result<()> {
        let began = Instant::now();
        let result = self.sync_logs_timed(shadows);
        self.counters
            .sync_ns
            .fetch_add(began.elapsed().as_nanos() as u64, Ordering::Relaxed);
        result
    }

    pub(crate) fn sync_logs_timed(&self, shadows: &[Arc<Shadow>]) -> Result<()> {
        if self.opts.mode.parallel() && shadows.len() > 1 {
            std::thread::scope(|scope| {
                let handles: Vec<_> = shadows
                    .iter()
                    .map(|s| scope.spawn(move || self.sync_shadow(s)))
                    .collect();
                handles
                    .into_iter()
                    .map(|h| h.join().expect("sync thread panicked"))
                    .collect::<Result<Vec<()>>>()
            })?;
        } else {
            for s in shadows {
                self.sync_shadow(s)?;
            }
        }
        Ok(())
    }

    /// The background thread: log syncs and prefetches.
    pub(crate) fn mover(&self) {
        loop {
            let (syncs, prefetches) = {
                let mut w = self.work.lock();
                while w.sync.is_empty() && w.prefetch.is_empty() {
                    if self.shutdown.load(Ordering::SeqCst) {
                        return;
                    }
                    self.work_ready.wait(&mut w);
                }
                (std::mem::take(&mut w.sync), std::mem::take(&mut w.prefetch))
            };
            for (_, shadows) in syncs {
                if let Err(e) = self.sync_logs(&shadows) {
                    tracing::error!("log sync failed, store is read-only: {e}");
                    // Writers waiting for buffer space hear it now.
                    for s in &shadows {
                        s.notify_space();
                    }
                }
            }
            for s in prefetches {
                s.prefetch_queued.store(false, Ordering::Release);
                if s.retired.load(Ordering::Relaxed) {
                    continue;
                }
                let threads = if self.opts.mode.parallel() {
                    self.opts.parallel_threads
                } else {
                    1
                };
                let budget = (s.cache_capacity as f64 * self.opts.prefetch_fraction) as u64;
                if let Err(e) = s.prefetch(&self.devices[s.idle], budget, threads, &self.counters) {
                    tracing::warn!("prefetch from device {} failed: {e}", s.idle);
                }
            }
        }
    }

    /// Re-plans which devices are primaries: idle devices go round-robin to the first
    /// `k` devices. A shadow whose idle device keeps its primary survives with its
    /// cache; every other one syncs home and drops its cache.
    pub(crate) fn relayout(&self, k: usize) -> Result<()> {
        let n = self.devices.len();
        let k = k.clamp(1, n);
        let mut layout = self.layout.write();
        let primaries: Vec<usize> = (0..k).collect();
        let primary_of = |idle: usize| (idle >= k).then(|| primaries[(idle - k) % k]);
        let retiring: Vec<Arc<Shadow>> = layout
            .shadows
            .iter()
            .flatten()
            .filter(|s| primary_of(s.idle) != Some(s.primary))
            .cloned()
            .collect();
        self.sync_logs(&retiring)?;
        for s in &retiring {
            s.retired.store(true, Ordering::Relaxed);
            s.notify_space();
            s.drop_cache(&self.devices[s.primary]);
        }
        let segment = layout.next_segment;
        let mut shadows: Vec<Option<Arc<Shadow>>> = (0..n).map(|_| None).collect();
        for (idle, slot) in shadows.iter_mut().enumerate().skip(k) {
            let primary = primary_of(idle).expect("idle device");
            let kept = layout.shadows[idle]
                .as_ref()
                .filter(|s| s.primary == primary)
                .cloned();
            *slot = Some(match kept {
                Some(s) => s,
                None => Arc::new(Shadow::new(
                    &self.devices[primary],
                    &self.devices[idle],
                    self.opts.buffer_bytes,
                    self.opts.cache_bytes,
                    segment,
                )?),
            });
        }
        layout.next_segment = segment + 1_000_000;
        layout.shadows = shadows;
        layout.primaries = primaries;
        Ok(())
    }
}

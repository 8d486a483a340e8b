//! Warm-up (rapid resilience, paper §3.3): loader threads copy the backend into RAM in
//! large batches, chunks that requests hit first; a prefault thread populates RAM ahead.

use super::*;

impl Shared {
    /// For a writer holding chunk `c`'s io lock: loads it now if it is not loaded.
    pub(super) fn ensure_loaded_locked(&self, c: usize) -> Result<()> {
        if !self.is_loaded(c) {
            self.load_locked(c, 1)?;
        }
        Ok(())
    }

    /// Copies chunks `first..first+count` from the backend into RAM with one read.
    /// The caller holds all their io locks and none of them is Loaded.
    pub(super) fn load_locked(&self, first: usize, count: usize) -> Result<()> {
        let (start, _) = self.chunk_range(first);
        let (_, end) = self.chunk_range(first + count - 1);
        for c in first..first + count {
            self.chunks[c].state.store(LOADING, Ordering::Relaxed);
        }
        // SAFETY: we hold the io locks of these chunks and they are not Loaded, so no
        // reader touches their RAM and no other writer can (module invariant).
        let dst = unsafe { self.ram.slice_mut(start as usize, (end - start) as usize) };
        let result = self.backend.read_at(self.header.data_offset() + start, dst);
        if result.is_ok() {
            self.apply_overlay(start, dst);
        }
        let new_state = if result.is_ok() { LOADED } else { UNLOADED };
        for c in first..first + count {
            self.chunks[c].state.store(new_state, Ordering::Release);
        }
        result.map_err(|e| Error::io(format!("load of [{start}, {end}) from {}", self.name), e))?;
        self.loaded_chunks.fetch_add(count, Ordering::Relaxed);
        self.loaded_bytes.fetch_add(end - start, Ordering::Relaxed);
        Ok(())
    }

    /// Picks the next batch and locks it: a requested chunk first, else the sweep's next
    /// unloaded chunk. Sequential batches are handed out under the cursor lock, so
    /// concurrent loaders get disjoint ones. None when nothing is left unloaded.
    pub(super) fn next_batch(&self) -> Option<(usize, Vec<MutexGuard<'_, ()>>)> {
        loop {
            let Some(c) = self.urgent.lock().pop_front() else {
                break;
            };
            // Paper §3.3.1 case 3: a writer holding this chunk makes the loader wait.
            let g = self.chunks[c].io.lock();
            if self.chunks[c].state.load(Ordering::Acquire) == UNLOADED {
                return Some(self.extend_batch(c, g));
            }
        }
        let mut cursor = self.cursor.lock();
        let unloaded = |c: usize| self.chunks[c].state.load(Ordering::Acquire) == UNLOADED;
        while *cursor < self.chunks.len() && !unloaded(*cursor) {
            *cursor += 1;
        }
        if *cursor == self.chunks.len() {
            // A chunk whose inline load failed behind the sweep is retried from here.
            *cursor = (0..self.chunks.len()).find(|&c| unloaded(c))?;
        }
        let c = *cursor;
        let g = self.chunks[c].io.lock();
        if !unloaded(c) {
            return Some((c, Vec::new()));
        }
        let batch = self.extend_batch(c, g);
        *cursor = c + batch.1.len();
        Some(batch)
    }

    /// Extends a batch starting at locked chunk `c` over following unloaded chunks that
    /// nobody holds, up to MAX_LOAD_BATCH bytes.
    pub(super) fn extend_batch<'a>(
        &'a self,
        c: usize,
        first: MutexGuard<'a, ()>,
    ) -> (usize, Vec<MutexGuard<'a, ()>>) {
        let max_chunks = (MAX_LOAD_BATCH / self.chunk_size()).max(1) as usize;
        let mut guards = vec![first];
        while guards.len() < max_chunks {
            let next = c + guards.len();
            if next >= self.chunks.len()
                || self.chunks[next].state.load(Ordering::Acquire) != UNLOADED
            {
                break;
            }
            match self.chunks[next].io.try_lock() {
                Some(g) if self.chunks[next].state.load(Ordering::Acquire) == UNLOADED => {
                    guards.push(g)
                }
                _ => break,
            }
        }
        (c, guards)
    }

    pub(super) fn load_step(&self) -> Result<bool> {
        let Some((c, guards)) = self.next_batch() else {
            return Ok(false);
        };
        if !guards.is_empty() {
            self.load_locked(c, guards.len())?;
        }
        Ok(true)
    }

    /// Populates page tables up to PREFAULT_AHEAD past the loader's sweep, overlapping
    /// page-fault work with the loader's device reads.
    pub(super) fn run_prefault(&self) {
        let step = MAX_LOAD_BATCH;
        let size = self.header.volume_size;
        let mut done = 0u64;
        while done < size
            && *self.load_state.lock() == LoadState::Running
            && !self.stop.load(Ordering::Relaxed)
        {
            let sweep = *self.cursor.lock() as u64 * self.chunk_size();
            done = done.max(sweep);
            if done >= sweep + PREFAULT_AHEAD {
                std::thread::sleep(Duration::from_micros(200));
                continue;
            }
            self.ram.prefault(done as usize, step as usize);
            done += step;
        }
    }

    pub(super) fn run_loader(&self) {
        let outcome = loop {
            if self.stop.load(Ordering::Relaxed) {
                break LoadState::Stopped;
            }
            match self.load_step() {
                Ok(true) => {}
                Ok(false) => break LoadState::Done,
                Err(e) => {
                    tracing::error!(volume = %self.name, "warm-up stopped: {e}");
                    break LoadState::Failed(e.to_string());
                }
            }
        };
        let mut st = self.load_state.lock();
        // A failure or stop is final; Done only once every loader is done.
        let last = self.active_loaders.fetch_sub(1, Ordering::AcqRel) == 1;
        if *st == LoadState::Running && (outcome != LoadState::Done || last) {
            *st = outcome;
        }
        drop(st);
        self.load_cv.notify_all();
    }
}

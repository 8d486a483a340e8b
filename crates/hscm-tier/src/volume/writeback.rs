//! The fast tier's write-back, run without the volume's lock across home's writes and
//! syncs: requests to other blocks go on meanwhile, and DRAM hits never wait for it.
//! `fast::writeback` has the steps and why a block written or evicted meanwhile is
//! safe.

use std::sync::atomic::Ordering;

use hscm_durable::device::AlignedBuf;

use crate::fast::{Copied, Failure};
use crate::volume::Shared;
use crate::Result;

/// The most a run carries home in one write (and the buffer it is copied to).
const RUN_BYTES: usize = 1 << 20;

impl Shared {
    /// One write-back pass: every dirty block with `all`, else what the fast tier's
    /// marks ask for. Returns how many blocks it made clean (one written again
    /// meanwhile went home at its old version and stays dirty at its new one). Passes
    /// take turns; a pass started by a closing volume's thread stops between runs.
    pub(super) fn write_back_pass(&self, all: bool) -> Result<u64> {
        let _turn = self.write_back_turn.lock();
        let due = {
            let mut inner = self.lock();
            match inner.lower.fast.as_mut().map(|f| f.due_for_write_back(all)) {
                None => return Ok(0),
                Some(Ok(due)) => due,
                Some(Err(f)) => return self.fail(&mut inner.lower, f).map(|()| 0),
            }
        };
        if due.is_empty() {
            return Ok(0);
        }
        // Rule 3: what replaces home's copy is durable on the fast tier first.
        self.sync_fast_unlocked()?;
        let bs = self.cfg.block as usize;
        let mut buf = AlignedBuf::zeroed(bs.max(RUN_BYTES));
        let mut copied: Vec<Copied> = Vec::new();
        let mut at = 0;
        while at < due.len() {
            if !all && self.stop.load(Ordering::Relaxed) {
                break;
            }
            let mut inner = self.lock();
            let Some(fast) = inner.lower.fast.as_mut() else {
                return Ok(0);
            };
            let (used, run) = match fast.copy_run(&due[at..], &mut buf) {
                Ok(r) => r,
                Err(f) => return self.fail(&mut inner.lower, f).map(|()| 0),
            };
            at += used;
            let Some(first) = run.first().map(|c| c.block) else {
                continue;
            };
            fast.count_run();
            // Home's turn is taken before the lock is let go: a demotion or a write of
            // one of these blocks under the lock now lands after this run.
            let reserved = self.home.reserve();
            drop(inner);
            if let Err(e) = reserved.write_at(self.cfg.home_offset(first), &buf[..run.len() * bs]) {
                drop(reserved);
                let what = format!(
                    "cannot write blocks {first}.. back to {}",
                    self.home.describe()
                );
                return self
                    .fail(&mut self.lock().lower, Failure::Home(what, e))
                    .map(|()| 0);
            }
            copied.extend(run);
        }
        if copied.is_empty() {
            return Ok(0);
        }
        if let Err(e) = self.home.sync() {
            let what = format!("sync of {} failed", self.home.describe());
            return self
                .fail(&mut self.lock().lower, Failure::Home(what, e))
                .map(|()| 0);
        }
        let durable_seq = {
            let mut inner = self.lock();
            match inner.lower.fast.as_mut().map(|f| f.record_clean(&copied)) {
                None => return Ok(0),
                Some(Ok(seq)) => seq,
                Some(Err(f)) => return self.fail(&mut inner.lower, f).map(|()| 0),
            }
        };
        self.sync_fast_unlocked()?;
        let mut inner = self.lock();
        match inner
            .lower
            .fast
            .as_mut()
            .map(|f| f.mark_clean(&copied, durable_seq))
        {
            None => Ok(0),
            Some(Ok(cleaned)) => Ok(cleaned),
            Some(Err(f)) => self.fail(&mut inner.lower, f).map(|()| 0),
        }
    }

    /// Syncs the fast device without the volume's lock; a failure is handled under it.
    fn sync_fast_unlocked(&self) -> Result<()> {
        let Some(dev) = &self.fast_dev else {
            return Ok(());
        };
        match dev.sync() {
            Ok(()) => Ok(()),
            Err(e) => {
                let what = format!("sync failed on the fast tier {}", dev.describe());
                self.fail(&mut self.lock().lower, Failure::Fast(what, e))
            }
        }
    }
}

//! Write-back in phases, so the volume can copy dirty blocks home without holding its
//! lock across the home device's writes and syncs (rule 3 of the module comment, step
//! by step):
//!
//! 1. [`FastTier::due_for_write_back`] picks the blocks (under the lock);
//! 2. the fast device syncs (no lock): every dirty record written so far is durable;
//! 3. [`FastTier::copy_run`] copies a run of them into a buffer (under the lock), the
//!    caller reserves home's next write, lets go of the lock and writes the run;
//! 4. home syncs (no lock); [`FastTier::record_clean`] writes clean records for the
//!    blocks still at the version copied (under the lock);
//! 5. the fast device syncs (no lock); [`FastTier::mark_clean`] marks those blocks
//!    clean (under the lock).
//!
//! A block written again meanwhile has a new version (a new slot and sequence number,
//! rule 1) and stays dirty; one evicted meanwhile was written home by its demotion,
//! after the run (home's writes go in the order they were reserved). Either way the
//! later steps pass it by.

use std::time::Instant;

use super::{FastTier, Outcome, Record, SlotState, WRITEBACK_AGE, WRITEBACK_HIGH, WRITEBACK_LOW};

/// A block copied for home, at the version it had then.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Copied {
    pub(crate) block: u64,
    slot: u32,
    seq: u64,
}

impl FastTier {
    /// The dirty blocks to write back now, sorted: when the dirty share passes the high
    /// mark, the oldest down to the low mark; otherwise those dirty for longer than
    /// [`WRITEBACK_AGE`]; with `all`, every one.
    pub(crate) fn due_for_write_back(&mut self, all: bool) -> Outcome<Vec<u64>> {
        self.reclaim()?;
        let capacity = (self.stats.capacity_bytes / self.block).max(1);
        let share = self.dirty as f64 / capacity as f64;
        let now = Instant::now();
        let mut dirty: Vec<(u64, Instant)> = self
            .map
            .iter()
            .filter(|(_, l)| l.dirty)
            .map(|(&b, l)| (b, l.dirty_since.unwrap_or(now)))
            .collect();
        let mut chosen: Vec<u64> = if all {
            dirty.iter().map(|d| d.0).collect()
        } else if share > WRITEBACK_HIGH {
            dirty.sort_unstable_by_key(|d| d.1);
            let keep = (WRITEBACK_LOW * capacity as f64) as usize;
            let n = dirty.len().saturating_sub(keep);
            dirty[..n].iter().map(|d| d.0).collect()
        } else {
            dirty
                .iter()
                .filter(|d| now.duration_since(d.1) >= WRITEBACK_AGE)
                .map(|d| d.0)
                .collect()
        };
        chosen.sort_unstable();
        Ok(chosen)
    }

    /// Copies into `buf` the first run of consecutive blocks of `blocks` (sorted) that
    /// are still dirty with a durable record, at most `buf.len()` bytes; blocks before
    /// it that no longer qualify are passed by. Returns how many of `blocks` it used
    /// and the run (empty when none qualified).
    pub(crate) fn copy_run(
        &mut self,
        blocks: &[u64],
        buf: &mut [u8],
    ) -> Outcome<(usize, Vec<Copied>)> {
        let bs = self.block as usize;
        let max_run = (buf.len() / bs).max(1);
        let mut run: Vec<Copied> = Vec::new();
        let mut used = 0;
        for &block in blocks {
            let due = self
                .map
                .get(&block)
                .filter(|l| l.dirty && self.dev.is_durable(l.record))
                .copied();
            match (due, run.last()) {
                (None, None) => {}
                (None, Some(_)) => break,
                (Some(_), Some(last)) if last.block + 1 != block || run.len() == max_run => break,
                (Some(live), _) => {
                    let k = run.len();
                    self.read_slot(live.slot, &mut buf[k * bs..(k + 1) * bs])?;
                    run.push(Copied {
                        block,
                        slot: live.slot,
                        seq: live.seq,
                    });
                }
            }
            used += 1;
        }
        Ok((used, run))
    }

    /// Whether `copied` is still the block's version, and dirty.
    fn unchanged(&self, copied: &Copied) -> bool {
        self.map
            .get(&copied.block)
            .is_some_and(|l| l.dirty && l.slot == copied.slot && l.seq == copied.seq)
    }

    /// Home holds `copied` durably: writes clean records for those still at the version
    /// copied (unsynced). Returns the sequence number every record is durable up to once
    /// the fast device syncs next, for [`FastTier::mark_clean`].
    pub(crate) fn record_clean(&mut self, copied: &[Copied]) -> Outcome<u64> {
        for c in copied {
            if !self.unchanged(c) {
                continue;
            }
            let data_crc = self.map[&c.block].data_crc;
            self.write_record(
                c.slot,
                Record {
                    block: c.block,
                    seq: c.seq,
                    state: SlotState::Clean,
                    data_crc,
                },
            )?;
        }
        Ok(self.seq)
    }

    /// The clean records are durable: the blocks still at the version copied are clean.
    /// Returns how many.
    pub(crate) fn mark_clean(&mut self, copied: &[Copied], durable_seq: u64) -> Outcome<u64> {
        let mut cleaned = 0;
        for c in copied {
            if !self.unchanged(c) {
                continue;
            }
            let live = self.map.get_mut(&c.block).expect("unchanged");
            live.dirty = false;
            live.dirty_since = None;
            cleaned += 1;
        }
        self.dirty -= cleaned;
        self.stats.written_back += cleaned;
        // Everything up to `durable_seq` was durable before this write: recovery need
        // not check those slots' data (the sector becomes durable at a later sync).
        self.write_watermark(durable_seq)?;
        self.reclaim()?;
        Ok(cleaned)
    }

    /// Counts a run written home.
    pub(crate) fn count_run(&mut self) {
        self.stats.writeback_runs += 1;
    }
}

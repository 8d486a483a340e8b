//! Started writes: an immediate write that returns once it is under way and completes
//! by callback, for a front-end that keeps many writes in flight from one thread (the
//! NBD server answering its client as each completes).
//!
//! Only where the home starts durable writes itself (a network home with FUA, see
//! `Backend::start_write_through`) and the write is in place, whole sectors, on
//! Loaded chunks: the cases where the waiting write is one home round trip with its
//! io locks let go. The write holds its sectors (`ranges`) from before its bytes go
//! to RAM until the home acknowledged them, so a later writer of the same sectors
//! waits for it, as for any writer; its bytes go to RAM first, under its chunks' io
//! locks, because the thread that completes it must take no io lock (a writer
//! waiting on the home may hold one). A reader may see them before they are durable,
//! as with any write not yet acknowledged; a failed home write fails or suspends the
//! volume as the waiting path does, and the callback hears it.

use super::*;
use crate::backend::WriteDone as HomeDone;

/// What completes a started write ([`Volume::start_write`]): called exactly once.
pub type WriteDone = Box<dyn FnOnce(Result<()>) + Send>;

impl Volume {
    /// Whether a write of `len` bytes at `offset` with `durability` can be started
    /// ([`Self::start_write`]) rather than waited for: an immediate write, whole
    /// sectors, in place on Loaded chunks of a home that starts durable writes.
    pub fn can_start_write(&self, offset: u64, len: usize, durability: Durability) -> bool {
        let s = &self.shared;
        let len64 = len as u64;
        durability == Durability::Immediate
            && s.journal.is_none()
            && s.writeback.is_none()
            && s.ram_copy
            && s.backend.prefers_write_through()
            && len > 0
            && offset % IO_ALIGN == 0
            && len64 % IO_ALIGN == 0
            && s.check_range(offset, len).is_ok()
            && s.refuse_writes().is_ok()
            && (s.chunk_of(offset)..=s.chunk_of(offset + len64 - 1)).all(|c| s.is_loaded(c))
    }

    /// Starts an immediate write of `data` at `offset` and returns: `done` hears its
    /// outcome, from whichever thread sees it complete. Where the write cannot be
    /// started after all (another write holds its sectors, the home takes no started
    /// write now), it is written here and then, and `done` called before returning.
    /// Check [`Self::can_start_write`] first: a write it refuses is written waiting.
    pub fn start_write(&self, offset: u64, data: &[u8], done: WriteDone) {
        Shared::start_write(&self.shared, offset, data, done)
    }
}

impl Shared {
    fn start_write(this: &Arc<Shared>, offset: u64, data: &[u8], done: WriteDone) {
        let end = offset + data.len() as u64;
        if !this.writing.try_hold_started(offset, end) {
            return done(this.write_at(offset, data, Durability::Immediate));
        }
        let held = StartedRange {
            shared: this.clone(),
            range: (offset, end),
        };
        // A private copy: RAM gets exactly what goes home.
        let mut sectors = AlignedBuf::zeroed(data.len());
        sectors.copy_from_slice(data);
        let (first, last) = (this.chunk_of(offset), this.chunk_of(end - 1));
        {
            let _io: Vec<MutexGuard<'_, ()>> =
                (first..=last).map(|c| this.chunks[c].io.lock()).collect();
            // A writer we queued behind may have failed the volume.
            if let Err(e) = this.refuse_writes() {
                drop(_io);
                drop(held);
                return done(Err(e));
            }
            for c in first..=last {
                this.write_ram_of_chunk(c, offset, &sectors, |_, _| {});
            }
        }
        let at = this.header.data_offset() + offset;
        let len = sectors.len();
        let complete: HomeDone = Box::new(move |r| {
            let outcome = r.map_err(|e| {
                held.shared
                    .home_write_failed("durable write", offset, len, e)
            });
            drop(held);
            done(outcome)
        });
        if let Err(complete) = this.backend.start_write_through(at, &sectors, complete) {
            complete(this.backend.write_through_at(at, &sectors));
        }
    }
}

/// A started write's sectors, held until it completes (or its callback is dropped).
struct StartedRange {
    shared: Arc<Shared>,
    range: (u64, u64),
}

impl Drop for StartedRange {
    fn drop(&mut self) {
        let (start, end) = self.range;
        self.shared.writing.release_started(start, end);
    }
}

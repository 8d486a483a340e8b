//! Reads: from RAM when a chunk is loaded, else from the backend (never stale: see the
//! invariants in mod.rs), and the geometry helpers every path uses.

use super::*;

impl Shared {
    pub(super) fn chunk_size(&self) -> u64 {
        u64::from(self.header.chunk_size)
    }

    pub(super) fn chunk_of(&self, offset: u64) -> usize {
        (offset / self.chunk_size()) as usize
    }

    /// Byte range `[start, end)` of chunk `c` in the volume.
    pub(super) fn chunk_range(&self, c: usize) -> (u64, u64) {
        let start = c as u64 * self.chunk_size();
        (
            start,
            (start + self.chunk_size()).min(self.header.volume_size),
        )
    }

    pub(super) fn check_range(&self, offset: u64, len: usize) -> Result<()> {
        let size = self.header.volume_size;
        match offset.checked_add(len as u64) {
            Some(end) if end <= size => Ok(()),
            _ => Err(Error::OutOfRange {
                offset,
                len: len as u64,
                size,
            }),
        }
    }

    pub(super) fn is_loaded(&self, c: usize) -> bool {
        self.chunks[c].state.load(Ordering::Acquire) == LOADED
    }

    pub(super) fn read_with(
        &self,
        offset: u64,
        len: usize,
        mut sink: impl FnMut(usize, &[u8]),
    ) -> Result<()> {
        self.check_range(offset, len)?;
        let mut done = 0usize;
        let mut cold = Vec::new();
        while done < len {
            let at = offset + done as u64;
            let c = self.chunk_of(at);
            let n = ((self.chunk_range(c).1 - at) as usize).min(len - done);
            if self.is_loaded(c) {
                // Started before the lock, so the misses overlap its atomic operation.
                self.ram.prefetch(at as usize, n);
                let _shared = self.chunks[c].ram.read();
                // SAFETY: chunk is Loaded and we hold its ram read lock, so no writer
                // touches these bytes while the slice lives (module invariant).
                sink(done, unsafe { self.ram.slice(at as usize, n) });
            } else {
                if self.ram_copy {
                    self.prioritise(c);
                }
                cold.resize(n, 0);
                self.read_backend(at, &mut cold)?;
                sink(done, &cold);
            }
            done += n;
        }
        Ok(())
    }

    /// Paper §3.3.2 case 2, plus: the chunk jumps the loader's queue.
    pub(super) fn prioritise(&self, c: usize) {
        let mut q = self.urgent.lock();
        if !q.contains(&c) {
            q.push_front(c);
        }
    }

    pub(super) fn read_backend(&self, at: u64, dst: &mut [u8]) -> Result<()> {
        let start = align_down(at);
        let end = align_up(at + dst.len() as u64);
        let mut tmp = AlignedBuf::zeroed((end - start) as usize);
        self.backend
            .read_at(self.header.data_offset() + start, &mut tmp)
            .map_err(|e| {
                Error::io(
                    format!(
                        "read of {} bytes at volume offset {start} from {}",
                        end - start,
                        self.name
                    ),
                    e,
                )
            })?;
        self.apply_overlay(start, &mut tmp);
        let skip = (at - start) as usize;
        dst.copy_from_slice(&tmp[skip..skip + dst.len()]);
        Ok(())
    }

    /// For read-only volumes opened after a crash: lays the journal's unreplayed
    /// sectors over bytes read from home (`at` is sector-aligned).
    pub(super) fn apply_overlay(&self, at: u64, buf: &mut [u8]) {
        let end = at + buf.len() as u64;
        for (&off, data) in self.overlay.range(at..end) {
            let from = (off - at) as usize;
            buf[from..from + IO_ALIGN as usize].copy_from_slice(data);
        }
    }
}

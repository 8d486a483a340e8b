//! The DRAM working copy: one anonymous mapping the size of the volume, populated
//! lazily, so `open` costs no copying and no zeroing whatever the size.

use memmap2::MmapMut;

/// How much of a read [`RamImage::prefetch`] asks for ahead of the copy: enough for a
/// 4 KiB block, the common small request; larger copies run long enough for the
/// hardware prefetcher to take over.
const PREFETCH_AHEAD: usize = 4096;
const CACHE_LINE: usize = 64;

pub(crate) struct RamImage {
    // Keeps the mapping alive; data access goes through `base`.
    map: MmapMut,
    base: *mut u8,
    len: usize,
}

// SAFETY: the mapping lives as long as the RamImage and is never remapped. The
// raw accessors below are unsafe and their callers uphold the volume's chunk-locking
// invariant (see `volume/mod.rs`: RAM of a chunk is written only by a holder of that
// chunk's io lock, and while the chunk is Loaded only under its ram write lock
// too), so no byte is written while another thread reads or writes it.
unsafe impl Send for RamImage {}
// SAFETY: see Send above.
unsafe impl Sync for RamImage {}

impl RamImage {
    /// `huge_pages`: advise transparent huge pages (fewer TLB misses on random reads
    /// over large volumes; harmless where THP is off).
    pub(crate) fn new(len: usize, huge_pages: bool) -> std::io::Result<RamImage> {
        let mut map = MmapMut::map_anon(len)?;
        #[cfg(target_os = "linux")]
        if huge_pages {
            let _ = map.advise(memmap2::Advice::HugePage);
        }
        let base = map.as_mut_ptr();
        Ok(RamImage { map, base, len })
    }

    /// Faults in (zero-filled, writable) the pages of a range ahead of the loader, so
    /// the loader's device reads do not stall on page faults. The kernel only fills
    /// page tables; contents are never changed, so this is safe whoever else uses the range.
    pub(crate) fn prefault(&self, offset: usize, len: usize) {
        let len = len.min(self.len.saturating_sub(offset));
        #[cfg(target_os = "linux")]
        if len > 0 {
            // Kernels before 5.14 lack MADV_POPULATE_WRITE; the loader then faults as it reads.
            let _ = self
                .map
                .advise_range(memmap2::Advice::PopulateWrite, offset, len);
        }
    }

    /// Asks the CPU to start fetching the first [`PREFETCH_AHEAD`] bytes of a range
    /// about to be copied, all at once. A copy walks its source line by line, and the
    /// hardware prefetcher joins in only after a few lines, so a lone request (a
    /// server answering one command at a time) waits out several memory latencies in
    /// a row; a loop of copies hides them behind each other, a single one cannot.
    pub(crate) fn prefetch(&self, offset: usize, len: usize) {
        #[cfg(target_arch = "x86_64")]
        {
            use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
            let end = offset.saturating_add(len.min(PREFETCH_AHEAD)).min(self.len);
            let mut at = offset & !(CACHE_LINE - 1);
            while at < end {
                // SAFETY: `at < self.len`, so the pointer stays inside the mapping. A
                // prefetch is only a hint: it reads nothing architecturally, writes
                // nothing, and never faults (not even on a page not yet populated).
                unsafe { _mm_prefetch::<_MM_HINT_T0>(self.base.add(at) as *const i8) };
                at += CACHE_LINE;
            }
        }
        #[cfg(not(target_arch = "x86_64"))]
        let _ = (offset, len);
    }

    /// # Safety
    /// No other thread writes `[offset, offset + dst.len())` during the call.
    pub(crate) unsafe fn copy_out(&self, offset: usize, dst: &mut [u8]) {
        assert!(offset + dst.len() <= self.len, "RAM read out of bounds");
        // SAFETY: in bounds (checked above); no concurrent writer (caller's contract);
        // dst is a distinct Rust allocation, so the ranges do not overlap.
        unsafe { std::ptr::copy_nonoverlapping(self.base.add(offset), dst.as_mut_ptr(), dst.len()) }
    }

    /// # Safety
    /// No other thread reads or writes `[offset, offset + src.len())` during the call.
    pub(crate) unsafe fn copy_in(&self, offset: usize, src: &[u8]) {
        assert!(offset + src.len() <= self.len, "RAM write out of bounds");
        // SAFETY: in bounds; exclusive access (caller's contract); src does not overlap.
        unsafe { std::ptr::copy_nonoverlapping(src.as_ptr(), self.base.add(offset), src.len()) }
    }

    /// A shared view of RAM, for readers that copy out themselves.
    ///
    /// # Safety
    /// No other thread writes the range while the returned slice lives.
    pub(crate) unsafe fn slice(&self, offset: usize, len: usize) -> &[u8] {
        assert!(offset + len <= self.len, "RAM slice out of bounds");
        // SAFETY: in bounds, initialised, and not written meanwhile (caller's contract).
        unsafe { std::slice::from_raw_parts(self.base.add(offset), len) }
    }

    /// A mutable view for reading straight from the backend into RAM.
    ///
    /// # Safety
    /// No other thread reads or writes the range while the returned slice lives.
    #[allow(clippy::mut_from_ref)]
    pub(crate) unsafe fn slice_mut(&self, offset: usize, len: usize) -> &mut [u8] {
        assert!(offset + len <= self.len, "RAM slice out of bounds");
        // SAFETY: in bounds, initialised (anonymous mappings read as zero), exclusive
        // for the slice's lifetime by the caller's contract.
        unsafe { std::slice::from_raw_parts_mut(self.base.add(offset), len) }
    }
}

/// Physical memory plus swap, from /proc/meminfo: what a volume's working copy can
/// occupy at the most. None where it cannot be read.
pub fn memory_available_for_volumes() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    let field = |name: &str| -> Option<u64> {
        let line = text.lines().find(|l| l.starts_with(name))?;
        let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
        Some(kib * 1024)
    };
    Some(field("MemTotal:")? + field("SwapTotal:").unwrap_or(0))
}

/// Refuses a volume whose working copy cannot fit in this machine's memory.
pub fn check_fits_in_memory(name: &str, volume_size: u64) -> crate::Result<()> {
    match memory_available_for_volumes() {
        Some(memory) if volume_size > memory => Err(crate::Error::TooLargeForMemory {
            path: name.to_string(),
            volume_size,
            memory,
        }),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Prefetches of any range, in bounds or not, neither fault nor change a byte.
    #[test]
    fn prefetch_of_any_range_is_harmless() {
        let ram = RamImage::new(3 * 4096, true).unwrap();
        // SAFETY: nothing else uses this image.
        unsafe { ram.copy_in(4000, &[7u8; 200]) };
        for (offset, len) in [
            (0, 0),
            (0, 1 << 20),
            (4000, 200),
            (3 * 4096 - 1, 4096),
            (3 * 4096, 64),
            (1 << 30, 4096),
            (usize::MAX - 10, usize::MAX),
        ] {
            ram.prefetch(offset, len);
        }
        let mut out = vec![0u8; 3 * 4096];
        // SAFETY: as above.
        unsafe { ram.copy_out(0, &mut out) };
        assert!(out[..4000].iter().all(|&b| b == 0));
        assert!(out[4000..4200].iter().all(|&b| b == 7));
        assert!(out[4200..].iter().all(|&b| b == 0));
    }
}

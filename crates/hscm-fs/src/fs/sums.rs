//! The block hashes that find what the kernel wrote into a file's RAM behind the
//! file system's back (`FileRam::sums`): a hash per block as the target holds it.

/// The unit of the kernel-write hashes: the file system's block.
pub(crate) const SUM_BLOCK: u64 = crate::format::BLOCK;

/// A block whose content on the target is not known: it never matches a hash.
pub(crate) const UNKNOWN: u64 = 0;
pub(crate) const UNKNOWN_SUM: u64 = UNKNOWN;

/// A block's hash (never [`UNKNOWN`]).
pub(crate) fn block_sum(bytes: &[u8]) -> u64 {
    xxhash_rust::xxh3::xxh3_64(bytes).max(1)
}

/// Grows the hashes to cover `[0, end)` of a memfd that was `old_len` long: blocks
/// wholly past the old end are holes, zeroes on both sides; blocks before it that
/// had no hash yet hold what the kernel wrote (appends) and are unknown.
pub(crate) fn extend_sums(v: &mut Vec<u64>, old_len: u64, end: u64) {
    let blocks = end.div_ceil(SUM_BLOCK);
    for b in v.len() as u64..blocks {
        v.push(if b * SUM_BLOCK >= old_len {
            zero_sum()
        } else {
            UNKNOWN
        });
    }
}

/// A block's bytes as hashed: a short last block is padded with zeroes.
pub(crate) fn padded(mut bytes: Vec<u8>) -> Vec<u8> {
    bytes.resize(SUM_BLOCK as usize, 0);
    bytes
}

pub(crate) fn zero_sum() -> u64 {
    static ZERO: std::sync::OnceLock<u64> = std::sync::OnceLock::new();
    *ZERO.get_or_init(|| block_sum(&[0u8; SUM_BLOCK as usize]))
}

impl super::ram::FileRam {
    /// The target's blocks `blocks` changed without RAM (zeroes written there): their
    /// hashes no longer say what the target holds, so the next write-back compares
    /// nothing and writes them from RAM.
    pub(crate) fn target_changed(&self, blocks: std::ops::Range<u64>) {
        if let Some(v) = self.sums.lock().as_mut() {
            let end = blocks.end.min(v.len() as u64);
            for b in blocks.start..end {
                v[b as usize] = UNKNOWN;
            }
        }
    }
}

/// The hashes of the blocks of `whole` (whole blocks from file offset `start`, as
/// written to the target) that `[from, to)` covers only in part: what
/// [`FileRam::write_with_edges`](super::ram::FileRam::write_with_edges) is told of
/// a write widened to whole blocks.
pub(crate) fn edge_sums(start: u64, whole: &[u8], from: u64, to: u64) -> Vec<(u64, u64)> {
    debug_assert!(start % SUM_BLOCK == 0 && whole.len() as u64 % SUM_BLOCK == 0);
    whole
        .chunks(SUM_BLOCK as usize)
        .enumerate()
        .filter_map(|(i, block)| {
            let at = start + i as u64 * SUM_BLOCK;
            let covered = from <= at && at + SUM_BLOCK <= to;
            (!covered && at < to && from < at + SUM_BLOCK)
                .then(|| (at / SUM_BLOCK, block_sum(block)))
        })
        .collect()
}

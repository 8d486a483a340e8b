//! A remote member's write-intent bitmap, one bit per chunk of the volume.

use std::collections::BTreeSet;

use crate::codec::{Dec, Enc};
use crate::device::{AlignedBuf, IO_ALIGN};

/// A remote member's write-intent bitmap: `dirty` what resync must still copy,
/// `persisted` what the local member's bitmap region says (a superset of what the
/// member lacks, cleared only when it is in sync again), `unflushed` chunks written
/// to it since its last flush (lost to it if that flush fails).
#[derive(Default)]
pub(super) struct Bits {
    pub dirty: Vec<u64>,
    pub dirty_count: u64,
    pub persisted: Vec<u64>,
    pub changed_blocks: BTreeSet<usize>,
    pub unflushed: Vec<u64>,
    pub full_copy_started: bool,
}

/// Bitmap words in one 4 KiB block.
pub(super) const WORDS_PER_BLOCK: usize = (IO_ALIGN / 8) as usize;

impl Bits {
    pub fn new(chunks: u64) -> Bits {
        let words = chunks.div_ceil(64) as usize;
        Bits {
            dirty: vec![0; words],
            persisted: vec![0; words],
            ..Bits::default()
        }
    }
    pub fn mark(&mut self, chunk: u64) {
        let (w, b) = ((chunk / 64) as usize, 1u64 << (chunk % 64));
        if self.dirty[w] & b == 0 {
            self.dirty[w] |= b;
            self.dirty_count += 1;
        }
        if self.persisted[w] & b == 0 {
            self.persisted[w] |= b;
            self.changed_blocks.insert(w / WORDS_PER_BLOCK);
        }
    }
    /// Takes up to `n` dirty chunks, clearing them.
    pub fn take(&mut self, n: usize) -> Vec<u64> {
        let mut out = Vec::new();
        for (w, word) in self.dirty.iter_mut().enumerate() {
            while *word != 0 && out.len() < n {
                let b = word.trailing_zeros();
                *word &= !(1u64 << b);
                out.push(w as u64 * 64 + u64::from(b));
            }
            if out.len() >= n {
                break;
            }
        }
        self.dirty_count -= out.len() as u64;
        out
    }
    /// Block `blk` of the persisted bitmap as the local member keeps it: its words,
    /// little-endian, zeros past the last.
    pub fn encode_block(&self, blk: usize) -> AlignedBuf {
        let first = blk * WORDS_PER_BLOCK;
        let words = &self.persisted[first..(first + WORDS_PER_BLOCK).min(self.persisted.len())];
        let mut e = Enc(Vec::with_capacity(IO_ALIGN as usize));
        words.iter().for_each(|w| {
            e.u64(*w);
        });
        let mut buf = AlignedBuf::zeroed(IO_ALIGN as usize);
        buf[..e.0.len()].copy_from_slice(&e.0);
        buf
    }

    /// Takes a persisted bitmap read back (whole blocks, as [`Bits::encode_block`]
    /// wrote them): every set bit is to copy.
    pub fn load(&mut self, bytes: &[u8]) {
        let mut d = Dec::new(bytes, "a mirror bitmap");
        for w in 0..self.persisted.len() {
            let v = d.u64().unwrap_or(0);
            self.persisted[w] = v;
            self.dirty[w] = v;
            self.dirty_count += u64::from(v.count_ones());
        }
    }

    pub fn put_back(&mut self, chunks: &[u64]) {
        for &c in chunks {
            self.mark(c);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bitmap_block_round_trips_in_little_endian_words() {
        let mut b = Bits::new(1000);
        b.mark(0);
        b.mark(65);
        b.mark(999);
        let block = b.encode_block(0);
        assert_eq!(block[..8], 1u64.to_le_bytes());
        assert_eq!(block[8..16], 2u64.to_le_bytes());
        let mut back = Bits::new(1000);
        back.load(&block);
        assert_eq!(back.persisted, b.persisted);
        assert_eq!(back.dirty_count, 3);
        assert_eq!(back.take(10), vec![0, 65, 999]);
    }
}

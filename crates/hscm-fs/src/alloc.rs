//! Data blocks: which are free. Rebuilt from the metadata at every mount (a block is
//! used iff some file maps it), so nothing about it is stored. Blocks an operation
//! frees wait in `pending` until the record that freed them is durable: reused
//! earlier, a crash could bring back the old file over the new file's data.

use crate::{Error, Result};

pub(crate) struct Allocator {
    /// One bit per data block, set when used.
    used: Vec<u64>,
    blocks: u64,
    free: u64,
    /// Where the next search starts (next fit keeps a file's blocks together).
    cursor: u64,
    /// Freed, with the sequence number of the record that freed them.
    pending: Vec<(u64, u64)>,
}

impl Allocator {
    /// `blocks` data blocks, of which `used` are taken.
    pub fn new(blocks: u64, used: impl Iterator<Item = u64>) -> Result<Allocator> {
        let mut a = Allocator {
            used: vec![0; blocks.div_ceil(64) as usize],
            blocks,
            free: blocks,
            cursor: 0,
            pending: Vec::new(),
        };
        for b in used {
            if b >= blocks || a.is_used(b) {
                return Err(Error::Corrupt(format!(
                    "data block {b} is mapped twice or lies outside the data area"
                )));
            }
            a.set(b, true);
        }
        Ok(a)
    }

    fn is_used(&self, b: u64) -> bool {
        self.used[(b / 64) as usize] & (1 << (b % 64)) != 0
    }

    fn set(&mut self, b: u64, used: bool) {
        let word = &mut self.used[(b / 64) as usize];
        if used {
            *word |= 1 << (b % 64);
            self.free -= 1;
        } else {
            *word &= !(1 << (b % 64));
            self.free += 1;
        }
    }

    /// Free blocks, counting those that wait for their record to be durable (they
    /// are free for `statfs`: an unlink frees space at once).
    pub fn available(&self) -> u64 {
        self.free + self.pending.len() as u64
    }

    /// Free blocks that can be allocated now.
    pub fn free_now(&self) -> u64 {
        self.free
    }

    pub fn blocks(&self) -> u64 {
        self.blocks
    }

    pub fn has_pending(&self) -> bool {
        !self.pending.is_empty()
    }

    /// Up to `want` blocks as runs (start, count), the first as long as it can be;
    /// fewer only if fewer are free.
    pub fn allocate(&mut self, want: u64) -> Vec<(u64, u64)> {
        let mut runs: Vec<(u64, u64)> = Vec::new();
        let mut left = want.min(self.free);
        let mut scanned = 0;
        while left > 0 && scanned < self.blocks {
            let b = self.cursor;
            self.cursor = (self.cursor + 1) % self.blocks;
            scanned += 1;
            if self.is_used(b) {
                continue;
            }
            self.set(b, true);
            left -= 1;
            match runs.last_mut() {
                Some((start, n)) if *start + *n == b => *n += 1,
                _ => runs.push((b, 1)),
            }
        }
        runs
    }

    /// Gives back blocks never mapped by a record (an operation that failed).
    pub fn release(&mut self, blocks: impl Iterator<Item = u64>) {
        for b in blocks {
            self.set(b, false);
        }
    }

    /// Blocks the record `seq` unmapped: free once `seq` is durable.
    pub fn free_after(&mut self, seq: u64, blocks: impl Iterator<Item = u64>) {
        self.pending.extend(blocks.map(|b| (seq, b)));
    }

    /// Records up to `seq` are durable: their blocks are free.
    pub fn durable(&mut self, seq: u64) {
        let (done, wait): (Vec<_>, Vec<_>) = self.pending.drain(..).partition(|(s, _)| *s <= seq);
        self.pending = wait;
        for (_, b) in done {
            self.set(b, false);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blocks_freed_by_a_record_come_back_only_once_it_is_durable() {
        let mut a = Allocator::new(100, [0, 1].into_iter()).unwrap();
        assert_eq!(a.available(), 98);
        let runs = a.allocate(98);
        assert_eq!(runs, vec![(2, 98)]);
        assert!(a.allocate(1).is_empty(), "full");
        a.free_after(5, [10, 11].into_iter());
        assert_eq!(a.available(), 2, "statfs counts them at once");
        assert!(a.allocate(1).is_empty(), "but they are not reused yet");
        a.durable(4);
        assert!(a.allocate(1).is_empty());
        a.durable(5);
        assert_eq!(a.allocate(5), vec![(10, 2)]);
    }

    #[test]
    fn a_block_mapped_twice_is_corruption() {
        assert!(Allocator::new(10, [3, 3].into_iter()).is_err());
        assert!(Allocator::new(10, [10].into_iter()).is_err());
    }
}

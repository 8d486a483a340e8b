//! Buddy allocator for data-buffer space (the paper's §5.4: a command's buffer must be
//! contiguous, and buddy allocation keeps external fragmentation low). Units are
//! blocks of `min_block` bytes; a request is rounded up to a power-of-two number of
//! blocks and gets a block aligned to its own size, so freeing can always merge a
//! block with its buddy.

use std::collections::BTreeSet;

#[derive(Debug, Clone)]
pub struct Buddy {
    min_block: u32,
    /// Top order: the whole buffer is one block of `1 << max_order` units.
    max_order: u32,
    /// Free block starts (in units) per order.
    free: Vec<BTreeSet<u32>>,
    /// Order of every allocated block, by start unit, so `free` needs only the start.
    allocated: std::collections::HashMap<u32, u32>,
    free_units: u64,
}

/// A block handed out by [`Buddy::alloc`]: byte offset in the buffer and usable length.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Block {
    pub offset: u64,
    pub len: u64,
}

impl Buddy {
    /// A buffer of `len` bytes in blocks of `min_block` (both powers of two,
    /// `min_block <= len`).
    pub fn new(len: u64, min_block: u32) -> Buddy {
        assert!(len.is_power_of_two() && min_block.is_power_of_two());
        assert!(u64::from(min_block) <= len);
        let units = len / u64::from(min_block);
        let max_order = units.trailing_zeros();
        let mut free = vec![BTreeSet::new(); max_order as usize + 1];
        free[max_order as usize].insert(0);
        Buddy {
            min_block,
            max_order,
            free,
            allocated: Default::default(),
            free_units: units,
        }
    }

    pub fn capacity(&self) -> u64 {
        u64::from(self.min_block) << self.max_order
    }

    pub fn free_bytes(&self) -> u64 {
        self.free_units * u64::from(self.min_block)
    }

    /// A block of at least `bytes` (> 0), or None when no free block is large enough.
    pub fn alloc(&mut self, bytes: u64) -> Option<Block> {
        if bytes == 0 || bytes > self.capacity() {
            return None;
        }
        let units = bytes.div_ceil(u64::from(self.min_block));
        let order = units.next_power_of_two().trailing_zeros();
        let from = (order..=self.max_order).find(|&o| !self.free[o as usize].is_empty())?;
        // Lowest address first keeps allocations packed at the bottom of the buffer.
        let start = self.free[from as usize].pop_first()?;
        for o in (order..from).rev() {
            self.free[o as usize].insert(start + (1 << o));
        }
        self.allocated.insert(start, order);
        self.free_units -= 1 << order;
        Some(Block {
            offset: u64::from(start) * u64::from(self.min_block),
            len: u64::from(self.min_block) << order,
        })
    }

    /// Returns a block from [`alloc`](Self::alloc). Freeing anything else is a bug in
    /// the caller and panics: the allocator lives in the client's private memory, so no
    /// peer can reach it.
    pub fn free(&mut self, block: Block) {
        let mut start = (block.offset / u64::from(self.min_block)) as u32;
        let mut order = self
            .allocated
            .remove(&start)
            .expect("freeing a block that is not allocated");
        self.free_units += 1 << order;
        while order < self.max_order {
            let buddy = start ^ (1 << order);
            if !self.free[order as usize].remove(&buddy) {
                break;
            }
            start = start.min(buddy);
            order += 1;
        }
        self.free[order as usize].insert(start);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[derive(Debug, Clone)]
    enum Op {
        Alloc(u64),
        Free(usize),
    }

    fn ops() -> impl Strategy<Value = Vec<Op>> {
        prop::collection::vec(
            prop_oneof![
                (1u64..70_000).prop_map(Op::Alloc),
                any::<usize>().prop_map(Op::Free),
            ],
            1..200,
        )
    }

    proptest! {
        /// Against a model of which bytes are taken: blocks never overlap, stay inside
        /// the buffer, are aligned to their size and large enough; an allocation fails
        /// only when no free aligned run of its size exists; freeing everything merges
        /// back into one block.
        #[test]
        fn never_overlaps_and_coalesces(ops in ops()) {
            const LEN: u64 = 256 * 1024;
            const MIN: u32 = 512;
            let mut buddy = Buddy::new(LEN, MIN);
            let mut taken = vec![false; (LEN / u64::from(MIN)) as usize];
            let mut live: Vec<Block> = Vec::new();
            for op in ops {
                match op {
                    Op::Alloc(bytes) => match buddy.alloc(bytes) {
                        Some(b) => {
                            prop_assert!(b.len >= bytes);
                            prop_assert!(b.len.is_power_of_two());
                            prop_assert_eq!(b.offset % b.len, 0);
                            prop_assert!(b.offset + b.len <= LEN);
                            let units = (b.offset / 512) as usize..((b.offset + b.len) / 512) as usize;
                            for u in units {
                                prop_assert!(!taken[u], "overlap at unit {}", u);
                                taken[u] = true;
                            }
                            live.push(b);
                        }
                        None => {
                            let size = bytes.div_ceil(512).next_power_of_two() as usize;
                            let fits = taken.chunks(size).any(|c| c.len() == size && c.iter().all(|t| !t));
                            prop_assert!(!fits, "refused {} bytes with a free aligned run", bytes);
                        }
                    },
                    Op::Free(i) if !live.is_empty() => {
                        let b = live.swap_remove(i % live.len());
                        taken[(b.offset / 512) as usize..((b.offset + b.len) / 512) as usize].fill(false);
                        buddy.free(b);
                    }
                    Op::Free(_) => {}
                }
                let model_free = taken.iter().filter(|t| !**t).count() as u64 * 512;
                prop_assert_eq!(buddy.free_bytes(), model_free);
            }
            for b in live.drain(..) {
                buddy.free(b);
            }
            prop_assert_eq!(buddy.alloc(LEN), Some(Block { offset: 0, len: LEN }));
        }
    }

    #[test]
    fn refuses_zero_and_oversized() {
        let mut b = Buddy::new(4096, 512);
        assert_eq!(b.alloc(0), None);
        assert_eq!(b.alloc(4097), None);
        assert_eq!(b.alloc(4096).map(|b| b.len), Some(4096));
        assert_eq!(b.alloc(1), None);
    }
}

//! A lease: a piece of the shared data buffer reserved for one command (the buddy
//! allocator's block), freed when dropped.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use crate::buddy::Block;
use crate::region::PROTOCOL_SECTOR;

use super::Shared;

impl Shared {
    /// Reserves `bytes` of the data buffer, or None while no free block is that large.
    pub(super) fn lease(self: &Arc<Shared>, bytes: u64) -> Option<Lease> {
        let block = {
            let mut buddy = self.buddy.lock();
            let block = buddy.alloc(bytes)?;
            self.free_bytes.store(buddy.free_bytes(), Ordering::Relaxed);
            block
        };
        Some(Lease {
            shared: self.clone(),
            block,
            len: bytes,
        })
    }
}

/// A piece of the data buffer reserved for one command; freed when dropped.
pub struct Lease {
    pub(super) shared: Arc<Shared>,
    pub(super) block: Block,
    pub(super) len: u64,
}

impl Lease {
    #[inline]
    pub fn len(&self) -> u64 {
        self.len
    }

    #[inline]
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Index of the lease in the data buffer, in sectors (the SQ entry's buffer field).
    #[inline]
    pub fn index(&self) -> u32 {
        (self.block.offset / PROTOCOL_SECTOR) as u32
    }

    #[inline]
    pub fn write(&mut self, at: u64, src: &[u8]) {
        assert!(at + src.len() as u64 <= self.len, "write past the lease");
        self.shared.region.db_write(self.block.offset + at, src);
    }

    /// The same block, used for `len` bytes (at most the block's size).
    #[inline]
    pub(super) fn resized(mut self, len: u64) -> Lease {
        debug_assert!(len <= self.block.len);
        self.len = len;
        self
    }

    #[inline]
    pub fn read(&self, at: u64, dst: &mut [u8]) {
        assert!(at + dst.len() as u64 <= self.len, "read past the lease");
        self.shared.region.db_read(self.block.offset + at, dst);
    }

    /// The lease's bytes where they are, for a lease no command is using: a held
    /// `Lease` is one (while a command runs the queue keeps its lease).
    #[inline]
    pub(super) fn in_place(&self) -> &[u8] {
        // SAFETY: the buddy allocator gave this block to this lease alone, and no
        // command naming it is in flight (above), so the server does not write it
        // while the borrow of self lives.
        unsafe {
            self.shared
                .region
                .db_slice(self.block.offset, self.len as usize)
        }
    }
}

impl Drop for Lease {
    fn drop(&mut self) {
        let mut buddy = self.shared.buddy.lock();
        buddy.free(self.block);
        self.shared
            .free_bytes
            .store(buddy.free_bytes(), Ordering::Relaxed);
    }
}

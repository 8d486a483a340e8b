//! A volatile target in memory: for tests, and as the "RAM, nothing durable" baseline.

use parking_lot::RwLock;

use crate::{
    check_range, BlockSizes, BlockTarget, Capabilities, Error, FuaSupport, Result, WriteFlags,
    ZeroFlags,
};

/// `size` bytes in one buffer under a reader-writer lock. Nothing it holds survives the
/// process: FUA and flush have nothing to do.
pub struct MemTarget {
    bytes: RwLock<Vec<u8>>,
    read_only: bool,
}

impl MemTarget {
    /// A zeroed target of `size` bytes.
    pub fn new(size: usize) -> MemTarget {
        MemTarget {
            bytes: RwLock::new(vec![0; size]),
            read_only: false,
        }
    }

    /// A read-only target holding `bytes`.
    pub fn read_only(bytes: Vec<u8>) -> MemTarget {
        MemTarget {
            bytes: RwLock::new(bytes),
            read_only: true,
        }
    }

    fn writable(&self, offset: u64, len: u64) -> Result<()> {
        check_range(self.size(), offset, len)?;
        if self.read_only {
            return Err(Error::ReadOnly);
        }
        Ok(())
    }

    fn fill_zero(&self, offset: u64, len: u64) {
        self.bytes.write()[offset as usize..(offset + len) as usize].fill(0);
    }
}

impl BlockTarget for MemTarget {
    fn size(&self) -> u64 {
        self.bytes.read().len() as u64
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities {
            read_only: self.read_only,
            // Volatile: every completed write is as durable as it will ever be.
            fua: FuaSupport::Native,
            flush: false,
            multi_conn: true,
            trim: true,
            zero: true,
            fast_zero: true,
            block_sizes: BlockSizes {
                minimum: 1,
                preferred: 4096,
                maximum: 32 << 20,
            },
        }
    }

    fn read_with(&self, offset: u64, len: usize, sink: &mut dyn FnMut(usize, &[u8])) -> Result<()> {
        check_range(self.size(), offset, len as u64)?;
        let bytes = self.bytes.read();
        sink(0, &bytes[offset as usize..offset as usize + len]);
        Ok(())
    }

    fn write_at(&self, offset: u64, data: &[u8], _flags: WriteFlags) -> Result<()> {
        self.writable(offset, data.len() as u64)?;
        self.bytes.write()[offset as usize..offset as usize + data.len()].copy_from_slice(data);
        Ok(())
    }

    fn flush(&self) -> Result<()> {
        Ok(())
    }

    fn discard(&self, offset: u64, len: u64, _flags: WriteFlags) -> Result<()> {
        self.writable(offset, len)?;
        self.fill_zero(offset, len);
        Ok(())
    }

    fn write_zeroes(&self, offset: u64, len: u64, _flags: ZeroFlags) -> Result<()> {
        self.writable(offset, len)?;
        self.fill_zero(offset, len);
        Ok(())
    }
}

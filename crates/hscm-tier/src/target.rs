//! The tiered volume as a [`BlockTarget`]: what the ring, NBD and FUSE front-ends serve.

use hscm_block::{BlockSizes, BlockTarget, Capabilities, FuaSupport, WriteFlags, ZeroFlags};

use crate::{Durability, Error, TieredVolume};

fn block_error(e: Error) -> hscm_block::Error {
    match e {
        Error::OutOfRange { offset, len, size } => {
            hscm_block::Error::OutOfRange { offset, len, size }
        }
        Error::Failed(f) => hscm_block::Error::Failed {
            reason: f.reason,
            errno: f.errno,
        },
        Error::Io { what, source } => hscm_block::Error::Io { what, source },
        other => hscm_block::Error::Io {
            what: "tiered volume request".into(),
            source: std::io::Error::other(other.to_string()),
        },
    }
}

impl BlockTarget for TieredVolume {
    fn size(&self) -> u64 {
        TieredVolume::size(self)
    }

    fn capabilities(&self) -> Capabilities {
        let block = self.config().block;
        Capabilities {
            read_only: false,
            // A FUA write waits for its own group-committed sync, no more.
            fua: FuaSupport::Native,
            flush: self.config().durability == Durability::OnFlush,
            multi_conn: true,
            trim: true,
            zero: true,
            // Zeroes are written like data: no faster than writing them.
            fast_zero: false,
            block_sizes: BlockSizes {
                minimum: 1,
                preferred: block,
                maximum: 32 << 20,
            },
        }
    }

    fn read_with(
        &self,
        offset: u64,
        len: usize,
        sink: &mut dyn FnMut(usize, &[u8]),
    ) -> hscm_block::Result<()> {
        TieredVolume::read_with(self, offset, len, sink).map_err(block_error)
    }

    fn write_at(&self, offset: u64, data: &[u8], flags: WriteFlags) -> hscm_block::Result<()> {
        TieredVolume::write_at(self, offset, data, flags).map_err(block_error)
    }

    fn flush(&self) -> hscm_block::Result<()> {
        TieredVolume::flush(self).map_err(block_error)
    }

    fn discard(&self, offset: u64, len: u64, flags: WriteFlags) -> hscm_block::Result<()> {
        TieredVolume::write_zeroes(self, offset, len, WriteFlags { fua: flags.fua })
            .map_err(block_error)
    }

    fn write_zeroes(&self, offset: u64, len: u64, flags: ZeroFlags) -> hscm_block::Result<()> {
        if flags.fast_only {
            return Err(hscm_block::Error::Unsupported(
                "fast zeroing: the tiered volume writes zeroes like data",
            ));
        }
        TieredVolume::write_zeroes(self, offset, len, WriteFlags { fua: flags.fua })
            .map_err(block_error)
    }

    /// All data, without reading: finding zeroes would read every block of the range
    /// from home (up to the whole volume, far larger than RAM) and push the hot set
    /// out of DRAM, for a hint a client can live without ("data" is always true).
    fn extents(
        &self,
        offset: u64,
        len: u64,
        _only_first: bool,
    ) -> hscm_block::Result<Vec<hscm_block::Extent>> {
        hscm_block::check_range(self.size(), offset, len)?;
        Ok(vec![hscm_block::Extent {
            len,
            kind: hscm_block::ExtentKind::Data,
        }])
    }
}

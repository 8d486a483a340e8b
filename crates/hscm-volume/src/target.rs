//! The volume as a [`BlockTarget`]: what every front-end (the ring, NBD, FUSE) serves.

use std::io;

use hscm_block::{BlockSizes, BlockTarget, Capabilities, FuaSupport, WriteFlags, ZeroFlags};

use crate::{Durability, Error, Volume};

/// The block layer's error for one of the volume's.
fn block_error(e: Error) -> hscm_block::Error {
    match e {
        Error::OutOfRange { offset, len, size } => {
            hscm_block::Error::OutOfRange { offset, len, size }
        }
        Error::ReadOnly { .. } => hscm_block::Error::ReadOnly,
        Error::Failed { reason, errno } => hscm_block::Error::Failed { reason, errno },
        Error::Io { what, source } => hscm_block::Error::Io { what, source },
        other => hscm_block::Error::Io {
            what: "volume request".into(),
            source: io::Error::other(other.to_string()),
        },
    }
}

impl Volume {
    /// Zeroes `[offset, offset + len)` in RAM and on the device: zero writes that reach
    /// the device, then one sync when the request or the volume's durability asks for
    /// it, so an acknowledged discard on an `Immediate` volume survives a power cut as
    /// any acknowledged write does.
    pub fn zero_range(&self, offset: u64, len: u64, fua: bool) -> crate::Result<()> {
        hscm_block::check_range(self.size(), offset, len).map_err(|_| Error::OutOfRange {
            offset,
            len,
            size: self.size(),
        })?;
        static ZEROS: [u8; 1 << 20] = [0; 1 << 20];
        let mut at = offset;
        while at < offset + len {
            let n = (offset + len - at).min(ZEROS.len() as u64);
            self.write_at_with(at, &ZEROS[..n as usize], Durability::OnFlush)?;
            at += n;
        }
        if fua || self.durability() == Durability::Immediate {
            self.flush()?;
        }
        Ok(())
    }
}

impl BlockTarget for Volume {
    fn size(&self) -> u64 {
        Volume::size(self)
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities {
            read_only: self.is_read_only(),
            // A FUA write is an Immediate write: one group-committed sync (in a
            // write-back session, one write-back pass), no more.
            fua: FuaSupport::Native,
            flush: self.durability().needs_flush(),
            // flush() makes every write completed before it durable, whoever made it.
            multi_conn: true,
            trim: true,
            zero: true,
            // Zeroes are written to the device like any data.
            fast_zero: false,
            block_sizes: BlockSizes {
                // Any byte offset and length: the volume completes partial sectors
                // from RAM.
                minimum: 1,
                preferred: crate::IO_ALIGN as u32,
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
        Volume::read_with(self, offset, len, sink).map_err(block_error)
    }

    fn read_at(&self, offset: u64, buf: &mut [u8]) -> hscm_block::Result<()> {
        Volume::read_at(self, offset, buf).map_err(block_error)
    }

    fn write_at(&self, offset: u64, data: &[u8], flags: WriteFlags) -> hscm_block::Result<()> {
        let durability = if flags.fua {
            Durability::Immediate
        } else {
            self.durability()
        };
        self.write_at_with(offset, data, durability)
            .map_err(block_error)
    }

    /// Started where the write is immediate (FUA, or an immediate volume) and the
    /// volume can start it ([`Volume::can_start_write`]): a network home.
    fn start_write(
        &self,
        offset: u64,
        data: &[u8],
        flags: WriteFlags,
        done: hscm_block::WriteDone,
    ) -> Result<(), hscm_block::WriteDone> {
        let durability = if flags.fua {
            Durability::Immediate
        } else {
            self.durability()
        };
        if !self.can_start_write(offset, data.len(), durability) {
            return Err(done);
        }
        Volume::start_write(
            self,
            offset,
            data,
            Box::new(move |r| done(r.map_err(block_error))),
        );
        Ok(())
    }

    fn flush(&self) -> hscm_block::Result<()> {
        Volume::flush(self).map_err(block_error)
    }

    fn discard(&self, offset: u64, len: u64, flags: WriteFlags) -> hscm_block::Result<()> {
        self.zero_range(offset, len, flags.fua).map_err(block_error)
    }

    fn write_zeroes(&self, offset: u64, len: u64, flags: ZeroFlags) -> hscm_block::Result<()> {
        if flags.fast_only {
            hscm_block::check_range(Volume::size(self), offset, len)?;
            return Err(hscm_block::Error::Unsupported(
                "fast zeroes: the volume writes zeroes like any data",
            ));
        }
        self.zero_range(offset, len, flags.fua).map_err(block_error)
    }
}

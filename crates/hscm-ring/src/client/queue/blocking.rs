//! A queue's blocking calls: a read or write of any length, split into chunks that are
//! pipelined through the queue, with the last lease kept for the next call.

use hscm_block::WriteFlags;

use crate::error::{Error, Result};
use crate::region::PROTOCOL_SECTOR;

use super::{Lease, Op, Queue};

/// One blocking transfer, split into chunks by [`Queue::io`].
struct Transfer {
    write: bool,
    /// Byte-range commands (any offset/length) rather than whole sectors.
    bytes_mode: bool,
    offset: u64,
    len: usize,
    flags: WriteFlags,
}

impl Queue {
    fn io(
        &mut self,
        t: Transfer,
        mut fill: impl FnMut(usize, &mut Lease),
        mut take: impl FnMut(usize, &Lease),
    ) -> Result<()> {
        let Transfer {
            write,
            bytes_mode,
            offset,
            len,
            flags,
        } = t;
        if !bytes_mode && (offset % PROTOCOL_SECTOR != 0 || len as u64 % PROTOCOL_SECTOR != 0) {
            return Err(Error::Invalid(format!(
                "sector I/O of {len} bytes at {offset} is not in whole 512-byte sectors"
            )));
        }
        let chunk = self.chunk as usize;
        let pieces = len.div_ceil(chunk);
        let mut piece_of = std::mem::take(&mut self.piece_of);
        piece_of.resize(self.pending.len(), usize::MAX);
        let mut next = 0;
        let mut done = 0;
        let mut first_error: Option<Error> = None;
        while done < pieces {
            while first_error.is_none() && next < pieces && (self.free_slots.len() as u32) > 0 {
                let at = next * chunk;
                let n = chunk.min(len - at);
                let mut lease = if self.in_flight() == 0 {
                    self.spare_or_wait(n as u64)?
                } else if let Some(l) = self.spare.take_if(|l| l.block.len >= n as u64) {
                    l.resized(n as u64)
                } else {
                    match self.client_lease(n as u64) {
                        Some(l) => l,
                        None => break,
                    }
                };
                if write {
                    fill(at, &mut lease);
                }
                let pos = offset + at as u64;
                let op = match (write, bytes_mode) {
                    (false, false) => Op::Read {
                        sector: pos / PROTOCOL_SECTOR,
                        count: (n as u64 / PROTOCOL_SECTOR) as u32,
                    },
                    (true, false) => Op::Write {
                        sector: pos / PROTOCOL_SECTOR,
                        count: (n as u64 / PROTOCOL_SECTOR) as u32,
                        flags,
                    },
                    (false, true) => Op::ReadBytes {
                        offset: pos,
                        len: n as u32,
                    },
                    (true, true) => Op::WriteBytes {
                        offset: pos,
                        len: n as u32,
                        flags,
                    },
                };
                let id = self.submit(op, Some(lease))?;
                piece_of[(id & 0xffff) as usize] = next;
                next += 1;
            }
            if self.in_flight() == 0 {
                break;
            }
            let c = self.complete()?;
            let piece = piece_of[(c.id & 0xffff) as usize];
            done += 1;
            match c.result {
                Ok(_) if !write => {
                    if let Some(l) = &c.lease {
                        take(piece * chunk, l);
                    }
                }
                Ok(_) => {}
                Err(s) => {
                    first_error.get_or_insert(Error::Command(s));
                }
            }
            if let Some(l) = c.lease {
                self.keep_spare(l);
            }
            if first_error.is_some() && next < pieces {
                // Stop issuing; collect what is in flight.
                self.drain();
                break;
            }
        }
        self.piece_of = piece_of;
        match first_error {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }

    /// Reads whole sectors starting at `sector` into `buf` (a multiple of 512 bytes).
    pub fn read(&mut self, sector: u64, buf: &mut [u8]) -> Result<()> {
        self.read_into(false, sector_offset(sector)?, buf)
    }

    /// Reads any byte range of the volume.
    pub fn read_bytes(&mut self, offset: u64, buf: &mut [u8]) -> Result<()> {
        self.read_into(true, offset, buf)
    }

    /// Writes whole sectors. `WriteFlags::FUA` makes the write durable when this
    /// returns; without it the target's own durability applies (see docs/design.md).
    pub fn write(&mut self, sector: u64, data: &[u8], flags: WriteFlags) -> Result<()> {
        self.write_from(false, sector_offset(sector)?, data, flags)
    }

    /// Writes any byte range of the volume.
    pub fn write_bytes(&mut self, offset: u64, data: &[u8], flags: WriteFlags) -> Result<()> {
        self.write_from(true, offset, data, flags)
    }

    /// Reads `len` bytes at byte `offset` and hands them to `f` where the server put
    /// them, in this client's data buffer: the only copy is the server's, from the
    /// volume's RAM (the paper's single transfer into the host buffer). One command,
    /// whatever the split size: pipelining pieces pays only when each is copied out
    /// while the next is read. Needs `len` contiguous bytes of the data buffer and no
    /// other command in flight on this queue.
    pub fn read_in_place<R>(
        &mut self,
        offset: u64,
        len: usize,
        f: impl FnOnce(&[u8]) -> R,
    ) -> Result<R> {
        if len == 0 {
            return Ok(f(&[]));
        }
        let db_len = self.shared.region.geometry().db_len;
        if len as u64 > db_len || len > u32::MAX as usize {
            return Err(Error::Invalid(format!(
                "an in-place read of {len} bytes needs that much contiguous data buffer; this client's is {db_len} bytes (read_bytes splits instead)"
            )));
        }
        if self.in_flight() > 0 {
            return Err(Error::Invalid(format!(
                "an in-place read needs an idle queue; {} commands are in flight (reap them first)",
                self.in_flight()
            )));
        }
        let lease = self.spare_or_wait(len as u64)?;
        self.submit(
            Op::ReadBytes {
                offset,
                len: len as u32,
            },
            Some(lease),
        )?;
        let c = self.complete()?;
        let lease = c.lease.ok_or_else(|| {
            Error::Protocol(format!(
                "completion {:#x} came back without its lease",
                c.id
            ))
        })?;
        let out = match c.result {
            Ok(n) if n as usize == len => Ok(f(lease.in_place())),
            Ok(n) => Err(Error::Protocol(format!(
                "read of {len} bytes at {offset} completed with {n}"
            ))),
            Err(s) => Err(Error::Command(s)),
        };
        self.keep_spare(lease);
        out
    }

    fn read_into(&mut self, bytes_mode: bool, offset: u64, buf: &mut [u8]) -> Result<()> {
        let t = Transfer {
            write: false,
            bytes_mode,
            offset,
            len: buf.len(),
            flags: WriteFlags::NONE,
        };
        // Each lease holds exactly its piece.
        self.io(
            t,
            |_, _| {},
            |at, l| l.read(0, &mut buf[at..at + l.len() as usize]),
        )
    }

    fn write_from(
        &mut self,
        bytes_mode: bool,
        offset: u64,
        data: &[u8],
        flags: WriteFlags,
    ) -> Result<()> {
        let t = Transfer {
            write: true,
            bytes_mode,
            offset,
            len: data.len(),
            flags,
        };
        self.io(
            t,
            |at, l| l.write(0, &data[at..at + l.len() as usize]),
            |_, _| {},
        )
    }

    fn single(&mut self, op: Op) -> Result<()> {
        self.submit(op, None)?;
        match self.complete()?.result {
            Ok(_) => Ok(()),
            Err(s) => Err(Error::Command(s)),
        }
    }

    /// Makes every completed write durable.
    pub fn flush(&mut self) -> Result<()> {
        self.single(Op::Flush)
    }

    /// The sectors read as zeros afterwards.
    pub fn discard(&mut self, sector: u64, count: u32, flags: WriteFlags) -> Result<()> {
        self.single(Op::Discard {
            sector,
            count,
            flags,
        })
    }
}

fn sector_offset(sector: u64) -> Result<u64> {
    sector
        .checked_mul(PROTOCOL_SECTOR)
        .ok_or_else(|| Error::Invalid(format!("sector {sector} is beyond any volume")))
}

//! Commands and statuses, and the server's parsing of a submission entry. Parsing is a
//! pure function of the entry and the region's geometry, so it is fuzzed on its own.

use hscm_block::WriteFlags;

use crate::region::{Geometry, PROTOCOL_SECTOR};
use crate::ring::SqEntry;
pub use crate::status::Status;

pub const OP_READ: u8 = 1;
pub const OP_WRITE: u8 = 2;
pub const OP_FLUSH: u8 = 3;
pub const OP_DISCARD: u8 = 4;
pub const OP_READ_BYTES: u8 = 5;
pub const OP_WRITE_BYTES: u8 = 6;

/// Force unit access: the write is durable when it completes.
pub const FLAG_FUA: u8 = 1;

/// What a valid entry asks for, in bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Request {
    /// Volume bytes `[offset, offset+len)` into buffer bytes `[buffer, buffer+len)`.
    Read {
        offset: u64,
        len: u64,
        buffer: u64,
    },
    Write {
        offset: u64,
        len: u64,
        buffer: u64,
        flags: WriteFlags,
    },
    Flush,
    Discard {
        offset: u64,
        len: u64,
        flags: WriteFlags,
    },
}

impl Request {
    /// The data-buffer bytes the request uses, if any.
    pub fn buffer_range(&self) -> Option<std::ops::Range<u64>> {
        match *self {
            Request::Read { len, buffer, .. } | Request::Write { len, buffer, .. } => {
                Some(buffer..buffer + len)
            }
            _ => None,
        }
    }
}

/// Validates one entry against the region. Never panics, whatever the entry holds.
pub fn parse(e: &SqEntry, g: &Geometry) -> Result<Request, Status> {
    if e.reserved16 != 0 || e.reserved32 != 0 || e.flags & !FLAG_FUA != 0 {
        return Err(Status::BadField);
    }
    let fua = e.flags & FLAG_FUA != 0;
    let sectors = |start: u64, count: u32| -> Result<(u64, u64), Status> {
        if count == 0 {
            return Err(Status::BadCount);
        }
        let end = start
            .checked_add(u64::from(count))
            .ok_or(Status::OutOfRange)?;
        if end > g.volume_sectors() {
            return Err(Status::OutOfRange);
        }
        Ok((start * PROTOCOL_SECTOR, u64::from(count) * PROTOCOL_SECTOR))
    };
    let bytes = |offset: u64, len: u32| -> Result<(u64, u64), Status> {
        if len == 0 {
            return Err(Status::BadCount);
        }
        let end = offset
            .checked_add(u64::from(len))
            .ok_or(Status::OutOfRange)?;
        if end > g.volume_size {
            return Err(Status::OutOfRange);
        }
        Ok((offset, u64::from(len)))
    };
    let buffer = |len: u64| -> Result<u64, Status> {
        if len > g.db_len {
            return Err(Status::BadCount);
        }
        let start = u64::from(e.buffer) * PROTOCOL_SECTOR;
        match start.checked_add(len) {
            Some(end) if end <= g.db_len => Ok(start),
            _ => Err(Status::BadBuffer),
        }
    };
    match e.opcode {
        OP_READ | OP_READ_BYTES | OP_WRITE | OP_WRITE_BYTES => {
            let (offset, len) = if matches!(e.opcode, OP_READ | OP_WRITE) {
                // A count larger than the buffer is BadCount before it is OutOfRange.
                if u64::from(e.count) * PROTOCOL_SECTOR > g.db_len {
                    return Err(Status::BadCount);
                }
                sectors(e.start, e.count)?
            } else {
                if u64::from(e.count) > g.db_len {
                    return Err(Status::BadCount);
                }
                bytes(e.start, e.count)?
            };
            let buffer = buffer(len)?;
            Ok(if matches!(e.opcode, OP_READ | OP_READ_BYTES) {
                if fua {
                    return Err(Status::BadField);
                }
                Request::Read {
                    offset,
                    len,
                    buffer,
                }
            } else {
                Request::Write {
                    offset,
                    len,
                    buffer,
                    flags: WriteFlags { fua },
                }
            })
        }
        OP_FLUSH => {
            if e.start != 0 || e.count != 0 || e.buffer != 0 || fua {
                return Err(Status::BadField);
            }
            Ok(Request::Flush)
        }
        OP_DISCARD => {
            if e.buffer != 0 {
                return Err(Status::BadField);
            }
            let (offset, len) = sectors(e.start, e.count)?;
            Ok(Request::Discard {
                offset,
                len,
                flags: WriteFlags { fua },
            })
        }
        _ => Err(Status::BadOpcode),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn g() -> Geometry {
        Geometry {
            queues: 1,
            depth: 8,
            db_len: 64 * 1024,
            volume_size: 1 << 20,
        }
    }

    fn read(start: u64, count: u32, buffer: u32) -> SqEntry {
        SqEntry {
            opcode: OP_READ,
            start,
            count,
            buffer,
            ..Default::default()
        }
    }

    #[test]
    fn each_garbage_field_gets_its_status() {
        let g = g();
        assert_eq!(
            parse(&read(0, 8, 0), &g),
            Ok(Request::Read {
                offset: 0,
                len: 4096,
                buffer: 0
            })
        );
        assert_eq!(
            parse(
                &SqEntry {
                    opcode: 99,
                    ..read(0, 8, 0)
                },
                &g
            ),
            Err(Status::BadOpcode)
        );
        assert_eq!(
            parse(
                &SqEntry {
                    opcode: 0,
                    ..read(0, 8, 0)
                },
                &g
            ),
            Err(Status::BadOpcode)
        );
        assert_eq!(parse(&read(0, 0, 0), &g), Err(Status::BadCount));
        assert_eq!(parse(&read(0, u32::MAX, 0), &g), Err(Status::BadCount));
        assert_eq!(parse(&read(0, 129, 0), &g), Err(Status::BadCount));
        assert_eq!(parse(&read(0, 8, 121), &g), Err(Status::BadBuffer));
        assert_eq!(parse(&read(0, 8, u32::MAX), &g), Err(Status::BadBuffer));
        assert_eq!(parse(&read(2047, 2, 0), &g), Err(Status::OutOfRange));
        assert_eq!(parse(&read(u64::MAX, 8, 0), &g), Err(Status::OutOfRange));
        assert_eq!(
            parse(
                &SqEntry {
                    flags: 2,
                    ..read(0, 8, 0)
                },
                &g
            ),
            Err(Status::BadField)
        );
        assert_eq!(
            parse(
                &SqEntry {
                    flags: FLAG_FUA,
                    ..read(0, 8, 0)
                },
                &g
            ),
            Err(Status::BadField)
        );
        assert_eq!(
            parse(
                &SqEntry {
                    reserved32: 1,
                    ..read(0, 8, 0)
                },
                &g
            ),
            Err(Status::BadField)
        );
        let flush = SqEntry {
            opcode: OP_FLUSH,
            ..Default::default()
        };
        assert_eq!(parse(&flush, &g), Ok(Request::Flush));
        assert_eq!(
            parse(&SqEntry { count: 1, ..flush }, &g),
            Err(Status::BadField)
        );
        let rb = SqEntry {
            opcode: OP_READ_BYTES,
            start: (1 << 20) - 3,
            count: 3,
            ..Default::default()
        };
        assert_eq!(
            parse(&rb, &g),
            Ok(Request::Read {
                offset: (1 << 20) - 3,
                len: 3,
                buffer: 0
            })
        );
        assert_eq!(
            parse(&SqEntry { count: 4, ..rb }, &g),
            Err(Status::OutOfRange)
        );
        let d = SqEntry {
            opcode: OP_DISCARD,
            start: 0,
            count: 2048,
            flags: FLAG_FUA,
            ..Default::default()
        };
        assert_eq!(
            parse(&d, &g),
            Ok(Request::Discard {
                offset: 0,
                len: 1 << 20,
                flags: WriteFlags::FUA
            })
        );
    }

    proptest::proptest! {
        /// Whatever the entry, a parsed request stays inside the buffer and the volume.
        #[test]
        fn parsed_requests_stay_in_bounds(
            opcode in 0u8..8, flags in 0u8..4, count in proptest::prelude::any::<u32>(),
            start in proptest::prelude::any::<u64>(), buffer in proptest::prelude::any::<u32>(),
        ) {
            let g = g();
            let e = SqEntry { opcode, flags, count, start: start % (4 << 20), buffer: buffer % 256, ..Default::default() };
            if let Ok(r) = parse(&e, &g) {
                if let Some(b) = r.buffer_range() {
                    proptest::prop_assert!(b.end <= g.db_len && b.start < b.end);
                }
                match r {
                    Request::Read { offset, len, .. } | Request::Write { offset, len, .. }
                    | Request::Discard { offset, len, .. } => {
                        proptest::prop_assert!(len > 0 && offset + len <= g.volume_size);
                    }
                    Request::Flush => {}
                }
            }
        }
    }
}

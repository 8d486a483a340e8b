//! A command's completion status: a leaf that errors, the wire format and the C
//! interface all name, so none of them depends on another through it.

/// Completion statuses. Zero is success; the rest name what was wrong.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u32)]
#[non_exhaustive]
pub enum Status {
    Ok = 0,
    BadOpcode = 1,
    /// A reserved field or an unknown flag bit is set.
    BadField = 2,
    /// Zero sectors/bytes, or more than the data buffer holds.
    BadCount = 3,
    /// The buffer range lies (partly) outside the data buffer.
    BadBuffer = 4,
    /// The buffer overlaps another command the server holds at the same time.
    BufferBusy = 5,
    /// The sector or byte range lies (partly) outside the volume.
    OutOfRange = 6,
    ReadOnly = 7,
    /// The volume failed to persist (it is read-only from now on) or to read.
    IoError = 8,
}

impl Status {
    pub fn from_code(code: u32) -> Option<Status> {
        use Status::*;
        Some(match code {
            0 => Ok,
            1 => BadOpcode,
            2 => BadField,
            3 => BadCount,
            4 => BadBuffer,
            5 => BufferBusy,
            6 => OutOfRange,
            7 => ReadOnly,
            8 => IoError,
            _ => return None,
        })
    }

    pub fn describe(self) -> &'static str {
        match self {
            Status::Ok => "ok",
            Status::BadOpcode => "unknown opcode",
            Status::BadField => "reserved field or unknown flag set",
            Status::BadCount => "count is zero or larger than the data buffer",
            Status::BadBuffer => "buffer range outside the data buffer",
            Status::BufferBusy => "buffer overlaps another command in flight",
            Status::OutOfRange => "range outside the volume",
            Status::ReadOnly => "volume is read-only",
            Status::IoError => "volume I/O error",
        }
    }
}

//! hscm-fs: a POSIX file system on any [`BlockTarget`] (the durable RAM volume first).
//!
//! The whole of the metadata lives in RAM, as the volume's data does; the target holds
//! it as a checkpoint plus a log of the edits made since. File data lives in 4 KiB
//! blocks of the target and is read straight from it (for the volume: a copy out of
//! its RAM). Mounting reads the checkpoint and replays the log: metadata only, so it
//! takes the same time whatever the volume's size, while the volume warms its data.
//!
//! Crash consistency (docs/fs-format.md has the layout, docs/design.md the contract):
//! an operation's edits go to the log as one checksummed record; data written to
//! newly allocated blocks is made durable before the record that maps them, so a
//! crash never exposes stale blocks; blocks freed by an operation are reused only
//! after the record that freed them is durable. `Durability::Immediate` commits every
//! operation before it returns; `Durability::OnFlush` commits at `fsync` (any fsync
//! commits everything, which is stronger than POSIX asks).
//!
//! The API is the FUSE low-level one (inode numbers, the kernel checks permissions
//! with `default_permissions`), so the FUSE front-end only translates.

mod alloc;

mod format;
mod fs;
mod meta;

pub use format::{looks_formatted, Geometry, BLOCK, FORMAT_VERSION};
#[doc(hidden)]
pub use fs::{reencode_for_fuzzing, replay_for_fuzzing};
pub use fs::{
    Allocate, DropSetid, Durability, FileRam, FileSystem, MountOptions, Owner, RamBacking,
    RamOptions, RamUsage, RenameFlags, SetAttr, StatFs, WriteOptions, DEFAULT_DIRTY_MAX, NO_GROUP,
    RAM_BUDGET_XATTR, XATTR_BYTES_PER_INODE,
};
pub use meta::{Attr, Kind, Time, ROOT};

/// What went wrong, with the errno a file system call returns for it.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    #[error("no such file or directory")]
    NotFound,
    #[error("already exists")]
    Exists,
    #[error("not a directory")]
    NotDir,
    #[error("is a directory")]
    IsDir,
    #[error("directory not empty")]
    NotEmpty,
    #[error("no space left: {0}")]
    NoSpace(String),
    #[error("name too long ({0} bytes, at most 255)")]
    NameTooLong(usize),
    #[error("invalid argument: {0}")]
    Invalid(String),
    #[error("no such attribute")]
    NoAttribute,
    #[error("not supported: {0}")]
    Unsupported(&'static str),
    #[error("too many links")]
    TooManyLinks,
    #[error("the target holds no hscm file system (no superblock: create it with --fs)")]
    NotFormatted,
    #[error(
        "the file system is format version {found}; this hscm reads version {supported} and older"
    )]
    NewerFormat { found: u32, supported: u32 },
    #[error("the file system is damaged: {0}")]
    Corrupt(String),
    #[error("the file system refuses writes: {0}")]
    Failed(String),
    #[error("the file system is read-only: {0}")]
    ReadOnly(String),
    #[error(transparent)]
    Target(#[from] hscm_block::Error),
}

impl Error {
    /// The errno for a file system call.
    pub fn errno(&self) -> i32 {
        match self {
            Error::NotFound => 2,        // ENOENT
            Error::Exists => 17,         // EEXIST
            Error::NotDir => 20,         // ENOTDIR
            Error::IsDir => 21,          // EISDIR
            Error::NotEmpty => 39,       // ENOTEMPTY
            Error::NoSpace(_) => 28,     // ENOSPC
            Error::NameTooLong(_) => 36, // ENAMETOOLONG
            Error::Invalid(_) => 22,     // EINVAL
            Error::NoAttribute => 61,    // ENODATA
            Error::Unsupported(_) => 95, // EOPNOTSUPP
            Error::TooManyLinks => 31,   // EMLINK
            Error::Failed(_) => 30,      // EROFS: writes are refused, reads go on
            Error::ReadOnly(_) => 30,    // EROFS
            Error::Target(e) if e.errno() == 28 => 28,
            _ => 5, // EIO
        }
    }
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

/// A record or checkpoint that does not decode is damage to the file system.
impl From<hscm_durable::codec::CodecError> for Error {
    fn from(e: hscm_durable::codec::CodecError) -> Error {
        Error::Corrupt(e.0)
    }
}

use std::io;

/// What a request to a target can fail with. Front-ends map these onto their own
/// protocol's errors ([`Error::errno`] gives the POSIX error NBD and FUSE speak).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    #[error("request [{offset}, {offset}+{len}) is outside the target (size {size})")]
    OutOfRange { offset: u64, len: u64, size: u64 },
    /// The target was opened read-only; it refuses writes, discards and zeroes.
    #[error("the target is read-only")]
    ReadOnly,
    /// A device write or sync failed earlier: the target refuses writes from then on
    /// rather than acknowledge what it cannot persist. Reads may still work.
    #[error("the target failed and refuses writes: {reason}")]
    Failed { reason: String, errno: Option<i32> },
    /// A request failed on the device.
    #[error("{what}: {source}")]
    Io {
        what: String,
        #[source]
        source: io::Error,
    },
    /// The target does not do this (for example a FAST_ZERO it cannot make fast).
    #[error("not supported by this target: {0}")]
    Unsupported(&'static str),
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    /// The POSIX error a front-end reports for this failure.
    pub fn errno(&self) -> i32 {
        const EIO: i32 = 5;
        const EINVAL: i32 = 22;
        const EROFS: i32 = 30;
        const EOPNOTSUPP: i32 = 95;
        match self {
            Error::OutOfRange { .. } => EINVAL,
            Error::ReadOnly => EROFS,
            Error::Failed { .. } => EROFS,
            Error::Io { source, .. } => source.raw_os_error().unwrap_or(EIO),
            Error::Unsupported(_) => EOPNOTSUPP,
        }
    }

    /// True when the target refuses writes for good (read-only, or failed).
    pub fn refuses_writes(&self) -> bool {
        matches!(self, Error::ReadOnly | Error::Failed { .. })
    }
}

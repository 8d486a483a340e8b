use std::io;

/// Everything that can go wrong with a key-value store. Every variant names what and
/// where; none names a command-line flag (the binary adds those hints).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    #[error("{what}: {source}")]
    Io {
        what: String,
        #[source]
        source: io::Error,
    },
    #[error("invalid argument: {0}")]
    InvalidArgument(String),
    /// A device failed (or a background thread died): writes are refused from then on,
    /// naming the first failure. Reads keep working.
    #[error("writes are refused since a failure: {reason}")]
    Failed { reason: String, errno: Option<i32> },
    /// Another process has the store open (see docs/design.md, "One owner").
    #[error("{path} is in use: {}", hscm_durable::lock::describe_holder(.holder, .read_write))]
    Locked {
        path: String,
        holder: Option<hscm_durable::LockHolder>,
        read_write: bool,
    },
    /// A bad record with valid ones behind it: an open keeps only the records before
    /// it (see `record::scan`); `check` reports it, since it may also be damage.
    #[error("{path}: corrupt record at byte {offset}: {reason}: either a power cut left unacknowledged writes out of order, or acknowledged data was damaged; opening the store keeps only the records before byte {offset}")]
    CorruptRecord {
        path: String,
        offset: u64,
        reason: String,
    },
    #[error("key of {len} bytes: keys must be 1 to {max} bytes")]
    BadKey { len: usize, max: usize },
    /// Larger than the store's `KvOptions::max_value`.
    #[error("value of {len} bytes exceeds the store's limit of {max} bytes")]
    ValueTooLarge { len: usize, max: usize },
    #[error("{path}: device missing: {reason}")]
    MissingDevice { path: String, reason: String },
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    pub(crate) fn io(what: impl Into<String>, source: io::Error) -> Self {
        Error::Io {
            what: what.into(),
            source,
        }
    }
}

hscm_durable::engine_error_conversions!(Error);

use std::io;

/// Everything that can go wrong with a volume. Every variant names what and where.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    #[error("{what}: {source}")]
    Io {
        what: String,
        #[source]
        source: io::Error,
    },
    #[error("{path}: not an hscm volume (bad magic {found:02x?}; expected {expected:02x?})")]
    BadMagic {
        path: String,
        found: [u8; 8],
        expected: [u8; 8],
    },
    #[error("{path}: volume format version {found} is newer than this hscm understands (up to {supported}); upgrade hscm")]
    UnsupportedVersion {
        path: String,
        found: u32,
        supported: u32,
    },
    #[error("{path}: header checksum mismatch (stored {stored:#010x}, computed {computed:#010x}); the header is corrupt")]
    HeaderChecksum {
        path: String,
        stored: u32,
        computed: u32,
    },
    #[error("{path}: invalid geometry: {reason}")]
    BadGeometry { path: String, reason: String },
    #[error("{path}: backing store is {actual} bytes but the header needs exactly {expected} (header + {volume_size}-byte data area); it was {kind}")]
    SizeMismatch {
        path: String,
        expected: u64,
        actual: u64,
        volume_size: u64,
        kind: &'static str,
    },
    #[error("request [{offset}, {offset}+{len}) is outside the volume (size {size})")]
    OutOfRange { offset: u64, len: u64, size: u64 },
    /// Opened read-only: writes were never allowed.
    #[error("volume is read-only: {reason}")]
    ReadOnly { reason: String },
    /// A device write or sync failed (or a background thread died): writes are refused
    /// from then on, naming the first failure. Reads keep working.
    #[error("writes are refused since a failure: {reason}")]
    Failed { reason: String, errno: Option<i32> },
    /// Another opener holds the backing store (see docs/design.md, "One owner").
    #[error("{path} is in use: {}", hscm_durable::lock::describe_holder(.holder, .read_write))]
    Locked {
        path: String,
        holder: Option<hscm_durable::LockHolder>,
        /// What this opener asked for: read-write (true) or read-only.
        read_write: bool,
    },
    /// Creating a volume where a file already exists, without asking to overwrite it.
    #[error(
        "{path} already exists as {kind}: creating a volume there would overwrite what it holds"
    )]
    AlreadyExists { path: String, kind: &'static str },
    /// The whole volume lives in RAM: it cannot open where memory is smaller.
    #[error("{path}: the volume holds {:.1} GiB and keeps all of it in RAM, but this machine has {:.1} GiB of memory and swap", gib(*.volume_size), gib(*.memory))]
    TooLargeForMemory {
        path: String,
        volume_size: u64,
        memory: u64,
    },
    #[error("invalid argument: {0}")]
    InvalidArgument(String),
    /// Both checkpoint records are damaged: the journal has no trusted starting point.
    #[error("{path}: neither checkpoint slot holds a valid record (offsets 4096 and 8192): the checkpoint area is corrupt, so the journal cannot be replayed")]
    CorruptCheckpoint { path: String },
}

fn gib(bytes: u64) -> f64 {
    bytes as f64 / (1u64 << 30) as f64
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

/// A device that would not open or be created, as the volume's error: the same
/// variants (and so the same messages and hints) the volume reported before the device
/// layer moved to hscm-durable.
impl From<hscm_durable::device::DeviceError> for Error {
    fn from(e: hscm_durable::device::DeviceError) -> Error {
        use hscm_durable::device::DeviceError;
        match e {
            DeviceError::Io { what, source } => Error::Io { what, source },
            DeviceError::Lock(lock) => Error::from(lock),
            DeviceError::AlreadyExists { path, kind } => Error::AlreadyExists { path, kind },
            DeviceError::Invalid(why) => Error::InvalidArgument(why),
            other => Error::Io {
                what: "opening the device".into(),
                source: std::io::Error::other(other.to_string()),
            },
        }
    }
}

use std::io;

use hscm_durable::Failure;

/// What the tiered volume can fail with.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    #[error("request [{offset}, {offset}+{len}) is outside the volume (size {size})")]
    OutOfRange { offset: u64, len: u64, size: u64 },
    #[error("{what}: {source}")]
    Io {
        what: String,
        #[source]
        source: io::Error,
    },
    /// A device write or sync failed: writes are refused from then on.
    #[error(transparent)]
    Failed(#[from] Failure),
    #[error("{path}: not a tiered volume ({why})")]
    NotTiered { path: String, why: String },
    #[error("{path}: tiered volume header is damaged: {why}")]
    BadHeader { path: String, why: String },
    #[error("fast tier {path}: {why}")]
    FastTier { path: String, why: String },
    #[error("invalid tier configuration: {0}")]
    Config(String),
    /// The home or fast device would not open (in use, missing, not a file or device):
    /// the device layer's error, printed as itself and kept as the source.
    #[error("{0}")]
    Device(#[from] hscm_durable::device::DeviceError),
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    pub(crate) fn io(what: impl Into<String>, source: io::Error) -> Error {
        Error::Io {
            what: what.into(),
            source,
        }
    }
}

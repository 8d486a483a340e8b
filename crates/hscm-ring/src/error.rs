use std::io;

use crate::status::Status;

pub type Result<T, E = Error> = std::result::Result<T, E>;

#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    #[error("{what}: {source}")]
    Io {
        what: String,
        #[source]
        source: io::Error,
    },
    #[error("bad ring geometry: {0}")]
    BadGeometry(String),
    #[error("region received from the server is not usable: {0}")]
    BadRegion(String),
    #[error("server refused the connection: {0}")]
    Refused(String),
    #[error("the server is gone (closed the connection or shut down)")]
    Disconnected,
    #[error("the server stopped serving queue {queue}: {reason}")]
    QueueBroken { queue: u32, reason: String },
    #[error("command failed: {} (status {})", .0.describe(), *.0 as u32)]
    Command(Status),
    #[error("protocol error: {0}")]
    Protocol(String),
    #[error("{0}")]
    Invalid(String),
    #[error("target: {0}")]
    Target(#[from] hscm_block::Error),
}

impl Error {
    /// `map_err` adapter naming what failed.
    pub(crate) fn io(what: &str) -> impl FnOnce(io::Error) -> Error + '_ {
        move |source| Error::Io {
            what: what.to_string(),
            source,
        }
    }
}

impl From<rustix::io::Errno> for Error {
    fn from(e: rustix::io::Errno) -> Self {
        Error::Io {
            what: "system call".into(),
            source: e.into(),
        }
    }
}

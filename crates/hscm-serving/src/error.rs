use std::path::PathBuf;

use crate::Kind;

/// Why a volume could not be opened, served or closed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    #[error("{}: {source}", path.display())]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{} is not an hscm volume ({why})", path.display())]
    NotAVolume { path: PathBuf, why: &'static str },
    /// The volume is of another kind than the use needs.
    #[error("{} is a {found}, which {lacks}", path.display())]
    WrongKind {
        path: PathBuf,
        found: Kind,
        lacks: &'static str,
    },
    /// An option the volume's kind does not offer.
    #[error("{} is a {kind}: {what} is not supported for it", path.display())]
    Unsupported {
        path: PathBuf,
        kind: Kind,
        what: &'static str,
    },
    /// Close found the engine still shared (a server thread or a client kept it).
    #[error("{} is still in use at close ({holder} holds it)", path.display())]
    InUse { path: PathBuf, holder: &'static str },
    #[error("installing a signal handler: {0}")]
    Signals(std::io::Error),
    #[error(transparent)]
    Volume(#[from] hscm_volume::Error),
    #[error(transparent)]
    Tier(#[from] hscm_tier::Error),
    #[error(transparent)]
    Fs(#[from] hscm_fs::Error),
    #[error(transparent)]
    Block(#[from] hscm_block::Error),
}

pub type Result<T> = std::result::Result<T, Error>;

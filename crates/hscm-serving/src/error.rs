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
    /// Only a tiered volume has what was asked for (its saved counters).
    #[error("{}: not a tiered volume (only tiered volumes save counters)", path.display())]
    NotTiered { path: PathBuf },
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
    /// A volume that cannot be made as asked.
    #[error("{}: {why}", path.display())]
    Invalid { path: PathBuf, why: String },
    /// A volume this machine's memory could not hold once open.
    #[error("refusing to create {}: it could not open on this machine", path.display())]
    WouldNotOpenHere {
        path: PathBuf,
        source: hscm_volume::Error,
    },
    #[error("installing a signal handler: {0}")]
    Signals(std::io::Error),
    // Each engine's error prints as itself and is this one's source, so a caller
    // walking the chain finds it (the CLI's hints do).
    #[error("{0}")]
    Volume(#[from] hscm_volume::Error),
    #[error("{0}")]
    Tier(#[from] hscm_tier::Error),
    #[error("{0}")]
    Fs(#[from] hscm_fs::Error),
    #[error("{0}")]
    Block(#[from] hscm_block::Error),
}

pub type Result<T> = std::result::Result<T, Error>;

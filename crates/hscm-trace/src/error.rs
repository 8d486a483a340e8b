use std::io;

/// Everything that can go wrong reading or writing a trace.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TraceError {
    #[error("{name}: {source}")]
    Io {
        name: String,
        #[source]
        source: io::Error,
    },
    #[error("{name}:{line}: {message}")]
    Parse {
        name: String,
        line: u64,
        message: String,
    },
    #[error("{name}: cannot tell the trace format from its first line {sample:?}; pass --format (lackey, ramulator, dramsim3, nvmain, dramsys, hscm)")]
    UnknownFormat { name: String, sample: String },
    #[error("{name}: byte {offset}: {message}")]
    Binary {
        name: String,
        offset: u64,
        message: String,
    },
}

impl TraceError {
    pub(crate) fn io(name: &str, source: io::Error) -> Self {
        Self::Io {
            name: name.to_string(),
            source,
        }
    }
}

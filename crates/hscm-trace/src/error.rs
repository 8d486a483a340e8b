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
    /// `sample` is the first line, at most 80 bytes, printed escaped.
    #[error("{name}: cannot tell the trace format from its first line {sample:?}; name it (one of: {known})")]
    UnknownFormat {
        name: String,
        sample: String,
        known: &'static str,
    },
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

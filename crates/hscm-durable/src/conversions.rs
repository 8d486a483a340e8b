//! The conversions every engine's error type needs from this crate's errors, written
//! once: an engine invokes [`engine_error_conversions!`](crate::engine_error_conversions)
//! on its own enum.

/// Implements `From<Failure>`, `From<LockError>` and `From<CommitError>` for an
/// engine's error enum, which must have the variants `Failed { reason, errno }`,
/// `Locked { path, holder, read_write }` and `Io { what, source }`.
#[macro_export]
macro_rules! engine_error_conversions {
    ($error:ident) => {
        impl From<$crate::Failure> for $error {
            fn from(f: $crate::Failure) -> $error {
                $error::Failed {
                    reason: f.reason,
                    errno: f.errno,
                }
            }
        }

        impl From<$crate::LockError> for $error {
            fn from(e: $crate::LockError) -> $error {
                match e {
                    $crate::LockError::Locked {
                        path,
                        holder,
                        read_write,
                    } => $error::Locked {
                        path,
                        holder,
                        read_write,
                    },
                    $crate::LockError::Io { path, source } => $error::Io {
                        what: format!("cannot lock {path}"),
                        source,
                    },
                    other => $error::Io {
                        what: "locking".into(),
                        source: std::io::Error::other(other.to_string()),
                    },
                }
            }
        }

        impl From<$crate::CommitError> for $error {
            fn from(e: $crate::CommitError) -> $error {
                match e {
                    $crate::CommitError::Poisoned(f) => f.into(),
                    $crate::CommitError::SyncFailed { reason, source } => $error::Io {
                        what: reason,
                        source,
                    },
                    other => $error::Io {
                        what: "sync".into(),
                        source: std::io::Error::other(other.to_string()),
                    },
                }
            }
        }
    };
}

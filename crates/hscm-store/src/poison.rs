//! Why an engine refuses writes for good, shared by the volume and the key-value store.
//!
//! The first device failure (a write or sync that failed: after a failed fsync, Linux
//! may have dropped the dirty pages, so retrying into a success would be a lie) poisons
//! the engine, and so does a background thread's panic, so that no writer waits forever
//! on a checkpointer or mover that is gone. The first cause wins and is kept with its
//! errno; every later write gets [`Error::Failed`] naming it.

use std::sync::OnceLock;

use crate::error::Error;

/// The first failure of an engine.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failure {
    pub reason: String,
    /// The OS error behind it, where there was one (EIO, ENOSPC, …).
    pub errno: Option<i32>,
}

/// Set once, read by every writer.
#[derive(Debug, Default)]
pub(crate) struct Poison(OnceLock<Failure>);

impl Poison {
    /// Records `reason` unless a failure is already recorded; true if this one was.
    pub(crate) fn set(&self, reason: String, errno: Option<i32>) -> bool {
        self.0.set(Failure { reason, errno }).is_ok()
    }

    /// Records a background thread's panic as the failure.
    pub(crate) fn set_from_panic(
        &self,
        thread: &str,
        payload: &(dyn std::any::Any + Send),
    ) -> bool {
        let what = payload
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| payload.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "unknown panic".into());
        self.set(format!("the {thread} thread panicked: {what}"), None)
    }

    pub(crate) fn get(&self) -> Option<&Failure> {
        self.0.get()
    }

    /// Ok while healthy; the failure as an error once poisoned.
    pub(crate) fn check(&self) -> Result<(), Error> {
        match self.get() {
            Some(f) => Err(f.to_error()),
            None => Ok(()),
        }
    }
}

impl Failure {
    pub(crate) fn to_error(&self) -> Error {
        Error::Failed {
            reason: self.reason.clone(),
            errno: self.errno,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_failure_wins_and_keeps_its_errno() {
        let p = Poison::default();
        assert!(p.check().is_ok());
        assert!(p.set("sync of v failed: EIO".into(), Some(5)));
        assert!(!p.set("later".into(), Some(28)));
        let err = p.check().unwrap_err();
        assert!(
            matches!(&err, Error::Failed { errno: Some(5), reason } if reason.contains("EIO")),
            "{err}"
        );
        let q = Poison::default();
        let payload: Box<dyn std::any::Any + Send> = Box::new("index out of bounds");
        assert!(q.set_from_panic("checkpoint", payload.as_ref()));
        assert!(q
            .get()
            .unwrap()
            .reason
            .contains("checkpoint thread panicked: index out of bounds"));
    }
}

//! Why an engine refuses writes for good, shared by the volume and the key-value store.
//!
//! The first device failure (a write or sync that failed: after a failed fsync, Linux
//! may have dropped the dirty pages, so retrying into a success would be a lie) poisons
//! the engine, and so does a background thread's panic, so that no writer waits forever
//! on a checkpointer or mover that is gone. The first cause wins and is kept with its
//! errno; each engine turns it into its own error (`Error::Failed`).

use std::sync::OnceLock;

/// The first failure of an engine.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("writes are refused since a failure: {reason}")]
pub struct Failure {
    pub reason: String,
    /// The OS error behind it, where there was one (EIO, ENOSPC, …).
    pub errno: Option<i32>,
}

/// Set once, read by every writer.
#[derive(Debug, Default)]
pub struct Poison(OnceLock<Failure>);

impl Poison {
    /// Records `reason` unless a failure is already recorded; true if this one was.
    pub fn set(&self, reason: String, errno: Option<i32>) -> bool {
        self.0.set(Failure { reason, errno }).is_ok()
    }

    /// Records a background thread's panic as the failure.
    pub fn set_from_panic(&self, thread: &str, payload: &(dyn std::any::Any + Send)) -> bool {
        let what = payload
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| payload.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "unknown panic".into());
        self.set(format!("the {thread} thread panicked: {what}"), None)
    }

    /// Runs a background thread's body; a panic poisons the engine instead of leaving
    /// its writers waiting on a thread that is gone. True if it panicked (the engine
    /// then wakes whoever waits on that thread).
    pub fn guard(&self, thread: &str, body: impl FnOnce()) -> bool {
        match std::panic::catch_unwind(std::panic::AssertUnwindSafe(body)) {
            Ok(()) => false,
            Err(payload) => {
                self.set_from_panic(thread, payload.as_ref());
                true
            }
        }
    }

    pub fn get(&self) -> Option<&Failure> {
        self.0.get()
    }

    /// Ok while healthy; the failure once poisoned.
    pub fn check(&self) -> Result<(), Failure> {
        match self.get() {
            Some(f) => Err(f.clone()),
            None => Ok(()),
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
        let failure = p.check().unwrap_err();
        assert_eq!(failure.errno, Some(5));
        assert!(failure.to_string().contains("EIO"), "{failure}");
    }

    #[test]
    fn a_panicking_thread_poisons() {
        let q = Poison::default();
        assert!(q.guard("checkpoint", || panic!("index out of bounds")));
        assert!(q
            .get()
            .unwrap()
            .reason
            .contains("checkpoint thread panicked: index out of bounds"));
        // A body that returns leaves it healthy.
        let healthy = Poison::default();
        assert!(!healthy.guard("loader", || ()));
        assert!(healthy.check().is_ok());
    }
}

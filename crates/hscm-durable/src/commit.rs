//! Group commit: one sync covers every write completed before it started.
//!
//! Writes take increasing tickets (a count of completed writes, or a log's end offset).
//! A writer that needs its ticket durable waits; if no sync is running it leads one,
//! which covers every ticket issued before it started, and writers arriving meanwhile
//! wait for the next, which one of them leads. Under load many writers share each sync.
//! A failed sync poisons the engine before anyone is woken, so no waiter retries it into
//! a false success.

use std::io;

use parking_lot::{Condvar, Mutex, MutexGuard};

use crate::{Failure, Poison};

/// The durable ticket, and who is syncing.
#[derive(Debug, Default)]
pub struct GroupCommit {
    state: Mutex<State>,
    synced: Condvar,
}

#[derive(Debug, Default)]
struct State {
    durable: u64,
    syncing: bool,
}

/// Why a ticket did not become durable.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CommitError {
    /// The engine had already failed.
    #[error(transparent)]
    Poisoned(Failure),
    /// The sync this writer led failed; the engine is poisoned with `reason`.
    #[error("{reason}")]
    SyncFailed {
        reason: String,
        #[source]
        source: io::Error,
    },
}

impl GroupCommit {
    /// Every ticket up to `durable` is durable already (what an open found).
    pub fn new(durable: u64) -> GroupCommit {
        GroupCommit {
            state: Mutex::new(State {
                durable,
                syncing: false,
            }),
            synced: Condvar::new(),
        }
    }

    /// The highest ticket known durable.
    pub fn durable(&self) -> u64 {
        self.state.lock().durable
    }

    /// Returns once `ticket` is durable. `issued` gives the newest ticket a sync
    /// starting now covers; `sync` makes them durable (run with no lock held); `what`
    /// names the sync in the failure (`"sync of data.log"`), built only if it fails.
    pub fn wait(
        &self,
        ticket: u64,
        poison: &Poison,
        what: impl FnOnce() -> String,
        issued: impl Fn() -> u64,
        mut sync: impl FnMut() -> io::Result<()>,
    ) -> Result<(), CommitError> {
        let mut st = self.state.lock();
        loop {
            if st.durable >= ticket {
                return Ok(());
            }
            poison.check().map_err(CommitError::Poisoned)?;
            if st.syncing {
                self.synced.wait(&mut st);
                continue;
            }
            st.syncing = true;
            let target = issued();
            let result = MutexGuard::unlocked(&mut st, &mut sync);
            st.syncing = false;
            match result {
                Ok(()) => st.durable = st.durable.max(target),
                Err(source) => {
                    let reason = format!("{} failed: {source}", what());
                    poison.set(reason.clone(), source.raw_os_error());
                    self.synced.notify_all();
                    return Err(CommitError::SyncFailed { reason, source });
                }
            }
            self.synced.notify_all();
        }
    }

    /// Wakes every waiter, to see a failure set elsewhere (a failed write, a panic).
    pub fn wake_all(&self) {
        let _st = self.state.lock();
        self.synced.notify_all();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::sync::Arc;

    #[test]
    fn concurrent_writers_share_syncs_and_every_ticket_is_covered() {
        let commit = Arc::new(GroupCommit::new(0));
        let poison = Arc::new(Poison::default());
        let issued = Arc::new(AtomicU64::new(0));
        let syncs = Arc::new(AtomicU64::new(0));
        let threads: Vec<_> = (0..8)
            .map(|_| {
                let (commit, poison, issued, syncs) = (
                    commit.clone(),
                    poison.clone(),
                    issued.clone(),
                    syncs.clone(),
                );
                std::thread::spawn(move || {
                    for _ in 0..200 {
                        let ticket = issued.fetch_add(1, Ordering::SeqCst) + 1;
                        commit
                            .wait(
                                ticket,
                                &poison,
                                || "sync".into(),
                                || issued.load(Ordering::SeqCst),
                                || {
                                    syncs.fetch_add(1, Ordering::SeqCst);
                                    std::thread::yield_now();
                                    Ok(())
                                },
                            )
                            .unwrap();
                        assert!(commit.durable() >= ticket);
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        assert_eq!(commit.durable(), 1600);
        assert!(syncs.load(Ordering::SeqCst) <= 1600);
    }

    #[test]
    fn a_failed_sync_poisons_before_anyone_retries() {
        let commit = GroupCommit::new(0);
        let poison = Poison::default();
        let eio = || Err(io::Error::from_raw_os_error(5));
        let err = commit
            .wait(1, &poison, || "sync of log".into(), || 1, eio)
            .unwrap_err();
        assert!(
            matches!(&err, CommitError::SyncFailed { reason, .. } if reason.starts_with("sync of log failed")),
            "{err}"
        );
        assert_eq!(poison.get().unwrap().errno, Some(5));
        // The next writer is refused without another sync.
        let again = commit.wait(
            1,
            &poison,
            || "sync of log".into(),
            || 1,
            || panic!("retried a failed sync"),
        );
        assert!(matches!(again, Err(CommitError::Poisoned(_))));
        // A ticket already durable needs nothing.
        assert!(commit
            .wait(0, &poison, || "sync".into(), || 0, || unreachable!())
            .is_ok());
    }
}

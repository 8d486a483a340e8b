//! Releases the kernel sent that the file system has not finished, per inode: so
//! that an unlink can wait for the release already on its way.
//!
//! The kernel sends FUSE_RELEASE in the background after close(2) has returned, and
//! it may reach the daemon after an unlink the program made next: `close; rm;
//! write` on a full file system then finds the unlinked file's RAM and blocks still
//! held (its handle looks open), and a write served by the kernel alone (passthrough)
//! cannot wait for them. An unlink that leaves an inode no name waits, for a
//! bounded time, for the releases of that inode that have arrived, so that when it
//! returns their space is free, as on a local file system. A rename over a file
//! waits the same way for the file it replaced.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Condvar, Mutex};
use std::time::{Duration, Instant};

/// How long an unlink, or a rename over a file, waits for the releases that have
/// arrived of the inode whose name went. A release writes the file home first where
/// the kernel wrote it in RAM, which takes as long as the device takes for its bytes.
pub(crate) const NAME_GONE_WAITS_FOR_RELEASE: Duration = Duration::from_secs(2);

/// Counts of releases arrived and not finished, by inode.
#[derive(Debug, Default)]
pub struct ReleasesInFlight {
    pending: Mutex<HashMap<u64, u32>>,
    finished: Condvar,
    /// All of `pending`'s counts, read without the lock.
    total: AtomicUsize,
}

impl ReleasesInFlight {
    /// A release of `ino` arrived (called where the request is first seen, before
    /// it may wait for a thread to serve it).
    pub(crate) fn arrived(&self, ino: u64) {
        *self.pending.lock().unwrap().entry(ino).or_default() += 1;
        self.total.fetch_add(1, Ordering::Relaxed);
    }

    /// Some release is in flight: an unlink may then wait, so the rings serve it
    /// off the queue's thread (whose other requests the release may wait for).
    pub(crate) fn any(&self) -> bool {
        self.total.load(Ordering::Relaxed) > 0
    }

    /// A release of `ino` that [`Self::arrived`] counted was served.
    pub(crate) fn finished(&self, ino: u64) {
        let mut pending = self.pending.lock().unwrap();
        if let Some(n) = pending.get_mut(&ino) {
            *n -= 1;
            self.total.fetch_sub(1, Ordering::Relaxed);
            if *n == 0 {
                pending.remove(&ino);
            }
        }
        drop(pending);
        self.finished.notify_all();
    }

    /// Counts a release for as long as the guard lives.
    pub(crate) fn serving(&self, ino: u64) -> Serving<'_> {
        self.arrived(ino);
        Serving {
            releases: self,
            ino,
        }
    }

    /// Waits until no release of `ino` is in flight, or for `limit`; true if none is.
    pub(crate) fn wait(&self, ino: u64, limit: Duration) -> bool {
        let deadline = Instant::now() + limit;
        let mut pending = self.pending.lock().unwrap();
        while pending.contains_key(&ino) {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return false;
            }
            pending = self.finished.wait_timeout(pending, left).unwrap().0;
        }
        true
    }
}

impl crate::Fuse {
    /// The inode `name` in `parent` holds before an unlink or a rename over it, looked
    /// up only while some release is in flight (else there is nothing to wait for).
    pub(crate) fn inode_to_free(&self, parent: u64, name: &[u8]) -> Option<u64> {
        if !self.rings.releases.any() {
            return None;
        }
        self.fs.lookup(parent, name).ok().map(|a| a.ino)
    }

    /// After the name of `ino` went: waits for the releases of it already sent, so
    /// that the space they hold is free when the call returns.
    pub(crate) fn wait_for_releases(&self, ino: Option<u64>) {
        if let Some(ino) = ino {
            self.rings.releases.wait(ino, NAME_GONE_WAITS_FOR_RELEASE);
        }
    }
}

/// A release being served ([`ReleasesInFlight::serving`]).
pub(crate) struct Serving<'a> {
    releases: &'a ReleasesInFlight,
    ino: u64,
}

impl Drop for Serving<'_> {
    fn drop(&mut self) {
        self.releases.finished(self.ino);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn an_unlink_waits_for_a_release_that_arrived_and_no_other() {
        let releases = Arc::new(ReleasesInFlight::default());
        assert!(releases.wait(7, Duration::ZERO), "nothing in flight");
        assert!(!releases.any());
        releases.arrived(7);
        assert!(releases.any());
        assert!(releases.wait(8, Duration::ZERO), "another inode's");
        assert!(!releases.wait(7, Duration::from_millis(20)), "bounded");
        let serving = {
            let releases = releases.clone();
            std::thread::spawn(move || {
                let _guard = releases.serving(7);
                std::thread::sleep(Duration::from_millis(30));
                releases.finished(7);
            })
        };
        assert!(releases.wait(7, Duration::from_secs(10)));
        assert!(releases.pending.lock().unwrap().is_empty());
        assert!(!releases.any());
        serving.join().unwrap();
    }
}

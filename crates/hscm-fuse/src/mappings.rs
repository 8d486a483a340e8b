//! Writes through shared mappings of cached read-write opens reach the file system
//! at the fsync of any file, as the mount promises for everything written in RAM.
//!
//! Read-write opens are served through the kernel's page cache (`passthrough.rs`),
//! so that msync(MS_SYNC) of their mappings reaches the daemon. What a program
//! wrote through such a mapping sits in dirty pages the daemon cannot see until the
//! kernel writes them back. An fsync of another file (or of a directory) therefore
//! first asks the kernel to drop those files' cached pages (`FUSE_NOTIFY_INVAL_INODE`
//! with a range): it writes each dirty page to the daemon before dropping it
//! (`invalidate_inode_pages2_range` launders dirty folios), and mappings refault
//! from RAM afterwards.
//!
//! That notification blocks until the daemon has served those writes, so it must
//! not run on a thread that serves requests: with every serving thread inside an
//! fsync, no thread would be left to take the writes. Such fsyncs hand their work
//! (and their reply) to one syncing thread instead; fsyncs with no mapped file
//! left to launder are answered where they arrive.

use std::sync::mpsc::{channel, Sender};
use std::sync::{Arc, Mutex, OnceLock};

use fuser::ReplyEmpty;

use crate::{errno, Fuse};

/// Work one fsync hands over, its reply inside.
type Job = Box<dyn FnOnce() + Send>;

/// One thread running handed-over fsyncs in arrival order, started at the first.
#[derive(Default)]
pub(crate) struct Syncer {
    jobs: OnceLock<Mutex<Sender<Job>>>,
}

impl Syncer {
    /// Runs `job` on the syncing thread (or here, if that thread cannot start).
    pub(crate) fn run(&self, job: impl FnOnce() + Send + 'static) {
        let jobs = self.jobs.get_or_init(|| {
            let (tx, rx) = channel::<Job>();
            let started = std::thread::Builder::new()
                .name("hscm-fsync".into())
                .spawn(move || {
                    for job in rx {
                        job();
                    }
                });
            if let Err(e) = started {
                tracing::warn!("starting the fsync thread: {e}; fsyncs run where they arrive");
            }
            Mutex::new(tx)
        });
        let job: Job = Box::new(job);
        let sent = jobs.lock().unwrap_or_else(|e| e.into_inner()).send(job);
        if let Err(std::sync::mpsc::SendError(job)) = sent {
            job();
        }
    }
}

impl Fuse {
    /// Commits everything, `ino` last, and answers: first the dirty mapped pages
    /// of other files (on the syncing thread, `mappings.rs`), then what the kernel
    /// wrote in files' RAM (a failure of `own` is this reply's; another file's is
    /// its own fsync's or close's to report).
    pub(crate) fn sync_everything(
        &self,
        ino: u64,
        own: Option<u64>,
        reply: ReplyEmpty,
        stat: usize,
    ) {
        let commit = {
            let (fs, stats) = (self.fs.clone(), self.stats.clone());
            move || {
                let synced = stats.time(
                    stat,
                    || {
                        fs.write_back_all(own).map(|_| ())?;
                        fs.fsync(ino)
                    },
                    |_| 0,
                );
                match synced {
                    Ok(()) => reply.ok(),
                    Err(e) => reply.error(errno(e)),
                }
            }
        };
        let mapped = self.opens.mapped_writable(own);
        if mapped.is_empty() {
            return commit();
        }
        let notifier = self.notifier.clone();
        self.syncer.run(move || {
            launder(&notifier, &mapped);
            commit()
        });
    }
}

/// Makes the kernel write every dirty page of `inodes` to the daemon (and drop its
/// cached pages of them). Runs off the serving threads (see the module's notes).
fn launder(notifier: &Arc<OnceLock<fuser::Notifier>>, inodes: &[u64]) {
    let Some(n) = notifier.get() else {
        return;
    };
    for &ino in inodes {
        // From offset 0, length 0: every page. A gone inode answers ENOENT, which
        // leaves nothing to write.
        if let Err(e) = n.inval_inode(fuser::INodeNo(ino), 0, 0) {
            tracing::debug!("writing back the mapped pages of inode {ino}: {e}");
        }
    }
}

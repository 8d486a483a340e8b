//! The eventfd read of a queue's ring: how workers wake the queue's thread, and why
//! its word outlives every read the kernel may still complete.

use std::io;
use std::os::fd::{BorrowedFd, RawFd};
use std::time::{Duration, Instant};

use io_uring::{cqueue, opcode, squeue, types, IoUring};

/// The user data of the eventfd read; entries use their index.
pub(super) const WAKE: u64 = u64::MAX;

/// A queue's io_uring and the word its eventfd reads land in. The kernel writes that
/// word whenever the read completes, which may be after this thread decided to stop
/// (the stop itself writes the eventfd): so the word is freed only once the read's
/// completion came back. Freeing it under a pending read let the kernel write a
/// count into a freed heap chunk, which glibc later found as a corrupt tcache list
/// at a thread's exit (an abort when SIGTERM came right after a mount by the rings).
pub(super) struct QueueRing {
    pub(super) ring: IoUring<squeue::Entry128, cqueue::Entry>,
    wake_fd: RawFd,
    wake_word: Option<Box<[u8; 8]>>,
    /// A read of the eventfd was pushed and its completion not yet seen.
    pub(super) wake_pending: bool,
}

/// How long a stopping queue waits for its eventfd read to come back before it
/// gives up on freeing the word (it then leaks 8 bytes rather than risk them).
const WAKE_DRAIN: Duration = Duration::from_secs(2);

impl QueueRing {
    pub(super) fn new(ring: IoUring<squeue::Entry128, cqueue::Entry>, wake_fd: RawFd) -> Self {
        QueueRing {
            ring,
            wake_fd,
            wake_word: Some(Box::new([0; 8])),
            wake_pending: false,
        }
    }

    /// Queues a read of the eventfd's count (submitted with the next submission).
    pub(super) fn push_wake_read(&mut self) -> io::Result<()> {
        let Some(word) = self.wake_word.as_mut() else {
            return Err(io::Error::other("the eventfd's word is gone"));
        };
        let sqe = squeue::Entry128::from(
            opcode::Read::new(types::Fd(self.wake_fd), word.as_mut_ptr(), 8)
                .build()
                .user_data(WAKE),
        );
        // SAFETY: the word is freed only after the read's completion was seen, or
        // never (see `Drop`).
        unsafe { self.ring.submission().push(&sqe) }.map_err(|_| io::Error::other("ring full"))?;
        self.wake_pending = true;
        Ok(())
    }

    /// Makes a pending eventfd read complete and waits for its completion, up to
    /// [`WAKE_DRAIN`]; true once it came back (or none was pending).
    fn drain_wake_read(&mut self) -> bool {
        if !self.wake_pending {
            return true;
        }
        // A count to read: the pending read (submitted below if it was only queued)
        // completes at once.
        let _ = rustix::io::write(
            // SAFETY: the eventfd is the queue's, open for as long as this thread
            // holds the queue, which outlives this ring.
            unsafe { BorrowedFd::borrow_raw(self.wake_fd) },
            &1u64.to_ne_bytes(),
        );
        let deadline = Instant::now() + WAKE_DRAIN;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return false;
            }
            let timeout = types::Timespec::from(left);
            let args = types::SubmitArgs::new().timespec(&timeout);
            match self.ring.submitter().submit_with_args(1, &args) {
                Ok(_) => {}
                Err(e) if e.raw_os_error() == Some(rustix::io::Errno::TIME.raw_os_error()) => {}
                Err(e) if e.raw_os_error() == Some(rustix::io::Errno::INTR.raw_os_error()) => {}
                Err(_) => return false,
            }
            if self.ring.completion().any(|c| c.user_data() == WAKE) {
                self.wake_pending = false;
                return true;
            }
        }
    }
}

impl Drop for QueueRing {
    fn drop(&mut self) {
        if !self.drain_wake_read() {
            tracing::warn!(
                "a FUSE ring's eventfd read did not come back: its word is left allocated"
            );
            if let Some(word) = self.wake_word.take() {
                Box::leak(word);
            }
        }
    }
}

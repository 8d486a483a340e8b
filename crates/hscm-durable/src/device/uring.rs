//! Many writes at once through one io_uring: what [`FileBackend`](super::FileBackend)'s
//! `write_many` uses where the kernel allows it.

use std::fs::File;
use std::io;

/// Requests in flight in the io_uring [`Backend::write_many`] of [`FileBackend`].
pub(super) const URING_DEPTH: u32 = 32;

/// `write_many` through one io_uring with up to URING_DEPTH writes in flight.
pub(super) fn write_many_uring(file: &File, writes: &[(u64, &[u8])]) -> io::Result<()> {
    use io_uring::{opcode, types, IoUring};
    use std::os::fd::AsRawFd;

    let mut ring = IoUring::new(URING_DEPTH)?;
    let fd = types::Fd(file.as_raw_fd());
    // Every piece submitted, by user_data; a short write re-queues its remainder.
    let mut submitted: Vec<(u64, &[u8])> = Vec::with_capacity(writes.len());
    let mut queue: std::collections::VecDeque<(u64, &[u8])> = writes.iter().copied().collect();
    let mut in_flight = 0u32;
    let mut first_error: Option<io::Error> = None;
    loop {
        while in_flight < URING_DEPTH && first_error.is_none() {
            let Some((off, buf)) = queue.pop_front() else {
                break;
            };
            let len = u32::try_from(buf.len())
                .map_err(|_| io::Error::other("a single write_many piece must be below 4 GiB"))?;
            let sqe = opcode::Write::new(fd, buf.as_ptr(), len)
                .offset(off)
                .build()
                .user_data(submitted.len() as u64);
            submitted.push((off, buf));
            // SAFETY: the buffer is borrowed for this whole call and we do not return
            // before every submitted request has completed (the drain loop below runs
            // until in_flight is 0), so the kernel never reads freed memory. The ring
            // has URING_DEPTH entries and at most URING_DEPTH are in flight, so the
            // queue has room.
            unsafe { ring.submission().push(&sqe) }
                .map_err(|_| io::Error::other("io_uring submission queue full"))?;
            in_flight += 1;
        }
        if in_flight == 0 {
            break;
        }
        // Waiting cannot be skipped while requests hold our buffers: retry until the
        // kernel answers (EINTR and EBUSY are the documented transient failures).
        let mut waits = 0u32;
        while let Err(e) = ring.submit_and_wait(1) {
            waits += 1;
            if waits % 1000 == 0 {
                tracing::error!(
                    "io_uring wait keeps failing ({e}); still waiting for {in_flight} writes"
                );
            }
            std::thread::sleep(std::time::Duration::from_micros(100));
        }
        for cqe in ring.completion() {
            in_flight -= 1;
            let (off, buf) = submitted[cqe.user_data() as usize];
            let res = cqe.result();
            if res < 0 {
                first_error.get_or_insert(io::Error::from_raw_os_error(-res));
            } else if res == 0 {
                first_error.get_or_insert(io::Error::new(
                    io::ErrorKind::WriteZero,
                    "device accepted no bytes",
                ));
            } else if (res as usize) < buf.len() {
                queue.push_back((off + res as u64, &buf[res as usize..]));
            }
        }
    }
    first_error.map_or(Ok(()), Err)
}

//! The device layer every engine writes through (the flat and the tiered volume
//! alike): a narrow trait with explicit sync semantics, the file or block-device
//! backend (O_DIRECT with a buffered fallback, the owner lock, io_uring for many
//! writes at once) and the aligned buffers O_DIRECT needs.
//!
//! Contract (every implementation): `write_at` returning Ok means the bytes reached the
//! device (a later `read_at` returns them, but they may still sit in a volatile cache);
//! `sync` returning Ok means every write that returned Ok before `sync` was called
//! survives a power cut. Offsets, lengths and buffer addresses are multiples of
//! [`IO_ALIGN`] for every call the volume makes.

use std::alloc::{self, Layout};
use std::fs::{File, OpenOptions};
use std::io;
use std::ops::{Deref, DerefMut};
use std::os::unix::fs::{FileExt, FileTypeExt};
use std::path::{Path, PathBuf};
use std::ptr::NonNull;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};

use rustix::fs::OFlags;

use crate::lock::{self, Hold, LockError};

/// What opening or creating a device can fail with (its reads and writes fail with the
/// plain `io::Error` the engines turn into their own failures).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum DeviceError {
    #[error("{what}: {source}")]
    Io {
        what: String,
        #[source]
        source: io::Error,
    },
    /// Another opener holds it, or the lock could not be taken.
    #[error(transparent)]
    Lock(#[from] LockError),
    /// Creating where a file or device already is, without asking to overwrite it.
    #[error(
        "{path} already exists as {kind}: creating a volume there would overwrite what it holds"
    )]
    AlreadyExists { path: String, kind: &'static str },
    /// Neither a regular file nor a block device, or too small for what is asked.
    #[error("{0}")]
    Invalid(String),
}

impl DeviceError {
    fn io(what: impl Into<String>, source: io::Error) -> DeviceError {
        DeviceError::Io {
            what: what.into(),
            source,
        }
    }
}

type Result<T> = std::result::Result<T, DeviceError>;

/// Alignment of every backend I/O (offsets, lengths, buffer addresses): 4 KiB
/// satisfies O_DIRECT on 512e and 4Kn devices alike. Not the ring protocol's 512-byte
/// sector (`hscm_ring::PROTOCOL_SECTOR`), which only counts in commands.
pub const IO_ALIGN: u64 = 4096;

pub trait Backend: Send + Sync {
    /// Size of the store in bytes.
    fn len(&self) -> u64;
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> io::Result<()>;
    /// Reads into several buffers from consecutive offsets (one syscall where possible).
    fn read_vectored_at(&self, offset: u64, bufs: &mut [&mut [u8]]) -> io::Result<()> {
        let mut at = offset;
        for b in bufs.iter_mut() {
            self.read_at(at, b)?;
            at += b.len() as u64;
        }
        Ok(())
    }
    fn write_at(&self, offset: u64, buf: &[u8]) -> io::Result<()>;
    /// Writes many independent (offset, bytes) pieces, in any order and several at
    /// once; Ok when every one has reached the device. No sync. On error some pieces
    /// may have been written. Random writes reach a device's IOPS only with many in
    /// flight, which is what checkpoints need.
    fn write_many(&self, writes: &[(u64, &[u8])]) -> io::Result<()> {
        write_many_threaded(self, writes)
    }
    fn sync(&self) -> io::Result<()>;
    /// Whether [`Self::write_through_at`] beats a write plus a share of a group sync:
    /// a network home with FUA (one round trip), not a local device.
    fn prefers_write_through(&self) -> bool {
        false
    }
    /// Writes `buf` durably, without a sync of anything else where it can (FUA).
    fn write_through_at(&self, offset: u64, buf: &[u8]) -> io::Result<()> {
        self.write_at(offset, buf)?;
        self.sync()
    }
    /// Names the store in messages (a path, or what a test backend stands for).
    fn describe(&self) -> String;
    /// True when reads and writes bypass the OS page cache.
    fn is_direct(&self) -> bool {
        false
    }
    /// True when the store must be exactly the size the header asks for (a regular
    /// file); false where it may be larger (a block device holding a smaller volume).
    fn exact_len(&self) -> bool {
        true
    }
    /// How a store on the network is doing; None for a local one.
    fn remote_health(&self) -> Option<std::sync::Arc<RemoteHealth>> {
        None
    }
}

/// What a home on the network has been through (`crate::nbd`), for `hscm status` and
/// the metrics.
#[derive(Debug, Default)]
pub struct RemoteHealth {
    /// Connections lost and made again.
    pub reconnects: AtomicU64,
    /// Requests that failed (after their retries), server errors included.
    pub failed_requests: AtomicU64,
    /// Whether the last attempt to reach the server succeeded.
    pub reachable: AtomicBool,
    /// The last failure, for the operator.
    pub last_error: parking_lot::Mutex<Option<String>>,
}

/// Threads used by the portable [`Backend::write_many`].
const WRITE_MANY_THREADS: usize = 4;
/// Requests in flight in the io_uring [`Backend::write_many`] of [`FileBackend`].
const URING_DEPTH: u32 = 32;

/// The portable `write_many`: a few threads issuing blocking writes.
fn write_many_threaded<B: Backend + ?Sized>(
    backend: &B,
    writes: &[(u64, &[u8])],
) -> io::Result<()> {
    if writes.len() <= 1 {
        return writes
            .iter()
            .try_for_each(|(off, b)| backend.write_at(*off, b));
    }
    let next = AtomicUsize::new(0);
    std::thread::scope(|scope| {
        let workers: Vec<_> = (0..WRITE_MANY_THREADS.min(writes.len()))
            .map(|_| {
                scope.spawn(|| -> io::Result<()> {
                    while let Some((off, b)) = writes.get(next.fetch_add(1, Ordering::Relaxed)) {
                        if let Err(e) = backend.write_at(*off, b) {
                            // The whole call fails anyway: let the others stop early.
                            next.store(writes.len(), Ordering::Relaxed);
                            return Err(e);
                        }
                    }
                    Ok(())
                })
            })
            .collect();
        workers.into_iter().try_for_each(|w| {
            w.join()
                .unwrap_or_else(|_| Err(io::Error::other("a write_many worker panicked")))
        })
    })
}

/// `write_many` through one io_uring with up to URING_DEPTH writes in flight.
fn write_many_uring(file: &File, writes: &[(u64, &[u8])]) -> io::Result<()> {
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

/// A heap buffer aligned to [`IO_ALIGN`], as O_DIRECT requires.
pub struct AlignedBuf {
    ptr: NonNull<u8>,
    len: usize,
}

// SAFETY: AlignedBuf owns its allocation exclusively, like a Box<[u8]>.
unsafe impl Send for AlignedBuf {}
// SAFETY: shared access only hands out &[u8]; mutation needs &mut self.
unsafe impl Sync for AlignedBuf {}

impl AlignedBuf {
    /// A zero-filled buffer of `len` bytes (`len` is rounded up to a whole sector).
    pub fn zeroed(len: usize) -> AlignedBuf {
        let len = len.max(1).next_multiple_of(IO_ALIGN as usize);
        let layout = Self::layout(len);
        // SAFETY: layout has a non-zero size; alloc_zeroed returns memory that is
        // initialised (zero) for all `len` bytes, or null, which we check.
        let raw = unsafe { alloc::alloc_zeroed(layout) };
        let ptr = NonNull::new(raw).unwrap_or_else(|| alloc::handle_alloc_error(layout));
        AlignedBuf { ptr, len }
    }

    fn layout(len: usize) -> Layout {
        Layout::from_size_align(len, IO_ALIGN as usize)
            .expect("sector-multiple length fits a layout")
    }
}

impl Deref for AlignedBuf {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        // SAFETY: ptr points to `len` initialised bytes owned by self, alive while self is.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }
}

impl DerefMut for AlignedBuf {
    fn deref_mut(&mut self) -> &mut [u8] {
        // SAFETY: as in deref, and &mut self guarantees exclusive access.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.len) }
    }
}

impl Drop for AlignedBuf {
    fn drop(&mut self) {
        // SAFETY: allocated in `zeroed` with exactly this layout, freed only here.
        unsafe { alloc::dealloc(self.ptr.as_ptr(), Self::layout(self.len)) }
    }
}

/// A regular file or a block device, opened with O_DIRECT so the page cache keeps no
/// second copy of what the volume already holds in RAM.
///
/// It holds an advisory lock for as long as it is open (docs/design.md, "One owner"):
/// exclusive when writable, shared when read-only, so two processes can never both
/// write one volume, nor one read a volume another is writing.
pub struct FileBackend {
    file: File,
    path: PathBuf,
    len: u64,
    /// O_DIRECT is on. Cleared, once and for good, the first time the file system
    /// refuses a direct I/O with EINVAL (some accept O_DIRECT at open, or for the first
    /// read, and refuse it later).
    direct: AtomicBool,
    switching: parking_lot::Mutex<()>,
    block_device: bool,
}

impl FileBackend {
    /// Opens an existing file or block device, locked against other openers (exclusive
    /// when `writable`, shared otherwise). Falls back to buffered I/O, with a warning,
    /// where the file system refuses O_DIRECT (tmpfs, some FUSE mounts).
    pub fn open(path: &Path, writable: bool) -> Result<FileBackend> {
        Self::open_with(path, writable, true)
    }

    /// Opens read-only without a lock: for reading a header and journal while
    /// another process may own the volume. Nothing read this way is trusted as data.
    pub fn open_for_inspection(path: &Path) -> Result<FileBackend> {
        let file = Self::open_file(path, false)?;
        Self::from_file(file, path, true)
    }

    /// `try_direct: false` skips O_DIRECT: the path every refusal falls back to.
    fn open_with(path: &Path, writable: bool, try_direct: bool) -> Result<FileBackend> {
        let file = Self::open_file(path, writable)?;
        let hold = if writable {
            Hold::Exclusive
        } else {
            Hold::Shared
        };
        lock::acquire(&file, path, hold)?;
        Self::from_file(file, path, try_direct)
    }

    fn open_file(path: &Path, writable: bool) -> Result<File> {
        OpenOptions::new()
            .read(true)
            .write(writable)
            .open(path)
            .map_err(|e| {
                let verb = if writable { "open for writing" } else { "open" };
                DeviceError::io(format!("cannot {verb} {}", path.display()), e)
            })
    }

    /// Sizes `file` and switches it to O_DIRECT where the file system takes it.
    fn from_file(file: File, path: &Path, try_direct: bool) -> Result<FileBackend> {
        let what = |verb: &str| format!("cannot {verb} {}", path.display());
        let meta = file
            .metadata()
            .map_err(|e| DeviceError::io(what("stat"), e))?;
        let block_device = meta.file_type().is_block_device();
        let len = if block_device {
            rustix::fs::seek(&file, rustix::fs::SeekFrom::End(0))
                .map_err(|e| DeviceError::io(what("size"), e.into()))?
        } else if meta.is_file() {
            meta.len()
        } else {
            return Err(DeviceError::Invalid(format!(
                "{} is neither a regular file nor a block device",
                path.display()
            )));
        };
        let backend = FileBackend {
            file,
            path: path.to_path_buf(),
            len,
            direct: AtomicBool::new(false),
            switching: parking_lot::Mutex::new(()),
            block_device,
        };
        if try_direct {
            backend
                .set_direct(true)
                .map_err(|e| DeviceError::io(what("configure"), e))?;
        }
        if backend.is_direct() && len >= IO_ALIGN {
            // Some file systems accept O_DIRECT at open and refuse it at the first I/O;
            // read_at falls back by itself, this makes it happen (and warn) at open.
            let mut probe = AlignedBuf::zeroed(IO_ALIGN as usize);
            backend
                .read_at(0, &mut probe)
                .map_err(|e| DeviceError::io(what("read"), e))?;
        }
        if !backend.is_direct() && try_direct {
            Self::warn_buffered(path);
        }
        Ok(backend)
    }

    fn warn_buffered(path: &Path) {
        tracing::warn!(
            path = %path.display(),
            "O_DIRECT refused by this file system; using buffered I/O with fdatasync (the page cache will hold a second copy)"
        );
    }

    /// Turns O_DIRECT on or off for this open file. Turning it on where the file system
    /// refuses it leaves it off and is not an error.
    fn set_direct(&self, on: bool) -> io::Result<()> {
        let flags = rustix::fs::fcntl_getfl(&self.file)?;
        let wanted = if on {
            flags | OFlags::DIRECT
        } else {
            flags - OFlags::DIRECT
        };
        match rustix::fs::fcntl_setfl(&self.file, wanted) {
            Ok(()) => {
                self.direct.store(on, Ordering::Release);
                Ok(())
            }
            Err(e) if on && e == rustix::io::Errno::INVAL => Ok(()),
            Err(e) => Err(e.into()),
        }
    }

    /// Runs `op`; if a direct I/O is refused with EINVAL, switches this open to
    /// buffered I/O for good and runs it once more. Every buffer the volume passes is
    /// aligned, so EINVAL under O_DIRECT means the file system will not do direct I/O
    /// here, not a bad request. Durability is unchanged: the volume syncs either way.
    fn with_fallback<T>(&self, mut op: impl FnMut() -> io::Result<T>) -> io::Result<T> {
        let was_direct = self.is_direct();
        match op() {
            Err(e)
                if was_direct
                    && e.raw_os_error() == Some(rustix::io::Errno::INVAL.raw_os_error()) =>
            {
                {
                    // Threads refused at once all wait here until the flag is off.
                    let _switch = self.switching.lock();
                    if self.is_direct() {
                        self.set_direct(false)?;
                        Self::warn_buffered(&self.path);
                    }
                }
                op()
            }
            r => r,
        }
    }

    /// Creates (or, with `overwrite`, truncates) a regular file of `len` bytes with its
    /// blocks allocated, so later writes cannot fail for lack of space and syncs need
    /// no metadata update. A block device is used as it is, only with `overwrite`, and
    /// only if it is large enough. The exclusive lock is taken before anything is
    /// truncated or written, so a volume in use is never formatted under its owner.
    pub fn create(path: &Path, len: u64, overwrite: bool) -> Result<FileBackend> {
        let what = |verb: &str| format!("cannot {verb} {}", path.display());
        let is_blockdev = std::fs::metadata(path)
            .map(|m| m.file_type().is_block_device())
            .unwrap_or(false);
        if is_blockdev && !overwrite {
            return Err(DeviceError::AlreadyExists {
                path: path.display().to_string(),
                kind: "a block device",
            });
        }
        let mut opts = OpenOptions::new();
        opts.read(true).write(true);
        if !is_blockdev {
            if overwrite {
                opts.create(true);
            } else {
                opts.create_new(true);
            }
        }
        let file = opts.open(path).map_err(|e| {
            if e.kind() == io::ErrorKind::AlreadyExists {
                DeviceError::AlreadyExists {
                    path: path.display().to_string(),
                    kind: "a file",
                }
            } else {
                DeviceError::io(what("create"), e)
            }
        })?;
        lock::acquire(&file, path, Hold::Exclusive)?;
        if !is_blockdev {
            file.set_len(0)
                .map_err(|e| DeviceError::io(what("truncate"), e))?;
            if let Err(e) =
                rustix::fs::fallocate(&file, rustix::fs::FallocateFlags::empty(), 0, len)
            {
                if e == rustix::io::Errno::NOSPC {
                    drop(file);
                    let _ = std::fs::remove_file(path);
                    return Err(DeviceError::io(
                        format!("cannot reserve {len} bytes for {}", path.display()),
                        e.into(),
                    ));
                }
                // File systems without fallocate (tmpfs on old kernels, some FUSE) still take set_len.
                file.set_len(len)
                    .map_err(|e| DeviceError::io(what("size"), e))?;
            }
        }
        let backend = Self::from_file(file, path, true)?;
        if backend.len < len {
            return Err(DeviceError::Invalid(format!(
                "{} holds {} bytes, fewer than the {len} needed",
                path.display(),
                backend.len
            )));
        }
        Ok(backend)
    }

    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Backend for FileBackend {
    fn len(&self) -> u64 {
        self.len
    }
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        self.with_fallback(|| self.file.read_exact_at(buf, offset))
    }
    fn read_vectored_at(&self, offset: u64, bufs: &mut [&mut [u8]]) -> io::Result<()> {
        self.with_fallback(|| self.read_vectored_once(offset, bufs))
    }
    fn write_at(&self, offset: u64, buf: &[u8]) -> io::Result<()> {
        self.with_fallback(|| self.file.write_all_at(buf, offset))
    }
    fn write_many(&self, writes: &[(u64, &[u8])]) -> io::Result<()> {
        self.with_fallback(|| self.write_many_once(writes))
    }
    fn sync(&self) -> io::Result<()> {
        self.file.sync_data()
    }
    fn describe(&self) -> String {
        self.path.display().to_string()
    }
    fn is_direct(&self) -> bool {
        self.direct.load(Ordering::Acquire)
    }
    fn exact_len(&self) -> bool {
        !self.block_device
    }
}

impl FileBackend {
    fn read_vectored_once(&self, offset: u64, bufs: &mut [&mut [u8]]) -> io::Result<()> {
        let mut slices: Vec<io::IoSliceMut<'_>> =
            bufs.iter_mut().map(|b| io::IoSliceMut::new(b)).collect();
        let total: usize = slices.iter().map(|s| s.len()).sum();
        let mut done = 0usize;
        let mut view: &mut [io::IoSliceMut<'_>] = &mut slices;
        while done < total {
            let n = rustix::io::preadv(&self.file, view, offset + done as u64)
                .map_err(io::Error::from)?;
            if n == 0 {
                return Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    "backing store ended early",
                ));
            }
            done += n;
            io::IoSliceMut::advance_slices(&mut view, n);
        }
        Ok(())
    }

    fn write_many_once(&self, writes: &[(u64, &[u8])]) -> io::Result<()> {
        if writes.len() <= 1 {
            return writes
                .iter()
                .try_for_each(|(off, b)| self.file.write_all_at(b, *off));
        }
        match write_many_uring(&self.file, writes) {
            // No io_uring here (old kernel, or a sandbox that forbids it).
            Err(e)
                if matches!(
                    e.raw_os_error().map(rustix::io::Errno::from_raw_os_error),
                    Some(rustix::io::Errno::NOSYS | rustix::io::Errno::PERM)
                ) =>
            {
                write_many_threaded(self, writes)
            }
            r => r,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn aligned_buf_is_aligned_zeroed_and_rounded() {
        for len in [1usize, 4096, 5000, 1 << 20] {
            let mut b = AlignedBuf::zeroed(len);
            assert_eq!(b.as_ptr() as usize % IO_ALIGN as usize, 0);
            assert!(b.len() >= len && b.len() % IO_ALIGN as usize == 0);
            assert!(b.iter().all(|&x| x == 0));
            b[len - 1] = 9;
            assert_eq!(b[len - 1], 9);
        }
    }

    #[test]
    fn file_backend_round_trip_and_vectored_read() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("b");
        let be = FileBackend::create(&p, 3 * IO_ALIGN, false).unwrap();
        let mut w = AlignedBuf::zeroed(3 * IO_ALIGN as usize);
        for (i, x) in w.iter_mut().enumerate() {
            *x = (i % 251) as u8;
        }
        be.write_at(0, &w).unwrap();
        be.sync().unwrap();
        let mut a = AlignedBuf::zeroed(IO_ALIGN as usize);
        let mut b = AlignedBuf::zeroed(2 * IO_ALIGN as usize);
        be.read_vectored_at(0, &mut [&mut a, &mut b]).unwrap();
        assert_eq!(&a[..], &w[..IO_ALIGN as usize]);
        assert_eq!(&b[..], &w[IO_ALIGN as usize..]);
    }

    /// Exercises the io_uring path (and its unsafe submission) with more pieces than
    /// the ring has entries, plus the threaded fallback, against plain reads.
    #[test]
    fn write_many_writes_every_piece_both_ways() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("many");
        let pieces = 3 * URING_DEPTH as usize + 5;
        let be = FileBackend::create(&p, 2 * pieces as u64 * IO_ALIGN, false).unwrap();
        for round in 0..2u8 {
            let bufs: Vec<AlignedBuf> = (0..pieces)
                .map(|i| {
                    let mut b = AlignedBuf::zeroed(IO_ALIGN as usize * (1 + i % 2));
                    b.fill(i as u8 ^ round);
                    b
                })
                .collect();
            // Every other 8 KiB slot, in reverse order: nothing sequential about it.
            let writes: Vec<(u64, &[u8])> = bufs
                .iter()
                .enumerate()
                .rev()
                .map(|(i, b)| (2 * i as u64 * IO_ALIGN, &b[..]))
                .collect();
            if round == 0 {
                be.write_many(&writes).unwrap();
            } else {
                write_many_threaded(&be, &writes).unwrap();
            }
            for (off, b) in &writes {
                let mut back = AlignedBuf::zeroed(b.len());
                be.read_at(*off, &mut back).unwrap();
                assert_eq!(&back[..], *b, "round {round}, piece at {off}");
            }
        }
    }

    #[test]
    fn write_many_reports_a_failed_piece() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("short");
        drop(FileBackend::create(&p, 4 * IO_ALIGN, false).unwrap());
        // Opened read-only, every write fails with EBADF, in the middle of the batch.
        let be = FileBackend::open(&p, false).unwrap();
        let b = AlignedBuf::zeroed(IO_ALIGN as usize);
        let writes = [(0, &b[..]), (IO_ALIGN, &b[..]), (2 * IO_ALIGN, &b[..])];
        assert!(be.write_many(&writes).is_err());
    }

    #[test]
    fn buffered_fallback_reads_and_writes() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("b");
        drop(FileBackend::create(&p, 2 * IO_ALIGN, false).unwrap());
        let be = FileBackend::open_with(&p, true, false).unwrap();
        assert!(!be.is_direct());
        let mut w = AlignedBuf::zeroed(IO_ALIGN as usize);
        w[..5].copy_from_slice(b"plain");
        be.write_at(IO_ALIGN, &w).unwrap();
        be.sync().unwrap();
        drop(be);
        let direct = FileBackend::open(&p, false).unwrap();
        assert!(
            direct.is_direct(),
            "the test directory refuses O_DIRECT; run it on ext4/xfs"
        );
        let mut r = AlignedBuf::zeroed(IO_ALIGN as usize);
        direct.read_at(IO_ALIGN, &mut r).unwrap();
        assert_eq!(&r[..5], b"plain");
    }

    /// A file system that accepts O_DIRECT at open and for the probe, then refuses a
    /// later direct I/O with EINVAL: that open turns buffered and the I/O succeeds.
    /// A misaligned buffer draws the same EINVAL from ext4, so it stands in for the
    /// refusal here.
    #[test]
    fn a_direct_io_refused_later_falls_back_to_buffered() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("b");
        let be = FileBackend::create(&p, 4 * IO_ALIGN, false).unwrap();
        assert!(
            be.is_direct(),
            "the test directory refuses O_DIRECT; run it on ext4/xfs"
        );
        let buf = AlignedBuf::zeroed(2 * IO_ALIGN as usize);
        let mut payload = buf[1..1 + IO_ALIGN as usize].to_vec();
        payload[..4].copy_from_slice(b"late");
        be.write_at(IO_ALIGN, &payload).unwrap();
        assert!(!be.is_direct(), "the refused write switched the open");
        let mut back = vec![0u8; 4];
        be.read_at(IO_ALIGN, &mut back).unwrap();
        assert_eq!(&back, b"late");
        be.sync().unwrap();
        // Reads and write_many go through the same switch.
        let be2_path = dir.path().join("c");
        let be2 = FileBackend::create(&be2_path, 4 * IO_ALIGN, false).unwrap();
        // Written first: a direct read of unwritten extents zero-fills without the check.
        be2.write_at(0, &buf[..IO_ALIGN as usize]).unwrap();
        assert!(be2.is_direct());
        let mut odd = vec![0u8; IO_ALIGN as usize + 1];
        be2.read_at(0, &mut odd[1..]).unwrap();
        assert!(!be2.is_direct());
    }

    #[test]
    fn create_refuses_to_clobber_and_names_the_path() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("exists");
        std::fs::write(&p, b"x").unwrap();
        let err = FileBackend::create(&p, IO_ALIGN, false)
            .err()
            .expect("must refuse");
        assert!(err.to_string().contains("exists"), "{err}");
    }

    #[test]
    fn one_writer_per_store_and_no_reader_beside_it() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("v");
        let writer = FileBackend::create(&p, IO_ALIGN, false).unwrap();
        for (writable, what) in [(true, "a second writer"), (false, "a reader")] {
            let err = FileBackend::open(&p, writable).err().expect(what);
            assert!(
                matches!(err, DeviceError::Lock(LockError::Locked { .. })),
                "{what}: {err}"
            );
        }
        // Formatting over it is refused before anything is truncated.
        std::fs::OpenOptions::new()
            .write(true)
            .open(&p)
            .unwrap()
            .write_all_at(b"keep", 0)
            .unwrap();
        assert!(matches!(
            FileBackend::create(&p, IO_ALIGN, true),
            Err(DeviceError::Lock(LockError::Locked { .. }))
        ));
        assert_eq!(std::fs::metadata(&p).unwrap().len(), IO_ALIGN);
        assert_eq!(&std::fs::read(&p).unwrap()[..4], b"keep");
        // Inspection takes no lock.
        FileBackend::open_for_inspection(&p).unwrap();
        drop(writer);
        let r1 = FileBackend::open(&p, false).unwrap();
        let _r2 = FileBackend::open(&p, false).unwrap();
        assert!(FileBackend::open(&p, true).is_err());
        drop(r1);
    }
}

#[cfg(test)]
mod block_device_tests {
    use super::*;

    /// Any block device node: the guard refuses before opening it, so the test never
    /// touches the device.
    fn any_block_device() -> Option<PathBuf> {
        std::fs::read_dir("/dev")
            .ok()?
            .flatten()
            .map(|e| e.path())
            .find(|p| std::fs::metadata(p).is_ok_and(|m| m.file_type().is_block_device()))
    }

    #[test]
    fn formatting_a_block_device_needs_overwrite() {
        let Some(dev) = any_block_device() else {
            panic!("no block device under /dev to test the guard against");
        };
        let err = FileBackend::create(&dev, IO_ALIGN, false)
            .err()
            .expect("must refuse");
        assert!(
            matches!(
                err,
                DeviceError::AlreadyExists {
                    kind: "a block device",
                    ..
                }
            ),
            "{err}"
        );
    }
}

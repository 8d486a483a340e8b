//! A file or a block device as the device: O_DIRECT with a buffered fallback, and the
//! owner lock held while it is open.

use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::{FileExt, FileTypeExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};

use rustix::fs::OFlags;

use super::uring::write_many_uring;
use super::{write_many_threaded, AlignedBuf, Backend, DeviceError, Result, IO_ALIGN};
use crate::lock::{self, Hold};

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
    use crate::device::uring::URING_DEPTH;
    use crate::lock::LockError;

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

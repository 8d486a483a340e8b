//! Per-file RAM: each resident regular file's bytes in a shmem file (memfd) of its
//! own, the one RAM copy of them. The daemon reads it, and the FUSE front-end hands the
//! same file to the kernel as the backing file of passthrough opens, so the kernel
//! reads it without a round trip and without a second copy in its page cache.
//!
//! Invariants (what keeps RAM and the target the same):
//! * A file's memfd is as long as the file. Every operation that changes a file's
//!   bytes or size changes its memfd too, holding the file's `lock` across both the
//!   target's change and the memfd's, so the two see the changes in one order.
//! * An operation that frees blocks of a file (a truncate down, a punched hole) bumps
//!   `cut` under that lock. A write in place looked its blocks up before; if `cut`
//!   moved meanwhile its bytes went to a block the file no longer maps, and the memfd
//!   must not get them either.
//! * Writers change the memfd whether or not it is loaded yet; the loader copies a
//!   piece from the target under the state lock (read) and the file's lock, so it
//!   copies what the writers before it left, and those after it change the memfd.
//!   Reads use the memfd only once it is wholly loaded.
//! * With a RAM budget, a policy of `hscm-policy` chooses which files stay resident
//!   (sizes counted when a file is admitted); a file it evicts while open stays
//!   until it is admitted again or dropped, so memory can run over the budget by the
//!   open files it wanted gone.

use std::collections::{HashMap, HashSet, VecDeque};
use std::fs::File;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd};
use std::os::unix::fs::FileExt;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use hscm_policy::cache::{CacheOutcome, CachePolicy, PolicySpec};

use super::store::Store;
use super::sums::{block_sum, extend_sums, padded, zero_sum, SUM_BLOCK, UNKNOWN};
use parking_lot::{Condvar, Mutex};

/// Where one file's bytes are: a name in the mount's private tmpfs, opened while
/// in use, or a memfd held for good (`store.rs`).
enum Place {
    Named {
        store: Arc<Store>,
        name: String,
        /// Open while the file is open or being worked on (`FileRam::close_idle`).
        open: Mutex<Option<Arc<File>>>,
    },
    Memfd(Arc<File>),
}

/// One resident file's RAM.
pub struct FileRam {
    place: Place,
    admitted: u64,
    pub(crate) lock: Mutex<()>,
    loaded: AtomicBool,
    pub(crate) cut: AtomicU64,
    /// While the kernel may write the memfd itself (passthrough opens that write,
    /// shared mappings of passthrough opens): a hash of each block as the target
    /// holds it, so that what the kernel changed is found by hashing RAM rather
    /// than reading the device. Changed under `lock`.
    pub(crate) sums: Mutex<Option<Vec<u64>>>,
    /// Opens through which the kernel writes the memfd.
    pub(crate) kernel_writers: std::sync::atomic::AtomicU32,
    /// Held by a write-back of the kernel's writes for its whole run, and by every
    /// change the file system makes to the file (writes, truncates, fallocate):
    /// otherwise a write-back could write home bytes it read before such a change,
    /// over it, or grow a file a truncate had just cut.
    pub(crate) changes: Mutex<()>,
}

impl Drop for FileRam {
    fn drop(&mut self) {
        if let Place::Named { store, name, .. } = &self.place {
            // The kernel keeps the pages of a backing file it still has open.
            store.remove(name);
        }
    }
}

impl FileRam {
    /// The file's bytes as an open file (opened now if it was closed while idle).
    fn file(&self) -> std::io::Result<Arc<File>> {
        match &self.place {
            Place::Memfd(f) => Ok(f.clone()),
            Place::Named { store, name, open } => {
                let mut open = open.lock();
                if let Some(f) = open.as_ref() {
                    return Ok(f.clone());
                }
                let f = Arc::new(store.open(name, true)?);
                *open = Some(f.clone());
                Ok(f)
            }
        }
    }

    /// Runs `with` on the file's descriptor: what the kernel reads and writes by
    /// FUSE passthrough once it is registered as the backing file (the kernel then
    /// holds its own reference).
    pub fn with_fd<R>(&self, with: impl FnOnce(BorrowedFd<'_>) -> R) -> std::io::Result<R> {
        let f = self.file()?;
        Ok(with(f.as_fd()))
    }

    /// Closes the daemon's descriptor of a file nobody has open (a named file is
    /// opened again when next needed): a tree of many files costs no descriptor
    /// per file.
    pub(crate) fn close_idle(&self) {
        if let Place::Named { open, .. } = &self.place {
            *open.lock() = None;
        }
    }

    /// The file's status (size, times, pages), without opening a named file.
    fn stat(&self) -> std::io::Result<rustix::fs::Stat> {
        match &self.place {
            Place::Memfd(f) => Ok(rustix::fs::fstat(f.as_ref())?),
            Place::Named { store, name, open } => match open.lock().as_ref() {
                Some(f) => Ok(rustix::fs::fstat(f.as_ref())?),
                None => store.stat(name),
            },
        }
    }

    /// The kernel may have written the memfd itself: it, not the file system's
    /// metadata, has the file's size and newest bytes until they are written back.
    pub fn kernel_may_write(&self) -> bool {
        self.sums.lock().is_some()
    }

    /// Every byte of the file is in RAM.
    pub fn is_loaded(&self) -> bool {
        self.loaded.load(Ordering::Acquire)
    }

    pub(crate) fn set_loaded(&self) {
        self.loaded.store(true, Ordering::Release);
    }

    /// The file system's own write: RAM and the target get the same bytes.
    pub(crate) fn write(&self, offset: u64, data: &[u8]) -> std::io::Result<()> {
        self.write_with_edges(offset, data, &[])
    }

    /// [`Self::write`], told the hashes of partial blocks as the write left them on
    /// the target (`edges`: block, hash), where the file system wrote them whole
    /// (widened from RAM, or new blocks filled out with zeroes). Those blocks then
    /// match at the next write-back unless the kernel changes them in RAM after;
    /// without a hash, a partial block is unknown and written home again.
    pub(crate) fn write_with_edges(
        &self,
        offset: u64,
        data: &[u8],
        edges: &[(u64, u64)],
    ) -> std::io::Result<()> {
        let mut sums = self.sums.lock();
        let old_len = match sums.as_ref() {
            Some(_) => self.byte_len()?,
            None => 0,
        };
        self.file()?.write_all_at(data, offset)?;
        let end = offset + data.len() as u64;
        if let Some(v) = sums.as_mut() {
            extend_sums(v, old_len, end);
            // Whole blocks: the target holds exactly these bytes. Partial ones also
            // hold bytes the kernel may have changed in RAM alone: the hash of what
            // the target got where the caller knows it, else unknown, so that the
            // next write-back writes them from RAM.
            let mut at = offset;
            while at < end {
                let b = at / SUM_BLOCK;
                let (start, stop) = (b * SUM_BLOCK, (b + 1) * SUM_BLOCK);
                v[b as usize] = if at == start && end >= stop {
                    let from = (start - offset) as usize;
                    block_sum(&data[from..from + SUM_BLOCK as usize])
                } else {
                    edges
                        .iter()
                        .find(|&&(block, _)| block == b)
                        .map_or(UNKNOWN, |&(_, sum)| sum)
                };
                at = stop.min(end);
            }
        }
        Ok(())
    }

    /// A write into RAM alone, as the kernel's passthrough writes go: the hashes
    /// stay as they are, so the next write-back finds the changed blocks.
    pub(crate) fn write_behind(&self, offset: u64, data: &[u8]) -> std::io::Result<()> {
        self.file()?.write_all_at(data, offset)
    }

    /// Takes the room `[offset, offset + len)` needs in a bounded RAM (the private
    /// tmpfs) before the file system writes the target, so that copying the bytes
    /// into RAM after cannot fail for room: a full RAM is then the write's ENOSPC,
    /// with nothing written anywhere. Memfds have no bound to take room from.
    pub(crate) fn reserve(&self, offset: u64, len: u64) -> std::io::Result<()> {
        if len == 0 || matches!(self.place, Place::Memfd(_)) {
            return Ok(());
        }
        rustix::fs::fallocate(
            self.file()?.as_ref(),
            rustix::fs::FallocateFlags::KEEP_SIZE,
            offset,
            len,
        )
        .map_err(std::io::Error::from)
    }

    pub(crate) fn set_len(&self, len: u64) -> std::io::Result<()> {
        let old = self.byte_len()?;
        self.file()?.set_len(len)?;
        if let Some(v) = self.sums.lock().as_mut() {
            v.truncate(len.div_ceil(SUM_BLOCK) as usize);
            extend_sums(v, old, len);
            // The block the old or new end falls in holds bytes the kernel may have
            // changed beside ones the target has.
            let edge = (old.min(len) / SUM_BLOCK) as usize;
            if let Some(sum) = v.get_mut(edge) {
                *sum = UNKNOWN;
            }
        }
        Ok(())
    }

    /// The memfd's length: the file's size as the kernel's writes left it.
    pub fn byte_len(&self) -> std::io::Result<u64> {
        Ok(self.stat()?.st_size as u64)
    }

    /// The memfd's size, bytes of pages, and modification time, as the kernel's
    /// writes left them: what a file written by passthrough shows until its
    /// write-back (deferred to the next fsync in on-flush mode) maps its blocks.
    pub(crate) fn live(&self) -> Option<(u64, u64, std::time::SystemTime)> {
        let st = self.stat().ok()?;
        Some((
            st.st_size as u64,
            st.st_blocks as u64 * 512,
            Self::mtime_of(&st)?,
        ))
    }

    /// The memfd's modification time (the kernel's writes set it).
    pub(crate) fn modified(&self) -> Option<std::time::SystemTime> {
        Self::mtime_of(&self.stat().ok()?)
    }

    fn mtime_of(st: &rustix::fs::Stat) -> Option<std::time::SystemTime> {
        // The field types of `Stat` differ between targets (signed on some).
        #[allow(clippy::useless_conversion)]
        let since = std::time::Duration::new(
            u64::try_from(st.st_mtime).ok()?,
            u32::try_from(st.st_mtime_nsec).ok()?,
        );
        std::time::UNIX_EPOCH.checked_add(since)
    }

    /// Sets the memfd's access and modification times (those given): while the
    /// kernel may write the file, the memfd's mtime is the file's, so a `touch` or
    /// a `tar` that sets it must set it there too.
    pub(crate) fn set_times(
        &self,
        atime: Option<crate::Time>,
        mtime: Option<crate::Time>,
    ) -> std::io::Result<()> {
        use rustix::fs::{Timespec, Timestamps, UTIME_OMIT};
        let spec = |t: Option<crate::Time>| match t {
            Some(t) => Timespec {
                tv_sec: t.secs,
                tv_nsec: i64::from(t.nanos) as _,
            },
            None => Timespec {
                tv_sec: 0,
                tv_nsec: UTIME_OMIT as _,
            },
        };
        let times = Timestamps {
            last_access: spec(atime),
            last_modification: spec(mtime),
        };
        rustix::fs::futimens(self.file()?.as_ref(), &times).map_err(std::io::Error::from)
    }

    /// Whether something besides the daemon may still write the file: a writable
    /// open the kernel made for passthrough, kept alive by a shared mapping after
    /// the FUSE file was released (the daemon hears nothing of mmap, msync or munmap
    /// on the passthrough path). Found by asking for a read lease, which the kernel
    /// grants only while no open of the file counts as a writer
    /// (`check_conflicting_open` in fs/locks.c), and giving it back at once. The
    /// daemon's own writable descriptor of a named file is closed first and the
    /// lease asked on a read-only one (a memfd's own descriptor is made without
    /// write access accounting). Any doubt (a lease refused for another reason, a
    /// writable descriptor of the daemon's still in use, leases disabled) answers
    /// yes.
    pub(crate) fn may_be_written_elsewhere(&self) -> bool {
        let probe = match &self.place {
            Place::Memfd(f) => f.clone(),
            Place::Named { store, name, open } => {
                *open.lock() = None;
                match store.open(name, false) {
                    Ok(f) => Arc::new(f),
                    Err(_) => return true,
                }
            }
        };
        let fd = probe.as_raw_fd();
        // SAFETY: fcntl(F_SETLEASE) takes an int argument and touches no memory; the
        // descriptor is open for the whole call (`probe` holds it).
        let granted = unsafe { libc::fcntl(fd, libc::F_SETLEASE, libc::F_RDLCK) } == 0;
        if granted {
            // SAFETY: as above.
            unsafe { libc::fcntl(fd, libc::F_SETLEASE, libc::F_UNLCK) };
        }
        !granted
    }

    /// Bytes of the file up to `len` from `offset` (fewer where the memfd ends).
    pub(crate) fn read(&self, offset: u64, len: usize) -> std::io::Result<Vec<u8>> {
        let file = self.file()?;
        let mut out = vec![0u8; len];
        let mut done = 0;
        while done < len {
            match file.read_at(&mut out[done..], offset + done as u64) {
                Ok(0) => break,
                Ok(n) => done += n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        out.truncate(done);
        Ok(out)
    }

    /// Hashes the whole memfd, which is what the target holds now: from here on the
    /// kernel may write it, and [`FileRam::changed_by_kernel`] finds what it wrote.
    pub(crate) fn start_sums(&self) -> std::io::Result<()> {
        let mut sums = self.sums.lock();
        if sums.is_some() {
            return Ok(());
        }
        let len = self.byte_len()?;
        let mut v = Vec::with_capacity(len.div_ceil(SUM_BLOCK) as usize);
        let mut at = 0;
        while at < len {
            let piece = self.read(at, (1 << 20).min(len - at) as usize)?;
            v.extend(
                piece
                    .chunks(SUM_BLOCK as usize)
                    .map(|c| block_sum(&padded(c.to_vec()))),
            );
            at += piece.len().max(1) as u64;
        }
        *sums = Some(v);
        Ok(())
    }

    /// Frees `[offset, offset + len)` of the memfd, which then reads zeroes.
    pub(crate) fn punch(&self, offset: u64, len: u64) -> std::io::Result<()> {
        use rustix::fs::FallocateFlags;
        if len == 0 {
            return Ok(());
        }
        rustix::fs::fallocate(
            self.file()?.as_ref(),
            FallocateFlags::PUNCH_HOLE | FallocateFlags::KEEP_SIZE,
            offset,
            len,
        )
        .map_err(std::io::Error::from)?;
        if let Some(v) = self.sums.lock().as_mut() {
            // Whole blocks read zeroes on both sides; the edges are unknown.
            let end = offset.saturating_add(len);
            let (first, last) = (offset / SUM_BLOCK, end.div_ceil(SUM_BLOCK));
            for b in first..last.min(v.len() as u64) {
                let whole = b * SUM_BLOCK >= offset && (b + 1) * SUM_BLOCK <= end;
                v[b as usize] = if whole { zero_sum() } else { UNKNOWN };
            }
        }
        Ok(())
    }

    /// Bytes of RAM the memfd holds (its pages, not its length).
    fn resident_bytes(&self) -> u64 {
        self.stat().map(|s| s.st_blocks as u64 * 512).unwrap_or(0)
    }
}

/// How much RAM the files may hold and who chooses them.
#[derive(Debug, Clone)]
pub struct RamOptions {
    /// At most this many bytes of files (None: every file; Some(0): none, every
    /// read going to the target).
    pub budget: Option<u64>,
    /// The policy that chooses resident files under a budget (`hscm-policy` names).
    pub policy: PolicySpec,
    /// Where the files' bytes live.
    pub backing: RamBacking,
}

/// Where the files' RAM lives (`store.rs`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum RamBacking {
    /// A private tmpfs bounded by the file system's capacity, where the process
    /// may make one (CAP_SYS_ADMIN); memfds otherwise.
    #[default]
    Auto,
    /// A memfd per file, unbounded, one descriptor each.
    Memfd,
}

impl Default for RamOptions {
    fn default() -> Self {
        RamOptions {
            budget: None,
            policy: PolicySpec::parse("lru").expect("lru is a policy"),
            backing: RamBacking::Auto,
        }
    }
}

/// What the files hold in RAM now.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RamUsage {
    pub resident_files: u64,
    pub loaded_files: u64,
    /// Pages the memfds hold.
    pub resident_bytes: u64,
    pub budget: Option<u64>,
    /// What the files' RAM may hold at most, enforced by the kernel (the private
    /// tmpfs's size); None with memfds.
    pub bound: Option<u64>,
}

struct Resident {
    files: HashMap<u64, Arc<FileRam>>,
    policy: Option<Box<dyn CachePolicy>>,
    /// Files the policy evicted while they were open: they go at their last close.
    evicted_open: HashSet<u64>,
    /// Sum of the sizes the resident files had when they were admitted.
    admitted_bytes: u64,
}

impl Resident {
    fn remove(&mut self, ino: u64) {
        if let Some(f) = self.files.remove(&ino) {
            self.admitted_bytes -= f.admitted;
        }
    }
}

/// Every resident file's RAM, and the queue of files to load.
pub(crate) struct Ram {
    options: RamOptions,
    resident: Mutex<Resident>,
    /// Files to load first (opened while not resident), then the mount's sweep.
    pub(crate) queue: Mutex<VecDeque<u64>>,
    pub(crate) queued: Condvar,
    pub(crate) stop: AtomicBool,
    /// A loader thread runs; without one, opening a file loads it.
    pub(crate) background: AtomicBool,
    /// The descriptor budget turned a file away (said once in the log).
    descriptors_exhausted: AtomicBool,
    /// The mount's private tmpfs, if one could be made; else memfds.
    store: Option<Arc<Store>>,
    /// Files whose kernel writes a close left in RAM (on-flush), with the bytes
    /// each may have to take home: what the next fsync writes back, bounded.
    pub(super) deferred: Mutex<super::deferred::Deferred>,
}

/// Descriptors kept free for everything but files' RAM: connections, the status
/// and metrics sockets, the device, the log, FUSE's own.
const DESCRIPTOR_RESERVE: u64 = 1024;

/// How many files may hold a memfd: the process's open file limit less the
/// reserve (at least 64).
fn descriptor_budget() -> u64 {
    let limit = rustix::process::getrlimit(rustix::process::Resource::Nofile)
        .current
        .unwrap_or(u64::MAX);
    limit.saturating_sub(DESCRIPTOR_RESERVE).max(64)
}

impl Ram {
    /// `capacity`: what the file system can hold, the bound of a private tmpfs.
    pub(crate) fn new(options: RamOptions, capacity: u64) -> Ram {
        let policy = options.budget.map(|b| options.policy.build(b));
        let store = match options.backing {
            RamBacking::Memfd => None,
            RamBacking::Auto => match Store::private_tmpfs(capacity) {
                Ok(store) => Some(Arc::new(store)),
                Err(e) => {
                    tracing::info!(
                        "files' RAM in memfds, bounded by nothing but the machine (a private tmpfs needs CAP_SYS_ADMIN: {e})"
                    );
                    None
                }
            },
        };
        Ram {
            options,
            resident: Mutex::new(Resident {
                files: HashMap::new(),
                policy,
                evicted_open: HashSet::new(),
                admitted_bytes: 0,
            }),
            queue: Mutex::new(VecDeque::new()),
            queued: Condvar::new(),
            stop: AtomicBool::new(false),
            background: AtomicBool::new(false),
            descriptors_exhausted: AtomicBool::new(false),
            store,
            deferred: Mutex::new(super::deferred::Deferred::default()),
        }
    }

    pub(crate) fn get(&self, ino: u64) -> Option<Arc<FileRam>> {
        self.resident.lock().files.get(&ino).cloned()
    }

    /// The file's RAM, made resident (empty, not loaded) if the policy takes it;
    /// `is_open` tells which files evicted must stay because they are open.
    pub(crate) fn admit(
        &self,
        ino: u64,
        size: u64,
        is_open: impl Fn(u64) -> bool,
    ) -> std::io::Result<Option<Arc<FileRam>>> {
        let mut guard = self.resident.lock();
        let r = &mut *guard;
        if let Some(policy) = r.policy.as_mut() {
            if policy.lookup(ino) {
                r.evicted_open.remove(&ino);
                if let Some(f) = r.files.get(&ino) {
                    return Ok(Some(f.clone()));
                }
                // Evicted while open, kept, then closed and dropped: admit again.
            } else {
                let mut evicted = Vec::new();
                let outcome = policy.insert_evicting(ino, size.max(1), &mut |k| evicted.push(k));
                for k in evicted {
                    if is_open(k) {
                        r.evicted_open.insert(k);
                    } else {
                        r.remove(k);
                    }
                }
                if outcome == CacheOutcome::Bypassed {
                    return Ok(None);
                }
            }
        }
        if let Some(f) = r.files.get(&ino) {
            return Ok(Some(f.clone()));
        }
        // Each file in a memfd holds a descriptor: past what the process may open
        // (less a reserve for connections, the status socket and the device) files
        // are served from the target instead, said once rather than failing per file.
        let cap = descriptor_budget();
        if self.store.is_none() && r.files.len() as u64 >= cap {
            if !self.descriptors_exhausted.swap(true, Ordering::Relaxed) {
                tracing::warn!(
                    "{} files in RAM hold as many descriptors as this process may use for them ({cap}); further files are read from the target (raise LimitNOFILE / ulimit -n)",
                    r.files.len()
                );
            }
            return Ok(None);
        }
        let place = match &self.store {
            Some(store) => {
                let (name, file) = store.create(ino)?;
                Place::Named {
                    store: store.clone(),
                    name,
                    open: Mutex::new(Some(Arc::new(file))),
                }
            }
            None => {
                let memfd = rustix::fs::memfd_create(
                    format!("hscm-file-{ino}"),
                    rustix::fs::MemfdFlags::CLOEXEC,
                )
                .map_err(std::io::Error::from)?;
                Place::Memfd(Arc::new(File::from(memfd)))
            }
        };
        let f = Arc::new(FileRam {
            place,
            admitted: size,
            lock: Mutex::new(()),
            loaded: AtomicBool::new(false),
            cut: AtomicU64::new(0),
            sums: Mutex::new(None),
            kernel_writers: std::sync::atomic::AtomicU32::new(0),
            changes: Mutex::new(()),
        });
        r.files.insert(ino, f.clone());
        r.admitted_bytes += size;
        Ok(Some(f))
    }

    /// The file is gone: its RAM goes (the kernel keeps a backing file it still
    /// reads until its last passthrough open closes).
    pub(crate) fn forget(&self, ino: u64) {
        let mut r = self.resident.lock();
        r.remove(ino);
        r.evicted_open.remove(&ino);
        drop(r);
        self.written_back(ino);
    }

    /// Drops a file the policy evicted while it was open, once it is not.
    pub(crate) fn closed(&self, ino: u64) {
        let mut r = self.resident.lock();
        if r.evicted_open.remove(&ino) {
            r.remove(ino);
        }
    }

    /// Room under the budget for a file of `size` bytes more, evicting nothing.
    pub(crate) fn has_room(&self, size: u64) -> bool {
        let r = self.resident.lock();
        self.options
            .budget
            .is_none_or(|b| r.admitted_bytes.saturating_add(size) <= b)
    }

    pub(crate) fn usage(&self) -> RamUsage {
        let r = self.resident.lock();
        RamUsage {
            resident_files: r.files.len() as u64,
            loaded_files: r.files.values().filter(|f| f.is_loaded()).count() as u64,
            resident_bytes: match &self.store {
                // Every page of the files' RAM, those of files gone but still
                // open included.
                Some(store) => store.used(),
                None => r.files.values().map(|f| f.resident_bytes()).sum(),
            },
            budget: self.options.budget,
            bound: self.store.as_ref().map(|s| s.size()),
        }
    }

    /// Bytes the files' RAM holds now.
    fn used_bytes(&self) -> u64 {
        match &self.store {
            Some(store) => store.used(),
            None => {
                let r = self.resident.lock();
                r.files.values().map(|f| f.resident_bytes()).sum()
            }
        }
    }

    /// A private tmpfs under a RAM budget: a bound that follows home's free space.
    pub(crate) fn has_bound_to_keep(&self) -> bool {
        self.store.is_some() && self.options.budget.is_some()
    }

    /// Keeps the bound of the files' RAM in step with home's free space under a
    /// budget ([`Store::keep_in_step`]); without one, or with memfds, nothing to do.
    pub(crate) fn keep_bound_in_step(&self, home_free: u64) {
        if let (Some(store), Some(budget)) = (&self.store, self.options.budget) {
            if let Err(e) = store.keep_in_step(budget, home_free) {
                tracing::debug!("resizing the files' RAM to home's free space: {e}");
            }
        }
    }

    /// The files' RAM holds more than the budget.
    pub(crate) fn over_budget(&self) -> bool {
        self.options
            .budget
            .is_some_and(|budget| self.used_bytes() > budget)
    }

    /// Takes a closed file out of RAM (read from the target until it is opened
    /// again), unless anything may still write its RAM; the caller wrote home what
    /// the kernel wrote. True if it left.
    pub(crate) fn shed(&self, ino: u64) -> bool {
        let mut r = self.resident.lock();
        let Some(f) = r.files.get(&ino) else {
            return false;
        };
        let writers = f.kernel_writers.load(Ordering::Acquire) > 0;
        if writers || (f.kernel_may_write() && f.may_be_written_elsewhere()) {
            return false;
        }
        r.remove(ino);
        true
    }

    /// Up to `n` resident files, `first` first.
    pub(crate) fn resident_files(&self, first: u64, n: usize) -> Vec<u64> {
        let r = self.resident.lock();
        std::iter::once(first)
            .chain(r.files.keys().copied().filter(|&k| k != first))
            .take(n)
            .collect()
    }

    /// How much more the files' RAM may hold than the file system (0 with memfds,
    /// which are not bounded).
    pub(crate) fn margin(&self) -> u64 {
        self.store.as_ref().map_or(0, |s| s.margin())
    }

    /// Closes the descriptor of a file nobody has open (see [`FileRam::close_idle`]).
    pub(crate) fn close_idle(&self, ino: u64) {
        if let Some(f) = self.get(ino) {
            f.close_idle();
        }
    }

    /// Files whose RAM the kernel may have written (they keep block hashes).
    pub(crate) fn kernel_written(&self) -> Vec<u64> {
        let r = self.resident.lock();
        r.files
            .iter()
            .filter(|(_, f)| f.sums.lock().is_some())
            .map(|(&ino, _)| ino)
            .collect()
    }

    /// Asks the loader to load `ino` before anything else.
    pub(crate) fn want(&self, ino: u64) {
        let mut q = self.queue.lock();
        if !q.contains(&ino) {
            q.push_front(ino);
        }
        self.queued.notify_one();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The probe behind keeping a file's hashes: it tells a file's RAM that only
    /// the daemon holds from one that another writable open (what a shared mapping
    /// keeps alive after its descriptor is closed) still reaches; with memfds and
    /// with the private tmpfs (where the process may make one).
    #[test]
    fn another_writer_of_a_file_s_ram_is_seen_until_it_goes() {
        for backing in [RamBacking::Memfd, RamBacking::Auto] {
            let options = RamOptions {
                backing,
                ..RamOptions::default()
            };
            let ram = Ram::new(options, 64 << 20);
            let f = ram.admit(7, 0, |_| false).unwrap().unwrap();
            assert!(
                !f.may_be_written_elsewhere(),
                "{backing:?}: only the daemon"
            );
            let reopen = |write: bool| {
                f.with_fd(|fd| {
                    let path = format!("/proc/self/fd/{}", fd.as_raw_fd());
                    std::fs::OpenOptions::new()
                        .read(true)
                        .write(write)
                        .open(path)
                        .unwrap()
                })
                .unwrap()
            };
            let other = reopen(true);
            assert!(f.may_be_written_elsewhere(), "{backing:?}: a second writer");
            let reader = reopen(false);
            drop(other);
            assert!(!f.may_be_written_elsewhere(), "{backing:?}: a reader");
            drop(reader);
            assert!(!f.may_be_written_elsewhere(), "{backing:?}: all gone");
            // The daemon's own descriptor comes back when needed.
            f.write(0, b"abc").unwrap();
            assert_eq!(f.read(0, 3).unwrap(), b"abc");
        }
    }

    /// Times set on a file's RAM are what its metadata reads back.
    #[test]
    fn times_set_on_ram_read_back() {
        let ram = Ram::new(RamOptions::default(), 64 << 20);
        let f = ram.admit(9, 0, |_| false).unwrap().unwrap();
        let t = crate::Time {
            secs: 1_500_000_123,
            nanos: 456,
        };
        f.set_times(None, Some(t)).unwrap();
        assert_eq!(crate::Time::from(f.modified().unwrap()), t);
    }
}

//! Which way each open of a file is served: through the kernel's page cache (the
//! classic FUSE path), or by FUSE passthrough straight from the file's RAM (its memfd,
//! `hscm_fs::FileRam`), the daemon seeing no reads at all.
//!
//! The kernel's rules (`fs/fuse/iomode.c`, Linux 6.9 on): an inode is either in cached
//! mode (opens without `FOPEN_DIRECT_IO` or `FOPEN_PASSTHROUGH`, and mmaps of direct
//! opens) or in passthrough mode (opens with `FOPEN_PASSTHROUGH`), never both, and all
//! its passthrough opens name one backing file. An open that breaks this fails with
//! EIO in the program that opened. `FOPEN_DIRECT_IO | FOPEN_PASSTHROUGH` counts as
//! passthrough: its reads and writes come to the daemon, its mmap maps the backing
//! file. So, per inode:
//! * read-only opens of a file wholly in RAM, while no cached open is left: passthrough;
//! * writable opens while passthrough opens exist (or without the writeback cache):
//!   direct plus passthrough, so every write reaches the file system, which changes
//!   RAM and the device before it answers; their shared mappings write RAM behind the
//!   daemon's back, and [`hscm_fs::FileSystem::write_back_ram`] makes those durable
//!   at fsync and at the last close;
//! * read-write opens (the only ones that can map a file shared and writable) while
//!   no passthrough open exists: cached, unless the mount was asked to pass them
//!   through too. A shared mapping of a passthrough open maps the backing file
//!   itself, and msync(MS_SYNC) then syncs that memfd and never reaches the daemon
//!   (`backing_file_mmap` sets the mapping's file to the backing file); a mapping of
//!   a cached open is the kernel's page cache of the FUSE file, whose msync writes
//!   the dirty pages to the daemon and sends it an FSYNC, so it is durable on
//!   return in either mode;
//! * anything else (a file not in RAM yet, a writable open with the writeback cache
//!   and no passthrough open, any open while a cached one is left): cached.
//!
//! The daemon learns of a release only after the kernel dropped the open's mode, so
//! the counts here are never below the kernel's: each choice is one the kernel takes.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use fuser::{
    BackingId, FileAttr, FileHandle, FopenFlags, Generation, INodeNo, ReplyCreate, ReplyOpen,
};

use crate::Fuse;
use hscm_fs::FileRam;
use parking_lot::Mutex;

/// How one open is served; kept in its file handle.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Served {
    Cached,
    /// Cached, and able to map the file shared and writable: what its mappings
    /// write may sit in the kernel's dirty pages (`mappings.rs`).
    CachedReadWrite,
    /// [`Served::CachedReadWrite`] owed durability only at fsync (on-flush): each
    /// write that reaches the daemon goes into the file's RAM alone, as a
    /// passthrough write would, and home at the next write-back.
    CachedWritesToRam,
    Passthrough,
    /// Reads and writes to the daemon, mmap to RAM.
    DirectPassthrough,
    /// Reads, writes and mmap to RAM, the daemon seeing none of them: durable at
    /// fsync, when the file system writes home what changed.
    PassthroughWritable,
}

/// What an open may do, and who must see its writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum OpenAccess {
    Read,
    /// Writes are owed durability only at fsync (on-flush): the kernel may write
    /// RAM itself.
    WriteByKernel,
    /// Each write must reach the file system (immediate durability, a file whose
    /// setuid bits or capabilities a write must drop).
    WriteThroughDaemon,
}

const CACHED: u64 = 1;
const PASSTHROUGH: u64 = 2;
const DIRECT_PASSTHROUGH: u64 = 3;
const PASSTHROUGH_WRITABLE: u64 = 4;
const CACHED_READ_WRITE: u64 = 5;
const CACHED_WRITES_TO_RAM: u64 = 6;
/// Set in a handle whose open the kernel closes without a FLUSH
/// (`FOPEN_NOFLUSH`): a close(2) then costs no round trip, and the release does
/// what the flush would have.
const NO_FLUSH: u64 = 1 << 8;

/// A handle's open was answered with `FOPEN_NOFLUSH`.
pub(crate) fn closes_without_flush(fh: FileHandle) -> bool {
    fh.0 & NO_FLUSH != 0
}

impl Served {
    pub(crate) fn handle(self) -> FileHandle {
        FileHandle(match self {
            Served::Cached => CACHED,
            Served::Passthrough => PASSTHROUGH,
            Served::DirectPassthrough => DIRECT_PASSTHROUGH,
            Served::PassthroughWritable => PASSTHROUGH_WRITABLE,
            Served::CachedReadWrite => CACHED_READ_WRITE,
            Served::CachedWritesToRam => CACHED_WRITES_TO_RAM,
        })
    }

    /// The open a handle was served as (handles from before passthrough: cached).
    pub(crate) fn of(fh: FileHandle) -> Served {
        match fh.0 & !NO_FLUSH {
            PASSTHROUGH => Served::Passthrough,
            DIRECT_PASSTHROUGH => Served::DirectPassthrough,
            PASSTHROUGH_WRITABLE => Served::PassthroughWritable,
            CACHED_READ_WRITE => Served::CachedReadWrite,
            CACHED_WRITES_TO_RAM => Served::CachedWritesToRam,
            _ => Served::Cached,
        }
    }

    pub(crate) fn is_passthrough(self) -> bool {
        !self.is_cached()
    }

    pub(crate) fn is_cached(self) -> bool {
        matches!(
            self,
            Served::Cached | Served::CachedReadWrite | Served::CachedWritesToRam
        )
    }

    /// The kernel may write the file's RAM through this open (its writes, or its
    /// shared mappings).
    pub(crate) fn kernel_writes(self) -> bool {
        matches!(
            self,
            Served::DirectPassthrough | Served::PassthroughWritable | Served::CachedWritesToRam
        )
    }
}

#[derive(Default)]
struct InodeOpens {
    cached: u32,
    /// Of the cached opens, those that can map the file shared and writable.
    cached_read_write: u32,
    passthrough: u32,
    /// Registered with the kernel while passthrough opens exist.
    backing: Option<BackingId>,
}

/// The opens of every inode, and whether passthrough is on for this mount.
#[derive(Default)]
pub(crate) struct Opens {
    enabled: Arc<AtomicBool>,
    inodes: Mutex<HashMap<u64, InodeOpens>>,
}

/// The reply to an open or a create, which can register a backing file.
pub(crate) trait OpenReply {
    fn register(&self, ram: &FileRam) -> std::io::Result<BackingId>;
    fn cached(self, fh: FileHandle, flags: FopenFlags);
    fn passthrough(self, fh: FileHandle, flags: FopenFlags, backing: &BackingId);
}

/// The handle and open flags of an open served as `served`; `no_flush`: its close
/// needs no FLUSH (the release does what is left).
fn answer(served: Served, no_flush: bool) -> (FileHandle, FopenFlags) {
    let mut flags = match served {
        Served::DirectPassthrough => FopenFlags::FOPEN_DIRECT_IO,
        s if s.is_cached() => FopenFlags::FOPEN_KEEP_CACHE,
        _ => FopenFlags::empty(),
    };
    let mut fh = served.handle();
    if no_flush {
        flags |= FopenFlags::FOPEN_NOFLUSH;
        fh.0 |= NO_FLUSH;
    }
    (fh, flags)
}

impl Opens {
    pub(crate) fn enable(&self, on: bool) {
        self.enabled.store(on, Ordering::Relaxed);
    }

    pub(crate) fn enabled(&self) -> bool {
        self.enabled.load(Ordering::Relaxed)
    }

    /// Whether passthrough is on, as it changes (the kernel may refuse it later).
    pub(crate) fn flag(&self) -> Arc<AtomicBool> {
        self.enabled.clone()
    }

    /// Chooses how to serve an open of `ino`, records it and replies, under the
    /// lock so that no other open of the inode decides meanwhile. The file's RAM is
    /// registered as the backing file once per inode, while its passthrough opens
    /// last. `kernel_writes` is called before an open through which the kernel
    /// writes RAM is granted; false refuses it. `mappings_to_daemon`: the open may map
    /// the file shared and writable, and its msync must reach the file system, so
    /// it is cached unless passthrough opens of the inode leave no choice.
    /// `no_flush`: whether the close of an open served so may skip its FLUSH.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn open(
        &self,
        ino: u64,
        access: OpenAccess,
        mappings_to_daemon: bool,
        ram: Option<Arc<FileRam>>,
        mut kernel_writes: impl FnMut() -> bool,
        no_flush: impl Fn(Served) -> bool,
        reply: impl OpenReply,
    ) -> Served {
        let mut inodes = self.inodes.lock();
        let io = inodes.entry(ino).or_default();
        let wanted = match (&ram, access) {
            (Some(_), _) if !self.enabled() || io.cached > 0 => None,
            (Some(_), OpenAccess::WriteByKernel | OpenAccess::WriteThroughDaemon)
                if mappings_to_daemon && io.passthrough == 0 =>
            {
                None
            }
            (Some(_), OpenAccess::Read) => Some(Served::Passthrough),
            (Some(_), OpenAccess::WriteByKernel) => Some(Served::PassthroughWritable),
            (Some(_), OpenAccess::WriteThroughDaemon) => Some(Served::DirectPassthrough),
            (None, _) => None,
        };
        if let Some(served) = wanted {
            if io.backing.is_none() {
                match reply.register(ram.as_deref().expect("checked above")) {
                    Ok(id) => io.backing = Some(id),
                    Err(e) => {
                        tracing::warn!(
                            "the kernel refused FUSE passthrough ({e}); every open is served through the page cache from now on"
                        );
                        self.enable(false);
                    }
                }
            }
            let granted =
                io.backing.is_some() && (served == Served::Passthrough || kernel_writes());
            if let (true, Some(backing)) = (granted, &io.backing) {
                io.passthrough += 1;
                let (fh, flags) = answer(served, no_flush(served));
                reply.passthrough(fh, flags, backing);
                return served;
            }
            if io.passthrough == 0 {
                io.backing = None;
            }
        }
        io.cached += 1;
        let served = if mappings_to_daemon {
            io.cached_read_write += 1;
            if ram.is_some() && access == OpenAccess::WriteByKernel && kernel_writes() {
                Served::CachedWritesToRam
            } else {
                Served::CachedReadWrite
            }
        } else {
            Served::Cached
        };
        // The kernel's cached pages of the file were dropped at the end of its last
        // cached period (see `release`), so what it keeps now is current.
        let (fh, flags) = answer(served, no_flush(served));
        reply.cached(fh, flags);
        served
    }

    /// The inodes, other than `except`, with a cached open that can map them
    /// shared and writable: where dirty pages the daemon has not seen may be.
    pub(crate) fn mapped_writable(&self, except: Option<u64>) -> Vec<u64> {
        self.inodes
            .lock()
            .iter()
            .filter(|(ino, io)| io.cached_read_write > 0 && Some(**ino) != except)
            .map(|(ino, _)| *ino)
            .collect()
    }

    /// An open was released. True when it was the inode's last cached open and
    /// passthrough is on: the kernel's cached pages of it are then a second copy to
    /// drop.
    pub(crate) fn release(&self, ino: u64, served: Served) -> bool {
        let mut inodes = self.inodes.lock();
        let Some(io) = inodes.get_mut(&ino) else {
            return false;
        };
        let mut last_cached = false;
        if served.is_passthrough() {
            io.passthrough = io.passthrough.saturating_sub(1);
            if io.passthrough == 0 {
                io.backing = None;
            }
        } else {
            io.cached = io.cached.saturating_sub(1);
            if matches!(served, Served::CachedReadWrite | Served::CachedWritesToRam) {
                io.cached_read_write = io.cached_read_write.saturating_sub(1);
            }
            last_cached = io.cached == 0;
        }
        if io.cached == 0 && io.passthrough == 0 {
            inodes.remove(&ino);
        }
        last_cached && self.enabled()
    }
}

pub(crate) const O_RDONLY: i32 = 0;
pub(crate) const O_RDWR: i32 = 2;

/// O_ACCMODE: the bits of open(2)'s flags that say read, write or both.
pub(crate) const fn libc_o_accmode() -> i32 {
    3
}

impl OpenReply for ReplyOpen {
    fn register(&self, ram: &hscm_fs::FileRam) -> std::io::Result<fuser::BackingId> {
        ram.with_fd(|fd| self.open_backing(fd))?
    }

    fn cached(self, fh: FileHandle, flags: FopenFlags) {
        self.opened(fh, flags)
    }

    fn passthrough(self, fh: FileHandle, flags: FopenFlags, backing: &fuser::BackingId) {
        self.opened_passthrough(fh, flags, backing)
    }
}

/// A create's reply, with the new file's attributes.
pub(crate) struct Created {
    pub(crate) attr: FileAttr,
    pub(crate) reply: ReplyCreate,
}

impl OpenReply for Created {
    fn register(&self, ram: &hscm_fs::FileRam) -> std::io::Result<fuser::BackingId> {
        ram.with_fd(|fd| self.reply.open_backing(fd))?
    }

    fn cached(self, fh: FileHandle, flags: FopenFlags) {
        self.reply
            .created(&crate::TTL, &self.attr, Generation(0), fh, flags)
    }

    fn passthrough(self, fh: FileHandle, flags: FopenFlags, backing: &fuser::BackingId) {
        self.reply
            .created_passthrough(&crate::TTL, &self.attr, Generation(0), fh, flags, backing)
    }
}

impl Fuse {
    /// Serves an open (or a create) of a file the file system has opened: through
    /// the page cache or by passthrough from the file's RAM (`passthrough.rs`).
    /// `uid`: who opens (root holds CAP_FSETID, whose writes keep setuid and
    /// setgid, so its closes have nothing to drop).
    pub(crate) fn serve_open(
        &self,
        ino: u64,
        flags: i32,
        uid: u32,
        reply: impl OpenReply,
    ) -> Served {
        let writable = flags & libc_o_accmode() != O_RDONLY;
        // Only a read-write open can map the file shared and writable (mmap needs
        // read access, and write access for PROT_WRITE with MAP_SHARED).
        let may_map_writable = flags & libc_o_accmode() == O_RDWR;
        let ram = if self.opens.enabled() {
            self.fs.file_ram(ino)
        } else {
            None
        };
        let access = if !writable {
            OpenAccess::Read
        } else if self.fs.durability() != hscm_fs::Durability::Immediate
            && !self.write_must_drop_privileges(ino)
            && !self.fs.near_full()
        {
            OpenAccess::WriteByKernel
        } else {
            OpenAccess::WriteThroughDaemon
        };
        let kernel_writes = || match self.fs.begin_kernel_writes(ino) {
            Ok(started) => started,
            Err(e) => {
                tracing::warn!("serving file {ino} through the daemon: {e}");
                false
            }
        };
        let mappings_to_daemon = may_map_writable && !self.passthrough_read_write;
        // A close that has nothing to do sends no FLUSH (`FOPEN_NOFLUSH`): one
        // round trip less per file read (grep, compilers), and per file root
        // writes in on-flush mode while its write-back may wait for the next fsync
        // (tar, cp). The release, which the kernel sends without waiting, does the
        // rest. Another user's close keeps its FLUSH: setuid and setgid bits set
        // after its open must be gone when its close returns, if it wrote.
        let no_flush = |served: Served| match served {
            Served::Passthrough => true,
            Served::Cached => access == OpenAccess::Read,
            Served::PassthroughWritable => uid == 0 && self.fs.may_defer_write_back(),
            _ => false,
        };
        self.opens.open(
            ino,
            access,
            mappings_to_daemon,
            ram,
            kernel_writes,
            no_flush,
            reply,
        )
    }

    /// Drops the kernel's cached pages of a file whose last cached open closed: the
    /// next opens may read its RAM directly, and the pages would be a second copy.
    pub(crate) fn drop_cached_pages(&self, ino: INodeNo) {
        if let Some(n) = self.notifier.get() {
            if let Err(e) = n.inval_inode(ino, 0, 0) {
                tracing::debug!("dropping the cached pages of inode {ino}: {e}");
            }
        }
    }

    /// Makes the kernel forget `ino`'s cached attributes: for a mode the file
    /// system changed on its own (setuid dropped by a write), which the kernel's copy
    /// would otherwise show until its timeout.
    pub(crate) fn forget_attributes(&self, ino: INodeNo) {
        if let Some(n) = self.notifier.get() {
            // A negative offset: the attributes only, not the cached pages.
            if let Err(e) = n.inval_inode(ino, -1, 0) {
                tracing::warn!("telling the kernel inode {ino} changed: {e}");
            }
        }
    }
}

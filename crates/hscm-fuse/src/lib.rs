//! FUSE for hscm-fs: each kernel request becomes one call of the file system's
//! inode-based API, several threads at a time (fuser's cloned /dev/fuse descriptors).
//!
//! The kernel checks permissions (`default_permissions`) and keeps file pages in its
//! page cache between opens (`FOPEN_KEEP_CACHE`: nothing but this mount changes the
//! files). How writes use the page cache follows the durability mode:
//! - Immediate: writes are not cached; every write(2) reaches the file system before
//!   it returns, which is what the mode promises. Shared writable mmap works through
//!   the page cache and reaches the file system at msync or writeback.
//! - OnFlush: the kernel's writeback cache (`FUSE_WRITEBACK_CACHE`) holds written
//!   pages and sends them later, in large writes; fsync sends them and then commits,
//!   which is all the mode promises. The kernel then keeps size and mtime itself,
//!   handles `O_APPEND`, and may read through a write-only handle (to fill a page it
//!   writes part of), so no handle here carries its access mode.
//!
//! The file system drops setuid and setgid itself (`FUSE_HANDLE_KILLPRIV_V2`): on a
//! write the kernel flags, on a chown, on a truncate or fallocate by a caller other
//! than root. The kernel then marks the super block `SB_NOSEC` and stops asking
//! for `security.capability` before each write, a round trip that took most of a
//! cached write's time.

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::sync::{Arc, OnceLock};
use std::time::{Duration, SystemTime};

mod convert;
mod dirs;
pub mod dirty;
mod mappings;
mod mounting;
pub mod mounts;
mod options;
mod passthrough;
mod privileges;
mod stats;

use convert::{errno, file_attr, kind_of_mode, time_or_now};
use dirs::Dirs;
use passthrough::{
    libc_o_accmode, Created, OpenAccess, OpenReply, Opens, Served, O_RDONLY, O_RDWR,
};

pub use mounting::{mount, raise_descriptor_limit, session_config, Access, DIRTY_SHARE_PERCENT};
pub use stats::{FuseStats, FUSE_OPS};

use fuser::{
    Errno, FileHandle, FopenFlags, Generation, INodeNo, KernelConfig, LockOwner, OpenFlags,
    ReplyAttr, ReplyCreate, ReplyData, ReplyDirectory, ReplyEmpty, ReplyEntry, ReplyOpen,
    ReplyStatfs, ReplyWrite, ReplyXattr, Request, TimeOrNow, WriteFlags,
};
use hscm_fs::{
    Allocate, Attr, DropSetid, FileSystem, Kind, Owner, RenameFlags, SetAttr, WriteOptions,
};

/// How long the kernel may trust an attribute or a name: every change comes through
/// this mount, so the only risk is a file changed by the daemon itself (none is).
const TTL: Duration = Duration::from_secs(1);
/// A file's read path, as an extended attribute only root can read and no listing
/// shows (`getfattr -n trusted.hscm.in_ram FILE`): `passthrough` (wholly in RAM, the
/// kernel reads it there), `ram` (in RAM, read through the daemon), or `device`
/// (not in RAM, or not loaded yet).
pub const IN_RAM_XATTR: &[u8] = b"trusted.hscm.in_ram";

/// Where Linux keeps a file's capabilities; a write removes them.
const CAPABILITY_XATTR: &[u8] = b"security.capability";

/// The largest write the kernel sends in one request.
pub const MAX_WRITE: u32 = 1 << 20;

/// The file system as fuser serves it.
pub struct Fuse {
    fs: Arc<FileSystem>,
    writeback_cache: bool,
    /// The kernel agreed that the file system drops setuid and setgid itself
    /// (`FUSE_HANDLE_KILLPRIV_V2`); it then says which writes must, and leaves
    /// chown and truncate to it.
    kills_setid: bool,
    /// The session's channel for telling the kernel what changed behind its back:
    /// set by [`mount`] once the session exists.
    notifier: Arc<OnceLock<fuser::Notifier>>,
    /// Open directory handles and the listing each reads from.
    dirs: Dirs,
    /// Ask the kernel for FUSE passthrough at mount.
    passthrough_wanted: bool,
    /// Serve read-write opens by passthrough too, their msync not reaching the
    /// daemon (`passthrough.rs`).
    passthrough_read_write: bool,
    /// How each open file is served (`passthrough.rs`).
    opens: Opens,
    /// Runs the fsyncs that must first have mapped pages written back.
    syncer: mappings::Syncer,
    stats: Arc<FuseStats>,
}

impl Fuse {
    /// Serves an open (or a create) of a file the file system has opened: through
    /// the page cache or by passthrough from the file's RAM (`passthrough.rs`).
    fn serve_open(&self, ino: u64, flags: i32, reply: impl OpenReply) -> Served {
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
        self.opens
            .open(ino, access, mappings_to_daemon, ram, kernel_writes, reply)
    }

    /// Drops the kernel's cached pages of a file whose last cached open closed: the
    /// next opens may read its RAM directly, and the pages would be a second copy.
    fn drop_cached_pages(&self, ino: INodeNo) {
        if let Some(n) = self.notifier.get() {
            if let Err(e) = n.inval_inode(ino, 0, 0) {
                tracing::debug!("dropping the cached pages of inode {ino}: {e}");
            }
        }
    }

    /// Makes the kernel forget `ino`'s cached attributes: for a mode the file
    /// system changed on its own (setuid dropped by a write), which the kernel's copy
    /// would otherwise show until its timeout.
    fn forget_attributes(&self, ino: INodeNo) {
        if let Some(n) = self.notifier.get() {
            // A negative offset: the attributes only, not the cached pages.
            if let Err(e) = n.inval_inode(ino, -1, 0) {
                tracing::warn!("telling the kernel inode {ino} changed: {e}");
            }
        }
    }
}

impl Fuse {
    /// Who owns a new node: the caller, with the group of a setgid parent (and a new
    /// directory there inherits setgid), as on local Linux file systems.
    fn owner(&self, req: &Request, parent: u64, mode: u32, dir: bool) -> (Owner, u32) {
        let mut owner = Owner {
            uid: req.uid(),
            gid: req.gid(),
        };
        let mut mode = mode;
        if let Ok(p) = self.fs.getattr(parent) {
            if p.perm & 0o2000 != 0 {
                owner.gid = p.gid;
                if dir {
                    mode |= 0o2000;
                }
            }
        }
        (owner, mode)
    }

    fn entry(&self, result: hscm_fs::Result<Attr>, reply: ReplyEntry) {
        match result {
            Ok(a) => reply.entry(&TTL, &file_attr(&a), Generation(0)),
            Err(e) => reply.error(errno(e)),
        }
    }

    fn empty(&self, result: hscm_fs::Result<()>, reply: ReplyEmpty) {
        match result {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(errno(e)),
        }
    }

    fn xattr_reply(bytes: Vec<u8>, size: u32, reply: ReplyXattr) {
        if size == 0 {
            reply.size(bytes.len() as u32);
        } else if (size as usize) < bytes.len() {
            reply.error(Errno::from_i32(34)); // ERANGE
        } else {
            reply.data(&bytes);
        }
    }
}

impl fuser::Filesystem for Fuse {
    fn init(&mut self, _req: &Request, config: &mut KernelConfig) -> std::io::Result<()> {
        // Ask for 1 MiB writes; an older kernel keeps its own limit.
        let _ = config.set_max_write(MAX_WRITE);
        self.kills_setid = config
            .add_capabilities(fuser::InitFlags::FUSE_HANDLE_KILLPRIV_V2)
            .is_ok();
        if !self.passthrough_wanted {
            tracing::info!("FUSE passthrough off: every read goes through the daemon");
        } else {
            // Depth 1: the backing files (memfds) sit on no stacked file system, and
            // this mount can still be stacked under one.
            match config.add_capabilities(fuser::InitFlags::FUSE_PASSTHROUGH) {
                Ok(()) if config.set_max_stack_depth(1).is_ok() => {
                    tracing::info!("FUSE passthrough on: the kernel reads and writes files in RAM directly");
                    self.opens.enable(true)
                }
                _ => tracing::warn!(
                    "the kernel offers no FUSE passthrough (Linux 6.9 and later have it): files are read through the daemon"
                ),
            }
        }
        if self.writeback_cache && !self.opens.enabled() {
            if let Err(missing) = config.add_capabilities(fuser::InitFlags::FUSE_WRITEBACK_CACHE) {
                tracing::warn!("the kernel has no writeback cache for FUSE ({missing:?}): every write goes through");
                self.writeback_cache = false;
            }
        } else {
            self.writeback_cache = false;
        }
        Ok(())
    }

    fn destroy(&mut self) {
        // What fails here is reported again, by name, when the mount ends
        // (`FileSystem::write_back_each`), and makes it end with an error.
        for (ino, e) in self.fs.write_back_each() {
            tracing::error!("writing home what the kernel wrote in file {ino}'s RAM: {e}");
        }
        if let Err(e) = self.fs.sync_all() {
            tracing::error!("committing at unmount: {e}");
        }
    }

    fn lookup(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEntry) {
        let found = self.stats.time(
            stats::LOOKUP,
            || self.fs.lookup(parent.0, name.as_bytes()),
            |_| 0,
        );
        self.entry(found, reply)
    }

    fn getattr(&self, _req: &Request, ino: INodeNo, _fh: Option<FileHandle>, reply: ReplyAttr) {
        match self
            .stats
            .time(stats::GETATTR, || self.fs.getattr(ino.0), |_| 0)
        {
            Ok(a) => reply.attr(&TTL, &file_attr(&a)),
            Err(e) => reply.error(errno(e)),
        }
    }

    fn setattr(
        &self,
        req: &Request,
        ino: INodeNo,
        mode: Option<u32>,
        uid: Option<u32>,
        gid: Option<u32>,
        size: Option<u64>,
        atime: Option<TimeOrNow>,
        mtime: Option<TimeOrNow>,
        _ctime: Option<SystemTime>,
        _fh: Option<FileHandle>,
        _crtime: Option<SystemTime>,
        _chgtime: Option<SystemTime>,
        _bkuptime: Option<SystemTime>,
        _flags: Option<fuser::BsdFileFlags>,
        reply: ReplyAttr,
    ) {
        let set = SetAttr {
            mode,
            uid,
            gid,
            size,
            atime: atime.map(time_or_now),
            mtime: mtime.map(time_or_now),
            drop_setid: self.setattr_drops(req, uid.is_some() || gid.is_some(), size.is_some()),
        };
        let times_only = mode.is_none() && uid.is_none() && gid.is_none() && size.is_none();
        match self.fs.setattr(ino.0, set) {
            Ok(a) => reply.attr(&TTL, &file_attr(&a)),
            // With the writeback cache the kernel keeps a file's times and flushes
            // a new ctime right after an unlink; when that removed the last name
            // of a closed file, the file is gone here. Its times have nothing left
            // to change: answered as done, or the flush's ENOENT would be every
            // later syncfs's error (`fuse_flush_time_update` keeps it).
            Err(hscm_fs::Error::NotFound) if times_only => {
                let now = hscm_fs::Time::now();
                let gone = Attr {
                    ino: ino.0,
                    kind: Kind::File,
                    perm: 0,
                    nlink: 0,
                    uid: 0,
                    gid: 0,
                    rdev: 0,
                    size: 0,
                    allocated: 0,
                    atime: set.atime.unwrap_or(now),
                    mtime: set.mtime.unwrap_or(now),
                    ctime: now,
                    crtime: now,
                };
                reply.attr(&Duration::ZERO, &file_attr(&gone))
            }
            Err(e) => reply.error(errno(e)),
        }
    }

    fn readlink(&self, _req: &Request, ino: INodeNo, reply: ReplyData) {
        match self.fs.readlink(ino.0) {
            Ok(t) => reply.data(&t),
            Err(e) => reply.error(errno(e)),
        }
    }

    fn mknod(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        umask: u32,
        rdev: u32,
        reply: ReplyEntry,
    ) {
        let Some(kind) = kind_of_mode(mode) else {
            return reply.error(Errno::from_i32(22));
        };
        let (owner, perm) = self.owner(req, parent.0, mode & !umask, false);
        self.entry(
            self.fs
                .mknod(parent.0, name.as_bytes(), kind, perm, rdev, owner),
            reply,
        )
    }

    fn mkdir(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        umask: u32,
        reply: ReplyEntry,
    ) {
        let (owner, perm) = self.owner(req, parent.0, mode & !umask, true);
        self.entry(self.fs.mkdir(parent.0, name.as_bytes(), perm, owner), reply)
    }

    fn unlink(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        self.empty(self.fs.unlink(parent.0, name.as_bytes()), reply)
    }

    fn rmdir(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        self.empty(self.fs.rmdir(parent.0, name.as_bytes()), reply)
    }

    fn symlink(
        &self,
        req: &Request,
        parent: INodeNo,
        link_name: &OsStr,
        target: &Path,
        reply: ReplyEntry,
    ) {
        let (owner, _) = self.owner(req, parent.0, 0o777, false);
        self.entry(
            self.fs.symlink(
                parent.0,
                link_name.as_bytes(),
                target.as_os_str().as_bytes(),
                owner,
            ),
            reply,
        )
    }

    fn rename(
        &self,
        _req: &Request,
        parent: INodeNo,
        name: &OsStr,
        newparent: INodeNo,
        newname: &OsStr,
        flags: fuser::RenameFlags,
        reply: ReplyEmpty,
    ) {
        if flags.contains(fuser::RenameFlags::RENAME_WHITEOUT) {
            return reply.error(Errno::from_i32(95));
        }
        let flags = RenameFlags {
            no_replace: flags.contains(fuser::RenameFlags::RENAME_NOREPLACE),
            exchange: flags.contains(fuser::RenameFlags::RENAME_EXCHANGE),
        };
        self.empty(
            self.fs.rename(
                parent.0,
                name.as_bytes(),
                newparent.0,
                newname.as_bytes(),
                flags,
            ),
            reply,
        )
    }

    fn link(
        &self,
        _req: &Request,
        ino: INodeNo,
        newparent: INodeNo,
        newname: &OsStr,
        reply: ReplyEntry,
    ) {
        self.entry(self.fs.link(ino.0, newparent.0, newname.as_bytes()), reply)
    }

    fn open(&self, _req: &Request, ino: INodeNo, flags: OpenFlags, reply: ReplyOpen) {
        match self.fs.open(ino.0) {
            Ok(_) => {
                self.serve_open(ino.0, flags.0, reply);
            }
            Err(e) => reply.error(errno(e)),
        }
    }

    fn create(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        umask: u32,
        flags: i32,
        reply: ReplyCreate,
    ) {
        let (owner, perm) = self.owner(req, parent.0, mode & !umask, false);
        let made = self.stats.time(
            stats::CREATE,
            || {
                self.fs
                    .mknod(parent.0, name.as_bytes(), Kind::File, perm, 0, owner)
                    .and_then(|a| self.fs.open(a.ino))
            },
            |_| 0,
        );
        match made {
            Ok(a) => {
                self.serve_open(
                    a.ino,
                    flags,
                    Created {
                        attr: file_attr(&a),
                        reply,
                    },
                );
            }
            Err(e) => reply.error(errno(e)),
        }
    }

    fn read(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        size: u32,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyData,
    ) {
        match self.stats.time(
            stats::READ,
            || self.fs.read(ino.0, offset, size),
            |d| d.len() as u64,
        ) {
            Ok(data) => reply.data(&data),
            Err(e) => reply.error(errno(e)),
        }
    }

    fn write(
        &self,
        req: &Request,
        ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        data: &[u8],
        write_flags: WriteFlags,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyWrite,
    ) {
        let how = WriteOptions {
            // The kernel's writeback of cached pages (the writeback cache's, shared
            // mmap's) takes a short answer as the whole page written.
            all_or_nothing: write_flags.contains(WriteFlags::FUSE_WRITE_CACHE),
            // The kernel flags the writes that must drop them (the caller lacks
            // CAP_FSETID), if it agreed to; otherwise it drops them itself.
            drop_setid: if self.kills_setid
                && write_flags.contains(WriteFlags::FUSE_WRITE_KILL_SUIDGID)
            {
                DropSetid::Modify {
                    caller_gid: req.gid(),
                }
            } else {
                DropSetid::Keep
            },
        };
        let written = self.stats.time(
            stats::WRITE,
            || match Served::of(fh) {
                Served::CachedWritesToRam => self.fs.write_to_ram(ino.0, offset, data, how),
                _ => self.fs.write_with(ino.0, offset, data, how),
            },
            |n| u64::from(*n),
        );
        let mut changed_attributes = how.drop_setid != DropSetid::Keep;
        // A write drops a file capability, whoever writes (as Linux does). The
        // kernel does it itself only on writes through its page cache; direct and
        // passthrough writes leave it to the file system.
        if written.is_ok() && self.fs.getxattr(ino.0, CAPABILITY_XATTR).is_ok() {
            if let Err(e) = self.fs.removexattr(ino.0, CAPABILITY_XATTR) {
                tracing::warn!("dropping the capability of inode {ino} after a write: {e}");
            }
            changed_attributes = true;
        }
        if changed_attributes && written.is_ok() {
            self.forget_attributes(ino);
        }
        match written {
            Ok(n) => reply.written(n),
            Err(e) => reply.error(errno(e)),
        }
    }

    /// Each close(2) of an open through which the kernel wrote the file's RAM
    /// takes those writes home before it returns, so that what cannot go home (a
    /// full file system) is the close's error, as NFS reports it, and never only a
    /// line in the log. (The release that follows is asynchronous: the kernel
    /// ignores its answer.)
    fn flush(
        &self,
        _req: &Request,
        ino: INodeNo,
        fh: FileHandle,
        _lock_owner: LockOwner,
        reply: ReplyEmpty,
    ) {
        if !Served::of(fh).kernel_writes() {
            return reply.ok();
        }
        let written_back = self.fs.write_back_ram(ino.0);
        match &written_back {
            Ok(n) if *n > 0 && Served::of(fh) == Served::PassthroughWritable => {
                self.drop_privileges_after_unseen_writes(ino)
            }
            Ok(_) => {}
            Err(e) => tracing::warn!(
                "closing inode {ino}: what the kernel wrote in RAM did not all go home: {e}"
            ),
        }
        self.empty(written_back.map(|_| ()), reply)
    }

    fn release(
        &self,
        _req: &Request,
        ino: INodeNo,
        fh: FileHandle,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        _flush: bool,
        reply: ReplyEmpty,
    ) {
        let served = Served::of(fh);
        if served.kernel_writes() {
            // Its writes went home at the FLUSH of each close(2) before this (whose
            // answer the program sees; the kernel ignores a release's). A mapping
            // that outlives the open keeps the file's hashes, and its writes go home
            // at the next fsync or at unmount: no second pass over the file here.
            self.fs.end_kernel_writes(ino.0);
        }
        if self.opens.release(ino.0, served) {
            self.drop_cached_pages(ino);
        }
        self.empty(self.fs.release(ino.0), reply)
    }

    fn fsync(
        &self,
        _req: &Request,
        ino: INodeNo,
        fh: FileHandle,
        _datasync: bool,
        reply: ReplyEmpty,
    ) {
        let _ = fh;
        // An fsync commits everything, so it takes home every file the kernel wrote
        // in RAM, not only this one: in the files' RAM, and in dirty pages of
        // mappings (`mappings.rs`).
        self.sync_everything(ino.0, Some(ino.0), reply, stats::FSYNC);
    }

    fn opendir(&self, _req: &Request, ino: INodeNo, _flags: OpenFlags, reply: ReplyOpen) {
        if let Err(e) = self.fs.parent_of(ino.0) {
            return reply.error(errno(e));
        }
        match self.dirs.open() {
            Some(fh) => reply.opened(FileHandle(fh), FopenFlags::empty()),
            None => {
                tracing::warn!(
                    "{} directories open on this mount: opendir refused (EMFILE)",
                    dirs::MAX_OPEN_DIRS
                );
                reply.error(Errno::from_i32(24))
            }
        }
    }

    fn releasedir(
        &self,
        _req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        _flags: OpenFlags,
        reply: ReplyEmpty,
    ) {
        self.dirs.close(fh.0);
        reply.ok();
    }

    /// A page of the live directory from where the handle left off (`dirs.rs`):
    /// O(1) memory per open directory, O(n) over all the calls that list it.
    fn readdir(
        &self,
        _req: &Request,
        ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        mut reply: ReplyDirectory,
    ) {
        match self.list(ino.0, fh.0, offset, &mut reply) {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(errno(e)),
        }
    }

    fn fsyncdir(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        _datasync: bool,
        reply: ReplyEmpty,
    ) {
        // A directory's fsync commits everything too, so it takes home what the
        // kernel wrote in files' RAM first (a file's own failure is its own
        // fsync's or close's to report).
        self.sync_everything(ino.0, None, reply, stats::FSYNC);
    }

    fn statfs(&self, _req: &Request, _ino: INodeNo, reply: ReplyStatfs) {
        let s = self.fs.statfs();
        reply.statfs(
            s.blocks,
            s.free_blocks,
            s.free_blocks,
            s.files,
            s.free_files,
            s.block_size as u32,
            s.name_max,
            s.block_size as u32,
        )
    }

    fn setxattr(
        &self,
        _req: &Request,
        ino: INodeNo,
        name: &OsStr,
        value: &[u8],
        flags: i32,
        _position: u32,
        reply: ReplyEmpty,
    ) {
        // XATTR_CREATE = 1, XATTR_REPLACE = 2.
        self.empty(
            self.fs.setxattr(
                ino.0,
                name.as_bytes(),
                value,
                flags & 1 != 0,
                flags & 2 != 0,
            ),
            reply,
        )
    }

    fn getxattr(&self, _req: &Request, ino: INodeNo, name: &OsStr, size: u32, reply: ReplyXattr) {
        if name.as_bytes() == IN_RAM_XATTR {
            let state = match (self.fs.file_ram(ino.0), self.opens.enabled()) {
                (Some(_), true) => "passthrough",
                (Some(_), false) => "ram",
                (None, _) => "device",
            };
            return Self::xattr_reply(state.as_bytes().to_vec(), size, reply);
        }
        match self.fs.getxattr(ino.0, name.as_bytes()) {
            Ok(v) => Self::xattr_reply(v, size, reply),
            Err(e) => reply.error(errno(e)),
        }
    }

    fn listxattr(&self, _req: &Request, ino: INodeNo, size: u32, reply: ReplyXattr) {
        match self.fs.listxattr(ino.0) {
            Ok(names) => {
                let mut bytes = Vec::new();
                for n in names {
                    bytes.extend_from_slice(&n);
                    bytes.push(0);
                }
                Self::xattr_reply(bytes, size, reply)
            }
            Err(e) => reply.error(errno(e)),
        }
    }

    fn removexattr(&self, _req: &Request, ino: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        self.empty(self.fs.removexattr(ino.0, name.as_bytes()), reply)
    }

    fn access(&self, _req: &Request, ino: INodeNo, _mask: fuser::AccessFlags, reply: ReplyEmpty) {
        // The kernel checked the permissions (default_permissions); existence is ours.
        self.empty(self.fs.getattr(ino.0).map(|_| ()), reply)
    }

    fn fallocate(
        &self,
        req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        length: u64,
        mode: i32,
        reply: ReplyEmpty,
    ) {
        // FALLOC_FL_KEEP_SIZE = 1, FALLOC_FL_PUNCH_HOLE = 2 (always with KEEP_SIZE).
        let how = match mode {
            0 => Allocate::Extend,
            1 => Allocate::KeepSize,
            3 => Allocate::PunchHole,
            _ => return reply.error(Errno::from_i32(95)),
        };
        // As a write does (see setattr_drops); the kernel sends no flag for it.
        let drop_setid = self.setattr_drops(req, false, true);
        let done = self
            .fs
            .fallocate_with(ino.0, offset, length, how, drop_setid);
        if drop_setid != DropSetid::Keep && done.is_ok() {
            self.forget_attributes(ino);
        }
        self.empty(done, reply)
    }
}

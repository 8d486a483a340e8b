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
mod releases;
mod stats;
pub mod uring;

use convert::{errno, file_attr, kind_of_mode, time_or_now};
use dirs::Dirs;
use passthrough::{Created, Opens, Served};

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

/// How long the kernel may trust an attribute, a name, or the absence of a name.
/// Every change comes through this mount, and the kernel updates what it caches
/// with each change it sends; the few the daemon makes on its own (setuid, setgid
/// and capabilities dropped after writes it did not see) it tells the kernel of
/// (`forget_attributes`). So a repeated stat, or a lookup of a name the kernel has
/// seen, present or absent, costs no round trip (docs/fs.md, "Round trips").
const TTL: Duration = Duration::from_secs(3600);
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
    /// FUSE over io_uring: asked for, granted, carried (`uring`).
    rings: Arc<uring::RingState>,
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
        self.negotiate(config);
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
        // A name that is not there is an answer, not an error (for the mount's error
        // counts): the kernel keeps its absence (a node id of 0) for the TTL, so the
        // next lookup of it (git's and compilers' many probes for files that do not
        // exist) costs no round trip. A create of the name through this mount
        // replaces it.
        let found = self.stats.time(
            stats::LOOKUP,
            || match self.fs.lookup(parent.0, name.as_bytes()) {
                Err(hscm_fs::Error::NotFound) => Ok(None),
                found => found.map(Some),
            },
            |_| 0,
        );
        match found {
            Ok(None) => reply.entry(&TTL, &convert::absent(), Generation(0)),
            Ok(Some(a)) => self.entry(Ok(a), reply),
            Err(e) => self.entry(Err(e), reply),
        }
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
        match self
            .stats
            .time(stats::SETATTR, || self.fs.setattr(ino.0, set), |_| 0)
        {
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
        self.stats.count(stats::READLINK);
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
        self.stats.count(stats::MKNOD);
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
        let made = self.stats.time(
            stats::MKDIR,
            || self.fs.mkdir(parent.0, name.as_bytes(), perm, owner),
            |_| 0,
        );
        self.entry(made, reply)
    }

    fn unlink(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        let ino = self.inode_to_free(parent.0, name.as_bytes());
        let gone = self.stats.time(
            stats::UNLINK,
            || self.fs.unlink(parent.0, name.as_bytes()),
            |_| 0,
        );
        if gone.is_ok() {
            // Space held by a close the kernel has sent on is free when this returns
            // (`releases.rs`).
            self.wait_for_releases(ino);
        }
        self.empty(gone, reply)
    }

    fn rmdir(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        self.stats.count(stats::RMDIR);
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
        self.stats.count(stats::SYMLINK);
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
        let replaced = match flags.exchange {
            true => None,
            false => self.inode_to_free(newparent.0, newname.as_bytes()),
        };
        let renamed = self.stats.time(
            stats::RENAME,
            || {
                self.fs.rename(
                    parent.0,
                    name.as_bytes(),
                    newparent.0,
                    newname.as_bytes(),
                    flags,
                )
            },
            |_| 0,
        );
        if renamed.is_ok() {
            self.wait_for_releases(replaced);
        }
        self.empty(renamed, reply)
    }

    fn link(
        &self,
        _req: &Request,
        ino: INodeNo,
        newparent: INodeNo,
        newname: &OsStr,
        reply: ReplyEntry,
    ) {
        self.stats.count(stats::LINK);
        self.entry(self.fs.link(ino.0, newparent.0, newname.as_bytes()), reply)
    }

    fn open(&self, req: &Request, ino: INodeNo, flags: OpenFlags, reply: ReplyOpen) {
        match self.stats.time(stats::OPEN, || self.fs.open(ino.0), |_| 0) {
            Ok(_) => {
                self.serve_open(ino.0, flags.0, req.uid(), reply);
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
                    req.uid(),
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

    /// A close(2) of an open through which the kernel wrote the file's RAM. In
    /// on-flush mode those writes wait in RAM for the next fsync (bounded:
    /// `FileSystem::close_after_kernel_writes`); near full, past the bound, in
    /// immediate mode, or where a write must drop privileges the daemon did not see,
    /// they go home before the close returns, and what cannot go (a full file
    /// system) is the close's error, as NFS reports it, never only a line in the
    /// log. (The release that follows is asynchronous: the kernel ignores its
    /// answer.)
    fn flush(
        &self,
        _req: &Request,
        ino: INodeNo,
        fh: FileHandle,
        _lock_owner: LockOwner,
        reply: ReplyEmpty,
    ) {
        let served = Served::of(fh);
        if !served.kernel_writes() {
            return reply.ok();
        }
        let written_back = self
            .stats
            .time(stats::FLUSH, || self.close_written(ino, served), |_| 0);
        if let Err(e) = &written_back {
            tracing::warn!(
                "closing inode {ino}: what the kernel wrote in RAM did not all go home: {e}"
            );
        }
        self.empty(written_back, reply)
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
        let _serving = self.rings.releases.serving(ino.0);
        let served = Served::of(fh);
        if served.kernel_writes() {
            if passthrough::closes_without_flush(fh) {
                // The close sent no FLUSH: its work is done here, where nobody
                // waits for it. What cannot go home now stays in RAM for the next
                // fsync, which reports it (and the unmount, by its exit code).
                if let Err(e) = self.close_written(ino, served) {
                    tracing::warn!(
                        "after the close of inode {ino}: what the kernel wrote in RAM did not all go home ({e}); the next fsync tries again and reports it"
                    );
                }
            }
            // Its writes went home, or wait for the next fsync, since the FLUSH of
            // each close(2) before this (whose answer the program sees; the
            // kernel ignores a release's). A mapping that outlives the open keeps
            // the file's hashes, and its writes go home at the next fsync or at
            // unmount.
            self.fs.end_kernel_writes(ino.0);
        }
        if self.opens.release(ino.0, served) {
            self.drop_cached_pages(ino);
        }
        let released = self
            .stats
            .time(stats::RELEASE, || self.fs.release(ino.0), |_| 0);
        self.empty(released, reply)
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
        self.stats.count(stats::OPENDIR);
        if let Err(e) = self.fs.parent_of(ino.0) {
            return reply.error(errno(e));
        }
        match self.dirs.open() {
            // The kernel keeps the listing in its cache, across opens: only this
            // mount changes the directory, and each change made through it drops
            // the cached listing (`fuse_dir_changed`), so `du` after `find` asks
            // for no listing again.
            Some(fh) => reply.opened(
                FileHandle(fh),
                FopenFlags::FOPEN_CACHE_DIR | FopenFlags::FOPEN_KEEP_CACHE,
            ),
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
        self.stats.count(stats::RELEASEDIR);
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
        reply: ReplyDirectory,
    ) {
        self.list_and_answer(ino.0, fh.0, offset, reply)
    }

    /// Readdir with each entry's attributes, as a lookup would answer (the kernel
    /// asks for it when a program lists and then stats, as `ls -l` does).
    fn readdirplus(
        &self,
        _req: &Request,
        ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        reply: fuser::ReplyDirectoryPlus,
    ) {
        self.list_and_answer(ino.0, fh.0, offset, reply)
    }

    fn fsyncdir(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        _datasync: bool,
        reply: ReplyEmpty,
    ) {
        self.stats.count(stats::FSYNCDIR);
        // A directory's fsync commits everything too, so it takes home what the
        // kernel wrote in files' RAM first (a file's own failure is its own
        // fsync's or close's to report).
        self.sync_everything(ino.0, None, reply, stats::FSYNC);
    }

    fn statfs(&self, _req: &Request, _ino: INodeNo, reply: ReplyStatfs) {
        self.stats.count(stats::STATFS);
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
        self.stats.count(stats::SETXATTR);
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
        self.stats.count(stats::GETXATTR);
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
        self.stats.count(stats::LISTXATTR);
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
        self.stats.count(stats::REMOVEXATTR);
        self.empty(self.fs.removexattr(ino.0, name.as_bytes()), reply)
    }

    fn access(&self, _req: &Request, ino: INodeNo, _mask: fuser::AccessFlags, reply: ReplyEmpty) {
        self.stats.count(stats::ACCESS);
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
        self.stats.count(stats::FALLOCATE);
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

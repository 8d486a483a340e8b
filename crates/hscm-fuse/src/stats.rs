//! What the daemon served, by request, for a mount's metrics. Requests the kernel
//! serves itself (reads and writes of files by FUSE passthrough, cached pages) never
//! reach the daemon and are not here: the device counters show what reached the disk.

use std::time::Instant;

use hscm_block::{OpCounter, OpSnapshot};

/// The requests counted, in [`FuseStats::snapshot`]'s order.
pub const FUSE_OPS: [&str; 29] = [
    "lookup",
    "getattr",
    "read",
    "write",
    "create",
    "fsync",
    "flush",
    "release",
    "setattr",
    "unlink",
    "rename",
    "mkdir",
    "readdir",
    "open",
    "readlink",
    "mknod",
    "rmdir",
    "symlink",
    "link",
    "opendir",
    "releasedir",
    "fsyncdir",
    "statfs",
    "setxattr",
    "getxattr",
    "listxattr",
    "removexattr",
    "access",
    "fallocate",
];

pub(crate) const LOOKUP: usize = 0;
pub(crate) const GETATTR: usize = 1;
pub(crate) const READ: usize = 2;
pub(crate) const WRITE: usize = 3;
pub(crate) const CREATE: usize = 4;
pub(crate) const FSYNC: usize = 5;
pub(crate) const FLUSH: usize = 6;
pub(crate) const RELEASE: usize = 7;
pub(crate) const SETATTR: usize = 8;
pub(crate) const UNLINK: usize = 9;
pub(crate) const RENAME: usize = 10;
pub(crate) const MKDIR: usize = 11;
pub(crate) const READDIR: usize = 12;
pub(crate) const OPEN: usize = 13;
pub(crate) const READLINK: usize = 14;
pub(crate) const MKNOD: usize = 15;
pub(crate) const RMDIR: usize = 16;
pub(crate) const SYMLINK: usize = 17;
pub(crate) const LINK: usize = 18;
pub(crate) const OPENDIR: usize = 19;
pub(crate) const RELEASEDIR: usize = 20;
pub(crate) const FSYNCDIR: usize = 21;
pub(crate) const STATFS: usize = 22;
pub(crate) const SETXATTR: usize = 23;
pub(crate) const GETXATTR: usize = 24;
pub(crate) const LISTXATTR: usize = 25;
pub(crate) const REMOVEXATTR: usize = 26;
pub(crate) const ACCESS: usize = 27;
pub(crate) const FALLOCATE: usize = 28;

#[derive(Debug, Default)]
pub struct FuseStats {
    ops: [OpCounter; FUSE_OPS.len()],
}

impl FuseStats {
    /// Runs one request of kind `op` and counts it, with the bytes `bytes` says its
    /// answer moved.
    pub(crate) fn time<T, E>(
        &self,
        op: usize,
        run: impl FnOnce() -> Result<T, E>,
        bytes: impl FnOnce(&T) -> u64,
    ) -> Result<T, E> {
        let started = Instant::now();
        let r = run();
        let n = r.as_ref().map_or(0, bytes);
        self.ops[op].record(started, r.is_ok(), n);
        r
    }

    /// Counts one request of kind `op` whose time is not worth measuring.
    pub(crate) fn count(&self, op: usize) {
        self.ops[op].record(Instant::now(), true, 0);
    }

    pub fn snapshot(&self) -> Vec<OpSnapshot> {
        FUSE_OPS
            .iter()
            .zip(&self.ops)
            .map(|(name, op)| op.snapshot(name))
            .collect()
    }
}

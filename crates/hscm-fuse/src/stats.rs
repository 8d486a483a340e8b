//! What the daemon served, by request, for a mount's metrics. Requests the kernel
//! serves itself (reads and writes of files by FUSE passthrough, cached pages) never
//! reach the daemon and are not here: the device counters show what reached the disk.

use std::time::Instant;

use hscm_block::{OpCounter, OpSnapshot};

/// The requests counted, in [`FuseStats::snapshot`]'s order.
pub const FUSE_OPS: [&str; 6] = ["lookup", "getattr", "read", "write", "create", "fsync"];

pub(crate) const LOOKUP: usize = 0;
pub(crate) const GETATTR: usize = 1;
pub(crate) const READ: usize = 2;
pub(crate) const WRITE: usize = 3;
pub(crate) const CREATE: usize = 4;
pub(crate) const FSYNC: usize = 5;

#[derive(Debug, Default)]
pub struct FuseStats {
    ops: [OpCounter; 6],
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

    pub fn snapshot(&self) -> Vec<OpSnapshot> {
        FUSE_OPS
            .iter()
            .zip(&self.ops)
            .map(|(name, op)| op.snapshot(name))
            .collect()
    }
}

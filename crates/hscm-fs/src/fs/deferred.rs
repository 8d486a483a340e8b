//! On-flush closes that leave their write-back for later. A close of a file the
//! kernel wrote in RAM (by passthrough) writes nothing home: on-flush promises
//! nothing before an fsync, which takes every such file home (`write_back_all`).
//! What waits is bounded by `dirty_max` and counts as used space (`near_full`), so
//! a full file system is the error of a close, or at the latest of the fsync.

use std::collections::HashMap;

use super::ram::Ram;
use super::{Durability, FileSystem};
use crate::format::BLOCK;
use crate::Result;

/// Write-backs a close left for later ([`Ram::defer`]).
#[derive(Default)]
pub(super) struct Deferred {
    files: HashMap<u64, u64>,
    bytes: u64,
}

impl Ram {
    /// Notes that a close left `bytes` of `ino`'s kernel writes in RAM for a
    /// later write-back. Returns the bytes so left, over all files.
    pub(crate) fn defer(&self, ino: u64, bytes: u64) -> u64 {
        let mut d = self.deferred.lock();
        let old = d.files.insert(ino, bytes).unwrap_or(0);
        d.bytes = d.bytes - old + bytes;
        d.bytes
    }

    /// `ino`'s deferred write-back is done (or moot).
    pub(crate) fn written_back(&self, ino: u64) {
        let mut d = self.deferred.lock();
        if let Some(bytes) = d.files.remove(&ino) {
            d.bytes -= bytes;
        }
    }

    /// The files closes left waiting for a write-back.
    pub(crate) fn deferred_files(&self) -> Vec<u64> {
        self.deferred.lock().files.keys().copied().collect()
    }

    /// Bytes closes left in RAM for a later write-back, over all files.
    pub(crate) fn deferred_bytes(&self) -> u64 {
        self.deferred.lock().bytes
    }
}

impl FileSystem {
    /// A close of an open through which the kernel wrote `ino`'s RAM. On-flush
    /// promises nothing before an fsync, so the write-back waits for the next one
    /// (or the unmount), while the bytes so waiting stay under `dirty_max` and the
    /// file system is not near full. Otherwise, and in immediate mode, the close
    /// takes the file home itself, so that what cannot go (a full file system) is
    /// its error, and takes along every file left waiting. Returns the bytes
    /// written home now (0 when deferred).
    pub fn close_after_kernel_writes(&self, ino: u64) -> Result<u64> {
        let Some(f) = self.ram.get(ino) else {
            return Ok(0);
        };
        if self.durability == Durability::OnFlush {
            let bytes = f.byte_len().unwrap_or(0).next_multiple_of(BLOCK).max(BLOCK);
            if self.ram.defer(ino, bytes) <= self.dirty_max && !self.near_full() {
                return Ok(0);
            }
        }
        // The files left waiting first: their closes were acknowledged, and the
        // room they need must not go to this one, whose close can still fail.
        for other in self.ram.deferred_files() {
            if other == ino {
                continue;
            }
            if let Err(e) = self.write_back_ram(other) {
                tracing::warn!("writing home what the kernel wrote in file {other}: {e}");
            }
            self.close_if_idle(other);
        }
        self.write_back_ram(ino)
    }

    /// Whether a close of a file the kernel wrote may now leave its write-back to
    /// the next fsync (what [`Self::close_after_kernel_writes`] will decide,
    /// unless the file is larger than what is left under `dirty_max`).
    pub fn may_defer_write_back(&self) -> bool {
        self.durability == Durability::OnFlush
            && self.ram.deferred_bytes() < self.dirty_max
            && !self.near_full()
    }

    /// Bytes of files closed since their last write-back that wait in RAM for the
    /// next fsync (what `hscm status` shows as `dirty_bytes`).
    pub fn waiting_write_back_bytes(&self) -> u64 {
        self.ram.deferred_bytes()
    }

    /// [`crate::MountOptions::dirty_max`] (None in immediate mode, where nothing
    /// waits).
    pub fn dirty_max(&self) -> Option<u64> {
        (self.durability == Durability::OnFlush).then_some(self.dirty_max)
    }
}

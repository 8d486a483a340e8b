//! The device layer every engine writes through (the flat and the tiered volume
//! alike): a narrow trait with explicit sync semantics, the file or block-device
//! backend (`file`: O_DIRECT with a buffered fallback, the owner lock; `uring`: many
//! writes at once through io_uring) and the aligned buffers O_DIRECT needs (`aligned`).
//!
//! Contract (every implementation): `write_at` returning Ok means the bytes reached the
//! device (a later `read_at` returns them, but they may still sit in a volatile cache);
//! `sync` returning Ok means every write that returned Ok before `sync` was called
//! survives a power cut. Offsets, lengths and buffer addresses are multiples of
//! [`IO_ALIGN`] for every call the volume makes.

use std::io;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};

use crate::lock::LockError;

mod aligned;
mod file;
mod uring;

pub use aligned::AlignedBuf;
pub use file::FileBackend;

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

/// What completes a started write ([`Backend::start_write_through`]).
pub type WriteDone = Box<dyn FnOnce(io::Result<()>) + Send>;

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
    /// Starts [`Self::write_through_at`] without waiting for it: `done` is called
    /// exactly once with its outcome, from whichever thread sees it complete (it must
    /// not wait on the caller). Err(done), nothing started, where the backend cannot
    /// start this write now; the caller then writes with `write_through_at`. A network
    /// home does it so that one thread keeps many writes in flight with no thread
    /// waiting for each.
    fn start_write_through(
        &self,
        offset: u64,
        buf: &[u8],
        done: WriteDone,
    ) -> std::result::Result<(), WriteDone> {
        let _ = (offset, buf);
        Err(done)
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
    /// Where each member of a mirrored home stands; None for any other home.
    fn mirror_status(&self) -> Option<crate::members::MirrorStatus> {
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

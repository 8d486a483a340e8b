//! hscm-block: the one interface between hscm's engines and its front-ends.
//!
//! A [`BlockTarget`] is a byte-addressed device: read (copying, or lending the bytes to
//! a sink), write with flags (FUA), flush, discard (trim), write zeroes, and what it can
//! do ([`Capabilities`]). The durable volume implements it (in `hscm-volume`), so does
//! [`MemTarget`], a volatile in-memory target for tests and baselines; the shared-memory
//! ring serves any target, and so will the NBD and FUSE front-ends. The shape follows
//! nbdkit's plugin interface (pread, pwrite with FUA, flush, trim, zero, the can_*
//! queries and block-size constraints), so a front-end can map NBD's options and
//! commands onto it one to one.
//!
//! Every method takes `&self`: a target is shared across the connections and threads a
//! front-end serves, and orders concurrent requests itself.

#[cfg(any(test, feature = "testing"))]
pub mod conformance;
mod counted;
mod error;
mod extents;
mod latency;
mod mem;

pub use counted::{Counted, CounterSnapshot, OpCounter, OpSnapshot, OPS};
pub use error::{Error, Result};
pub use extents::{scan_extents, Extent, ExtentKind, EXTENT_UNIT};
pub use latency::{Latency, LatencySnapshot, LATENCY_BOUNDS_S};
pub use mem::MemTarget;

/// Flags of a write or a discard.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct WriteFlags {
    /// Force unit access: the request completes only once it is durable.
    pub fua: bool,
}

impl WriteFlags {
    pub const NONE: WriteFlags = WriteFlags { fua: false };
    pub const FUA: WriteFlags = WriteFlags { fua: true };
}

/// Flags of a write-zeroes request (NBD's WRITE_ZEROES flags).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ZeroFlags {
    /// Force unit access, as for a write.
    pub fua: bool,
    /// The range may be deallocated rather than written (NBD: no NO_HOLE flag).
    pub may_trim: bool,
    /// Fail with [`Error::Unsupported`] rather than zero slowly (NBD's FAST_ZERO): the
    /// caller would rather write the zeroes itself.
    pub fast_only: bool,
}

/// How a target honours FUA.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FuaSupport {
    /// Not at all: a FUA request is refused.
    None,
    /// By a flush after the request (correct, and as costly as a flush).
    Emulated,
    /// Natively: a FUA request costs no more than making that one request durable.
    Native,
}

/// Request sizes a target takes, in bytes (NBD_INFO_BLOCK_SIZE).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BlockSizes {
    /// Offsets and lengths must be multiples of this (1: any byte).
    pub minimum: u32,
    /// Requests of multiples of this avoid read-modify-write or other overhead.
    pub preferred: u32,
    /// The largest single read or write.
    pub maximum: u32,
}

/// What a target can do (nbdkit's can_* queries).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Capabilities {
    /// Writes, discards and zeroes are refused.
    pub read_only: bool,
    pub fua: FuaSupport,
    /// Completed writes may be volatile until a flush (so FLUSH means something).
    pub flush: bool,
    /// A flush makes every write completed before it durable, whichever connection
    /// made it (NBD's CAN_MULTI_CONN, with exactly that meaning).
    pub multi_conn: bool,
    /// Discard is implemented; a discarded range reads as zeroes afterwards.
    pub trim: bool,
    /// Write-zeroes is implemented.
    pub zero: bool,
    /// Write-zeroes is faster than writing the zeroes (so `fast_only` succeeds).
    pub fast_zero: bool,
    pub block_sizes: BlockSizes,
}

/// What completes a started write ([`BlockTarget::start_write`]).
pub type WriteDone = Box<dyn FnOnce(Result<()>) + Send>;

/// A byte-addressed device that a front-end serves.
///
/// Every request names `[offset, offset + len)`; one outside `[0, size())` fails with
/// [`Error::OutOfRange`] before anything happens. Durability: a write with
/// [`WriteFlags::FUA`] is durable when it returns; without it, the target's own rule
/// applies (a target whose `capabilities().flush` is false makes every write durable);
/// `flush` makes every write completed before it durable.
pub trait BlockTarget: Send + Sync {
    /// Size in bytes.
    fn size(&self) -> u64;

    fn capabilities(&self) -> Capabilities;

    /// Hands the `len` bytes at `offset` to `sink` piece by piece, in order, as
    /// `(position within the request, bytes)`, lending the target's own memory where
    /// it can (the zero-copy read): `sink` copies and returns.
    fn read_with(&self, offset: u64, len: usize, sink: &mut dyn FnMut(usize, &[u8])) -> Result<()>;

    /// Reads `buf.len()` bytes at `offset` into `buf`.
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> Result<()> {
        let len = buf.len();
        self.read_with(offset, len, &mut |at, piece| {
            buf[at..at + piece.len()].copy_from_slice(piece)
        })
    }

    fn write_at(&self, offset: u64, data: &[u8], flags: WriteFlags) -> Result<()>;

    /// Starts [`Self::write_at`] and returns at once: `done` hears the outcome,
    /// exactly once, from whichever thread sees the write complete (so it must not
    /// wait for the caller). Err(done), nothing started, where the target cannot
    /// start this write (the default); the caller then calls `write_at`. For a
    /// front-end that keeps many writes in flight from one thread, where each would
    /// otherwise wait on a thread of its own (a durable write to a network home).
    fn start_write(
        &self,
        offset: u64,
        data: &[u8],
        flags: WriteFlags,
        done: WriteDone,
    ) -> std::result::Result<(), WriteDone> {
        let _ = (offset, data, flags);
        Err(done)
    }

    /// Makes every write completed before the call durable.
    fn flush(&self) -> Result<()>;

    /// Trims `[offset, offset + len)`: afterwards it reads as zeroes (this layer
    /// promises that much, unlike NBD's TRIM, so front-ends can report trimmed ranges as
    /// zero).
    fn discard(&self, offset: u64, len: u64, flags: WriteFlags) -> Result<()>;

    /// Writes zeroes over `[offset, offset + len)`.
    fn write_zeroes(&self, offset: u64, len: u64, flags: ZeroFlags) -> Result<()>;

    /// Runs of data and of zeroes over `[offset, offset + len)`, in order, covering it
    /// (with `only_first`, the first run alone may be returned). The default reads
    /// the range ([`scan_extents`]); a target whose bytes are costly to read, or that
    /// knows its holes, answers itself.
    fn extents(&self, offset: u64, len: u64, only_first: bool) -> Result<Vec<Extent>> {
        scan_extents(self, offset, len, only_first)
    }
}

/// A shared target serves as the target itself: wrappers such as [`Counted`] can then
/// hold an `Arc` that the engine's owner keeps too.
impl<T: BlockTarget + ?Sized> BlockTarget for std::sync::Arc<T> {
    fn size(&self) -> u64 {
        (**self).size()
    }

    fn capabilities(&self) -> Capabilities {
        (**self).capabilities()
    }

    fn read_with(&self, offset: u64, len: usize, sink: &mut dyn FnMut(usize, &[u8])) -> Result<()> {
        (**self).read_with(offset, len, sink)
    }

    fn read_at(&self, offset: u64, buf: &mut [u8]) -> Result<()> {
        (**self).read_at(offset, buf)
    }

    fn write_at(&self, offset: u64, data: &[u8], flags: WriteFlags) -> Result<()> {
        (**self).write_at(offset, data, flags)
    }

    fn start_write(
        &self,
        offset: u64,
        data: &[u8],
        flags: WriteFlags,
        done: WriteDone,
    ) -> std::result::Result<(), WriteDone> {
        (**self).start_write(offset, data, flags, done)
    }

    fn flush(&self) -> Result<()> {
        (**self).flush()
    }

    fn discard(&self, offset: u64, len: u64, flags: WriteFlags) -> Result<()> {
        (**self).discard(offset, len, flags)
    }

    fn write_zeroes(&self, offset: u64, len: u64, flags: ZeroFlags) -> Result<()> {
        (**self).write_zeroes(offset, len, flags)
    }

    fn extents(&self, offset: u64, len: u64, only_first: bool) -> Result<Vec<Extent>> {
        (**self).extents(offset, len, only_first)
    }
}

/// The check every target makes first: `[offset, offset + len)` lies within `size`.
pub fn check_range(size: u64, offset: u64, len: u64) -> Result<()> {
    match offset.checked_add(len) {
        Some(end) if end <= size => Ok(()),
        _ => Err(Error::OutOfRange { offset, len, size }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_memory_target_keeps_the_contract() {
        conformance::check_writable(&MemTarget::new(256 << 10));
        conformance::check_writable(&Counted::new(MemTarget::new(64 << 10)));
        conformance::check_read_only(&MemTarget::read_only(vec![7; 4096]));
    }

    #[test]
    fn counted_counts_what_it_serves_and_what_fails() {
        let t = Counted::new(MemTarget::new(8192));
        t.write_at(0, &[1; 100], WriteFlags::FUA).unwrap();
        let mut b = [0u8; 10];
        t.read_at(5, &mut b).unwrap();
        t.discard(0, 4096, WriteFlags::NONE).unwrap();
        t.write_zeroes(4096, 10, ZeroFlags::default()).unwrap();
        t.flush().unwrap();
        assert!(t.write_at(8190, &[1; 4], WriteFlags::NONE).is_err());
        let s = t.snapshot();
        assert_eq!(
            (s.writes, s.write_bytes, s.reads, s.read_bytes),
            (1, 100, 1, 10)
        );
        assert_eq!(
            (s.discards, s.discard_bytes, s.zeroes, s.zero_bytes),
            (1, 4096, 1, 10)
        );
        assert_eq!((s.flushes, s.errors), (1, 1));
    }

    #[test]
    fn ranges_are_checked_without_overflow() {
        assert!(check_range(10, 0, 10).is_ok());
        assert!(check_range(10, 10, 0).is_ok());
        assert!(check_range(10, 5, 6).is_err());
        assert!(check_range(10, u64::MAX, 2).is_err());
        let e = check_range(10, 5, 6).unwrap_err();
        assert_eq!(e.errno(), 22);
    }
}

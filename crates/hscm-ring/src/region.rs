//! The shared region: header, queue pairs, data buffer (layout in docs/ring.md).
//!
//! Everything both processes touch at the same time is an atomic; the data buffer is
//! plain bytes the two sides take turns on, as the protocol hands a buffer from one
//! side to the other.

use std::fs::File;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

use memmap2::MmapMut;

use crate::error::{Error, Result};
use crate::ring::{CqSlot, SqSlot};

pub const MAGIC: u64 = u64::from_le_bytes(*b"HSCMRING");
pub const VERSION: u32 = 2;
pub const PROTOCOL_SECTOR: u64 = 512;
pub const HEADER_LEN: u64 = 4096;
/// Bytes of one queue pair before its SQ entries (index words on their own lines).
const QP_CONTROL: u64 = 512;
pub const SQ_ENTRY: u64 = 32;
pub const CQ_ENTRY: u64 = 16;
pub const MAX_QUEUES: u32 = 64;
pub const MAX_DEPTH: u32 = 4096;
pub const MIN_DB: u64 = 4096;
pub const MAX_DB: u64 = 1 << 30;

/// Region-wide state the server publishes in the header (0 while it runs).
pub const SERVER_CLOSED: u32 = 1;
/// Queue pair state once the server stops serving it (0 while served).
pub const QP_BROKEN: u32 = 1;

/// What a region holds; chosen by the server from the client's request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Geometry {
    pub queues: u32,
    pub depth: u32,
    pub db_len: u64,
    pub volume_size: u64,
}

impl Geometry {
    pub fn validate(&self) -> std::result::Result<(), String> {
        if self.queues == 0 || self.queues > MAX_QUEUES {
            return Err(format!("queues {} not in 1..={MAX_QUEUES}", self.queues));
        }
        if !self.depth.is_power_of_two() || self.depth < 2 || self.depth > MAX_DEPTH {
            return Err(format!(
                "queue depth {} is not a power of two in 2..={MAX_DEPTH}",
                self.depth
            ));
        }
        if !self.db_len.is_power_of_two() || !(MIN_DB..=MAX_DB).contains(&self.db_len) {
            return Err(format!(
                "data buffer of {} bytes is not a power of two in {MIN_DB}..={MAX_DB}",
                self.db_len
            ));
        }
        Ok(())
    }

    pub fn qp_stride(&self) -> u64 {
        let raw = QP_CONTROL + u64::from(self.depth) * (SQ_ENTRY + CQ_ENTRY);
        raw.next_multiple_of(4096)
    }

    pub fn qp_offset(&self, i: u32) -> u64 {
        HEADER_LEN + u64::from(i) * self.qp_stride()
    }

    pub fn db_offset(&self) -> u64 {
        self.qp_offset(self.queues)
    }

    pub fn region_len(&self) -> u64 {
        self.db_offset() + self.db_len
    }

    pub fn volume_sectors(&self) -> u64 {
        self.volume_size / PROTOCOL_SECTOR
    }
}

// Header field offsets.
const H_MAGIC: u64 = 0;
const H_VERSION: u64 = 8;
const H_QUEUES: u64 = 12;
const H_DEPTH: u64 = 16;
const H_DB_OFFSET: u64 = 24;
const H_DB_LEN: u64 = 32;
const H_VOLUME_SIZE: u64 = 40;
const H_REGION_LEN: u64 = 48;
const H_SERVER_STATE: u64 = 64;
const H_SERVER_DOORBELL: u64 = 128;
// Queue-pair field offsets (from the queue pair's start).
const Q_SQ_TAIL: u64 = 0;
const Q_SQ_HEAD: u64 = 64;
const Q_CQ_TAIL: u64 = 128;
const Q_CQ_HEAD: u64 = 192;
const Q_CQ_DOORBELL: u64 = 256;
const Q_STATE: u64 = 320;
const Q_ERROR: u64 = 324;
// Every control word ends before the queue pair's SQ slots (checked when compiling).
const _: () = assert!(
    Q_ERROR + 4 <= QP_CONTROL
        && Q_STATE + 4 <= QP_CONTROL
        && Q_CQ_DOORBELL + 4 <= QP_CONTROL
        && Q_CQ_HEAD + 4 <= QP_CONTROL
);

/// A mapped region. Both processes map the same memfd; neither trusts what the other
/// wrote into it.
pub struct Region {
    map: MmapMut,
    geometry: Geometry,
}

/// The words and slots of one queue pair.
#[derive(Clone, Copy)]
pub struct QueuePairView<'a> {
    pub sq_tail: &'a AtomicU32,
    pub sq_head: &'a AtomicU32,
    pub cq_tail: &'a AtomicU32,
    pub cq_head: &'a AtomicU32,
    pub cq_doorbell: &'a AtomicU32,
    pub state: &'a AtomicU32,
    pub error: &'a AtomicU32,
    pub sq: &'a [SqSlot],
    pub cq: &'a [CqSlot],
}

impl Region {
    /// Maps a fresh region file of the geometry's length and writes its header (server).
    pub fn create(file: &File, geometry: Geometry) -> Result<Region> {
        geometry.validate().map_err(Error::BadGeometry)?;
        file.set_len(geometry.region_len())
            .map_err(Error::io("sizing the region"))?;
        // SAFETY: the file is a memfd sealed against shrinking by the caller before the
        // peer sees it (server), so the mapping never loses its backing pages.
        let map = unsafe { MmapMut::map_mut(file) }.map_err(Error::io("mapping the region"))?;
        let region = Region { map, geometry };
        region.u64_at(H_MAGIC).store(MAGIC, Ordering::Relaxed);
        region.u32_at(H_VERSION).store(VERSION, Ordering::Relaxed);
        region
            .u32_at(H_QUEUES)
            .store(geometry.queues, Ordering::Relaxed);
        region
            .u32_at(H_DEPTH)
            .store(geometry.depth, Ordering::Relaxed);
        region
            .u64_at(H_DB_OFFSET)
            .store(geometry.db_offset(), Ordering::Relaxed);
        region
            .u64_at(H_DB_LEN)
            .store(geometry.db_len, Ordering::Relaxed);
        region
            .u64_at(H_VOLUME_SIZE)
            .store(geometry.volume_size, Ordering::Relaxed);
        region
            .u64_at(H_REGION_LEN)
            .store(geometry.region_len(), Ordering::Release);
        Ok(region)
    }

    /// Maps a region received from the server and checks its header (client).
    pub fn attach(file: &File) -> Result<Region> {
        let len = file
            .metadata()
            .map_err(Error::io("sizing the region"))?
            .len();
        if len < HEADER_LEN {
            return Err(Error::BadRegion(format!(
                "{len} bytes, shorter than a header"
            )));
        }
        // A region that could shrink under the mapping would turn this process's
        // accesses into SIGBUS: only a memfd sealed against it, and against new
        // seals, is mapped.
        let seals = rustix::fs::fcntl_get_seals(file).map_err(|e| {
            Error::BadRegion(format!(
                "not a sealed memfd (its seals cannot be read: {e})"
            ))
        })?;
        let needed = rustix::fs::SealFlags::SHRINK | rustix::fs::SealFlags::SEAL;
        if !seals.contains(needed) {
            return Err(Error::BadRegion(format!(
                "the memfd is not sealed against shrinking ({seals:?}): a server that can shrink it could crash this process"
            )));
        }
        // SAFETY: the memfd is sealed against shrinking (F_SEAL_SHRINK, checked just
        // above, and F_SEAL_SEAL keeps it so), so the pages stay backed while mapped.
        let map = unsafe { MmapMut::map_mut(file) }.map_err(Error::io("mapping the region"))?;
        let probe = Region {
            map,
            geometry: Geometry {
                queues: 0,
                depth: 0,
                db_len: 0,
                volume_size: 0,
            },
        };
        let magic = probe.u64_at(H_MAGIC).load(Ordering::Relaxed);
        if magic != MAGIC {
            return Err(Error::BadRegion(format!(
                "magic {magic:#x} is not HSCMRING"
            )));
        }
        let version = probe.u32_at(H_VERSION).load(Ordering::Relaxed);
        if version != VERSION {
            return Err(Error::BadRegion(format!(
                "format version {version}, this library speaks {VERSION}"
            )));
        }
        let geometry = Geometry {
            queues: probe.u32_at(H_QUEUES).load(Ordering::Relaxed),
            depth: probe.u32_at(H_DEPTH).load(Ordering::Relaxed),
            db_len: probe.u64_at(H_DB_LEN).load(Ordering::Relaxed),
            volume_size: probe.u64_at(H_VOLUME_SIZE).load(Ordering::Relaxed),
        };
        geometry.validate().map_err(Error::BadRegion)?;
        let region_len = probe.u64_at(H_REGION_LEN).load(Ordering::Acquire);
        let db_offset = probe.u64_at(H_DB_OFFSET).load(Ordering::Relaxed);
        if region_len != geometry.region_len()
            || region_len != len
            || db_offset != geometry.db_offset()
        {
            return Err(Error::BadRegion(format!(
                "region is {len} bytes, header says {region_len}, geometry needs {}",
                geometry.region_len()
            )));
        }
        Ok(Region {
            map: probe.map,
            geometry,
        })
    }

    pub fn geometry(&self) -> Geometry {
        self.geometry
    }

    fn u32_at(&self, offset: u64) -> &AtomicU32 {
        assert!(offset % 4 == 0 && offset + 4 <= self.map.len() as u64);
        // SAFETY: in bounds and aligned (checked above; the mapping is page-aligned);
        // AtomicU32 has the layout of u32 and allows shared mutation, which is what the
        // peer process does to this word.
        unsafe { &*(self.map.as_ptr().add(offset as usize) as *const AtomicU32) }
    }

    fn u64_at(&self, offset: u64) -> &AtomicU64 {
        assert!(offset % 8 == 0 && offset + 8 <= self.map.len() as u64);
        // SAFETY: as for u32_at.
        unsafe { &*(self.map.as_ptr().add(offset as usize) as *const AtomicU64) }
    }

    pub fn server_state(&self) -> &AtomicU32 {
        self.u32_at(H_SERVER_STATE)
    }

    pub fn server_doorbell(&self) -> &AtomicU32 {
        self.u32_at(H_SERVER_DOORBELL)
    }

    pub fn queue_pair(&self, i: u32) -> QueuePairView<'_> {
        assert!(i < self.geometry.queues);
        let base = self.geometry.qp_offset(i) as usize;
        let depth = self.geometry.depth as usize;
        let sq_off = base + QP_CONTROL as usize;
        let cq_off = sq_off + SQ_ENTRY as usize * depth;
        // One check for the whole queue pair, instead of one per word: this runs for
        // every command on both sides. The control words lie below QP_CONTROL (a
        // compile-time check beside their offsets) and the slot arrays end at or before the next queue pair,
        // which for i < queues is at most db_offset() <= the mapping's length
        // (region_len() == map.len(), checked at create and attach).
        assert!(cq_off + CQ_ENTRY as usize * depth <= self.map.len());
        let p = self.map.as_ptr();
        // SAFETY: every offset below is in bounds (asserted above) and aligned (4 for
        // the words, 16 for the slots, from a page-aligned mapping); the word and slot
        // types are repr(C) atomics, valid for any bit pattern and for the shared
        // mutation the peer process does.
        unsafe {
            let word = |at: u64| &*(p.add(base + at as usize) as *const AtomicU32);
            QueuePairView {
                sq_tail: word(Q_SQ_TAIL),
                sq_head: word(Q_SQ_HEAD),
                cq_tail: word(Q_CQ_TAIL),
                cq_head: word(Q_CQ_HEAD),
                cq_doorbell: word(Q_CQ_DOORBELL),
                state: word(Q_STATE),
                error: word(Q_ERROR),
                sq: std::slice::from_raw_parts(p.add(sq_off) as *const SqSlot, depth),
                cq: std::slice::from_raw_parts(p.add(cq_off) as *const CqSlot, depth),
            }
        }
    }

    /// Start of the data buffer. Callers bound every access by `geometry().db_len`.
    pub fn db_ptr(&self) -> *mut u8 {
        // SAFETY: db_offset() < region_len() == map.len() (checked at create/attach).
        unsafe { self.map.as_ptr().add(self.geometry.db_offset() as usize) as *mut u8 }
    }

    /// Pointer to `len` bytes of the data buffer at `offset`, after checking they lie
    /// inside it. The region is foreign memory the peer may also write, so it is only
    /// ever reached through raw pointers, never a Rust reference; any byte values are
    /// valid.
    pub fn db_range(&self, offset: u64, len: usize) -> *mut u8 {
        let end = offset.checked_add(len as u64).expect("offset overflow");
        assert!(
            end <= self.geometry.db_len,
            "data buffer access out of bounds"
        );
        // SAFETY: offset < db_len, inside the mapping (db_ptr's contract).
        unsafe { self.db_ptr().add(offset as usize) }
    }

    /// Copies `src` into the data buffer at `offset`.
    pub fn db_write(&self, offset: u64, src: &[u8]) {
        let dst = self.db_range(offset, src.len());
        // SAFETY: dst is valid for src.len() bytes (db_range); src is our own memory.
        unsafe { std::ptr::copy_nonoverlapping(src.as_ptr(), dst, src.len()) }
    }

    /// Copies from the data buffer at `offset` into `dst`.
    pub fn db_read(&self, offset: u64, dst: &mut [u8]) {
        let src = self.db_range(offset, dst.len());
        // SAFETY: src is valid for dst.len() bytes (db_range); dst is our own memory.
        unsafe { std::ptr::copy_nonoverlapping(src, dst.as_mut_ptr(), dst.len()) }
    }

    /// The data buffer's bytes at `offset`, in place.
    ///
    /// # Safety
    /// No process may write those bytes while the slice lives. For a client this holds
    /// when it owns a lease on them and no command naming them is in flight: the server
    /// writes a buffer only while executing a command that names it (the client trusts
    /// the server with its data anyway). The server never calls this.
    pub unsafe fn db_slice(&self, offset: u64, len: usize) -> &[u8] {
        let src = self.db_range(offset, len);
        // SAFETY: src is valid for len bytes inside the mapping, which lives as long as
        // self (db_range); nobody writes them meanwhile (the caller's contract).
        unsafe { std::slice::from_raw_parts(src, len) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A region file that could shrink under the client's mapping is refused before
    /// it is mapped; the same file sealed as the server seals it is taken.
    #[test]
    fn only_a_memfd_sealed_against_shrinking_is_attached() {
        use rustix::fs::{MemfdFlags, SealFlags};
        let g = Geometry {
            queues: 1,
            depth: 16,
            db_len: 1 << 16,
            volume_size: 1 << 20,
        };
        let fd =
            rustix::fs::memfd_create("t", MemfdFlags::CLOEXEC | MemfdFlags::ALLOW_SEALING).unwrap();
        let file = File::from(fd);
        let _server = Region::create(&file, g).unwrap();
        let err = Region::attach(&file).err().expect("unsealed: refused");
        assert!(err.to_string().contains("not sealed"), "{err}");
        rustix::fs::fcntl_add_seals(&file, SealFlags::SHRINK | SealFlags::GROW | SealFlags::SEAL)
            .unwrap();
        assert!(Region::attach(&file).is_ok());
        // A plain file has no seals at all.
        let plain = tempfile::tempfile().unwrap();
        plain.set_len(g.region_len()).unwrap();
        assert!(Region::attach(&plain).is_err());
    }

    #[test]
    fn layout_is_as_documented() {
        assert_eq!(std::mem::size_of::<SqSlot>() as u64, SQ_ENTRY);
        assert_eq!(std::mem::size_of::<CqSlot>() as u64, CQ_ENTRY);
        let g = Geometry {
            queues: 2,
            depth: 64,
            db_len: 1 << 20,
            volume_size: 1 << 30,
        };
        assert_eq!(g.qp_stride(), 4096);
        assert_eq!(g.db_offset(), 4096 + 2 * 4096);
        assert_eq!(g.region_len(), 12288 + (1 << 20));
    }

    /// The view queue_pair builds without per-word checks stays inside its own queue
    /// pair's stride, for the smallest and largest depths and every queue, and writing
    /// through every word and slot of every queue touches nothing else.
    #[test]
    fn queue_pair_views_stay_in_their_stride() {
        for (queues, depth) in [(1, 2), (3, 64), (2, MAX_DEPTH)] {
            let g = Geometry {
                queues,
                depth,
                db_len: MIN_DB,
                volume_size: 1 << 20,
            };
            let file = tempfile::tempfile().unwrap();
            let r = Region::create(&file, g).unwrap();
            let base = r.map.as_ptr() as usize;
            for i in 0..queues {
                let qp = r.queue_pair(i);
                let (start, end) = (g.qp_offset(i) as usize, g.qp_offset(i + 1) as usize);
                let inside = |p: *const u8, len: usize| {
                    let at = p as usize - base;
                    assert!(
                        at >= start && at + len <= end,
                        "queue {i}: {at}+{len} outside {start}..{end}"
                    );
                };
                for w in [
                    qp.sq_tail,
                    qp.sq_head,
                    qp.cq_tail,
                    qp.cq_head,
                    qp.cq_doorbell,
                    qp.state,
                    qp.error,
                ] {
                    inside(w as *const AtomicU32 as *const u8, 4);
                    w.store(u32::MAX, Ordering::Relaxed);
                }
                inside(qp.sq.as_ptr() as *const u8, std::mem::size_of_val(qp.sq));
                inside(qp.cq.as_ptr() as *const u8, std::mem::size_of_val(qp.cq));
                for s in qp.sq {
                    s.seq.store(u32::MAX, Ordering::Relaxed);
                }
                for c in qp.cq {
                    c.seq.store(u32::MAX, Ordering::Relaxed);
                }
            }
            // The header and the data buffer are untouched.
            assert_eq!(r.u64_at(H_MAGIC).load(Ordering::Relaxed), MAGIC);
            assert_eq!(r.u32_at(H_SERVER_STATE).load(Ordering::Relaxed), 0);
            assert_eq!(r.u32_at(H_SERVER_DOORBELL).load(Ordering::Relaxed), 0);
            let mut db = vec![1u8; MIN_DB as usize];
            r.db_read(0, &mut db);
            assert!(db.iter().all(|&b| b == 0));
        }
    }

    #[test]
    fn attach_rejects_foreign_and_truncated_regions() {
        use rustix::fs::{MemfdFlags, SealFlags};
        // A memfd sealed as a server seals it (it may still grow), so that what is
        // refused is its contents.
        let fd =
            rustix::fs::memfd_create("t", MemfdFlags::CLOEXEC | MemfdFlags::ALLOW_SEALING).unwrap();
        let file = File::from(fd);
        rustix::fs::fcntl_add_seals(&file, SealFlags::SHRINK | SealFlags::SEAL).unwrap();
        file.set_len(100).unwrap();
        assert!(matches!(Region::attach(&file), Err(Error::BadRegion(_))));
        file.set_len(8192).unwrap();
        let e = Region::attach(&file).err().unwrap().to_string();
        assert!(e.contains("magic"), "{e}");
        let g = Geometry {
            queues: 1,
            depth: 8,
            db_len: 4096,
            volume_size: 1 << 20,
        };
        let r = Region::create(&file, g).unwrap();
        r.u32_at(H_DEPTH).store(7, Ordering::Relaxed);
        let e = Region::attach(&file).err().unwrap().to_string();
        assert!(e.contains("power of two"), "{e}");
        r.u32_at(H_DEPTH).store(8, Ordering::Relaxed);
        assert_eq!(Region::attach(&file).unwrap().geometry(), g);
    }
}

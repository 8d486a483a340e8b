//! A ring entry's memory, shared with the kernel: its layout
//! (`struct fuse_uring_req_header` and the payload), a request read out of it as a
//! /dev/fuse read gives it, a reply laid into it, and the uring command that
//! registers or commits it.

use std::io;
use std::os::fd::OwnedFd;
use std::sync::atomic::Ordering;
use std::sync::Mutex;

use fuser::transport::ReplyTransport;
use io_uring::{opcode, squeue, types};

/// Entries per queue. Each holds one request at a time; the kernel queues the rest.
pub(super) const DEPTH: usize = 8;
/// A ring entry's header (`struct fuse_uring_req_header`): the in or out header, the
/// operation's own header, and `struct fuse_uring_ent_in_out`.
pub(super) const IN_OUT: usize = 0;
pub(super) const OP_IN: usize = 128;
pub(super) const ENT_IN_OUT: usize = 256;
pub(super) const HEADER_LEN: usize = 288;
/// Each entry's header gets a page of its own.
pub(super) const HEADER_SPAN: usize = 4096;
/// A payload at least as large as the largest request or reply (`MAX_WRITE`, which
/// also bounds `max_pages`); the kernel refuses smaller ones.
pub(super) const PAYLOAD: usize = crate::MAX_WRITE as usize;
/// What an entry keeps resident of its payload between requests; the rest is given
/// back after a large request.
pub(super) const PAYLOAD_KEPT: usize = 64 << 10;
pub(super) const FUSE_IN_HEADER: usize = 40;
pub(super) const FUSE_OUT_HEADER: usize = 16;
/// `FUSE_IO_URING_CMD_REGISTER`, `FUSE_IO_URING_CMD_COMMIT_AND_FETCH`.
pub(super) const CMD_REGISTER: u32 = 1;
pub(super) const CMD_COMMIT_AND_FETCH: u32 = 2;
/// An iovec as the kernel reads it at registration.
#[repr(C)]
pub(super) struct IoVec {
    pub(super) base: *mut u8,
    pub(super) len: usize,
}

/// One queue's memory and what its replies need: shared by the queue's thread and
/// the workers that answer its requests.
pub(super) struct Queue {
    pub(super) qid: u16,
    /// `DEPTH` × (`HEADER_SPAN` + `PAYLOAD`) bytes, shared with the kernel
    /// (`base` is its start).
    pub(super) _memory: memmap2::MmapMut,
    pub(super) base: *mut u8,
    /// Entries whose replies are written and wait for their commit.
    pub(super) replied: Mutex<Vec<u16>>,
    /// Each entry's last reply's payload length: a large one leaves pages to give
    /// back once the kernel has read it (at the entry's next request).
    pub(super) reply_len: [std::sync::atomic::AtomicU32; DEPTH],
    pub(super) wake: OwnedFd,
    pub(super) thread: std::sync::OnceLock<std::thread::ThreadId>,
}

// SAFETY: the mapping is only reached through `header`/`payload` of one entry at a
// time, and an entry belongs to one party at a time: the kernel between its command's
// submission and its completion, then the one thread that serves its request until
// the reply is queued in `replied` (whose mutex orders those writes before the
// commit's submission by the queue's thread).
unsafe impl Sync for Queue {}
// SAFETY: as above; the raw memory moves with the queue.
unsafe impl Send for Queue {}

impl Queue {
    pub(super) fn entry(&self, index: usize) -> *mut u8 {
        assert!(index < DEPTH);
        // SAFETY: in bounds of the mapping (index < DEPTH).
        unsafe { self.base.add(index * (HEADER_SPAN + PAYLOAD)) }
    }

    /// Entry `index`'s header.
    ///
    /// # Safety
    /// The caller owns the entry (module notes on [`Queue`]).
    // The bytes are the kernel's and the entry owner's, not `self`'s: shared memory
    // handed from party to party (see the `Sync` note above).
    #[allow(clippy::mut_from_ref)]
    pub(super) unsafe fn header(&self, index: usize) -> &mut [u8] {
        // SAFETY: HEADER_LEN bytes at the entry's start, owned by the caller.
        unsafe { std::slice::from_raw_parts_mut(self.entry(index), HEADER_LEN) }
    }

    /// Entry `index`'s payload.
    ///
    /// # Safety
    /// The caller owns the entry.
    // The bytes are the kernel's and the entry owner's, not `self`'s: shared memory
    // handed from party to party (see the `Sync` note above).
    #[allow(clippy::mut_from_ref)]
    pub(super) unsafe fn payload(&self, index: usize) -> &mut [u8] {
        // SAFETY: PAYLOAD bytes after the entry's header page, owned by the caller.
        unsafe { std::slice::from_raw_parts_mut(self.entry(index).add(HEADER_SPAN), PAYLOAD) }
    }

    /// Reads entry `index`'s request out as a /dev/fuse read gives it, into `out`:
    /// the in header, the operation's header, the payload. `None` where the sizes the
    /// kernel wrote do not add up. Gives back the payload's pages past
    /// [`PAYLOAD_KEPT`] after a large request.
    ///
    /// # Safety
    /// The caller owns the entry.
    pub(super) unsafe fn request(&self, index: usize, out: &mut Vec<u8>) -> Option<(u64, u32)> {
        // SAFETY: owned by the caller.
        let header = unsafe { self.header(index) };
        let word = |at: usize| u32::from_le_bytes(header[at..at + 4].try_into().unwrap());
        let len = word(IN_OUT) as usize;
        let opcode = word(IN_OUT + 4);
        let unique = u64::from_le_bytes(header[IN_OUT + 8..IN_OUT + 16].try_into().unwrap());
        let payload_len = word(ENT_IN_OUT + 16) as usize;
        let op_len = len.checked_sub(FUSE_IN_HEADER + payload_len)?;
        if op_len > ENT_IN_OUT - OP_IN || payload_len > PAYLOAD {
            return None;
        }
        out.clear();
        out.extend_from_slice(&header[IN_OUT..IN_OUT + FUSE_IN_HEADER]);
        out.extend_from_slice(&header[OP_IN..OP_IN + op_len]);
        // SAFETY: owned by the caller.
        let payload = unsafe { self.payload(index) };
        out.extend_from_slice(&payload[..payload_len]);
        let last_reply = self.reply_len[index].swap(0, Ordering::Relaxed) as usize;
        if payload_len.max(last_reply) > PAYLOAD_KEPT {
            self.give_back(index);
        }
        Some((unique, opcode))
    }

    pub(super) fn give_back(&self, index: usize) {
        // SAFETY: page-aligned range inside this entry's payload, which holds nothing
        // needed (its request was copied out); later reads see zeroes.
        let gone = unsafe {
            rustix::mm::madvise(
                self.entry(index).add(HEADER_SPAN + PAYLOAD_KEPT).cast(),
                PAYLOAD - PAYLOAD_KEPT,
                rustix::mm::Advice::LinuxDontNeed,
            )
        };
        if let Err(e) = gone {
            tracing::debug!("giving back a ring entry's pages: {e}");
        }
    }

    /// Lays `reply` (a /dev/fuse reply: out header, then arguments) into entry
    /// `index` and queues its commit. A reply larger than the payload becomes EIO.
    pub(super) fn lay_reply(&self, index: usize, reply: &[io::IoSlice<'_>]) -> io::Result<()> {
        let total: usize = reply.iter().map(|s| s.len()).sum();
        if index >= DEPTH || total < FUSE_OUT_HEADER {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("a ring reply for entry {index} of {total} bytes"),
            ));
        }
        // SAFETY: the entry is owned by whoever serves its request, the caller.
        let (header, payload) = unsafe { (self.header(index), self.payload(index)) };
        // The out header into the entry's header, the arguments into its payload.
        let (mut seen, mut written, mut too_big) = (0, 0, false);
        for slice in reply {
            let mut rest: &[u8] = slice;
            if seen < FUSE_OUT_HEADER {
                let n = (FUSE_OUT_HEADER - seen).min(rest.len());
                header[IN_OUT + seen..IN_OUT + seen + n].copy_from_slice(&rest[..n]);
                seen += n;
                rest = &rest[n..];
            }
            if written + rest.len() > PAYLOAD {
                too_big = true;
                break;
            }
            payload[written..written + rest.len()].copy_from_slice(rest);
            written += rest.len();
        }
        let payload_len = if too_big {
            // EIO in the out header, no arguments.
            header[IN_OUT..IN_OUT + 4].copy_from_slice(&(FUSE_OUT_HEADER as u32).to_le_bytes());
            header[IN_OUT + 4..IN_OUT + 8].copy_from_slice(&(-5i32).to_le_bytes());
            0
        } else {
            written
        };
        header[ENT_IN_OUT + 16..ENT_IN_OUT + 20]
            .copy_from_slice(&(payload_len as u32).to_le_bytes());
        self.reply_len[index].store(payload_len as u32, Ordering::Relaxed);
        self.replied.lock().unwrap().push(index as u16);
        if self.thread.get() != Some(&std::thread::current().id()) {
            rustix::io::write(&self.wake, &1u64.to_ne_bytes())?;
        }
        Ok(())
    }
}

impl std::fmt::Debug for Queue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Queue")
            .field("qid", &self.qid)
            .finish_non_exhaustive()
    }
}

impl ReplyTransport for Queue {
    fn send(&self, token: u64, reply: &[io::IoSlice<'_>]) -> io::Result<()> {
        self.lay_reply(token as usize, reply)
    }
}

/// The uring command's SQE: `cmd_op` and the `fuse_uring_cmd_req` (flags, commit id,
/// queue id) from io-uring's builder, and `len` (byte 24), which the kernel checks at
/// registration (2: header and payload) and the builder has no field for.
pub(super) fn command(
    device: i32,
    cmd_op: u32,
    qid: u16,
    commit_id: u64,
    iovecs: Option<u64>,
    user_data: u64,
) -> squeue::Entry128 {
    let mut cmd = [0u8; 80];
    cmd[8..16].copy_from_slice(&commit_id.to_ne_bytes());
    cmd[16..18].copy_from_slice(&qid.to_ne_bytes());
    let mut builder = opcode::UringCmd80::new(types::Fd(device), cmd_op).cmd(cmd);
    if let Some(addr) = iovecs {
        builder = builder.addr(Some(addr));
    }
    let entry = builder.build().user_data(user_data);
    if iovecs.is_none() {
        return entry;
    }
    // SAFETY: Entry128 is #[repr(C)], 128 bytes: the kernel's SQE followed by the
    // second half of the command area; `len` is the u32 at byte 24 of the SQE.
    let mut bytes: [u8; 128] = unsafe { std::mem::transmute(entry) };
    bytes[24..28].copy_from_slice(&2u32.to_ne_bytes());
    // SAFETY: the same bytes back, with one field set.
    unsafe { std::mem::transmute::<[u8; 128], squeue::Entry128>(bytes) }
}

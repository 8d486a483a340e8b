//! The ring entry's layout and the reply path, without a kernel: what the kernel
//! would read is read back from the entry's memory.

use std::io::IoSlice;
use std::os::fd::AsRawFd;
use std::sync::Mutex;

use super::entry::*;
use super::*;

fn queue() -> Queue {
    let mut memory = memmap2::MmapMut::map_anon(DEPTH * (HEADER_SPAN + PAYLOAD)).unwrap();
    let base = memory.as_mut_ptr();
    Queue {
        qid: 1,
        _memory: memory,
        base,
        replied: Mutex::default(),
        reply_len: Default::default(),
        wake: rustix::event::eventfd(0, rustix::event::EventfdFlags::NONBLOCK).unwrap(),
        thread: Default::default(),
    }
}

fn wake_count(q: &Queue) -> Option<u64> {
    let mut word = [0u8; 8];
    rustix::io::read(&q.wake, &mut word)
        .ok()
        .map(|_| u64::from_ne_bytes(word))
}

#[test]
fn the_command_sqe_carries_the_op_the_queue_the_commit_id_and_two_iovecs() {
    let sqe = command(7, CMD_REGISTER, 3, 0, Some(0x1000), 5);
    // SAFETY: Entry128 is 128 bytes, #[repr(C)].
    let bytes: [u8; 128] = unsafe { std::mem::transmute(sqe) };
    assert_eq!(bytes[0], 46, "IORING_OP_URING_CMD");
    assert_eq!(i32::from_ne_bytes(bytes[4..8].try_into().unwrap()), 7, "fd");
    assert_eq!(
        u32::from_ne_bytes(bytes[8..12].try_into().unwrap()),
        CMD_REGISTER,
        "cmd_op"
    );
    assert_eq!(
        u64::from_ne_bytes(bytes[16..24].try_into().unwrap()),
        0x1000,
        "addr: the iovecs"
    );
    assert_eq!(
        u32::from_ne_bytes(bytes[24..28].try_into().unwrap()),
        2,
        "len: header and payload"
    );
    assert_eq!(
        u64::from_ne_bytes(bytes[32..40].try_into().unwrap()),
        5,
        "user data"
    );
    // struct fuse_uring_cmd_req at the command area (byte 48): flags, commit_id, qid.
    assert_eq!(
        u64::from_ne_bytes(bytes[48..56].try_into().unwrap()),
        0,
        "flags"
    );
    assert_eq!(
        u16::from_ne_bytes(bytes[64..66].try_into().unwrap()),
        3,
        "qid"
    );

    let commit = command(7, CMD_COMMIT_AND_FETCH, 3, 0xabcdef, None, 2);
    // SAFETY: as above.
    let bytes: [u8; 128] = unsafe { std::mem::transmute(commit) };
    assert_eq!(
        u32::from_ne_bytes(bytes[8..12].try_into().unwrap()),
        CMD_COMMIT_AND_FETCH
    );
    assert_eq!(
        u64::from_ne_bytes(bytes[56..64].try_into().unwrap()),
        0xabcdef,
        "commit id"
    );
    assert_eq!(
        u32::from_ne_bytes(bytes[24..28].try_into().unwrap()),
        0,
        "no iovecs on a commit"
    );
}

#[test]
fn a_request_is_laid_out_as_dev_fuse_gives_it() {
    let q = queue();
    // SAFETY: no kernel holds this queue; the test owns every entry.
    let (header, payload) = unsafe { (q.header(2), q.payload(2)) };
    // A LOOKUP: no operation header, the name in the payload.
    let name = b"hello\0";
    header[IN_OUT..IN_OUT + 4]
        .copy_from_slice(&((FUSE_IN_HEADER + name.len()) as u32).to_le_bytes());
    header[IN_OUT + 4..IN_OUT + 8].copy_from_slice(&1u32.to_le_bytes());
    header[IN_OUT + 8..IN_OUT + 16].copy_from_slice(&99u64.to_le_bytes());
    header[ENT_IN_OUT + 16..ENT_IN_OUT + 20].copy_from_slice(&(name.len() as u32).to_le_bytes());
    payload[..name.len()].copy_from_slice(name);
    let mut out = Vec::new();
    // SAFETY: as above.
    assert_eq!(unsafe { q.request(2, &mut out) }, Some((99, 1)));
    assert_eq!(out.len(), FUSE_IN_HEADER + name.len());
    assert_eq!(&out[FUSE_IN_HEADER..], name);

    // A WRITE: its 40-byte fuse_write_in in op_in, the data in the payload.
    let data = vec![7u8; 100_000];
    let len = FUSE_IN_HEADER + 40 + data.len();
    header[IN_OUT..IN_OUT + 4].copy_from_slice(&(len as u32).to_le_bytes());
    header[IN_OUT + 4..IN_OUT + 8].copy_from_slice(&16u32.to_le_bytes());
    header[OP_IN..OP_IN + 40].copy_from_slice(&[3u8; 40]);
    header[ENT_IN_OUT + 16..ENT_IN_OUT + 20].copy_from_slice(&(data.len() as u32).to_le_bytes());
    payload[..data.len()].copy_from_slice(&data);
    // SAFETY: as above.
    assert_eq!(unsafe { q.request(2, &mut out) }, Some((99, 16)));
    assert_eq!(out.len(), len);
    assert_eq!(&out[FUSE_IN_HEADER..FUSE_IN_HEADER + 40], &[3u8; 40]);
    assert!(out[FUSE_IN_HEADER + 40..].iter().all(|&b| b == 7));
    // The large request's pages past what an entry keeps were given back.
    // SAFETY: as above.
    let payload = unsafe { q.payload(2) };
    assert_eq!(payload[PAYLOAD_KEPT], 0, "given back pages read as zeroes");
    assert_eq!(payload[PAYLOAD_KEPT - 1], 7, "kept pages keep their bytes");
}

#[test]
fn a_large_reply_s_pages_are_given_back_at_the_entry_s_next_request() {
    let q = queue();
    let mut reply = vec![9u8; FUSE_OUT_HEADER + 300_000];
    let len = reply.len() as u32;
    reply[..4].copy_from_slice(&len.to_le_bytes());
    q.lay_reply(3, &[IoSlice::new(&reply)]).unwrap();
    // SAFETY: the test owns every entry.
    let (header, payload) = unsafe { (q.header(3), q.payload(3)) };
    assert_eq!(payload[PAYLOAD_KEPT + 1000], 9);
    // The kernel read the reply and wrote a small request (a GETATTR) in its place.
    header[IN_OUT..IN_OUT + 4].copy_from_slice(&((FUSE_IN_HEADER + 16) as u32).to_le_bytes());
    header[IN_OUT + 4..IN_OUT + 8].copy_from_slice(&3u32.to_le_bytes());
    header[ENT_IN_OUT + 16..ENT_IN_OUT + 20].copy_from_slice(&0u32.to_le_bytes());
    let mut out = Vec::new();
    // SAFETY: as above.
    assert!(unsafe { q.request(3, &mut out) }.is_some());
    // SAFETY: as above.
    let payload = unsafe { q.payload(3) };
    assert_eq!(payload[PAYLOAD_KEPT + 1000], 0, "given back");
    assert_eq!(payload[10], 9, "the kept part stays");
}

#[test]
fn sizes_that_do_not_add_up_are_refused() {
    let q = queue();
    // SAFETY: the test owns every entry.
    let header = unsafe { q.header(0) };
    // A payload longer than the request.
    header[IN_OUT..IN_OUT + 4].copy_from_slice(&50u32.to_le_bytes());
    header[ENT_IN_OUT + 16..ENT_IN_OUT + 20].copy_from_slice(&20u32.to_le_bytes());
    let mut out = Vec::new();
    // SAFETY: as above.
    assert_eq!(unsafe { q.request(0, &mut out) }, None);
    // An operation header larger than its area.
    header[IN_OUT..IN_OUT + 4].copy_from_slice(&((FUSE_IN_HEADER + 200) as u32).to_le_bytes());
    header[ENT_IN_OUT + 16..ENT_IN_OUT + 20].copy_from_slice(&0u32.to_le_bytes());
    // SAFETY: as above.
    assert_eq!(unsafe { q.request(0, &mut out) }, None);
    // A payload larger than the entry's.
    header[IN_OUT..IN_OUT + 4].copy_from_slice(&u32::MAX.to_le_bytes());
    header[ENT_IN_OUT + 16..ENT_IN_OUT + 20].copy_from_slice(&((PAYLOAD + 1) as u32).to_le_bytes());
    // SAFETY: as above.
    assert_eq!(unsafe { q.request(0, &mut out) }, None);
}

#[test]
fn a_reply_goes_into_its_entry_and_wakes_the_queue_from_another_thread() {
    let q = queue();
    let out_header = {
        let mut h = [0u8; FUSE_OUT_HEADER];
        h[..4].copy_from_slice(&((FUSE_OUT_HEADER + 10) as u32).to_le_bytes());
        h[8..].copy_from_slice(&42u64.to_le_bytes());
        h
    };
    // The header split across two slices, the arguments across two more.
    let reply = [
        IoSlice::new(&out_header[..5]),
        IoSlice::new(&out_header[5..]),
        IoSlice::new(b"abcd"),
        IoSlice::new(b"efghij"),
    ];
    q.lay_reply(4, &reply).unwrap();
    // SAFETY: the test owns every entry.
    let (header, payload) = unsafe { (q.header(4), q.payload(4)) };
    assert_eq!(&header[IN_OUT..IN_OUT + FUSE_OUT_HEADER], &out_header);
    assert_eq!(&payload[..10], b"abcdefghij");
    assert_eq!(
        u32::from_le_bytes(header[ENT_IN_OUT + 16..ENT_IN_OUT + 20].try_into().unwrap()),
        10
    );
    assert_eq!(*q.replied.lock().unwrap(), vec![4]);
    assert_eq!(
        wake_count(&q),
        Some(1),
        "a reply from another thread wakes the queue"
    );

    // From the queue's own thread: queued, no wake-up (the thread drains after its batch).
    q.thread.set(std::thread::current().id()).unwrap();
    q.lay_reply(5, &[IoSlice::new(&out_header)]).unwrap();
    assert_eq!(*q.replied.lock().unwrap(), vec![4, 5]);
    assert_eq!(wake_count(&q), None);
}

#[test]
fn oversized_and_unknown_replies_are_refused_or_become_eio() {
    let q = queue();
    let mut big = vec![0u8; FUSE_OUT_HEADER + PAYLOAD + 1];
    big[8..16].copy_from_slice(&7u64.to_le_bytes());
    q.lay_reply(0, &[IoSlice::new(&big)]).unwrap();
    // SAFETY: the test owns every entry.
    let header = unsafe { q.header(0) };
    assert_eq!(
        i32::from_le_bytes(header[IN_OUT + 4..IN_OUT + 8].try_into().unwrap()),
        -5,
        "EIO"
    );
    assert_eq!(
        u64::from_le_bytes(header[IN_OUT + 8..IN_OUT + 16].try_into().unwrap()),
        7,
        "its request's id kept"
    );
    assert_eq!(
        u32::from_le_bytes(header[ENT_IN_OUT + 16..ENT_IN_OUT + 20].try_into().unwrap()),
        0
    );
    let before = q.replied.lock().unwrap().len();
    assert!(
        q.lay_reply(DEPTH, &[IoSlice::new(&big[..16])]).is_err(),
        "no such entry"
    );
    assert!(
        q.lay_reply(1, &[IoSlice::new(&big[..3])]).is_err(),
        "shorter than a header"
    );
    assert_eq!(
        q.replied.lock().unwrap().len(),
        before,
        "nothing queued for them"
    );
    let _ = q.wake.as_raw_fd();
}

#[test]
fn possible_cpus_read_as_the_kernel_writes_them() {
    assert_eq!(possible_cpus("0-1\n"), vec![0, 1]);
    assert_eq!(possible_cpus("0"), vec![0]);
    assert_eq!(possible_cpus("0-2,4,6-7"), vec![0, 1, 2, 4, 6, 7]);
    assert_eq!(possible_cpus("garbage"), Vec::<usize>::new());
}

#[test]
fn what_may_wait_leaves_the_queue_thread() {
    for fsync_like in [20, 30, 33, 18] {
        assert!(hands_off(fsync_like, false));
    }
    // On-flush: lookups, creates and writes stay on the queue's thread.
    for quick in [1, 3, 35, 16, 4, 10] {
        assert!(!hands_off(quick, false));
    }
    // Immediate: every change syncs, and goes to a worker.
    for change in [35, 16, 4, 10, 12, 45, 47, 25] {
        assert!(hands_off(change, true));
    }
    assert!(!hands_off(1, true), "a lookup stays");
}

#[test]
fn the_kernel_switch_is_read_turned_on_and_its_absence_named() {
    let dir = tempfile::tempdir().unwrap();
    let switch = dir.path().join("enable_uring");
    let err = enable_at(&switch).unwrap_err();
    assert_eq!(err.kind(), io::ErrorKind::Unsupported);
    assert!(
        err.to_string().contains("enable_uring does not exist"),
        "{err}"
    );
    std::fs::write(&switch, "N\n").unwrap();
    assert_eq!(read_switch(&switch), Some(false));
    assert!(enable_at(&switch).unwrap(), "turned on by this call");
    assert_eq!(read_switch(&switch), Some(true));
    assert!(!enable_at(&switch).unwrap(), "on already");
}

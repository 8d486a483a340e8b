//! The C interface (include/hscm_ring.h). Every function checks its pointers for null
//! and returns 0 on success, a positive server status (see `hscm_ring_status_t`) when
//! the server refused the command, and -1 on a local error whose message
//! `hscm_ring_last_error` returns.

use crate::WriteFlags;
use std::cell::RefCell;
use std::collections::HashMap;
use std::ffi::{c_char, c_int, c_void, CStr, CString};
use std::path::Path;

use crate::client::{Client, ClientOptions, Completion, Op, Queue};
use crate::error::Error;
use crate::server::endpoint_path;

thread_local! {
    static LAST_ERROR: RefCell<CString> = RefCell::new(CString::default());
}

fn set_error(msg: impl ToString) -> c_int {
    let s = msg.to_string().replace('\0', " ");
    LAST_ERROR.with(|e| *e.borrow_mut() = CString::new(s).unwrap_or_default());
    -1
}

/// Runs the body of a C entry point. A panic (a bug in this library) must not unwind
/// into C, and since Rust 1.81 it would abort the host program there; so it becomes the
/// function's error value (`on_panic`: -1, NULL, 0), with its message as the last error.
fn guarded<T>(on_panic: T, body: impl FnOnce() -> T) -> T {
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(body)) {
        Ok(v) => v,
        Err(payload) => {
            let what = payload
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| payload.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "unknown panic".into());
            set_error(format!(
                "internal error in hscm-ring (please report it): {what}"
            ));
            on_panic
        }
    }
}

fn outcome(r: Result<(), Error>) -> c_int {
    match r {
        Ok(()) => 0,
        Err(Error::Command(s)) => {
            set_error(Error::Command(s));
            s as c_int
        }
        Err(e) => set_error(e),
    }
}

pub struct CClient(Client);

pub struct CQueue {
    queue: Queue,
    /// Commands submitted through the C submit calls: id -> is a read.
    reads: HashMap<u32, bool>,
    /// A read's completion whose bytes did not fit the caller's buffer: kept, and
    /// handed out again by the next `hscm_ring_complete`.
    held: Option<Completion>,
}

#[repr(C)]
pub struct HscmRingCompletion {
    pub id: u32,
    pub status: u32,
    pub len: u32,
}

/// The message of the calling thread's last error ("" if none). Valid until the next
/// call on this thread.
#[no_mangle]
pub extern "C" fn hscm_ring_last_error() -> *const c_char {
    LAST_ERROR.with(|e| e.borrow().as_ptr())
}

/// Connects to a server (`hscm serve VOLUME --shm NAME`): NAME or a socket path.
/// `queues` and `db_bytes` may be 0 for the server's defaults. NULL on error.
///
/// # Safety
/// `endpoint` is a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn hscm_ring_connect(
    endpoint: *const c_char,
    queues: u32,
    db_bytes: u64,
) -> *mut CClient {
    guarded(std::ptr::null_mut(), || {
        if endpoint.is_null() {
            set_error("endpoint is NULL");
            return std::ptr::null_mut();
        }
        // SAFETY: non-null and NUL-terminated per the contract.
        let name = unsafe { CStr::from_ptr(endpoint) }
            .to_string_lossy()
            .into_owned();
        let path = endpoint_path(&name);
        let opts = ClientOptions {
            queues,
            db_len: db_bytes,
            ..Default::default()
        };
        match Client::connect(Path::new(&path), &opts) {
            Ok(c) => Box::into_raw(Box::new(CClient(c))),
            Err(e) => {
                set_error(e);
                std::ptr::null_mut()
            }
        }
    })
}

/// # Safety
/// `client` is NULL or came from `hscm_ring_connect` and is not used afterwards.
/// Queues opened from it stay usable until they are closed.
#[no_mangle]
pub unsafe extern "C" fn hscm_ring_disconnect(client: *mut CClient) {
    guarded((), || {
        if !client.is_null() {
            // SAFETY: per the contract, the pointer came from Box::into_raw.
            drop(unsafe { Box::from_raw(client) });
        }
    })
}

/// Size of the volume in bytes (0 if `client` is NULL).
///
/// # Safety
/// `client` is NULL or a live client.
#[no_mangle]
pub unsafe extern "C" fn hscm_ring_volume_size(client: *const CClient) -> u64 {
    guarded(0, || {
        // SAFETY: NULL or live per the contract.
        unsafe { client.as_ref() }.map_or(0, |c| c.0.geometry().volume_size)
    })
}

/// Claims a queue pair for the calling thread. NULL when all are taken.
///
/// # Safety
/// `client` is a live client.
#[no_mangle]
pub unsafe extern "C" fn hscm_ring_queue_open(client: *mut CClient) -> *mut CQueue {
    guarded(std::ptr::null_mut(), || {
        // SAFETY: NULL or live per the contract.
        let Some(c) = (unsafe { client.as_ref() }) else {
            set_error("client is NULL");
            return std::ptr::null_mut();
        };
        match c.0.queue() {
            Ok(queue) => Box::into_raw(Box::new(CQueue {
                queue,
                reads: HashMap::new(),
                held: None,
            })),
            Err(e) => {
                set_error(e);
                std::ptr::null_mut()
            }
        }
    })
}

/// Waits for the queue's commands in flight, then releases it.
///
/// # Safety
/// `queue` is NULL or came from `hscm_ring_queue_open` and is not used afterwards.
#[no_mangle]
pub unsafe extern "C" fn hscm_ring_queue_close(queue: *mut CQueue) {
    guarded((), || {
        if !queue.is_null() {
            // SAFETY: per the contract, the pointer came from Box::into_raw.
            drop(unsafe { Box::from_raw(queue) });
        }
    })
}

/// # Safety
/// `queue` is NULL or live; returns it as a Rust reference or records an error.
unsafe fn queue_mut<'a>(queue: *mut CQueue) -> Option<&'a mut CQueue> {
    // SAFETY: per the callers' contracts, NULL or a live, exclusively used queue.
    let q = unsafe { queue.as_mut() };
    if q.is_none() {
        set_error("queue is NULL");
    }
    q
}

/// Reads `len` bytes at any byte `offset` of the volume into `buf` (blocking).
///
/// # Safety
/// `queue` is live and used by this thread only; `buf` is valid for `len` bytes.
#[no_mangle]
pub unsafe extern "C" fn hscm_ring_read(
    queue: *mut CQueue,
    offset: u64,
    buf: *mut c_void,
    len: usize,
) -> c_int {
    guarded(-1, || {
        // SAFETY: per the contract.
        let Some(q) = (unsafe { queue_mut(queue) }) else {
            return -1;
        };
        if buf.is_null() && len > 0 {
            return set_error("buf is NULL");
        }
        let out: &mut [u8] = if len == 0 {
            &mut []
        } else {
            // SAFETY: non-null and valid for len bytes per the contract.
            unsafe { std::slice::from_raw_parts_mut(buf as *mut u8, len) }
        };
        outcome(q.queue.read_bytes(offset, out))
    })
}

/// What `hscm_ring_read_in_place` calls with the bytes read.
pub type HscmRingBytesFn = unsafe extern "C" fn(ctx: *mut c_void, data: *const c_void, len: usize);

/// Reads `len` bytes at any byte `offset` (blocking) and calls `use_bytes(ctx, data,
/// len)` with them where the server put them, in this client's data buffer: no copy
/// on the client's side. `data` is valid only during the call. `len` is at most the
/// data buffer; no command submitted with `hscm_ring_submit_*` may be in flight.
///
/// # Safety
/// `queue` is live and used by this thread only; `use_bytes` is a function that
/// returns normally (no longjmp out of it) and does not call into this queue.
#[no_mangle]
pub unsafe extern "C" fn hscm_ring_read_in_place(
    queue: *mut CQueue,
    offset: u64,
    len: usize,
    use_bytes: Option<HscmRingBytesFn>,
    ctx: *mut c_void,
) -> c_int {
    guarded(-1, || {
        // SAFETY: per the contract.
        let Some(q) = (unsafe { queue_mut(queue) }) else {
            return -1;
        };
        let Some(use_bytes) = use_bytes else {
            return set_error("use_bytes is NULL");
        };
        outcome(q.queue.read_in_place(offset, len, |bytes| {
            // SAFETY: a C function per the contract; the bytes are valid for the call.
            unsafe { use_bytes(ctx, bytes.as_ptr().cast(), bytes.len()) }
        }))
    })
}

/// Writes `len` bytes at any byte `offset` (blocking). With `fua` non-zero the bytes
/// are durable when this returns; otherwise after the next `hscm_ring_flush` (or at
/// once, if the volume's durability is immediate).
///
/// # Safety
/// `queue` is live and used by this thread only; `buf` is valid for `len` bytes.
#[no_mangle]
pub unsafe extern "C" fn hscm_ring_write(
    queue: *mut CQueue,
    offset: u64,
    buf: *const c_void,
    len: usize,
    fua: c_int,
) -> c_int {
    guarded(-1, || {
        // SAFETY: per the contract.
        let Some(q) = (unsafe { queue_mut(queue) }) else {
            return -1;
        };
        if buf.is_null() && len > 0 {
            return set_error("buf is NULL");
        }
        let data: &[u8] = if len == 0 {
            &[]
        } else {
            // SAFETY: non-null and valid for len bytes per the contract.
            unsafe { std::slice::from_raw_parts(buf as *const u8, len) }
        };
        outcome(
            q.queue
                .write_bytes(offset, data, WriteFlags { fua: fua != 0 }),
        )
    })
}

/// Makes every completed write durable.
///
/// # Safety
/// `queue` is live and used by this thread only.
#[no_mangle]
pub unsafe extern "C" fn hscm_ring_flush(queue: *mut CQueue) -> c_int {
    guarded(-1, || {
        // SAFETY: per the contract.
        let Some(q) = (unsafe { queue_mut(queue) }) else {
            return -1;
        };
        outcome(q.queue.flush())
    })
}

/// Queues a read of `len` bytes at `offset` without waiting; its data is copied out by
/// `hscm_ring_complete`. `*id` receives the command id.
///
/// # Safety
/// `queue` is live and used by this thread only; `id` is valid for one write.
#[no_mangle]
pub unsafe extern "C" fn hscm_ring_submit_read(
    queue: *mut CQueue,
    offset: u64,
    len: u32,
    id: *mut u32,
) -> c_int {
    guarded(-1, || {
        // SAFETY: per the contract.
        let Some(q) = (unsafe { queue_mut(queue) }) else {
            return -1;
        };
        if id.is_null() {
            return set_error("id is NULL");
        }
        let Some(lease) = q.queue.client_lease(u64::from(len)) else {
            return set_error("data buffer full: complete some commands first");
        };
        match q.queue.submit(Op::ReadBytes { offset, len }, Some(lease)) {
            Ok(i) => {
                q.reads.insert(i, true);
                // SAFETY: non-null and writable per the contract.
                unsafe { *id = i };
                0
            }
            Err(e) => set_error(e),
        }
    })
}

/// Queues a write of `len` bytes from `buf` (copied before this returns).
///
/// # Safety
/// `queue` is live and used by this thread only; `buf` is valid for `len` bytes; `id`
/// is valid for one write.
#[no_mangle]
pub unsafe extern "C" fn hscm_ring_submit_write(
    queue: *mut CQueue,
    offset: u64,
    buf: *const c_void,
    len: u32,
    fua: c_int,
    id: *mut u32,
) -> c_int {
    guarded(-1, || {
        // SAFETY: per the contract.
        let Some(q) = (unsafe { queue_mut(queue) }) else {
            return -1;
        };
        if id.is_null() || buf.is_null() {
            return set_error("buf or id is NULL");
        }
        let Some(mut lease) = q.queue.client_lease(u64::from(len)) else {
            return set_error("data buffer full: complete some commands first");
        };
        // SAFETY: non-null and valid for len bytes per the contract.
        lease.write(0, unsafe {
            std::slice::from_raw_parts(buf as *const u8, len as usize)
        });
        match q.queue.submit(
            Op::WriteBytes {
                offset,
                len,
                flags: WriteFlags { fua: fua != 0 },
            },
            Some(lease),
        ) {
            Ok(i) => {
                q.reads.insert(i, false);
                // SAFETY: non-null and writable per the contract.
                unsafe { *id = i };
                0
            }
            Err(e) => set_error(e),
        }
    })
}

/// Waits for the next completion and fills `*out`. For a read, its bytes are copied
/// to `buf` (which must hold `out->len` bytes; pass the size in `buf_len`). A read
/// whose bytes do not fit is not lost: this returns -1 with `*out` filled (its
/// `len` says the room needed), and the next call returns the same completion.
///
/// # Safety
/// `queue` is live and used by this thread only; `out` is valid for one write; `buf`
/// is NULL or valid for `buf_len` bytes.
#[no_mangle]
pub unsafe extern "C" fn hscm_ring_complete(
    queue: *mut CQueue,
    out: *mut HscmRingCompletion,
    buf: *mut c_void,
    buf_len: usize,
) -> c_int {
    guarded(-1, || {
        // SAFETY: per the contract.
        let Some(q) = (unsafe { queue_mut(queue) }) else {
            return -1;
        };
        if out.is_null() {
            return set_error("out is NULL");
        }
        let (c, is_read) = match q.held.take() {
            Some(c) => (c, true),
            None => match q.queue.complete() {
                Ok(c) => {
                    let is_read = q.reads.remove(&c.id).unwrap_or(false);
                    (c, is_read)
                }
                Err(e) => return set_error(e),
            },
        };
        let (status, len) = match c.result {
            Ok(n) => (0u32, n),
            Err(s) => (s as u32, 0),
        };
        // SAFETY: non-null and writable per the contract.
        unsafe {
            *out = HscmRingCompletion {
                id: c.id,
                status,
                len,
            }
        };
        if is_read && status == 0 {
            if buf.is_null() || buf_len < len as usize {
                q.held = Some(c);
                return set_error(format!(
                    "read of {len} bytes completed but buf holds {buf_len}: call again with room for {len} bytes (the completion is kept)"
                ));
            }
            if let Some(lease) = &c.lease {
                // SAFETY: non-null and valid for buf_len >= len bytes per the contract.
                lease.read(0, unsafe {
                    std::slice::from_raw_parts_mut(buf as *mut u8, len as usize)
                });
            }
        }
        0
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A panic inside a C entry point comes back as its error value and a last error,
    /// and the thread (the C caller's) goes on.
    #[test]
    fn a_panic_becomes_an_error_value_not_an_abort() {
        let r: c_int = guarded(-1, || panic!("index out of bounds: the len is 3"));
        assert_eq!(r, -1);
        // SAFETY: hscm_ring_last_error returns a valid NUL-terminated string.
        let msg = unsafe { CStr::from_ptr(hscm_ring_last_error()) }.to_string_lossy();
        assert!(
            msg.starts_with("internal error in hscm-ring") && msg.contains("the len is 3"),
            "{msg}"
        );
        let p: *mut CClient = guarded(std::ptr::null_mut(), || panic!("{}", String::from("owned")));
        assert!(p.is_null());
        assert_eq!(guarded(0u64, || 42), 42);
    }
}

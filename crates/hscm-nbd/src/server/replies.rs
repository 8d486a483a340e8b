//! Where a connection's replies go, and the replies of started writes.
//!
//! A thread that answers a request takes the stream's lock and writes its whole
//! reply (a READ's in pieces). A started write ([`hscm_block::BlockTarget::start_write`])
//! completes on whichever thread saw its home acknowledge it: the NBD client's helper,
//! which every other writer of the volume needs too, so it must never block on this
//! client. Its reply goes into the outbox, and out at once when the stream is free
//! and its socket takes it without waiting; otherwise the thread holding the stream
//! sends it before it lets go, or (a partly sent reply, a client slow to read) a
//! thread of its own finishes it. Whoever takes the stream sends the outbox first, so
//! replies never interleave.

use std::io::Write;
use std::os::fd::AsFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};

use crate::stream::Stream;

/// Started writes one connection may have in flight, and their bytes: past either,
/// a write is run the waiting way (which the connection's threads bound).
pub(super) const MAX_STARTED: usize = 64;
pub(super) const MAX_STARTED_BYTES: u64 = 32 << 20;

pub(super) struct Replies {
    writer: Mutex<Stream>,
    /// Whole replies (and at its head, what is left of one partly sent) waiting for
    /// the stream.
    outbox: Mutex<Vec<u8>>,
    /// A thread is finishing the outbox.
    draining: AtomicBool,
    /// Started writes not answered yet: how many, and their bytes.
    started: Mutex<(usize, u64)>,
    answered: Condvar,
}

/// The stream, held: the outbox went out first, and goes out again before it is let go.
pub(super) struct Held<'a> {
    replies: &'a Replies,
    w: Option<MutexGuard<'a, Stream>>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

impl Replies {
    pub fn new(stream: Stream) -> Replies {
        Replies {
            writer: Mutex::new(stream),
            outbox: Mutex::new(Vec::new()),
            draining: AtomicBool::new(false),
            started: Mutex::new((0, 0)),
            answered: Condvar::new(),
        }
    }

    /// Takes the stream, sending what waits in the outbox first; None once the
    /// client is gone.
    pub fn hold(&self) -> Option<Held<'_>> {
        let w = lock(&self.writer);
        let mut held = Held {
            replies: self,
            w: Some(w),
        };
        loop {
            let waiting = std::mem::take(&mut *lock(&self.outbox));
            if waiting.is_empty() {
                return Some(held);
            }
            if !held.write_all(&waiting) {
                return None;
            }
        }
    }

    /// Writes one whole reply; false once the client is gone.
    pub fn send(&self, reply: &[u8]) -> bool {
        self.hold().is_some_and(|mut h| h.write_all(reply))
    }

    /// Counts a write about to be started, if the connection's bound lets it.
    pub fn try_start(&self, bytes: u64) -> bool {
        let mut st = lock(&self.started);
        if st.0 >= MAX_STARTED || st.1 + bytes > MAX_STARTED_BYTES {
            return false;
        }
        st.0 += 1;
        st.1 += bytes;
        true
    }

    /// Whether any started write is not answered yet.
    pub fn any_started(&self) -> bool {
        lock(&self.started).0 > 0
    }

    /// A started write is answered (or was never started after all).
    pub fn finish_started(&self, bytes: u64) {
        let mut st = lock(&self.started);
        st.0 -= 1;
        st.1 -= bytes;
        drop(st);
        self.answered.notify_all();
    }

    /// Waits until every started write is answered (the connection ends after).
    pub fn wait_for_started(&self) {
        let mut st = lock(&self.started);
        while st.0 > 0 {
            st = self
                .answered
                .wait(st)
                .unwrap_or_else(|poisoned| poisoned.into_inner());
        }
    }

    /// Sends a started write's reply without ever waiting for the client (see the
    /// module's notes).
    pub fn post(self: &Arc<Self>, reply: &[u8]) {
        let mut outbox = lock(&self.outbox);
        outbox.extend_from_slice(reply);
        // Held elsewhere: the holder sends the outbox before it lets go (it looks
        // under the outbox's lock, which this thread holds now).
        let Ok(w) = self.writer.try_lock() else {
            return;
        };
        let sent = send_now(&w, &outbox);
        outbox.drain(..sent);
        if outbox.is_empty() || self.draining.swap(true, Ordering::AcqRel) {
            return;
        }
        drop(w);
        drop(outbox);
        let me = self.clone();
        let finish = move || loop {
            drop(me.hold());
            me.draining.store(false, Ordering::Release);
            // Posted while this thread let go, and left to it: once more.
            if lock(&me.outbox).is_empty() || me.draining.swap(true, Ordering::AcqRel) {
                return;
            }
        };
        if let Err(e) = std::thread::Builder::new()
            .name("hscm-nbd-reply".into())
            .spawn(finish)
        {
            // The client waits for a reply nobody can send: end the connection.
            tracing::warn!("no thread to finish a reply ({e}); dropping the client");
            lock(&self.writer).shutdown();
        }
    }
}

/// Sends as much of `bytes` as the socket takes now; how much that was (0 on any
/// error: the next blocking write finds it).
fn send_now(s: &Stream, bytes: &[u8]) -> usize {
    let flags = rustix::net::SendFlags::DONTWAIT | rustix::net::SendFlags::NOSIGNAL;
    let mut at = 0;
    while at < bytes.len() {
        let sent = match s {
            Stream::Unix(u) => rustix::net::send(u.as_fd(), &bytes[at..], flags),
            Stream::Tcp(t) => rustix::net::send(t.as_fd(), &bytes[at..], flags),
        };
        match sent {
            Ok(0) | Err(_) => break,
            Ok(n) => at += n,
        }
    }
    at
}

impl Held<'_> {
    /// Writes `bytes` whole; false (and the stream shut down) once the client is gone.
    pub fn write_all(&mut self, bytes: &[u8]) -> bool {
        let w = self.w.as_mut().expect("held until dropped");
        if w.write_all(bytes).is_err() {
            w.shutdown();
            return false;
        }
        true
    }

    pub fn shutdown(&mut self) {
        if let Some(w) = &self.w {
            w.shutdown();
        }
    }
}

impl Drop for Held<'_> {
    /// Sends what started writes posted meanwhile, and lets the stream go only under
    /// the outbox's lock with the outbox empty: nothing posted is left unsent.
    fn drop(&mut self) {
        loop {
            let mut outbox = lock(&self.replies.outbox);
            if outbox.is_empty() {
                drop(self.w.take());
                return;
            }
            let waiting = std::mem::take(&mut *outbox);
            drop(outbox);
            if !self.write_all(&waiting) {
                drop(self.w.take());
                return;
            }
        }
    }
}

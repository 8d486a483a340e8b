//! [`NbdBackend`]: the device layer's face of the NBD client, and the helper threads
//! that complete started writes.
//!
//! A started write ([`Backend::start_write_through`]) goes out with FUA and returns at
//! once; nobody waits for it. Each connection has a helper thread that drives it (as a
//! waiting caller would, see [`super::mux`]) while started writes are queued or out on
//! it, and calls each one's callback as its reply comes in. So a server with 64
//! writes in flight needs no 64 waiting threads, and no hand-off between threads for
//! each: the reply is read and answered by the thread that read it. A started write
//! the connection was lost under goes out again, synchronously, from a thread of its
//! own, until its deadline.

use std::io;
use std::ops::Deref;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use parking_lot::Mutex;

use super::session::{Data, Op};
use super::wire::*;
use super::{NbdClient, REPLAY_MAX};
use crate::device::{Backend, RemoteHealth, WriteDone};

/// How long a helper whose connection another thread drives waits before looking
/// again (a wake-up normally ends the wait sooner).
const LOOK_AGAIN: Duration = Duration::from_millis(5);
/// The same for a helper with nothing to do.
const IDLE_LOOK_AGAIN: Duration = Duration::from_millis(200);

/// A [`Backend`] on an NBD export: the client every caller shares, and one helper
/// thread per connection for started writes.
pub struct NbdBackend {
    client: Arc<NbdClient>,
    helpers: Vec<JoinHandle<()>>,
    /// Every connection has its helper (else writes are never started).
    can_start: bool,
}

impl NbdBackend {
    pub(super) fn around(client: Arc<NbdClient>) -> NbdBackend {
        let mut helpers = Vec::new();
        for i in 0..client.conns.len() {
            let c = client.clone();
            let spawned = std::thread::Builder::new()
                .name(format!("hscm-nbd-{i}"))
                .spawn(move || c.help(i));
            match spawned {
                Ok(h) => {
                    client.conns[i].set_helper(h.thread().clone());
                    helpers.push(h);
                }
                Err(e) => {
                    tracing::warn!(
                        "{}: no helper thread ({e}); every write waits for its answer",
                        client.uri
                    );
                    break;
                }
            }
        }
        let can_start = helpers.len() == client.conns.len();
        NbdBackend {
            client,
            helpers,
            can_start,
        }
    }
}

impl Deref for NbdBackend {
    type Target = NbdClient;

    fn deref(&self) -> &NbdClient {
        &self.client
    }
}

impl NbdClient {
    /// A helper's life: drive connection `conn` whenever started writes are queued or
    /// out on it and nobody else drives it; leave once the backend is dropped and
    /// none is.
    fn help(&self, conn: usize) {
        let c = &self.conns[conn];
        loop {
            match c.take_for_started() {
                Ok(session) => self.drive_started(c, session),
                Err(true) => std::thread::park_timeout(LOOK_AGAIN),
                Err(false) if self.stopping.load(Ordering::Acquire) => return,
                // Woken when a write is started; the timeout only bounds a missed
                // wake-up.
                Err(false) => std::thread::park_timeout(IDLE_LOOK_AGAIN),
            }
        }
    }

    /// Started writes a lost connection handed back: each goes out again from a
    /// thread of its own, one after the other, by the usual way (the replay copy
    /// first), until its own deadline, and then hears how it went.
    pub(super) fn retry_started(&self, lost: Vec<(Op<'static>, WriteDone, Instant)>, why: &str) {
        let lost = Arc::new(Mutex::new(lost));
        let spawned = self.me.upgrade().map(|me| {
            let mine = lost.clone();
            std::thread::Builder::new()
                .name("hscm-nbd-retry".into())
                .spawn(move || {
                    let writes = std::mem::take(&mut *mine.lock());
                    for (op, done, deadline) in writes {
                        let mut ops = [op];
                        done(me.run_until(&mut ops, deadline, &mut None));
                    }
                })
        });
        if !matches!(spawned, Some(Ok(_))) {
            for (_, done, _) in std::mem::take(&mut *lost.lock()) {
                done(Err(io::Error::new(
                    io::ErrorKind::ConnectionAborted,
                    format!("{}: {why}, and it could not be sent again", self.uri),
                )));
            }
        }
    }
}

impl Backend for NbdBackend {
    fn len(&self) -> u64 {
        self.usable
    }

    fn read_at(&self, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        self.checked(offset, buf.len() as u64, "read")?;
        let mut ops = self.split(CMD_READ, 0, offset, Data::Read(buf));
        self.run(&mut ops)
    }

    fn read_vectored_at(&self, offset: u64, bufs: &mut [&mut [u8]]) -> io::Result<()> {
        let total: u64 = bufs.iter().map(|b| b.len() as u64).sum();
        self.checked(offset, total, "read")?;
        let mut ops = Vec::new();
        let mut at = offset;
        for b in bufs.iter_mut() {
            let n = b.len() as u64;
            ops.extend(self.split(CMD_READ, 0, at, Data::Read(b)));
            at += n;
        }
        self.run(&mut ops)
    }

    fn write_at(&self, offset: u64, buf: &[u8]) -> io::Result<()> {
        self.write_plain(offset, buf)
    }

    fn write_many(&self, writes: &[(u64, &[u8])]) -> io::Result<()> {
        let total: u64 = writes.iter().map(|(_, b)| b.len() as u64).sum();
        for (at, b) in writes {
            self.checked(*at, b.len() as u64, "write")?;
        }
        if self.replay.lock().bytes + total > REPLAY_MAX {
            self.flush()?;
        }
        let n = self.conns.len().min(writes.len().max(1));
        let groups: Vec<Vec<(u64, &[u8])>> = (0..n)
            .map(|g| writes.iter().skip(g).step_by(n).copied().collect())
            .collect();
        let run_group = |group: &Vec<(u64, &[u8])>| -> io::Result<()> {
            let mut ops = Vec::new();
            for (at, b) in group {
                ops.extend(self.split(CMD_WRITE, 0, *at, Data::Write(b)));
            }
            self.run(&mut ops)
        };
        if n == 1 {
            return run_group(&groups[0]);
        }
        std::thread::scope(|s| {
            let handles: Vec<_> = groups
                .iter()
                .map(|g| s.spawn(move || run_group(g)))
                .collect();
            handles
                .into_iter()
                .map(|h| {
                    h.join()
                        .unwrap_or_else(|_| Err(io::Error::other("a write thread panicked")))
                })
                .collect::<Vec<_>>()
                .into_iter()
                .collect::<io::Result<()>>()
        })
    }

    fn sync(&self) -> io::Result<()> {
        self.flush()
    }

    fn prefers_write_through(&self) -> bool {
        self.export.has(TX_SEND_FUA)
    }

    fn write_through_at(&self, offset: u64, buf: &[u8]) -> io::Result<()> {
        self.write_durable_at(offset, buf)
    }

    /// The write goes out with FUA from the calling thread where nobody drives its
    /// connection, and the connection's helper completes it: no thread waits for it.
    fn start_write_through(
        &self,
        offset: u64,
        buf: &[u8],
        done: WriteDone,
    ) -> std::result::Result<(), WriteDone> {
        let c = &*self.client;
        let len = buf.len() as u64;
        if !self.can_start
            || !c.export.has(TX_SEND_FUA)
            || buf.is_empty()
            || len > u64::from(c.max_request)
            || c.checked(offset, len, "write").is_err()
        {
            return Err(done);
        }
        // Shared, as for any request: no started write overtakes a replay.
        let Some(_shared) = c.gate.try_read() else {
            return Err(done);
        };
        if c.needs_replay.load(Ordering::Acquire) {
            return Err(done);
        }
        c.started.fetch_add(1, Ordering::AcqRel);
        let op = Op::new(
            CMD_WRITE,
            CMD_FLAG_FUA,
            offset,
            len as u32,
            Data::Owned(buf.to_vec()),
        );
        let conn = &c.conns[c.pick()];
        c.start(conn, op, done, Instant::now() + c.uri.timeout);
        Ok(())
    }

    fn describe(&self) -> String {
        self.uri.to_string()
    }

    fn exact_len(&self) -> bool {
        false
    }

    fn remote_health(&self) -> Option<Arc<RemoteHealth>> {
        Some(self.health.clone())
    }
}

impl Drop for NbdBackend {
    fn drop(&mut self) {
        let client = self.client.clone();
        let helpers = std::mem::take(&mut self.helpers);
        let me = std::thread::current().id();
        let on_a_helper = helpers.iter().any(|h| h.thread().id() == me);
        let finish = move || {
            client.stopping.store(true, Ordering::Release);
            for h in helpers {
                h.thread().unpark();
                let _ = h.join();
            }
            // Every started write is answered now: the export is let go.
            client.release_owner();
        };
        if !on_a_helper {
            return finish();
        }
        // The last owner was a started write's callback: its helper cannot wait for
        // itself, nor send the release on the connection it drives.
        if let Err(e) = std::thread::Builder::new()
            .name("hscm-nbd-close".into())
            .spawn(finish)
        {
            tracing::warn!(
                "{}: could not release the export ({e}): its next opener takes it over",
                self.client.uri
            );
        }
    }
}

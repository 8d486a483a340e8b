//! The client library: connect to a server, claim a queue pair per thread, and either
//! call blocking reads and writes (split into pipelined chunks) or drive the rings
//! directly with submit/complete.
//!
//! By concern: this file connects (the hello, the server's identity, the region it
//! hands over) and hands out queue pairs; [`lease`] reserves pieces of the shared data
//! buffer; [`queue`] drives one queue pair (submit, complete, waiting), and
//! `queue/blocking.rs` its blocking calls, split into pipelined chunks.

mod lease;
mod queue;

pub use lease::Lease;
pub use queue::{Completion, Op, Queue};

use std::fs::File;
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;

use crate::buddy::Buddy;
use crate::error::{Error, Result};
use crate::region::{Geometry, QueuePairView, Region, PROTOCOL_SECTOR, QP_BROKEN, SERVER_CLOSED};
use crate::wait::WaitMode;
use crate::wire::{self, Hello};

/// What a client asks the server for, and how it behaves.
#[derive(Debug, Clone)]
pub struct ClientOptions {
    /// Queue pairs in the region (one per thread that does I/O); 0 = server default.
    pub queues: u32,
    /// Entries per SQ and CQ; 0 = server default.
    pub depth: u32,
    /// Data-buffer bytes shared by the client's queues; 0 = server default.
    pub db_len: u64,
    /// Largest command a blocking call issues; larger requests are split and pipelined.
    pub chunk: u64,
    pub wait: WaitMode,
}

impl Default for ClientOptions {
    fn default() -> Self {
        ClientOptions {
            queues: 0,
            depth: 0,
            db_len: 0,
            chunk: 128 * 1024,
            wait: WaitMode::adaptive(),
        }
    }
}

struct Shared {
    stream: UnixStream,
    region: Region,
    buddy: Mutex<Buddy>,
    /// The buddy's free bytes, mirrored on every change (under its lock) so a queue
    /// deciding whether to keep a spare lease reads it without taking the lock: two
    /// atomic read-modify-writes fewer between one blocking call and the next.
    free_bytes: AtomicU64,
    claimed: Vec<AtomicBool>,
    /// Set while some queue waits for buffer space: others then return their spares.
    pressure: AtomicBool,
}

impl Shared {
    fn check_server(&self) -> Result<()> {
        if self.region.server_state().load(Ordering::Acquire) == SERVER_CLOSED {
            return Err(Error::Disconnected);
        }
        Ok(())
    }
}

/// Fails once the server has stopped serving queue `index` (it saw an impossible ring
/// index there).
fn check_broken(qp: &QueuePairView<'_>, index: u32) -> Result<()> {
    if qp.state.load(Ordering::Acquire) == QP_BROKEN {
        return Err(Error::QueueBroken {
            queue: index,
            reason: "the server saw an impossible ring index".into(),
        });
    }
    Ok(())
}

/// A connection to a server: one region, several queue pairs, one data buffer.
#[derive(Clone)]
pub struct Client {
    shared: Arc<Shared>,
    chunk: u64,
    wait: WaitMode,
}

impl Client {
    /// Connects to the server's control socket and maps the region it hands over.
    pub fn connect(path: &Path, opts: &ClientOptions) -> Result<Client> {
        let mut stream = UnixStream::connect(path).map_err(|e| Error::Io {
            what: format!("connecting to {}", path.display()),
            source: e,
        })?;
        check_server(&stream, path)?;
        let hello = Hello {
            queues: opts.queues,
            depth: opts.depth,
            db_len: opts.db_len,
        };
        if let Err(e) = wire::send_hello(&mut stream, &hello) {
            // A busy server refuses without reading the hello and closes; its reason
            // is still waiting in the socket, and is the error worth reporting.
            return Err(match wire::recv_reply(&mut stream) {
                Err(refused @ Error::Refused(_)) => refused,
                _ => e,
            });
        }
        let (fd, region_len) = wire::recv_reply(&mut stream)?;
        let file = File::from(fd);
        let region = Region::attach(&file)?;
        if region.geometry().region_len() != region_len {
            return Err(Error::BadRegion(
                "reply and region disagree on its length".into(),
            ));
        }
        let g = region.geometry();
        let chunk = opts
            .chunk
            .max(PROTOCOL_SECTOR)
            .next_multiple_of(PROTOCOL_SECTOR)
            // With several queues a piece never needs more than half the buffer, the
            // half that kept spares always leave free (Queue::may_keep).
            .min(if g.queues > 1 { g.db_len / 2 } else { g.db_len })
            .min(u64::from(u32::MAX) / PROTOCOL_SECTOR * PROTOCOL_SECTOR);
        Ok(Client {
            shared: Arc::new(Shared {
                stream,
                buddy: Mutex::new(Buddy::new(g.db_len, PROTOCOL_SECTOR as u32)),
                free_bytes: AtomicU64::new(g.db_len),
                claimed: (0..g.queues).map(|_| AtomicBool::new(false)).collect(),
                pressure: AtomicBool::new(false),
                region,
            }),
            chunk,
            wait: opts.wait,
        })
    }

    pub fn geometry(&self) -> Geometry {
        self.shared.region.geometry()
    }

    /// Claims a free queue pair for the calling thread.
    pub fn queue(&self) -> Result<Queue> {
        let g = self.geometry();
        for (i, c) in self.shared.claimed.iter().enumerate() {
            if c.compare_exchange(false, true, Ordering::AcqRel, Ordering::Relaxed)
                .is_ok()
            {
                return Ok(Queue::claimed(
                    self.shared.clone(),
                    i as u32,
                    self.chunk,
                    self.wait,
                ));
            }
        }
        Err(Error::Invalid(format!(
            "all {} queue pairs are in use",
            g.queues
        )))
    }

    /// Reserves `bytes` of the data buffer, or None while it is all in use.
    pub fn lease(&self, bytes: u64) -> Option<Lease> {
        self.shared.lease(bytes)
    }
}

/// Whether a server running as `server_uid` may serve a client running as `my_uid`:
/// one of the client's own, or root's. Anyone else could have bound the socket's
/// name first (in /dev/shm, which every user may write) to read what the client
/// writes.
pub fn trusted_server(server_uid: u32, my_uid: u32) -> bool {
    server_uid == my_uid || server_uid == 0
}

/// Refuses a server that runs as another user than this process's or root
/// (SO_PEERCRED, which the kernel fills in: the peer cannot lie about it).
fn check_server(stream: &UnixStream, path: &Path) -> Result<()> {
    let peer = rustix::net::sockopt::get_socket_peercred(stream).map_err(|e| Error::Io {
        what: format!("asking who serves {}", path.display()),
        source: e.into(),
    })?;
    let me = rustix::process::geteuid().as_raw();
    if !trusted_server(peer.uid.as_raw(), me) {
        return Err(Error::Refused(format!(
            "the server at {} runs as uid {}, neither this process's uid {me} nor root: not trusting it with data",
            path.display(),
            peer.uid.as_raw()
        )));
    }
    Ok(())
}

/// Waits `timeout` for `path` to accept connections (a server starting up).
pub fn wait_for_server(path: &Path, timeout: Duration) -> Result<()> {
    let start = Instant::now();
    loop {
        match UnixStream::connect(path) {
            Ok(_) => return Ok(()),
            Err(e) if start.elapsed() > timeout => {
                return Err(Error::Io {
                    what: format!("waiting for {}", path.display()),
                    source: e,
                })
            }
            Err(_) => std::thread::sleep(Duration::from_millis(10)),
        }
    }
}

//! The server: the fixed-newstyle handshake, then the transmission phase, serving
//! one [`BlockTarget`] to any number of connections.
//!
//! Each connection has a few threads that take turns: one reads a request and its
//! payload, then runs it on the target and writes its whole reply under one lock while
//! the next thread reads, so requests are pipelined and replies may complete out of
//! order, as the protocol allows. A client that breaks the protocol is
//! disconnected; one that asks for something wrong gets the spec's error and goes on.
//!
//! By concern, after nbdkit's split of its protocol code:
//! - this file: the export, its counters, what a connection goes through;
//! - [`handshake`]: the fixed-newstyle option haggling up to transmission;
//! - [`transmission`]: reading requests, the threads' turns, writing replies;
//! - [`requests`]: checking a request against the spec and the export, running it on
//!   the target, and the reply (or error) it gets.

mod handshake;
mod replies;
mod requests;
mod transmission;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use hscm_block::{BlockTarget, Capabilities, FuaSupport};

use crate::proto;
use crate::stream::Stream;
use crate::Error;

use handshake::Handshake;

/// What the export is called and how it is served.
#[derive(Debug, Clone)]
pub struct ExportOptions {
    /// The export's name; a client asking for "" gets it too (the default export).
    pub name: String,
    /// Shown by `nbdinfo` and NBD_OPT_LIST.
    pub description: String,
    /// Refuse writes, trims and zeroes even if the target takes them.
    pub read_only: bool,
    /// Requests each connection runs at once, at most (threads start as one and grow
    /// while requests wait on the device).
    pub workers_per_connection: usize,
    /// A client must finish the handshake within this time, or it is dropped.
    pub handshake_timeout: Duration,
    /// A client that sends nothing for this long is dropped (None: never, as a
    /// block device's client may rightly sit idle for hours).
    pub idle_timeout: Option<Duration>,
    /// A reply the client does not take within this time ends the connection: a
    /// client that never reads holds a thread and one piece of a reply at most
    /// this long.
    pub send_timeout: Duration,
    /// Whether clients may or must start TLS (NBD_OPT_STARTTLS), with what
    /// credentials.
    pub tls: crate::Tls,
}

impl Default for ExportOptions {
    fn default() -> Self {
        ExportOptions {
            name: String::new(),
            description: "hscm durable hybrid RAM volume".into(),
            read_only: false,
            workers_per_connection: 16,
            handshake_timeout: Duration::from_secs(10),
            idle_timeout: None,
            send_timeout: Duration::from_secs(30),
            tls: crate::Tls::off(),
        }
    }
}

/// Counters over the server's life.
#[derive(Debug, Default)]
pub struct Stats {
    pub connections: AtomicU64,
    /// Connections being served now.
    pub connected: AtomicU64,
    pub commands: AtomicU64,
    /// Commands answered with an error.
    pub errors: AtomicU64,
    /// Connections dropped for breaking the protocol.
    pub protocol_errors: AtomicU64,
}

/// One export of one target.
pub struct Server {
    target: Arc<dyn BlockTarget>,
    export: ExportOptions,
    caps: Capabilities,
    stats: Arc<Stats>,
}

/// What the handshake agreed on.
#[derive(Default, Clone, Copy)]
struct Session {
    structured: bool,
    allocation_context: bool,
}

impl Server {
    pub fn new(target: Arc<dyn BlockTarget>, export: ExportOptions) -> Server {
        let caps = target.capabilities();
        Server {
            target,
            export,
            caps,
            stats: Arc::new(Stats::default()),
        }
    }

    pub fn stats(&self) -> Arc<Stats> {
        self.stats.clone()
    }

    fn read_only(&self) -> bool {
        self.export.read_only || self.caps.read_only
    }

    /// The transmission flags this export advertises.
    pub fn transmission_flags(&self) -> u16 {
        let c = &self.caps;
        let mut f = proto::TX_HAS_FLAGS | proto::TX_SEND_FLUSH | proto::TX_SEND_DF;
        f |= proto::TX_SEND_CACHE;
        if self.read_only() {
            f |= proto::TX_READ_ONLY;
        } else {
            if c.fua != FuaSupport::None {
                f |= proto::TX_SEND_FUA;
            }
            if c.trim {
                f |= proto::TX_SEND_TRIM;
            }
            if c.zero {
                f |= proto::TX_SEND_WRITE_ZEROES;
                if c.fast_zero {
                    f |= proto::TX_SEND_FAST_ZERO;
                }
            }
        }
        if c.multi_conn {
            f |= proto::TX_CAN_MULTI_CONN;
        }
        f
    }

    fn name_matches(&self, name: &str) -> bool {
        name.is_empty() || name == self.export.name
    }

    /// Serves one connection until the client leaves, breaks the protocol, or `stop`
    /// is set (requests already read are answered first).
    pub fn serve(&self, stream: Stream, stop: &AtomicBool) -> Result<(), Error> {
        self.serve_telling(stream, stop, &AtomicBool::new(true))
    }

    /// [`Self::serve`], clearing `in_handshake` once the client has finished its
    /// handshake (the listener's deadline and eviction apply only before that).
    pub fn serve_telling(
        &self,
        stream: Stream,
        stop: &AtomicBool,
        in_handshake: &AtomicBool,
    ) -> Result<(), Error> {
        self.stats.connections.fetch_add(1, Ordering::Relaxed);
        self.stats.connected.fetch_add(1, Ordering::Relaxed);
        let result = self.serve_connection(stream, stop, in_handshake);
        self.stats.connected.fetch_sub(1, Ordering::Relaxed);
        result
    }

    fn serve_connection(
        &self,
        mut stream: Stream,
        stop: &AtomicBool,
        in_handshake: &AtomicBool,
    ) -> Result<(), Error> {
        let send = limit(self.export.send_timeout);
        stream.set_timeouts(limit(self.export.handshake_timeout), send)?;
        let result = match self.handshake(&mut stream) {
            Ok(Handshake::Transmit(session)) => {
                in_handshake.store(false, Ordering::Release);
                stream.set_timeouts(self.export.idle_timeout.and_then(limit), send)?;
                self.transmit(stream, session, stop)
            }
            Ok(Handshake::Done) => Ok(()),
            Err(e) => Err(e),
        };
        if matches!(result, Err(Error::Protocol(_))) {
            self.stats.protocol_errors.fetch_add(1, Ordering::Relaxed);
        }
        result
    }
}

/// A socket timeout from a limit: zero means none (a socket refuses a zero timeout).
fn limit(d: Duration) -> Option<Duration> {
    (!d.is_zero()).then_some(d)
}

//! hscm-nbd: serves any [`hscm_block::BlockTarget`] as an NBD export (the NBD
//! project's `doc/proto.md`), so qemu, libnbd's tools, fio, nbdfuse and the kernel's
//! nbd client reach it.
//!
//! - [`proto`]: the protocol's numbers and the decoding of what clients send (pure);
//! - [`Server`]: the fixed-newstyle handshake (EXPORT_NAME, ABORT, LIST, INFO, GO,
//!   STRUCTURED_REPLY, LIST/SET_META_CONTEXT with `base:allocation`; anything else
//!   gets NBD_REP_ERR_UNSUP and the handshake goes on) and the transmission phase
//!   (READ, WRITE with FUA, FLUSH, TRIM, WRITE_ZEROES with NO_HOLE and FAST_ZERO,
//!   CACHE, BLOCK_STATUS, DISC), requests pipelined over a few workers per connection;
//! - [`Listener`]: a Unix socket, a TCP address or an inherited socket (systemd's
//!   `LISTEN_FDS`), a thread per connection, and a clean stop.
//!
//! The target's capabilities decide what is advertised: FUA when the target honours
//! it, CAN_MULTI_CONN only when a flush on one connection covers writes completed on
//! every connection (the spec's meaning), TRIM and WRITE_ZEROES when implemented.

mod listener;
pub mod proto;
mod server;
mod stream;
#[cfg(feature = "testing")]
pub mod testing;
mod tls;

pub use listener::{Endpoint, ListenLimits, Listener};
pub use server::{ExportOptions, Server, Stats};
pub use stream::Stream;
pub use tls::{ClientCertificates, Tls, TlsMode};

/// Why a connection or the server ended in failure.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    #[error("socket: {0}")]
    Io(#[from] std::io::Error),
    #[error("protocol: {0}")]
    Proto(#[from] proto::ProtoError),
    /// The client broke the protocol in a way the decoder does not name.
    #[error("protocol: {0}")]
    Protocol(String),
    #[error("{what}: {source}")]
    Setup {
        what: String,
        #[source]
        source: std::io::Error,
    },
}

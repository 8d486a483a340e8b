//! hscm-ring: a storage protocol over shared memory between local clients and an hscm
//! volume (after Seo et al., "Design and Implementation of a Mobile Storage Leveraging
//! the DRAM Interface", 2016: submission queue, completion queue and data buffer in a
//! shared region, a doorbell, completion by interrupt or polling, split I/O, buddy
//! allocation of the buffer).
//!
//! A client connects to the server's control socket and receives its own sealed memfd
//! region holding one or more queue pairs and a data buffer; the socket carries nothing
//! else, and its closing tells each side the other is gone. Layout and rules:
//! docs/ring.md.
//!
//! ```no_run
//! use hscm_ring::{Client, ClientOptions, WriteFlags};
//! let client = Client::connect("/dev/shm/hscm-vol.sock".as_ref(), &ClientOptions::default())?;
//! let mut q = client.queue()?;
//! q.write(8, &[7u8; 4096], WriteFlags::FUA)?; // durable when it returns
//! let mut buf = [0u8; 100];
//! q.read_bytes(4096 + 10, &mut buf)?; // any byte range
//! # Ok::<(), hscm_ring::Error>(())
//! ```

mod atomic;
pub mod ring;

#[cfg(not(loom))]
mod buddy;
#[cfg(not(loom))]
mod client;
#[cfg(not(loom))]
mod error;
#[cfg(not(loom))]
pub mod ffi;
#[cfg(not(loom))]
pub mod proto;
#[cfg(not(loom))]
mod region;
#[cfg(not(loom))]
mod server;
#[cfg(not(loom))]
mod status;
#[cfg(not(loom))]
pub mod uds;
#[cfg(not(loom))]
mod wait;
#[cfg(not(loom))]
mod wire;

#[cfg(not(loom))]
pub use buddy::{Block, Buddy};
#[cfg(not(loom))]
pub use client::{
    trusted_server, wait_for_server, Client, ClientOptions, Completion, Lease, Op, Queue,
};
#[cfg(not(loom))]
pub use error::{Error, Result};
/// The flags of a write or discard (the block layer's).
pub use hscm_block::WriteFlags;
#[cfg(not(loom))]
pub use proto::Status;
#[cfg(not(loom))]
pub use region::{Geometry, PROTOCOL_SECTOR};
#[cfg(not(loom))]
pub use server::{endpoint_path, Server, ServerHandle, ServerOptions, ServerStats};
#[cfg(not(loom))]
pub use wait::WaitMode;

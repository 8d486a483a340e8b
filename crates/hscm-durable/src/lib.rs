//! hscm-durable: what every hscm engine (the volume, the key-value store) shares about
//! durability, so each rule lives in one place:
//!
//! * [`codec`]: bounds-checked little-endian encoding of what engines keep on media,
//!   and the double-slot rule (a sealed record, the newest valid generation wins);
//! * [`device`]: the device layer the volumes write through: [`device::Backend`] (a
//!   narrow trait with explicit sync semantics), [`device::FileBackend`] (a file or a
//!   block device, O_DIRECT with a buffered fallback, the owner lock held while open,
//!   io_uring for many writes at once) and [`device::AlignedBuf`];
//! * [`home`]: where a store lives, a path or an NBD URI, opened as a backend;
//! * [`mirror`]: a home kept equal on a local device and NBD exports on other
//!   machines (protocol C, quorum, fencing, resync);
//! * [`nbd`]: the NBD client home ([`nbd::NbdBackend`]): any NBD export as a device;
//! * [`lock`]: one owner per store, by `flock` on the file that holds it;
//! * [`Poison`]: the first device failure (or a background thread's panic), after which
//!   an engine refuses writes and flushes for good;
//! * [`GroupCommit`]: one sync covers every write completed before it started;
//! * [`Media`]: the files an engine writes through, on a real directory ([`DirMedia`])
//!   or, for tests, on a model that cuts the power ([`testing::FaultyDisks`]).
//! * [`runtime`]: the directory only its user can write where a running hscm keeps
//!   its logs and sockets;
//! * [`units`]: sizes as people read them.

pub mod codec;
mod commit;
mod conversions;
pub mod device;
mod durability;
pub mod home;
pub mod lock;
mod media;
mod members;
pub mod mirror;
pub mod nbd;
mod poison;
pub mod runtime;
#[cfg(any(test, feature = "testing"))]
pub mod testing;
pub mod units;

pub use commit::{CommitError, GroupCommit};
pub use durability::{Durability, UnknownDurability};
pub use lock::{LockError, LockHolder};
pub use media::{DirMedia, Media, MediaFile};
pub use poison::{Failure, Poison};

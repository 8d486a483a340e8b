//! Placement, caching and migration policies as plain data structures, generic over
//! the key. The simulators and the engine share them: a policy sees events and
//! returns decisions; it never moves data itself.

pub mod cache;
mod clock;
pub mod levels;
mod lru;
pub mod migration;
mod rapp;
mod table;
mod warm;

pub use clock::Clock;
pub use levels::LeveledLru;
pub use lru::Lru;
pub use migration::{MemoryAccess, MigrationDecision, MigrationPolicy};
pub use rapp::{Rapp, RappConfig};
pub use warm::{Warm, WarmConfig, WarmDecision};

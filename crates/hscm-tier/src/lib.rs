//! hscm-tier: a volume larger than RAM. Every block lives on the home device (a file
//! or block device); the hot ones are also kept in DRAM, chosen by the same cache
//! policies `hscm sim cache` simulates (`hscm-policy`: LRU, FIFO, CLOCK, SIEVE,
//! S3-FIFO, ARC, behind an optional admission filter), so the simulator's prediction and
//! the volume's behaviour can be checked against each other on one trace.
//!
//! Writes go through to home and are durable before they are acknowledged (or, with
//! [`Durability::OnFlush`], at the next flush), so home holds every acknowledged write
//! and DRAM is only ever a copy. A sequential run longer than the cutoff (bcache's
//! idea) bypasses DRAM, so a scan does not wash out the hot set.
//!
//! ```
//! use hscm_tier::{TierConfig, TieredVolume};
//! # let dir = tempfile::tempdir()?;
//! let path = dir.path().join("big.tier");
//! // 16 MiB of data, 1 MiB of it in DRAM.
//! TieredVolume::create(&path, &TierConfig::new(16 << 20, 1 << 20), false)?;
//! let vol = TieredVolume::open(&path)?;
//! vol.write_at(5 << 20, b"hello", hscm_block::WriteFlags::NONE)?; // durable when it returns
//! let mut buf = [0u8; 5];
//! vol.read_at(5 << 20, &mut buf)?;
//! assert_eq!(&buf, b"hello");
//! assert_eq!(vol.stats().tiers[0].hits, 1);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

mod device;
mod dram;
mod error;
mod fast;
mod header;
mod hotlist;
pub mod snapshot;
mod target;
#[cfg(any(test, feature = "testing"))]
pub mod testing;
mod volume;

pub use dram::TierStats;
pub use error::{Error, Result};
pub use fast::{Recovery, WRITEBACK_AGE, WRITEBACK_HIGH, WRITEBACK_LOW};
pub use header::{
    FastConfig, TierConfig, WriteMode, DEFAULT_SEQUENTIAL_CUTOFF, HEADER_LEN, MAGIC, MAX_FAST_PATH,
};
pub use hscm_durable::Durability;
pub use snapshot::Counters;
pub use volume::TieredVolume;

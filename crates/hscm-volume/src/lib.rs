//! hscm-volume: the durable hybrid RAM volume.
//!
//! A [`Volume`] keeps its working copy in DRAM and writes every change through to a
//! durable [`Backend`] before the write completes. It is usable the moment it opens:
//! a background loader copies the backend into RAM chunk by chunk while requests are
//! served (Baek & Park, "A Durable Hybrid RAM Disk with a Rapid Resilience", 2020, §3.3).
//!
//! ```
//! use hscm_volume::{CreateOptions, Durability, OpenOptions, Volume};
//! # let dir = tempfile::tempdir()?;
//! let path = dir.path().join("data.hscm");
//! Volume::create(&path, 1 << 20, &CreateOptions::default())?;
//! let vol = Volume::open(&path, &OpenOptions::default())?;
//! vol.write_at(1000, b"hello")?; // durable when it returns (the default, Immediate)
//! vol.write_at_with(4096, b"lazy", Durability::OnFlush)?; // durable after flush()
//! vol.flush()?;
//! let mut buf = [0u8; 5];
//! vol.read_at(1000, &mut buf)?;
//! assert_eq!(&buf, b"hello");
//! vol.close()?;
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

mod backend;
mod device_counters;
mod error;
mod header;
mod journal;
mod ram;
mod target;
#[cfg(any(test, feature = "testing"))]
pub mod testing;
mod volume;

pub use backend::{AlignedBuf, Backend, FileBackend};
pub use device_counters::DeviceStats;
pub use error::{Error, Result};
pub use header::{Header, FORMAT_VERSION, HEADER_LEN, IO_ALIGN, MAGIC};

pub use hscm_durable::{Failure, LockHolder};
pub use journal::{JOURNAL_OFFSET, MIN_JOURNAL};
pub use ram::{check_fits_in_memory, memory_available_for_volumes};
pub use volume::{
    CreateOptions, Inspection, JournalStats, LoadProgress, LoadState, OpenOptions, Volume,
    WriteBackStats, WriteDone, DEFAULT_CHUNK_SIZE, DEFAULT_DIRTY_MAX,
};

/// When a write is durable (hscm-durable holds the one vocabulary every engine uses).
pub use hscm_durable::Durability;

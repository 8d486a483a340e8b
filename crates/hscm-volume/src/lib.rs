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
pub use header::{Header, FORMAT_VERSION, HEADER_LEN, MAGIC, SECTOR};
pub use hscm_durable::{Failure, LockHolder};
pub use journal::{JOURNAL_OFFSET, MIN_JOURNAL};
pub use ram::{check_fits_in_memory, memory_available_for_volumes};
pub use volume::{
    CreateOptions, Inspection, JournalStats, LoadProgress, LoadState, OpenOptions, Volume,
    WriteBackStats, DEFAULT_CHUNK_SIZE, DEFAULT_DIRTY_MAX,
};

/// When a write is durable. See docs/design.md.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Durability {
    /// `write_at` returns Ok only once the bytes survive a power cut.
    /// Concurrent writers share device syncs (group commit).
    Immediate,
    /// Write-through with flush-time durability: `write_at` returns once the bytes
    /// reached the device (so they survive a kill -9 of the process); `flush` makes
    /// every completed write durable.
    OnFlush,
    /// A disk with a volatile write cache: `write_at` returns once the bytes are in
    /// RAM; dirty sectors go home in the background, in sorted runs, and at most
    /// `OpenOptions::dirty_max` of them wait at a time; `flush` (and a FUA write) makes
    /// every write completed before it durable. A kill -9 loses what no flush covered,
    /// as a power cut does. Volumes without a journal only.
    WriteBack,
}

impl Durability {
    pub(crate) fn code(self) -> u32 {
        match self {
            Durability::Immediate => 0,
            Durability::OnFlush => 1,
            Durability::WriteBack => 2,
        }
    }

    pub(crate) fn from_code(code: u32) -> Option<Durability> {
        match code {
            0 => Some(Durability::Immediate),
            1 => Some(Durability::OnFlush),
            2 => Some(Durability::WriteBack),
            _ => None,
        }
    }

    /// Every mode, for help texts and pickers.
    pub const ALL: [Durability; 3] = [
        Durability::Immediate,
        Durability::OnFlush,
        Durability::WriteBack,
    ];

    /// True when a completed write may be lost until a flush covers it.
    pub fn needs_flush(self) -> bool {
        self != Durability::Immediate
    }

    pub fn name(self) -> &'static str {
        match self {
            Durability::Immediate => "immediate",
            Durability::OnFlush => "on-flush",
            Durability::WriteBack => "write-back",
        }
    }
}

impl std::fmt::Display for Durability {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for Durability {
    type Err = Error;
    fn from_str(s: &str) -> Result<Durability> {
        match s {
            "immediate" => Ok(Durability::Immediate),
            "on-flush" | "onflush" => Ok(Durability::OnFlush),
            "write-back" | "writeback" => Ok(Durability::WriteBack),
            _ => Err(Error::InvalidArgument(format!(
                "unknown durability {s:?}; use immediate, on-flush or write-back"
            ))),
        }
    }
}

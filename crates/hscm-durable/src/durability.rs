//! When a write is durable: the one vocabulary the flat volume, the tiered volume and
//! the front-ends share (docs/design.md).

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
    /// The code a volume header stores.
    pub fn code(self) -> u32 {
        match self {
            Durability::Immediate => 0,
            Durability::OnFlush => 1,
            Durability::WriteBack => 2,
        }
    }

    /// The durability a volume header's code names.
    pub fn from_code(code: u32) -> Option<Durability> {
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

/// A durability name that is none of immediate, on-flush and write-back.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown durability {0:?}; use immediate, on-flush or write-back")]
pub struct UnknownDurability(pub String);

impl std::str::FromStr for Durability {
    type Err = UnknownDurability;
    fn from_str(s: &str) -> Result<Durability, UnknownDurability> {
        match s {
            "immediate" => Ok(Durability::Immediate),
            "on-flush" | "onflush" => Ok(Durability::OnFlush),
            "write-back" | "writeback" => Ok(Durability::WriteBack),
            _ => Err(UnknownDurability(s.to_string())),
        }
    }
}

//! Simulation configuration: devices, geometry, controller, core, caches, policy.

use hscm_model::{MemPreset, MemProfile};
use hscm_policy::{RappConfig, WarmConfig};
use serde::Serialize;

use crate::cache::CacheConfig;
use crate::SimError;

/// Address-mapping fields between the row (most significant) and the in-row offset.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum MapField {
    Channel,
    Rank,
    Bank,
}

/// Per-device organisation. Rows per bank follow from the device's capacity.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Geometry {
    pub channels: u32,
    pub ranks: u32,
    pub banks: u32,
    pub row_bytes: u64,
    /// Fields from least to most significant above the row offset; the row number is
    /// everything above them.
    pub mapping: Vec<MapField>,
}

impl Default for Geometry {
    fn default() -> Self {
        Self {
            channels: 1,
            ranks: 1,
            banks: 8,
            row_bytes: 4096,
            mapping: vec![MapField::Channel, MapField::Bank, MapField::Rank],
        }
    }
}

impl Geometry {
    /// Parses a mapping written most significant first, e.g. `ro-ra-ba-ch-co` (the
    /// default): row, rank, bank, channel, then the offset within the row.
    pub fn parse_mapping(s: &str) -> Result<Vec<MapField>, SimError> {
        let parts: Vec<&str> = s.split('-').collect();
        let bad = || {
            SimError::Config(format!(
            "address mapping {s:?}: expected `ro` first, `co` last and ch, ra, ba once each between (e.g. ro-ra-ba-ch-co)"
        ))
        };
        if parts.len() != 5 || parts[0] != "ro" || parts[4] != "co" {
            return Err(bad());
        }
        let mut fields = Vec::new();
        for p in parts[1..4].iter().rev() {
            let f = match *p {
                "ch" => MapField::Channel,
                "ra" => MapField::Rank,
                "ba" => MapField::Bank,
                _ => return Err(bad()),
            };
            if fields.contains(&f) {
                return Err(bad());
            }
            fields.push(f);
        }
        Ok(fields)
    }
}

/// Migration and placement policies (the seed paper's Figures 8-10 compare them).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum PolicyKind {
    /// All capacity is DRAM: the baseline everything is normalised to.
    DramOnly,
    /// All capacity is PCM.
    PcmOnly,
    /// DRAM + PCM, pages stay where they were first placed.
    Static,
    Warm,
    Rapp,
}

impl PolicyKind {
    pub const ALL: [PolicyKind; 5] = [
        PolicyKind::DramOnly,
        PolicyKind::PcmOnly,
        PolicyKind::Static,
        PolicyKind::Warm,
        PolicyKind::Rapp,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Self::DramOnly => "dram-only",
            Self::PcmOnly => "pcm-only",
            Self::Static => "static",
            Self::Warm => "warm",
            Self::Rapp => "rapp",
        }
    }

    pub fn from_name(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|p| p.name() == s)
    }
}

/// Where a page goes the first time it is touched.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Placement {
    /// A pseudo-random free frame anywhere: the OS does not tell DRAM from PCM, so pages
    /// land in proportion to capacity (the default).
    Random,
    /// Frames in order from address 0: DRAM fills first.
    DramFirst,
    /// The trace's addresses are physical: frame = address / row size (mod capacity).
    Identity,
}

#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct CoreConfig {
    pub freq_ghz: f64,
    /// Cycles per instruction when no memory stall occurs (caches hits included).
    pub cpi: f64,
}

impl Default for CoreConfig {
    fn default() -> Self {
        Self {
            freq_ghz: 1.0,
            cpi: 1.0,
        }
    }
}

/// How the scheduler orders commands that are ready at the same clock.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
#[serde(rename_all = "kebab-case")]
#[non_exhaustive]
pub enum ReadyOrder {
    /// Ramulator 2.0's FR-FCFS: requests whose own activate has issued first, then the
    /// oldest request, whatever its command. A row hit wins by being ready sooner, not
    /// by rank among the ready ones.
    #[default]
    Oldest,
    /// Column commands (row hits) before precharges and activates, then the oldest.
    RowHitsFirst,
}

/// The memory controller of each channel.
///
/// The defaults follow Ramulator 2.0's generic controller: read and write queues of
/// 32, writes served from more than 80% of the write queue (26 of 32) until fewer than
/// 20% (6) wait and a read does, and whenever no read waits; among ready commands the
/// activated requests first, then the oldest. DRAMsim3 instead drains its write buffer
/// when full and otherwise serves reads; both schedule FR-FCFS. The row-hit cap is
/// DRAMsim3's: a row that has served 4 hits may be closed for an older miss even
/// though more hits wait.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct ControllerConfig {
    /// Requests waiting to be activated for, per channel (once its row opens a request
    /// no longer counts, as in Ramulator's active buffer).
    pub read_queue: usize,
    pub write_queue: usize,
    /// Write mode starts when this many writes wait (or no read does)…
    pub drain_high: usize,
    /// …and ends when at most this many wait and a read does.
    pub drain_low: usize,
    /// Hits a row may serve before a waiting miss to its bank may close it.
    pub row_hit_cap: u32,
    /// The order among commands ready at the same clock.
    pub ready_order: ReadyOrder,
}

impl ControllerConfig {
    /// Queues of `read` and `write` entries with Ramulator's watermarks: write mode
    /// above 80% of the write queue, back to reads below 20%.
    pub fn with_queues(read: usize, write: usize) -> Self {
        Self {
            read_queue: read,
            write_queue: write,
            drain_high: write * 4 / 5 + 1,
            drain_low: (write / 5).saturating_sub(usize::from(write % 5 == 0)),
            row_hit_cap: 4,
            ready_order: ReadyOrder::default(),
        }
    }
}

impl Default for ControllerConfig {
    fn default() -> Self {
        Self::with_queues(32, 32)
    }
}

/// Everything a run needs.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SimConfig {
    pub dram: MemProfile,
    pub pcm: MemProfile,
    pub dram_bytes: u64,
    pub pcm_bytes: u64,
    pub geometry: Geometry,
    pub controller: ControllerConfig,
    pub core: CoreConfig,
    /// None: the trace is post-cache (each reference is a memory request).
    pub caches: Option<CacheConfig>,
    pub placement: Placement,
    pub seed: u64,
    pub warm: WarmConfig,
    pub rapp: RappConfig,
}

impl Default for SimConfig {
    /// The seed paper's system: 1 GiB DRAM + 3 GiB PCM (Table 2 devices), Table 1
    /// caches, a 1 GHz in-order core.
    fn default() -> Self {
        Self {
            dram: MemPreset::PaperDram.profile(),
            pcm: MemPreset::PaperPcm.profile(),
            dram_bytes: 1 << 30,
            pcm_bytes: 3 << 30,
            geometry: Geometry::default(),
            controller: ControllerConfig::default(),
            core: CoreConfig::default(),
            caches: Some(CacheConfig::default()),
            placement: Placement::Random,
            seed: 1,
            warm: WarmConfig::default(),
            rapp: RappConfig::default(),
        }
    }
}

impl SimConfig {
    pub fn validate(&self) -> Result<(), SimError> {
        let g = &self.geometry;
        let err = |m: String| Err(SimError::Config(m));
        if g.channels == 0 || g.ranks == 0 || g.banks == 0 {
            return err("channels, ranks and banks must be at least 1".into());
        }
        if !g.row_bytes.is_power_of_two() || g.row_bytes < 64 {
            return err(format!(
                "row size {} must be a power of two >= 64",
                g.row_bytes
            ));
        }
        for (name, p) in [("DRAM", &self.dram), ("PCM", &self.pcm)] {
            if g.row_bytes % u64::from(p.burst_bytes) != 0 {
                return err(format!(
                    "{name}: row size must be a multiple of the {} B burst",
                    p.burst_bytes
                ));
            }
        }
        let unit = g.row_bytes * u64::from(g.channels * g.ranks * g.banks);
        for (name, bytes) in [("DRAM", self.dram_bytes), ("PCM", self.pcm_bytes)] {
            if bytes % unit != 0 {
                return err(format!(
                    "{name} size {bytes} is not a whole number of rows across all banks ({unit} B)"
                ));
            }
        }
        if self.dram_bytes + self.pcm_bytes == 0 {
            return err("total memory size is zero".into());
        }
        if (self.dram_bytes + self.pcm_bytes) / g.row_bytes > u64::from(u32::MAX - 1) {
            return err("more than 2^32 rows: use larger rows or less memory".into());
        }
        let c = &self.controller;
        if c.read_queue == 0
            || c.write_queue == 0
            || c.drain_low >= c.drain_high
            || c.drain_high > c.write_queue
            || c.row_hit_cap == 0
        {
            return err(
                "controller: queues must be non-empty, drain_low < drain_high <= write_queue and the row-hit cap at least 1"
                    .into(),
            );
        }
        if !(self.core.cpi > 0.0 && self.core.freq_ghz > 0.0) {
            return err("core: cpi and frequency must be positive".into());
        }
        Ok(())
    }
}

//! Test tools (feature `testing`): the tiered volume under the whole-engine fuzz driver
//! of `hscm_volume::testing::volume_ops`, with the same sequences and model: requests,
//! injected device failures, power cuts and clean closes, each restart checked.

use std::sync::Arc;

use hscm_block::BlockTarget;
use hscm_policy::cache::{AdmissionName, EvictionName};
use hscm_volume::testing::volume_ops::{self, Engine, Outcome, Setup, VOLUME_SIZE};
use hscm_volume::testing::FaultyBackend;

use crate::{Durability, TierConfig, TieredVolume};

impl Engine for TieredVolume {
    fn target(&self) -> &dyn BlockTarget {
        self
    }
    /// The tier defers nothing to write back (write-through); its nearest step is a
    /// flush, refused after a failure as a checkpoint is.
    fn checkpoint(&self) -> Result<(), String> {
        self.flush().map_err(|e| e.to_string())
    }
    fn close(self) -> Result<(), String> {
        TieredVolume::close(self).map_err(|e| e.to_string())
    }
}

/// Runs the sequence `input` decodes to on a tiered volume. The first byte picks the
/// durability (bit 0), whether the warm-up runs by itself (bit 2), the sequential
/// cutoff (bit 5: two blocks, else off), and with the rest the DRAM share (1 to 8 of
/// the 16 blocks), the eviction policy and the admission filter.
pub fn tier_ops(input: &[u8]) -> Result<Outcome, String> {
    volume_ops::run_engine(input, |layout| {
        let durability = if layout & 1 == 0 {
            Durability::Immediate
        } else {
            Durability::OnFlush
        };
        let block = 4096u64;
        let mut cfg = TierConfig::new(VOLUME_SIZE, (1 + u64::from(layout >> 5) % 8) * block);
        cfg.durability = durability;
        cfg.eviction = EvictionName::ALL[usize::from(layout >> 1) % EvictionName::ALL.len()];
        cfg.admission = [
            None,
            Some(AdmissionName::SecondMiss),
            Some(AdmissionName::SeenBefore),
        ][usize::from(layout >> 3) % 3];
        cfg.sequential_cutoff = if layout & 0x20 != 0 { 2 * block } else { 0 };
        let device = FaultyBackend::new(cfg.home_len() as usize, "fuzzed home");
        TieredVolume::format(&device, &cfg).map_err(|e| format!("format: {e}"))?;
        let describe = format!(
            "{durability:?}, DRAM {} blocks, {}{}, cutoff {}",
            cfg.ram_blocks(),
            cfg.eviction.name(),
            cfg.admission
                .map_or(String::new(), |a| format!("+{}", a.name())),
            cfg.sequential_cutoff
        );
        Ok(Setup {
            durability,
            device,
            open: Box::new(|device: &FaultyBackend, background: bool| {
                let mut vol = TieredVolume::open_on(Arc::new(device.clone()))
                    .map_err(|e| format!("reopen refused: {e}"))?;
                if !background {
                    vol.wait_warm();
                }
                Ok(vol)
            }),
            describe,
        })
    })
}

mod fast_ops;
pub use fast_ops::{fast_tier_ops, FastOutcome};

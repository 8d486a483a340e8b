//! The whole-engine fuzz driver for a volume with a fast tier: two fault-injecting
//! devices (home and fast tier), requests of stamped blocks, reads, flushes,
//! write-backs, injected write and sync failures on either device, power cuts that hit
//! both, and clean closes; every restart is checked block by block against a model of
//! what was acknowledged and attempted, and against the dirty bound.

use std::sync::Arc;

use hscm_policy::cache::{AdmissionName, EvictionName};
use hscm_volume::testing::{check_restarted_block, stamped_block, stamped_version, FaultyBackend};

use crate::{Durability, FastConfig, TierConfig, TieredVolume, WriteMode};

const BLOCK: usize = 4096;
const BLOCKS: u64 = 24;

/// What a run did, for the tests to see that the sequences reach every path.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct FastOutcome {
    pub writes: u64,
    pub power_cuts: u64,
    pub clean_restarts: u64,
    pub refused: u64,
    pub pass_through: u64,
    /// Dirty blocks the fast tier brought back after cuts.
    pub recovered_dirty: u64,
}

struct Rig {
    cfg: TierConfig,
    home: FaultyBackend,
    fast: FaultyBackend,
}

impl Rig {
    fn open(&self) -> Result<TieredVolume, String> {
        TieredVolume::open_with(
            Arc::new(self.home.clone()),
            Some(Arc::new(self.fast.clone())),
        )
        .map_err(|e| format!("reopen refused: {e}"))
    }
}

/// The model: per block, the last acknowledged version and the last attempted one.
struct Model {
    acked: Vec<u64>,
    attempted: Vec<u64>,
    /// Written since the last flush that succeeded (on-flush durability).
    pending: Vec<(usize, u64)>,
    /// A write may have gone to home in place (the fast tier failed, or its policy
    /// could not hold a block): an unacknowledged write may then be torn there.
    in_place: bool,
}

impl Model {
    fn check(&self, vol: &TieredVolume, when: &str) -> Result<(), String> {
        let mut bytes = vec![0u8; BLOCK];
        for b in 0..BLOCKS {
            vol.read_at(b * BLOCK as u64, &mut bytes)
                .map_err(|e| format!("{when}: read of block {b}: {e}"))?;
            let (a, t) = (self.acked[b as usize], self.attempted[b as usize]);
            check_restarted_block(b, &bytes, a, t).map_err(|e| format!("{when}: {e}"))?;
            if !self.in_place && stamped_version(b, &bytes).is_none() && a > 0 {
                return Err(format!(
                    "{when}: block {b} torn, yet nothing was written in place"
                ));
            }
        }
        Ok(())
    }
}

/// The same bytes on a device without injected faults.
fn revived(dev: &FaultyBackend, name: &str) -> FaultyBackend {
    use hscm_durable::device::Backend;
    let image = dev.live_image();
    let fresh = FaultyBackend::new(image.len(), name);
    fresh.write_at(0, &image).expect("an in-memory write");
    fresh.sync().expect("an in-memory sync");
    fresh
}

/// Runs the sequence `input` decodes to. The first two bytes pick the write mode,
/// durability, DRAM and fast-tier sizes, both policies and the fast tier's admission;
/// then each operation takes two bytes.
pub fn fast_tier_ops(input: &[u8]) -> Result<FastOutcome, String> {
    let (&a, &b) = match input {
        [a, b, ..] => (a, b),
        _ => return Ok(FastOutcome::default()),
    };
    let mut cfg = TierConfig::new(
        BLOCKS * BLOCK as u64,
        (1 + u64::from(a >> 2) % 4) * BLOCK as u64,
    );
    cfg.durability = if a & 2 == 0 {
        Durability::Immediate
    } else {
        Durability::OnFlush
    };
    cfg.eviction = EvictionName::ALL[usize::from(b) % EvictionName::ALL.len()];
    cfg.sequential_cutoff = if a & 0x40 != 0 { 2 * BLOCK as u64 } else { 0 };
    let mut fast = FastConfig::new((2 + u64::from(b >> 3) % 10) * BLOCK as u64);
    fast.mode = if a & 1 == 0 {
        WriteMode::WriteBack
    } else {
        WriteMode::WriteThrough
    };
    fast.eviction = EvictionName::ALL[usize::from(a >> 4) % EvictionName::ALL.len()];
    fast.admission = [None, Some(AdmissionName::SecondMiss)][usize::from(b >> 7)];
    fast.id = 0x5eed;
    cfg.fast = Some(fast);
    let home = FaultyBackend::new(cfg.home_len() as usize, "fuzzed home");
    let fast_dev = FaultyBackend::new(fast.device_len(cfg.block) as usize, "fuzzed fast tier");
    TieredVolume::format_with(&home, Some(&fast_dev), &cfg, "fast")
        .map_err(|e| format!("format: {e}"))?;
    let mut rig = Rig {
        cfg,
        home,
        fast: fast_dev,
    };
    let mut model = Model {
        acked: vec![0; BLOCKS as usize],
        attempted: vec![0; BLOCKS as usize],
        pending: Vec::new(),
        in_place: fast.mode == WriteMode::WriteThrough || fast.eviction == EvictionName::S3fifo,
    };
    let mut out = FastOutcome::default();
    let mut vol = Some(rig.open()?);
    let mut in_flight = 0;
    for (i, op) in input[2..].chunks(2).enumerate() {
        let (x, y) = (op[0], op.get(1).copied().unwrap_or(0));
        let v = vol.as_ref().expect("open");
        let block = u64::from(y) % BLOCKS;
        match x % 16 {
            0..=5 => {
                let bi = block as usize;
                let version = model.attempted[bi] + 1;
                model.attempted[bi] = version;
                let fua = x & 0x80 != 0;
                let data = stamped_block(block, version, BLOCK);
                out.writes += 1;
                match v.write_at(block * BLOCK as u64, &data, hscm_block::WriteFlags { fua }) {
                    Ok(()) => {
                        if rig.cfg.durability == Durability::Immediate || fua {
                            model.acked[bi] = version;
                            for (pb, pv) in model.pending.drain(..) {
                                model.acked[pb] = model.acked[pb].max(pv);
                            }
                        } else {
                            model.pending.push((bi, version));
                        }
                    }
                    Err(_) => {
                        in_flight = 1;
                        out.refused += 1;
                        if v.failure().is_none() && v.fast_failure().is_none() {
                            return Err(format!("op {i}: a failed write neither refused writes nor dropped the fast tier"));
                        }
                    }
                }
            }
            6..=8 => {
                let mut buf = vec![0u8; BLOCK];
                let _ = v.read_at(block * BLOCK as u64, &mut buf);
            }
            9 => {
                if v.flush().is_ok() {
                    for (pb, pv) in model.pending.drain(..) {
                        model.acked[pb] = model.acked[pb].max(pv);
                    }
                }
            }
            10 => {
                let _ = v.write_back_all();
            }
            11 => rig.fast.fail_write_after(u64::from(y % 8), 5),
            12 => rig.fast.fail_sync_after(u64::from(y % 8)),
            13 => rig.home.fail_sync_after(u64::from(y % 8)),
            14 => {
                // A power cut over both devices.
                if v.fast_failure().is_some() {
                    model.in_place = true;
                    out.pass_through += 1;
                }
                let dirty_before = v.dirty_blocks();
                let (home, fast) = (
                    rig.home.power_cut(u64::from(y)),
                    rig.fast.power_cut(u64::from(x)),
                );
                drop(vol.take());
                rig.home = home;
                rig.fast = fast;
                let reopened = rig.open()?;
                let recovered = reopened.recovery().map_or(0, |r| r.dirty);
                if recovered > dirty_before + in_flight {
                    return Err(format!("op {i}: {recovered} blocks came back dirty; {dirty_before} were dirty and {in_flight} in flight"));
                }
                out.recovered_dirty += recovered;
                model.check(&reopened, &format!("after the power cut at op {i}"))?;
                // What survived is now what is acknowledged.
                let mut bytes = vec![0u8; BLOCK];
                for b in 0..BLOCKS as usize {
                    reopened
                        .read_at(b as u64 * BLOCK as u64, &mut bytes)
                        .map_err(|e| e.to_string())?;
                    let now = stamped_version(b as u64, &bytes).unwrap_or(0);
                    model.acked[b] = now;
                    model.attempted[b] = now;
                }
                model.pending.clear();
                in_flight = 0;
                out.power_cuts += 1;
                vol = Some(reopened);
            }
            _ => {
                // A clean close and reopen, unless writes are refused.
                if v.fast_failure().is_some() {
                    model.in_place = true;
                    out.pass_through += 1;
                }
                let closed = vol.take().expect("open").close();
                if closed.is_ok() {
                    for (pb, pv) in model.pending.drain(..) {
                        model.acked[pb] = model.acked[pb].max(pv);
                    }
                    out.clean_restarts += 1;
                }
                // Closed or not, the devices kept every write (no power was cut); any
                // injected fault is cleared (the device reset or replaced).
                rig.home = revived(&rig.home, "fuzzed home");
                rig.fast = revived(&rig.fast, "fuzzed fast tier");
                let reopened = rig.open()?;
                model.check(&reopened, &format!("after the restart at op {i}"))?;
                vol = Some(reopened);
            }
        }
    }
    Ok(out)
}

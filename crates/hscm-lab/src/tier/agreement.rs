//! The replay of one trace through a real tiered volume beside `hscm sim cache`'s
//! prediction, for every online policy.

use anyhow::{Context, Result};
use hscm_tier::TieredVolume;
use serde::Serialize;

use super::replay;

/// One policy's replay beside the simulator's prediction.
#[derive(Debug, Clone, Serialize)]
pub struct Agreement {
    pub policy: String,
    pub requests: u64,
    pub predicted_hits: u64,
    pub replayed_hits: u64,
    pub predicted_misses: u64,
    pub replayed_misses: u64,
    /// Misses not admitted because of the sequential cutoff.
    pub predicted_sequential_bypassed: u64,
    pub replayed_sequential_bypassed: u64,
    pub equal: bool,
}

/// Writes an MSR Cambridge block trace: `requests` requests of 1 to 8 blocks of 4 KiB,
/// skewed (cubed uniform) over `blocks` blocks, a third writes, and a sequential scan
/// over a tenth of the requests in the middle.
pub fn write_msr_trace(
    path: &std::path::Path,
    requests: u64,
    blocks: u64,
    seed: u64,
) -> Result<()> {
    use rand::{Rng, SeedableRng};
    use std::io::Write as _;
    let mut f = std::io::BufWriter::new(
        std::fs::File::create(path).with_context(|| format!("cannot create {}", path.display()))?,
    );
    let mut rng = rand::rngs::SmallRng::seed_from_u64(seed);
    let scan = requests * 4 / 10..requests / 2;
    for i in 0..requests {
        let block = if scan.contains(&i) {
            ((i - scan.start) * 2) % blocks
        } else {
            (rng.gen::<f64>().powi(3) * blocks as f64) as u64
        };
        let n = if rng.gen_bool(0.8) {
            1
        } else {
            rng.gen_range(2..=8)
        };
        let kind = if rng.gen_bool(0.33) { "Write" } else { "Read" };
        writeln!(f, "{i},host,0,{kind},{},{},0", block * 4096, n * 4096)?;
    }
    f.flush()?;
    Ok(())
}

/// Replays one MSR trace through a real tiered volume for every online policy behind
/// every admission filter (DRAM `ram_blocks` blocks of 4 KiB, the default sequential
/// cutoff on both sides, on-flush: durability does not change what is cached) and
/// simulates it with `hscm sim cache`'s code and defaults. `make` creates and opens each volume (a file, or in tests an
/// in-memory device).
pub fn replay_agreement(
    trace: &std::path::Path,
    ram_blocks: u64,
    volume_blocks: u64,
    make: &mut dyn FnMut(&hscm_tier::TierConfig) -> Result<TieredVolume>,
) -> Result<Vec<Agreement>> {
    use hscm_policy::cache::AdmissionName;
    use hscm_tier::{Durability, TierConfig, DEFAULT_SEQUENTIAL_CUTOFF};
    use hscm_trace::{RequestFormat, RequestReader};
    use hscm_vmsim::cache::{run, CacheRun, PolicyName, StorageProfile};
    const BLOCK: u64 = 4096;
    let reader = || RequestReader::open(trace, Some(RequestFormat::Msr), BLOCK as u32);
    let profiles = [StorageProfile::from_name("scm").expect("a known profile")];
    let mut rows = Vec::new();
    for policy in PolicyName::ALL {
        let Some(spec) = policy.spec(None) else {
            continue;
        };
        let admissions: &[Option<AdmissionName>] = if spec.admission.is_some() {
            &[None]
        } else {
            &[
                None,
                Some(AdmissionName::SecondMiss),
                Some(AdmissionName::SeenBefore),
            ]
        };
        for &admission in admissions {
            let predicted = run(
                &CacheRun {
                    trace: "agreement",
                    policy,
                    capacity: ram_blocks * BLOCK,
                    objects: false,
                    ghost_entries: None,
                    admission,
                    profiles: &profiles,
                    sequential_cutoff: DEFAULT_SEQUENTIAL_CUTOFF,
                },
                reader()?,
                &mut |_| {},
            )?;
            let mut cfg = TierConfig::new(volume_blocks * BLOCK, ram_blocks * BLOCK);
            cfg.eviction = spec.eviction;
            cfg.admission = admission.or(spec.admission);
            cfg.durability = Durability::OnFlush;
            let vol = make(&cfg)?;
            let replayed = replay(&vol, reader()?, &mut |_| {})?;
            drop(vol);
            let dram = &replayed.tiers[0];
            let name = match (admission, spec.admission) {
                (Some(a), _) => format!("{}+{}", policy.name(), a.name()),
                _ => policy.name().to_string(),
            };
            let predicted_misses = predicted.requests - predicted.hits;
            rows.push(Agreement {
                policy: name,
                requests: replayed.requests,
                predicted_hits: predicted.hits,
                replayed_hits: dram.hits,
                predicted_misses,
                replayed_misses: dram.misses,
                predicted_sequential_bypassed: predicted.bypassed_sequential,
                replayed_sequential_bypassed: dram.bypassed_sequential,
                equal: predicted.hits == dram.hits
                    && predicted_misses == dram.misses
                    && predicted.requests == replayed.requests
                    && predicted.bypassed_sequential == dram.bypassed_sequential,
            });
        }
    }
    Ok(rows)
}

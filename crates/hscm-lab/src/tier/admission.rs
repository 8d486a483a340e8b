//! Park & Bahn's admission-control claim on a real volume.

use anyhow::Result;
use hscm_tier::TieredVolume;
use serde::Serialize;

/// Park & Bahn's claim on a real volume: with storage nearly as fast as DRAM, caching
/// every missed block gains little, and admitting only blocks asked for again gains
/// more. One row per home device and admission rule.
#[derive(Debug, Clone, Serialize)]
pub struct AdmissionRow {
    /// `scm` (home in tmpfs: memory behind a system call, standing for SCM; emulated) or
    /// `disk` (home on this machine's disk, O_DIRECT).
    pub home: String,
    /// `none` (a one-block DRAM tier: every request goes home), `lru`, `lru+second-miss`
    /// (AC-LRU) or `lru+seen-before`.
    pub policy: String,
    pub ops_per_s: f64,
    pub dram_hit_ratio: f64,
    /// ops/s over the `none` row of the same home, minus one.
    pub gain: f64,
}

/// Reads of 4 KiB blocks, one thread: 60% drawn skewed from a hot region of 8,192
/// blocks (DRAM holds 2,048), 40% one-time blocks never asked for again, the mix of
/// Park & Bahn's traces that makes admission pay. Each configuration first serves
/// `requests / 2` such reads to warm up (its one-time blocks apart from the measured
/// ones), then `requests` timed ones. `homes` names each home and its directory.
pub fn bench_admission(
    homes: &[(&str, &std::path::Path)],
    requests: usize,
) -> Result<Vec<AdmissionRow>> {
    use hscm_policy::cache::{AdmissionName, EvictionName};
    use hscm_tier::{Durability, TierConfig};
    use rand::{Rng, SeedableRng};
    const BLOCK: u64 = 4096;
    let hot: u64 = 8192;
    let warm = requests / 2;
    let blocks = hot + (warm + requests) as u64;
    let mut once = hot;
    let mut stream = |n: usize, seed: u64| -> Vec<u64> {
        let mut rng = rand::rngs::SmallRng::seed_from_u64(seed);
        (0..n)
            .map(|_| {
                if rng.gen_bool(0.6) {
                    (rng.gen::<f64>().powi(3) * hot as f64) as u64
                } else {
                    once += 1;
                    once - 1
                }
            })
            .collect()
    };
    let warmup = stream(warm, 4);
    let draws = stream(requests, 5);
    let mut rows = Vec::new();
    let configs = [
        ("none", 1u64, None),
        ("lru", 2048, None),
        ("lru+second-miss", 2048, Some(AdmissionName::SecondMiss)),
        ("lru+seen-before", 2048, Some(AdmissionName::SeenBefore)),
    ];
    let config = |ram: u64, admission| {
        let mut cfg = TierConfig::new(blocks * BLOCK, ram * BLOCK);
        cfg.eviction = EvictionName::Lru;
        cfg.admission = admission;
        cfg.sequential_cutoff = 0;
        cfg.durability = Durability::OnFlush;
        cfg
    };
    for &(home, dir) in homes {
        // One home file with written data (a hole would read as zeroes without I/O),
        // re-formatted for each configuration: formatting rewrites only the header,
        // counters and hot list.
        let path = dir.join(format!("admission-{home}.tier"));
        TieredVolume::create(&path, &config(2048, None), true)?;
        {
            use std::os::unix::fs::FileExt;
            let f = std::fs::OpenOptions::new().write(true).open(&path)?;
            let chunk: Vec<u8> = (0..1 << 20).map(|i| (i % 253) as u8 | 1).collect();
            let mut off = 0;
            while off < blocks * BLOCK {
                let n = chunk.len().min((blocks * BLOCK - off) as usize);
                f.write_all_at(&chunk[..n], hscm_tier::HEADER_LEN + off)?;
                off += n as u64;
            }
            f.sync_all()?;
        }
        let mut none_ops = f64::NAN;
        for (policy, ram, admission) in configs {
            let cfg = config(ram, admission);
            TieredVolume::format(&hscm_volume::FileBackend::open(&path, true)?, &cfg)?;
            let vol = TieredVolume::open(&path)?;
            let mut buf = vec![0u8; BLOCK as usize];
            for &b in &warmup {
                vol.read_at(b * BLOCK, &mut buf)?;
            }
            let before = vol.stats().tiers[0].clone();
            // Every draw once, on the one driver.
            let (measured, _) = crate::closed_loop(
                vec![(draws.iter(), buf)],
                1,
                &crate::Phase::until_finished(std::time::Duration::ZERO),
                |(next, buf), _| match next.next() {
                    Some(&b) => {
                        vol.read_at(b * BLOCK, buf)?;
                        Ok::<_, anyhow::Error>(crate::Step::Done(0))
                    }
                    None => Ok(crate::Step::Finished),
                },
            )?;
            let ops = measured.ops_per_s();
            let dram_hit_ratio = vol.stats().tiers[0].since(&before).hit_ratio();
            drop(vol);
            if policy == "none" {
                none_ops = ops;
            }
            rows.push(AdmissionRow {
                home: home.into(),
                policy: policy.into(),
                ops_per_s: ops,
                dram_hit_ratio,
                gain: ops / none_ops - 1.0,
            });
        }
        std::fs::remove_file(&path).ok();
    }
    Ok(rows)
}

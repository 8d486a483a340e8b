//! Seed 001's Fig. 11 on the real tiered volume: a cache tier in front of a hard disk,
//! as DRAM with a durable SSD tier behind it (the paper's DHRD + HDD) against the SSD
//! alone (an SSD+HDD hybrid drive), at 70% and 80% of the requests served by the
//! cache tier. Both devices are emulated (`emulated`): the disk and the SSD are files
//! in tmpfs behind service-time models, so the figures are the models' figures.

use std::sync::Arc;

use anyhow::Result;
use hscm_policy::cache::{AdmissionName, EvictionName};
use hscm_tier::{Durability, FastConfig, TierConfig, TieredVolume, WriteMode};
use hscm_volume::Backend;
use rand::{Rng, SeedableRng};
use serde::Serialize;

use super::emulated::{DeviceModel, EmulatedDevice};

const BLOCK: u64 = 4096;

/// One configuration at one hit rate and miss pattern.
#[derive(Debug, Clone, Serialize)]
pub struct Fig11Row {
    /// `ssd+hdd` (the SSD tier alone, DRAM one block) or `dram+ssd+hdd` (DRAM holding
    /// the hot set, the SSD tier behind it).
    pub config: String,
    /// Share of requests aimed at the hot set (the paper's 70% and 80%).
    pub hit_target: f64,
    /// `random` (each miss anywhere on the disk) or `sequential` (misses read on through
    /// one region, as a file read does).
    pub misses: String,
    /// Of the requests to the hot set, this share are writes (each durable on return:
    /// on the SSD tier, written back to the disk later); misses are reads.
    pub hot_write_share: f64,
    pub requests: u64,
    pub ops_per_s: f64,
    /// Requests served without reading home, measured.
    pub hit_ratio: f64,
    /// ops/s over the `ssd+hdd` row of the same hit target and miss pattern.
    pub speedup: f64,
    /// The most any cache tier could gain here under the models, at the measured hit
    /// ratio: the `ssd+hdd` time per request over its time with every hit free except
    /// the durable SSD write both configurations owe (Amdahl's bound; the misses cost
    /// the same).
    pub bound: f64,
}

/// The experiment's settings and rows.
#[derive(Debug, Clone, Serialize)]
pub struct Fig11 {
    pub hdd: DeviceModel,
    pub ssd: DeviceModel,
    pub cache_bytes: u64,
    pub cold_bytes: u64,
    pub rows: Vec<Fig11Row>,
}

/// One run's requests in flight on the driver: how many are left, the next block of
/// a sequential miss stream, the stream's random numbers and the read buffer.
struct Requests {
    left: u64,
    cursor: u64,
    rng: rand::rngs::SmallRng,
    buf: Vec<u8>,
}

/// Runs both configurations at 70% and 80% hot requests, with random and with
/// sequential misses, with hot requests all reads and with a fifth of them writes: `requests` timed 4 KiB requests each (`requests / 4` when
/// misses are random: each costs a disk seek), in scratch files under `dir` (tmpfs
/// is best: the models, not the medium, should set the times).
pub fn bench_fig11(dir: &std::path::Path, requests: u64) -> Result<Fig11> {
    let cache_bytes: u64 = 16 << 20;
    let cold_bytes: u64 = 512 << 20;
    let hot = cache_bytes / BLOCK;
    let mut rows = Vec::new();
    for (misses, hot_write_share) in [
        ("random", 0.0),
        ("random", 0.2),
        ("sequential", 0.0),
        ("sequential", 0.2),
    ] {
        for hit_target in [0.7, 0.8] {
            let n = if misses == "random" {
                (requests / 4).max(100)
            } else {
                requests
            };
            let mut base = f64::NAN;
            for config in ["ssd+hdd", "dram+ssd+hdd"] {
                let ram = if config == "ssd+hdd" {
                    BLOCK
                } else {
                    cache_bytes
                };
                let mut cfg = TierConfig::new(cache_bytes + cold_bytes, ram);
                cfg.eviction = EvictionName::Lru;
                // One-time misses stay out of both tiers, so the hot set stays in.
                cfg.admission = Some(AdmissionName::SecondMiss);
                cfg.sequential_cutoff = 0;
                cfg.durability = Durability::Immediate;
                let mut fast = FastConfig::new(cache_bytes);
                fast.mode = WriteMode::WriteBack;
                fast.admission = Some(AdmissionName::SecondMiss);
                cfg.fast = Some(fast);
                let home_file = dir.join("fig11.home");
                let fast_file = dir.join("fig11.fast");
                let home: Arc<dyn Backend> = Arc::new(hscm_volume::FileBackend::create(
                    &home_file,
                    cfg.home_len(),
                    true,
                )?);
                let ssd: Arc<dyn Backend> = Arc::new(hscm_volume::FileBackend::create(
                    &fast_file,
                    fast.device_len(cfg.block),
                    true,
                )?);
                TieredVolume::format_with(home.as_ref(), Some(ssd.as_ref()), &cfg, "fig11.fast")?;
                let home_dev = Arc::new(EmulatedDevice::new(home, DeviceModel::HDD));
                let ssd_dev = Arc::new(EmulatedDevice::new(ssd, DeviceModel::SSD));
                let vol = TieredVolume::open_with(home_dev.clone(), Some(ssd_dev))?;
                // The hot set, read twice (admitted on its second request), from the
                // disk in order (a warm-up, not timed).
                let mut buf = vec![0u8; BLOCK as usize];
                for _ in 0..2 {
                    for b in 0..hot {
                        vol.read_at(b * BLOCK, &mut buf)?;
                    }
                }
                let cold_blocks = cold_bytes / BLOCK;
                let data = vec![0x6bu8; BLOCK as usize];
                let before = vol.stats();
                // `n` requests on the one driver: a hit to the hot set with
                // `hit_target`'s probability (a write with `hot_write_share`'s), else a
                // read of a cold block, random or the next in order.
                let start = Requests {
                    left: n,
                    cursor: 0,
                    rng: rand::rngs::SmallRng::seed_from_u64(111),
                    buf,
                };
                let (measured, _) = crate::closed_loop(
                    vec![start],
                    1,
                    &crate::Phase::until_finished(std::time::Duration::ZERO),
                    |r: &mut Requests, _| {
                        if r.left == 0 {
                            return Ok::<_, anyhow::Error>(crate::Step::Finished);
                        }
                        r.left -= 1;
                        if r.rng.gen_bool(hit_target) {
                            let b = r.rng.gen_range(0..hot);
                            if r.rng.gen_bool(hot_write_share) {
                                vol.write_at(b * BLOCK, &data, hscm_block::WriteFlags::NONE)?;
                            } else {
                                vol.read_at(b * BLOCK, &mut r.buf)?;
                            }
                        } else {
                            let c = if misses == "random" {
                                r.rng.gen_range(0..cold_blocks)
                            } else {
                                r.cursor += 1;
                                r.cursor - 1
                            };
                            vol.read_at((hot + c) * BLOCK, &mut r.buf)?;
                        }
                        Ok(crate::Step::Done(0))
                    },
                )?;
                let home_reads = vol.stats().home_reads - before.home_reads;
                drop(vol);
                std::fs::remove_file(&home_file).ok();
                std::fs::remove_file(&fast_file).ok();
                let ops_per_s = measured.ops_per_s();
                let hit_ratio = 1.0 - home_reads as f64 / n as f64;
                if config == "ssd+hdd" {
                    base = ops_per_s;
                }
                rows.push(Fig11Row {
                    config: config.into(),
                    hit_target,
                    misses: misses.into(),
                    hot_write_share,
                    requests: n,
                    ops_per_s,
                    hit_ratio,
                    speedup: ops_per_s / base,
                    bound: amdahl_bound(hit_ratio, hot_write_share, misses == "random"),
                });
            }
        }
    }
    Ok(Fig11 {
        hdd: DeviceModel::HDD,
        ssd: DeviceModel::SSD,
        cache_bytes,
        cold_bytes,
        rows,
    })
}

/// The `ssd+hdd` configuration's modelled time per request over the same with every
/// hit free except the durable SSD write (write plus flush) a hot write costs in any
/// configuration: no cache tier can do better than this.
fn amdahl_bound(hit: f64, write_share: f64, random: bool) -> f64 {
    let (ssd, hdd) = (DeviceModel::SSD, DeviceModel::HDD);
    let b = BLOCK as usize;
    // The block, its record's page, one flush.
    let durable_write = 2.0 * ssd.request_us(true, b, false) + ssd.sync_us;
    let ssd_hit =
        (1.0 - write_share) * ssd.request_us(false, b, false) + write_share * durable_write;
    let floor_hit = write_share * durable_write;
    let miss = hdd.request_us(false, b, !random);
    (hit * ssd_hit + (1.0 - hit) * miss) / (hit * floor_hit + (1.0 - hit) * miss)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_bound_is_near_one_with_random_disk_misses_and_large_with_sequential_ones() {
        assert!(amdahl_bound(0.8, 0.2, true) < 1.05);
        assert!(amdahl_bound(0.8, 0.2, false) > 1.5);
        assert!(amdahl_bound(0.8, 0.2, false) > amdahl_bound(0.7, 0.2, false));
    }
}

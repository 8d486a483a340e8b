//! The tiered volume under concurrency: how DRAM hits scale with threads (beside the
//! flat volume, which has no shared state on its read path and so is the machine's
//! bound), and what requests keep of their rate while the fast tier writes 256 MiB
//! back to an emulated disk.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Instant;

use anyhow::Result;
use hscm_tier::{Durability, FastConfig, TierConfig, TieredVolume, WriteMode};
use hscm_volume::Backend;
use rand::{Rng, SeedableRng};
use serde::Serialize;

use super::emulated::{DeviceModel, EmulatedDevice};

const BLOCK: u64 = 4096;

/// 4 KiB random reads, all DRAM hits, by one thread and by `threads` at once; the
/// same reads of a flat volume holding the working set.
#[derive(Debug, Clone, Serialize)]
pub struct HitScaling {
    pub threads: usize,
    /// CPUs this process may run on: no read path scales past them.
    pub cpus: usize,
    pub working_set_bytes: u64,
    pub hit_one_thread_per_s: f64,
    pub hit_threads_per_s: f64,
    pub hit_scaling: f64,
    pub flat_one_thread_per_s: f64,
    pub flat_threads_per_s: f64,
    /// The flat volume's scaling: the bound on this machine.
    pub flat_scaling: f64,
    /// `hit_scaling` over the smaller of 3 (the goal) and `flat_scaling`.
    pub hit_scaling_vs_bound: f64,
    /// Hits against flat reads, on one thread and on `threads`. With CPUs to spare, a
    /// background thread does the policy's share of a hit's work; with every CPU
    /// busy hitting, the hitting threads do it themselves.
    pub hit_vs_flat_one_thread: f64,
    pub hit_vs_flat_threads: f64,
    pub rounds: usize,
}

/// Reads `per_thread` random blocks of `[0, blocks)` on each of `threads` threads
/// through `read`; returns reads per second, all threads together.
fn read_rate(
    threads: usize,
    per_thread: usize,
    blocks: u64,
    read: &(dyn Fn(u64, &mut [u8]) -> Result<()> + Sync),
) -> Result<f64> {
    let start = Instant::now();
    std::thread::scope(|s| {
        let workers: Vec<_> = (0..threads)
            .map(|t| {
                s.spawn(move || -> Result<()> {
                    let mut rng = rand::rngs::SmallRng::seed_from_u64(t as u64 + 7);
                    let mut buf = vec![0u8; BLOCK as usize];
                    for _ in 0..per_thread {
                        read(rng.gen_range(0..blocks) * BLOCK, &mut buf)?;
                    }
                    Ok(())
                })
            })
            .collect();
        workers
            .into_iter()
            .try_for_each(|w| w.join().expect("a reader panicked"))
    })?;
    Ok((threads * per_thread) as f64 / start.elapsed().as_secs_f64())
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// Hit scaling over a working set of `working` bytes with `threads` threads, from
/// `per_thread` reads per thread and `rounds` alternating rounds.
pub fn hit_scaling(
    dir: &std::path::Path,
    working: u64,
    threads: usize,
    per_thread: usize,
    rounds: usize,
) -> Result<HitScaling> {
    let flat_path = dir.join("scaling-flat.hscm");
    hscm_volume::Volume::create(&flat_path, working, &hscm_volume::CreateOptions::default())?;
    let flat = hscm_volume::Volume::open(&flat_path, &hscm_volume::OpenOptions::default())?;
    crate::volume::watch_warmup(&flat, false)?;
    let tier_path = dir.join("scaling.tier");
    let mut cfg = TierConfig::new(4 * working, working);
    cfg.durability = Durability::OnFlush;
    cfg.sequential_cutoff = 0;
    TieredVolume::create(&tier_path, &cfg, true)?;
    let tiered = TieredVolume::open(&tier_path)?;
    let blocks = working / BLOCK;
    let mut buf = vec![0u8; BLOCK as usize];
    for b in 0..blocks {
        tiered.read_at(b * BLOCK, &mut buf)?;
    }
    let misses_before = tiered.stats().tiers[0].misses;
    let mut rates: [Vec<f64>; 4] = Default::default();
    let hit = |o: u64, b: &mut [u8]| -> Result<()> { Ok(tiered.read_at(o, b)?) };
    let plain = |o: u64, b: &mut [u8]| -> Result<()> { Ok(flat.read_at(o, b)?) };
    for _ in 0..rounds {
        rates[0].push(read_rate(1, per_thread, blocks, &hit)?);
        rates[1].push(read_rate(threads, per_thread, blocks, &hit)?);
        rates[2].push(read_rate(1, per_thread, blocks, &plain)?);
        rates[3].push(read_rate(threads, per_thread, blocks, &plain)?);
    }
    anyhow::ensure!(
        tiered.stats().tiers[0].misses == misses_before,
        "the scaling rounds missed DRAM"
    );
    drop(tiered);
    flat.close()?;
    std::fs::remove_file(&tier_path).ok();
    std::fs::remove_file(&flat_path).ok();
    let [h1, hn, f1, fnn] = rates.map(median);
    let (hit_scaling, flat_scaling) = (hn / h1, fnn / f1);
    Ok(HitScaling {
        threads,
        cpus: std::thread::available_parallelism().map_or(1, |n| n.get()),
        working_set_bytes: working,
        hit_one_thread_per_s: h1,
        hit_threads_per_s: hn,
        hit_scaling,
        flat_one_thread_per_s: f1,
        flat_threads_per_s: fnn,
        flat_scaling,
        hit_scaling_vs_bound: hit_scaling / flat_scaling.min(3.0),
        hit_vs_flat_one_thread: h1 / f1,
        hit_vs_flat_threads: hn / fnn,
        rounds,
    })
}

/// Requests while the write-back copies `writeback_bytes` of dirty blocks from the
/// fast tier (a file in tmpfs, standing for SCM) to home (an emulated 7200 rpm disk:
/// a modelled device, not a measured one): their rate before it (idle) and during.
#[derive(Debug, Clone, Serialize)]
pub struct WriteBackInterference {
    pub writeback_bytes: u64,
    pub home: String,
    /// How long the pass took, and the blocks it made clean.
    pub writeback_s: f64,
    pub written_back_blocks: u64,
    /// 4 KiB reads of blocks in DRAM (one thread).
    pub hit_idle_per_s: f64,
    pub hit_during_per_s: f64,
    pub hit_keep: f64,
    /// 4 KiB writes to other blocks (one thread; they take the volume's lock and go to
    /// the fast tier).
    pub write_idle_per_s: f64,
    pub write_during_per_s: f64,
    pub write_keep: f64,
}

/// Runs `op` on this thread until `stop`, or for `seconds` when `stop` is None;
/// returns operations per second.
fn rate_until(
    stop: Option<&AtomicBool>,
    seconds: f64,
    op: &mut dyn FnMut(u64) -> Result<()>,
) -> Result<f64> {
    let start = Instant::now();
    let mut n = 0u64;
    loop {
        op(n)?;
        n += 1;
        let done = match stop {
            Some(s) => s.load(Ordering::Relaxed),
            None => start.elapsed().as_secs_f64() >= seconds,
        };
        if done {
            break;
        }
    }
    Ok(n as f64 / start.elapsed().as_secs_f64())
}

/// Measures [`WriteBackInterference`] with `writeback_bytes` dirty, in scratch files
/// under `dir` (tmpfs where there is one).
pub fn writeback_interference(
    dir: &std::path::Path,
    writeback_bytes: u64,
) -> Result<WriteBackInterference> {
    let hot_blocks: u64 = 2048;
    let mut cfg = TierConfig::new(writeback_bytes + hot_blocks * BLOCK, 2 * hot_blocks * BLOCK);
    cfg.durability = Durability::OnFlush;
    let mut fast = FastConfig::new(2 * writeback_bytes + (64 << 20));
    fast.mode = WriteMode::WriteBack;
    cfg.fast = Some(fast);
    let home_file = dir.join("interference.home");
    let fast_file = dir.join("interference.fast");
    let home: Arc<dyn Backend> = Arc::new(hscm_volume::FileBackend::create(
        &home_file,
        cfg.home_len(),
        true,
    )?);
    let fast_dev: Arc<dyn Backend> = Arc::new(hscm_volume::FileBackend::create(
        &fast_file,
        fast.device_len(cfg.block),
        true,
    )?);
    TieredVolume::format_with(
        home.as_ref(),
        Some(fast_dev.as_ref()),
        &cfg,
        "interference.fast",
    )?;
    let home_dev = Arc::new(EmulatedDevice::new(home, DeviceModel::HDD));
    let home_name = format!("an emulated {}", DeviceModel::HDD.name);
    let vol = TieredVolume::open_with(home_dev, Some(fast_dev))?;
    // The hot set, past the region written back, read into DRAM at random (so the
    // sequential cutoff leaves it alone).
    let hot_base = writeback_bytes / BLOCK;
    let mut rng = rand::rngs::SmallRng::seed_from_u64(5);
    let mut buf = vec![0u8; BLOCK as usize];
    for _ in 0..4 * hot_blocks {
        vol.read_at((hot_base + rng.gen_range(0..hot_blocks)) * BLOCK, &mut buf)?;
    }
    let hot: Vec<u64> = vol
        .hot_list()
        .into_iter()
        .filter(|&b| b >= hot_base)
        .collect();
    anyhow::ensure!(!hot.is_empty(), "the hot set did not stay in DRAM");
    let block_data = vec![0x5au8; BLOCK as usize];
    // The n-th request's pick among `len` blocks, spread by Knuth's multiplicative hash.
    let pick = |n: u64, len: u64| n.wrapping_mul(2_654_435_761) % len;
    let read_hot = |n: u64, buf: &mut [u8]| -> Result<()> {
        let b = hot[pick(n, hot.len() as u64) as usize];
        Ok(vol.read_at(b * BLOCK, buf)?)
    };
    let hit_idle = rate_until(None, 0.5, &mut |n| read_hot(n, &mut buf))?;
    let write_hot = |n: u64| -> Result<()> {
        let b = hot_base + pick(n, hot_blocks);
        Ok(vol.write_at(b * BLOCK, &block_data, hscm_block::WriteFlags::NONE)?)
    };
    let write_idle = rate_until(None, 0.5, &mut { write_hot })?;
    let mut passes = Vec::new();
    let mut during = Vec::new();
    for measure_writes in [false, true] {
        // The dirty data: sequential 1 MiB writes (past the cutoff, so they bypass
        // DRAM), durable on the fast tier.
        let chunk = vec![0xa5u8; 1 << 20];
        let mut at = 0;
        while at < writeback_bytes {
            vol.write_at(at, &chunk, hscm_block::WriteFlags::NONE)?;
            at += chunk.len() as u64;
        }
        vol.flush()?;
        let stop = AtomicBool::new(false);
        let (pass, rate) = std::thread::scope(|s| -> Result<_> {
            let pass = s.spawn(|| {
                let t = Instant::now();
                let blocks = vol.write_back_all();
                stop.store(true, Ordering::Relaxed);
                blocks.map(|b| (b, t.elapsed().as_secs_f64()))
            });
            let rate = if measure_writes {
                rate_until(Some(&stop), 0.0, &mut { write_hot })
            } else {
                let mut buf = vec![0u8; BLOCK as usize];
                rate_until(Some(&stop), 0.0, &mut |n| read_hot(n, &mut buf))
            };
            let pass = pass.join().expect("the write-back panicked")?;
            Ok((pass, rate?))
        })?;
        passes.push(pass);
        during.push(rate);
    }
    drop(vol);
    std::fs::remove_file(&home_file).ok();
    std::fs::remove_file(&fast_file).ok();
    let (blocks, seconds) = passes[0];
    Ok(WriteBackInterference {
        writeback_bytes,
        home: home_name,
        writeback_s: seconds,
        written_back_blocks: blocks,
        hit_idle_per_s: hit_idle,
        hit_during_per_s: during[0],
        hit_keep: during[0] / hit_idle,
        write_idle_per_s: write_idle,
        write_during_per_s: during[1],
        write_keep: during[1] / write_idle,
    })
}

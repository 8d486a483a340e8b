//! The tiered volume's benchmarks, and replaying a block trace through it for
//! comparison with what `hscm sim cache` predicts (the replay itself lives in
//! hscm-sweep, which Python reaches).

mod admission;
mod agreement;
mod concurrency;
mod emulated;
mod fig11;
mod print;
mod share;

pub use hscm_sweep::replay::{replay, Replay};
pub use print::print;

use anyhow::Result;
use hscm_tier::TieredVolume;
use serde::Serialize;

pub use admission::{bench_admission, AdmissionRow};
pub use agreement::{replay_agreement, write_msr_trace, Agreement};
pub use concurrency::{HitScaling, WriteBackInterference};
pub use emulated::{DeviceModel, EmulatedDevice};
pub use fig11::{bench_fig11, Fig11Row};
use share::share_rows;
pub use share::ShareRow;

/// `hscm bench tier`: what the DRAM tier costs and keeps.
#[derive(Debug, Clone, Serialize)]
pub struct TierBench {
    /// 4 KiB reads at random block-aligned offsets, one thread, every one a DRAM hit
    /// of the tiered volume, against the same reads of a flat volume that fits in RAM
    /// (median of `rounds` alternating rounds).
    pub hit_read_ns: f64,
    pub flat_read_ns: f64,
    pub hit_over_flat: f64,
    pub rounds: usize,
    /// The same at each working set measured (the fields above are the largest).
    pub hit_costs: Vec<HitCost>,
    /// DRAM hits on one thread and on four, beside the flat volume's reads.
    pub hit_scaling: HitScaling,
    /// Requests while the fast tier writes dirty blocks back to an emulated disk.
    pub writeback: WriteBackInterference,
    /// A sequential scan of `scan_bytes` through a volume whose hot set fills DRAM:
    /// the share of the hot set still cached after it, with the default cutoff and
    /// with the cutoff off.
    pub scan_bytes: u64,
    pub hot_kept_with_cutoff: f64,
    pub hot_kept_without_cutoff: f64,
    /// The scan reads a freshly created file, whose unwritten extents the kernel
    /// answers with zeroes: this is the volume's bypass path, not the disk.
    pub scan_mb_per_s: f64,
    /// A clean restart: the DRAM hit ratio of 10,000 skewed requests before shutdown
    /// (steady state), of the first 10,000 after reopening (served while it warms),
    /// and of the same requests on a cold volume.
    pub steady_hit_ratio: f64,
    pub restart_hit_ratio: f64,
    pub cold_hit_ratio: f64,
    pub restart_over_steady: f64,
    /// Blocks put back at open, the time open took (reading the hot list and
    /// rebuilding the policy), and that time per million blocks; then the time from
    /// reopening until the background loader had refilled them all from home (while
    /// the 10,000 requests were served).
    pub restored_blocks: u64,
    pub open_ms: f64,
    pub open_s_per_million_blocks: f64,
    pub warm_s: f64,
    /// Skewed 4 KiB requests over a 256 MiB working set of written data on the same
    /// disk: the tiered volume with DRAM for 50%, 10% and 1% of it (warmed by the read
    /// stream first; misses read the disk with O_DIRECT), the flat volume (all of it in
    /// RAM), and the kernel's page cache over a plain file just written, so cached
    /// (`fdatasync` after each write).
    pub shares: Vec<ShareRow>,
    /// Park & Bahn's admission-control claim on the real volume ([`bench_admission`]).
    pub admission: Vec<AdmissionRow>,
    /// Seed 001's Fig. 11 over emulated devices ([`bench_fig11`]).
    pub fig11: fig11::Fig11,
    /// Reopening a volume whose DRAM held `recovery_blocks` blocks: the time until it
    /// serves (hot list read, policy rebuilt; the refill runs behind).
    pub recovery_blocks: u64,
    pub recovery_s: f64,
    pub recovery_s_per_million_blocks: f64,
    /// Reopening after a crash a volume whose write-back fast tier (a file in tmpfs)
    /// held `fast_recovery_blocks` blocks, `fast_recovery_dirty` of them dirty: the
    /// time until it serves (every record scanned, the data of every record newer than
    /// the durable watermark checked).
    pub fast_recovery_blocks: u64,
    pub fast_recovery_dirty: u64,
    pub fast_recovery_s: f64,
    pub fast_recovery_s_per_million_blocks: f64,
    pub dir: String,
}

/// 4 KiB DRAM hits of the tiered volume against reads of a flat volume, both over a
/// working set of `working_set_bytes`.
#[derive(Debug, Clone, Serialize)]
pub struct HitCost {
    pub working_set_bytes: u64,
    pub hit_read_ns: f64,
    pub flat_read_ns: f64,
    pub hit_over_flat: f64,
    /// The floor any cache that maps blocks to slots pays: the flat read at the
    /// address a hash map (block to slot, as many entries as the tier's) gives, with
    /// no lock, no policy and no cutoff; and that over the flat read.
    pub mapped_read_ns: f64,
    pub mapped_over_flat: f64,
    pub rounds: usize,
}

/// Median of alternating rounds of random 4 KiB reads over `working` bytes: a flat
/// volume that holds them, and a tiered volume four times larger whose DRAM holds
/// exactly them (every read a hit).
fn hit_cost(dir: &std::path::Path, working: u64) -> Result<HitCost> {
    use hscm_tier::{Durability, TierConfig};
    use rand::{Rng, SeedableRng};
    const BLOCK: u64 = 4096;
    let flat_path = dir.join(format!("flat-{working}.hscm"));
    hscm_volume::Volume::create(&flat_path, working, &hscm_volume::CreateOptions::default())?;
    let flat = hscm_volume::Volume::open(&flat_path, &hscm_volume::OpenOptions::default())?;
    crate::volume::watch_warmup(&flat, false)?;
    let tier_path = dir.join(format!("hits-{working}.tier"));
    let mut cfg = TierConfig::new(4 * working, working);
    cfg.durability = Durability::OnFlush;
    // The preload below is one long sequential run.
    cfg.sequential_cutoff = 0;
    TieredVolume::create(&tier_path, &cfg, false)?;
    let tiered = TieredVolume::open(&tier_path)?;
    let mut buf = vec![0u8; BLOCK as usize];
    let blocks = working / BLOCK;
    for b in 0..blocks {
        tiered.read_at(b * BLOCK, &mut buf)?;
    }
    let reads = 300_000;
    let mut rng = rand::rngs::SmallRng::seed_from_u64(1);
    let offsets: Vec<u64> = (0..reads)
        .map(|_| rng.gen_range(0..blocks) * BLOCK)
        .collect();
    let (mut hit_ns, mut flat_ns, mut mapped_ns) = (Vec::new(), Vec::new(), Vec::new());
    // Slots in the order the preload filled them, as the tier's are.
    let slots: rustc_hash::FxHashMap<u64, u32> = (0..blocks).map(|b| (b, b as u32)).collect();
    let rounds = 5;
    let misses_before = tiered.stats().tiers[0].misses;
    for _ in 0..rounds {
        let t = std::time::Instant::now();
        for &o in &offsets {
            tiered.read_at(o, &mut buf)?;
        }
        hit_ns.push(t.elapsed().as_nanos() as f64 / reads as f64);
        let t = std::time::Instant::now();
        for &o in &offsets {
            flat.read_at(o, &mut buf)?;
        }
        flat_ns.push(t.elapsed().as_nanos() as f64 / reads as f64);
        let t = std::time::Instant::now();
        for &o in &offsets {
            let slot = slots[&(o / BLOCK)];
            flat.read_at(u64::from(slot) * BLOCK, &mut buf)?;
        }
        mapped_ns.push(t.elapsed().as_nanos() as f64 / reads as f64);
    }
    anyhow::ensure!(
        tiered.stats().tiers[0].misses == misses_before,
        "the hit-cost rounds missed DRAM"
    );
    drop(tiered);
    flat.close()?;
    let (hit_read_ns, flat_read_ns) = (median(hit_ns), median(flat_ns));
    let mapped_read_ns = median(mapped_ns);
    Ok(HitCost {
        working_set_bytes: working,
        hit_read_ns,
        flat_read_ns,
        hit_over_flat: hit_read_ns / flat_read_ns,
        mapped_read_ns,
        mapped_over_flat: mapped_read_ns / flat_read_ns,
        rounds,
    })
}

/// A scratch directory in tmpfs where there is one (devices standing for SCM, or
/// emulated ones whose models should set the times), else beside `fallback`.
fn scm_or_scratch(fallback: &crate::scratch::Scratch) -> Result<crate::scratch::Scratch> {
    let shm = std::path::Path::new("/dev/shm");
    if shm.is_dir() {
        crate::scratch::Scratch::new("tier-scm", Some(shm))
    } else {
        crate::scratch::Scratch::new("tier-scm", Some(fallback.path()))
    }
}

/// Writes `blocks` blocks through a write-back fast tier of that size (durable at a
/// final flush; the background write-back cleans what passes its high mark), drops
/// the volume without closing it (a crash as far as the devices know: nothing marks a
/// clean close), and times the reopening. Returns the dirty blocks it recovered (the
/// rest, written back, are clean and dropped) and the seconds.
fn fast_tier_recovery(dir: &std::path::Path, blocks: u64) -> Result<(u64, f64)> {
    use hscm_tier::{Durability, FastConfig, TierConfig, WriteMode};
    const BLOCK: u64 = 4096;
    let path = dir.join("fast-recovery.tier");
    let mut cfg = TierConfig::new(2 * blocks * BLOCK, 1024 * BLOCK);
    cfg.durability = Durability::OnFlush;
    cfg.sequential_cutoff = 0;
    let mut fast = FastConfig::new(blocks * BLOCK);
    fast.mode = WriteMode::WriteBack;
    cfg.fast = Some(fast);
    let fast_path = std::path::Path::new("fast-recovery.fast");
    TieredVolume::create_with_fast(&path, &cfg, fast_path, true)?;
    let vol = TieredVolume::open(&path)?;
    let data = vec![0x3cu8; BLOCK as usize];
    for b in 0..blocks {
        vol.write_at(b * BLOCK, &data, hscm_block::WriteFlags::NONE)?;
    }
    vol.flush()?;
    drop(vol);
    let t = std::time::Instant::now();
    let vol = TieredVolume::open(&path)?;
    let seconds = t.elapsed().as_secs_f64();
    let dirty = vol.recovery().map_or(0, |r| r.dirty);
    drop(vol);
    std::fs::remove_file(&path).ok();
    std::fs::remove_file(dir.join(fast_path)).ok();
    Ok((dirty, seconds))
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// Runs the three measurements in scratch files under `dir` (the system temporary
/// directory by default), removed afterwards.
pub fn bench_tier(
    dir: Option<&std::path::Path>,
    recovery_blocks: u64,
    share_seconds: f64,
    progress: bool,
) -> Result<TierBench> {
    use hscm_tier::{Durability, TierConfig, DEFAULT_SEQUENTIAL_CUTOFF};
    use rand::{Rng, SeedableRng};
    let scratch = crate::volume::scratch_dir(dir)?;
    let note = |s: &str| {
        if progress {
            eprintln!("[tier] {s}");
        }
    };
    const BLOCK: u64 = 4096;

    // 1. DRAM hits against the flat volume's reads, at a working set the CPU caches
    // hold and at one they do not.
    note("DRAM hit cost against the flat volume");
    let mut hit_costs = Vec::new();
    for working in [1u64 << 20, 64 << 20] {
        hit_costs.push(hit_cost(scratch.path(), working)?);
    }
    let headline = hit_costs.last().expect("two working sets").clone();
    let mut buf = vec![0u8; BLOCK as usize];
    note("DRAM hits on four threads against the flat volume's reads");
    let (per_thread, rounds) = if share_seconds >= 1.0 {
        (400_000, 5)
    } else {
        (20_000, 3)
    };
    let hit_scaling = concurrency::hit_scaling(scratch.path(), 64 << 20, 4, per_thread, rounds)?;

    // 2. A scan against the hot set.
    let scan_bytes: u64 = 1 << 30;
    let hot_blocks: u64 = 4096;
    let mut kept = Vec::new();
    let mut scan_mb_per_s = 0.0;
    for cutoff in [DEFAULT_SEQUENTIAL_CUTOFF, 0] {
        note(&format!(
            "a {} scan past a hot set, sequential cutoff {}",
            crate::units::human_bytes(scan_bytes),
            crate::units::human_bytes(cutoff)
        ));
        let path = scratch.path().join(format!("scan-{cutoff}.tier"));
        let mut cfg = TierConfig::new(scan_bytes + hot_blocks * BLOCK, 2 * hot_blocks * BLOCK);
        cfg.sequential_cutoff = cutoff;
        cfg.durability = Durability::OnFlush;
        TieredVolume::create(&path, &cfg, false)?;
        let vol = TieredVolume::open(&path)?;
        // The hot set, read at random so the cutoff does not apply to it.
        let mut rng = rand::rngs::SmallRng::seed_from_u64(2);
        let mut order: Vec<u64> = (0..hot_blocks).collect();
        for _ in 0..2 {
            for i in (1..order.len()).rev() {
                order.swap(i, rng.gen_range(0..=i));
            }
            for &b in &order {
                vol.read_at(b * BLOCK, &mut buf)?;
            }
        }
        let mut chunk = vec![0u8; 1 << 20];
        let t = std::time::Instant::now();
        let mut at = hot_blocks * BLOCK;
        while at < hot_blocks * BLOCK + scan_bytes {
            vol.read_at(at, &mut chunk)?;
            at += chunk.len() as u64;
        }
        if cutoff > 0 {
            scan_mb_per_s = scan_bytes as f64 / 1e6 / t.elapsed().as_secs_f64();
        }
        let cached: std::collections::HashSet<u64> = vol.hot_list().into_iter().collect();
        kept.push(
            (0..hot_blocks).filter(|b| cached.contains(b)).count() as f64 / hot_blocks as f64,
        );
    }

    // 3. A clean restart.
    note("a clean restart");
    let path = scratch.path().join("restart.tier");
    let mut cfg = TierConfig::new(256 << 20, 32 << 20);
    cfg.durability = Durability::OnFlush;
    TieredVolume::create(&path, &cfg, false)?;
    let all = cfg.size / BLOCK;
    let hot = cfg.ram_blocks() * 3 / 4;
    let skewed = |seed: u64, n: usize| -> Vec<u64> {
        let mut rng = rand::rngs::SmallRng::seed_from_u64(seed);
        (0..n)
            .map(|_| {
                if rng.gen_bool(0.9) {
                    rng.gen_range(0..hot)
                } else {
                    rng.gen_range(0..all)
                }
            })
            .collect()
    };
    let ratio = |vol: &TieredVolume, blocks: &[u64]| -> Result<f64> {
        let before = vol.stats().tiers[0].clone();
        let mut buf = vec![0u8; BLOCK as usize];
        for &b in blocks {
            vol.read_at(b * BLOCK, &mut buf)?;
        }
        Ok(vol.stats().tiers[0].since(&before).hit_ratio())
    };
    let vol = TieredVolume::open(&path)?;
    ratio(&vol, &skewed(1, 200_000))?;
    let steady = ratio(&vol, &skewed(2, 10_000))?;
    vol.close()?;
    let t = std::time::Instant::now();
    let mut vol = TieredVolume::open(&path)?;
    let open_s = t.elapsed().as_secs_f64();
    let restarted = ratio(&vol, &skewed(3, 10_000))?;
    vol.wait_warm();
    let warm_s = t.elapsed().as_secs_f64();
    let restored = vol.stats().tiers[0].restored;
    drop(vol);
    let cold_path = scratch.path().join("cold.tier");
    TieredVolume::create(&cold_path, &cfg, false)?;
    let cold = ratio(&TieredVolume::open(&cold_path)?, &skewed(3, 10_000))?;

    // 4. The DRAM share against the flat volume and the page cache.
    note("throughput by DRAM share, beside the flat volume and the page cache");
    let shares = share_rows(scratch.path(), share_seconds)?;

    // 5. Admission control with a home as fast as SCM, and with the disk.
    note("admission control, home in tmpfs (standing for SCM) and on the disk");
    let scm_scratch = scm_or_scratch(&scratch)?;
    // The disk home takes about 0.1 ms a miss: only in full runs.
    let mut homes = vec![("scm", scm_scratch.path())];
    if share_seconds >= 1.0 {
        homes.push(("disk", scratch.path()));
    }
    let admission = bench_admission(&homes, 100_000)?;

    // 6. Fig. 11: DRAM with a durable SSD tier against the SSD tier alone, in front of
    // a hard disk (both emulated, over files in tmpfs).
    note("Fig. 11: DRAM + SSD tier against the SSD tier, in front of an emulated disk");
    let fig11 = bench_fig11(
        scm_scratch.path(),
        if share_seconds >= 1.0 { 8_000 } else { 2_000 },
    )?;
    drop(scm_scratch);

    // 6b. Requests while the write-back copies dirty blocks to an emulated disk.
    let writeback_bytes: u64 = if share_seconds >= 1.0 {
        256 << 20
    } else {
        32 << 20
    };
    note(&format!(
        "requests while {} go back to an emulated disk",
        crate::units::human_bytes(writeback_bytes)
    ));
    let writeback = {
        let scm = scm_or_scratch(&scratch)?;
        concurrency::writeback_interference(scm.path(), writeback_bytes)?
    };

    // 7. Recovery at scale: reopening a volume that held `recovery_blocks` blocks.
    note(&format!(
        "reopening a volume whose DRAM held {recovery_blocks} blocks"
    ));
    let path = scratch.path().join("recovery.tier");
    let mut cfg = TierConfig::new(2 * recovery_blocks * BLOCK, recovery_blocks * BLOCK);
    cfg.durability = Durability::OnFlush;
    cfg.sequential_cutoff = 0;
    TieredVolume::create(&path, &cfg, false)?;
    let vol = TieredVolume::open(&path)?;
    let mut chunk = vec![0u8; 1 << 20];
    let mut at = 0;
    while at < recovery_blocks * BLOCK {
        vol.read_at(at, &mut chunk)?;
        at += chunk.len() as u64;
    }
    vol.close()?;
    let t = std::time::Instant::now();
    let vol = TieredVolume::open(&path)?;
    let recovery_s = t.elapsed().as_secs_f64();
    let recovered = vol.stats().tiers[0].restored;
    drop(vol);
    std::fs::remove_file(&path).ok();

    // 8. Recovery of a write-back fast tier after a crash.
    let fast_blocks = (recovery_blocks / 4).max(50_000);
    note(&format!(
        "recovering a fast tier holding {fast_blocks} dirty blocks after a crash"
    ));
    let (fast_recovery_dirty, fast_recovery_s) =
        fast_tier_recovery(scm_or_scratch(&scratch)?.path(), fast_blocks)?;
    let fast_recovery_blocks = fast_blocks;

    Ok(TierBench {
        admission,
        fig11,
        shares,
        recovery_blocks: recovered,
        recovery_s,
        recovery_s_per_million_blocks: recovery_s / recovered.max(1) as f64 * 1e6,
        fast_recovery_blocks,
        fast_recovery_dirty,
        fast_recovery_s,
        fast_recovery_s_per_million_blocks: fast_recovery_s / fast_recovery_blocks.max(1) as f64
            * 1e6,
        hit_read_ns: headline.hit_read_ns,
        flat_read_ns: headline.flat_read_ns,
        hit_over_flat: headline.hit_over_flat,
        rounds: headline.rounds,
        hit_costs,
        hit_scaling,
        writeback,
        scan_bytes,
        hot_kept_with_cutoff: kept[0],
        hot_kept_without_cutoff: kept[1],
        scan_mb_per_s,
        steady_hit_ratio: steady,
        restart_hit_ratio: restarted,
        cold_hit_ratio: cold,
        restart_over_steady: restarted / steady,
        restored_blocks: restored,
        open_ms: open_s * 1e3,
        open_s_per_million_blocks: open_s / restored.max(1) as f64 * 1e6,
        warm_s,
        dir: scratch.path().display().to_string(),
    })
}

//! Replaying a block trace through a real tiered volume, for comparison with what
//! `hscm sim cache` predicts for the same policy and size.

use std::collections::HashMap;

use anyhow::{bail, Context, Result};
use hscm_tier::{TierStats, TieredVolume};
use hscm_trace::{Request, TraceError};
use serde::Serialize;

/// What a replay did, per tier (the `hscm volume replay --json` contract).
#[derive(Debug, Clone, Serialize)]
pub struct Replay {
    pub requests: u64,
    pub reads: u64,
    pub writes: u64,
    /// Distinct blocks the trace touched (each mapped to its own block of the volume).
    pub blocks: u64,
    /// Requests whose size is not the volume's block: each still counts as one block,
    /// so the simulator (which weighs by size) agrees only when this is 0.
    pub size_mismatches: u64,
    pub tiers: Vec<TierStats>,
    pub seconds: f64,
}

/// Replays `requests` on `vol`: each distinct key gets the next free block of the
/// volume (first touch), a read reads that block, a write rewrites it with the bytes
/// it already holds (so a replay changes no data). Counts are this replay's alone.
pub fn replay(
    vol: &TieredVolume,
    requests: impl Iterator<Item = Result<Request, TraceError>>,
    progress: &mut dyn FnMut(u64),
) -> Result<Replay> {
    let block = u64::from(vol.config().block);
    let capacity = vol.size() / block;
    let before = vol.stats().tiers;
    let start = std::time::Instant::now();
    let mut blocks: HashMap<u64, u64> = HashMap::new();
    let mut buf = vec![0u8; block as usize];
    let (mut n, mut reads, mut writes, mut mismatches) = (0u64, 0u64, 0u64, 0u64);
    for r in requests {
        let r = r?;
        let next = blocks.len() as u64;
        let b = *blocks.entry(r.key).or_insert(next);
        if b >= capacity {
            bail!(
                "the trace touches more than the volume's {capacity} blocks of {block} bytes; \
                 replay it on a larger volume"
            );
        }
        mismatches += u64::from(u64::from(r.size) != block);
        let at = b * block;
        if r.write {
            vol.peek_block(b, &mut buf)?;
            vol.write_at(at, &buf, false)
                .with_context(|| format!("request {n}: write of block {b}"))?;
            writes += 1;
        } else {
            vol.read_at(at, &mut buf)
                .with_context(|| format!("request {n}: read of block {b}"))?;
            reads += 1;
        }
        n += 1;
        if n & 0xffff == 0 {
            progress(n);
        }
    }
    progress(n);
    let after = vol.stats().tiers;
    let tiers = after.iter().zip(&before).map(|(a, b)| a.since(b)).collect();
    Ok(Replay {
        requests: n,
        reads,
        writes,
        blocks: blocks.len() as u64,
        size_mismatches: mismatches,
        tiers,
        seconds: start.elapsed().as_secs_f64(),
    })
}

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
    /// Reopening a volume whose DRAM held `recovery_blocks` blocks: the time until it
    /// serves (hot list read, policy rebuilt; the refill runs behind).
    pub recovery_blocks: u64,
    pub recovery_s: f64,
    pub recovery_s_per_million_blocks: f64,
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
    let (mut hit_ns, mut flat_ns) = (Vec::new(), Vec::new());
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
    }
    anyhow::ensure!(
        tiered.stats().tiers[0].misses == misses_before,
        "the hit-cost rounds missed DRAM"
    );
    drop(tiered);
    flat.close()?;
    let (hit_read_ns, flat_read_ns) = (median(hit_ns), median(flat_ns));
    Ok(HitCost {
        working_set_bytes: working,
        hit_read_ns,
        flat_read_ns,
        hit_over_flat: hit_read_ns / flat_read_ns,
        rounds,
    })
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
    let shm = std::path::Path::new("/dev/shm");
    let scm_scratch = if shm.is_dir() {
        crate::scratch::Scratch::new("tier-scm", Some(shm))?
    } else {
        crate::volume::scratch_dir(None)?
    };
    // The disk home takes about 0.1 ms a miss: only in full runs.
    let mut homes = vec![("scm", scm_scratch.path())];
    if share_seconds >= 1.0 {
        homes.push(("disk", scratch.path()));
    }
    let admission = bench_admission(&homes, 100_000)?;
    drop(scm_scratch);

    // 6. Recovery at scale: reopening a volume that held `recovery_blocks` blocks.
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

    Ok(TierBench {
        admission,
        shares,
        recovery_blocks: recovered,
        recovery_s,
        recovery_s_per_million_blocks: recovery_s / recovered.max(1) as f64 * 1e6,
        hit_read_ns: headline.hit_read_ns,
        flat_read_ns: headline.flat_read_ns,
        hit_over_flat: headline.hit_over_flat,
        rounds: headline.rounds,
        hit_costs,
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

/// One policy's replay beside the simulator's prediction.
#[derive(Debug, Clone, Serialize)]
pub struct Agreement {
    pub policy: String,
    pub requests: u64,
    pub predicted_hits: u64,
    pub replayed_hits: u64,
    pub predicted_misses: u64,
    pub replayed_misses: u64,
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
/// every admission filter (DRAM `ram_blocks` blocks of 4 KiB, sequential cutoff off,
/// on-flush: durability does not change what is cached) and simulates it with `hscm
/// sim cache`'s code. `make` creates and opens each volume (a file, or in tests an
/// in-memory device).
pub fn replay_agreement(
    trace: &std::path::Path,
    ram_blocks: u64,
    volume_blocks: u64,
    make: &mut dyn FnMut(&hscm_tier::TierConfig) -> Result<TieredVolume>,
) -> Result<Vec<Agreement>> {
    use hscm_policy::cache::AdmissionName;
    use hscm_tier::{Durability, TierConfig};
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
                },
                reader()?,
                &mut |_| {},
            )?;
            let mut cfg = TierConfig::new(volume_blocks * BLOCK, ram_blocks * BLOCK);
            cfg.eviction = spec.eviction;
            cfg.admission = admission.or(spec.admission);
            cfg.sequential_cutoff = 0;
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
                equal: predicted.hits == dram.hits
                    && predicted_misses == dram.misses
                    && predicted.requests == replayed.requests,
            });
        }
    }
    Ok(rows)
}

/// One configuration and workload of the DRAM-share comparison.
#[derive(Debug, Clone, Serialize)]
pub struct ShareRow {
    /// `tiered 50%`, `tiered 10%`, `tiered 1%`, `flat` or `pagecache`.
    pub config: String,
    /// `read` (all reads) or `mixed` (70% reads, 30% writes, each durable on return).
    pub workload: String,
    pub ops_per_s: f64,
    /// The tiered volume's DRAM hit ratio over the run (None for the others).
    pub dram_hit_ratio: Option<f64>,
}

/// Runs each configuration for `seconds` per workload, one thread, the same skewed
/// stream of 4 KiB requests (a block drawn as the cube of a uniform number times the
/// block count: a quarter of the requests go to the first 1.6% of the blocks).
fn share_rows(dir: &std::path::Path, seconds: f64) -> Result<Vec<ShareRow>> {
    use hscm_tier::{Durability, TierConfig};
    use rand::{Rng, SeedableRng};
    use std::os::unix::fs::FileExt;
    const BLOCK: u64 = 4096;
    let working: u64 = 256 << 20;
    let blocks = working / BLOCK;
    let draws: Vec<(u64, bool)> = {
        let mut rng = rand::rngs::SmallRng::seed_from_u64(11);
        (0..1 << 20)
            .map(|_| {
                let b = (rng.gen::<f64>().powi(3) * blocks as f64) as u64;
                (b.min(blocks - 1), rng.gen_bool(0.3))
            })
            .collect()
    };
    // Runs `op(block, write)` over the draws for `seconds`; operations per second.
    let timed = |op: &mut dyn FnMut(u64, bool) -> Result<()>, mixed: bool| -> Result<f64> {
        let start = std::time::Instant::now();
        let mut n = 0u64;
        while start.elapsed().as_secs_f64() < seconds {
            for &(b, w) in &draws[(n as usize) % draws.len()..]
                [..256.min(draws.len() - (n as usize) % draws.len())]
            {
                op(b, mixed && w)?;
                n += 1;
            }
        }
        Ok(n as f64 / start.elapsed().as_secs_f64())
    };
    let data = vec![0x5au8; BLOCK as usize];
    let mut buf = vec![0u8; BLOCK as usize];
    let mut rows = Vec::new();
    // The data every configuration starts from, written straight to its file (1 MiB
    // at a time, then synced), so misses read real blocks from the disk.
    let fill = |path: &std::path::Path, at: u64| -> Result<()> {
        let f = std::fs::OpenOptions::new().write(true).open(path)?;
        let chunk: Vec<u8> = (0..1 << 20).map(|i| (i % 251) as u8 | 1).collect();
        let mut off = 0;
        while off < working {
            f.write_all_at(&chunk, at + off)?;
            off += chunk.len() as u64;
        }
        f.sync_all()?;
        Ok(())
    };
    for (name, share) in [("tiered 50%", 2u64), ("tiered 10%", 10), ("tiered 1%", 100)] {
        let path = dir.join(format!("share-{share}.tier"));
        let mut cfg = TierConfig::new(working, blocks / share * BLOCK);
        cfg.durability = Durability::Immediate;
        TieredVolume::create(&path, &cfg, false)?;
        fill(&path, hscm_tier::HEADER_LEN)?;
        let vol = TieredVolume::open(&path)?;
        // Warm DRAM with the read stream first.
        timed(
            &mut |b, _| {
                vol.read_at(b * BLOCK, &mut buf)?;
                Ok(())
            },
            false,
        )?;
        for (workload, mixed) in [("read", false), ("mixed", true)] {
            let before = vol.stats().tiers[0].clone();
            let ops = timed(
                &mut |b, w| {
                    if w {
                        vol.write_at(b * BLOCK, &data, false)?;
                    } else {
                        vol.read_at(b * BLOCK, &mut buf)?;
                    }
                    Ok(())
                },
                mixed,
            )?;
            rows.push(ShareRow {
                config: name.into(),
                workload: workload.into(),
                ops_per_s: ops,
                dram_hit_ratio: Some(vol.stats().tiers[0].since(&before).hit_ratio()),
            });
        }
        drop(vol);
        std::fs::remove_file(&path).ok();
    }
    {
        let path = dir.join("share-flat.hscm");
        hscm_volume::Volume::create(&path, working, &hscm_volume::CreateOptions::default())?;
        let vol = hscm_volume::Volume::open(&path, &hscm_volume::OpenOptions::default())?;
        crate::volume::watch_warmup(&vol, false)?;
        let chunk: Vec<u8> = (0..1 << 20).map(|i| (i % 251) as u8 | 1).collect();
        let mut off = 0;
        while off < working {
            vol.write_at_with(off, &chunk, hscm_volume::Durability::OnFlush)?;
            off += chunk.len() as u64;
        }
        vol.flush()?;
        for (workload, mixed) in [("read", false), ("mixed", true)] {
            let ops = timed(
                &mut |b, w| {
                    if w {
                        vol.write_at(b * BLOCK, &data)?;
                    } else {
                        vol.read_at(b * BLOCK, &mut buf)?;
                    }
                    Ok(())
                },
                mixed,
            )?;
            rows.push(ShareRow {
                config: "flat".into(),
                workload: workload.into(),
                ops_per_s: ops,
                dram_hit_ratio: None,
            });
        }
        vol.close()?;
        std::fs::remove_file(&path).ok();
    }
    {
        let path = dir.join("share-pagecache.bin");
        let f = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .open(&path)?;
        f.set_len(working)?;
        drop(f);
        fill(&path, 0)?;
        let f = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(&path)?;
        for (workload, mixed) in [("read", false), ("mixed", true)] {
            let ops = timed(
                &mut |b, w| {
                    if w {
                        f.write_all_at(&data, b * BLOCK)?;
                        f.sync_data()?;
                    } else {
                        f.read_exact_at(&mut buf, b * BLOCK)?;
                    }
                    Ok(())
                },
                mixed,
            )?;
            rows.push(ShareRow {
                config: "pagecache".into(),
                workload: workload.into(),
                ops_per_s: ops,
                dram_hit_ratio: None,
            });
        }
        drop(f);
        std::fs::remove_file(&path).ok();
    }
    Ok(rows)
}

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
            let start = std::time::Instant::now();
            for &b in &draws {
                vol.read_at(b * BLOCK, &mut buf)?;
            }
            let ops = draws.len() as f64 / start.elapsed().as_secs_f64();
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

//! `hscm volume create --ram …` and `hscm volume replay`: the tiered volume.

use std::io::IsTerminal;
use std::path::Path;

use anyhow::{bail, Context, Result};
use hscm_lab::units::human_bytes;
use hscm_policy::cache::AdmissionName;
use hscm_tier::{Durability, FastConfig, TierConfig, TieredVolume, WriteMode};
use hscm_trace::{RequestFormat, RequestReader};
use hscm_vmsim::cache::PolicyName;

/// The DRAM tier's settings as `hscm volume create` takes them.
pub struct TierArgs {
    pub size: u64,
    pub ram: u64,
    pub block: u64,
    pub policy: PolicyName,
    pub admission: Option<AdmissionName>,
    pub sequential_cutoff: u64,
    pub durability: Durability,
    pub fast: Option<FastArgs>,
}

/// The fast tier's settings.
pub struct FastArgs {
    pub path: std::path::PathBuf,
    pub size: u64,
    pub mode: WriteMode,
    pub policy: PolicyName,
    pub admission: Option<AdmissionName>,
}

/// The online policy `policy` names, with `admission` on top unless it has its own.
fn online_policy(
    flag: &str,
    policy: PolicyName,
    admission: Option<AdmissionName>,
) -> Result<hscm_policy::cache::PolicySpec> {
    let Some(spec) = policy.spec(None) else {
        bail!(
            "{flag} {}: a volume needs an online policy (belady needs the future)",
            policy.name()
        );
    };
    if spec.admission.is_some() && admission.is_some() {
        bail!(
            "{flag} {} has its own admission filter; use lru with an admission flag instead",
            policy.name()
        );
    }
    Ok(hscm_policy::cache::PolicySpec {
        admission: admission.or(spec.admission),
        ..spec
    })
}

pub fn create(path: &Path, a: &TierArgs, force: bool) -> Result<()> {
    let spec = online_policy("--policy", a.policy, a.admission)?;
    let fast = match &a.fast {
        None => None,
        Some(f) => {
            let fspec = online_policy("--fast-policy", f.policy, f.admission)?;
            Some(FastConfig {
                mode: f.mode,
                eviction: fspec.eviction,
                admission: fspec.admission,
                ..FastConfig::new(f.size)
            })
        }
    };
    let cfg = TierConfig {
        fast,
        size: a.size,
        block: u32::try_from(a.block).context("--block must be below 4 GiB")?,
        ram: a.ram,
        eviction: spec.eviction,
        admission: spec.admission,
        sequential_cutoff: a.sequential_cutoff,
        durability: a.durability,
    };
    cfg.validate()?;
    if cfg.ram > cfg.size {
        bail!(
            "--ram {} is larger than --size {}: a DRAM tier can hold at most the whole volume (for a volume wholly in RAM, leave out --ram)",
            human_bytes(cfg.ram),
            human_bytes(cfg.size)
        );
    }
    hscm_volume::check_fits_in_memory(&path.display().to_string(), cfg.ram)
        .context("refusing a DRAM tier larger than this machine's memory")?;
    match &a.fast {
        Some(f) => TieredVolume::create_with_fast(path, &cfg, &f.path, force)?,
        None => TieredVolume::create(path, &cfg, force)?,
    }
    outln!(
        "created {}: tiered volume of {}, {} of it in DRAM ({} blocks of {}), {}{}, sequential cutoff {}, durability {}",
        path.display(),
        human_bytes(cfg.size),
        human_bytes(cfg.ram),
        cfg.ram_blocks(),
        human_bytes(u64::from(cfg.block)),
        cfg.eviction.name(),
        cfg.admission.map_or(String::new(), |a| format!(" + {}", a.name())),
        if cfg.sequential_cutoff == 0 { "off".into() } else { human_bytes(cfg.sequential_cutoff) },
        durability_name(cfg.durability),
    )?;
    if let (Some(f), Some(fc)) = (&a.fast, &cfg.fast) {
        outln!(
            "fast tier on {}: {} ({} of device), {}{}, {}",
            f.path.display(),
            human_bytes(fc.size),
            human_bytes(fc.device_len(cfg.block)),
            fc.eviction.name(),
            fc.admission
                .map_or(String::new(), |a| format!(" + {}", a.name())),
            fc.mode.name()
        )?;
    }
    Ok(())
}

fn durability_name(d: Durability) -> &'static str {
    d.name()
}

/// True when `path` starts with a tiered volume's magic.
pub fn is_tiered(path: &Path) -> bool {
    use std::io::Read;
    let mut magic = [0u8; 8];
    std::fs::File::open(path)
        .and_then(|mut f| f.read_exact(&mut magic))
        .is_ok_and(|()| &magic == hscm_tier::MAGIC)
}

/// `hscm volume stats`: the counters the volume saved.
pub fn stats(path: &Path, json: bool) -> Result<()> {
    if !is_tiered(path) {
        bail!(
            "{}: not a tiered volume (`hscm volume stats` reads the counters tiered volumes save)",
            path.display()
        );
    }
    let cfg = TieredVolume::inspect(path)?;
    let snap = hscm_tier::snapshot::read_saved(path, &cfg)
        .with_context(|| format!("reading the counters of {}", path.display()))?;
    if json {
        let v =
            serde_json::json!({"path": path.display().to_string(), "config": cfg, "saved": snap});
        outln!("{v}")?;
        return Ok(());
    }
    let Some(s) = snap else {
        outln!(
            "{}: no counters saved yet (they are saved while it is served and when it closes)",
            path.display()
        )?;
        return Ok(());
    };
    print_snapshot(&s)
}

fn print_snapshot(s: &hscm_tier::snapshot::Snapshot) -> Result<()> {
    let age = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
        .saturating_sub(s.saved_at);
    outln!(
        "counters      saved {age} s ago by pid {} ({}); {}, {} dirty",
        s.pid,
        s.state,
        s.mode,
        human_bytes(s.dirty_bytes)
    )?;
    if s.writeback_blocks_per_s > 0.0 {
        outln!(
            "write-back    {:.1} blocks/s over this session's {:.0} s",
            s.writeback_blocks_per_s,
            s.session_s
        )?;
    }
    if let Some(why) = &s.fast_failure {
        outln!("fast tier     OUT OF SERVICE: {why}")?;
    }
    for (name, c) in [("session", &s.session), ("lifetime", &s.lifetime)] {
        outln!(
            "{name:<13} {} requests: {} all hits, {} partial, {} misses; home {} reads, {} writes, {} syncs",
            c.requests, c.request_hits, c.request_partial_hits, c.request_misses, c.home_reads, c.home_writes, c.syncs
        )?;
        for t in &c.tiers {
            outln!(
                "  {:<11} reads {} hits / {} misses, writes {} / {}; bypassed {} (admission) {} (sequential); promoted {}, evicted {}; {} of {} used",
                t.tier, t.read_hits, t.read_misses, t.write_hits, t.write_misses, t.bypassed_admission,
                t.bypassed_sequential, t.promotions, t.evictions, human_bytes(t.occupancy_bytes), human_bytes(t.capacity_bytes)
            )?;
            outln!(
                "  {:<11} requests: {} all hits, {} partial, {} misses (of the blocks that reached it)",
                "", t.request_hits, t.request_partial_hits, t.request_misses
            )?;
            if t.written_back > 0 || t.dirty_bytes > 0 || t.demotions > 0 {
                outln!(
                    "  {:<11} written back {} blocks in {} runs, {} on eviction; {} dirty, oldest {} ms",
                    "", t.written_back, t.writeback_runs, t.demotions, human_bytes(t.dirty_bytes), t.dirty_age_ms
                )?;
            }
        }
    }
    Ok(())
}

/// The JSON `volume info` and `volume check` print for a tiered volume: the fields
/// every kind has (`path`, `kind`, `volume_size`, `durability`, `ok`), then its own.
fn info_json(path: &Path, cfg: &TierConfig) -> Result<serde_json::Value> {
    let snap = hscm_tier::snapshot::read_saved(path, cfg).ok().flatten();
    let (_, fast_path) = TieredVolume::inspect_with_fast_path(path)?;
    Ok(serde_json::json!({
        "path": path.display().to_string(),
        "kind": "tiered",
        "volume_size": cfg.size,
        "durability": durability_name(cfg.durability),
        "ok": true,
        "tier": cfg,
        "fast_tier_path": fast_path,
        "stats": snap,
    }))
}

/// `hscm volume check` of a tiered volume: its header and fast-tier layout read and
/// checked.
pub fn check(path: &Path, json: bool) -> Result<()> {
    let cfg = TieredVolume::inspect(path)
        .with_context(|| format!("check of {} failed", path.display()))?;
    if json {
        outln!("{}", serde_json::to_string_pretty(&info_json(path, &cfg)?)?)?;
    } else {
        outln!(
            "{}: ok (tiered volume of {}, {} in DRAM, header checksum valid)",
            path.display(),
            human_bytes(cfg.size),
            human_bytes(cfg.ram)
        )?;
    }
    Ok(())
}

/// `hscm volume info` of a tiered volume: its header and saved counters, as text or JSON.
pub fn info(path: &Path, cfg: &TierConfig, json: bool) -> Result<()> {
    let snap = hscm_tier::snapshot::read_saved(path, cfg).ok().flatten();
    if json {
        outln!("{}", serde_json::to_string_pretty(&info_json(path, cfg)?)?)?;
        return Ok(());
    }
    outln!("{}: tiered volume", path.display())?;
    outln!("size          {}", human_bytes(cfg.size))?;
    outln!(
        "DRAM tier     {} ({} blocks of {})",
        human_bytes(cfg.ram),
        cfg.ram_blocks(),
        human_bytes(u64::from(cfg.block))
    )?;
    outln!(
        "policy        {}{}",
        cfg.eviction.name(),
        cfg.admission
            .map_or(String::new(), |a| format!(" + {}", a.name()))
    )?;
    outln!(
        "seq. cutoff   {}",
        if cfg.sequential_cutoff == 0 {
            "off".into()
        } else {
            human_bytes(cfg.sequential_cutoff)
        }
    )?;
    outln!("durability    {}", durability_name(cfg.durability))?;
    if let Some(f) = &cfg.fast {
        let (_, fast_path) = TieredVolume::inspect_with_fast_path(path)?;
        outln!(
            "fast tier     {} on {} ({}{}), {}",
            human_bytes(f.size),
            fast_path.map_or("?".into(), |p| p.display().to_string()),
            f.eviction.name(),
            f.admission
                .map_or(String::new(), |a| format!(" + {}", a.name())),
            f.mode.name()
        )?;
    }
    if let Some(s) = snap {
        print_snapshot(&s)?;
    }
    Ok(())
}

pub fn replay(path: &Path, trace: &Path, format: Option<RequestFormat>, json: bool) -> Result<()> {
    let vol = TieredVolume::open(path)?;
    let block = vol.config().block;
    let reader = RequestReader::open(trace, format, block)
        .with_context(|| format!("reading {}", trace.display()))?;
    let bar = (!json && std::io::stderr().is_terminal())
        .then(|| hscm_lab::par::spinner(format!("replaying {}", trace.display()), "requests"));
    let r = hscm_lab::tier::replay(&vol, reader, &mut hscm_lab::par::ticker(bar.as_ref()))?;
    if let Some(b) = bar {
        b.finish_and_clear();
    }
    vol.close()?;
    if json {
        outln!("{}", serde_json::to_string(&r)?)?;
        return Ok(());
    }
    outln!(
        "{} requests ({} reads, {} writes) over {} distinct blocks in {:.2} s",
        r.requests,
        r.reads,
        r.writes,
        r.blocks,
        r.seconds
    )?;
    if r.started_warm {
        outln!(
            "started warm: {} already cached ({}); `hscm sim cache` starts empty, so its counts match a replay on a freshly created volume",
            r.cached_at_start_bytes
                .iter()
                .zip(&r.tiers)
                .map(|(b, t)| format!("{} in {}", human_bytes(*b), t.tier))
                .collect::<Vec<_>>()
                .join(", "),
            "an earlier replay, or the hot list restored at open"
        )?;
    } else {
        outln!("started cold: nothing cached, as `hscm sim cache` starts")?;
    }
    for t in &r.tiers {
        let total = (t.hits + t.misses).max(1) as f64;
        outln!(
            "{:<5} hits {} misses {} (hit ratio {:.4}); admitted {}, evicted {}, bypassed {} by admission and {} as sequential",
            t.tier,
            t.hits,
            t.misses,
            t.hits as f64 / total,
            t.promotions,
            t.evictions,
            t.bypassed_admission,
            t.bypassed_sequential
        )?;
    }
    if r.size_mismatches > 0 {
        outln!(
            "note: {} requests are not one {}-byte block; each counted as one, so `hscm sim cache` (which weighs by size) will differ",
            r.size_mismatches,
            block
        )?;
    }
    Ok(())
}

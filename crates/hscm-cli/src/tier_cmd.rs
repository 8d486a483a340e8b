//! `hscm volume create --ram …` and `hscm volume replay`: the tiered volume.

use std::io::IsTerminal;
use std::path::Path;

use anyhow::{bail, Context, Result};
use hscm_lab::units::human_bytes;
use hscm_policy::cache::AdmissionName;
use hscm_tier::{Durability, TierConfig, TieredVolume};
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
}

pub fn create(path: &Path, a: &TierArgs, force: bool) -> Result<()> {
    let Some(spec) = a.policy.spec(None) else {
        bail!(
            "--policy {}: a volume needs an online policy (belady needs the future)",
            a.policy.name()
        );
    };
    if spec.admission.is_some() && a.admission.is_some() {
        bail!(
            "--policy {} has its own admission filter; use --policy lru with --admission instead",
            a.policy.name()
        );
    }
    let cfg = TierConfig {
        size: a.size,
        block: u32::try_from(a.block).context("--block must be below 4 GiB")?,
        ram: a.ram,
        eviction: spec.eviction,
        admission: a.admission.or(spec.admission),
        sequential_cutoff: a.sequential_cutoff,
        durability: a.durability,
    };
    cfg.validate()?;
    hscm_volume::check_fits_in_memory(&path.display().to_string(), cfg.ram)
        .context("refusing a DRAM tier larger than this machine's memory")?;
    TieredVolume::create(path, &cfg, force)?;
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
    Ok(())
}

fn durability_name(d: Durability) -> &'static str {
    match d {
        Durability::Immediate => "immediate",
        Durability::OnFlush => "on-flush",
    }
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
        }
    }
    Ok(())
}

/// `hscm volume info` of a tiered volume: its header and saved counters, as text or JSON.
pub fn info(path: &Path, cfg: &TierConfig, json: bool) -> Result<()> {
    let snap = hscm_tier::snapshot::read_saved(path, cfg).ok().flatten();
    if json {
        let v = serde_json::json!({ "path": path.display().to_string(), "kind": "tiered", "tier": cfg, "stats": snap });
        outln!("{v}")?;
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

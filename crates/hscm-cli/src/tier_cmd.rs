//! `hscm volume create --ram …` and `hscm volume replay`: the tiered volume.

use std::io::IsTerminal;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use clap::Args;
use hscm_lab::units::{self, human_bytes};
use hscm_lab::vmsim;
use hscm_policy::cache::AdmissionName;
use hscm_tier::{Durability, FastConfig, TierConfig, TieredVolume, WriteMode};
use hscm_trace::{RequestFormat, RequestReader};
use hscm_vmsim::cache::PolicyName;

/// `hscm volume create`'s tier flags, one group flattened into it. Each default is
/// read from the engine's own (`TierConfig::new`, `FastConfig::new`), so `--help`
/// shows what the engine would choose and nothing restates it.
#[derive(Args)]
pub struct TierFlags {
    /// Make it a tiered volume with this much DRAM for the hot blocks (e.g. 4G); the
    /// volume may then be far larger than RAM. With --fs: a file system that
    /// holds at most this much of its files' data in RAM (the hot files; the rest
    /// is read from the device), so it too may be larger than RAM; `hscm mount`
    /// takes the budget from the volume (its --ram overrides it).
    #[arg(long, value_parser = units::parse_size, allow_hyphen_values = true, conflicts_with_all = ["journal", "larger_than_ram"])]
    pub ram: Option<u64>,
    /// Tiered: the unit of caching, 4K to 1M.
    #[arg(long, value_parser = units::parse_size, allow_hyphen_values = true, requires = "ram",
          default_value = units::size_arg(u64::from(TierConfig::new(0, 0).block)))]
    pub block: u64,
    /// Tiered: which blocks stay in DRAM, as `hscm sim cache` names the policies
    /// (lru, ac-lru, clock, fifo, arc, s3fifo, sieve).
    #[arg(long, value_parser = vmsim::parse_policy, requires = "ram",
          default_value = TierConfig::new(0, 0).eviction.name())]
    pub policy: PolicyName,
    /// Tiered: admission to DRAM: always (every missed block), second-miss or
    /// seen-before (on a repeated request: Park & Bahn's admission control).
    #[arg(long, value_parser = parse_tier_admission, requires = "ram",
          default_value = admission_name(TierConfig::new(0, 0).admission))]
    pub admission: TierAdmission,
    /// Tiered: a sequential run longer than this bypasses DRAM so a scan does not
    /// wash out the hot set (0: off).
    #[arg(long, value_parser = units::parse_size, allow_hyphen_values = true, requires = "ram",
          default_value = units::size_arg(TierConfig::new(0, 0).sequential_cutoff))]
    pub sequential_cutoff: u64,
    /// Tiered: a durable fast tier between DRAM and home, on this file (created) or
    /// device (standing for SCM, Optane or NVMe); needs --fast-size. A relative path
    /// is kept relative to the volume's directory.
    #[arg(long, requires_all = ["ram", "fast_size"])]
    pub fast_tier: Option<PathBuf>,
    /// Tiered: bytes of blocks the fast tier caches (e.g. 16G); the device also
    /// holds a reserve of 1/16 more slots and 32 bytes of record per slot.
    #[arg(long, value_parser = units::parse_size, allow_hyphen_values = true, requires = "fast_tier")]
    pub fast_size: Option<u64>,
    /// Tiered with a fast tier: where a write is durable before it is acknowledged.
    /// write-back: on the fast tier, copied home later in block order (a failed
    /// fast tier holding dirty blocks makes the volume read-only); write-through: on
    /// home, the fast tier keeps clean copies (a failed one is dropped, the volume
    /// goes on pass-through).
    #[arg(long, value_parser = parse_write_mode, requires = "fast_tier",
          default_value = FastConfig::new(0).mode.name())]
    pub write_mode: WriteMode,
    /// Tiered with a fast tier: its eviction policy, named as --policy.
    #[arg(long, value_parser = vmsim::parse_policy, requires = "fast_tier",
          default_value = FastConfig::new(0).eviction.name())]
    pub fast_policy: PolicyName,
    /// Tiered with a fast tier: its admission filter for read misses, named as
    /// --admission (writes in write-back mode are always admitted).
    #[arg(long, value_parser = parse_tier_admission, requires = "fast_tier",
          default_value = admission_name(FastConfig::new(0).admission))]
    pub fast_admission: TierAdmission,
}

/// A tiered volume's admission to DRAM: None admits every missed block.
#[derive(Clone, Copy)]
pub struct TierAdmission(Option<AdmissionName>);

fn parse_write_mode(s: &str) -> Result<WriteMode, String> {
    WriteMode::from_name(s)
        .ok_or_else(|| format!("unknown write mode {s:?}: write-through or write-back"))
}

/// `always` (no filter) or an admission filter's name.
fn parse_tier_admission(s: &str) -> Result<TierAdmission, String> {
    if s == "always" {
        return Ok(TierAdmission(None));
    }
    vmsim::parse_admission(s)
        .map(|a| TierAdmission(Some(a)))
        .map_err(|e| format!("{e}, or always"))
}

fn admission_name(a: Option<AdmissionName>) -> &'static str {
    a.map_or("always", AdmissionName::name)
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

/// Creates a tiered volume of `size` bytes with `ram` bytes of DRAM.
pub fn create(
    path: &Path,
    size: u64,
    ram: u64,
    durability: Durability,
    a: &TierFlags,
    force: bool,
) -> Result<()> {
    let spec = online_policy("--policy", a.policy, a.admission.0)?;
    let fast = match (&a.fast_tier, a.fast_size) {
        (Some(_), Some(fast_size)) => {
            let fspec = online_policy("--fast-policy", a.fast_policy, a.fast_admission.0)?;
            Some(FastConfig {
                mode: a.write_mode,
                eviction: fspec.eviction,
                admission: fspec.admission,
                ..FastConfig::new(fast_size)
            })
        }
        _ => None,
    };
    let cfg = TierConfig {
        fast,
        block: u32::try_from(a.block).context("--block must be below 4 GiB")?,
        eviction: spec.eviction,
        admission: spec.admission,
        sequential_cutoff: a.sequential_cutoff,
        durability,
        ..TierConfig::new(size, ram)
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
    match &a.fast_tier {
        Some(fast_path) if cfg.fast.is_some() => {
            TieredVolume::create_with_fast(path, &cfg, fast_path, force)?
        }
        _ => TieredVolume::create(path, &cfg, force)?,
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
    if let (Some(fast_path), Some(fc)) = (&a.fast_tier, &cfg.fast) {
        outln!(
            "fast tier on {}: {} ({} of device), {}{}, {}",
            fast_path.display(),
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

/// Whether `path` holds a tiered volume (by its header: the serving layer's detection).
pub fn is_tiered(path: &Path) -> bool {
    matches!(hscm_serving::detect(path), Ok(hscm_serving::Kind::Tiered))
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

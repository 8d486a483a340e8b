//! `hscm volume create`'s tier flags: one group, flattened into the command, whose
//! defaults are the engine's own.

use std::path::PathBuf;

use anyhow::{bail, Context, Result};
use clap::Args;
use hscm_policy::cache::AdmissionName;
use hscm_tier::{FastConfig, TierConfig, WriteMode};
use hscm_vmsim::cache::PolicyName;

use crate::units::{self, human_bytes};
use crate::vmsim;

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

impl TierFlags {
    /// The tiered volume the flags ask for: `ram` bytes of DRAM over `size` bytes.
    pub fn config(&self, size: u64, ram: u64) -> Result<TierConfig> {
        let a = self;
        if ram > size {
            bail!(
            "--ram {} is larger than --size {}: a DRAM tier can hold at most the whole volume (for a volume wholly in RAM, leave out --ram)",
            human_bytes(ram),
            human_bytes(size)
        );
        }
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
        let config = TierConfig {
            fast,
            block: u32::try_from(a.block).context("--block must be below 4 GiB")?,
            eviction: spec.eviction,
            admission: spec.admission,
            sequential_cutoff: a.sequential_cutoff,
            ..TierConfig::new(size, ram)
        };
        Ok(config)
    }
}

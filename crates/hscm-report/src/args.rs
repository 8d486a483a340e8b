//! `hscm reproduce`'s flags: each default read from [`ReproduceParams::default`], so
//! `--help` shows what a run without flags does.

use std::path::PathBuf;

use anyhow::Result;
use hscm_sweep::units;

use crate::{ReproduceParams, SectionName};

/// Run every implemented experiment and write a report (Markdown, JSON, SVG plots)
/// with the published figure beside ours.
#[derive(clap::Args, Debug)]
pub struct ReproduceArgs {
    /// Where the report goes.
    #[arg(short = 'o', long, alias = "output", default_value_os_t = ReproduceParams::default().out)]
    pub out: PathBuf,
    /// Seconds per benchmark point.
    #[arg(long, default_value_t = ReproduceParams::default().seconds)]
    pub seconds: f64,
    /// Largest volume in the restart experiment.
    #[arg(long, default_value = units::size_arg(ReproduceParams::default().restart_size),
          value_parser = units::parse_size, allow_hyphen_values = true)]
    pub restart_size: u64,
    /// Small sizes and short runs: a smoke test of the whole pipeline (about three
    /// minutes on a 2-core VM; the key-value and volume sections take most of it).
    #[arg(long)]
    pub quick: bool,
    /// Run only these sections, comma-separated (default: all): volume, memsim, vmsim, ring, kv, nbd, fs, tier.
    #[arg(long, value_enum, value_delimiter = ',')]
    pub only: Vec<SectionName>,
    /// Directory of the memory traces the memsim section runs (shipped in the repo).
    #[arg(long, default_value_os_t = ReproduceParams::default().traces)]
    pub traces: PathBuf,
    /// Directory of real YCSB 0.17 operation traces the key-value section replays
    /// (ycsb-{a,b,3}-{load,run}.txt, recorded by scripts/ycsb-traces.sh; the main job
    /// records them). Without them the section says how to make them.
    #[arg(long, default_value_os_t = ReproduceParams::default().ycsb_traces)]
    pub ycsb_traces: PathBuf,
    /// Print every target the report checks, with the paper and figure it comes from
    /// (or the project's reason), and run nothing.
    #[arg(long)]
    pub list_targets: bool,
    /// With --list-targets: JSON instead of a Markdown table.
    #[arg(long, requires = "list_targets")]
    pub json: bool,
}

impl ReproduceArgs {
    /// Lists the targets, or runs every experiment and writes the report.
    pub fn run(self) -> Result<()> {
        if self.list_targets {
            return if self.json {
                hscm_sweep::out::json(&crate::targets_json())
            } else {
                out!("{}", crate::targets_markdown())?;
                Ok(())
            };
        }
        crate::reproduce(&ReproduceParams {
            out: self.out,
            seconds: self.seconds,
            restart_size: self.restart_size,
            quick: self.quick,
            only: self.only,
            traces: self.traces,
            ycsb_traces: self.ycsb_traces,
        })
    }
}

//! Every benchmark as an [`Experiment`]: its flag group, its run returning data, and
//! its text renderer, so the binary's `hscm bench …` and `hscm kv …` only choose one
//! and call [`run_and_print`](hscm_sweep::experiment::run_and_print). Flag groups that
//! live beside their benchmark (ring, nbd, fs, key-value) get their `impl` here; the
//! volume, restart and tier benchmarks' flags are defined here.

use std::path::PathBuf;

use anyhow::{Context, Result};
use clap::builder::TypedValueParser as _;
use hscm_sweep::experiment::Experiment;
use hscm_volume::Durability;

use crate::units;
use crate::volume::{self, TargetKind, Workload};
use crate::{fs, kv, nbd, nbd_strangers, ring, tier};

/// Throughput and latency of a volume against plain files with O_DIRECT (`odirect`),
/// buffered I/O (`pagecache`) and raw RAM copies (`memcpy`), all in the same run on
/// the same disk.
///
/// Example: hscm bench volume --workload randread --bs 4k --threads 1 --seconds 5
#[derive(clap::Args, Debug)]
pub struct VolumeBenchArgs {
    /// What each client thread issues.
    #[arg(long, value_enum, default_value = "randread")]
    pub workload: Workload,
    /// Request size; any size works (1000 exercises unaligned I/O).
    #[arg(long, default_value = "4k", value_parser = units::parse_size, allow_hyphen_values = true)]
    pub bs: u64,
    /// Concurrent client threads, each issuing one request at a time (at most 1024).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u64).range(1..=1024).map(|n| n as usize))]
    pub threads: usize,
    /// Measured time per target (after setup and warm-up).
    #[arg(long, default_value_t = 5.0)]
    pub seconds: f64,
    /// `immediate` (the default, as for volumes): each write is durable when it
    /// returns (baselines add O_DSYNC / fdatasync); `on-flush`: writes reach the
    /// device, nobody syncs.
    #[arg(long, default_value = "immediate")]
    pub durability: Durability,
    /// Working-set size (volume and baseline files).
    #[arg(long, default_value = "1G", value_parser = units::parse_size, allow_hyphen_values = true)]
    pub size: u64,
    /// Our volume's journal size (0, the default: writes go straight home, as the
    /// paper's design; see `hscm volume create --help`).
    #[arg(long, default_value = "0", value_parser = units::parse_size, allow_hyphen_values = true)]
    pub journal: u64,
    /// Directory on the disk to measure (default: the system temporary directory,
    /// $TMPDIR or /tmp); a scratch directory under it is removed afterwards, also on
    /// error or Ctrl-C.
    #[arg(long = "dir", alias = "path")]
    pub path: Option<PathBuf>,
    /// Which targets to run, comma-separated (default: all four).
    #[arg(long, value_enum, value_delimiter = ',')]
    pub targets: Vec<TargetKind>,
    /// Print one JSON object (a stable contract) instead of the table.
    #[arg(long)]
    pub json: bool,
}

impl Experiment for VolumeBenchArgs {
    type Output = volume::VolumeBenchResult;
    fn json(&self) -> bool {
        self.json
    }
    fn run(&self) -> Result<Self::Output> {
        volume::bench_volume(&volume::VolumeBenchSpec {
            workload: self.workload,
            bs: usize::try_from(self.bs)?,
            threads: self.threads,
            seconds: self.seconds,
            durability: self.durability,
            size: self.size,
            journal: self.journal,
            dir: self.path.clone(),
            targets: if self.targets.is_empty() {
                TargetKind::ALL.to_vec()
            } else {
                self.targets.clone()
            },
            progress: !self.json,
        })
    }
    fn print(&self, out: &Self::Output) -> Result<()> {
        volume::print_volume_result(out)
    }
}

/// Time to open, to first read and to fully warm, for several sizes, beside the
/// backend's raw sequential read speed.
#[derive(clap::Args, Debug)]
pub struct RestartArgs {
    /// Largest size measured (smaller ones, 256M and 1G, run first).
    #[arg(long, default_value = "8G", value_parser = units::parse_size, allow_hyphen_values = true)]
    pub size: u64,
    /// Directory on the disk to measure (default: the system temporary directory,
    /// $TMPDIR or /tmp); a scratch directory under it is removed afterwards.
    #[arg(long = "dir", alias = "path")]
    pub path: Option<PathBuf>,
    /// Print JSON (a stable contract) instead of text; a failure prints {"ok": false, "error": ...}.
    #[arg(long)]
    pub json: bool,
}

impl Experiment for RestartArgs {
    type Output = volume::RestartResult;
    fn json(&self) -> bool {
        self.json
    }
    fn run(&self) -> Result<Self::Output> {
        volume::bench_restart(
            &volume::restart_sizes(self.size),
            self.path.as_deref(),
            !self.json,
        )
    }
    fn print(&self, out: &Self::Output) -> Result<()> {
        volume::print_restart(out)
    }
}

/// The tiered volume: the cost of a DRAM hit against a read of the flat volume (4
/// KiB, one thread, same run), the share of a hot set a 1 GiB sequential scan leaves
/// in DRAM (with the default sequential cutoff and without), and a clean restart (hit
/// ratio of the first 10,000 requests against the steady state before shutdown and a
/// cold start; time to reopen and to refill DRAM).
#[derive(clap::Args, Debug)]
pub struct TierBenchArgs {
    /// Directory for the scratch volumes (about 1.4 GB; default: the system
    /// temporary directory). They are removed afterwards.
    #[arg(long)]
    pub dir: Option<PathBuf>,
    /// Blocks (4 KiB) DRAM holds in the recovery measurement: a million takes 4 GiB
    /// of memory and of scratch space.
    #[arg(long, default_value = "1M", value_parser = units::parse_count)]
    pub recovery_blocks: u64,
    /// Seconds per configuration and workload in the DRAM-share comparison.
    #[arg(long, default_value_t = 2.0)]
    pub seconds: f64,
    /// Print JSON (a stable contract) instead of text; a failure prints {"ok": false, "error": ...}.
    #[arg(long)]
    pub json: bool,
}

impl Experiment for TierBenchArgs {
    type Output = tier::TierBench;
    fn json(&self) -> bool {
        self.json
    }
    fn run(&self) -> Result<Self::Output> {
        tier::bench_tier(
            self.dir.as_deref(),
            self.recovery_blocks,
            self.seconds,
            !self.json,
        )
    }
    fn print(&self, out: &Self::Output) -> Result<()> {
        tier::print(out)
    }
}

impl Experiment for ring::RingBenchArgs {
    type Output = ring::RingReport;
    fn json(&self) -> bool {
        self.json
    }
    fn run(&self) -> Result<Self::Output> {
        ring::bench(self)
    }
    fn print(&self, out: &Self::Output) -> Result<()> {
        ring::print(out)
    }
}

impl Experiment for nbd::NbdBenchArgs {
    type Output = nbd::NbdBench;
    fn json(&self) -> bool {
        self.json
    }
    fn run(&self) -> Result<Self::Output> {
        nbd::bench(self)
    }
    fn print(&self, out: &Self::Output) -> Result<()> {
        nbd::print(out)
    }
}

impl Experiment for nbd_strangers::StrangersArgs {
    type Output = nbd_strangers::Strangers;
    fn json(&self) -> bool {
        self.json
    }
    /// The server under test is this same program, run as its own process.
    fn run(&self) -> Result<Self::Output> {
        let exe = std::env::current_exe().context("finding the hscm binary")?;
        nbd_strangers::bench(self, &exe)
    }
    fn print(&self, out: &Self::Output) -> Result<()> {
        nbd_strangers::print(out)
    }
}

impl Experiment for fs::FsBenchArgs {
    type Output = fs::FsBench;
    fn json(&self) -> bool {
        self.json
    }
    fn run(&self) -> Result<Self::Output> {
        fs::bench(self)
    }
    fn print(&self, out: &Self::Output) -> Result<()> {
        fs::print(out)
    }
}

impl Experiment for fs::FsWorkArgs {
    type Output = fs::FsWork;
    fn json(&self) -> bool {
        self.json
    }
    fn run(&self) -> Result<Self::Output> {
        fs::work_bench(self)
    }
    fn print(&self, out: &Self::Output) -> Result<()> {
        fs::work_print(out)
    }
}

impl Experiment for crate::remote::RemoteBenchArgs {
    type Output = crate::remote::RemoteBench;
    fn json(&self) -> bool {
        self.json
    }
    fn run(&self) -> Result<Self::Output> {
        crate::remote::bench(self)
    }
    fn print(&self, out: &Self::Output) -> Result<()> {
        print!("{}", out.render());
        Ok(())
    }
}

impl Experiment for crate::mirror::MirrorBenchArgs {
    type Output = crate::mirror::MirrorBench;
    fn json(&self) -> bool {
        self.json
    }
    fn run(&self) -> Result<Self::Output> {
        crate::mirror::bench(self)
    }
    fn print(&self, out: &Self::Output) -> Result<()> {
        print!("{}", out.render());
        Ok(())
    }
}

impl Experiment for kv::KvBenchArgs {
    type Output = kv::KvRuns;
    fn json(&self) -> bool {
        self.json
    }
    fn run(&self) -> Result<Self::Output> {
        let run = kv::run(&self.mode, &self.workload, &self.run, self.json)?;
        Ok(kv::KvRuns { runs: vec![run] })
    }
    fn print(&self, out: &Self::Output) -> Result<()> {
        kv::print_runs(&out.runs)
    }
}

impl Experiment for kv::KvCompareArgs {
    type Output = kv::KvRuns;
    fn json(&self) -> bool {
        self.json
    }
    fn run(&self) -> Result<Self::Output> {
        let runs = kv::compare_runs(
            &self.workloads,
            &self.modes,
            &self.run,
            self.repeat as usize,
            self.json,
        )?;
        Ok(kv::KvRuns { runs })
    }
    fn print(&self, out: &Self::Output) -> Result<()> {
        kv::print_runs(&out.runs)?;
        kv::print_medians(&out.runs)?;
        outln!("\n{}", kv::PAPER_SUMMARY)?;
        Ok(())
    }
}

//! `hscm sim memory …`, `hscm trace …` and `hscm bench memsim`.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{bail, Context, Result};
use clap::{Args, ValueEnum};
use hscm_memsim::{
    CacheConfig, CacheFilter, Geometry, Placement, PolicyKind, ReadyOrder, RunResult, SimConfig,
};
use hscm_model::MemPreset;
use hscm_trace::{
    Format, MemRef, SynthKind, SynthSpec, Synthesizer, Timing, TraceReader, TraceWriter,
};
use indicatif::{ProgressBar, ProgressStyle};
use serde::Serialize;

use crate::scratch::OutputFile;
use crate::units;

#[derive(Clone, Copy, ValueEnum)]
pub enum CachesMode {
    /// Caches for pre-cache traces (lackey, raw hscm), none for post-cache ones.
    Auto,
    On,
    Off,
}

#[derive(Clone, Copy, ValueEnum)]
pub enum PlacementArg {
    Random,
    DramFirst,
    Identity,
}

#[derive(Clone, Copy, ValueEnum)]
pub enum ReadyOrderArg {
    /// Activated requests first, then the oldest, whatever its command (Ramulator 2.0).
    Oldest,
    /// Row hits before precharges and activates, then the oldest.
    RowHitsFirst,
}

/// The memory system. Every default is read from `SimConfig::default()` (the seed
/// paper's system), the one place it is written; the device presets are named here.
#[derive(Args, Clone)]
pub struct MemConfigArgs {
    /// DRAM device preset (paper-dram, paper-pcm, ddr3-1600k, ddr4-2400, optane-like,
    /// cxl-like).
    #[arg(long, default_value = "paper-dram")]
    pub dram: String,
    /// Slow device preset (same names).
    #[arg(long, default_value = "paper-pcm")]
    pub pcm: String,
    /// DRAM capacity (e.g. 1G).
    #[arg(long, default_value = units::size_arg(SimConfig::default().dram_bytes), value_parser = units::parse_size, allow_hyphen_values = true)]
    pub dram_size: u64,
    /// Slow-device (PCM) capacity (e.g. 3G).
    #[arg(long, default_value = units::size_arg(SimConfig::default().pcm_bytes), value_parser = units::parse_size, allow_hyphen_values = true)]
    pub pcm_size: u64,
    /// Memory channels per device.
    #[arg(long, default_value_t = SimConfig::default().geometry.channels)]
    pub channels: u32,
    /// Ranks per channel.
    #[arg(long, default_value_t = SimConfig::default().geometry.ranks)]
    pub ranks: u32,
    /// Banks per rank [default: the DRAM preset's: 8 for DDR3 and the paper's
    /// devices, 16 for DDR4].
    #[arg(long)]
    pub banks: Option<u32>,
    /// Row (page) size per rank, bytes, e.g. 8k [default: the DRAM preset's: the
    /// paper's 4 KiB, 8 KiB for the x8 DDR3 and DDR4 parts].
    #[arg(long, value_parser = units::parse_size, allow_hyphen_values = true)]
    pub row: Option<u64>,
    /// Address mapping, most significant field first.
    #[arg(long, default_value = "ro-ra-ba-ch-co")]
    pub mapping: String,
    /// Core caches: auto (only for traces that are not already post-cache), on or off.
    #[arg(long, value_enum, default_value = "auto")]
    pub caches: CachesMode,
    /// Where a page lands on first touch.
    #[arg(long, value_enum, default_value = "random")]
    pub placement: PlacementArg,
    /// Core cycles per instruction without memory stalls.
    #[arg(long, default_value_t = SimConfig::default().core.cpi)]
    pub cpi: f64,
    /// Controller read queue per channel: also the bound on outstanding posted reads
    /// (store misses) before the core stalls.
    #[arg(long, default_value_t = SimConfig::default().controller.read_queue)]
    pub read_queue: usize,
    /// Controller write queue per channel; writes are served from more than 80% full
    /// until fewer than 20% wait (Ramulator 2.0's watermarks), and whenever no read
    /// waits.
    #[arg(long, default_value_t = SimConfig::default().controller.write_queue)]
    pub write_queue: usize,
    /// Order among commands ready at the same clock: oldest (both peers' FR-FCFS, a
    /// row hit wins by being ready sooner) or row-hits-first [default: oldest].
    #[arg(long, value_enum)]
    pub ready_order: Option<ReadyOrderArg>,
    /// WARM migration threshold (the paper: 1).
    #[arg(long, default_value_t = SimConfig::default().warm.threshold)]
    pub warm_threshold: u32,
    /// WARM counter table budget in bytes (the paper: 4096).
    #[arg(long, default_value_t = SimConfig::default().warm.counter_bytes)]
    pub warm_counter_bytes: usize,
    /// WARM remap table budget in bytes (the paper: 16384).
    #[arg(long, default_value_t = SimConfig::default().warm.remap_bytes)]
    pub warm_remap_bytes: usize,
    /// RaPP: the MQ queue at which a PCM page migrates.
    #[arg(long, default_value_t = SimConfig::default().rapp.threshold_queue)]
    pub rapp_threshold: usize,
    /// RaPP: the lifetime of a page's MQ entry, in accesses.
    #[arg(long, default_value_t = SimConfig::default().rapp.lifetime)]
    pub rapp_lifetime: u64,
    /// Seed of the random first-touch placement.
    #[arg(long, default_value_t = SimConfig::default().seed)]
    pub seed: u64,
}

impl MemConfigArgs {
    pub fn to_config(&self, post_cache: bool) -> Result<SimConfig> {
        let dram = MemPreset::from_name(&self.dram)?.profile();
        let mut cfg = SimConfig {
            dram,
            pcm: MemPreset::from_name(&self.pcm)?.profile(),
            dram_bytes: self.dram_size,
            pcm_bytes: self.pcm_size,
            geometry: Geometry {
                channels: self.channels,
                ranks: self.ranks,
                banks: self.banks.unwrap_or(dram.banks),
                row_bytes: self.row.unwrap_or(dram.row_bytes),
                mapping: Geometry::parse_mapping(&self.mapping)?,
            },
            placement: match self.placement {
                PlacementArg::Random => Placement::Random,
                PlacementArg::DramFirst => Placement::DramFirst,
                PlacementArg::Identity => Placement::Identity,
            },
            seed: self.seed,
            ..SimConfig::default()
        };
        cfg.caches = match self.caches {
            CachesMode::On => Some(CacheConfig::default()),
            CachesMode::Off => None,
            CachesMode::Auto => (!post_cache).then(CacheConfig::default),
        };
        cfg.core.cpi = self.cpi;
        cfg.controller =
            hscm_memsim::ControllerConfig::with_queues(self.read_queue, self.write_queue);
        if let Some(order) = self.ready_order {
            cfg.controller.ready_order = match order {
                ReadyOrderArg::Oldest => ReadyOrder::Oldest,
                ReadyOrderArg::RowHitsFirst => ReadyOrder::RowHitsFirst,
            };
        }
        cfg.warm.threshold = self.warm_threshold;
        cfg.warm.counter_bytes = self.warm_counter_bytes;
        cfg.warm.remap_bytes = self.warm_remap_bytes;
        cfg.rapp.threshold_queue = self.rapp_threshold;
        cfg.rapp.lifetime = self.rapp_lifetime;
        cfg.validate()?;
        Ok(cfg)
    }
}

/// `hscm sim memory compare`'s parameters (also `hscm.sim.memory`'s, and a sweep's).
#[derive(Args, Clone)]
pub struct CompareArgs {
    /// Trace file (plain or zstd-compressed).
    #[arg(long)]
    pub trace: PathBuf,
    /// lackey, ramulator, dramsim3, nvmain, dramsys or hscm; detected from the
    /// content when omitted.
    #[arg(long, value_parser = parse_format)]
    pub format: Option<Format>,
    /// Policies to run, comma-separated (default: all five).
    #[arg(long, alias = "policy", value_delimiter = ',', value_parser = parse_policy)]
    pub policies: Vec<PolicyKind>,
    #[command(flatten)]
    pub config: MemConfigArgs,
    /// One JSON object (stable contract): {"trace", "config", "policies": [...]}.
    #[arg(long)]
    pub json: bool,
}

impl CompareArgs {
    /// The policies asked for, or all five.
    pub fn policies(&self) -> Vec<PolicyKind> {
        if self.policies.is_empty() {
            PolicyKind::ALL.to_vec()
        } else {
            self.policies.clone()
        }
    }
}

pub fn parse_format(s: &str) -> Result<Format, String> {
    Format::from_name(s)
        .ok_or_else(|| format!("unknown format {s:?} (known: {})", Format::NAMES.join(", ")))
}

pub fn parse_policy(s: &str) -> Result<PolicyKind, String> {
    PolicyKind::from_name(s).ok_or_else(|| {
        let names: Vec<_> = PolicyKind::ALL.iter().map(|p| p.name()).collect();
        format!("unknown policy {s:?} (known: {})", names.join(", "))
    })
}

#[derive(Serialize)]
pub struct CompareOutput {
    pub trace: String,
    pub format: String,
    pub config: SimConfig,
    pub policies: Vec<RunResult>,
}

/// Runs `policies` over the trace at `path`, in parallel, with one progress line.
pub fn compare(
    path: &Path,
    format: Option<Format>,
    cfg_args: &MemConfigArgs,
    policies: &[PolicyKind],
    progress: bool,
) -> Result<CompareOutput> {
    let probe = TraceReader::open(path, format)?;
    let (fmt, post_cache) = (probe.format(), probe.post_cache());
    drop(probe);
    let cfg = cfg_args.to_config(post_cache)?;
    let bar = progress.then(|| {
        crate::par::spinner(
            format!("{} × {} policies", path.display(), policies.len()),
            "references simulated",
        )
    });
    let results = crate::par::map(policies, |&policy| -> Result<RunResult> {
        let reader = TraceReader::open(path, Some(fmt))?;
        let timing = reader.timing();
        let mut tick = crate::par::ticker(bar.as_ref());
        Ok(hscm_memsim::run(&cfg, policy, reader, timing, &mut tick)?)
    });
    if let Some(b) = bar {
        b.finish_and_clear();
    }
    let mut out = Vec::new();
    for (p, r) in policies.iter().zip(results) {
        out.push(r.with_context(|| format!("policy {}", p.name()))?);
    }
    hscm_memsim::normalise(&mut out);
    Ok(CompareOutput {
        trace: path.display().to_string(),
        format: fmt.name().to_string(),
        config: cfg,
        policies: out,
    })
}

pub fn print_compare(c: &CompareOutput) -> anyhow::Result<()> {
    let norm = |v: Option<f64>| v.map_or("-".to_string(), |v| format!("{v:.3}"));
    outln!(
        "trace {} ({}), DRAM {} + PCM {} ({} + {}), caches {}",
        c.trace,
        c.format,
        units::human_bytes(c.config.dram_bytes),
        units::human_bytes(c.config.pcm_bytes),
        c.config.dram.name,
        c.config.pcm.name,
        if c.config.caches.is_some() {
            "L1I/L1D 32 KiB, L2 512 KiB"
        } else {
            "none (post-cache trace)"
        }
    )?;
    outln!(
        "{:<10} {:>12} {:>6} {:>9} {:>9} {:>10} {:>8} {:>8} {:>8} {:>9} {:>8}",
        "policy",
        "cycles",
        "IPC",
        "rd ns",
        "rd p99",
        "energy mJ",
        "energy",
        "perf",
        "EDP",
        "migr.",
        "PCM hit"
    )?;
    for r in &c.policies {
        outln!(
            "{:<10} {:>12} {:>6} {:>9.1} {:>9.1} {:>10.4} {:>8} {:>8} {:>8} {:>9} {:>8}",
            r.policy,
            r.cycles,
            r.ipc.map_or("-".into(), |v| format!("{v:.3}")),
            r.read_latency_ns.mean,
            r.read_latency_ns.p99,
            r.energy_j["total"] * 1e3,
            norm(r.norm.map(|n| n.energy)),
            norm(r.norm.map(|n| n.perf)),
            norm(r.norm.map(|n| n.edp)),
            r.migrations,
            r.row_hit_rate
                .get("pcm")
                .map_or("-".into(), |v| format!("{:.1}%", v * 100.0)),
        )?;
    }
    outln!("energy, perf and EDP are normalised to dram-only (perf = its runtime / ours).")?;
    outln!(
        "Energy is modelled (Sun et al. 2020's Table 2 per-bit energies, DDR3 datasheet standby and"
    )?;
    outln!("refresh currents; PCM standby power is an assumption): see docs/memsim.md.")?;
    Ok(())
}

/// `hscm trace convert`.
pub struct ConvertSpec<'a> {
    pub input: &'a Path,
    pub from: Option<Format>,
    pub output: &'a Path,
    pub start_pc: Option<u64>,
    pub instructions: Option<u64>,
    pub post_cache: bool,
    pub progress: bool,
}

#[derive(Serialize)]
pub struct ConvertReport {
    pub input_references: u64,
    pub skipped_references: u64,
    pub instructions: u64,
    pub written: u64,
    pub output: String,
}

/// A trace being written: nothing appears at its path until [`finish_writer`].
struct PendingTrace {
    writer: TraceWriter<zstd::Encoder<'static, BufWriter<File>>>,
    output: OutputFile,
    path: std::path::PathBuf,
}

impl PendingTrace {
    fn write(&mut self, m: &hscm_trace::MemRef) -> Result<()> {
        self.writer
            .write(m)
            .with_context(|| format!("cannot write {}", self.path.display()))
    }
}

fn trace_writer(path: &Path, timing: Timing, post_cache: bool) -> Result<PendingTrace> {
    let output = OutputFile::create(path)?;
    let enc = zstd::Encoder::new(BufWriter::new(output.file()?), 9)?;
    Ok(PendingTrace {
        writer: TraceWriter::new(enc, timing, post_cache)
            .with_context(|| format!("cannot write {}", path.display()))?,
        output,
        path: path.to_path_buf(),
    })
}

fn finish_writer(w: PendingTrace) -> Result<()> {
    let what = || format!("cannot write {}", w.path.display());
    let enc = w.writer.finish().with_context(what)?;
    enc.finish()
        .with_context(what)?
        .flush()
        .with_context(what)?;
    w.output.commit()
}

pub fn convert(spec: &ConvertSpec) -> Result<ConvertReport> {
    let reader = if spec.input == Path::new("-") {
        TraceReader::from_reader(Box::new(std::io::stdin()), "<stdin>", spec.from)?
    } else {
        TraceReader::open(spec.input, spec.from)?
    };
    let timing = reader.timing();
    if spec.post_cache && reader.post_cache() {
        bail!(
            "{} is already a post-cache trace; drop --post-cache",
            spec.input.display()
        );
    }
    let mut w = trace_writer(spec.output, timing, spec.post_cache || reader.post_cache())?;
    let mut filter = spec
        .post_cache
        .then(|| CacheFilter::new(&CacheConfig::default()));
    let mut started = spec.start_pc.is_none();
    let (mut seen, mut skipped, mut instructions) = (0u64, 0u64, 0u64);
    let mut out: Vec<MemRef> = Vec::new();
    let bar = spec.progress.then(|| {
        let b = ProgressBar::new_spinner();
        b.set_style(
            ProgressStyle::with_template("{spinner} {human_pos} references read ({per_sec}) {msg}")
                .expect("valid"),
        );
        b
    });
    for r in reader {
        let r = r?;
        seen += 1;
        if seen & 0xffff == 0 {
            if let Some(b) = &bar {
                b.set_position(seen);
                b.set_message(if started {
                    format!("{instructions} instructions kept")
                } else {
                    "waiting for the start address".into()
                });
            }
        }
        if !started {
            if r.kind == hscm_trace::Access::Fetch && Some(r.addr) == spec.start_pc {
                started = true;
            } else {
                skipped += 1;
                continue;
            }
        }
        if let Some(limit) = spec.instructions {
            if timing == Timing::Instructions && instructions + r.delta > limit {
                break;
            }
        }
        instructions += r.delta;
        match filter.as_mut() {
            Some(f) => {
                f.push(&r, &mut out);
                for m in out.drain(..) {
                    w.write(&m)?;
                }
            }
            None => w.write(&r)?,
        }
    }
    if let Some(b) = bar {
        b.finish_and_clear();
    }
    if !started {
        bail!(
            "the start address {:#x} never appeared as an instruction fetch in {}",
            spec.start_pc.unwrap_or(0),
            spec.input.display()
        );
    }
    let written = w.writer.records();
    finish_writer(w)?;
    Ok(ConvertReport {
        input_references: seen,
        skipped_references: skipped,
        instructions,
        written,
        output: spec.output.display().to_string(),
    })
}

#[derive(Clone, Copy, ValueEnum)]
pub enum SynthArg {
    Mix,
    Stream,
    Stride,
    Zipf,
    HotWrites,
}

#[derive(Args)]
pub struct GenArgs {
    /// Pattern: mix (60% streams + 40% random by default), stream, stride, zipf,
    /// hot-writes (writes concentrated on a few rows, the paper's Figure 4c-d).
    #[arg(long, value_enum, default_value = "mix")]
    pub kind: SynthArg,
    /// Requests to generate (e.g. 1M, 5M).
    #[arg(long, default_value = "1M", value_parser = units::parse_count)]
    pub requests: u64,
    /// Bytes of memory the requests range over (e.g. 256M).
    #[arg(long, default_value = "256M", value_parser = units::parse_size, allow_hyphen_values = true)]
    pub footprint: u64,
    /// Share of writes.
    #[arg(long, default_value_t = 0.28)]
    pub writes: f64,
    /// Instructions between requests.
    #[arg(long, default_value_t = 20)]
    pub gap: u64,
    /// mix: share from streams; hot-writes: share of writes to the hot rows.
    #[arg(long, default_value_t = 0.6)]
    pub share: f64,
    /// stream: number of streams; stride: bytes; hot-writes: hot rows; zipf: s × 100.
    #[arg(long, default_value_t = 4)]
    pub param: u64,
    /// Seed of the random first-touch placement.
    #[arg(long, default_value_t = SimConfig::default().seed)]
    pub seed: u64,
    /// Output trace (hscm binary format, zstd-compressed).
    #[arg(short, long, alias = "out")]
    pub output: PathBuf,
}

pub fn synth_spec(a: &GenArgs) -> Result<SynthSpec> {
    if !(0.0..=1.0).contains(&a.writes) || !(0.0..=1.0).contains(&a.share) {
        bail!("--writes and --share are fractions between 0 and 1");
    }
    let kind = match a.kind {
        SynthArg::Mix => SynthKind::Mix {
            stream_share: a.share,
        },
        SynthArg::Stream => SynthKind::Stream {
            streams: a.param.clamp(1, 1024) as u32,
        },
        SynthArg::Stride => SynthKind::Stride {
            stride: a.param.max(64),
        },
        SynthArg::Zipf => SynthKind::Zipf {
            s: a.param as f64 / 100.0,
        },
        SynthArg::HotWrites => SynthKind::HotWrites {
            hot_rows: a.param.max(1),
            hot_share: a.share,
        },
    };
    if a.footprint < 4096 {
        bail!("--footprint must be at least one 4 KiB row");
    }
    Ok(SynthSpec {
        kind,
        requests: a.requests,
        footprint: a.footprint,
        write_share: a.writes,
        gap: a.gap,
        seed: a.seed,
    })
}

pub fn generate(spec: SynthSpec, output: &Path) -> Result<u64> {
    write_post_cache(output, Timing::Instructions, Synthesizer::new(spec))
}

/// Writes post-cache references to `output` in hscm's binary format (zstd); returns
/// how many.
pub(crate) fn write_post_cache(
    output: &Path,
    timing: Timing,
    refs: impl Iterator<Item = MemRef>,
) -> Result<u64> {
    let mut w = trace_writer(output, timing, true)?;
    for r in refs {
        w.write(&r)?;
    }
    let n = w.writer.records();
    finish_writer(w)?;
    Ok(n)
}

#[derive(Serialize)]
pub struct MemsimBenchRun {
    pub policy: String,
    pub cpu_s: f64,
    pub wall_s: f64,
    pub requests_per_cpu_s: f64,
}

/// Contract fields first (`requests`, `cpu_s`, `requests_per_cpu_s`, `peak_rss_mb` are
/// the DRAM-only run), then every run and the baselines measured in the same run.
#[derive(Serialize)]
pub struct MemsimBench {
    pub requests: u64,
    pub cpu_s: f64,
    pub requests_per_cpu_s: f64,
    pub peak_rss_mb: f64,
    pub runs: Vec<MemsimBenchRun>,
    /// Decoding the same trace without simulating: the floor any simulator pays.
    pub decode_only_per_cpu_s: f64,
    /// CPU time of the hybrid WARM run over the DRAM-only run (target <= 1.5).
    pub warm_cpu_ratio: f64,
    pub dram_preset: String,
}

/// User + system CPU time of this process, all its threads.
pub fn cpu_seconds() -> f64 {
    // Nanosecond resolution: /proc's clock ticks (10 ms) made short runs' ratios jump
    // between 0.5x, 1x and 1.5x.
    let t = rustix::time::clock_gettime(rustix::time::ClockId::ProcessCPUTime);
    t.tv_sec as f64 + t.tv_nsec as f64 * 1e-9
}

/// Peak resident set size of this process (VmHWM), in MB.
pub fn peak_rss_mb() -> f64 {
    std::fs::read_to_string("/proc/self/status")
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
        .map_or(0.0, |kb| kb / 1024.0)
}

pub fn bench_memsim(requests: u64, progress: bool) -> Result<MemsimBench> {
    let dir = crate::scratch::Scratch::new("memsim", None)?;
    let path = dir.path().join("bench.hscm.zst");
    generate(SynthSpec::benchmark_mix(requests), &path)?;
    let reader = TraceReader::open(&path, None)?;
    let c0 = cpu_seconds();
    let mut n = 0u64;
    for r in reader {
        r?;
        n += 1;
    }
    let decode_cpu = cpu_seconds() - c0;
    let args = MemConfigArgs {
        dram: "ddr3-1600k".into(),
        ..MemConfigArgs::default()
    };
    let mut runs = Vec::new();
    for policy in [PolicyKind::DramOnly, PolicyKind::Warm] {
        let cfg = args.to_config(true)?;
        let reader = TraceReader::open(&path, None)?;
        let timing = reader.timing();
        let bar = progress.then(|| {
            let b = ProgressBar::new(requests);
            b.set_style(
                ProgressStyle::with_template(
                    "{msg:10} {bar:40} {human_pos}/{human_len} ({per_sec})",
                )
                .expect("valid"),
            );
            b.set_message(policy.name());
            b
        });
        let (c0, w0) = (cpu_seconds(), Instant::now());
        hscm_memsim::run(&cfg, policy, reader, timing, &mut |k| {
            if let Some(b) = &bar {
                b.set_position(k)
            }
        })?;
        let (cpu, wall) = (cpu_seconds() - c0, w0.elapsed().as_secs_f64());
        if let Some(b) = bar {
            b.finish_and_clear();
        }
        runs.push(MemsimBenchRun {
            policy: policy.name().into(),
            cpu_s: cpu,
            wall_s: wall,
            requests_per_cpu_s: requests as f64 / cpu.max(1e-9),
        });
    }
    Ok(MemsimBench {
        requests: n,
        cpu_s: runs[0].cpu_s,
        requests_per_cpu_s: runs[0].requests_per_cpu_s,
        peak_rss_mb: peak_rss_mb(),
        decode_only_per_cpu_s: n as f64 / decode_cpu.max(1e-9),
        warm_cpu_ratio: runs[1].cpu_s / runs[0].cpu_s.max(1e-9),
        runs,
        dram_preset: "ddr3-1600k".into(),
    })
}

impl Default for MemConfigArgs {
    /// The flags' defaults, themselves read from `SimConfig::default()`.
    fn default() -> Self {
        crate::flag_defaults()
    }
}

/// Prints `hscm bench memsim` as text: one line per policy, then decoding alone.
pub fn print_bench(r: &MemsimBench) -> Result<()> {
    for run in &r.runs {
        outln!(
            "{:<10} {:>8.2} M requests/CPU-s ({:.2} CPU-s for {} requests)",
            run.policy,
            run.requests_per_cpu_s / 1e6,
            run.cpu_s,
            r.requests
        )?;
    }
    outln!(
        "decode only {:.2} M/CPU-s; WARM/DRAM-only CPU ratio {:.2}; peak RSS {:.1} MB",
        r.decode_only_per_cpu_s / 1e6,
        r.warm_cpu_ratio,
        r.peak_rss_mb
    )?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_memory_flags_default_to_the_simulators_own_defaults() {
        let from_flags = MemConfigArgs::default().to_config(false).unwrap();
        assert_eq!(from_flags, SimConfig::default());
    }
}

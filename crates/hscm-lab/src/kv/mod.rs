//! `hscm kv`: the energy-aware multi-device key-value store (after the Sprint-AEP paper) — create,
//! check, bench one mode on one workload, compare every mode on every workload.
//! `mod.rs` holds the flags, a run's figures and one run; `replay` the operation
//! traces a run replays; `compare` the comparisons across modes and their summaries.

mod compare;
mod replay;

pub use compare::{
    compare_runs, energy_saving, idle_read_reduction, median, paired_median, partner,
    print_medians, print_runs, run_cells, saving_vs, KvRuns, PAPER_SUMMARY,
};
use replay::Replay;

use crate::{closed_loop, Measured, Phase, Step};
use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use clap::builder::TypedValueParser as _;
use hscm_kv::{KvOptions, KvStats, KvStore, Mode, Primaries, Trial};
use hscm_model::{PowerProfile, Timeline, POWER_PRESETS};
use hscm_trace::{ycsb_key, KvOp, YcsbGen, YcsbSpec};
use serde::Serialize;

use crate::units::parse_size;

/// Operations in a generated run phase when --ops is not given.
pub const DEFAULT_OPS: u64 = 120_000;
/// Warm-up operations of a generated workload when --warmup-ops is not given.
pub const DEFAULT_WARMUP_OPS: u64 = 40_000;

pub const ENERGY_NOTE: &str =
    "energy is modelled from each device's measured busy/idle timeline with the power profile's \
    states; it is not metered";

#[derive(clap::Args, Clone)]
pub struct KvRunArgs {
    /// Records loaded before the run (the paper used 20 GB of 1 KB records). May be 0
    /// with --trace: the store then starts empty (give a YCSB load phase as
    /// --load-trace).
    #[arg(long, default_value = "20000", value_parser = crate::units::parse_count)]
    pub records: u64,
    /// Operations in the measured run phase (all client threads together). Default:
    /// 120000 for a generated workload, the whole trace for --trace (a smaller count
    /// replays the trace's first operations).
    #[arg(long, value_parser = crate::units::parse_count)]
    pub ops: Option<u64>,
    /// Pause after each request of each client thread, in µs. Default: the
    /// workload's (50 for a-t, b-t and 3-t, else 0); 0 for --trace.
    #[arg(long)]
    pub gap_us: Option<u64>,
    /// Unmeasured operations of the same workload in the same mode before the
    /// measured phase (repeated until primary trials are over), so access counts,
    /// caches and primaries reach a steady state, as on a store in service. Default
    /// 40000. With --trace: the trace's first operations, replayed once (default 0),
    /// and the measured phase replays the ones after them.
    #[arg(long, value_parser = crate::units::parse_count)]
    pub warmup_ops: Option<u64>,
    /// Client threads (the paper used 20 on 96 cores; this default suits 2 cores).
    #[arg(long, default_value_t = 4, value_parser = clap::value_parser!(u64).range(1..=1024).map(|n| n as usize))]
    pub threads: usize,
    /// Value size in bytes (at most 64 MiB).
    #[arg(long, default_value_t = 1000, value_parser = clap::value_parser!(u64).range(1..=64 << 20).map(|n| n as usize))]
    pub value_len: usize,
    /// Devices (each a directory holding its logs).
    #[arg(long, default_value_t = 4)]
    pub devices: usize,
    /// Power profile: a preset (optane-aep, nvme-apst, cxl-mem) or a JSON file with
    /// the fields name, source, idle_w, active_w, peak_w, hold_s, decay_s.
    #[arg(long, default_value = "optane-aep")]
    pub power: String,
    /// Primaries in Sprint modes: `auto` (trials with alpha) or a fixed count.
    #[arg(long, default_value = "auto")]
    pub primaries: String,
    /// Keep a trial primary when write+read throughput gain reaches this.
    #[arg(long, default_value_t = KvOptions::default().alpha)]
    pub alpha: f64,
    /// Length of each trial measurement, milliseconds.
    #[arg(long, default_value_t = KvOptions::default().trial_window.as_millis() as u64)]
    pub trial_ms: u64,
    /// Brackets per primary trial (k, then k+1 and k again this many times); every
    /// bracket must show the gain. 1 is the paper's single trial.
    #[arg(long, default_value_t = KvOptions::default().trial_rounds as u64, value_parser = clap::value_parser!(u64).range(1..=10))]
    pub trial_rounds: u64,
    /// Buffer log capacity per idle device.
    #[arg(long, default_value = crate::units::size_arg(KvOptions::default().buffer_bytes), value_parser = parse_size, allow_hyphen_values = true)]
    pub buffer: u64,
    /// A log sync writes home in runs of at most this many bytes, each fdatasync'ed
    /// before the next, so clients' own syncs do not queue behind one large append
    /// (use a size above the buffer for one append per log, as before).
    #[arg(long, default_value = crate::units::size_arg(KvOptions::default().sync_piece), value_parser = parse_size, allow_hyphen_values = true)]
    pub sync_piece: u64,
    /// Cache capacity per idle device (default: the share of the dataset each idle
    /// device holds, as a 128 GB primary AEP could cache its idle devices' data).
    #[arg(long, value_parser = parse_size, allow_hyphen_values = true)]
    pub cache: Option<u64>,
    /// Replay this operation trace as the measured run phase instead of a generated
    /// workload: one `READ|UPDATE|INSERT|DELETE KEY [NBYTES]` per line, or the lines
    /// YCSB's BasicDB binding prints (`READ usertable user123 [ <all fields>]`; writes
    /// without NBYTES are --value-len bytes). --records still loads first; the run is
    /// labelled with the trace's file name, and reads of keys never loaded are counted
    /// (`reads_not_found`).
    #[arg(long)]
    pub trace: Option<PathBuf>,
    /// Replay this trace (unmeasured) after loading --records and before the run: a
    /// YCSB load phase (`ycsb load … -db site.ycsb.BasicDB`).
    #[arg(long)]
    pub load_trace: Option<PathBuf>,
    /// Where the devices go: a scratch directory under it (default: the system
    /// temporary directory, $TMPDIR or /tmp), removed afterwards, also on error or Ctrl-C.
    #[arg(long, alias = "path")]
    pub dir: Option<PathBuf>,
    /// Workload seed.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
}

#[derive(clap::Args)]
pub struct KvBenchArgs {
    /// standard | sprint | sprint-nopre | sprint-noparallel
    #[arg(long, default_value = "sprint")]
    pub mode: String,
    /// a | b | 3 (50/95/33 % reads, no gap) or a-t | b-t | 3-t (a 50 µs gap)
    #[arg(long, default_value = "a-t")]
    pub workload: String,
    #[command(flatten)]
    pub run: KvRunArgs,
    /// Print one JSON object (a stable contract: {"runs": [...]}) instead of the table; a failure prints {"ok": false, "error": ...}.
    #[arg(long)]
    pub json: bool,
}

#[derive(clap::Args)]
pub struct KvCompareArgs {
    /// Workloads, comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "a-t,b-t,3-t,a,b,3")]
    pub workloads: Vec<String>,
    /// Modes, comma-separated.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "standard,sprint,sprint-nopre,sprint-noparallel"
    )]
    pub modes: Vec<String>,
    /// Runs of every mode per workload, interleaved (each repetition its own seed,
    /// the mode order reversed every other time); summaries take the median over
    /// repetitions of each paired comparison, so one slow spell of a shared machine
    /// does not decide a verdict.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u64).range(1..=20))]
    pub repeat: u64,
    #[command(flatten)]
    pub run: KvRunArgs,
    /// Print one JSON object (a stable contract: {"runs": [...]}) instead of the table; a failure prints {"ok": false, "error": ...}.
    #[arg(long)]
    pub json: bool,
}

#[derive(Serialize, Clone, Debug)]
pub struct Energy {
    pub execution: f64,
    pub equal_time: f64,
}

/// One measured run. Field names are the `--json` contract.
#[derive(Serialize, Clone, Debug)]
pub struct KvRun {
    pub workload: String,
    pub mode: String,
    /// Repetition this run belongs to (`kv compare --repeat`); 0 for a single run.
    pub rep: usize,
    pub ops: u64,
    pub seconds: f64,
    pub ops_per_s: f64,
    pub read_ops_per_s: f64,
    pub write_ops_per_s: f64,
    pub read_p99_us: f64,
    pub write_p99_us: f64,
    pub read_mean_us: f64,
    pub write_mean_us: f64,
    pub energy_j: Energy,
    /// Equal-time energy (J) x (mean read + mean write latency) (s), as the paper.
    pub edp: f64,
    /// Seconds the equal-time energy covers.
    pub equal_time_s: f64,
    pub idle_device_reads: u64,
    /// The replayed trace (--trace), else null.
    pub trace: Option<String>,
    /// Pause after each request of each client, µs: the workload's, or --gap-us; 0 for
    /// a replay unless --gap-us asks.
    pub gap_us: u64,
    /// Reads in the measured phase: found + not found.
    pub reads: u64,
    /// Reads of keys the store does not hold (never loaded, or deleted).
    pub reads_not_found: u64,
    pub updates: u64,
    pub inserts: u64,
    pub deletes: u64,
    /// Distinct keys the replayed trace reads, updates or deletes that neither
    /// --records, --load-trace nor an earlier insert of the trace put in the store.
    pub keys_never_loaded: u64,
    pub device_reads: Vec<u64>,
    pub device_busy_fraction: Vec<f64>,
    /// Primary devices at the end of the run.
    pub primaries: usize,
    pub trials: Vec<Trial>,
    pub prefetches: u64,
    pub prefetched_values: u64,
    pub log_syncs: u64,
    /// MB/s of buffer logs synced home, wall time of sync batches.
    pub sync_mbps: f64,
    pub cache_hits: u64,
    pub buffer_hits: u64,
    pub power_profile: String,
    pub energy_note: &'static str,
    #[serde(skip)]
    pub timelines: Vec<Timeline>,
    #[serde(skip)]
    pub window: (u64, u64),
    #[serde(skip)]
    pub profile: Option<PowerProfile>,
}

impl KvRun {
    /// Recomputes equal-time energy and EDP over `seconds` from the run's start.
    pub fn set_equal_time(&mut self, seconds: f64) {
        let p = self.profile.as_ref().expect("profile kept");
        let end = self.window.0 + (seconds * 1e9) as u64;
        self.energy_j.equal_time = self
            .timelines
            .iter()
            .map(|t| p.energy(t, self.window.0, end))
            .sum();
        self.equal_time_s = seconds;
        self.edp = self.energy_j.equal_time * (self.read_mean_us + self.write_mean_us) * 1e-6;
    }
}

pub fn power_profile(spec: &str) -> Result<PowerProfile> {
    if let Some(p) = PowerProfile::preset(spec) {
        return Ok(p);
    }
    let path = Path::new(spec);
    if !path.exists() {
        bail!(
            "--power {spec:?}: neither a preset ({}) nor a file",
            POWER_PRESETS.join(", ")
        );
    }
    let text = std::fs::read_to_string(path).with_context(|| format!("reading {spec}"))?;
    Ok(PowerProfile::from_json(&text)?)
}

fn mode(name: &str) -> Result<Mode> {
    Mode::from_name(name).with_context(|| {
        format!("unknown mode {name:?}; use standard, sprint, sprint-nopre or sprint-noparallel")
    })
}

/// Store options for a run; `records` is how many records the store holds after
/// loading (--records, plus what a --load-trace inserts), which sizes the caches.
fn options(mode: Mode, a: &KvRunArgs, records: u64) -> Result<KvOptions> {
    let primaries = match a.primaries.as_str() {
        "auto" => Primaries::Auto,
        n => Primaries::Fixed(
            n.parse()
                .ok()
                .filter(|&k| k >= 1)
                .with_context(|| format!("--primaries {n:?}: use auto or a count >= 1"))?,
        ),
    };
    let per_device = records * (a.value_len as u64 + 40) / a.devices.max(1) as u64;
    Ok(KvOptions {
        mode,
        max_value: (a.value_len * 4).max(1 << 20),
        buffer_bytes: a.buffer,
        sync_piece: a.sync_piece.max(1),
        cache_bytes: a.cache.unwrap_or(per_device + (1 << 20)),
        primaries,
        trial_window: Duration::from_millis(a.trial_ms),
        trial_rounds: a.trial_rounds as usize,
        alpha: a.alpha,
        ..KvOptions::default()
    })
}

fn value_for(key: &str, len: usize, round: u64) -> Vec<u8> {
    let seed = crc32c::crc32c(key.as_bytes()) as u64 ^ round;
    (0..len)
        .map(|i| (seed.wrapping_add(i as u64 * 131) >> 3) as u8)
        .collect()
}

#[derive(Default, Clone, Copy)]
struct OpCounts {
    reads: u64,
    reads_not_found: u64,
    updates: u64,
    inserts: u64,
    deletes: u64,
}

impl OpCounts {
    fn add(&mut self, o: &OpCounts) {
        self.reads += o.reads;
        self.reads_not_found += o.reads_not_found;
        self.updates += o.updates;
        self.inserts += o.inserts;
        self.deletes += o.deletes;
    }
}

/// What the store's clients did: their latencies (class 0 reads, 1 writes) and the
/// operations by kind.
struct Latencies {
    measured: Measured,
    counts: OpCounts,
}

/// One client thread: its requests, how far it is, and what it did.
struct ClientThread<'a> {
    ops: &'a [KvOp],
    next: usize,
    counts: OpCounts,
}

/// Runs `ops` (one list per client thread) on the closed-loop driver
/// (crate::driver), pausing `gap` after each request.
fn drive(
    store: &KvStore,
    ops: &[Vec<KvOp>],
    gap: Duration,
    round: u64,
    progress: Option<&indicatif::ProgressBar>,
) -> Result<Latencies> {
    let done = AtomicU64::new(0);
    let clients: Vec<ClientThread<'_>> = ops
        .iter()
        .map(|mine| ClientThread {
            ops: mine,
            next: 0,
            counts: OpCounts::default(),
        })
        .collect();
    let (measured, clients) = closed_loop(
        clients,
        2,
        &Phase::until_finished(gap),
        |cl, _| -> Result<Step> {
            let Some(op) = cl.ops.get(cl.next) else {
                return Ok(Step::Finished);
            };
            cl.next += 1;
            let c = &mut cl.counts;
            let class = match op {
                KvOp::Read(k) => {
                    c.reads += 1;
                    if store.get(k.as_bytes())?.is_none() {
                        c.reads_not_found += 1;
                    }
                    0
                }
                KvOp::Update(k, n) | KvOp::Insert(k, n) => {
                    if matches!(op, KvOp::Insert(..)) {
                        c.inserts += 1;
                    } else {
                        c.updates += 1;
                    }
                    store.put(k.as_bytes(), &value_for(k, *n, round))?;
                    1
                }
                KvOp::Delete(k) => {
                    c.deletes += 1;
                    store.delete(k.as_bytes())?;
                    1
                }
            };
            if let Some(p) = progress {
                if done.fetch_add(1, Ordering::Relaxed) % 1024 == 0 {
                    p.set_position(done.load(Ordering::Relaxed));
                }
            }
            Ok(Step::Done(class))
        },
    )?;
    let mut counts = OpCounts::default();
    for c in &clients {
        counts.add(&c.counts);
    }
    Ok(Latencies { measured, counts })
}

/// Counters of the measured phase only.
fn since(now: &KvStats, before: &KvStats) -> KvStats {
    KvStats {
        device_reads: now
            .device_reads
            .iter()
            .zip(&before.device_reads)
            .map(|(a, b)| a - b)
            .collect(),
        idle_device_reads: now.idle_device_reads - before.idle_device_reads,
        buffer_hits: now.buffer_hits - before.buffer_hits,
        cache_hits: now.cache_hits - before.cache_hits,
        prefetches: now.prefetches - before.prefetches,
        prefetched_values: now.prefetched_values - before.prefetched_values,
        log_syncs: now.log_syncs - before.log_syncs,
        synced_bytes: now.synced_bytes - before.synced_bytes,
        sync_seconds: now.sync_seconds - before.sync_seconds,
        prefetch_seconds: now.prefetch_seconds - before.prefetch_seconds,
        ..now.clone()
    }
}

fn split(ops: Vec<KvOp>, threads: usize) -> Vec<Vec<KvOp>> {
    let mut parts: Vec<Vec<KvOp>> = (0..threads.max(1)).map(|_| Vec::new()).collect();
    let n = parts.len();
    for (i, op) in ops.into_iter().enumerate() {
        parts[i % n].push(op);
    }
    parts
}

/// Load, warm up (standard mode), then the measured run in `mode`.
pub fn run(mode_name: &str, workload: &str, a: &KvRunArgs, quiet: bool) -> Result<KvRun> {
    let mode = mode(mode_name)?;
    let profile = power_profile(&a.power)?;
    anyhow::ensure!(a.devices >= 1, "--devices must be at least 1");
    anyhow::ensure!(
        a.records >= 1 || a.trace.is_some(),
        "--records must be at least 1 (0 only with --trace, to start from an empty store)"
    );
    anyhow::ensure!(
        a.load_trace.is_none() || a.trace.is_some(),
        "--load-trace goes with --trace"
    );
    // The load phase holds every record in memory at once, and the run phase every
    // generated operation (about 64 bytes each beside its value).
    crate::units::ensure_fits_in_memory(
        &format!(
            "loading --records {} of --value-len {}",
            a.records, a.value_len
        ),
        u128::from(a.records) * (a.value_len as u128 + 64),
    )?;
    crate::units::ensure_fits_in_memory(
        "the --ops and --warmup-ops operations",
        (u128::from(a.ops.unwrap_or(DEFAULT_OPS)) + u128::from(a.warmup_ops.unwrap_or(0))) * 64,
    )?;
    let replay = a.trace.as_deref().map(|p| Replay::read(a, p)).transpose()?;
    let spec = YcsbSpec::named(workload, a.records, a.ops.unwrap_or(DEFAULT_OPS))
        .with_context(|| format!("unknown workload {workload:?}; use a, b, 3, a-t, b-t or 3-t"))?;
    let spec = YcsbSpec {
        value_len: a.value_len,
        seed: a.seed,
        ..spec
    };
    // A replay follows its trace's own timing: none, unless asked.
    let gap =
        Duration::from_micros(
            a.gap_us
                .unwrap_or(if replay.is_some() { 0 } else { spec.gap_us }),
        );
    let loaded = a.records + replay.as_ref().map_or(0, |r| r.load_inserts);
    let mut store_opts = options(mode, a, loaded)?;
    if let Some(r) = &replay {
        store_opts.max_value = store_opts
            .max_value
            .max(r.largest_value())
            .min(hscm_kv::MAX_VALUE_LIMIT);
        // Said even with --json (on standard error): it changes what the figures mean.
        if r.keys_never_loaded > 0 {
            note!(
                "note: {} reads, updates or deletes {} distinct keys that --records {}{} did not load; its reads of them are counted as not found",
                r.label,
                r.keys_never_loaded,
                a.records,
                if a.load_trace.is_some() { " and --load-trace" } else { "" }
            );
        }
    }
    let scratch = crate::scratch::Scratch::new("kv", a.dir.as_deref())?;
    let dir = scratch.path().join("kv");
    KvStore::create(&dir, a.devices, None)?;

    // Load in standard mode: the dataset every mode starts from.
    {
        let store = KvStore::open(
            &dir,
            KvOptions {
                mode: Mode::Standard,
                ..store_opts.clone()
            },
        )?;
        let keys: Vec<String> = (0..a.records).map(ycsb_key).collect();
        let values: Vec<Vec<u8>> = keys.iter().map(|k| value_for(k, a.value_len, 0)).collect();
        store.load(
            keys.iter()
                .zip(&values)
                .map(|(k, v)| (k.as_bytes(), v.as_slice())),
        )?;
        if let Some(r) = replay.as_ref().filter(|r| !r.load.is_empty()) {
            drive(
                &store,
                &split(r.load.clone(), a.threads),
                Duration::ZERO,
                0,
                None,
            )?;
        }
        store.close()?;
    }
    let store = KvStore::open(&dir, store_opts)?;
    // Warm up in the mode under test (unmeasured): access counts, caches and the
    // primary trials reach a steady state, as in a store in service. Warm-up goes on
    // past --warmup-ops until the trials are over (at most 60 s).
    if let Some(r) = replay.as_ref().filter(|r| !r.warmup.is_empty()) {
        drive(&store, &split(r.warmup.clone(), a.threads), gap, 1, None)?;
    }
    let warmup_ops = a.warmup_ops.unwrap_or(DEFAULT_WARMUP_OPS);
    if warmup_ops > 0 && replay.is_none() {
        let began = Instant::now();
        for round in 0u64.. {
            let warm = YcsbSpec {
                operations: warmup_ops,
                seed: a.seed ^ 0x5eed ^ round,
                ..spec.clone()
            };
            let per = split(YcsbGen::new(warm, 0).collect(), a.threads);
            drive(&store, &per, gap, 1, None)?;
            if store.primaries_settled() || began.elapsed() > Duration::from_secs(60) {
                break;
            }
        }
    }
    // Write back everything earlier phases left dirty (the load, the cache files), so
    // the measured phase does not pay for it and every mode starts alike.
    let fs = std::fs::File::open(&dir).with_context(|| format!("opening {}", dir.display()))?;
    rustix::fs::syncfs(&fs).context("syncfs before the measured phase")?;
    let before = store.stats();

    let ops: Vec<Vec<KvOp>> = match &replay {
        Some(r) => split(r.run.clone(), a.threads),
        None => (0..a.threads.max(1) as u64)
            .map(|t| {
                let part = YcsbSpec {
                    operations: spec.operations / a.threads.max(1) as u64,
                    ..spec.clone()
                };
                YcsbGen::new(part, t + 1).collect()
            })
            .collect(),
    };
    let workload = replay.as_ref().map_or(workload, |r| r.label.as_str());
    let total: u64 = ops.iter().map(|o| o.len() as u64).sum();
    let progress = (!quiet && std::io::stderr().is_terminal()).then(|| {
        let pb = indicatif::ProgressBar::new(total);
        pb.set_style(
            indicatif::ProgressStyle::with_template(&format!(
                "{workload:>4} {mode_name:>17} {{bar:30}} {{pos}}/{{len}} ops {{per_sec}}"
            ))
            .expect("valid template"),
        );
        pb
    });
    let start = store.now_ns();
    let lat = drive(&store, &ops, gap, 2, progress.as_ref())?;
    let end = store.now_ns();
    if let Some(p) = progress {
        p.finish_and_clear();
    }
    let stats: KvStats = since(&store.stats(), &before);
    let timelines = store.timelines();
    store.close()?;
    drop(scratch);

    let seconds = (end - start) as f64 * 1e-9;
    let execution: f64 = timelines
        .iter()
        .map(|t| profile.energy(t, start, end))
        .sum();
    let m = &lat.measured;
    let idle_device_reads = if mode == Mode::Standard {
        // No device is idle in standard mode; count the reads of the devices Sprint
        // idles with one primary (all but device 0), the paper's comparison.
        stats.device_reads.iter().skip(1).sum()
    } else {
        stats.idle_device_reads
    };
    let mut run = KvRun {
        workload: workload.to_string(),
        mode: mode.name().to_string(),
        rep: 0,
        ops: total,
        seconds,
        ops_per_s: total as f64 / seconds,
        read_ops_per_s: m.class_ops(0) as f64 / seconds,
        write_ops_per_s: m.class_ops(1) as f64 / seconds,
        read_p99_us: m.class_quantile_us(0, 0.99),
        write_p99_us: m.class_quantile_us(1, 0.99),
        read_mean_us: m.class_mean_us(0),
        write_mean_us: m.class_mean_us(1),
        energy_j: Energy {
            execution,
            equal_time: execution,
        },
        edp: 0.0,
        equal_time_s: seconds,
        idle_device_reads,
        trace: replay.as_ref().map(|r| r.path.clone()),
        gap_us: gap.as_micros() as u64,
        reads: lat.counts.reads,
        reads_not_found: lat.counts.reads_not_found,
        updates: lat.counts.updates,
        inserts: lat.counts.inserts,
        deletes: lat.counts.deletes,
        keys_never_loaded: replay.as_ref().map_or(0, |r| r.keys_never_loaded),
        device_reads: stats.device_reads.clone(),
        device_busy_fraction: timelines
            .iter()
            .map(|t| t.busy_ns(start, end) as f64 / (end - start) as f64)
            .collect(),
        primaries: stats.primaries.len(),
        trials: stats.trials.clone(),
        prefetches: stats.prefetches,
        prefetched_values: stats.prefetched_values,
        log_syncs: stats.log_syncs,
        sync_mbps: if stats.sync_seconds > 0.0 {
            stats.synced_bytes as f64 / 1e6 / stats.sync_seconds
        } else {
            0.0
        },
        cache_hits: stats.cache_hits,
        buffer_hits: stats.buffer_hits,
        power_profile: profile.name.clone(),
        energy_note: ENERGY_NOTE,
        timelines,
        window: (start, end),
        profile: Some(profile),
    };
    run.set_equal_time(seconds);
    Ok(run)
}

#[cfg(test)]
mod tests {
    use super::median;

    #[test]
    fn median_of_odd_even_and_empty() {
        assert_eq!(median(&mut [3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&mut [4.0, 1.0, 3.0, 2.0]), 2.5);
        assert!(median(&mut []).is_nan());
    }
}

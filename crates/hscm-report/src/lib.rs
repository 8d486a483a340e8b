//! hscm-report: `hscm reproduce`, every implemented experiment on built-in defaults,
//! one report. Each experiment states the published figure, the target we hold
//! ourselves to, and what this machine measured, with a verdict computed from the
//! measurement.
//!
//! The third part of the experiment library: hscm-sweep holds the parameters and
//! sweeps (what Python links), hscm-lab the benchmarks, and this crate the targets
//! ([`check`], [`targets`]), the per-section renderers and the plots ([`plot`]).

#[macro_use]
extern crate hscm_sweep;

mod args;
pub mod check;
pub mod fs;
mod fs_work;
pub mod kv;
pub mod memsim;
mod mirror;
pub mod nbd;
pub mod plot;
pub mod python;
mod remote;
pub mod ring;
pub mod targets;
pub mod tier;
pub mod vmsim;

pub use args::ReproduceArgs;
pub use check::{named_checks_json, targets_table, Check};

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use hscm_volume::Durability;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use hscm_lab::units::human_bytes;
use hscm_lab::volume::{self, Stats, TargetKind, VolumeBenchResult, VolumeBenchSpec, Workload};

struct Experiment {
    id: &'static str,
    title: &'static str,
    paper: &'static str,
    spec: VolumeBenchSpec,
}

fn experiments(size: u64, seconds: f64) -> Vec<Experiment> {
    // Write points run long enough for several checkpoints to fall inside the
    // measurement, so their cost is counted (the journal alone would flatter us).
    let write_seconds = if seconds < 1.0 {
        seconds
    } else {
        seconds.max(10.0)
    };
    let spec_with = |workload, bs: usize, threads, durability, journal: u64| {
        let writes = matches!(workload, Workload::Randwrite | Workload::Seqwrite);
        VolumeBenchSpec {
            workload,
            bs,
            threads,
            seconds: if writes { write_seconds } else { seconds },
            durability,
            size,
            journal,
            dir: None,
            targets: TargetKind::ALL.to_vec(),
            progress: true,
        }
    };
    let spec = |workload, bs, threads, durability| spec_with(workload, bs, threads, durability, 0);
    use Durability::{Immediate, OnFlush};
    use Workload::*;
    vec![
        Experiment {
            id: "randread-4k-1t",
            title: "4 KiB random reads, 1 thread",
            paper: "DBR DHRD 64x SSD RAID-0 with direct I/O; 2.8x DHRD with direct I/O (Fig. 6a)",
            spec: spec(Randread, 4096, 1, OnFlush),
        },
        Experiment {
            id: "randread-4k-2t",
            title: "4 KiB random reads, 2 threads",
            paper: "(read throughput scales with threads; Fig. 6a)",
            spec: spec(Randread, 4096, 2, OnFlush),
        },
        Experiment {
            id: "randread-1000-1t",
            title: "1000-byte (unaligned) random reads, 1 thread",
            paper: "DBR serves byte ranges with no alignment rule (§3.4.1); no figure",
            spec: spec(Randread, 1000, 1, OnFlush),
        },
        Experiment {
            id: "seqread-64k-1t",
            title: "64 KiB sequential reads, 1 thread",
            paper: "DBR DHRD 3.3x DHRD through the page cache (Fig. 8a)",
            spec: spec(Seqread, 65536, 1, OnFlush),
        },
        Experiment {
            id: "mixed-4k-4t",
            title: "66:34 mixed 4 KiB, 4 threads, on-flush",
            paper: "DBR DHRD 15x SSD, file-level 66:34 mix (Fig. 8)",
            spec: spec(Mixed, 4096, 4, OnFlush),
        },
        Experiment {
            id: "randwrite-4k-1t-immediate",
            title: "4 KiB random writes, 1 thread, immediate",
            paper: "DHRD writes within 3% of the SSD (Fig. 6b)",
            spec: spec(Randwrite, 4096, 1, Immediate),
        },
        Experiment {
            id: "randwrite-4k-8t-immediate",
            title: "4 KiB random writes, 8 threads, immediate",
            paper: "SSD write throughput ~5x from 1 to 32 processes (§4.2)",
            spec: spec(Randwrite, 4096, 8, Immediate),
        },
        Experiment {
            id: "randwrite-4k-8t-immediate-journal-ws",
            title: "4 KiB random writes, 8 threads, immediate, journal = working set",
            paper: "(beyond the paper: a journal as large as the hot set turns random writes into sequential ones)",
            spec: spec_with(Randwrite, 4096, 8, Immediate, size),
        },
        Experiment {
            id: "randwrite-4k-8t-immediate-journal-eighth",
            title: "4 KiB random writes, 8 threads, immediate, journal = 1/8 of the working set",
            paper: "(beyond the paper: a journal much smaller than the hot set costs more than it saves)",
            spec: spec_with(Randwrite, 4096, 8, Immediate, (size / 8).max(hscm_volume::MIN_JOURNAL)),
        },
        Experiment {
            id: "randwrite-1000-1t-onflush",
            title: "1000-byte (unaligned) random writes, 1 thread, on-flush",
            paper: "(no figure; unaligned writes are completed from RAM, never read back)",
            spec: spec(Randwrite, 1000, 1, OnFlush),
        },
    ]
}

fn ratio(r: &VolumeBenchResult, baseline: &str) -> f64 {
    r.ratios.get(baseline).copied().unwrap_or(0.0)
}

fn checks_for(id: &str, r: &VolumeBenchResult, all: &[(String, VolumeBenchResult)]) -> Vec<Check> {
    let ours_iops = r.ours.map_or(0.0, |o| o.iops);
    match id {
        "randread-4k-1t" => vec![
            Check::new(&targets::VOLUME_RANDREAD_VS_ODIRECT, ratio(r, "odirect")),
            Check::new(
                &targets::VOLUME_RANDREAD_VS_PAGECACHE,
                ratio(r, "pagecache"),
            ),
            Check::new(&targets::VOLUME_RANDREAD_VS_MEMCPY, ratio(r, "memcpy")),
        ],
        "mixed-4k-4t" => vec![Check::new(
            &targets::VOLUME_MIXED_VS_ODIRECT,
            ratio(r, "odirect"),
        )],
        "randwrite-4k-1t-immediate" => {
            vec![Check::new(
                &targets::VOLUME_RANDWRITE_VS_ODIRECT,
                ratio(r, "odirect"),
            )]
        }
        "randwrite-4k-8t-immediate" => {
            let one = all
                .iter()
                .find(|(i, _)| i == "randwrite-4k-1t-immediate")
                .and_then(|(_, x)| x.ours)
                .map_or(f64::NAN, |o| o.iops);
            vec![
                Check::new(
                    &targets::VOLUME_RANDWRITE_8T_VS_ODIRECT,
                    ratio(r, "odirect"),
                ),
                Check::new(&targets::VOLUME_GROUP_COMMIT_SCALING, ours_iops / one),
            ]
        }
        "randwrite-4k-8t-immediate-journal-ws" => vec![Check::new(
            &targets::VOLUME_JOURNAL_VS_ODIRECT,
            ratio(r, "odirect"),
        )],
        _ => Vec::new(),
    }
}

/// One section of the report: Markdown, JSON, and its targets.
pub struct Section {
    pub md: String,
    pub json: Value,
    pub passed: usize,
    pub total: usize,
}

/// Runs one section of the report.
type SectionRun<'a> = dyn Fn() -> Result<Section> + 'a;

/// Which sections to run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SectionName {
    Volume,
    Memsim,
    Vmsim,
    Ring,
    Kv,
    Nbd,
    Fs,
    Tier,
    Python,
}

/// What `hscm reproduce` runs. `Default` is the only place its defaults are written;
/// the command's flags read theirs from it.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ReproduceParams {
    /// Where the report goes.
    pub out: PathBuf,
    /// Seconds per volume benchmark point.
    pub seconds: f64,
    /// Largest volume in the restart experiment.
    pub restart_size: u64,
    /// Small sizes and short runs: a smoke test of the pipeline, not a measurement.
    pub quick: bool,
    /// Sections to run; empty: all.
    pub only: Vec<SectionName>,
    /// The memory traces shipped in the repository.
    pub traces: PathBuf,
    /// Recorded YCSB 0.17 operation traces (scripts/ycsb-traces.sh).
    pub ycsb_traces: PathBuf,
}

impl Default for ReproduceParams {
    fn default() -> Self {
        ReproduceParams {
            out: "report".into(),
            seconds: 3.0,
            restart_size: 8 << 30,
            quick: false,
            only: Vec::new(),
            traces: "traces".into(),
            ycsb_traces: "target/ycsb-traces".into(),
        }
    }
}

/// Every target the report checks, with its source, as Markdown.
pub fn targets_markdown() -> String {
    let mut md = String::new();
    let _ = writeln!(md, "| check | target | source | the source reports |");
    let _ = writeln!(md, "|---|---:|---|---|");
    for t in targets::ALL {
        let j = t.to_json();
        let _ = writeln!(
            md,
            "| {} | {} {}{} | {} | {} |",
            t.what,
            j["comparison"].as_str().unwrap_or(""),
            j["target"],
            t.unit,
            t.source.cite(),
            t.source.says
        );
    }
    md
}

/// Every target as JSON, for scripts.
pub fn targets_json() -> Value {
    Value::Array(targets::ALL.iter().map(|t| t.to_json()).collect())
}

/// Runs the chosen sections and writes report.md, report.json and the SVG plots.
pub fn reproduce(p: &ReproduceParams) -> Result<()> {
    let ReproduceParams {
        out,
        seconds,
        restart_size,
        quick,
        only,
        traces,
        ycsb_traces,
    } = p;
    let (out, seconds, restart_size, quick) = (out.as_path(), *seconds, *restart_size, *quick);
    std::fs::create_dir_all(out).with_context(|| format!("cannot create {}", out.display()))?;
    let want = |s: SectionName| only.is_empty() || only.contains(&s);
    let mut md = String::new();
    writeln!(md, "# hscm reproduction report\n")?;
    writeln!(md, "Generated by `hscm reproduce{}` on {} ({} cores). Every figure below was measured or simulated in this run; \
        each section names its paper and the published figures beside ours.\n",
        if quick { " --quick" } else { "" }, cpu_model(), std::thread::available_parallelism().map_or(0, |n| n.get()))?;
    if quick {
        writeln!(md, "> **Quick mode**: small sizes and short runs: a smoke test of the pipeline, not a measurement. Verdicts are not meaningful.\n")?;
    }
    let mut sections = serde_json::Map::new();
    let (mut passed, mut total) = (0, 0);
    // Report order; each section runs only when chosen.
    let runs: [(SectionName, &str, &SectionRun); 9] = [
        (SectionName::Memsim, "memsim", &|| {
            memsim::section(out, quick, traces)
        }),
        (SectionName::Vmsim, "vmsim", &|| {
            vmsim::section(out, quick, traces)
        }),
        (SectionName::Ring, "ring", &|| ring::section(out, quick)),
        (SectionName::Kv, "kv", &|| {
            kv::section(out, quick, Some(ycsb_traces))
        }),
        (SectionName::Nbd, "nbd", &|| nbd::section(out, quick)),
        (SectionName::Fs, "fs", &|| fs::section(out, quick)),
        (SectionName::Tier, "tier", &|| tier::section(quick)),
        (SectionName::Python, "python", &|| python::section(out)),
        (SectionName::Volume, "volume", &|| {
            volume_section(out, seconds, restart_size, quick)
        }),
    ];
    for (name, key, run) in runs {
        if !want(name) {
            continue;
        }
        let s = run()?;
        md.push_str(&s.md);
        passed += s.passed;
        total += s.total;
        sections.insert(key.into(), s.json);
    }
    writeln!(md, "\n**{passed} of {total} targets met.**")?;
    hscm_lab::scratch::write_output(&out.join("report.md"), md.as_bytes())?;
    let mut report = json!({"quick": quick, "machine": {"cpu": cpu_model(), "cores": std::thread::available_parallelism().map_or(0, |n| n.get())},
        "targets": {"passed": passed, "total": total}});
    for (k, v) in sections {
        report[k] = v;
    }
    hscm_lab::scratch::write_output(
        &out.join("report.json"),
        serde_json::to_string_pretty(&report)?.as_bytes(),
    )?;
    outln!(
        "\n{passed} of {total} targets met. Report: {}",
        out.join("report.md").display()
    )?;
    Ok(())
}

fn volume_section(out: &Path, seconds: f64, restart_size: u64, quick: bool) -> Result<Section> {
    let (size, seconds, restart_sizes) = if quick {
        (64 << 20, seconds.min(0.3), vec![64 << 20])
    } else {
        (1 << 30, seconds, volume::restart_sizes(restart_size))
    };
    let exps = experiments(size, seconds);
    let mut results: Vec<(String, VolumeBenchResult)> = Vec::new();
    for (i, e) in exps.iter().enumerate() {
        note!("[{}/{}] volume: {}", i + 1, exps.len() + 1, e.title);
        let r = volume::bench_volume(&e.spec)?;
        volume::print_volume_result(&r)?;
        results.push((e.id.to_string(), r));
    }
    note!(
        "[{}/{}] volume: restart and warm-up ({})",
        exps.len() + 1,
        exps.len() + 1,
        restart_sizes
            .iter()
            .map(|&s| human_bytes(s))
            .collect::<Vec<_>>()
            .join(", ")
    );
    let restart = volume::bench_restart(&restart_sizes, None, true)?;
    volume::print_restart(&restart)?;

    let mut md = String::new();
    let mut js = Vec::new();
    let mut passed = 0;
    let mut total = 0;
    writeln!(md, "## Durable hybrid RAM volume (Baek & Park 2020)\n")?;
    writeln!(md, "Every figure in this section was measured in this run; baselines ran on the same disk, with the same access \
        pattern and timer. Paper figures are from Baek & Park 2020 (*A Durable Hybrid RAM Disk with a Rapid Resilience*); they were measured on different hardware \
        (two SATA SSDs in RAID-0), so ratios, not absolute numbers, are what compare.\n")?;
    if quick {
        writeln!(md, "> Quick mode: 64 MiB working sets and 0.3 s runs.\n")?;
    }
    writeln!(md, "Baselines: `odirect` = plain file with O_DIRECT (+O_DSYNC in immediate mode), the paper's \"SSD with direct I/O\"; \
        `pagecache` = buffered pread/pwrite (+fdatasync in immediate mode) with the file already cached; \
        `memcpy` = raw copies inside one RAM buffer, the physical limit. Working set {} per target, {:.1} s per point \
        (write points at least 10 s, so that checkpoints fall inside them).\n",
        human_bytes(size), seconds)?;
    writeln!(md, "| experiment | paper | ours IOPS | odirect | pagecache | memcpy | ours / odirect | ours / pagecache | ours / memcpy |")?;
    writeln!(md, "|---|---|---:|---:|---:|---:|---:|---:|---:|")?;
    for (e, (_, r)) in exps.iter().zip(&results) {
        let b = |k: &str| {
            r.baselines
                .get(k)
                .map_or("-".into(), |s| format!("{:.0}", s.iops))
        };
        writeln!(
            md,
            "| {} | {} | {:.0} | {} | {} | {} | {:.2}x | {:.2}x | {:.2}x |",
            e.title,
            e.paper,
            r.ours.map_or(0.0, |o| o.iops),
            b("odirect"),
            b("pagecache"),
            b("memcpy"),
            ratio(r, "odirect"),
            ratio(r, "pagecache"),
            ratio(r, "memcpy")
        )?;
    }
    writeln!(md, "\nOur write path during the write points. Volumes write in place (no journal, the default and the paper's \
        design) unless the row names a journal; then concurrent writers share journal batches, and a background checkpoint \
        writes the changes home, its cost inside the measured time:\n")?;
    writeln!(
        md,
        "| experiment | journal | records / batch | checkpoints | home writes |"
    )?;
    writeln!(md, "|---|---:|---:|---:|---:|")?;
    for (e, (_, r)) in exps.iter().zip(&results) {
        if !matches!(
            r.workload,
            Workload::Randwrite | Workload::Seqwrite | Workload::Mixed
        ) {
            continue;
        }
        match r.journal {
            Some(j) => writeln!(
                md,
                "| {} | {} | {:.1} | {} | {} |",
                e.title,
                human_bytes(j.journal_len),
                j.records_per_batch,
                j.checkpoints,
                j.home_writes
            )?,
            None => writeln!(md, "| {} | none | - | - | - |", e.title)?,
        }
    }
    writeln!(md, "\nLatency (µs, p50 / p99):\n")?;
    writeln!(md, "| experiment | ours | odirect | pagecache | memcpy |")?;
    writeln!(md, "|---|---:|---:|---:|---:|")?;
    for (e, (_, r)) in exps.iter().zip(&results) {
        let l = |s: Option<&Stats>| {
            s.map_or("-".into(), |s| format!("{:.2} / {:.2}", s.p50_us, s.p99_us))
        };
        writeln!(
            md,
            "| {} | {} | {} | {} | {} |",
            e.title,
            l(r.ours.as_ref()),
            l(r.baselines.get("odirect")),
            l(r.baselines.get("pagecache")),
            l(r.baselines.get("memcpy"))
        )?;
    }

    writeln!(md, "\n### Targets\n")?;
    check::table_header(&mut md, "experiment");
    for (e, (id, r)) in exps.iter().zip(&results) {
        let checks = checks_for(id, r, &results);
        for c in &checks {
            total += 1;
            passed += usize::from(c.passed());
            writeln!(md, "{}", c.table_row(e.title))?;
        }
        js.push(
            json!({"id": id, "title": e.title, "paper": e.paper, "result": r,
            "checks": checks.iter().map(Check::to_json).collect::<Vec<_>>()}),
        );
    }
    let largest = restart.sizes.last().context("restart measured no size")?;
    let restart_checks = vec![
        Check::new(&targets::RESTART_FIRST_READ, largest.first_read_ms).named(format!(
            "open to first read, {}",
            human_bytes(largest.bytes)
        )),
        Check::new(
            &targets::RESTART_WARMUP_SPEED,
            largest.warm_mbps / largest.raw_mbps,
        )
        .named(format!(
            "warm-up speed / raw sequential read, {}",
            human_bytes(largest.bytes)
        )),
        Check::new(&targets::RESTART_RAM_OVERHEAD, largest.ram_overhead_pct).named(format!(
            "RAM beyond the volume's size, {}",
            human_bytes(largest.bytes)
        )),
    ];
    for c in &restart_checks {
        total += 1;
        passed += usize::from(c.passed());
        writeln!(md, "{}", c.table_row("restart"))?;
    }

    writeln!(md, "\n### Rapid resilience: restart and warm-up\n")?;
    writeln!(md, "Paper: DHRD serves I/O during initialisation (§3.3) but gives no timing. Ours: `open` maps RAM lazily and \
        returns at once; two loader threads copy 8 MiB batches with O_DIRECT while a third pre-faults RAM ahead of them; \
        a request to an unloaded chunk is served from the device and moves that chunk to the front of the queue. \
        `raw` is the best of 1 and 2 concurrent 8 MiB O_DIRECT sequential reads of the same file into huge-page memory (as our loaders read), measured both before and after the warm-up. \
        This machine's virtual disk is cached by its host, so figures swing widely between runs (we saw 0.8 to 2.9 GB/s for the same warm-up); treat one run's ratio with care.\n")?;
    writeln!(md, "| size | open (ms) | first read (ms) | fully warm (s) | warm MB/s | raw MB/s | warm / raw | fresh memory MB/s | warm / min(raw, memory) | RAM beyond size |")?;
    writeln!(md, "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")?;
    for s in &restart.sizes {
        let bound = s.raw_mbps.min(s.fresh_memory_mbps);
        writeln!(
            md,
            "| {} | {:.0}% | {:.3}% |",
            s.cells().join(" | "),
            s.warm_mbps / bound * 100.0,
            s.ram_overhead_pct
        )?;
    }
    writeln!(md, "\nA warm-up also lands every byte in fresh memory, which the kernel zeroes and which a hypervisor \
        may back only on first touch: `fresh memory` is how fast this process then populated that much fresh huge-page \
        memory (measured after the warm-up; informational). On this project's VM the balloon device reports freed guest \
        pages back to the host (virtio-balloon feature bit 5, free-page reporting), so memory freed a few seconds \
        earlier is slow to reuse: here the warm-up runs after the fill and the raw passes, and pays that first-touch cost. \
        Back-to-back warm-ups of one cached 2 GiB file (`hscm volume info FILE --load`) ran at 2.7-2.9 GB/s, about 85% \
        of the raw read. The target (70% of raw) is judged against raw alone.")?;
    if !restart.direct_io {
        writeln!(
            md,
            "\n> O_DIRECT was refused by this file system: the backend ran buffered."
        )?;
    }
    writeln!(
        md,
        "\n![IOPS](volume_iops.svg)\n\n![Warm-up](volume_warmup.svg)\n"
    )?;
    plot_iops(&out.join("volume_iops.svg"), &exps, &results)?;
    plot_warmup(&out.join("volume_warmup.svg"), &restart)?;
    let json = json!({"experiments": js, "restart": restart, "restart_checks": restart_checks.iter().map(Check::to_json).collect::<Vec<_>>()});
    Ok(Section {
        md,
        json,
        passed,
        total,
    })
}

fn cpu_model() -> String {
    std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split(':').nth(1))
                .map(|m| m.trim().to_string())
        })
        .unwrap_or_else(|| "unknown CPU".into())
}

/// The volume figures' series: ours and the three baselines, in the tables' order.
const SERIES: [(&str, plot::RGBColor); 4] = [
    ("ours", plot::BLUE),
    ("odirect", plot::RED),
    ("pagecache", plot::ORANGE),
    ("memcpy", plot::GREY),
];

fn plot_iops(
    path: &Path,
    exps: &[Experiment],
    results: &[(String, VolumeBenchResult)],
) -> Result<()> {
    let iops = |r: &VolumeBenchResult, k: &str| -> Option<f64> {
        if k == "ours" {
            r.ours.map(|o| o.iops)
        } else {
            r.baselines.get(k).map(|s| s.iops)
        }
    };
    let chart = plot::BarChart {
        title: "Volume: IOPS by experiment (log scale)".into(),
        y_desc: "IOPS".into(),
        y_axis: plot::Axis::Log10,
        categories: exps.iter().map(|e| e.id.to_string()).collect(),
        series: SERIES
            .iter()
            .map(|(name, color)| plot::Bars {
                name: name.to_string(),
                color: *color,
                values: results.iter().map(|(_, r)| iops(r, name)).collect(),
            })
            .collect(),
        baseline: None,
        references: Vec::new(),
        size: (1200, 520),
    };
    hscm_lab::scratch::write_output(path, chart.to_svg()?.as_bytes())
}

fn plot_warmup(path: &Path, r: &volume::RestartResult) -> Result<()> {
    let chart = plot::BarChart {
        title: "Warm-up speed vs raw sequential read".into(),
        y_desc: "MB/s".into(),
        y_axis: plot::Axis::Linear,
        categories: r.sizes.iter().map(|s| human_bytes(s.bytes)).collect(),
        series: vec![
            plot::Bars {
                name: "warm-up (ours)".into(),
                color: plot::BLUE,
                values: r.sizes.iter().map(|s| Some(s.warm_mbps)).collect(),
            },
            plot::Bars {
                name: "raw O_DIRECT read".into(),
                color: plot::GREY,
                values: r.sizes.iter().map(|s| Some(s.raw_mbps)).collect(),
            },
        ],
        baseline: None,
        references: Vec::new(),
        size: (860, 420),
    };
    hscm_lab::scratch::write_output(path, chart.to_svg()?.as_bytes())
}

//! `hscm reproduce`: every implemented experiment on built-in defaults, one report.
//! Each experiment states the published figure, the target we hold ourselves to, and
//! what this machine measured, with a verdict computed from the measurement.

pub mod kv;
pub mod memsim;
pub mod ring;
pub mod vmsim;

use std::fmt::Write as _;
use std::path::Path;

use anyhow::{Context, Result};
use hscm_volume::Durability;
use plotters::prelude::*;
use serde_json::{json, Value};

use crate::units::human_bytes;
use crate::volume::{self, Stats, TargetKind, VolumeBenchResult, VolumeBenchSpec, Workload};

/// A claim checked against a measurement.
pub(crate) struct Check {
    what: String,
    ours: f64,
    target: f64,
    /// True: ours must be at least the target; false: at most.
    at_least: bool,
    unit: &'static str,
}

impl Check {
    pub(crate) fn at_least(
        what: impl Into<String>,
        ours: f64,
        target: f64,
        unit: &'static str,
    ) -> Check {
        Check {
            what: what.into(),
            ours,
            target,
            at_least: true,
            unit,
        }
    }
    pub(crate) fn at_most(
        what: impl Into<String>,
        ours: f64,
        target: f64,
        unit: &'static str,
    ) -> Check {
        Check {
            what: what.into(),
            ours,
            target,
            at_least: false,
            unit,
        }
    }
    pub(crate) fn passed(&self) -> bool {
        if self.at_least {
            self.ours >= self.target
        } else {
            self.ours <= self.target
        }
    }
    /// A row of the report's targets table.
    pub(crate) fn table_row(&self, experiment: &str) -> String {
        format!(
            "| {experiment} | {} | {} {:.2}{} | {:.3}{} | {} |",
            self.what,
            if self.at_least { ">=" } else { "<=" },
            self.target,
            self.unit,
            self.ours,
            self.unit,
            if self.passed() { "met" } else { "**not met**" }
        )
    }

    pub(crate) fn to_json(&self) -> Value {
        json!({"what": self.what, "ours": self.ours, "target": self.target,
               "comparison": if self.at_least { ">=" } else { "<=" }, "unit": self.unit, "passed": self.passed()})
    }
}

/// The "Targets" table of a section whose checks are named by trace (or topic): writes
/// it and returns how many passed.
pub(crate) fn targets_table(
    md: &mut String,
    title: &str,
    checks: &[(String, Check)],
) -> Result<usize> {
    writeln!(md, "### {title}\n")?;
    writeln!(md, "| trace | check | target | ours | verdict |")?;
    writeln!(md, "|---|---|---:|---:|---|")?;
    let mut passed = 0;
    for (name, c) in checks {
        passed += usize::from(c.passed());
        writeln!(md, "{}", c.table_row(name))?;
    }
    Ok(passed)
}

/// Those checks as JSON, each with its trace name.
pub(crate) fn named_checks_json(checks: &[(String, Check)]) -> Vec<Value> {
    checks
        .iter()
        .map(|(n, c)| {
            let mut j = c.to_json();
            j["trace"] = json!(n);
            j
        })
        .collect()
}

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
            Check::at_least("ours / odirect (IOPS)", ratio(r, "odirect"), 20.0, "x"),
            Check::at_least("ours / pagecache (IOPS)", ratio(r, "pagecache"), 1.5, "x"),
            Check::at_least("ours / memcpy (IOPS)", ratio(r, "memcpy"), 0.8, "x"),
        ],
        "mixed-4k-4t" => vec![Check::at_least(
            "ours / odirect (IOPS)",
            ratio(r, "odirect"),
            3.0,
            "x",
        )],
        "randwrite-4k-1t-immediate" => {
            vec![Check::at_least(
                "ours / odirect (IOPS), i.e. within 15%",
                ratio(r, "odirect"),
                0.85,
                "x",
            )]
        }
        "randwrite-4k-8t-immediate" => {
            let one = all
                .iter()
                .find(|(i, _)| i == "randwrite-4k-1t-immediate")
                .and_then(|(_, x)| x.ours)
                .map_or(f64::NAN, |o| o.iops);
            vec![
                Check::at_least(
                    "ours / odirect at 8 threads (IOPS)",
                    ratio(r, "odirect"),
                    1.5,
                    "x",
                ),
                Check::at_least(
                    "ours 8 threads / ours 1 thread (group commit)",
                    ours_iops / one,
                    4.0,
                    "x",
                ),
            ]
        }
        "randwrite-4k-8t-immediate-journal-ws" => vec![Check::at_least(
            "ours / odirect at 8 threads, journal = working set (IOPS)",
            ratio(r, "odirect"),
            1.5,
            "x",
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

/// Which sections to run.
#[derive(Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum SectionName {
    Volume,
    Memsim,
    Vmsim,
    Ring,
    Kv,
}

pub fn reproduce(
    out: &Path,
    seconds: f64,
    restart_size: u64,
    quick: bool,
    only: &[SectionName],
    traces: &Path,
    ycsb_traces: &Path,
) -> Result<()> {
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
    if want(SectionName::Memsim) {
        let s = crate::report::memsim::section(out, quick, traces)?;
        md.push_str(&s.md);
        passed += s.passed;
        total += s.total;
        sections.insert("memsim".into(), s.json);
    }
    if want(SectionName::Vmsim) {
        let s = crate::report::vmsim::section(out, quick, traces)?;
        md.push_str(&s.md);
        passed += s.passed;
        total += s.total;
        sections.insert("vmsim".into(), s.json);
    }
    if want(SectionName::Ring) {
        let s = crate::report::ring::section(out, quick)?;
        md.push_str(&s.md);
        passed += s.passed;
        total += s.total;
        sections.insert("ring".into(), s.json);
    }
    if want(SectionName::Kv) {
        let s = crate::report::kv::section(out, quick, Some(ycsb_traces))?;
        md.push_str(&s.md);
        passed += s.passed;
        total += s.total;
        sections.insert("kv".into(), s.json);
    }
    if want(SectionName::Volume) {
        let s = volume_section(out, seconds, restart_size, quick)?;
        md.push_str(&s.md);
        passed += s.passed;
        total += s.total;
        sections.insert("volume".into(), s.json);
    }
    writeln!(md, "\n**{passed} of {total} targets met.**")?;
    crate::scratch::write_output(&out.join("report.md"), md.as_bytes())?;
    let mut report = json!({"quick": quick, "machine": {"cpu": cpu_model(), "cores": std::thread::available_parallelism().map_or(0, |n| n.get())},
        "targets": {"passed": passed, "total": total}});
    for (k, v) in sections {
        report[k] = v;
    }
    crate::scratch::write_output(
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
    writeln!(md, "| experiment | check | target | ours | verdict |")?;
    writeln!(md, "|---|---|---:|---:|---|")?;
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
        Check::at_most(
            format!("open to first read, {}", human_bytes(largest.bytes)),
            largest.first_read_ms,
            20.0,
            " ms",
        ),
        Check::at_least(
            format!(
                "warm-up speed / raw sequential read, {}",
                human_bytes(largest.bytes)
            ),
            largest.warm_mbps / largest.raw_mbps,
            0.7,
            "x",
        ),
        Check::at_most(
            format!(
                "RAM beyond the volume's size, {}",
                human_bytes(largest.bytes)
            ),
            largest.ram_overhead_pct,
            1.0,
            " %",
        ),
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
            "| {} | {:.2} | {:.2} | {:.2} | {:.0} | {:.0} | {:.0}% | {:.0} | {:.0}% | {:.3}% |",
            human_bytes(s.bytes),
            s.open_ms,
            s.first_read_ms,
            s.warm_s,
            s.warm_mbps,
            s.raw_mbps,
            s.warm_mbps / s.raw_mbps * 100.0,
            s.fresh_memory_mbps,
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

const SERIES: [(&str, RGBColor); 4] = [
    ("ours", RGBColor(31, 119, 180)),
    ("odirect", RGBColor(214, 39, 40)),
    ("pagecache", RGBColor(255, 127, 14)),
    ("memcpy", RGBColor(127, 127, 127)),
];

pub(crate) type Area<'a> = DrawingArea<SVGBackend<'a>, plotters::coord::Shift>;

/// Writes one label under each unit-wide category of a bar chart (category i spans
/// x in [i, i+1)); `y_floor` is the value at the chart's bottom edge.
pub(crate) fn label_categories<'a, Y: Ranged<ValueType = f64>>(
    root: &Area<'a>,
    chart: &ChartContext<
        'a,
        SVGBackend<'a>,
        Cartesian2d<plotters::coord::types::RangedCoordf64, Y>,
    >,
    labels: &[String],
    y_floor: f64,
) -> Result<()> {
    let style = TextStyle::from(("sans-serif", 10).into_font()).pos(
        plotters::style::text_anchor::Pos::new(
            plotters::style::text_anchor::HPos::Center,
            plotters::style::text_anchor::VPos::Top,
        ),
    );
    for (i, label) in labels.iter().enumerate() {
        let (x, y) = chart.backend_coord(&(i as f64 + 0.5, y_floor));
        root.draw(&Text::new(label.clone(), (x, y + 8), style.clone()))?;
    }
    Ok(())
}

/// Draws the legend in the headroom above the bars and writes the file.
pub(crate) fn finish_chart<'a, Y: Ranged<ValueType = f64>>(
    root: &Area<'a>,
    chart: &mut ChartContext<
        'a,
        SVGBackend<'a>,
        Cartesian2d<plotters::coord::types::RangedCoordf64, Y>,
    >,
) -> Result<()> {
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperMiddle)
        .border_style(BLACK)
        .background_style(WHITE.mix(0.8))
        .draw()?;
    root.present()?;
    Ok(())
}

fn plot_iops(
    path: &Path,
    exps: &[Experiment],
    results: &[(String, VolumeBenchResult)],
) -> Result<()> {
    // Drawn in memory, written whole: a failed or stopped run leaves no half plot.
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (1100, 520)).into_drawing_area();
        root.fill(&WHITE)?;
        let iops = |r: &VolumeBenchResult, k: &str| -> f64 {
            if k == "ours" {
                r.ours.map_or(0.0, |o| o.iops)
            } else {
                r.baselines.get(k).map_or(0.0, |s| s.iops)
            }
        };
        let max = results
            .iter()
            .flat_map(|(_, r)| SERIES.iter().map(move |(k, _)| iops(r, k)))
            .fold(10.0, f64::max);
        let n = results.len();
        let mut chart = ChartBuilder::on(&root)
            .caption("Volume: IOPS by experiment (log scale)", ("sans-serif", 20))
            .margin(10)
            .x_label_area_size(60)
            .y_label_area_size(70)
            .build_cartesian_2d(0f64..n as f64, (100f64..max * 30.0).log_scale())?;
        chart
            .configure_mesh()
            .disable_x_mesh()
            .x_labels(0)
            .y_desc("IOPS")
            .draw()?;
        let labels: Vec<String> = exps.iter().map(|e| e.id.to_string()).collect();
        label_categories(&root, &chart, &labels, 100.0)?;
        for (s, (name, color)) in SERIES.iter().enumerate() {
            let bars = results.iter().enumerate().filter_map(|(i, (_, r))| {
                let v = iops(r, name);
                (v > 0.0).then(|| {
                    let x0 = i as f64 + 0.1 + s as f64 * 0.2;
                    Rectangle::new([(x0, 100.0), (x0 + 0.18, v.max(100.0))], color.filled())
                })
            });
            chart.draw_series(bars)?.label(*name).legend(move |(x, y)| {
                Rectangle::new([(x, y - 5), (x + 10, y + 5)], color.filled())
            });
        }
        finish_chart(&root, &mut chart)?;
    }
    crate::scratch::write_output(path, svg.as_bytes())
}

fn plot_warmup(path: &Path, r: &volume::RestartResult) -> Result<()> {
    // Drawn in memory, written whole: a failed or stopped run leaves no half plot.
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (800, 420)).into_drawing_area();
        root.fill(&WHITE)?;
        let n = r.sizes.len();
        let max = r
            .sizes
            .iter()
            .map(|s| s.warm_mbps.max(s.raw_mbps))
            .fold(1.0, f64::max);
        let mut chart = ChartBuilder::on(&root)
            .caption("Warm-up speed vs raw sequential read", ("sans-serif", 20))
            .margin(10)
            .x_label_area_size(40)
            .y_label_area_size(60)
            .build_cartesian_2d(0f64..n as f64, 0f64..max * 1.3)?;
        chart
            .configure_mesh()
            .disable_x_mesh()
            .x_labels(0)
            .y_desc("MB/s")
            .draw()?;
        let labels: Vec<String> = r.sizes.iter().map(|s| human_bytes(s.bytes)).collect();
        label_categories(&root, &chart, &labels, 0.0)?;
        for (k, (label, color)) in [
            ("warm-up (ours)", SERIES[0].1),
            ("raw O_DIRECT read", SERIES[3].1),
        ]
        .into_iter()
        .enumerate()
        {
            chart
                .draw_series(r.sizes.iter().enumerate().map(|(i, s)| {
                    let v = if k == 0 { s.warm_mbps } else { s.raw_mbps };
                    let x0 = i as f64 + 0.15 + k as f64 * 0.35;
                    Rectangle::new([(x0, 0.0), (x0 + 0.33, v)], color.filled())
                }))?
                .label(label)
                .legend(move |(x, y)| {
                    Rectangle::new([(x, y - 5), (x + 10, y + 5)], color.filled())
                });
        }
        finish_chart(&root, &mut chart)?;
    }
    crate::scratch::write_output(path, svg.as_bytes())
}

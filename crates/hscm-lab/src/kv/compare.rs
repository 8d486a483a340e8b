//! Every mode on every workload, and the summaries the report and `kv compare` print.

use anyhow::Result;

use super::*;

/// What `hscm kv bench` and `kv compare` measured: `{"runs": [...]}` is their JSON.
#[derive(Serialize, Clone, Debug)]
pub struct KvRuns {
    pub runs: Vec<KvRun>,
}

/// Every mode on every workload, `repeat` times interleaved; equal-time energy over
/// the slowest mode's time within each repetition.
pub fn compare_runs(
    workloads: &[String],
    modes: &[String],
    a: &KvRunArgs,
    repeat: usize,
    quiet: bool,
) -> Result<Vec<KvRun>> {
    for m in modes {
        mode(m)?;
    }
    let mut all = Vec::new();
    for w in workloads {
        for rep in 0..repeat.max(1) {
            let args = KvRunArgs {
                seed: a.seed + rep as u64,
                ..a.clone()
            };
            // Reversing the order every other repetition cancels drift of the machine.
            let order: Vec<&String> = if rep % 2 == 0 {
                modes.iter().collect()
            } else {
                modes.iter().rev().collect()
            };
            let mut group = Vec::new();
            for m in order {
                if !quiet {
                    note!("[kv] workload {w}, mode {m}, repetition {}", rep + 1);
                }
                let mut r = run(m, w, &args, quiet)?;
                r.rep = rep;
                group.push(r);
            }
            let longest = group.iter().map(|r| r.seconds).fold(0.0, f64::max);
            for r in &mut group {
                r.set_equal_time(longest);
            }
            group.sort_by_key(|r| modes.iter().position(|m| *m == r.mode));
            all.extend(group);
        }
    }
    Ok(all)
}

/// The paper's figures `kv compare` prints beside ours.
pub const PAPER_SUMMARY: &str = "Paper (Sprint-AEP, *Disperse Access Considered Energy Inefficient in Intel Optane DC Persistent Memory Servers*, on four Optane DIMMs, 20 GB): low density (-t): Sprint saves ~26% \
    equal-time energy with no throughput loss, idle-device reads -96% without prefetching and -99.99% with it, \
    one primary; high density: 7-17% saved, 3 primaries for A and B, 2 for 3; parallel sync/prefetch +30-68% \
    write, +23.7-40% read throughput.";

/// The run of `mode` in the same workload and repetition as `r`.
pub fn partner<'a>(runs: &'a [KvRun], r: &KvRun, mode: &str) -> Option<&'a KvRun> {
    runs.iter()
        .find(|o| o.workload == r.workload && o.rep == r.rep && o.mode == mode)
}

/// Equal-time energy `r` saves against `standard` (a share).
pub fn saving_vs(r: &KvRun, standard: &KvRun) -> f64 {
    1.0 - r.energy_j.equal_time / standard.energy_j.equal_time
}

/// Equal-time energy `r` saves against the standard run of its workload and
/// repetition, if that run is in `runs` and is not `r` itself.
pub fn energy_saving(runs: &[KvRun], r: &KvRun) -> Option<f64> {
    partner(runs, r, "standard")
        .filter(|s| s.mode != r.mode)
        .map(|s| saving_vs(r, s))
}

/// Median over repetitions of `f(run of mode, other run of the same repetition)`:
/// each repetition's modes ran back to back, so comparisons are made within one and
/// summarised across them. NaN when no repetition has both runs or `f` gives none.
pub fn paired_median(
    runs: &[KvRun],
    workload: &str,
    mode: &str,
    other: &str,
    f: impl Fn(&KvRun, &KvRun) -> Option<f64>,
) -> f64 {
    let mut values: Vec<f64> = runs
        .iter()
        .filter(|r| r.workload == workload && r.mode == mode)
        .filter_map(|r| partner(runs, r, other).and_then(|o| f(r, o)))
        .filter(|v| v.is_finite())
        .collect();
    median(&mut values)
}

/// Median of `values` (mean of the middle two for an even count); NaN when empty.
pub fn median(values: &mut [f64]) -> f64 {
    if values.is_empty() {
        return f64::NAN;
    }
    values.sort_by(f64::total_cmp);
    let n = values.len();
    if n % 2 == 1 {
        values[n / 2]
    } else {
        (values[n / 2 - 1] + values[n / 2]) / 2.0
    }
}

/// Median energy saving and throughput of each Sprint mode against standard.
pub fn print_medians(runs: &[KvRun]) -> anyhow::Result<()> {
    let reps = runs.iter().map(|r| r.rep + 1).max().unwrap_or(0);
    let mut workloads: Vec<&str> = runs.iter().map(|r| r.workload.as_str()).collect();
    workloads.dedup();
    let mut modes: Vec<&str> = runs.iter().map(|r| r.mode.as_str()).collect();
    modes.sort();
    modes.dedup();
    if !modes.contains(&"standard") {
        return Ok(());
    }
    outln!("\nMedians over {reps} repetition(s), each against standard of the same repetition:")?;
    outln!(
        "{:>4} {:>17} {:>8} {:>11}",
        "load",
        "mode",
        "saved",
        "throughput"
    )?;
    for w in &workloads {
        for m in modes.iter().filter(|m| **m != "standard") {
            let saved = paired_median(runs, w, m, "standard", |r, s| Some(saving_vs(r, s)));
            let tput = paired_median(runs, w, m, "standard", |r, s| {
                Some(r.ops_per_s / s.ops_per_s)
            });
            outln!("{w:>4} {m:>17} {:>7.1}% {:>10.3}x", saved * 100.0, tput)?;
        }
    }
    Ok(())
}

/// Reads of the devices `r` kept idle, in the standard run: the paper's Fig. 13 basis.
pub fn idle_read_reduction(standard: &KvRun, r: &KvRun) -> f64 {
    let base = standard.idle_device_reads as f64;
    if base == 0.0 {
        0.0
    } else {
        1.0 - r.idle_device_reads as f64 / base
    }
}

/// The figures of one run both run tables show (text and Markdown), formatted once:
/// workload, repetition, mode, ops/s, read and write p99 (µs), execution and
/// equal-time energy (J), the saving against standard, EDP, idle-device reads and
/// primaries.
pub fn run_cells(runs: &[KvRun], r: &KvRun) -> [String; 12] {
    let saved = energy_saving(runs, r).map_or("-".to_string(), |e| format!("{:.1}%", e * 100.0));
    [
        r.workload.clone(),
        (r.rep + 1).to_string(),
        r.mode.clone(),
        format!("{:.0}", r.ops_per_s),
        format!("{:.0}", r.read_p99_us),
        format!("{:.0}", r.write_p99_us),
        format!("{:.2}", r.energy_j.execution),
        format!("{:.2}", r.energy_j.equal_time),
        saved,
        format!("{:.2e}", r.edp),
        r.idle_device_reads.to_string(),
        r.primaries.to_string(),
    ]
}

pub fn print_runs(runs: &[KvRun]) -> anyhow::Result<()> {
    const WIDTHS: [usize; 12] = [4, 3, 17, 9, 8, 8, 9, 9, 7, 9, 8, 4];
    let header = [
        "load",
        "rep",
        "mode",
        "ops/s",
        "rd p99",
        "wr p99",
        "E exec J",
        "E equal J",
        "saved",
        "EDP J*s",
        "idle rd",
        "prim",
    ];
    let line = |cells: &[&str]| {
        cells
            .iter()
            .zip(WIDTHS)
            .map(|(c, w)| format!("{c:>w$}"))
            .collect::<Vec<_>>()
            .join(" ")
    };
    outln!("{}", line(&header))?;
    for r in runs {
        let cells = run_cells(runs, r);
        outln!("{}", line(&cells.each_ref().map(String::as_str)))?;
    }
    Ok(())
}

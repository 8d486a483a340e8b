//! The Python package's section of `hscm reproduce`: its benchmarks (threads with the
//! GIL released, the local sweep executor against one process) and the WARM
//! sensitivity sweep of examples/warm_sweep.py. Both run in Python before the report
//! (scripts/reproduce.sh); this section reads what they wrote under `OUT/python`.

use std::fmt::Write as _;
use std::path::Path;

use anyhow::{Context, Result};
use serde_json::{json, Value};

use crate::{named_checks_json, targets, targets_table, Check, Section};

fn read(path: &Path) -> Result<Option<Value>> {
    match std::fs::read_to_string(path) {
        Ok(text) => {
            Ok(Some(serde_json::from_str(&text).with_context(|| {
                format!("{} is not JSON", path.display())
            })?))
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e).with_context(|| format!("cannot read {}", path.display())),
    }
}

fn num(v: &Value, path: &str) -> f64 {
    path.split('.')
        .fold(v, |v, k| &v[k])
        .as_f64()
        .unwrap_or(f64::NAN)
}

pub fn section(out: &Path) -> Result<Section> {
    let mut md = String::new();
    writeln!(md, "## Python package and sweeps\n")?;
    writeln!(md, "The simulators, traces and engines from Python (`import hscm`: one abi3 wheel built by maturin, \
        docs/python.md), and parameter sweeps on local processes, Dask or Ray (`hscm sweep`). Measured by \
        `python -m hscm.bench` and `python examples/warm_sweep.py`, which scripts/reproduce.sh runs before this report.\n")?;
    let bench = read(&out.join("python/bench.json"))?;
    let sweep = read(&out.join("python/warm-sweep/summary.json"))?;
    let mut checks = Vec::new();
    match &bench {
        None => writeln!(md, "> Not measured: `{}` is missing (scripts/reproduce.sh writes it with `python -m hscm.bench`).\n",
            out.join("python/bench.json").display())?,
        Some(b) => {
            writeln!(md, "Trace: {}; {} cores.\n", b["trace"].as_str().unwrap_or("?"), b["cores"])?;
            writeln!(md, "| benchmark | baseline | ours | ratio |")?;
            writeln!(md, "|---|---:|---:|---:|")?;
            writeln!(md, "| two simulations (WARM), two threads | one thread: {:.2} s | {:.2} s | {:.2}x |",
                num(b, "threads.one_thread_s"), num(b, "threads.two_threads_s"), num(b, "threads.speedup"))?;
            writeln!(md, "| sweep of {} points (shortest {:.2} s), {} local workers | one worker: {:.2} s | {:.2} s | {:.2}x |\n",
                b["sweep"]["points"], num(b, "sweep.shortest_point_s"), b["sweep"]["workers"],
                num(b, "sweep.one_worker_s"), num(b, "sweep.workers_s"), num(b, "sweep.speedup"))?;
            checks.push(("threads".to_string(), Check::new(&targets::PYTHON_THREADS_SPEEDUP, num(b, "threads.speedup"))));
            checks.push(("local sweep".to_string(), Check::new(&targets::SWEEP_LOCAL_SPEEDUP, num(b, "sweep.speedup"))));
        }
    }
    match &sweep {
        None => writeln!(
            md,
            "> The WARM sweep did not run (`python examples/warm_sweep.py --out {}`).\n",
            out.join("python/warm-sweep").display()
        )?,
        Some(s) => {
            writeln!(md, "**WARM's energy saving over DRAM size x migration threshold** (examples/warm_sweep.toml: {} points, {} failed; \
                energy modelled, as in the memory section; the paper's average saving is {:.1}%, Fig. 8):\n",
                s["points"], s["failed"], num(s, "paper_saving") * 100.0)?;
            let rows = s["rows"].as_array().cloned().unwrap_or_default();
            let mut thresholds: Vec<i64> = rows
                .iter()
                .filter_map(|r| r["warm_threshold"].as_i64())
                .collect();
            thresholds.sort_unstable();
            thresholds.dedup();
            write!(md, "| trace | DRAM |")?;
            for t in &thresholds {
                write!(md, " threshold {t} |")?;
            }
            writeln!(md, "\n|---|---:|{}", "---:|".repeat(thresholds.len()))?;
            let mut keys: Vec<(String, String)> = Vec::new();
            for r in &rows {
                let k = (
                    r["trace"].as_str().unwrap_or("").to_string(),
                    r["dram_size"].as_str().unwrap_or("").to_string(),
                );
                if !keys.contains(&k) {
                    keys.push(k);
                }
            }
            for (trace, dram) in &keys {
                write!(md, "| {trace} | {dram} |")?;
                for t in &thresholds {
                    let v = rows
                        .iter()
                        .find(|r| {
                            r["trace"] == trace.as_str()
                                && r["dram_size"] == dram.as_str()
                                && r["warm_threshold"].as_i64() == Some(*t)
                        })
                        .map_or(f64::NAN, |r| num(r, "energy_saving"));
                    write!(md, " {:.1}% |", v * 100.0)?;
                }
                writeln!(md)?;
            }
            writeln!(md, "\n![WARM sweep](python/warm-sweep/warm_sweep.svg)\n")?;
        }
    }
    let passed = targets_table(&mut md, "Targets", &checks);
    Ok(Section {
        md,
        json: json!({"bench": bench, "warm_sweep": sweep, "checks": named_checks_json(&checks)}),
        passed,
        total: checks.len(),
    })
}

//! `hscm sweep`: checks the spec here (so a bad one is refused, by line, without
//! Python), then runs it with the Python package's executors, which hold Dask, Ray
//! and the Parquet writer.

use std::path::PathBuf;
use std::process::Command;

use anyhow::{bail, Context, Result};
use clap::Args;

#[derive(Args)]
pub struct SweepArgs {
    /// The sweep spec (TOML): `simulator`, `seeds`, then `[base]` parameters and
    /// `[grid]` / `[zip]` axes, with the simulator's parameter names (docs/python.md).
    pub spec: PathBuf,
    /// Where points run: local (processes on this machine), dask (a LocalCluster, or
    /// the cluster at --scheduler) or ray (a local Ray, or the cluster at --address).
    #[arg(long, default_value = "local", value_parser = ["local", "dask", "ray"])]
    pub executor: String,
    /// Output directory: points/ (one file per finished point) and results.parquet
    /// [default: NAME-sweep, NAME being the spec's `name` or file name].
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Local processes, Dask LocalCluster workers or Ray CPUs [default: one per core].
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..))]
    pub workers: Option<u32>,
    /// Dask: the scheduler of an existing cluster (e.g. tcp://host:8786; a SLURM
    /// cluster started with dask-jobqueue, docs/python.md).
    #[arg(long)]
    pub scheduler: Option<String>,
    /// Ray: the address of an existing cluster (host:6379, or auto).
    #[arg(long)]
    pub address: Option<String>,
    /// Run points that failed in an earlier run again (by default they stay recorded).
    #[arg(long)]
    pub retry_failed: bool,
    /// Check the spec and print its points as JSON; run nothing (needs no Python).
    #[arg(long)]
    pub check: bool,
    /// Print a JSON summary {out, points, ran, failed, rows} instead of progress.
    #[arg(long)]
    pub json: bool,
}

/// The interpreter that runs sweeps: $HSCM_PYTHON, else python3.
fn python() -> String {
    std::env::var("HSCM_PYTHON").unwrap_or_else(|_| "python3".to_string())
}

pub fn run(a: SweepArgs) -> Result<()> {
    let sweep = hscm_lab::sweep::load(&a.spec)?;
    if a.check {
        let points: Vec<serde_json::Value> = sweep
            .points
            .iter()
            .map(|p| {
                let mut v = serde_json::json!({"id": p.id});
                for (k, val) in &p.config {
                    v[k] = val.clone();
                }
                v
            })
            .collect();
        return hscm_lab::out::json(&serde_json::json!({
            "name": sweep.name, "simulator": sweep.simulator, "points": points
        }));
    }
    let py = python();
    let probe = Command::new(&py)
        .args(["-c", "import hscm.sweep"])
        .output()
        .with_context(|| {
            format!("cannot run {py} (set HSCM_PYTHON to the Python that has the hscm package)")
        })?;
    if !probe.status.success() {
        bail!(
            "{py} cannot import the hscm Python package, which runs sweeps; build and install it \
             with `bash scripts/python-env.sh` and set HSCM_PYTHON=target/py/bin/python, or \
             `pip install` the wheel it builds (docs/python.md)"
        );
    }
    let mut cmd = Command::new(&py);
    cmd.args(["-m", "hscm.sweep"]).arg(&a.spec);
    cmd.args(["--executor", &a.executor]);
    if let Some(out) = &a.out {
        cmd.arg("--out").arg(out);
    }
    if let Some(w) = a.workers {
        cmd.arg("--workers").arg(w.to_string());
    }
    if let Some(s) = &a.scheduler {
        cmd.args(["--scheduler", s]);
    }
    if let Some(s) = &a.address {
        cmd.args(["--address", s]);
    }
    if a.retry_failed {
        cmd.arg("--retry-failed");
    }
    if a.json {
        cmd.arg("--json");
    }
    let status = cmd.status().with_context(|| format!("cannot run {py}"))?;
    if !status.success() {
        bail!("the sweep stopped ({status})");
    }
    Ok(())
}

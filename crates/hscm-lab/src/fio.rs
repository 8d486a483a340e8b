//! Running fio (Debian package fio; scripts/setup.sh installs it) and reading what it
//! measured, for the experiments that compare against outside file systems and servers.

use std::path::Path;
use std::process::Command;

use anyhow::{bail, Context, Result};

/// What fio measured in one run (both directions summed; latency of the dominant one).
#[derive(Debug, Clone, Copy)]
pub struct FioResult {
    pub iops: f64,
    /// MB/s (10^6 bytes), both directions.
    pub mbps: f64,
    pub p50_us: f64,
    pub p99_us: f64,
}

/// Runs one fio job group with `args` (engine, file, `--rw`, `--bs`, …); `timed`:
/// seconds to run after a 200 ms ramp, or None for one pass over the file (a
/// prefill). `target` names what is measured, in errors.
pub fn run(args: &[String], target: &str, timed: Option<f64>) -> Result<FioResult> {
    let mut cmd = Command::new("fio");
    cmd.arg("--name=hscm-bench")
        .args(args)
        .args(["--group_reporting", "--output-format=json"]);
    if let Some(seconds) = timed {
        cmd.args([
            "--time_based".to_string(),
            format!("--runtime={}ms", (seconds * 1000.0).max(100.0) as u64),
            "--ramp_time=200ms".to_string(),
        ]);
    }
    let rw = args
        .iter()
        .find_map(|a| a.strip_prefix("--rw="))
        .unwrap_or("read")
        .to_string();
    let out = cmd
        .output()
        .context("running fio (Debian package fio; scripts/setup.sh installs it)")?;
    if !out.status.success() {
        bail!(
            "fio {rw} against {target} failed: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    // Latency of the dominant direction: reads, unless only writes ran.
    parse(&out.stdout, matches!(rw.as_str(), "randwrite" | "write"))
}

/// Runs the job file `job` (its `${NAME}`s taken from `env`), every job reported as
/// one group: operations of all jobs summed, latency of their reads (for engines
/// such as filestat, their operations).
pub fn run_job_file(job: &Path, env: &[(&str, String)], target: &str) -> Result<FioResult> {
    let out = Command::new("fio")
        .arg(job)
        .args(["--group_reporting", "--output-format=json"])
        .envs(env.iter().map(|(k, v)| (k, v)))
        .output()
        .context("running fio (Debian package fio; scripts/setup.sh installs it)")?;
    if !out.status.success() {
        bail!(
            "fio {} against {target} failed: {}",
            job.display(),
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    parse(&out.stdout, false)
}

/// Reads fio's JSON report of one group.
fn parse(stdout: &[u8], writes_only: bool) -> Result<FioResult> {
    // fio may print notes before the JSON document.
    let text = String::from_utf8_lossy(stdout);
    let start = text.find('{').context("fio printed no JSON")?;
    let v: serde_json::Value = serde_json::from_str(&text[start..]).context("fio's JSON output")?;
    let job = &v["jobs"][0];
    let side = |k: &str| &job[k];
    let sum = |field: &str| {
        side("read")[field].as_f64().unwrap_or(0.0) + side("write")[field].as_f64().unwrap_or(0.0)
    };
    let lat = if writes_only {
        side("write")
    } else {
        side("read")
    };
    let pct = |p: &str| lat["clat_ns"]["percentile"][p].as_f64().unwrap_or(f64::NAN) / 1e3;
    Ok(FioResult {
        iops: sum("iops"),
        mbps: sum("bw_bytes") / 1e6,
        p50_us: pct("50.000000"),
        p99_us: pct("99.000000"),
    })
}

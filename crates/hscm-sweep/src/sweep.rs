//! Parameter sweeps: a spec (a base configuration, axes and seeds, in TOML) expanded
//! into points with deterministic ids, every point checked before any runs, and one
//! point run into flat result rows. The executors (local processes, Dask, Ray), the
//! Parquet table and resuming live in the Python package (`hscm.sweep`), which calls
//! these; `hscm sweep` checks the spec here and hands it to that package.
//!
//! ```toml
//! simulator = "memory"            # memory, cache or paging
//! seeds = [1, 2]                  # the `seed` parameter, one point per value
//! [base]                          # what every point shares: the simulator's parameters
//! trace = "traces/cjpeg.hscm.zst" # relative to the spec's directory
//! policies = ["dram-only", "warm"]
//! [grid]                          # every combination of these values
//! dram_size = ["16M", "64M"]
//! warm_threshold = [1, 4]
//! [zip]                           # these lists walked together (equal lengths)
//! pcm_size = ["1G", "2G"]
//! ```
//!
//! (TOML puts keys written after a `[table]` line into that table, so `simulator`,
//! `name` and `seeds` come first.)

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use sha2::{Digest, Sha256};
use toml::Spanned;

use crate::params::{self, ParamError};
use crate::{memsim, vmsim};

/// The simulators a sweep can run, by the names `hscm sim` gives them.
pub const SIMULATORS: [&str; 3] = ["memory", "cache", "paging"];

/// The most points a spec may expand to: far beyond any sweep a cluster finishes, and
/// small enough that expanding it cannot exhaust memory.
pub const MAX_POINTS: u128 = 1_000_000;

/// Parameters that choose output, not a simulation.
const OUTPUT_SWITCHES: [&str; 2] = ["json", "csv"];

/// A spec that cannot run, and where: the file and, when known, the line.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{}{}: {message}", .path.display(), .line.map(|l| format!(":{l}")).unwrap_or_default())]
pub struct SpecError {
    pub path: PathBuf,
    pub line: Option<usize>,
    pub message: String,
}

/// One point of a sweep.
#[derive(Debug, Clone, Serialize)]
pub struct Point {
    /// First 16 hex digits of SHA-256 over the canonical configuration and the hscm
    /// version: the same point has the same id in every run, on every machine.
    pub id: String,
    /// Position in the expansion (grid in axis-name order, then zip, then seeds).
    pub index: usize,
    pub seed: Option<u64>,
    /// The configuration as written (plus the simulator's name), keys sorted: what the
    /// id hashes and what the result table shows.
    pub config: BTreeMap<String, Value>,
    /// The parameters the simulator runs with: `config` with relative trace paths
    /// resolved against the spec's directory.
    pub params: BTreeMap<String, Value>,
}

/// A checked, expanded spec.
#[derive(Debug, Clone, Serialize)]
pub struct Sweep {
    pub name: String,
    pub simulator: String,
    /// SHA-256 of the spec's text (the file's bytes).
    pub spec_hash: String,
    pub hscm_version: String,
    pub points: Vec<Point>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct SpecFile {
    simulator: Spanned<String>,
    name: Option<String>,
    #[serde(default)]
    base: BTreeMap<Spanned<String>, Spanned<toml::Value>>,
    #[serde(default)]
    grid: BTreeMap<Spanned<String>, Spanned<toml::Value>>,
    #[serde(default)]
    zip: BTreeMap<Spanned<String>, Spanned<toml::Value>>,
    seeds: Option<Spanned<Vec<u64>>>,
}

/// Reads, expands and checks the spec at `path`: every point's parameters parse, every
/// trace opens. Nothing runs.
pub fn load(path: &Path) -> Result<Sweep, SpecError> {
    let text = std::fs::read_to_string(path).map_err(|e| SpecError {
        path: path.to_path_buf(),
        line: None,
        message: format!("cannot read the spec: {e}"),
    })?;
    expand(&text, path, path.parent().unwrap_or(Path::new(".")))
}

/// [`load`] on spec text; relative traces are resolved against `base_dir`.
pub fn expand(text: &str, path: &Path, base_dir: &Path) -> Result<Sweep, SpecError> {
    let err = |span: Option<std::ops::Range<usize>>, message: String| SpecError {
        path: path.to_path_buf(),
        line: span.map(|s| text[..s.start.min(text.len())].matches('\n').count() + 1),
        message,
    };
    let spec: SpecFile =
        toml::from_str(text).map_err(|e| err(e.span(), e.message().trim_end().to_string()))?;
    let simulator = spec.simulator.get_ref().clone();
    if !SIMULATORS.contains(&simulator.as_str()) {
        return Err(err(
            Some(spec.simulator.span()),
            format!(
                "unknown simulator {simulator:?} (known: {})",
                SIMULATORS.join(", ")
            ),
        ));
    }
    // Where each parameter was written, for errors about it.
    let mut lines: BTreeMap<String, std::ops::Range<usize>> = BTreeMap::new();
    let mut base: Vec<(String, Value)> = Vec::new();
    for (k, v) in &spec.base {
        lines.insert(k.get_ref().clone(), k.span());
        base.push((k.get_ref().clone(), to_json(v.get_ref())));
    }
    let axis = |table: &BTreeMap<Spanned<String>, Spanned<toml::Value>>,
                lines: &mut BTreeMap<String, std::ops::Range<usize>>|
     -> Result<Vec<(String, Vec<Value>)>, SpecError> {
        let mut out = Vec::new();
        for (k, v) in table {
            let name = k.get_ref().clone();
            if lines.insert(name.clone(), k.span()).is_some() {
                return Err(err(
                    Some(k.span()),
                    format!("{name} is given twice (in [base] and an axis, or in two axes)"),
                ));
            }
            let toml::Value::Array(values) = v.get_ref() else {
                return Err(err(
                    Some(v.span()),
                    format!("axis {name}: expected a list of values"),
                ));
            };
            if values.is_empty() {
                return Err(err(Some(v.span()), format!("axis {name} is empty")));
            }
            out.push((name, values.iter().map(to_json).collect()));
        }
        Ok(out)
    };
    let grid = axis(&spec.grid, &mut lines)?;
    let zip = axis(&spec.zip, &mut lines)?;
    if let Some((first, n)) = zip.first().map(|(k, v)| (k, v.len())) {
        if let Some((other, m)) = zip.iter().map(|(k, v)| (k, v.len())).find(|(_, m)| *m != n) {
            return Err(err(
                lines.get(other).cloned(),
                format!("[zip] lists walk together, but {first} has {n} values and {other} {m}"),
            ));
        }
    }
    let seeds: Vec<Option<u64>> = match &spec.seeds {
        None => vec![None],
        Some(s) if s.get_ref().is_empty() => {
            return Err(err(Some(s.span()), "seeds is empty".into()))
        }
        Some(s) => {
            if lines.contains_key("seed") {
                return Err(err(
                    lines.get("seed").cloned(),
                    "seed is given both here and as seeds".into(),
                ));
            }
            lines.insert("seed".into(), s.span());
            s.get_ref().iter().map(|&v| Some(v)).collect()
        }
    };
    let zip_len = zip.first().map_or(1, |(_, v)| v.len());
    let total = grid
        .iter()
        .map(|(_, v)| v.len() as u128)
        .chain([zip_len as u128, seeds.len() as u128])
        .fold(1u128, |a, n| a.saturating_mul(n));
    if total > MAX_POINTS {
        return Err(err(
            None,
            format!("the spec expands to {total} points; at most {MAX_POINTS} are allowed"),
        ));
    }
    // Grid combinations, first axis slowest.
    let mut combos: Vec<Vec<(String, Value)>> = vec![Vec::new()];
    for (name, values) in &grid {
        combos = combos
            .into_iter()
            .flat_map(|c| {
                values.iter().map(move |v| {
                    let mut c = c.clone();
                    c.push((name.clone(), v.clone()));
                    c
                })
            })
            .collect();
    }
    let version = env!("CARGO_PKG_VERSION").to_string();
    let mut points = Vec::new();
    let mut traces_checked = std::collections::BTreeSet::new();
    for combo in &combos {
        for z in 0..zip_len {
            for &seed in &seeds {
                let mut config: BTreeMap<String, Value> = base.iter().cloned().collect();
                config.extend(combo.iter().cloned());
                config.extend(zip.iter().map(|(k, v)| (k.clone(), v[z].clone())));
                if let Some(s) = seed {
                    config.insert("seed".into(), Value::from(s));
                }
                let mut params = config.clone();
                if let Some(Value::String(t)) = params.get("trace") {
                    let p = Path::new(t);
                    if p.is_relative() {
                        let resolved = base_dir.join(p).display().to_string();
                        params.insert("trace".into(), Value::String(resolved));
                    }
                }
                check(&simulator, &params).map_err(|e| {
                    err(
                        lines.get(&e.param).cloned(),
                        if e.param.is_empty() {
                            e.message.clone()
                        } else {
                            e.to_string()
                        },
                    )
                })?;
                if let Some(Value::String(t)) = params.get("trace") {
                    if traces_checked.insert(t.clone()) {
                        check_trace(&simulator, &params).map_err(|m| {
                            err(lines.get("trace").cloned(), format!("trace {t}: {m}"))
                        })?;
                    }
                }
                let mut canonical = config.clone();
                canonical.insert("simulator".into(), Value::String(simulator.clone()));
                let id = point_id(&canonical, &version);
                points.push(Point {
                    id,
                    index: points.len(),
                    seed,
                    config,
                    params,
                });
            }
        }
    }
    Ok(Sweep {
        name: spec.name.unwrap_or_else(|| {
            path.file_stem()
                .map_or_else(|| "sweep".into(), |s| s.to_string_lossy().into_owned())
        }),
        simulator,
        spec_hash: hex(&Sha256::digest(text.as_bytes())),
        hscm_version: version,
        points,
    })
}

/// The id of a canonical configuration (keys sorted, as a `BTreeMap` keeps them).
pub fn point_id(canonical: &BTreeMap<String, Value>, version: &str) -> String {
    let json = serde_json::to_string(canonical).expect("JSON values serialise");
    let mut h = Sha256::new();
    h.update(json.as_bytes());
    h.update(b"\nhscm ");
    h.update(version.as_bytes());
    hex(&h.finalize()[..8])
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn to_json(v: &toml::Value) -> Value {
    match v {
        toml::Value::String(s) => Value::String(s.clone()),
        toml::Value::Integer(i) => Value::from(*i),
        toml::Value::Float(f) => Value::from(*f),
        toml::Value::Boolean(b) => Value::Bool(*b),
        toml::Value::Datetime(d) => Value::String(d.to_string()),
        toml::Value::Array(a) => Value::Array(a.iter().map(to_json).collect()),
        toml::Value::Table(t) => Value::Object(
            t.iter()
                .map(|(k, v)| (k.clone(), to_json(v)))
                .collect::<Map<_, _>>(),
        ),
    }
}

fn pairs(params: &BTreeMap<String, Value>) -> Vec<(String, Value)> {
    params.iter().map(|(k, v)| (k.clone(), v.clone())).collect()
}

/// Whether `params` parse as `simulator`'s parameters.
pub fn check(simulator: &str, params: &BTreeMap<String, Value>) -> Result<(), ParamError> {
    let p = pairs(params);
    match simulator {
        "memory" => {
            let a: memsim::CompareArgs = params::parse(&p, &OUTPUT_SWITCHES)?;
            // The device presets and mapping are checked when the configuration is made.
            a.config.to_config(true).map_err(|e| ParamError {
                param: String::new(),
                message: format!("{e:#}"),
            })?;
        }
        "cache" => {
            params::parse::<vmsim::CacheArgs>(&p, &OUTPUT_SWITCHES)?;
        }
        "paging" => {
            params::parse::<vmsim::PagingArgs>(&p, &OUTPUT_SWITCHES)?;
        }
        other => {
            return Err(ParamError {
                param: String::new(),
                message: format!(
                    "unknown simulator {other:?} (known: {})",
                    SIMULATORS.join(", ")
                ),
            })
        }
    }
    Ok(())
}

fn check_trace(simulator: &str, params: &BTreeMap<String, Value>) -> Result<(), String> {
    let p = pairs(params);
    let parse_err = |e: ParamError| e.to_string();
    let opened = match simulator {
        "cache" => {
            let a: vmsim::CacheArgs = params::parse(&p, &OUTPUT_SWITCHES).map_err(parse_err)?;
            let block = u32::try_from(a.block).unwrap_or(u32::MAX);
            hscm_trace::RequestReader::open(&a.trace, a.format, block).map(drop)
        }
        "memory" => {
            let a: memsim::CompareArgs = params::parse(&p, &OUTPUT_SWITCHES).map_err(parse_err)?;
            hscm_trace::TraceReader::open(&a.trace, a.format).map(drop)
        }
        _ => {
            let a: vmsim::PagingArgs = params::parse(&p, &OUTPUT_SWITCHES).map_err(parse_err)?;
            hscm_trace::TraceReader::open(&a.trace, a.format).map(drop)
        }
    };
    opened.map_err(|e| e.to_string())
}

/// Runs one point of `simulator` with `params` (a simulator's parameters by name, as
/// Python passes them) and returns its result rows, flat: nested objects become
/// `outer.inner` columns, lists become JSON text.
pub fn run_point(
    simulator: &str,
    params: &[(String, Value)],
) -> anyhow::Result<Vec<Map<String, Value>>> {
    let raw = run_raw(simulator, params)?;
    let rows: Vec<Value> = match simulator {
        "memory" => raw["policies"].as_array().cloned().unwrap_or_default(),
        "paging" => raw["rows"].as_array().cloned().unwrap_or_default(),
        _ => raw.as_array().cloned().unwrap_or_default(),
    };
    Ok(rows
        .iter()
        .map(|r| {
            let mut flat = Map::new();
            flatten("", r, &mut flat);
            // The trace is a parameter of the point; a row need not repeat it.
            flat.remove("trace");
            flat
        })
        .collect())
}

/// Runs one simulation and returns what the command prints with `--json`.
pub fn run_raw(simulator: &str, params: &[(String, Value)]) -> anyhow::Result<Value> {
    Ok(match simulator {
        "memory" => {
            let a: memsim::CompareArgs = params::parse(params, &OUTPUT_SWITCHES)?;
            let out = memsim::compare(&a.trace, a.format, &a.config, &a.policies(), false)?;
            serde_json::to_value(out)?
        }
        "cache" => {
            let a: vmsim::CacheArgs = params::parse(params, &OUTPUT_SWITCHES)?;
            serde_json::to_value(vmsim::sim_cache_quiet(&a)?)?
        }
        "paging" => {
            let a: vmsim::PagingArgs = params::parse(params, &OUTPUT_SWITCHES)?;
            serde_json::to_value(vmsim::sim_paging(&a, false)?)?
        }
        other => anyhow::bail!(
            "unknown simulator {other:?} (known: {})",
            SIMULATORS.join(", ")
        ),
    })
}

fn flatten(prefix: &str, v: &Value, out: &mut Map<String, Value>) {
    match v {
        Value::Object(m) => {
            for (k, v) in m {
                let key = if prefix.is_empty() {
                    k.clone()
                } else {
                    format!("{prefix}.{k}")
                };
                flatten(&key, v, out);
            }
        }
        Value::Array(_) => {
            out.insert(prefix.to_string(), Value::String(v.to_string()));
        }
        scalar => {
            out.insert(prefix.to_string(), scalar.clone());
        }
    }
}

/// `hscm sweep`: checks the spec here (so a bad one is refused, by line, without
/// Python), then runs it with the Python package's executors, which hold Dask, Ray
/// and the Parquet writer.
#[derive(clap::Args, Debug)]
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

impl SweepArgs {
    /// Checks the spec, then prints its points (`--check`) or runs them.
    pub fn run(&self) -> anyhow::Result<()> {
        run(self)
    }
}

fn run(a: &SweepArgs) -> anyhow::Result<()> {
    use anyhow::{bail, Context};
    use std::process::Command;
    let sweep = load(&a.spec)?;
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
        return crate::out::json(&serde_json::json!({
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

#[cfg(test)]
mod tests {
    use super::*;

    const TRACE: &str = "../../traces/cjpeg.hscm.zst";

    fn spec(body: &str) -> Result<Sweep, SpecError> {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR"));
        expand(body, Path::new("s.toml"), dir)
    }

    #[test]
    fn a_grid_with_seeds_expands_to_every_combination_with_stable_ids() {
        let body = format!(
            "simulator = \"memory\"\nseeds = [7, 8]\n[base]\ntrace = \"{TRACE}\"\n\
             policies = [\"warm\"]\n\
             [grid]\ndram_size = [\"16M\", \"32M\"]\nwarm_threshold = [1, 2, 4]\n"
        );
        let s = spec(&body).unwrap();
        assert_eq!(s.points.len(), 12);
        let ids: std::collections::BTreeSet<_> = s.points.iter().map(|p| &p.id).collect();
        assert_eq!(ids.len(), 12, "ids are distinct");
        assert_eq!(
            spec(&body).unwrap().points[5].id,
            s.points[5].id,
            "and stable"
        );
        assert_eq!(s.points[0].seed, Some(7));
        assert!(s.points[0].params["trace"]
            .as_str()
            .unwrap()
            .starts_with('/'));
        assert_eq!(
            s.points[0].config["trace"], TRACE,
            "the config is as written"
        );
    }

    #[test]
    fn zipped_lists_walk_together_and_must_match() {
        let dir = tempfile::tempdir().unwrap();
        let trace = dir.path().join("t.oracleGeneral");
        let spec = hscm_trace::RequestSynthSpec::zipf(1000, 100, 0.8);
        vmsim::gen_requests(spec, &trace).unwrap();
        let ok = "simulator = \"cache\"\n[base]\ntrace = \"t.oracleGeneral\"\n\
                  [zip]\npolicy = [\"lru\", \"arc\"]\nsize = [\"5%\", \"10%\"]\n";
        let s = expand(ok, Path::new("s.toml"), dir.path()).unwrap();
        assert_eq!(s.points.len(), 2);
        assert_eq!(s.points[1].config["policy"], "arc");
        assert_eq!(s.points[1].config["size"], "10%");
        let bad = ok.replace("size = [\"5%\", \"10%\"]", "size = [\"5%\"]");
        let e = expand(&bad, Path::new("s.toml"), dir.path()).unwrap_err();
        assert!(e.message.contains("walk together"), "{e}");
        assert_eq!(e.line, Some(6), "{e}");
    }

    #[test]
    fn bad_specs_are_refused_naming_the_line() {
        let head = format!("simulator = \"memory\"\n[base]\ntrace = \"{TRACE}\"\n");
        let cases = [
            (
                format!("{head}dram_sise = \"1G\"\n"),
                4,
                "unknown parameter",
            ),
            (format!("{head}dram_size = \"lots\"\n"), 4, "dram_size"),
            (format!("{head}[grid]\nwarm_threshold = []\n"), 5, "empty"),
            (format!("{head}[grid]\nwarm_threshold = 3\n"), 5, "list"),
            (
                "simulator = \"memory\"\n[base]\ntrace = \"no/such/trace\"\n".to_string(),
                3,
                "no/such/trace",
            ),
            ("simulator = \"disk\"\n".to_string(), 1, "unknown simulator"),
            (format!("{head}[grids]\n"), 4, "unknown field"),
            (format!("seeds = []\n{head}"), 1, "seeds is empty"),
        ];
        for (body, line, needle) in cases {
            let e = spec(&body).unwrap_err();
            assert_eq!(e.line, Some(line), "{body}: {e}");
            assert!(e.to_string().contains(needle), "{body}: {e}");
            assert!(e.to_string().starts_with("s.toml:"), "{e}");
        }
    }

    #[test]
    fn a_point_runs_into_flat_rows() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR"));
        let params = vec![
            (
                "trace".to_string(),
                Value::String(dir.join(TRACE).display().to_string()),
            ),
            ("policies".to_string(), serde_json::json!(["warm"])),
        ];
        let rows = run_point("memory", &params).unwrap();
        assert_eq!(rows.len(), 1);
        assert_eq!(rows[0]["policy"], "warm");
        assert!(
            rows[0].contains_key("read_latency_ns.mean"),
            "{:?}",
            rows[0].keys()
        );
        assert!(!rows[0].contains_key("trace"));
    }
}

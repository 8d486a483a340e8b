//! `hscm bench nbd`: the NBD export against nbdkit, driven by fio's nbd engine over the
//! same kind of socket (Unix), in the same run: nbdkit's memory plugin with
//! `allocator=malloc` (volatile, its fastest), its file plugin over a file on the same
//! disk (durable only through FLUSH), and that file plugin with every write forced to
//! FUA (nbdkit's fua filter, `fuamode=force`): the fair partner of an Immediate volume.
//!
//! Two bounds run beside them: nbdkit's null plugin (the transport: a server that does
//! no work) and `nbdkit-odirect`, a plugin of ours compiled by nbdkit's cc plugin
//! (assets/nbdkit-odirect.c) that writes each request to a file with one O_DIRECT
//! pwrite in nbdkit's parallel thread model: the least any export whose writes reach
//! the device before their reply can do per request.

pub mod flush;
pub mod metrics;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use hscm_nbd::{Endpoint, ExportOptions, Listener, Server};
use hscm_volume::{CreateOptions, Durability, OpenOptions, Volume};
use serde::Serialize;

use crate::fio::FioResult;
use crate::units::{parse_size, size_arg};

/// The NBD export against nbdkit's memory plugin (volatile), its file plugin
/// (durable through FLUSH) and that plugin with FUA forced, driven by fio's nbd
/// engine over Unix sockets: 4 KiB random reads, writes and a 66:34 mix, QD1 with
/// one job and QD16 with four, with nbdkit's null plugin as the transport's bound.
/// Needs fio and nbdkit (scripts/setup.sh).
///
/// Example: hscm bench nbd --seconds 3 --json
#[derive(clap::Args, Clone, Debug)]
pub struct NbdBenchArgs {
    /// Seconds per measured point.
    #[arg(long, default_value_t = 3.0)]
    pub seconds: f64,
    /// Export size (each target's working set).
    #[arg(long, default_value = size_arg(256 << 20), value_parser = parse_size)]
    pub size: u64,
    /// Directory for the volume and nbdkit's file (the disk under test; default: the
    /// system temporary directory). Removed afterwards.
    #[arg(long)]
    pub dir: Option<PathBuf>,
    /// Print JSON (a stable contract) instead of text.
    #[arg(long)]
    pub json: bool,
    /// Run only the service side's cost (the metrics rows).
    #[arg(long)]
    pub metrics_only: bool,
}

/// One measured point. Field names are the `--json` contract.
#[derive(Debug, Clone, Serialize)]
pub struct NbdRow {
    /// randread, randwrite or randrw (66% reads).
    pub workload: String,
    pub bs: u64,
    /// I/O depth per job.
    pub qd: u32,
    /// fio jobs, a connection each.
    pub jobs: u32,
    /// hscm, nbdkit-memory, nbdkit-file, nbdkit-file-fua, nbdkit-null (the transport's
    /// bound), nbdkit-odirect (a server that writes each request with O_DIRECT: the
    /// bound of write-through exports) or device-odirect (the disk alone, no server).
    pub target: String,
    /// What an acknowledged write means: immediate, on-flush (on the device), write-back
    /// (in the server's RAM until FLUSH), volatile, flush-only, fua, none (the null
    /// plugin keeps nothing), or device (on the disk, unsynced).
    pub durability: String,
    pub iops: f64,
    pub p50_us: f64,
    pub p99_us: f64,
}

#[derive(Debug, Clone, Serialize)]
pub struct NbdBench {
    pub rows: Vec<NbdRow>,
    /// "WORKLOAD qdQDxJOBS TARGET/BASELINE" → IOPS ratio, measured in this run.
    pub ratios: BTreeMap<String, f64>,
    /// What a FLUSH costs a write-back volume after N dirty MiB, beside the device's
    /// sequential write of N MiB plus one sync, measured in the same run.
    pub flush: Vec<crate::nbd::flush::FlushRow>,
    /// The service side's cost: the export as `hscm nbd` runs it (counters, status,
    /// metrics scraped every second) against a bare server, same volume, same run.
    pub metrics: Vec<crate::nbd::metrics::MetricsCostRow>,
    pub seconds: f64,
    pub size: u64,
    /// Targets left out of this run, each with why (a bound whose tools are missing
    /// is skipped, not the whole benchmark).
    pub skipped: Vec<String>,
}

/// A target under test: where it listens and what keeps it alive.
struct Running {
    uri: String,
    _keep: Keep,
}

#[allow(dead_code)] // held for their Drop
enum Keep {
    Hscm {
        stop: Arc<AtomicBool>,
        thread: Option<std::thread::JoinHandle<Result<()>>>,
    },
    Nbdkit(Child),
}

impl Drop for Keep {
    fn drop(&mut self) {
        match self {
            Keep::Hscm { stop, thread } => {
                stop.store(true, std::sync::atomic::Ordering::Relaxed);
                if let Some(t) = thread.take() {
                    let _ = t.join();
                }
            }
            Keep::Nbdkit(child) => {
                let _ = child.kill();
                let _ = child.wait();
            }
        }
    }
}

fn start_hscm(dir: &Path, size: u64, durability: Durability) -> Result<Running> {
    let path = dir.join(format!("nbd-{durability:?}.hscm"));
    Volume::create(
        &path,
        size,
        &CreateOptions {
            durability,
            ..CreateOptions::default()
        },
    )?;
    let volume = Volume::open(&path, &OpenOptions::default())?;
    volume.wait_loaded(None)?;
    let socket = dir.join(format!("hscm-{durability:?}.sock"));
    let listener = Listener::bind(&Endpoint::Unix(socket))?;
    let uri = listener.uri("");
    let server = Arc::new(Server::new(Arc::new(volume), ExportOptions::default()));
    let stop = Arc::new(AtomicBool::new(false));
    let s = stop.clone();
    let thread = std::thread::spawn(move || -> Result<()> {
        listener.serve(server, s)?;
        Ok(())
    });
    Ok(Running {
        uri,
        _keep: Keep::Hscm {
            stop,
            thread: Some(thread),
        },
    })
}

/// The write-through bound's plugin, compiled by nbdkit's cc plugin when it starts.
const ODIRECT_PLUGIN: &str = include_str!("../../assets/nbdkit-odirect.c");

/// Starts nbdkit with `args`; `source`, if given, goes to its standard input (the cc
/// plugin reads a plugin's C source there).
fn start_nbdkit(dir: &Path, name: &str, args: &[String], source: Option<&str>) -> Result<Running> {
    use std::io::Write as _;
    let socket = dir.join(format!("{name}.sock"));
    let log = dir.join(format!("{name}.log"));
    let mut child = Command::new("nbdkit")
        .arg("--foreground")
        .arg("--exit-with-parent")
        .arg("--unix")
        .arg(&socket)
        .args(args)
        .stdin(if source.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).with_context(|| format!("creating {}", log.display()))?)
        .spawn()
        .context("starting nbdkit (Debian package nbdkit; scripts/setup.sh installs it)")?;
    if let (Some(text), Some(mut stdin)) = (source, child.stdin.take()) {
        stdin
            .write_all(text.as_bytes())
            .with_context(|| format!("giving nbdkit {name} its plugin's source"))?;
    }
    // The cc plugin compiles first: allow for it.
    let deadline = Instant::now() + Duration::from_secs(30);
    while std::os::unix::net::UnixStream::connect(&socket).is_err() {
        let exited = child.try_wait().ok().flatten();
        if exited.is_some() || Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            let said = std::fs::read_to_string(&log).unwrap_or_default();
            bail!(
                "nbdkit {name} did not start listening on {}{}",
                socket.display(),
                if said.trim().is_empty() {
                    String::new()
                } else {
                    format!(": {}", said.trim())
                }
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    Ok(Running {
        uri: format!("nbd+unix:///?socket={}", socket.display()),
        _keep: Keep::Nbdkit(child),
    })
}

/// `engine`: fio's engine arguments (the nbd engine and a URI, or a file with direct
/// I/O); `target` names it in errors.
fn fio(
    engine: &[String],
    target: &str,
    rw: &str,
    bs: u64,
    qd: u32,
    jobs: u32,
    seconds: f64,
) -> Result<FioResult> {
    let mut args = engine.to_vec();
    args.extend([
        format!("--rw={rw}"),
        format!("--bs={bs}"),
        format!("--iodepth={qd}"),
        format!("--numjobs={jobs}"),
    ]);
    if rw == "randrw" {
        args.push("--rwmixread=66".into());
    }
    // A sequential "write" is the prefill: one pass over the export, not timed.
    let timed = (rw != "write").then_some(seconds);
    crate::fio::run(&args, target, timed)
}

/// (target, durability, which workloads it runs). nbdkit's null plugin stores nothing
/// and answers reads with zeroes: what any server can do at best over this transport
/// with this client, the bound the others are read against.
///
/// `nbdkit-odirect` is the least a server can do when each write must reach the device
/// before its reply, as the volume's do: one O_DIRECT pwrite per request, nothing else
/// (on the same file as nbdkit-file). `device-odirect` is no server: fio writing 4 KiB
/// blocks with O_DIRECT straight to that file, the disk's own bound.
const TARGETS: [(&str, &str, &[&str]); 9] = [
    ("hscm", "on-flush", &["randread", "randwrite", "randrw"]),
    ("hscm", "write-back", &["randwrite", "randrw"]),
    ("hscm", "immediate", &["randwrite"]),
    (
        "nbdkit-memory",
        "volatile",
        &["randread", "randwrite", "randrw"],
    ),
    (
        "nbdkit-file",
        "flush-only",
        &["randread", "randwrite", "randrw"],
    ),
    ("nbdkit-file-fua", "fua", &["randwrite"]),
    ("nbdkit-null", "none", &["randread"]),
    ("nbdkit-odirect", "device", &["randwrite"]),
    ("device-odirect", "device", &["randwrite"]),
];

/// (QD per job, jobs).
const DEPTHS: [(u32, u32); 2] = [(1, 1), (16, 4)];

pub fn bench(a: &NbdBenchArgs) -> Result<NbdBench> {
    if a.seconds <= 0.0 || a.size < (1 << 20) {
        bail!("--seconds must be positive and --size at least 1M");
    }
    let scratch = crate::scratch::Scratch::new("nbd", a.dir.as_deref())?;
    let dir = scratch.path();
    let file = dir.join("nbdkit-file.img");
    std::fs::File::create(&file)
        .and_then(|f| f.set_len(a.size))
        .with_context(|| format!("creating {}", file.display()))?;
    let mut rows = Vec::new();
    let mut skipped = Vec::new();
    let targets: &[_] = if a.metrics_only { &[] } else { &TARGETS };
    for &(target, durability, workloads) in targets {
        let nbd = |r: &Running| vec!["--ioengine=nbd".to_string(), format!("--uri={}", r.uri)];
        let (_running, engine) = match (target, durability) {
            ("device-odirect", _) => {
                let engine = vec![
                    "--ioengine=libaio".to_string(),
                    "--direct=1".to_string(),
                    format!("--filename={}", file.display()),
                    format!("--size={}", a.size),
                ];
                (None, engine)
            }
            ("hscm", name) => {
                let durability: Durability = name.parse()?;
                let r = start_hscm(dir, a.size, durability)?;
                let e = nbd(&r);
                (Some(r), e)
            }
            ("nbdkit-memory", _) => {
                let args = [
                    "memory".into(),
                    a.size.to_string(),
                    "allocator=malloc".into(),
                ];
                let r = start_nbdkit(dir, target, &args, None)?;
                let e = nbd(&r);
                (Some(r), e)
            }
            ("nbdkit-file", _) => {
                let r = start_nbdkit(
                    dir,
                    target,
                    &["file".into(), file.display().to_string()],
                    None,
                )?;
                let e = nbd(&r);
                (Some(r), e)
            }
            ("nbdkit-null", _) => {
                let r = start_nbdkit(dir, target, &["null".into(), a.size.to_string()], None)?;
                let e = nbd(&r);
                (Some(r), e)
            }
            ("nbdkit-odirect", _) => {
                let args = ["cc".into(), "-".into(), format!("file={}", file.display())];
                match start_nbdkit(dir, target, &args, Some(ODIRECT_PLUGIN)) {
                    Ok(r) => {
                        let e = nbd(&r);
                        (Some(r), e)
                    }
                    Err(e) => {
                        let why = format!(
                            "{target}: skipped, the write-through bound needs nbdkit's cc plugin, gcc and nbdkit-plugin.h (Debian package nbdkit-plugin-dev; scripts/setup.sh installs it): {e:#}"
                        );
                        note!("[nbd] {why}");
                        skipped.push(why);
                        continue;
                    }
                }
            }
            _ => {
                let args = [
                    "--filter=fua".into(),
                    "file".into(),
                    file.display().to_string(),
                    "fuamode=force".into(),
                ];
                let r = start_nbdkit(dir, target, &args, None)?;
                let e = nbd(&r);
                (Some(r), e)
            }
        };
        note!(
            "[nbd] {target} ({durability}): filling {}",
            crate::units::human_bytes(a.size)
        );
        fio(&engine, target, "write", 1 << 20, 4, 1, a.seconds)?;
        for rw in workloads {
            for (qd, jobs) in DEPTHS {
                note!("[nbd] {target} ({durability}): {rw} 4 KiB, QD{qd} x {jobs}");
                let r = fio(&engine, target, rw, 4096, qd, jobs, a.seconds)?;
                rows.push(NbdRow {
                    workload: rw.to_string(),
                    bs: 4096,
                    qd,
                    jobs,
                    target: target.to_string(),
                    durability: durability.to_string(),
                    iops: r.iops,
                    p50_us: r.p50_us,
                    p99_us: r.p99_us,
                });
            }
        }
    }
    let ratios = ratios(&rows);
    let flush = if a.metrics_only {
        Vec::new()
    } else {
        crate::nbd::flush::bench(dir, a)?
    };
    let metrics = crate::nbd::metrics::bench(dir, a)?;
    Ok(NbdBench {
        rows,
        ratios,
        flush,
        metrics,
        seconds: a.seconds,
        size: a.size,
        skipped,
    })
}

/// The targets that bound what a server can do rather than compete with it.
const BOUNDS: [&str; 3] = ["nbdkit-null", "nbdkit-odirect", "device-odirect"];

/// Ours over each baseline at every point both ran.
fn ratios(rows: &[NbdRow]) -> BTreeMap<String, f64> {
    let mut out = BTreeMap::new();
    let find = |w: &str, qd: u32, jobs: u32, t: &str, d: &str| {
        rows.iter()
            .find(|r| {
                r.workload == w
                    && r.qd == qd
                    && r.jobs == jobs
                    && r.target == t
                    && r.durability == d
            })
            .map(|r| r.iops)
    };
    // The bounds: the null server (the transport), the write-through server (a write
    // that reaches the device before its reply) and the bare device, each over the
    // memory plugin.
    for bound in rows.iter().filter(|r| BOUNDS.contains(&r.target.as_str())) {
        if let Some(b) = find(
            &bound.workload,
            bound.qd,
            bound.jobs,
            "nbdkit-memory",
            "volatile",
        ) {
            out.insert(
                format!(
                    "{} qd{}x{} {}/nbdkit-memory",
                    bound.workload, bound.qd, bound.jobs, bound.target
                ),
                bound.iops / b,
            );
        }
    }
    for ours in rows.iter().filter(|r| r.target == "hscm") {
        for (base, base_durability) in [
            ("nbdkit-memory", "volatile"),
            ("nbdkit-file", "flush-only"),
            ("nbdkit-file-fua", "fua"),
            ("nbdkit-odirect", "device"),
        ] {
            if let Some(b) = find(&ours.workload, ours.qd, ours.jobs, base, base_durability) {
                out.insert(
                    format!(
                        "{} qd{}x{} hscm-{}/{base}",
                        ours.workload, ours.qd, ours.jobs, ours.durability
                    ),
                    ours.iops / b,
                );
            }
        }
    }
    out
}

pub fn print(b: &NbdBench) -> Result<()> {
    outln!(
        "NBD, 4 KiB requests, fio's nbd engine over Unix sockets, {:.1} s per point, {} export",
        b.seconds,
        crate::units::human_bytes(b.size)
    )?;
    outln!(
        "{:<10} {:>6} {:<16} {:<11} {:>10} {:>9} {:>9}",
        "workload",
        "QDxJ",
        "target",
        "durability",
        "IOPS",
        "p50 µs",
        "p99 µs"
    )?;
    for r in &b.rows {
        outln!(
            "{:<10} {:>6} {:<16} {:<11} {:>10.0} {:>9.1} {:>9.1}",
            r.workload,
            format!("{}x{}", r.qd, r.jobs),
            r.target,
            r.durability,
            r.iops,
            r.p50_us,
            r.p99_us
        )?;
    }
    outln!()?;
    for (k, v) in &b.ratios {
        outln!("{k:<50} {v:>7.2}x")?;
    }
    outln!()?;
    crate::nbd::flush::print(&b.flush)?;
    outln!()?;
    crate::nbd::metrics::print(&b.metrics)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(w: &str, t: &str, d: &str, iops: f64) -> NbdRow {
        NbdRow {
            workload: w.into(),
            bs: 4096,
            qd: 1,
            jobs: 1,
            target: t.into(),
            durability: d.into(),
            iops,
            p50_us: 1.0,
            p99_us: 2.0,
        }
    }

    #[test]
    fn ratios_pair_ours_with_each_baseline_at_the_same_point() {
        let rows = [
            row("randread", "hscm", "on-flush", 300.0),
            row("randread", "nbdkit-memory", "volatile", 100.0),
            row("randwrite", "hscm", "immediate", 50.0),
            row("randwrite", "nbdkit-file-fua", "fua", 25.0),
        ];
        let r = ratios(&rows);
        assert_eq!(r["randread qd1x1 hscm-on-flush/nbdkit-memory"], 3.0);
        assert_eq!(r["randwrite qd1x1 hscm-immediate/nbdkit-file-fua"], 2.0);
        assert_eq!(r.len(), 2);
        let bounds = [
            row("randwrite", "device-odirect", "device", 30.0),
            row("randwrite", "nbdkit-memory", "volatile", 60.0),
        ];
        assert_eq!(
            ratios(&bounds)["randwrite qd1x1 device-odirect/nbdkit-memory"],
            0.5
        );
        let write_through = [
            row("randwrite", "hscm", "on-flush", 45.0),
            row("randwrite", "nbdkit-odirect", "device", 50.0),
            row("randwrite", "nbdkit-memory", "volatile", 100.0),
        ];
        let r = ratios(&write_through);
        assert_eq!(r["randwrite qd1x1 hscm-on-flush/nbdkit-odirect"], 0.9);
        assert_eq!(r["randwrite qd1x1 nbdkit-odirect/nbdkit-memory"], 0.5);
        assert_eq!(r["randwrite qd1x1 hscm-on-flush/nbdkit-memory"], 0.45);
    }
}

//! `hscm bench remote`: volumes whose home is an NBD export on the network, against the
//! same workload run straight at that export, in the same run (issue 52).
//!
//! The export is nbdkit's memory plugin over TCP on 127.0.0.1 (a server that acknowledges
//! a write once it holds it, so a plain write costs what a FUA write costs there: one
//! round trip). Added round-trip time is delay on the path, not a server's sleep: a relay
//! in front of the export holds every byte for half the RTT in each direction, with any
//! number of requests in flight (so a pipelined client pays the RTT once, as on a real
//! link). `tc netem` would be the kernel's way; this machine's kernel has no sch_netem,
//! so the relay stands in for it, and at 0 ms there is no relay at all. Every target
//! is driven by fio's nbd engine:
//!
//! * `direct`: fio straight at the export (its bound: one round trip per request);
//! * `flat-local`: a flat volume on a local file, served by hscm's NBD server over a
//!   Unix socket (the baseline of reads at RAM speed);
//! * `flat-remote`: the same volume with its home on the export, served the same way;
//! * `tier-remote`: a tiered volume with an eighth of its size in DRAM on the export;
//!   `randread-hot` reads a region that fits in DRAM (hits), `randread` all of it.
//!
//! Every point runs at each `--placement`: `shared` (every process on any core, the
//! figures this bench always gave) and `split` (the export's server and the relay on
//! the last CPU, fio and hscm on the others: two machines' worth of separation, so a
//! point's bound shows as the side whose cores are full; see [`crate::placement`]).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use hscm_block::BlockTarget;
use hscm_nbd::{ExportOptions, Server};

use crate::delay_relay::DelayRelay;
use crate::nbd::metrics::Served;
use crate::placement::{on_cpus, pin_process, Placement, Sides};
use hscm_tier::{TierConfig, TieredVolume};
use hscm_volume::{CreateOptions, Durability, OpenOptions, Volume};
use rustix::process::CpuSet;
use serde::{Deserialize, Serialize};

use crate::units::{parse_size, size_arg};

/// Volumes on an NBD home against fio straight at the export, with 0 and 1 ms of added
/// round trip (a relay that delays each direction by half of it): 4 KiB random reads and
/// durable writes at QD1 and QD16, 1 MiB sequential reads and writes, for the flat
/// volume (local home beside it) and the tiered volume (DRAM hits and misses, and its
/// hit ratio). Needs fio and nbdkit (scripts/setup.sh).
///
/// Example: hscm bench remote --seconds 2 --json
#[derive(clap::Args, Clone, Debug)]
pub struct RemoteBenchArgs {
    /// Seconds per measured point.
    #[arg(long, default_value_t = 2.0)]
    pub seconds: f64,
    /// Volume size (the working set of every target).
    #[arg(long, default_value = size_arg(128 << 20), value_parser = parse_size)]
    pub size: u64,
    /// Added round-trip times, in milliseconds, comma-separated.
    #[arg(long, value_delimiter = ',', default_values_t = [0.0, 1.0])]
    pub rtt_ms: Vec<f64>,
    /// Where the two sides run, comma-separated: shared (every process on any core)
    /// and/or split (the export's server and the delay relay on the last CPU, fio
    /// and hscm on the others, as if on two machines).
    #[arg(long, value_enum, value_delimiter = ',', default_values_t = [Placement::Shared])]
    pub placement: Vec<Placement>,
    /// Directory for the local volume (default: the system temporary directory).
    #[arg(long)]
    pub dir: Option<PathBuf>,
    /// Print JSON (a stable contract) instead of text.
    #[arg(long)]
    pub json: bool,
}

/// One measured point. Field names are the `--json` contract.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RemoteRow {
    /// randread, randwrite, randread-hot (a DRAM-sized region), read or write (1 MiB
    /// sequential).
    pub workload: String,
    pub bs: u64,
    pub qd: u32,
    pub jobs: u32,
    /// direct, flat-local, flat-remote or tier-remote.
    pub target: String,
    /// Added round trip (the delay relay), ms.
    pub rtt_ms: f64,
    pub iops: f64,
    pub mbps: f64,
    pub p50_us: f64,
    pub p99_us: f64,
    /// tier-remote: the DRAM's read hit ratio over the point.
    pub hit_ratio: Option<f64>,
    /// Cores this machine kept busy during the point (every process: fio, hscm, the
    /// delay relay and the export's server share them here), and that per request:
    /// a point whose cores are all busy is bound by this machine's CPU, which on real
    /// machines the server and the network would not share.
    #[serde(default)]
    pub busy_cores: Option<f64>,
    #[serde(default)]
    pub cpu_us_per_request: Option<f64>,
    /// shared or split (see `--placement`).
    #[serde(default = "shared")]
    pub placement: String,
    /// split: the cores of the client side (fio and hscm) kept busy, and that per
    /// request; a client side near its core count is the point's bound.
    #[serde(default)]
    pub client_busy_cores: Option<f64>,
    #[serde(default)]
    pub client_cpu_us_per_request: Option<f64>,
}

fn shared() -> String {
    Placement::Shared.name().into()
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RemoteBench {
    pub rows: Vec<RemoteRow>,
    /// "WORKLOAD BS qdQDxJOBS rttR TARGET/BASELINE" → IOPS ratio (or, for "… p50",
    /// the median latency ratio), from this run.
    pub ratios: BTreeMap<String, f64>,
    pub seconds: f64,
    pub size: u64,
    /// What was left out, and why.
    pub skipped: Vec<String>,
}

/// (workload, block size, QD per job, jobs).
const POINTS: [(&str, u64, u32, u32); 6] = [
    ("randread", 4096, 1, 1),
    ("randread", 4096, 16, 4),
    ("randwrite", 4096, 1, 1),
    ("randwrite", 4096, 16, 4),
    ("read", 1 << 20, 1, 1),
    ("write", 1 << 20, 1, 1),
];

pub fn bench(a: &RemoteBenchArgs) -> Result<RemoteBench> {
    if a.seconds <= 0.0 || a.size < (16 << 20) {
        bail!("--seconds must be positive and --size at least 16M");
    }
    if a.rtt_ms.iter().any(|r| !(0.0..=1000.0).contains(r)) {
        bail!("--rtt-ms takes milliseconds from 0 to 1000");
    }
    let mut out = RemoteBench {
        rows: Vec::new(),
        ratios: BTreeMap::new(),
        seconds: a.seconds,
        size: a.size,
        skipped: Vec::new(),
    };
    for &placement in &a.placement {
        let sides = match placement {
            Placement::Shared => None,
            Placement::Split => Some(Sides::split()?),
        };
        for &rtt in &a.rtt_ms {
            let rows = match &sides {
                None => run_at(a, rtt, None)?,
                // What the client side starts (hscm's threads, fio) inherits its CPUs.
                Some(s) => on_cpus(&s.client, || run_at(a, rtt, Some(s)))?,
            };
            out.rows.extend(rows);
        }
    }
    out.ratios = ratios(&out.rows);
    Ok(out)
}

/// nbdkit over TCP on 127.0.0.1, killed when dropped.
pub(crate) struct Export {
    child: Child,
    pub uri: String,
    _relay: Option<DelayRelay>,
}

impl Drop for Export {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The export (nbdkit's memory plugin), reached through a [`DelayRelay`] when `rtt`
/// adds any delay.
fn start_export(size: u64, rtt: f64, sides: Option<&Sides>) -> Result<Export> {
    start_nbdkit_on(
        &["memory", &size.to_string(), "allocator=malloc"],
        rtt,
        sides.map(|s| &s.remote),
    )
}

/// nbdkit with `plugin` (its name and arguments) over TCP on 127.0.0.1, reached
/// through a [`DelayRelay`] when `rtt` (ms) adds any delay.
pub(crate) fn start_nbdkit(plugin: &[&str], rtt: f64) -> Result<Export> {
    start_nbdkit_on(plugin, rtt, None)
}

/// [`start_nbdkit`], nbdkit and the relay pinned to `cpus` where given.
fn start_nbdkit_on(plugin: &[&str], rtt: f64, cpus: Option<&CpuSet>) -> Result<Export> {
    let port = std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port();
    let child = Command::new("nbdkit")
        .args([
            "--foreground",
            "--exit-with-parent",
            "-i",
            "127.0.0.1",
            "-p",
        ])
        .arg(port.to_string())
        .args(plugin)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .context("starting nbdkit (Debian package nbdkit; scripts/setup.sh installs it)")?;
    let deadline = Instant::now() + Duration::from_secs(20);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        if Instant::now() > deadline {
            bail!("nbdkit did not listen on 127.0.0.1:{port}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    if let Some(cpus) = cpus {
        pin_process(child.id(), cpus)?;
    }
    let delay = Duration::from_secs_f64(rtt / 2000.0);
    let relay = match (rtt > 0.0, cpus) {
        (false, _) => None,
        (true, None) => Some(DelayRelay::start(port, delay)?),
        // The relay's threads inherit the pinned starting thread's CPUs.
        (true, Some(cpus)) => Some(on_cpus(cpus, || DelayRelay::start(port, delay))?),
    };
    let reached = relay.as_ref().map_or(port, |r| r.port);
    Ok(Export {
        child,
        uri: format!("nbd://127.0.0.1:{reached}/"),
        _relay: relay,
    })
}

/// `target` served by hscm's NBD server on `dir/NAME.sock`.
fn serve(target: Arc<dyn BlockTarget>, dir: &Path, name: &str) -> Result<Served> {
    crate::nbd::metrics::serve(
        dir,
        name,
        Arc::new(Server::new(target, ExportOptions::default())),
    )
}

/// Busy and total clock ticks from /proc/stat and how many CPUs they sum: of every CPU
/// (`cpus` None), or of the CPUs `cpus` names. None where unreadable. (Counted here,
/// not by `available_parallelism`, which a pinned caller would see as its own set.)
fn cpu_ticks(cpus: Option<&[usize]>) -> Option<(u64, u64, usize)> {
    let text = std::fs::read_to_string("/proc/stat").ok()?;
    let mut sum = (0, 0, 0);
    for line in text.lines() {
        let mut fields = line.split_whitespace();
        let name = fields.next()?;
        let wanted = name
            .strip_prefix("cpu")
            .and_then(|n| n.parse::<usize>().ok())
            .is_some_and(|n| cpus.is_none_or(|set| set.contains(&n)));
        if !wanted {
            continue;
        }
        let v: Vec<u64> = fields.filter_map(|x| x.parse().ok()).collect();
        let total: u64 = v.iter().sum();
        // idle and iowait are the 4th and 5th fields.
        let idle = v.get(3)? + v.get(4).copied().unwrap_or(0);
        sum = (sum.0 + (total - idle), sum.1 + total, sum.2 + 1);
    }
    (sum.2 > 0).then_some(sum)
}

/// Cores busy between two samples of `cpu_ticks` (of the same CPUs).
fn busy_between(a: (u64, u64, usize), b: (u64, u64, usize)) -> Option<f64> {
    let (busy, total) = (b.0.saturating_sub(a.0), b.1.saturating_sub(a.1));
    (total > 0 && a.2 == b.2).then(|| busy as f64 / total as f64 * b.2 as f64)
}

/// A measured point, with the cores this machine kept busy over its middle part
/// (after fio's start and ramp, before its end): all of them, and those of the client
/// side where the point is split.
fn fio_measured(
    uri: &str,
    (rw, bs, qd, jobs): (&str, u64, u32, u32),
    size: u64,
    seconds: f64,
    sides: Option<&Sides>,
) -> Result<(crate::fio::FioResult, Option<f64>, Option<f64>)> {
    let client_cpus = sides.map(|s| s.client_cpus.clone());
    let sampler = std::thread::spawn(move || {
        let sample = || {
            (
                cpu_ticks(None),
                client_cpus.as_deref().and_then(|c| cpu_ticks(Some(c))),
            )
        };
        std::thread::sleep(Duration::from_millis(400));
        let a = sample();
        std::thread::sleep(Duration::from_secs_f64((seconds * 0.7).max(0.05)));
        let b = sample();
        let all = a.0.zip(b.0).and_then(|(a, b)| busy_between(a, b));
        let client = a.1.zip(b.1).and_then(|(a, b)| busy_between(a, b));
        (all, client)
    });
    let r = fio_point(uri, rw, bs, qd, jobs, size, Some(seconds))?;
    let (all, client) = sampler.join().unwrap_or((None, None));
    Ok((r, all, client))
}

fn fio_point(
    uri: &str,
    rw: &str,
    bs: u64,
    qd: u32,
    jobs: u32,
    size: u64,
    seconds: Option<f64>,
) -> Result<crate::fio::FioResult> {
    let args = vec![
        "--ioengine=nbd".to_string(),
        format!("--uri={uri}"),
        format!("--rw={rw}"),
        format!("--bs={bs}"),
        format!("--iodepth={qd}"),
        format!("--numjobs={jobs}"),
        format!("--size={size}"),
    ];
    crate::fio::run(&args, uri, seconds)
}

/// Every point of one RTT.
fn run_at(a: &RemoteBenchArgs, rtt: f64, sides: Option<&Sides>) -> Result<Vec<RemoteRow>> {
    let placement = if sides.is_some() {
        Placement::Split
    } else {
        Placement::Shared
    };
    let scratch = crate::scratch::Scratch::new("remote", a.dir.as_deref())?;
    let dir = scratch.path();
    let home_len = a.size + (64 << 20);
    let mut rows = Vec::new();
    let row = |target: &str,
               (rw, bs, qd, jobs): (&str, u64, u32, u32),
               (r, busy, client_busy): (crate::fio::FioResult, Option<f64>, Option<f64>),
               hit: Option<f64>| RemoteRow {
        workload: rw.into(),
        bs,
        qd,
        jobs,
        target: target.into(),
        rtt_ms: rtt,
        iops: r.iops,
        mbps: r.mbps,
        p50_us: r.p50_us,
        p99_us: r.p99_us,
        hit_ratio: hit,
        busy_cores: busy,
        cpu_us_per_request: busy.filter(|_| r.iops > 0.0).map(|c| c * 1e6 / r.iops),
        placement: placement.name().into(),
        client_busy_cores: client_busy,
        client_cpu_us_per_request: client_busy
            .filter(|_| r.iops > 0.0)
            .map(|c| c * 1e6 / r.iops),
    };

    // fio straight at the export: one round trip per request.
    let direct = start_export(home_len, rtt, sides)?;
    fio_point(&direct.uri, "write", 1 << 20, 1, 1, a.size, None)?;
    for p in POINTS {
        let r = fio_measured(&direct.uri, p, a.size, a.seconds, sides)?;
        rows.push(row("direct", p, r, None));
    }
    drop(direct);

    let opts = CreateOptions {
        durability: Durability::Immediate,
        ..CreateOptions::default()
    };
    let flat = |home: &Path| -> Result<Arc<dyn BlockTarget>> {
        Volume::create(
            home,
            a.size,
            &CreateOptions {
                overwrite: true,
                ..opts.clone()
            },
        )?;
        let v = Volume::open(home, &OpenOptions::default())?;
        v.wait_loaded(None)?;
        Ok(Arc::new(v))
    };
    // The flat volume, on a local file and on the export, served alike.
    let local = dir.join("flat.hscm");
    let export = start_export(home_len, rtt, sides)?;
    for (target, home) in [
        ("flat-local", local.clone()),
        ("flat-remote", PathBuf::from(&export.uri)),
    ] {
        let served = serve(flat(&home)?, dir, target)?;
        fio_point(&served.uri, "write", 1 << 20, 1, 1, a.size, None)?;
        for p in POINTS {
            let r = fio_measured(&served.uri, p, a.size, a.seconds, sides)?;
            rows.push(row(target, p, r, None));
        }
    }
    drop(export);

    // The tiered volume on the export: an eighth of it in DRAM.
    let export = start_export(home_len, rtt, sides)?;
    let ram = (a.size / 8).max(4 << 20);
    let home = PathBuf::from(&export.uri);
    TieredVolume::create(&home, &TierConfig::new(a.size, ram), true)?;
    let tier = Arc::new(TieredVolume::open(&home)?);
    let served = serve(tier.clone(), dir, "tier")?;
    fio_point(&served.uri, "write", 1 << 20, 1, 1, a.size, None)?;
    let hot = ram / 2;
    let mut points: Vec<(&str, u64, u32, u32, u64)> = vec![
        ("randread-hot", 4096, 1, 1, hot),
        ("randread-hot", 4096, 16, 4, hot),
    ];
    points.extend(POINTS.iter().map(|p| (p.0, p.1, p.2, p.3, a.size)));
    for (rw, bs, qd, jobs, span) in points {
        if rw == "randread-hot" {
            // Warm: read the region once, so it is in DRAM.
            fio_point(&served.uri, "read", 1 << 20, 1, 1, span, None)?;
        }
        let before = tier.stats().tiers[0].clone();
        let fio_rw = if rw == "randread-hot" { "randread" } else { rw };
        let r = fio_measured(&served.uri, (fio_rw, bs, qd, jobs), span, a.seconds, sides)?;
        let after = tier.stats().tiers[0].clone();
        let hits = after.read_hits.saturating_sub(before.read_hits) as f64;
        let misses = after.read_misses.saturating_sub(before.read_misses) as f64;
        let hit = (hits + misses > 0.0).then(|| hits / (hits + misses));
        rows.push(row("tier-remote", (rw, bs, qd, jobs), r, hit));
    }
    drop(served);
    Ok(rows)
}

/// The ratios the targets are read against: within one placement, each keyed
/// as the JSON contract says, with " split" after the key for split points.
fn ratios(rows: &[RemoteRow]) -> BTreeMap<String, f64> {
    let mut out = BTreeMap::new();
    for placement in [Placement::Shared, Placement::Split] {
        let name = placement.name();
        let these: Vec<RemoteRow> = rows
            .iter()
            .filter(|r| r.placement == name)
            .cloned()
            .collect();
        let suffix = if placement == Placement::Split {
            " split"
        } else {
            ""
        };
        for (k, v) in ratios_of(&these) {
            out.insert(format!("{k}{suffix}"), v);
        }
    }
    out
}

/// [`ratios`] of the points of one placement.
fn ratios_of(rows: &[RemoteRow]) -> BTreeMap<String, f64> {
    let find = |target: &str, rw: &str, bs: u64, qd: u32, rtt: f64| {
        rows.iter().find(|r| {
            r.target == target && r.workload == rw && r.bs == bs && r.qd == qd && r.rtt_ms == rtt
        })
    };
    let mut out = BTreeMap::new();
    for r in rows.iter().filter(|r| r.target == "flat-remote") {
        let key = |base: &str| {
            format!(
                "{} {} qd{}x{} rtt{} flat-remote/{base}",
                r.workload, r.bs, r.qd, r.jobs, r.rtt_ms
            )
        };
        if let Some(l) = find("flat-local", &r.workload, r.bs, r.qd, r.rtt_ms) {
            out.insert(key("flat-local"), r.iops / l.iops);
        }
        if let Some(d) = find("direct", &r.workload, r.bs, r.qd, r.rtt_ms) {
            out.insert(key("direct"), r.iops / d.iops);
        }
    }
    for r in rows.iter().filter(|r| r.target == "tier-remote") {
        let key = |what: &str| {
            format!(
                "{} {} qd{}x{} rtt{} tier-remote/{what}",
                r.workload, r.bs, r.qd, r.jobs, r.rtt_ms
            )
        };
        if r.workload == "randread-hot" {
            if let Some(l) = find("flat-local", "randread", r.bs, r.qd, r.rtt_ms)
                .or_else(|| find("flat-local", "randread", r.bs, r.qd, 0.0))
            {
                out.insert(key("flat-local"), r.iops / l.iops);
            }
        } else if let Some(d) = find("direct", &r.workload, r.bs, r.qd, r.rtt_ms) {
            out.insert(key("direct"), r.iops / d.iops);
            if r.workload == "randread" && r.qd == 1 {
                out.insert(key("direct p50"), r.p50_us / d.p50_us);
            }
        }
    }
    out
}

impl RemoteBench {
    pub fn render(&self) -> String {
        let mut s = format!(
            "volumes on an NBD home (nbdkit memory over TCP, RTT added by a delay relay) against fio straight at the export; {:.1} s points, {} MiB\n\n",
            self.seconds,
            self.size >> 20
        );
        s += &format!(
            "{:<13} {:>8} {:>8} {:<12} {:<6} {:>6} {:>10} {:>9} {:>9} {:>9} {:>6} {:>6} {:>8} {:>7}\n",
            "workload",
            "bs",
            "qd x j",
            "target",
            "place",
            "rtt",
            "IOPS",
            "MB/s",
            "p50 µs",
            "p99 µs",
            "hits",
            "cores",
            "CPU µs",
            "client"
        );
        for r in &self.rows {
            s += &format!(
                "{:<13} {:>8} {:>8} {:<12} {:<6} {:>6} {:>10.0} {:>9.1} {:>9.1} {:>9.1} {:>6} {:>6} {:>8} {:>7}\n",
                r.workload,
                r.bs,
                format!("{}x{}", r.qd, r.jobs),
                r.target,
                r.placement,
                format!("{}ms", r.rtt_ms),
                r.iops,
                r.mbps,
                r.p50_us,
                r.p99_us,
                r.hit_ratio
                    .map_or("-".into(), |h| format!("{:.0}%", h * 100.0)),
                r.busy_cores.map_or("-".into(), |c| format!("{c:.2}")),
                r.cpu_us_per_request
                    .map_or("-".into(), |c| format!("{c:.1}")),
                r.client_busy_cores
                    .map_or("-".into(), |c| format!("{c:.2}"))
            );
        }
        s += "\ncores: this machine's CPUs kept busy during the point (fio, hscm, the delay relay and the export's server all run here); CPU µs: that per request; place: shared (every process on any core) or split (the export's server and the relay on the last CPU, fio and hscm on the others); client: the client side's cores kept busy (split)\n";
        s += "\nratios (same run):\n";
        for (k, v) in &self.ratios {
            s += &format!("  {k:<58} {v:.2}x\n");
        }
        for why in &self.skipped {
            s += &format!("skipped: {why}\n");
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn busy_cores_count_every_cpu_even_from_a_pinned_thread() {
        let Ok(sides) = Sides::split() else {
            return; // one CPU: no split to measure from
        };
        let (all, client) = on_cpus(&sides.remote, || {
            Ok((cpu_ticks(None), cpu_ticks(Some(&sides.client_cpus))))
        })
        .unwrap();
        let (all, client) = (all.unwrap(), client.unwrap());
        // The pinned thread may run on one CPU, yet the machine has them all.
        assert_eq!(all.2, sides.client_cpus.len() + 1);
        assert_eq!(client.2, sides.client_cpus.len());
        assert!(client.1 <= all.1 && client.0 <= all.0);
        assert_eq!(
            busy_between(all, (all.0 + 5, all.1 + 10, all.2)),
            Some(all.2 as f64 / 2.0)
        );
        assert_eq!(busy_between(all, client), None, "samples of other CPU sets");
    }
}

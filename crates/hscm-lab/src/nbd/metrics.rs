//! What the service side costs the NBD export (`hscm bench nbd`'s metrics rows): one
//! volume served twice in the same process, by a bare server and by the server as
//! `hscm nbd` runs it (every request counted and timed, registered for `hscm
//! status`, `--metrics` on and scraped every second, harder than Prometheus's usual
//! 15 s), measured in alternating rounds so that drift on a noisy machine falls on
//! both sides.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result};
use hscm_block::Counted;
use hscm_nbd::{Endpoint, ExportOptions, Listener, Server};
use hscm_service::{Clients, Identity, Service};
use hscm_volume::{CreateOptions, Durability, OpenOptions, Volume};
use serde::Serialize;

use super::NbdBenchArgs;

/// One workload, bare against served. Field names are the `--json` contract.
#[derive(Debug, Clone, Serialize)]
pub struct MetricsCostRow {
    pub workload: String,
    pub qd: u32,
    pub jobs: u32,
    /// Mean IOPS over the rounds: the bare server, and the server with metrics on.
    pub iops_bare: f64,
    pub iops_metrics: f64,
    /// Metrics on / bare: mean IOPS over mean IOPS. The rounds' ABBA order makes a
    /// steady drift of the machine cancel out of it.
    pub ratio: f64,
    /// Each round's ratio, in order.
    pub round_ratios: Vec<f64>,
    /// The standard error of the rounds' mean ratio: the machine's noise on this
    /// comparison (a ratio within about two of these of 1 is no measurable cost).
    pub ratio_stderr: f64,
    /// Seconds each side ran per round.
    pub seconds_per_run: f64,
    /// CPU this process (the servers, the status socket, the metrics endpoint) spent
    /// per request served, mean over the rounds (ns): steadier than IOPS on a shared
    /// machine, since another tenant's load does not add to it.
    pub cpu_ns_per_request_bare: f64,
    pub cpu_ns_per_request_metrics: f64,
    pub rounds: u32,
    /// Scrapes of /metrics answered while the served side ran.
    pub scrapes: u64,
}

/// Rounds per workload; each runs both sides, the first in the order ABBA repeats
/// (bare first, then metrics first twice, then bare first), so that a machine that
/// slows or speeds up through the run weighs on both sides alike. Many short rounds
/// rather than a few long ones: back-to-back runs here differ by up to 4% with nothing
/// changed (an A/A comparison); the mean of many pairs narrows that.
const ROUNDS: u32 = 12;
/// (workload, QD per job, jobs): the busiest points, where a per-request cost shows
/// most.
const POINTS: [(&str, u32, u32); 2] = [("randread", 16, 4), ("randwrite", 16, 4)];

/// An NBD server of ours on a Unix socket, stopped when dropped.
pub(crate) struct Served {
    pub(crate) uri: String,
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Drop for Served {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Serves `server` on `dir/NAME.sock`.
pub(crate) fn serve(dir: &Path, name: &str, server: Arc<Server>) -> Result<Served> {
    let listener = Listener::bind(&Endpoint::Unix(dir.join(format!("{name}.sock"))))?;
    let uri = listener.uri("");
    let stop = Arc::new(AtomicBool::new(false));
    let s = stop.clone();
    let thread = std::thread::spawn(move || {
        let _ = listener.serve(server, s);
    });
    Ok(Served {
        uri,
        stop,
        thread: Some(thread),
    })
}

/// GETs /metrics every second until stopped, counting the answers.
fn scraper(addr: SocketAddr, stop: Arc<AtomicBool>, scrapes: Arc<AtomicU64>) {
    while !stop.load(Ordering::Relaxed) {
        let scraped = TcpStream::connect(addr).and_then(|mut s| {
            s.write_all(b"GET /metrics HTTP/1.1\r\nHost: bench\r\n\r\n")?;
            let mut body = Vec::new();
            s.read_to_end(&mut body)?;
            Ok(body.starts_with(b"HTTP/1.1 200"))
        });
        if matches!(scraped, Ok(true)) {
            scrapes.fetch_add(1, Ordering::Relaxed);
        }
        for _ in 0..20 {
            if stop.load(Ordering::Relaxed) {
                break;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

/// Where the volume lives: RAM (/dev/shm) where there is one. What the service side
/// costs is CPU per request; on a RAM device each request costs least, so that cost
/// weighs most (the strictest case), and no device noise (one round's ratio of
/// writes ranged from 0.84 to 1.2 on this machine's disk, write-back or not)
/// hides a 2% difference.
fn volume_dir(scratch: &Path) -> Result<crate::scratch::Scratch> {
    let shm = Path::new("/dev/shm");
    crate::scratch::Scratch::new("nbd-metrics", shm.is_dir().then_some(shm).or(Some(scratch)))
}

pub fn bench(dir: &Path, a: &NbdBenchArgs) -> Result<Vec<MetricsCostRow>> {
    let volume_dir = volume_dir(dir)?;
    let path = volume_dir.path().join("metrics-cost.hscm");
    Volume::create(
        &path,
        a.size,
        &CreateOptions {
            durability: Durability::OnFlush,
            ..CreateOptions::default()
        },
    )?;
    let volume = Arc::new(Volume::open(&path, &OpenOptions::default())?);
    volume.wait_loaded(None)?;
    let bare_server = Arc::new(Server::new(volume.clone(), ExportOptions::default()));
    let bare_stats = bare_server.stats();
    let bare = serve(dir, "metrics-bare", bare_server)?;
    let target = Arc::new(Counted::new(volume.clone()));
    let server = Arc::new(Server::new(target.clone(), ExportOptions::default()));
    let service = {
        let (volume, target, stats) = (volume.clone(), target.clone(), server.stats());
        Service::start(
            Identity {
                frontend: "nbd",
                address: "bench".into(),
                volume: path.clone(),
            },
            move |s| {
                hscm_service::probe::flat(s, &volume);
                s.ops = target
                    .ops()
                    .iter()
                    .map(hscm_service::Op::from_snapshot)
                    .collect();
                s.clients = Clients {
                    connected: stats.connected.load(Ordering::Relaxed),
                    total: stats.connections.load(Ordering::Relaxed),
                };
            },
            Some("127.0.0.1:0"),
        )?
    };
    let metrics_addr = service.metrics_addr().context("the metrics endpoint")?;
    let on_stats = server.stats();
    let served = serve(dir, "metrics-on", server)?;
    let engine = |uri: &str| vec!["--ioengine=nbd".to_string(), format!("--uri={uri}")];
    crate::fio::run(
        &[
            engine(&bare.uri),
            vec!["--rw=write".into(), "--bs=1M".into(), "--iodepth=4".into()],
        ]
        .concat(),
        "hscm (prefill)",
        None,
    )?;
    // A third of --seconds per side and round (1 s by default).
    let seconds = a.seconds / 3.0;
    let mut rows = Vec::new();
    for (rw, qd, jobs) in POINTS {
        let (mut bare_iops, mut on_iops, mut ratios) = (Vec::new(), Vec::new(), Vec::new());
        let (mut bare_cpu, mut on_cpu) = (Vec::new(), Vec::new());
        let scrapes = Arc::new(AtomicU64::new(0));
        for round in 0..ROUNDS {
            note!(
                "[nbd] metrics cost: {rw} 4 KiB, QD{qd} x {jobs}, round {}",
                round + 1
            );
            // (IOPS, CPU ns per request served).
            let run = |uri: &str, name: &str, stats: &hscm_nbd::Stats| -> Result<(f64, f64)> {
                let mut args = engine(uri);
                args.extend([
                    format!("--rw={rw}"),
                    "--bs=4096".into(),
                    format!("--iodepth={qd}"),
                    format!("--numjobs={jobs}"),
                ]);
                let (cpu, served) = (process_cpu_ns(), stats.commands.load(Ordering::Relaxed));
                let iops = crate::fio::run(&args, name, Some(seconds))?.iops;
                let requests = stats.commands.load(Ordering::Relaxed) - served;
                Ok((
                    iops,
                    (process_cpu_ns() - cpu) as f64 / requests.max(1) as f64,
                ))
            };
            let measure_on = || -> Result<(f64, f64)> {
                let stop = Arc::new(AtomicBool::new(false));
                let t = {
                    let (stop, scrapes) = (stop.clone(), scrapes.clone());
                    std::thread::spawn(move || scraper(metrics_addr, stop, scrapes))
                };
                let measured = run(&served.uri, "hscm with metrics", &on_stats);
                stop.store(true, Ordering::Relaxed);
                let _ = t.join();
                measured
            };
            let measure_bare = || run(&bare.uri, "hscm bare", &bare_stats);
            let (b, m) = if matches!(round % 4, 0 | 3) {
                let b = measure_bare()?;
                (b, measure_on()?)
            } else {
                let m = measure_on()?;
                (measure_bare()?, m)
            };
            bare_iops.push(b.0);
            on_iops.push(m.0);
            bare_cpu.push(b.1);
            on_cpu.push(m.1);
            ratios.push(m.0 / b.0);
        }
        let mean = |v: &[f64]| v.iter().sum::<f64>() / v.len() as f64;
        rows.push(MetricsCostRow {
            workload: rw.into(),
            qd,
            jobs,
            iops_bare: mean(&bare_iops),
            iops_metrics: mean(&on_iops),
            ratio: mean(&on_iops) / mean(&bare_iops),
            ratio_stderr: stderr(&ratios),
            round_ratios: ratios,
            seconds_per_run: seconds,
            cpu_ns_per_request_bare: mean(&bare_cpu),
            cpu_ns_per_request_metrics: mean(&on_cpu),
            rounds: ROUNDS,
            scrapes: scrapes.load(Ordering::Relaxed),
        });
    }
    drop(served);
    drop(bare);
    drop(service);
    drop(target);
    drop(volume);
    drop(volume_dir);
    Ok(rows)
}

/// The standard error of `v`'s mean.
fn stderr(v: &[f64]) -> f64 {
    let n = v.len() as f64;
    if v.len() < 2 {
        return f64::NAN;
    }
    let mean = v.iter().sum::<f64>() / n;
    let var = v.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1.0);
    (var / n).sqrt()
}

/// CPU time this process has used, all threads (ns).
fn process_cpu_ns() -> u64 {
    let t = rustix::time::clock_gettime(rustix::time::ClockId::ProcessCPUTime);
    t.tv_sec as u64 * 1_000_000_000 + t.tv_nsec as u64
}

pub fn print(rows: &[MetricsCostRow]) -> Result<()> {
    outln!("The service side's cost: counters, hscm status, /metrics scraped every second, against a bare server (same volume, same run)")?;
    outln!(
        "{:<10} {:>6} {:>12} {:>14} {:>8} {:>14} {:>16} {:>8}",
        "workload",
        "QDxJ",
        "bare IOPS",
        "metrics IOPS",
        "ratio",
        "bare CPU/req",
        "metrics CPU/req",
        "scrapes"
    )?;
    for r in rows {
        outln!(
            "{:<10} {:>6} {:>12.0} {:>14.0} {:>7.3}x {:>11.0} ns {:>13.0} ns {:>8}",
            r.workload,
            format!("{}x{}", r.qd, r.jobs),
            r.iops_bare,
            r.iops_metrics,
            r.ratio,
            r.cpu_ns_per_request_bare,
            r.cpu_ns_per_request_metrics,
            r.scrapes
        )?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::stderr;

    #[test]
    fn the_standard_error_of_the_mean() {
        assert!((stderr(&[1.0, 3.0]) - 1.0).abs() < 1e-12);
        assert_eq!(stderr(&[2.0, 2.0, 2.0]), 0.0);
        assert!(stderr(&[1.0]).is_nan());
    }
}

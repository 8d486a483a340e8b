//! `hscm bench nbd-strangers`: what strangers cost an `hscm nbd` server. The server
//! runs as its own process (`hscm nbd`, default limits but for the connection cap,
//! raised to fit the idle crowd); a well-behaved client measures 4 KiB read latency
//! at QD1 while, in turn, nobody else, a crowd of idle connections (handshake done,
//! then silence), and clients that send two 32 MiB READs each and never read the
//! replies are connected. The server's resident memory (VmRSS) is read from /proc
//! after each phase.

use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use hscm_nbd::proto;
use serde::Serialize;

use crate::units::{parse_size, size_arg};

/// What strangers cost an `hscm nbd` server, run as its own process: a
/// well-behaved client's 4 KiB read latency at QD1 and the server's resident
/// memory, unloaded, with a crowd of idle connections (--idle, default 1000), and
/// with clients that send two 32 MiB READs and never read the replies
/// (--stalled, default 64). Bounds: RSS under 64 MiB above unloaded, p50 within 2x.
///
/// Example: hscm bench nbd-strangers --seconds 2 --json
#[derive(clap::Args, Clone, Debug)]
pub struct StrangersArgs {
    /// Idle connections in the second phase.
    #[arg(long, default_value_t = 1000)]
    pub idle: usize,
    /// Clients that never read their replies in the third phase.
    #[arg(long, default_value_t = 64)]
    pub stalled: usize,
    /// Seconds the well-behaved client measures in each phase.
    #[arg(long, default_value_t = 3.0)]
    pub seconds: f64,
    /// Export size.
    #[arg(long, default_value = size_arg(256 << 20), value_parser = parse_size)]
    pub size: u64,
    /// Directory for the volume and the socket (default: the system temporary
    /// directory). Removed afterwards.
    #[arg(long)]
    pub dir: Option<PathBuf>,
    /// Print JSON (a stable contract) instead of text.
    #[arg(long)]
    pub json: bool,
}

/// One phase. Field names are the `--json` contract.
#[derive(Debug, Clone, Serialize)]
pub struct StrangersPhase {
    /// unloaded, idle or stalled.
    pub phase: String,
    /// Stranger connections open during the phase.
    pub connections: usize,
    /// The server's VmRSS at the end of the phase, and above the unloaded phase's.
    pub rss_mib: f64,
    pub rss_above_unloaded_mib: f64,
    /// The well-behaved client's 4 KiB reads at QD1.
    pub reads: u64,
    pub p50_us: f64,
    pub p99_us: f64,
    /// p50 over the unloaded phase's p50.
    pub p50_ratio: f64,
}

#[derive(Debug, Clone, Serialize)]
pub struct Strangers {
    pub phases: Vec<StrangersPhase>,
    /// The bounds, checked on this run: RSS under 64 MiB above unloaded and
    /// p50 within 2x of unloaded, in every loaded phase.
    pub rss_bound_mib: f64,
    pub latency_bound: f64,
    pub within_bounds: bool,
}

/// Runs the three phases against an `hscm nbd` started from `hscm` (this binary).
pub fn bench(a: &StrangersArgs, hscm: &Path) -> Result<Strangers> {
    if a.seconds <= 0.0 || a.size < (64 << 20) {
        bail!(
            "--seconds must be positive and --size at least 64M (the stalled clients read 32 MiB)"
        );
    }
    let need = (a.idle + a.stalled) as u64 + 64;
    let have = raise_open_file_limit();
    if have < need {
        bail!("{} connections need about {need} open files here and in the server; the limit is {have} (ulimit -n)", a.idle + a.stalled);
    }
    let scratch = crate::scratch::Scratch::new("nbd-strangers", a.dir.as_deref())?;
    let dir = scratch.path();
    let volume = dir.join("v.hscm");
    let socket = dir.join("nbd.sock");
    let made = Command::new(hscm)
        .args(["volume", "create"])
        .arg(&volume)
        .args(["--size", &a.size.to_string()])
        .output()
        .context("running hscm volume create")?;
    if !made.status.success() {
        bail!(
            "hscm volume create: {}",
            String::from_utf8_lossy(&made.stderr)
        );
    }
    let server = Server::start(hscm, &volume, &socket, a.idle + a.stalled + 16)?;
    let mut good = Client::connect(&socket)?;
    let mut phases = Vec::new();
    let mut measure = |name: &str, connections: usize, good: &mut Client| -> Result<()> {
        let (reads, p50, p99) = good.read_latency(a.seconds, a.size)?;
        // The crowd's memory settles once its connections are served.
        std::thread::sleep(Duration::from_millis(200));
        let rss = server.rss_mib()?;
        let (rss0, p50_0) = phases
            .first()
            .map_or((rss, p50), |p: &StrangersPhase| (p.rss_mib, p.p50_us));
        note!(
            "[strangers] {name}: {connections} connections, RSS {rss:.1} MiB, 4 KiB read p50 {p50:.1} us p99 {p99:.1} us"
        );
        phases.push(StrangersPhase {
            phase: name.into(),
            connections,
            rss_mib: rss,
            rss_above_unloaded_mib: rss - rss0,
            reads,
            p50_us: p50,
            p99_us: p99,
            p50_ratio: p50 / p50_0,
        });
        Ok(())
    };
    measure("unloaded", 0, &mut good)?;
    let mut idle = Vec::with_capacity(a.idle);
    for _ in 0..a.idle {
        idle.push(Client::connect(&socket)?);
    }
    measure("idle", a.idle, &mut good)?;
    drop(idle);
    std::thread::sleep(Duration::from_millis(300));
    let mut stalled = Vec::with_capacity(a.stalled);
    for i in 0..a.stalled {
        let mut c = Client::connect(&socket)?;
        c.send_read(i as u64, 0, 32 << 20)?;
        c.send_read(i as u64 + 1, 32 << 20, 32 << 20)?;
        stalled.push(c);
    }
    measure("stalled", a.stalled, &mut good)?;
    drop(stalled);
    drop(good);
    server.stop()?;
    let (rss_bound_mib, latency_bound) = (64.0, 2.0);
    let within_bounds = phases
        .iter()
        .skip(1)
        .all(|p| p.rss_above_unloaded_mib < rss_bound_mib && p.p50_ratio <= latency_bound);
    Ok(Strangers {
        phases,
        rss_bound_mib,
        latency_bound,
        within_bounds,
    })
}

/// The crowd needs a descriptor each, here and in the server (which inherits the
/// limit): the soft limit goes up to the hard one.
/// Returns the soft limit in force.
fn raise_open_file_limit() -> u64 {
    use rustix::process::{getrlimit, setrlimit, Resource, Rlimit};
    let limit = getrlimit(Resource::Nofile);
    let raised = Rlimit {
        current: limit.maximum,
        maximum: limit.maximum,
    };
    match setrlimit(Resource::Nofile, raised) {
        Ok(()) => limit.maximum.unwrap_or(u64::MAX),
        Err(_) => limit.current.unwrap_or(u64::MAX),
    }
}

/// A phase's cells, as the text output and the report show them: phase,
/// connections, RSS, RSS above unloaded (MiB), p50, p99 (µs), p50 over unloaded.
pub fn phase_cells(p: &StrangersPhase) -> [String; 7] {
    [
        p.phase.clone(),
        p.connections.to_string(),
        format!("{:.1}", p.rss_mib),
        format!("{:.1}", p.rss_above_unloaded_mib),
        format!("{:.1}", p.p50_us),
        format!("{:.1}", p.p99_us),
        format!("{:.2}", p.p50_ratio),
    ]
}

pub fn print(r: &Strangers) -> Result<()> {
    outln!("phase      connections   RSS MiB  above unloaded   p50 us   p99 us  p50 / unloaded")?;
    for p in &r.phases {
        let [phase, connections, rss, above, p50, p99, ratio] = phase_cells(p);
        outln!("{phase:<10} {connections:>11} {rss:>9} {above:>15} {p50:>8} {p99:>8} {ratio:>15}")?;
    }
    outln!(
        "bounds: RSS under {} MiB above unloaded and p50 within {}x: {}",
        r.rss_bound_mib,
        r.latency_bound,
        if r.within_bounds { "met" } else { "NOT met" }
    )?;
    Ok(())
}

/// The server under test, as its own process.
struct Server {
    child: Child,
}

impl Server {
    fn start(hscm: &Path, volume: &Path, socket: &Path, max_connections: usize) -> Result<Server> {
        let mut child = Command::new(hscm)
            .arg("nbd")
            .arg(volume)
            .arg("--socket")
            .arg(socket)
            .args(["--max-connections", &max_connections.to_string()])
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .context("starting hscm nbd")?;
        let mut first = [0u8; 1];
        child
            .stdout
            .take()
            .context("its standard output")?
            .read_exact(&mut first)
            .context("hscm nbd ended before it served")?;
        Ok(Server { child })
    }

    fn rss_mib(&self) -> Result<f64> {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id()))?;
        let kb: f64 = status
            .lines()
            .find_map(|l| l.strip_prefix("VmRSS:"))
            .and_then(|v| v.split_whitespace().next())
            .and_then(|v| v.parse().ok())
            .context("no VmRSS in /proc/PID/status")?;
        Ok(kb / 1024.0)
    }

    fn stop(mut self) -> Result<()> {
        rustix::process::kill_process(
            rustix::process::Pid::from_child(&self.child),
            rustix::process::Signal::Term,
        )?;
        self.child.wait()?;
        Ok(())
    }
}

/// A raw NBD client: the fixed-newstyle handshake with NBD_OPT_GO, then simple
/// replies.
struct Client {
    s: UnixStream,
}

impl Client {
    fn connect(socket: &Path) -> Result<Client> {
        let mut s = UnixStream::connect(socket).context("connecting")?;
        s.set_read_timeout(Some(Duration::from_secs(30)))?;
        let mut hello = [0u8; 18];
        s.read_exact(&mut hello).context("reading the greeting")?;
        s.write_all(&(proto::CLIENT_FIXED_NEWSTYLE | proto::CLIENT_NO_ZEROES).to_be_bytes())?;
        let mut go = Vec::new();
        go.extend_from_slice(&proto::IHAVEOPT.to_be_bytes());
        go.extend_from_slice(&proto::OPT_GO.to_be_bytes());
        go.extend_from_slice(&6u32.to_be_bytes());
        go.extend_from_slice(&[0u8; 6]); // empty name, no info requests
        s.write_all(&go)?;
        loop {
            let mut head = [0u8; 20];
            s.read_exact(&mut head).context("reading an option reply")?;
            let kind = u32::from_be_bytes(head[12..16].try_into()?);
            let len = u32::from_be_bytes(head[16..20].try_into()?);
            std::io::copy(&mut (&mut s).take(u64::from(len)), &mut std::io::sink())?;
            match kind {
                proto::REP_ACK => return Ok(Client { s }),
                proto::REP_INFO => continue,
                other => bail!("NBD_OPT_GO answered with {other:#x}"),
            }
        }
    }

    fn send_read(&mut self, cookie: u64, offset: u64, len: u32) -> Result<()> {
        let mut r = Vec::with_capacity(28);
        r.extend_from_slice(&proto::REQUEST_MAGIC.to_be_bytes());
        r.extend_from_slice(&0u16.to_be_bytes());
        r.extend_from_slice(&proto::CMD_READ.to_be_bytes());
        r.extend_from_slice(&cookie.to_be_bytes());
        r.extend_from_slice(&offset.to_be_bytes());
        r.extend_from_slice(&len.to_be_bytes());
        self.s.write_all(&r)?;
        Ok(())
    }

    /// 4 KiB reads at QD1 over the export for `seconds`: (count, p50 us, p99 us).
    fn read_latency(&mut self, seconds: f64, size: u64) -> Result<(u64, f64, f64)> {
        let mut hist = hdrhistogram::Histogram::<u64>::new(3)?;
        let mut buf = vec![0u8; 16 + 4096];
        let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
        let end = Instant::now() + Duration::from_secs_f64(seconds);
        while Instant::now() < end {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let offset = (x % (size / 4096)) * 4096;
            let t = Instant::now();
            self.send_read(x, offset, 4096)?;
            self.s.read_exact(&mut buf)?;
            hist.record(t.elapsed().as_nanos() as u64)?;
            if u32::from_be_bytes(buf[4..8].try_into()?) != 0 {
                bail!("a 4 KiB read failed");
            }
        }
        let us = |q: f64| hist.value_at_quantile(q) as f64 / 1e3;
        Ok((hist.len(), us(0.5), us(0.99)))
    }
}

//! `hscm bench mirror`: durable writes to a volume whose home is mirrored (issue 53,
//! docs/mirror.md) against its parts measured in the same run, with 0 and 1 ms of
//! added round trip to the remote member.
//!
//! The remote member is nbdkit's file plugin on a file of this machine, over TCP on
//! 127.0.0.1 (FUA there is an fdatasync of that file), through a relay that holds
//! every byte for half the RTT each way (`crate::delay_relay`; this kernel has no
//! sch_netem). Requests are issued in-process by the closed-loop driver, QD workers
//! each with one 4 KiB durable write in flight:
//!
//! * `local-device`: the local member's own durable write (write and fdatasync);
//! * `remote-device`: the remote member's own durable write (an NBD write with FUA:
//!   one round trip plus the remote device's durable write);
//! * `both-devices`: each write to both at once, as the mirror issues it (the FUA
//!   write sent, then the local write and sync while it is on its way), without a
//!   volume: the bare requests on this machine, where both members share one disk
//!   and two vCPUs;
//! * `volume-local`: a flat volume (immediate durability) on a local file;
//! * `volume-mirror`: the same volume on a mirror of a local file and the export.
//!
//! The targets: at QD1, `volume-mirror`'s median within 1.2x of `local-device` +
//! `remote-device` (the bound: a local durable write, then a round trip and the
//! remote's durable write); at QD16, its rate at least 0.8x the slower device's.
//! Resync: a full copy of the volume to the member, timed, against the rate 1 MiB
//! writes reach the export at directly (the link's bandwidth as this path has it).

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use hscm_block::{BlockTarget, WriteFlags};
use hscm_durable::device::{AlignedBuf, Backend, FileBackend};
use hscm_durable::mirror::{self, MirrorBackend, MirrorHeader, MirrorOptions};
use hscm_durable::nbd::{NbdBackend, NbdUri};
use hscm_volume::{CreateOptions, Durability, OpenOptions, Volume};
use rand::Rng;
use serde::{Deserialize, Serialize};

use crate::driver::{closed_loop, Phase, Step};
use crate::remote::start_nbdkit;
use crate::units::{parse_size, size_arg};

/// Durable 4 KiB random writes to a flat volume on a mirrored home (a local file and
/// an nbdkit export over TCP), against the local file's and the export's own durable
/// writes and the volume on the local file alone, at QD1 and QD16, with 0 and 1 ms of
/// added round trip; and a full resync's rate against the export's. Needs nbdkit
/// (scripts/setup.sh).
///
/// Example: hscm bench mirror --seconds 2 --json
#[derive(clap::Args, Clone, Debug)]
pub struct MirrorBenchArgs {
    /// Seconds per measured point.
    #[arg(long, default_value_t = 2.0)]
    pub seconds: f64,
    /// Volume size (the span of the random writes, and what resync copies).
    #[arg(long, default_value = size_arg(64 << 20), value_parser = parse_size)]
    pub size: u64,
    /// Added round-trip times, in milliseconds, comma-separated.
    #[arg(long, value_delimiter = ',', default_values_t = [0.0, 1.0])]
    pub rtt_ms: Vec<f64>,
    /// Queue depths (workers, each with one write in flight), comma-separated.
    #[arg(long, value_delimiter = ',', default_values_t = [1, 16])]
    pub qd: Vec<u32>,
    /// Directory for the files (default: the system temporary directory).
    #[arg(long)]
    pub dir: Option<std::path::PathBuf>,
    /// Print JSON (a stable contract) instead of text.
    #[arg(long)]
    pub json: bool,
}

/// One measured point. Field names are the `--json` contract.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct MirrorRow {
    /// local-device, remote-device, both-devices, volume-local or volume-mirror.
    pub target: String,
    pub qd: u32,
    pub rtt_ms: f64,
    pub iops: f64,
    pub p50_us: f64,
    pub p99_us: f64,
}

/// A full resync of the volume to the remote member.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ResyncRow {
    pub rtt_ms: f64,
    pub bytes: u64,
    pub seconds: f64,
    pub mbps: f64,
    /// 1 MiB writes straight to the export, the same bytes: the link as this path has it.
    pub link_mbps: f64,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct MirrorBench {
    pub rows: Vec<MirrorRow>,
    pub resync: Vec<ResyncRow>,
    /// "qd1 rttR p50 volume-mirror/bound" (bound: local-device + remote-device p50),
    /// "qd16 rttR volume-mirror/slower-device" (IOPS), "qdN rttR
    /// volume-mirror/both-devices" (IOPS), "qdN rttR
    /// volume-mirror/volume-local", "rttR resync/link".
    pub ratios: BTreeMap<String, f64>,
    pub seconds: f64,
    pub size: u64,
}

pub fn bench(a: &MirrorBenchArgs) -> Result<MirrorBench> {
    if a.seconds <= 0.0 || a.size < (8 << 20) || a.qd.iter().any(|&q| q == 0 || q > 256) {
        bail!("--seconds must be positive, --size at least 8M and each --qd 1 to 256");
    }
    if a.rtt_ms.iter().any(|r| !(0.0..=1000.0).contains(r)) {
        bail!("--rtt-ms takes milliseconds from 0 to 1000");
    }
    let mut out = MirrorBench {
        rows: Vec::new(),
        resync: Vec::new(),
        ratios: BTreeMap::new(),
        seconds: a.seconds,
        size: a.size,
    };
    for &rtt in &a.rtt_ms {
        let (rows, resync) = run_at(a, rtt)?;
        out.rows.extend(rows);
        out.resync.push(resync);
    }
    out.ratios = ratios(&out);
    Ok(out)
}

/// QD workers each writing 4 KiB blocks at random offsets below `span`, durably.
fn measure(
    qd: u32,
    seconds: f64,
    span: u64,
    write: impl Fn(u64, &[u8]) -> Result<()> + Sync,
) -> Result<(f64, f64, f64)> {
    let blocks = span / 4096;
    let states: Vec<AlignedBuf> = (0..qd)
        .map(|i| {
            let mut b = AlignedBuf::zeroed(4096);
            b.fill(i as u8 + 1);
            b
        })
        .collect();
    let phase = Phase::timed(Duration::from_millis(300), seconds);
    let (m, _) = closed_loop(states, 1, &phase, |buf, ctx| -> Result<Step> {
        let at = ctx.rng.gen_range(0..blocks) * 4096;
        write(at, buf)?;
        Ok(Step::Done(0))
    })?;
    Ok((m.ops_per_s(), m.quantile_us(0.5), m.quantile_us(0.99)))
}

fn run_at(a: &MirrorBenchArgs, rtt: f64) -> Result<(Vec<MirrorRow>, ResyncRow)> {
    let scratch = crate::scratch::Scratch::new("mirror", a.dir.as_deref())?;
    let dir = scratch.path();
    let opts = CreateOptions {
        durability: Durability::Immediate,
        overwrite: true,
        ..CreateOptions::default()
    };
    let backing = opts.backing_len(a.size);
    let member = dir.join("member");
    std::fs::File::create(&member)?.set_len(mirror::member_len(backing))?;
    let export = start_nbdkit(&["file", member.to_str().context("a UTF-8 path")?], rtt)?;
    let uri = NbdUri::parse(&format!("{}?timeout=30", export.uri)).map_err(anyhow::Error::msg)?;
    let mut rows = Vec::new();
    let mut row = |target: &str, qd: u32, (iops, p50, p99): (f64, f64, f64)| {
        rows.push(MirrorRow {
            target: target.into(),
            qd,
            rtt_ms: rtt,
            iops,
            p50_us: p50,
            p99_us: p99,
        })
    };

    // The devices alone.
    let local_dev = dir.join("device");
    let dev = FileBackend::create(&local_dev, a.size, true)?;
    let remote = NbdBackend::open(&uri, true)?;
    // Every target is measured on blocks written once before (a first write to a
    // block of a sparse file also allocates it), so none pays for allocation: the
    // local device here, the export by the link's measurement, the volumes below.
    let mib = AlignedBuf::zeroed(1 << 20);
    for at in (0..a.size).step_by(1 << 20) {
        dev.write_at(at, &mib[..(a.size - at).min(1 << 20) as usize])?;
    }
    dev.sync()?;
    // The link: 1 MiB writes straight to the export, then a flush.
    let started = Instant::now();
    let mut at = 0;
    while at + (1 << 20) <= a.size {
        remote.write_at(at, &mib)?;
        at += 1 << 20;
    }
    remote.sync()?;
    let link_mbps = at as f64 / 1e6 / started.elapsed().as_secs_f64();
    for &qd in &a.qd {
        let m = measure(qd, a.seconds, a.size, |at, b| {
            Ok(dev.write_through_at(at, b)?)
        })?;
        row("local-device", qd, m);
        let m = measure(qd, a.seconds, a.size, |at, b| {
            Ok(remote.write_durable_at(at, b)?)
        })?;
        row("remote-device", qd, m);
        let m = measure(qd, a.seconds, a.size, |at, b| {
            let mut local = None;
            remote.write_durable_overlapped(at, b, &mut || {
                local = Some(dev.write_through_at(at, b));
            })?;
            Ok(local.expect("called once")?)
        })?;
        row("both-devices", qd, m);
    }
    drop(remote);
    drop(dev);

    // The volume on a local file, then on the mirror.
    let local = dir.join("volume-local.hscm");
    Volume::create(&local, a.size, &opts)?;
    let mirrored = dir.join("volume-mirror.hscm");
    let home = mirror::create(
        &mirrored,
        backing,
        &[uri.to_string()],
        &MirrorOptions {
            overwrite: true,
            ..MirrorOptions::default()
        },
    )?;
    Volume::format(&home, a.size, &opts)?;
    drop(home);
    for (target, path) in [("volume-local", &local), ("volume-mirror", &mirrored)] {
        let v = Arc::new(Volume::open(path, &OpenOptions::default())?);
        v.wait_loaded(None)?;
        for at in (0..a.size).step_by(1 << 20) {
            let len = (a.size - at).min(1 << 20) as usize;
            v.write_at(at, &mib[..len], WriteFlags::NONE)?;
        }
        v.flush()?;
        for &qd in &a.qd {
            let m = measure(qd, a.seconds, a.size, |at, b| {
                Ok(v.write_at(at, b, WriteFlags::FUA)?)
            })?;
            row(target, qd, m);
        }
        Arc::try_unwrap(v)
            .map_err(|_| anyhow::anyhow!("the volume is still shared"))?
            .close()?;
    }

    // A full resync: the header marked as after an unclean stop without an activity
    // log (as an older hscm leaves it), so opening copies everything to the member.
    mark_unclean(&mirrored)?;
    let started = Instant::now();
    let home = MirrorBackend::open(&mirrored, true)?;
    if !home.wait_in_sync(Duration::from_secs(600)) {
        bail!(
            "the resync did not finish in 10 minutes: {:?}",
            home.status()
        );
    }
    let seconds = started.elapsed().as_secs_f64();
    let bytes = home.status().members[1].copied;
    drop(home);
    Ok((
        rows,
        ResyncRow {
            rtt_ms: rtt,
            bytes,
            seconds,
            mbps: bytes as f64 / 1e6 / seconds,
            link_mbps,
        },
    ))
}

fn mark_unclean(path: &Path) -> Result<()> {
    let mut h: MirrorHeader = MirrorBackend::header_at(path)?;
    h.clean = false;
    h.activity_log = false;
    let mut block = AlignedBuf::zeroed(mirror::HEADER_LEN);
    block.copy_from_slice(&h.encode_for(h.self_id));
    let f = FileBackend::open(path, true)?;
    f.write_through_at(0, &block)?;
    Ok(())
}

fn ratios(b: &MirrorBench) -> BTreeMap<String, f64> {
    let find = |target: &str, qd: u32, rtt: f64| {
        b.rows
            .iter()
            .find(|r| r.target == target && r.qd == qd && r.rtt_ms == rtt)
    };
    let mut out = BTreeMap::new();
    for r in b.rows.iter().filter(|r| r.target == "volume-mirror") {
        let (qd, rtt) = (r.qd, r.rtt_ms);
        if let (Some(l), Some(d)) = (
            find("local-device", qd, rtt),
            find("remote-device", qd, rtt),
        ) {
            if qd == 1 {
                out.insert(
                    format!("qd1 rtt{rtt} p50 volume-mirror/bound"),
                    r.p50_us / (l.p50_us + d.p50_us),
                );
            } else {
                out.insert(
                    format!("qd{qd} rtt{rtt} volume-mirror/slower-device"),
                    r.iops / l.iops.min(d.iops),
                );
            }
        }
        if let Some(both) = find("both-devices", qd, rtt) {
            out.insert(
                format!("qd{qd} rtt{rtt} volume-mirror/both-devices"),
                r.iops / both.iops,
            );
        }
        if let Some(v) = find("volume-local", qd, rtt) {
            out.insert(
                format!("qd{qd} rtt{rtt} volume-mirror/volume-local"),
                r.iops / v.iops,
            );
        }
    }
    for r in &b.resync {
        out.insert(format!("rtt{} resync/link", r.rtt_ms), r.mbps / r.link_mbps);
    }
    out
}

impl MirrorBench {
    pub fn render(&self) -> String {
        let mut s = format!(
            "durable 4 KiB random writes: a volume on a mirrored home (local file + nbdkit file export over TCP, RTT added by a delay relay) against its parts; {:.1} s points, {} MiB\n\n",
            self.seconds,
            self.size >> 20
        );
        s += &format!(
            "{:<14} {:>4} {:>6} {:>10} {:>9} {:>9}\n",
            "target", "qd", "rtt", "IOPS", "p50 µs", "p99 µs"
        );
        for r in &self.rows {
            s += &format!(
                "{:<14} {:>4} {:>6} {:>10.0} {:>9.1} {:>9.1}\n",
                r.target,
                r.qd,
                format!("{}ms", r.rtt_ms),
                r.iops,
                r.p50_us,
                r.p99_us
            );
        }
        s += "\nresync (a full copy):\n";
        for r in &self.resync {
            s += &format!(
                "  rtt {}ms: {} MiB in {:.2} s, {:.0} MB/s; the link: {:.0} MB/s\n",
                r.rtt_ms,
                r.bytes >> 20,
                r.seconds,
                r.mbps,
                r.link_mbps
            );
        }
        s += "\nratios (same run; targets: qd1 p50/bound <= 1.2, qd16 /slower-device >= 0.8):\n";
        for (k, v) in &self.ratios {
            s += &format!("  {k:<44} {v:.2}x\n");
        }
        s
    }
}

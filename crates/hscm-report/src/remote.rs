//! The NBD section's part on homes over the network (`hscm bench remote`, issue 52):
//! volumes whose home is an NBD export, against fio straight at that export.

use std::fmt::Write as _;

use anyhow::Result;

use crate::{targets, Check};
use hscm_lab::placement::{Placement, Sides};
use hscm_lab::remote::{self, RemoteBench, RemoteBenchArgs};

fn ratio(b: &RemoteBench, key: &str) -> f64 {
    b.ratios.get(key).copied().unwrap_or(f64::NAN)
}

/// Runs the bench, writes its table and returns its checks and output.
pub fn subsection(md: &mut String, quick: bool) -> Result<(Vec<(String, Check)>, RemoteBench)> {
    let args = RemoteBenchArgs {
        seconds: if quick { 0.3 } else { 2.0 },
        size: if quick { 16 << 20 } else { 128 << 20 },
        // Split (each side on its own cores) shows which side bounds a point.
        // (and needs two CPUs).
        placement: if quick || Sides::split().is_err() {
            vec![Placement::Shared]
        } else {
            vec![Placement::Shared, Placement::Split]
        },
        ..hscm_lab::flag_defaults()
    };
    note!("[nbd] volumes on a home over the network, against the export itself");
    let b = remote::bench(&args)?;
    writeln!(md, "### A home on the network: volumes on an NBD export\n")?;
    writeln!(md, "`hscm bench remote`: the export is nbdkit's memory plugin over TCP (a write costs one round trip, as \
        a FUA write would there); `direct` is fio's nbd engine straight at it, `flat-local` a flat immediate volume on \
        a local file, `flat-remote` the same volume with its home on the export, `tier-remote` a tiered volume on the \
        export with an eighth of it in DRAM (`randread-hot` reads a region that fits there). The volumes are served by \
        hscm's NBD server over a Unix socket and driven by the same fio. Added round trip: a relay that holds every byte \
        for half of it in each direction (this kernel has no `sch_netem`). {:.1} s per point, {}.\n",
        b.seconds, hscm_lab::units::human_bytes(b.size))?;
    writeln!(
        md,
        "| workload | bs | QD x jobs | target | placement | added RTT | IOPS | p50 µs | p99 µs | DRAM hits | busy cores | CPU µs/request | client cores | client µs/request |"
    )?;
    writeln!(
        md,
        "|---|---:|---:|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
    )?;
    for r in &b.rows {
        writeln!(
            md,
            "| {} | {} | {}x{} | {} | {} | {} ms | {:.0} | {:.1} | {:.1} | {} | {} | {} | {} | {} |",
            r.workload,
            hscm_lab::units::human_bytes(r.bs),
            r.qd,
            r.jobs,
            r.target,
            r.placement,
            r.rtt_ms,
            r.iops,
            r.p50_us,
            r.p99_us,
            r.hit_ratio
                .map_or("".into(), |h| format!("{:.0}%", h * 100.0)),
            r.busy_cores.map_or("".into(), |c| format!("{c:.2}")),
            r.cpu_us_per_request
                .map_or("".into(), |c| format!("{c:.1}")),
            r.client_busy_cores
                .map_or("".into(), |c| format!("{c:.2}")),
            r.client_cpu_us_per_request
                .map_or("".into(), |c| format!("{c:.1}"))
        )?;
    }
    writeln!(md)?;
    writeln!(md, "An immediate write of the flat volume goes out with FUA (one round trip), and every caller shares \
        the client's connections (64 writers keep 64 requests in flight on 4 connections). What stands between it and \
        the export's own rate is this machine's two cores, which fio, hscm, the delay relay and the export's server all \
        share here (on real machines the server and the wire are elsewhere): `busy cores` is how many of them the point \
        kept busy and `CPU µs/request` that per request, everything on the machine counted. The `split` rows stand in \
        for two machines: nbdkit and the relay pinned to the last CPU, fio and hscm to the others; `client cores` and \
        `client µs/request` count the client side's CPUs alone, so a point whose client cores are full is bound by \
        the client's CPU time per request, not by the other side. Writers of different \
        sectors no longer wait for each other's round trips (a write holds its sectors, not its 1 MiB chunk, while its \
        bytes travel). The tiered volume sends each run of consecutive \
        blocks home as one request and reads a miss's run ahead in one, but serves requests one at a time under its \
        lock, so its random writes and misses at QD16 get one round trip's worth each (docs/remote.md).\n")?;
    let rtt = args.rtt_ms.iter().copied().fold(0.0, f64::max);
    let mut checks = Vec::new();
    for qd in ["qd1x1", "qd16x4"] {
        checks.push((
            format!("4 KiB, {qd}, {rtt} ms"),
            Check::new(
                &targets::REMOTE_READ_VS_LOCAL,
                ratio(
                    &b,
                    &format!("randread 4096 {qd} rtt{rtt} flat-remote/flat-local"),
                ),
            ),
        ));
    }
    checks.push((
        format!("{rtt} ms"),
        Check::new(
            &targets::REMOTE_DURABLE_WRITE_VS_DIRECT,
            ratio(
                &b,
                &format!("randwrite 4096 qd16x4 rtt{rtt} flat-remote/direct"),
            ),
        ),
    ));
    if args.placement.contains(&Placement::Split) {
        checks.push((
            format!("split, {rtt} ms"),
            Check::new(
                &targets::REMOTE_DURABLE_WRITE_VS_DIRECT,
                ratio(
                    &b,
                    &format!("randwrite 4096 qd16x4 rtt{rtt} flat-remote/direct split"),
                ),
            ),
        ));
    }
    checks.push((
        format!("{rtt} ms"),
        Check::new(
            &targets::REMOTE_TIER_MISS_VS_RTT,
            ratio(
                &b,
                &format!("randread 4096 qd1x1 rtt{rtt} tier-remote/direct p50"),
            ),
        ),
    ));
    checks.push((
        format!("QD16x4, {rtt} ms"),
        Check::new(
            &targets::REMOTE_TIER_HIT_VS_LOCAL,
            ratio(
                &b,
                &format!("randread-hot 4096 qd16x4 rtt{rtt} tier-remote/flat-local"),
            ),
        ),
    ));
    Ok((checks, b))
}

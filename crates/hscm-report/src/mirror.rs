//! The NBD section's part on mirrored homes (`hscm bench mirror`, issue 53): durable
//! writes to a volume whose home is a local file and an NBD export, against each
//! member's own durable writes and the bound they make together.

use std::fmt::Write as _;

use anyhow::Result;

use crate::{targets, Check};
use hscm_lab::mirror::{self, MirrorBench, MirrorBenchArgs};

fn ratio(b: &MirrorBench, key: &str) -> f64 {
    b.ratios.get(key).copied().unwrap_or(f64::NAN)
}

/// Runs the bench, writes its table and returns its checks and output.
pub fn subsection(md: &mut String, quick: bool) -> Result<(Vec<(String, Check)>, MirrorBench)> {
    let args = MirrorBenchArgs {
        seconds: if quick { 0.3 } else { 2.0 },
        size: if quick { 16 << 20 } else { 64 << 20 },
        // The smoke run keeps the round trip the checks read.
        rtt_ms: if quick {
            vec![1.0]
        } else {
            hscm_lab::flag_defaults::<MirrorBenchArgs>().rtt_ms
        },
        ..hscm_lab::flag_defaults()
    };
    note!("[nbd] a mirrored home, against its members' own durable writes");
    let b = mirror::bench(&args)?;
    writeln!(
        md,
        "### A mirrored home: the volume on a local file and an NBD export at once\n"
    )?;
    writeln!(md, "`hscm bench mirror` (docs/mirror.md): 4 KiB durable random writes, QD workers each with one in \
        flight, issued in-process. `local-device` is the local file's own durable write (write, fdatasync), \
        `remote-device` the export's (nbdkit's file plugin over TCP, a write with FUA: a round trip and an fdatasync \
        there), `both-devices` each write to both at once as the mirror issues it (FUA write sent, local write \
        and sync meanwhile) without a volume, `volume-local` a flat immediate volume on a local file, `volume-mirror` the same volume on a mirror \
        of a local file and the export (protocol C). Added round trip: the delay relay (no `sch_netem` here). \
        {:.1} s per point, {}.\n", b.seconds, hscm_lab::units::human_bytes(b.size))?;
    writeln!(md, "| target | QD | added RTT | IOPS | p50 µs | p99 µs |")?;
    writeln!(md, "|---|---:|---:|---:|---:|---:|")?;
    for r in &b.rows {
        writeln!(
            md,
            "| {} | {} | {} ms | {:.0} | {:.1} | {:.1} |",
            r.target, r.qd, r.rtt_ms, r.iops, r.p50_us, r.p99_us
        )?;
    }
    writeln!(md)?;
    for r in &b.resync {
        writeln!(md, "Full resync at {} ms: {} in {:.2} s, {:.0} MB/s; 1 MiB writes straight to the export: {:.0} MB/s.\n",
            r.rtt_ms, hscm_lab::units::human_bytes(r.bytes), r.seconds, r.mbps, r.link_mbps)?;
    }
    writeln!(md, "Every process here (the benchmark's writers, nbdkit, the delay relay) shares this machine's two \
        cores, and the export's durable write is an fdatasync on the same disk as the local one's: so \
        `both-devices` shows the bare requests beside the volume; the \
        target, set against the slower device alone, assumes members on separate machines.\n")?;
    for (k, v) in b.ratios.iter().filter(|(k, _)| k.contains("both-devices")) {
        writeln!(md, "- {k}: {v:.2}x")?;
    }
    writeln!(md)?;
    let rtt = args.rtt_ms.iter().copied().fold(0.0, f64::max);
    let checks = vec![
        (
            format!("QD1, {rtt} ms"),
            Check::new(
                &targets::MIRROR_QD1_VS_BOUND,
                ratio(&b, &format!("qd1 rtt{rtt} p50 volume-mirror/bound")),
            ),
        ),
        (
            format!("QD16, {rtt} ms"),
            Check::new(
                &targets::MIRROR_QD16_VS_SLOWER,
                ratio(&b, &format!("qd16 rtt{rtt} volume-mirror/slower-device")),
            ),
        ),
    ];
    Ok((checks, b))
}

//! The NBD section of `hscm reproduce`: the volume as a network block device against
//! nbdkit, beside the paper's block-level results (Baek & Park 2020 serve their RAM
//! disk as a block device; Fig. 6a/6b are its block-level reads and writes).

use std::fmt::Write as _;
use std::path::Path;

use anyhow::Result;
use serde_json::json;

use crate::{named_checks_json, plot, targets, targets_table, Check, Section};
use hscm_lab::nbd::{self, NbdBench, NbdBenchArgs};
use hscm_lab::nbd_strangers;

fn ratio(b: &NbdBench, key: &str) -> f64 {
    b.ratios.get(key).copied().unwrap_or(f64::NAN)
}

fn flush_row<'a>(b: &'a NbdBench, pattern: &str) -> Option<&'a hscm_lab::nbd::flush::FlushRow> {
    b.flush.iter().find(|r| r.pattern == pattern)
}

pub fn section(out: &Path, quick: bool) -> Result<Section> {
    let mut md = String::new();
    writeln!(
        md,
        "## NBD export (after Baek & Park 2020's block device)\n"
    )?;
    // Without fio and nbdkit the section says how to get them.
    let missing: Vec<&str> = ["fio", "nbdkit"]
        .into_iter()
        .filter(|t| !hscm_lab::installed(t))
        .collect();
    if !missing.is_empty() {
        writeln!(
            md,
            "Not run: {} not installed (`bash scripts/setup.sh` installs them).\n",
            missing.join(" and ")
        )?;
        return Ok(Section {
            md,
            json: json!({"skipped": format!("{} not installed", missing.join(", "))}),
            passed: 0,
            total: 0,
        });
    }
    let args = NbdBenchArgs {
        seconds: if quick { 0.3 } else { 3.0 },
        size: if quick { 32 << 20 } else { 256 << 20 },
        ..hscm_lab::flag_defaults()
    };
    note!("[nbd] the NBD export against nbdkit, fio's nbd engine");
    let b = nbd::bench(&args)?;
    writeln!(md, "`hscm nbd` serves the volume over NBD; fio's `nbd` engine drives it and, in the same run and over Unix \
        sockets, nbdkit's memory plugin (`allocator=malloc`: volatile, its fastest), its file plugin on the same disk \
        (durable only through FLUSH), that plugin with every write forced to FUA (the partner of an immediate volume), and \
        nbdkit's null plugin, which stores nothing: the best any server can do over this transport. The paper's DHRD is a \
        kernel block device; its block-level figures (random reads 64x a SATA SSD RAID-0 with DBR, Fig. 6a; writes within \
        3% of the SSD, Fig. 6b) are the ones an NBD export carries to user space. {:.1} s per point, {} per export.\n",
        b.seconds, hscm_lab::units::human_bytes(b.size))?;
    writeln!(
        md,
        "| workload | QD x jobs | target | durability | IOPS | p50 µs | p99 µs |"
    )?;
    writeln!(md, "|---|---:|---|---|---:|---:|---:|")?;
    for r in &b.rows {
        writeln!(
            md,
            "| {} | {}x{} | {} | {} | {:.0} | {:.1} | {:.1} |",
            r.workload, r.qd, r.jobs, r.target, r.durability, r.iops, r.p50_us, r.p99_us
        )?;
    }
    writeln!(md)?;
    let bound = ratio(&b, "randread qd1x1 nbdkit-null/nbdkit-memory");
    let server = |qd: &str| ratio(&b, &format!("randwrite {qd} nbdkit-odirect/nbdkit-memory"));
    let ours = |qd: &str| ratio(&b, &format!("randwrite {qd} hscm-on-flush/nbdkit-odirect"));
    let device = ratio(&b, "randwrite qd1x1 device-odirect/nbdkit-memory");
    writeln!(md, "The bounds, measured in the same run. Reads at QD1: nbdkit's null plugin, which does no work, reaches \
        {bound:.2}x the memory plugin; the round trip of fio, libnbd and the socket is the cost at QD1 on this machine, so \
        a QD1 ratio far above it cannot come from the server. Writes: the volume acknowledges a write once it has reached \
        the device (`O_DIRECT`), in both modes. `nbdkit-odirect` is the least any server can do under that rule: an \
        nbdkit plugin (compiled from `crates/hscm-lab/assets/nbdkit-odirect.c` by nbdkit's cc plugin) whose every request is \
        one O_DIRECT pwrite to a file on the same disk, in nbdkit's parallel thread model. It reaches {:.2}x the memory \
        plugin at QD1 and {:.2}x at QD16x4; hscm on-flush reaches {:.2}x and {:.2}x of it. On this virtual machine a \
        device write costs CPU (a VM exit to submit, an interrupt to complete) on the same two cores the client runs on, \
        so the memory plugin's ratio is out of reach for any write-through export here. fio writing straight to the \
        file with O_DIRECT, no server at all (`device-odirect`), reaches {device:.2}x the memory plugin at QD1.\n",
        server("qd1x1"), server("qd16x4"), ours("qd1x1"), ours("qd16x4"))?;
    writeln!(md, "**Write-back** (`--durability write-back`): a write is acknowledged once it is in the server's RAM, \
        as by a disk with a volatile write cache; dirty sectors go home in the background (at most `--dirty-max`, 256 MiB \
        by default, at a time) and FLUSH or FUA makes everything before it durable. That is all NBD promises; on-flush \
        promises more (each write on the device before its reply, so it survives a crash of the server) and pays a device \
        write per request. FLUSH after N dirty MiB, on the volume in this process (an NBD FLUSH is one call of it), beside \
        the device measured in the same run: its sequential write of N MiB through the volume's backend plus one sync, \
        and, for scattered dirty blocks, its write of as many random 4 KiB blocks 32 at a time plus one sync.\n")?;
    writeln!(md, "| dirty in | dirty | flush ms | device sequential + sync ms | ratio | device random 4 KiB ms | device writes |")?;
    writeln!(md, "|---|---:|---:|---:|---:|---:|---:|")?;
    for r in &b.flush {
        writeln!(
            md,
            "| {} | {} | {:.1} | {:.1} | {:.2}x | {:.1} | {} |",
            r.pattern,
            hscm_lab::units::human_bytes(r.dirty_bytes),
            r.flush_ms,
            r.device_write_ms + r.device_sync_ms,
            r.flush_vs_device,
            r.device_random_ms,
            r.home_runs
        )?;
    }
    writeln!(md)?;
    let checks = vec![
        (
            "QD1".to_string(),
            Check::new(
                &targets::NBD_READ_QD1_VS_MEMORY,
                ratio(&b, "randread qd1x1 hscm-on-flush/nbdkit-memory"),
            ),
        ),
        (
            "QD16x4".to_string(),
            Check::new(
                &targets::NBD_READ_QD16_VS_MEMORY,
                ratio(&b, "randread qd16x4 hscm-on-flush/nbdkit-memory"),
            ),
        ),
        (
            "QD1".to_string(),
            Check::new(
                &targets::NBD_ONFLUSH_WRITE_VS_MEMORY,
                ratio(&b, "randwrite qd1x1 hscm-write-back/nbdkit-memory"),
            ),
        ),
        (
            "QD16x4".to_string(),
            Check::new(
                &targets::NBD_ONFLUSH_WRITE_VS_MEMORY,
                ratio(&b, "randwrite qd16x4 hscm-write-back/nbdkit-memory"),
            ),
        ),
        (
            "QD1".to_string(),
            Check::new(
                &targets::NBD_WRITEBACK_MIX_VS_MEMORY,
                ratio(&b, "randrw qd1x1 hscm-write-back/nbdkit-memory"),
            ),
        ),
        (
            "QD16x4".to_string(),
            Check::new(
                &targets::NBD_WRITEBACK_MIX_VS_MEMORY,
                ratio(&b, "randrw qd16x4 hscm-write-back/nbdkit-memory"),
            ),
        ),
        (
            "QD1".to_string(),
            Check::new(
                &targets::NBD_ONFLUSH_WRITE_VS_ODIRECT,
                ratio(&b, "randwrite qd1x1 hscm-on-flush/nbdkit-odirect"),
            ),
        ),
        (
            "QD16x4".to_string(),
            Check::new(
                &targets::NBD_ONFLUSH_WRITE_VS_ODIRECT,
                ratio(&b, "randwrite qd16x4 hscm-on-flush/nbdkit-odirect"),
            ),
        ),
        (
            hscm_lab::units::human_bytes(
                flush_row(&b, "sequential-1m").map_or(0, |r| r.dirty_bytes),
            ),
            Check::new(
                &targets::NBD_FLUSH_VS_DEVICE,
                flush_row(&b, "sequential-1m").map_or(f64::NAN, |r| r.flush_vs_device),
            ),
        ),
        (
            hscm_lab::units::human_bytes(flush_row(&b, "random-4k").map_or(0, |r| r.dirty_bytes)),
            Check::new(
                &targets::NBD_FLUSH_SCATTERED_VS_DEVICE,
                flush_row(&b, "random-4k").map_or(f64::NAN, |r| r.flush_ms / r.device_random_ms),
            ),
        ),
        (
            "QD1".to_string(),
            Check::new(
                &targets::NBD_IMMEDIATE_WRITE_VS_FUA_FILE,
                ratio(&b, "randwrite qd1x1 hscm-immediate/nbdkit-file-fua"),
            ),
        ),
        (
            "QD16x4".to_string(),
            Check::new(
                &targets::NBD_IMMEDIATE_WRITE_VS_FUA_FILE,
                ratio(&b, "randwrite qd16x4 hscm-immediate/nbdkit-file-fua"),
            ),
        ),
    ];
    let mut checks = checks;
    metrics_cost(&mut md, &b, &mut checks)?;
    let strangers = strangers(&mut md, quick, &mut checks)?;
    let (remote_checks, remote) = crate::remote::subsection(&mut md, quick)?;
    checks.extend(remote_checks);
    let (mirror_checks, mirror) = crate::mirror::subsection(&mut md, quick)?;
    checks.extend(mirror_checks);
    let passed = targets_table(&mut md, "Targets", &checks);
    writeln!(md)?;
    plot_iops(&out.join("nbd_iops.svg"), &b)?;
    writeln!(md, "![NBD IOPS](nbd_iops.svg)\n")?;
    Ok(Section {
        md,
        json: json!({"bench": b, "strangers": strangers, "remote": remote, "mirror": mirror, "checks": named_checks_json(&checks)}),
        passed,
        total: checks.len(),
    })
}

/// What strangers cost the server (`hscm bench nbd-strangers`), with its checks; run
/// only from the hscm binary, which it starts again as the server.
fn strangers(
    md: &mut String,
    quick: bool,
    checks: &mut Vec<(String, Check)>,
) -> Result<Option<nbd_strangers::Strangers>> {
    let exe = std::env::current_exe()?;
    if exe.file_name().and_then(|n| n.to_str()) != Some("hscm") {
        writeln!(md, "Strangers: not run (it starts the `hscm` binary as the server; this process is not it).\n")?;
        return Ok(None);
    }
    let args = nbd_strangers::StrangersArgs {
        idle: if quick { 200 } else { 1000 },
        stalled: 64,
        seconds: if quick { 0.3 } else { 2.0 },
        ..hscm_lab::flag_defaults()
    };
    note!("[nbd] strangers: idle connections and clients that never read");
    let r = nbd_strangers::bench(&args, &exe)?;
    writeln!(md, "**Strangers** (`hscm bench nbd-strangers`): the server as its own process, a well-behaved client \
        reading 4 KiB at QD1 while {} idle connections (handshake done, then silence), then {} clients that each send two \
        32 MiB READs and never read the replies, are connected; the server's VmRSS after each phase.\n",
        args.idle, args.stalled)?;
    writeln!(
        md,
        "| phase | connections | RSS MiB | above unloaded | p50 µs | p99 µs | p50 / unloaded |"
    )?;
    writeln!(md, "|---|---:|---:|---:|---:|---:|---:|")?;
    for p in &r.phases {
        writeln!(md, "| {} |", nbd_strangers::phase_cells(p).join(" | "))?;
    }
    writeln!(md)?;
    for p in r.phases.iter().skip(1) {
        checks.push((
            p.phase.clone(),
            Check::new(&targets::NBD_STRANGERS_RSS, p.rss_above_unloaded_mib),
        ));
        checks.push((
            p.phase.clone(),
            Check::new(&targets::NBD_STRANGERS_LATENCY, p.p50_ratio),
        ));
    }
    Ok(Some(r))
}

/// The service side's cost: its table and its target.
fn metrics_cost(md: &mut String, b: &NbdBench, checks: &mut Vec<(String, Check)>) -> Result<()> {
    writeln!(md, "**Metrics** (docs/service.md): the export as `hscm nbd` runs it (every request counted and timed, \
        registered for `hscm status`, `--metrics` scraped every second) against a bare server on the same volume, \
        kept in RAM (/dev/shm), where a request costs least, so a per-request cost weighs most; \
        {} rounds per workload, ABBA order so that drift cancels; the ratio is of the mean IOPS, ± its standard error \
        (the machine's noise on this comparison). CPU per request is this process's (servers, status, metrics).\n",
        b.metrics.first().map_or(0, |r| r.rounds))?;
    writeln!(md, "| workload | QDxJ | bare IOPS | with metrics | ratio | ± | CPU/request bare | with metrics | scrapes |")?;
    writeln!(md, "|---|---:|---:|---:|---:|---:|---:|---:|---:|")?;
    for r in &b.metrics {
        writeln!(
            md,
            "| {} | {}x{} | {:.0} | {:.0} | {:.3}x | {:.3} | {:.0} ns | {:.0} ns | {} |",
            r.workload,
            r.qd,
            r.jobs,
            r.iops_bare,
            r.iops_metrics,
            r.ratio,
            r.ratio_stderr,
            r.cpu_ns_per_request_bare,
            r.cpu_ns_per_request_metrics,
            r.scrapes
        )?;
        checks.push((
            r.workload.clone(),
            Check::new(&targets::NBD_METRICS_COST, r.ratio),
        ));
    }
    writeln!(md)?;
    Ok(())
}

fn plot_iops(path: &Path, b: &NbdBench) -> Result<()> {
    let points: Vec<(String, u32, u32)> = {
        let mut p: Vec<(String, u32, u32)> = Vec::new();
        for r in &b.rows {
            let key = (r.workload.clone(), r.qd, r.jobs);
            if !p.contains(&key) {
                p.push(key);
            }
        }
        p
    };
    let series = [
        ("hscm", "on-flush", plot::BLUE),
        ("hscm", "immediate", plot::GREEN),
        ("nbdkit-memory", "volatile", plot::GREY),
        ("nbdkit-file", "flush-only", plot::ORANGE),
        ("nbdkit-file-fua", "fua", plot::RED),
        ("nbdkit-null", "none", plot::DARK_GREY),
        ("nbdkit-odirect", "device", plot::PURPLE),
        ("device-odirect", "device", plot::BLACK_ISH),
    ];
    let chart = plot::BarChart {
        title: "NBD: 4 KiB IOPS by workload and depth (log scale)".into(),
        y_desc: "IOPS".into(),
        y_axis: plot::Axis::Log10,
        categories: points
            .iter()
            .map(|(w, q, j)| format!("{w} QD{q}x{j}"))
            .collect(),
        series: series
            .iter()
            .map(|(t, d, color)| plot::Bars {
                name: format!("{t} ({d})"),
                color: *color,
                values: points
                    .iter()
                    .map(|(w, q, j)| {
                        b.rows
                            .iter()
                            .find(|r| {
                                &r.workload == w
                                    && r.qd == *q
                                    && r.jobs == *j
                                    && r.target == *t
                                    && r.durability == *d
                            })
                            .map(|r| r.iops)
                    })
                    .collect(),
            })
            .collect(),
        baseline: None,
        references: Vec::new(),
        size: (1200, 460),
    };
    hscm_lab::scratch::write_output(path, chart.to_svg()?.as_bytes())
}

//! `hscm bench fs`: the file system of `hscm mount` against tmpfs (volatile: the
//! bound), ext4 and ext3 on loop files on the same disk, and a plain FUSE passthrough
//! (bindfs over tmpfs: what FUSE itself costs), all measured in the same run.
//!
//! The points (module `workloads`): Sun et al. 2020's Table 3 (random
//! reads and writes of 1-16 KiB, one job, the page cache dropped before each point:
//! ext3 then reads from its disk, hscm from the volume's RAM through FUSE), 4 KiB with
//! libaio and four jobs, Baek & Park 2020's file-level 66:34 mix, sequential 1 MiB, warm
//! reads, create/stat/unlink of small files, a fileserver job file modelled on
//! Filebench's, Baek & Park 2020's video read-modify-rewrite, and the durable 4 KiB random
//! write. hscm runs in on-flush mode (the paper's fast mode, durable at fsync as the
//! buffered kernel file systems are) as `hscm mount` serves it, and its writing
//! points again with `--passthrough-read-write` (`hscm-passthrough-read-write`:
//! fio opens read-write, which the default serves through the daemon so that msync
//! is durable), and the
//! durable write in immediate mode against ext4 with an fsync after each write and
//! against a plain file on the same disk with an fdatasync after each (the disk's
//! bound: what any durable write there costs at the least). Those three are mounted
//! together and take turns for three rounds; each row is its median round.
//!
//! Mounting, and dropping the page cache, need root; without it the bench says so.

mod mounts;
mod tree;
mod work;
mod workloads;

use std::collections::BTreeMap;
use std::path::PathBuf;

use anyhow::{bail, Result};
use serde::Serialize;

pub use mounts::Under;
pub use work::{
    bench as work_bench, print as work_print, FsWork, FsWorkArgs, WorkRow,
    FS_NAMES as WORK_FS_NAMES,
};
pub use workloads::{Kind, Point, SIZES};

use crate::fio::FioResult;
use crate::units::{parse_size, size_arg};

/// The file system of `hscm mount` against tmpfs (volatile, the bound), ext4 and
/// ext3 on loop files on the same disk, and bindfs over tmpfs (a plain FUSE
/// passthrough: FUSE's own cost), driven by fio. hscm runs in on-flush mode
/// (durable at fsync, as buffered ext4 is) as `hscm mount` serves it, and its
/// writing points again with `--passthrough-read-write` (hscm-passthrough-read-write):
/// random reads and writes of 1-16 KiB with the page cache dropped before each
/// point (Table 3 of Sun et al. 2020, tmpfs on hybrid memory against ext3); 4 KiB
/// with libaio and with four jobs; a 66:34 mix; sequential 1 MiB; warm reads;
/// create, stat and unlink of small files; a fileserver job file modelled on
/// Filebench's (50 threads); the read-modify-rewrite of a video file (Baek and
/// Park 2020, the durable hybrid RAM disk). Durable 4 KiB writes run in
/// immediate mode against ext4 with an fsync after each and against a plain file
/// on the same disk with an fdatasync after each (the disk's bound), the three
/// taking turns for three rounds. Needs root, fio, bindfs and e2fsprogs
/// (scripts/setup.sh).
///
/// Example: hscm bench fs --seconds 3 --json
#[derive(clap::Args, Clone, Debug)]
pub struct FsBenchArgs {
    /// Seconds per measured point.
    #[arg(long, default_value_t = 3.0)]
    pub seconds: f64,
    /// The file fio works on (each file system gets room for it); the metadata and
    /// fileserver workloads scale their file counts with it, the video is this file.
    #[arg(long, default_value = size_arg(256 << 20), value_parser = parse_size)]
    pub size: u64,
    /// The file whose RAM each file system's use is measured with (written, the page
    /// cache dropped, read once), each file system mounted for it alone.
    #[arg(long, default_value = size_arg(1 << 30), value_parser = parse_size)]
    pub memory_size: u64,
    /// Directory for the volume and the loop files (the disk under test; default:
    /// the system temporary directory). Removed afterwards.
    #[arg(long)]
    pub dir: Option<PathBuf>,
    /// Print JSON (a stable contract) instead of text.
    #[arg(long)]
    pub json: bool,
}

/// One measured point. Field names are the `--json` contract.
#[derive(Debug, Clone, Serialize)]
pub struct FsRow {
    /// randread, randwrite, randrw (66% reads), read, write (sequential), create,
    /// stat, unlink, fileserver, video.
    pub workload: String,
    /// Request size in bytes (0 for the metadata and fileserver workloads).
    pub bs: u64,
    pub jobs: u32,
    /// hscm, tmpfs, ext4, ext3, fuse-passthrough, or disk-file (a plain file on the
    /// same disk, for the durable write only: the disk's bound).
    pub fs: String,
    /// Every acknowledged write survives a power cut (hscm in immediate mode; ext4
    /// with an fsync after each write). Not durable: hscm in on-flush mode (durable at
    /// fsync), tmpfs, buffered ext4 and ext3, the passthrough. The disk file's
    /// durable write has an fdatasync after each write.
    pub durable: bool,
    pub iops: f64,
    pub mbps: f64,
    pub p50_us: f64,
    pub p99_us: f64,
    /// fio's engine (psync, libaio, filecreate, filestat, filedelete, fio-jobfile)
    /// or hscm-lab (the video, driven by the bench itself).
    pub engine: String,
    /// "cold": the page cache was dropped before the point; "warm": the file was
    /// read once first; "steady": the workload lays out its own files and runs on.
    pub cache: String,
}

/// The RAM a file system used for the data file: the page cache and shmem (`Cached`)
/// plus the bench process's own memory (hscm's daemon runs in it) after the file was
/// written, the page cache dropped and the file read once, less the same before the
/// file system was mounted. A page held twice counts twice (ext4 and ext3 on loop
/// files cache each page in the loop file too). Other activity adds noise.
#[derive(Debug, Clone, Serialize)]
pub struct FsMemory {
    pub fs: String,
    /// RAM in use after, less before.
    pub bytes: u64,
    /// The data file's size.
    pub data_bytes: u64,
    /// Of `bytes`, what hscm's files hold in their memfds (0 for the others).
    pub file_ram_bytes: u64,
}

#[derive(Debug, Clone, Serialize)]
pub struct FsBench {
    pub rows: Vec<FsRow>,
    /// RAM each file system used for the data file (hscm's paths, tmpfs, ext4, ext3,
    /// the passthrough), measured in this run.
    pub memory: Vec<FsMemory>,
    /// "WORKLOAD bsBS[ libaio][ 4jobs][ warm][ durable] hscm/FS" (no bs for the
    /// metadata, fileserver and video workloads) → IOPS ratio (MB/s for the fileserver),
    /// measured in this run.
    pub ratios: BTreeMap<String, f64>,
    pub seconds: f64,
    pub size: u64,
}

/// The file systems of the main pass, in the order they run.
const UNDER: [Under; 7] = [
    Under::HscmOnFlush,
    Under::HscmClassic,
    Under::HscmReadWritePassthrough,
    Under::Tmpfs,
    Under::Ext4,
    Under::Ext3,
    Under::Passthrough,
];

fn cache_of(p: &Point) -> &'static str {
    match p.kind {
        Kind::Fileserver => "steady",
        _ if p.warm => "warm",
        _ => "cold",
    }
}

fn row(under: Under, p: &Point, r: &FioResult) -> FsRow {
    FsRow {
        workload: p.workload.into(),
        bs: p.bs,
        jobs: p.jobs,
        fs: under.name().into(),
        durable: p.durable,
        iops: r.iops,
        mbps: r.mbps,
        p50_us: r.p50_us,
        p99_us: r.p99_us,
        engine: p.engine.into(),
        cache: cache_of(p).into(),
    }
}

fn progress(done: usize, total: usize, under: Under, p: &Point, round: &str) {
    note!(
        "[fs {done}/{total}] {}: {} {}{}{round}",
        under.label(),
        p.workload,
        if p.bs > 0 {
            crate::units::human_bytes(p.bs)
        } else {
            String::new()
        },
        p.qualifiers()
    );
}

fn lay_out(m: &mounts::Mounted, size: u64) -> Result<()> {
    note!(
        "[fs] {}: laying out a {} file",
        m.under.label(),
        crate::units::human_bytes(size)
    );
    workloads::lay_out(m, size)
}

pub fn bench(a: &FsBenchArgs) -> Result<FsBench> {
    if a.seconds <= 0.0 || a.size < (1 << 20) {
        bail!("--seconds must be positive and --size at least 1M");
    }
    if !rustix::process::geteuid().is_root() {
        bail!(
            "hscm bench fs mounts tmpfs, ext4, ext3 and FUSE file systems and drops the page cache: run it as root"
        );
    }
    let scratch = crate::scratch::Scratch::new("fs", a.dir.as_deref())?;
    let dir = scratch.path();
    let total: usize = UNDER
        .iter()
        .map(|&u| workloads::points(u).len())
        .sum::<usize>()
        + workloads::DURABLE.len() * workloads::DURABLE_ROUNDS;
    let mut done = 0;
    let mut rows = Vec::new();
    let mut keys = Vec::new();
    let mut memory = Vec::new();
    // RAM used for the same data, each file system mounted for it alone.
    // (hscm with read-write opens by passthrough keeps the same RAM as hscm: the
    // memory file is written once and read.)
    for under in UNDER
        .into_iter()
        .filter(|&u| u != Under::HscmReadWritePassthrough)
    {
        note!(
            "[fs] {}: RAM used for a {} file",
            under.label(),
            crate::units::human_bytes(a.memory_size)
        );
        memory.push(measure_memory(dir, under, a.memory_size)?);
    }
    for under in UNDER {
        let m = mounts::mount(dir, under, a.size)?;
        lay_out(&m, a.size)?;
        for p in workloads::points(under) {
            done += 1;
            progress(done, total, under, &p, "");
            let r = workloads::run(&m, &p, a.size, a.seconds)?;
            rows.push(row(under, &p, &r));
            keys.push(p);
        }
    }
    // The durable write: all three mounted at once, taking turns.
    let p = workloads::DURABLE_WRITE;
    let mut mounted = Vec::new();
    for under in workloads::DURABLE {
        let m = mounts::mount(dir, under, a.size)?;
        lay_out(&m, a.size)?;
        mounted.push((m, Vec::new()));
    }
    for round in 1..=workloads::DURABLE_ROUNDS {
        for (m, runs) in &mut mounted {
            done += 1;
            let of = format!(" (round {round} of {})", workloads::DURABLE_ROUNDS);
            progress(done, total, m.under, &p, &of);
            runs.push(workloads::run(m, &p, a.size, a.seconds)?);
        }
    }
    for (m, mut runs) in mounted {
        runs.sort_by(|x, y| x.iops.total_cmp(&y.iops));
        rows.push(row(m.under, &p, &runs[runs.len() / 2]));
        keys.push(p);
    }
    let mut ratios = ratios(&rows, &keys);
    if let Some(ours) = memory.iter().find(|m| m.fs == "hscm") {
        for base in memory.iter().filter(|m| m.fs != "hscm" && m.bytes > 0) {
            ratios.insert(
                format!("memory hscm/{}", base.fs),
                ours.bytes as f64 / base.bytes as f64,
            );
        }
    }
    Ok(FsBench {
        rows,
        memory,
        ratios,
        seconds: a.seconds,
        size: a.size,
    })
}

/// The key a point's ratios go under, before " hscm/FS".
fn key(p: &Point) -> String {
    let bs = if p.kind == Kind::Io {
        format!(" bs{}", p.bs)
    } else {
        String::new()
    };
    format!("{}{bs}{}", p.workload, p.qualifiers())
}

/// Mounts `under`, writes a `size` file, drops the page cache, reads the file once:
/// the RAM that took (see [`FsMemory`]).
fn measure_memory(dir: &std::path::Path, under: Under, size: u64) -> Result<FsMemory> {
    // A directory of its own, removed after: the timed points mount afresh.
    let own = dir.join(format!("memory-{}", under.name()));
    std::fs::create_dir_all(&own)?;
    mounts::settle_memory()?;
    let before = mounts::ram_in_use()?;
    let m = mounts::mount(&own, under, size)?;
    workloads::lay_out(&m, size)?;
    mounts::drop_caches()?;
    workloads::read_once(&m, size)?;
    let after = mounts::ram_in_use()?;
    let measured = FsMemory {
        fs: under.name().into(),
        bytes: after.saturating_sub(before),
        data_bytes: size,
        file_ram_bytes: m.file_ram_bytes(),
    };
    drop(m);
    std::fs::remove_dir_all(&own)?;
    Ok(measured)
}

/// hscm over each file system at every point both ran.
fn ratios(rows: &[FsRow], points: &[Point]) -> BTreeMap<String, f64> {
    let mut out = BTreeMap::new();
    let measured: Vec<(&FsRow, &Point)> = rows.iter().zip(points).collect();
    for (ours, p) in measured.iter().filter(|(r, _)| r.fs == "hscm") {
        for (base, q) in measured.iter().filter(|(r, _)| r.fs != "hscm") {
            if p != q {
                continue;
            }
            let ratio = if p.compares_bytes() {
                ours.mbps / base.mbps
            } else {
                ours.iops / base.iops
            };
            out.insert(format!("{} hscm/{}", key(p), base.fs), ratio);
        }
    }
    out
}

/// IOPS of `fs` at one of Table 3's points (`rw` random, `bs` bytes, psync, one
/// job, cold, not durable), if it ran.
pub fn table3_iops(b: &FsBench, fs: &str, rw: &str, bs: u64) -> Option<f64> {
    b.rows
        .iter()
        .find(|r| {
            r.fs == fs
                && r.workload == rw
                && r.bs == bs
                && r.jobs == 1
                && r.engine == "psync"
                && r.cache == "cold"
                && !r.durable
        })
        .map(|r| r.iops)
}

/// Mean of `ours` over `base` (IOPS) across Table 3's points: 1-16 KiB random reads
/// and writes.
pub fn table3_mean(b: &FsBench, ours: &str, base: &str) -> f64 {
    let v: Vec<f64> = SIZES
        .iter()
        .flat_map(|&bs| ["randread", "randwrite"].map(|rw| (rw, bs)))
        .filter_map(|(rw, bs)| Some(table3_iops(b, ours, rw, bs)? / table3_iops(b, base, rw, bs)?))
        .collect();
    if v.is_empty() {
        f64::NAN
    } else {
        v.iter().sum::<f64>() / v.len() as f64
    }
}

/// Seed 000's Table 3 figure: hscm over ext3 averaged over 1-16 KiB random reads and
/// writes (the paper's tmpfs-on-hybrid-memory over ext3: 30.07x on average).
pub fn table3_average(b: &FsBench) -> f64 {
    table3_mean(b, "hscm", "ext3")
}

/// The same mean for tmpfs over ext3: what any file system in RAM reaches on this
/// machine's disk (the bound of [`table3_average`]).
pub fn table3_tmpfs_bound(b: &FsBench) -> f64 {
    table3_mean(b, "tmpfs", "ext3")
}

/// The same mean for the FUSE passthrough over ext3: what a file system served
/// through FUSE from RAM reaches (FUSE's own bound).
pub fn table3_fuse_bound(b: &FsBench) -> f64 {
    table3_mean(b, "fuse-passthrough", "ext3")
}

/// The most hscm's durable write can reach over ext4's on this disk: a plain file
/// with an fdatasync after each write, over ext4 with an fsync after each.
pub fn durable_write_disk_bound(b: &FsBench) -> f64 {
    let durable = |fs: &str| {
        b.rows
            .iter()
            .find(|r| r.fs == fs && r.durable && r.workload == "randwrite" && r.bs == 4096)
            .map_or(f64::NAN, |r| r.iops)
    };
    durable("disk-file") / durable("ext4")
}

impl FsMemory {
    /// RAM used over the data's size.
    pub fn per_data(&self) -> f64 {
        self.bytes as f64 / self.data_bytes as f64
    }
}

/// A memory figure's cells, as the text output and the report show them: the file
/// system, RAM used, that over the data, and hscm's files' RAM.
pub fn memory_cells(m: &FsMemory) -> [String; 4] {
    [
        m.fs.clone(),
        crate::units::human_bytes(m.bytes),
        format!("{:.2}x", m.per_data()),
        crate::units::human_bytes(m.file_ram_bytes),
    ]
}

/// The columns of a row, as the text output and the report show them.
pub const ROW_HEADER: [&str; 11] = [
    "workload", "bs", "engine", "jobs", "cache", "fs", "durable", "IOPS", "MB/s", "p50 µs",
    "p99 µs",
];

/// A row's cells under [`ROW_HEADER`].
pub fn row_cells(r: &FsRow) -> [String; 11] {
    [
        r.workload.clone(),
        r.bs.to_string(),
        r.engine.clone(),
        r.jobs.to_string(),
        r.cache.clone(),
        r.fs.clone(),
        r.durable.to_string(),
        format!("{:.0}", r.iops),
        format!("{:.1}", r.mbps),
        format!("{:.1}", r.p50_us),
        format!("{:.1}", r.p99_us),
    ]
}

pub fn print(b: &FsBench) -> Result<()> {
    outln!(
        "File systems, fio, a {} file, {:.1} s per point (cold: page cache dropped before the point)",
        crate::units::human_bytes(b.size),
        b.seconds
    )?;
    let widths = [10, 8, 11, 4, 6, 16, 7, 10, 9, 9, 9];
    let line = |cells: &[String]| {
        cells
            .iter()
            .zip(widths)
            .enumerate()
            .map(|(i, (c, w))| {
                // Text columns to the left, numbers to the right.
                if matches!(i, 0 | 2 | 4 | 5 | 6) {
                    format!("{c:<w$}")
                } else {
                    format!("{c:>w$}")
                }
            })
            .collect::<Vec<_>>()
            .join(" ")
    };
    outln!("{}", line(&ROW_HEADER.map(String::from)))?;
    for r in &b.rows {
        outln!("{}", line(&row_cells(r)))?;
    }
    outln!()?;
    for (k, v) in &b.ratios {
        outln!("{k:<44} {v:>8.2}x")?;
    }
    outln!(
        "Table 3 (mean over 1-16 KiB random reads and writes, cold, over ext3): hscm {:.2}x, tmpfs {:.2}x, hscm without passthrough {:.2}x, FUSE passthrough {:.2}x (paper: 30.07x)",
        table3_average(b),
        table3_tmpfs_bound(b),
        table3_mean(b, "hscm-no-passthrough", "ext3"),
        table3_fuse_bound(b)
    )?;
    outln!(
        "RAM used for a {} file (written, page cache dropped, read once):",
        crate::units::human_bytes(b.memory.first().map_or(0, |m| m.data_bytes))
    )?;
    for m in &b.memory {
        let [fs, bytes, per_data, file_ram] = memory_cells(m);
        outln!("  {fs:<20} {bytes:>10} ({per_data} the data; files' RAM {file_ram})")?;
    }
    outln!(
        "Durable 4 KiB random write over ext4 with fsync: hscm {:.2}x; a plain file on the same disk with fdatasync (the disk's bound) {:.2}x",
        b.ratios
            .get("randwrite bs4096 durable hscm/ext4")
            .copied()
            .unwrap_or(f64::NAN),
        durable_write_disk_bound(b)
    )?;
    Ok(())
}

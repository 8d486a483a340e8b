//! `hscm bench fs`: the file system of `hscm mount` against tmpfs (volatile: the
//! bound), ext4 and ext3 on loop files on the same disk, driven by fio's psync engine
//! in the same run. The points are Table 3 of Sun et al. 2020 (seed 000; random reads and writes of 1-16
//! KiB, one job, the page cache dropped before each point: ext3 then reads from its
//! disk, hscm from the volume's RAM; hscm in on-flush mode, the paper's fast mode) and
//! the durable 4 KiB random write: hscm in immediate mode (every write durable when it
//! returns) against ext4 with an fsync after each write.
//!
//! Mounting tmpfs, ext4 and ext3 and dropping the page cache need root; without it
//! the bench says so.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;

use anyhow::{bail, Context, Result};
use hscm_fs::{FileSystem, MountOptions};
use hscm_volume::{CreateOptions, Durability, OpenOptions, Volume};
use serde::Serialize;

use crate::fio::FioResult;
use crate::units::{parse_size, size_arg};

#[derive(clap::Args, Clone, Debug)]
pub struct FsBenchArgs {
    /// Seconds per measured point.
    #[arg(long, default_value_t = 3.0)]
    pub seconds: f64,
    /// The file fio works on (each file system gets room for it).
    #[arg(long, default_value = size_arg(256 << 20), value_parser = parse_size)]
    pub size: u64,
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
    /// randread, randwrite.
    pub workload: String,
    pub bs: u64,
    pub jobs: u32,
    /// hscm, tmpfs, ext4 or ext3.
    pub fs: String,
    /// Every acknowledged write survives a power cut (hscm in immediate mode; ext4
    /// with an fsync after each write). Not durable: hscm in on-flush mode (durable at
    /// fsync), tmpfs, buffered ext4 and ext3.
    pub durable: bool,
    pub iops: f64,
    pub mbps: f64,
    pub p50_us: f64,
    pub p99_us: f64,
}

#[derive(Debug, Clone, Serialize)]
pub struct FsBench {
    pub rows: Vec<FsRow>,
    /// "WORKLOAD bsBS [durable] hscm/FS" → IOPS ratio, measured in this run.
    pub ratios: BTreeMap<String, f64>,
    pub seconds: f64,
    pub size: u64,
}

/// Table 3's request sizes.
pub const SIZES: [u64; 5] = [1024, 2048, 4096, 8192, 16384];

/// A file system under test, mounted at `at` while this lives.
struct Mounted {
    name: &'static str,
    at: PathBuf,
    keep: Keep,
}

enum Keep {
    Hscm(Option<fuser::BackgroundSession>),
    Kernel,
}

impl Drop for Mounted {
    fn drop(&mut self) {
        match &mut self.keep {
            Keep::Hscm(session) => {
                if let Some(s) = session.take() {
                    let _ = s.umount_and_join();
                }
            }
            Keep::Kernel => {
                let _ = Command::new("umount").arg(&self.at).status();
            }
        }
    }
}

fn sh(cmd: &mut Command, what: &str) -> Result<()> {
    let out = cmd.output().with_context(|| format!("running {what}"))?;
    if !out.status.success() {
        bail!(
            "{what} failed: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(())
}

fn mount_hscm(dir: &Path, size: u64, durability: hscm_fs::Durability) -> Result<Mounted> {
    let tag = match durability {
        hscm_fs::Durability::Immediate => "immediate",
        hscm_fs::Durability::OnFlush => "on-flush",
    };
    let path = dir.join(format!("fs-{tag}.hscm"));
    // Room for fio's file, the metadata areas and slack.
    let volume_size = (size + size / 4 + (64 << 20)).div_ceil(1 << 20) << 20;
    Volume::create(&path, volume_size, &CreateOptions::default())?;
    let volume = Volume::open(
        &path,
        &OpenOptions {
            durability: Some(Durability::OnFlush),
            ..OpenOptions::default()
        },
    )?;
    FileSystem::format(&volume, 0, 0)?;
    let fs = FileSystem::mount(Arc::new(volume), MountOptions { durability })?;
    let at = dir.join(format!("hscm-{tag}"));
    std::fs::create_dir_all(&at)?;
    let mut config = fuser::Config::default();
    config.mount_options = vec![
        fuser::MountOption::FSName("hscm-bench".into()),
        fuser::MountOption::DefaultPermissions,
    ];
    config.n_threads = Some(4);
    config.clone_fd = true;
    let session = fuser::Session::new(hscm_fuse::Fuse::new(Arc::new(fs)), &at, &config)
        .context("mounting hscm (FUSE: /dev/fuse and fusermount3, Debian package fuse3)")?
        .spawn()?;
    Ok(Mounted {
        name: "hscm",
        at,
        keep: Keep::Hscm(Some(session)),
    })
}

fn mount_kernel(dir: &Path, name: &'static str, size: u64) -> Result<Mounted> {
    let at = dir.join(name);
    std::fs::create_dir_all(&at)?;
    let room = size + size / 4 + (64 << 20);
    if name == "tmpfs" {
        sh(
            Command::new("mount")
                .args(["-t", "tmpfs", "-o", &format!("size={room}")])
                .arg("tmpfs")
                .arg(&at),
            "mount -t tmpfs",
        )?;
    } else {
        let image = dir.join(format!("{name}.img"));
        std::fs::File::create(&image)?.set_len(room)?;
        sh(
            Command::new(format!("mkfs.{name}"))
                .args(["-F", "-q"])
                .arg(&image),
            &format!("mkfs.{name} (Debian package e2fsprogs)"),
        )?;
        sh(
            Command::new("mount")
                .args(["-o", "loop"])
                .arg(&image)
                .arg(&at),
            &format!("mounting {name} on a loop device"),
        )?;
    }
    Ok(Mounted {
        name,
        at,
        keep: Keep::Kernel,
    })
}

/// Writes dirty pages back and empties the page cache, so that the next point starts cold.
fn drop_caches() -> Result<()> {
    rustix::fs::sync();
    std::fs::write("/proc/sys/vm/drop_caches", "3").context("dropping the page cache (needs root)")
}

fn point(
    m: &Mounted,
    rw: &str,
    bs: u64,
    size: u64,
    seconds: f64,
    fsync: bool,
) -> Result<FioResult> {
    let file = m.at.join("fio.dat");
    let mut args = vec![
        "--ioengine=psync".to_string(),
        format!("--filename={}", file.display()),
        format!("--size={size}"),
        format!("--rw={rw}"),
        format!("--bs={bs}"),
        "--numjobs=1".to_string(),
    ];
    if fsync {
        args.push("--fsync=1".into());
    }
    drop_caches()?;
    crate::fio::run(&args, m.name, Some(seconds))
}

pub fn bench(a: &FsBenchArgs) -> Result<FsBench> {
    if a.seconds <= 0.0 || a.size < (1 << 20) {
        bail!("--seconds must be positive and --size at least 1M");
    }
    if !rustix::process::geteuid().is_root() {
        bail!("hscm bench fs mounts tmpfs, ext4 and ext3 and drops the page cache: run it as root");
    }
    let scratch = crate::scratch::Scratch::new("fs", a.dir.as_deref())?;
    let dir = scratch.path();
    let mut rows = Vec::new();
    // (file system, its mode, Table 3's points, the durable 4 KiB write). hscm runs
    // Table 3 in on-flush mode (the paper's fast mode: writes reach the volume, a
    // sync comes with fsync, as ext3's buffered writes) and the durable write in
    // immediate mode (each write durable when it returns) against ext4 with an fsync
    // after each write.
    let targets = [
        ("hscm", Some(hscm_fs::Durability::OnFlush), true, false),
        ("hscm", Some(hscm_fs::Durability::Immediate), false, true),
        ("tmpfs", None, true, false),
        ("ext4", None, true, true),
        ("ext3", None, true, false),
    ];
    for (name, mode, table3, durable_write) in targets {
        let m = match mode {
            Some(durability) => mount_hscm(dir, a.size, durability)?,
            None => mount_kernel(dir, name, a.size)?,
        };
        note!(
            "[fs] {name}: laying out a {} file",
            crate::units::human_bytes(a.size)
        );
        crate::fio::run(
            &[
                "--ioengine=psync".into(),
                format!("--filename={}", m.at.join("fio.dat").display()),
                format!("--size={}", a.size),
                "--rw=write".into(),
                "--bs=1M".into(),
            ],
            name,
            None,
        )?;
        let mut measure = |rw: &str, bs: u64, durable: bool| -> Result<()> {
            note!(
                "[fs] {name}: {rw} {bs} B{}",
                if durable { ", durable" } else { "" }
            );
            // ext4's writes are made durable by an fsync after each; hscm's by its mode.
            let fsync = durable && name != "hscm";
            let r = point(&m, rw, bs, a.size, a.seconds, fsync)?;
            rows.push(FsRow {
                workload: rw.into(),
                bs,
                jobs: 1,
                fs: name.into(),
                durable,
                iops: r.iops,
                mbps: r.mbps,
                p50_us: r.p50_us,
                p99_us: r.p99_us,
            });
            Ok(())
        };
        if table3 {
            for rw in ["randread", "randwrite"] {
                for bs in SIZES {
                    measure(rw, bs, false)?;
                }
            }
        }
        if durable_write {
            measure("randwrite", 4096, true)?;
        }
    }
    let ratios = ratios(&rows);
    Ok(FsBench {
        rows,
        ratios,
        seconds: a.seconds,
        size: a.size,
    })
}

/// hscm over each file system at every point both ran, durable rows against
/// durable ones.
fn ratios(rows: &[FsRow]) -> BTreeMap<String, f64> {
    let mut out = BTreeMap::new();
    for ours in rows.iter().filter(|r| r.fs == "hscm") {
        for base in rows.iter().filter(|r| r.fs != "hscm") {
            let same = base.workload == ours.workload
                && base.bs == ours.bs
                && base.jobs == ours.jobs
                && base.durable == ours.durable;
            if !same {
                continue;
            }
            let durable = if ours.durable { " durable" } else { "" };
            out.insert(
                format!("{} bs{}{durable} hscm/{}", ours.workload, ours.bs, base.fs),
                ours.iops / base.iops,
            );
        }
    }
    out
}

/// Seed 000's Table 3 figure: hscm over ext3 averaged over 1-16 KiB random reads and
/// writes (the paper's tmpfs-on-hybrid-memory over ext3: 30.07x on average).
pub fn table3_average(b: &FsBench) -> f64 {
    let v: Vec<f64> = SIZES
        .iter()
        .flat_map(|bs| {
            ["randread", "randwrite"]
                .map(|rw| b.ratios.get(&format!("{rw} bs{bs} hscm/ext3")).copied())
        })
        .flatten()
        .collect();
    if v.is_empty() {
        f64::NAN
    } else {
        v.iter().sum::<f64>() / v.len() as f64
    }
}

pub fn print(b: &FsBench) -> Result<()> {
    outln!(
        "File systems, fio psync, one job, a {} file, {:.1} s per point, page cache dropped before each",
        crate::units::human_bytes(b.size),
        b.seconds
    )?;
    outln!(
        "{:<10} {:>6} {:<6} {:<8} {:>10} {:>9} {:>9} {:>9}",
        "workload",
        "bs",
        "fs",
        "durable",
        "IOPS",
        "MB/s",
        "p50 µs",
        "p99 µs"
    )?;
    for r in &b.rows {
        outln!(
            "{:<10} {:>6} {:<6} {:<8} {:>10.0} {:>9.1} {:>9.1} {:>9.1}",
            r.workload,
            r.bs,
            r.fs,
            r.durable,
            r.iops,
            r.mbps,
            r.p50_us,
            r.p99_us
        )?;
    }
    outln!()?;
    for (k, v) in &b.ratios {
        outln!("{k:<40} {v:>8.2}x")?;
    }
    outln!(
        "Table 3 (hscm / ext3, mean over 1-16 KiB random reads and writes): {:.2}x (paper: 30.07x)",
        table3_average(b)
    )?;
    Ok(())
}

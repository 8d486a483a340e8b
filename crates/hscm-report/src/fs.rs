//! The file system section of `hscm reproduce`: `hscm mount` against tmpfs, ext4,
//! ext3 and a plain FUSE passthrough, beside Sun et al. 2020's Table 3 (its fast mode,
//! tmpfs on hybrid memory, against ext3) and Baek & Park 2020's file-level figures.

use std::fmt::Write as _;
use std::path::Path;

use anyhow::Result;
use serde_json::json;

use crate::{named_checks_json, plot, targets, targets_table, Check, Section};
use hscm_lab::fs::{self, FsBench, FsBenchArgs, SIZES};

/// Seed 000, Table 3: fast mode's IOPS over ext3 at 1, 2, 4, 8 and 16 kB.
const PAPER_TABLE3: [f64; 5] = [38.74, 54.62, 19.31, 14.64, 23.02];

fn ratio(b: &FsBench, key: &str) -> f64 {
    b.ratios.get(key).copied().unwrap_or(f64::NAN)
}

/// IOPS of `fs` at a Table 3 point (NaN if it did not run).
fn iops(b: &FsBench, fs: &str, rw: &str, bs: u64) -> f64 {
    fs::table3_iops(b, fs, rw, bs).unwrap_or(f64::NAN)
}

/// `ours` over ext3 at `bs`, the mean of the random read and write ratios.
fn over_ext3(b: &FsBench, ours: &str, bs: u64) -> f64 {
    let r = |rw| iops(b, ours, rw, bs) / iops(b, "ext3", rw, bs);
    (r("randread") + r("randwrite")) / 2.0
}

fn skipped(md: String, why: String) -> Result<Section> {
    Ok(Section {
        md,
        json: json!({ "skipped": why }),
        passed: 0,
        total: 0,
    })
}

pub fn section(out: &Path, quick: bool) -> Result<Section> {
    let mut md = String::new();
    writeln!(
        md,
        "## File system: `hscm mount` (after Sun et al. 2020's fast mode and Baek & Park 2020's file-level tests)\n"
    )?;
    let missing: Vec<&str> = ["fio", "bindfs", "mkfs.ext3", "fusermount3", "git", "tar"]
        .into_iter()
        .filter(|t| !hscm_lab::installed(t))
        .collect();
    if !missing.is_empty() {
        writeln!(
            md,
            "Not run: {} not installed (`bash scripts/setup.sh` installs them).\n",
            missing.join(", ")
        )?;
        return skipped(md, format!("{} not installed", missing.join(", ")));
    }
    if !rustix::process::geteuid().is_root() {
        writeln!(
            md,
            "Not run: mounting the file systems compared and dropping the page cache need root.\n"
        )?;
        return skipped(md, "needs root".into());
    }
    let args = FsBenchArgs {
        seconds: if quick { 0.3 } else { 3.0 },
        size: if quick { 32 << 20 } else { 256 << 20 },
        memory_size: if quick { 256 << 20 } else { 1 << 30 },
        ..hscm_lab::flag_defaults()
    };
    note!("[fs] hscm mount against tmpfs, ext4, ext3 and a FUSE passthrough, fio");
    let b = fs::bench(&args)?;
    writeln!(md, "`hscm bench fs` mounts, in one run and on the same disk: hscm as `hscm mount` serves it (on-flush \
        mode, durable at fsync as buffered ext4 is, with FUSE passthrough: the kernel reads and writes each file's RAM \
        directly; the durable write runs in immediate mode), hscm on the classic FUSE path (`--no-passthrough`: reads \
        through the daemon, writes in the kernel's writeback cache), tmpfs (volatile: the bound for any file system in \
        RAM), ext4 and ext3 on loop files, and bindfs over tmpfs (a plain FUSE file system forwarding every request: \
        what classic FUSE itself costs). fio drives them, {:.1} s per point on a {} file. **Cold** means the page \
        cache is dropped before the point (`sync; echo 3 > /proc/sys/vm/drop_caches`, and fio's own invalidation): \
        ext3 and ext4 then read from their disk, hscm from its files' RAM, tmpfs from its pages, which are its \
        storage.\n",
        b.seconds, hscm_lab::units::human_bytes(b.size))?;

    writeln!(md, "### Seed 000, Table 3: IOPS over ext3, cold\n")?;
    writeln!(md, "The paper's fast mode is tmpfs on its hybrid memory; its ext3 sits on the disk of its AIoT \
        terminal. Each size's figure is the mean of the random read and random write ratios. tmpfs over ext3 is what any \
        file system in RAM reaches against this machine's disk; hscm without passthrough and bindfs over ext3 are what a \
        file system served through classic FUSE (every cold read a round trip to the daemon) reaches.\n")?;
    writeln!(
        md,
        "| size | paper | hscm reads | hscm writes | hscm | tmpfs (bound) | hscm without passthrough | bindfs (classic FUSE) |"
    )?;
    writeln!(md, "|---:|---:|---:|---:|---:|---:|---:|---:|")?;
    for (bs, paper) in SIZES.iter().zip(PAPER_TABLE3) {
        writeln!(
            md,
            "| {} KiB | {paper:.2}x | {:.2}x | {:.2}x | {:.2}x | {:.2}x | {:.2}x | {:.2}x |",
            bs / 1024,
            iops(&b, "hscm", "randread", *bs) / iops(&b, "ext3", "randread", *bs),
            iops(&b, "hscm", "randwrite", *bs) / iops(&b, "ext3", "randwrite", *bs),
            over_ext3(&b, "hscm", *bs),
            over_ext3(&b, "tmpfs", *bs),
            over_ext3(&b, "hscm-no-passthrough", *bs),
            over_ext3(&b, "fuse-passthrough", *bs),
        )?;
    }
    writeln!(
        md,
        "| mean | 30.07x | | | {:.2}x | {:.2}x | {:.2}x | {:.2}x |\n",
        fs::table3_average(&b),
        fs::table3_tmpfs_bound(&b),
        fs::table3_mean(&b, "hscm-no-passthrough", "ext3"),
        fs::table3_fuse_bound(&b)
    )?;
    let table3_vs_tmpfs = fs::table3_average(&b) / fs::table3_tmpfs_bound(&b);
    writeln!(
        md,
        "hscm/ext3 is {table3_vs_tmpfs:.2}x of tmpfs/ext3 in this run; the paper's fast mode reached 30.07x.\n"
    )?;
    plot_table3(&out.join("fs_table3.svg"), &b)?;
    writeln!(md, "![Table 3](fs_table3.svg)\n")?;

    writeln!(md, "### Seed 001's file-level figures\n")?;
    writeln!(md, "Baek & Park compare their durable RAM disk with an SSD RAID-0 under XFS; here the disk file system \
        is ext4 on this machine's virtual disk, both durable at fsync. Not like for like: their baseline is a real SSD \
        array, ours a virtio disk whose host caches it.\n")?;
    writeln!(
        md,
        "| workload | paper (DBR DHRD / SSD) | hscm / ext4 | hscm / tmpfs |"
    )?;
    writeln!(md, "|---|---:|---:|---:|")?;
    for (what, paper, key) in [
        (
            "66:34 random mix, 4 KiB, 4 jobs (Fig. 8b)",
            "15x",
            "randrw bs4096 4jobs",
        ),
        ("66:34 random mix, 4 KiB, 1 job", "", "randrw bs4096"),
        (
            "fileserver, 50 threads, MB/s (Fig. 9)",
            "1.54x",
            "fileserver",
        ),
        ("video read-modify-rewrite (Fig. 12)", "2.26x", "video"),
        ("sequential read, 1 MiB (Fig. 8a)", "", "read bs1048576"),
        ("sequential write, 1 MiB (Fig. 8a)", "", "write bs1048576"),
    ] {
        writeln!(
            md,
            "| {what} | {paper} | {:.2}x | {:.2}x |",
            ratio(&b, &format!("{key} hscm/ext4")),
            ratio(&b, &format!("{key} hscm/tmpfs"))
        )?;
    }
    writeln!(md)?;

    let cold_read = ratio(&b, "randread bs4096 hscm/tmpfs");
    let cold_read_fuse_bound =
        iops(&b, "fuse-passthrough", "randread", 4096) / iops(&b, "tmpfs", "randread", 4096);
    let seq_read = ratio(&b, "read bs1048576 hscm/tmpfs");
    let write = ratio(&b, "randwrite bs4096 hscm/tmpfs");
    writeln!(md, "Reads: with FUSE passthrough the kernel reads each file's RAM itself, so a cold read costs what a \
        tmpfs read costs: {cold_read:.3}x tmpfs at 4 KiB and {seq_read:.2}x at 1 MiB sequential. On the classic FUSE \
        path every cold read is a round trip to the daemon: bindfs, which only forwards to tmpfs, reaches {:.3}x tmpfs \
        and hscm without passthrough {:.3}x. Writes through write-only opens go into the file's RAM through the kernel \
        too. fio opens its file read-write, which hscm serves through the page cache and the daemon by default (so \
        that msync of a shared mapping reaches it and is durable on return): a round trip per write, {write:.3}x tmpfs \
        at 4 KiB (on-flush). With `--passthrough-read-write` (msync then not durable on return) the kernel writes RAM \
        itself: {:.2}x tmpfs.\n",
        cold_read_fuse_bound,
        ratio(&b, "randread bs4096 hscm/hscm-no-passthrough") * cold_read,
        write / ratio(&b, "randwrite bs4096 hscm/hscm-passthrough-read-write"),
    )?;
    writeln!(md, "### RAM used for the same data\n")?;
    writeln!(md, "A {} file written (each file system mounted for it alone), the page cache dropped, the file read once; the page cache and shmem \
        (`Cached`: tmpfs's pages, hscm's memfds) plus the bench process's own memory (hscm's daemon runs in it), after \
        less before the file system was mounted. A page held twice counts twice: ext4 and ext3 sit on loop files, \
        whose pages the host caches too. The target (at most 1.1x the data, plus the metadata) is set for 1 GiB of data; \
        the fixed part (the daemon's own memory, fio's pages) weighs more on a smaller file.\n",
        hscm_lab::units::human_bytes(b.memory.first().map_or(0, |m| m.data_bytes)))?;
    writeln!(
        md,
        "| file system | RAM used | / data | of it, hscm's files' RAM |"
    )?;
    writeln!(md, "|---|---:|---:|---:|")?;
    for m in &b.memory {
        writeln!(md, "| {} |", fs::memory_cells(m).join(" | "))?;
    }
    writeln!(md)?;
    let ram_per_data = b
        .memory
        .iter()
        .find(|m| m.fs == "hscm")
        .map_or(f64::NAN, fs::FsMemory::per_data);

    let durable = ratio(&b, "randwrite bs4096 durable hscm/ext4");
    writeln!(md, "Durable writes: hscm in immediate mode makes each 4 KiB write durable before it returns; ext4 \
        (on a loop file) pays an fsync after each. Both end in a cache flush of the same disk, so the least a durable \
        write costs here is a plain file on that disk with an fdatasync after each write: it reaches {:.2}x ext4, hscm \
        {durable:.2}x ext4 and {:.2}x the plain file. Where the plain file is under 1.5x ext4, the target is out of \
        reach of any file system on this disk.\n",
        fs::durable_write_disk_bound(&b),
        ratio(&b, "randwrite bs4096 durable hscm/disk-file"))?;

    writeln!(md, "<details><summary>Every point</summary>\n")?;
    writeln!(md, "| {} |", fs::ROW_HEADER.join(" | "))?;
    writeln!(md, "|---|---:|---|---:|---|---|---|---:|---:|---:|---:|")?;
    for r in &b.rows {
        writeln!(md, "| {} |", fs::row_cells(r).join(" | "))?;
    }
    writeln!(md, "\n</details>\n")?;

    let (work_checks, work) = crate::fs_work::subsection(&mut md, out, quick)?;

    // Each check's conditions name the bound the same run measured.
    let mut checks = vec![
        (
            format!(
                "cold; bindfs (classic FUSE) {:.2}x, tmpfs {:.2}x",
                fs::table3_fuse_bound(&b),
                fs::table3_tmpfs_bound(&b)
            ),
            Check::new(&targets::FS_TABLE3_VS_EXT3, fs::table3_average(&b)),
        ),
        (
            format!("cold; bindfs (classic FUSE) {cold_read_fuse_bound:.3}x"),
            Check::new(&targets::FS_RANDREAD_VS_TMPFS, cold_read),
        ),
        (
            "cold".to_string(),
            Check::new(&targets::FS_SEQREAD_VS_TMPFS, seq_read),
        ),
        (
            format!("tmpfs/ext3 {:.2}x", fs::table3_tmpfs_bound(&b)),
            Check::new(&targets::FS_TABLE3_VS_TMPFS_BOUND, table3_vs_tmpfs),
        ),
        (
            "psync, one job".to_string(),
            Check::new(&targets::FS_ONFLUSH_WRITE_VS_TMPFS, write),
        ),
        (
            format!(
                "tmpfs {:.2}x",
                b.memory
                    .iter()
                    .find(|m| m.fs == "tmpfs")
                    .map_or(f64::NAN, fs::FsMemory::per_data)
            ),
            Check::new(&targets::FS_RAM_PER_DATA, ram_per_data),
        ),
        (
            format!(
                "fsync=1; disk-file {:.2}x",
                fs::durable_write_disk_bound(&b)
            ),
            Check::new(&targets::FS_DURABLE_WRITE_VS_EXT4_FSYNC, durable),
        ),
    ];
    checks.extend(work_checks);
    let passed = targets_table(&mut md, "Targets", &checks);
    writeln!(md)?;
    Ok(Section {
        md,
        json: json!({"bench": b, "work": work, "checks": named_checks_json(&checks)}),
        passed,
        total: checks.len(),
    })
}

fn plot_table3(path: &Path, b: &FsBench) -> Result<()> {
    let over = |fs: &'static str| -> Vec<Option<f64>> {
        SIZES
            .iter()
            .map(|&bs| Some(over_ext3(b, fs, bs)).filter(|v| v.is_finite()))
            .collect()
    };
    let chart = plot::BarChart {
        title: "Table 3: IOPS over ext3, 1-16 KiB random reads and writes, cold (log scale)".into(),
        y_desc: "IOPS / ext3".into(),
        y_axis: plot::Axis::Log10,
        categories: SIZES
            .iter()
            .map(|bs| format!("{} KiB", bs / 1024))
            .collect(),
        series: vec![
            plot::Bars {
                name: "paper: fast mode (tmpfs on HSCM)".into(),
                color: plot::GREY,
                values: PAPER_TABLE3.iter().map(|&v| Some(v)).collect(),
            },
            plot::Bars {
                name: "hscm (on-flush)".into(),
                color: plot::BLUE,
                values: over("hscm"),
            },
            plot::Bars {
                name: "tmpfs (bound)".into(),
                color: plot::GREEN,
                values: over("tmpfs"),
            },
            plot::Bars {
                name: "FUSE passthrough".into(),
                color: plot::ORANGE,
                values: over("fuse-passthrough"),
            },
        ],
        baseline: Some(1.0),
        references: Vec::new(),
        size: (900, 420),
    };
    hscm_lab::scratch::write_output(path, chart.to_svg()?.as_bytes())
}

//! The file system section's real work: `hscm bench fs-work` (unpack, walk, search,
//! commit, build, remove a source tree; list large directories) on hscm and its
//! baselines, with each step's FUSE bound.

use std::fmt::Write as _;
use std::path::Path;

use anyhow::Result;

use crate::{plot, targets, Check};
use hscm_lab::fs::{FsWork, FsWorkArgs};

/// The steps held to 2x tmpfs in on-flush mode (the list; `build` has its
/// own bar, the listings theirs).
const STEPS: [&str; 9] = [
    "untar",
    "find",
    "du",
    "grep-cold",
    "grep-warm",
    "git-commit",
    "git-status",
    "build",
    "rm-rf",
];
const HELD_TO_2X: [&str; 7] = [
    "untar",
    "find",
    "du",
    "grep-warm",
    "git-commit",
    "git-status",
    "rm-rf",
];

fn seconds(w: &FsWork, fs: &str, step: &str) -> f64 {
    w.rows
        .iter()
        .find(|r| r.fs == fs && r.workload == step)
        .map_or(f64::NAN, |r| r.seconds)
}

fn ratio(w: &FsWork, key: &str) -> f64 {
    w.ratios.get(key).copied().unwrap_or(f64::NAN)
}

/// The worst of `steps`' ratios `fs`/`base`, and which step it was.
fn worst(w: &FsWork, fs: &str, base: &str, steps: &[&str]) -> (f64, String) {
    steps
        .iter()
        .map(|s| (ratio(w, &format!("{s} {fs}/{base}")), s.to_string()))
        .fold((f64::NAN, String::new()), |a, b| {
            if a.0.is_nan() || b.0 > a.0 {
                b
            } else {
                a
            }
        })
}

/// Runs the bench and writes its part of the section; returns the checks and the
/// bench's output (for the section's JSON).
pub fn subsection(
    md: &mut String,
    out: &Path,
    quick: bool,
) -> Result<(Vec<(String, Check)>, FsWork)> {
    let args = FsWorkArgs {
        files: if quick { 2_000 } else { 12_000 },
        c_units: if quick { 24 } else { 160 },
        ls_entries: if quick {
            vec![500, 2_000]
        } else {
            vec![2_000, 8_000, 32_000]
        },
        ..hscm_lab::flag_defaults()
    };
    note!("[fs] real work: a source tree unpacked, walked, searched, committed, built and removed");
    let w = hscm_lab::fs::work_bench(&args)?;
    writeln!(
        md,
        "### Real work: a source tree unpacked, walked, searched, committed, built and removed\n"
    )?;
    writeln!(md, "`hscm bench fs-work` generates a tree of {} files ({}) in {} directories from a seed, with a C \
        program of {} translation units, packs it with tar, and on each file system in turn: unpacks it (then \
        `sync -f`), walks it (`find -printf '%s %m'`, `du -s`), searches it (`grep -r`, the page cache dropped, then \
        again), commits it to git (`git init && git add -A && git commit`), asks `git status` with the page cache \
        dropped, builds the program (`make -j`), removes it (`rm -rf`), and lists directories of many empty files \
        with `ls -l` (the page cache dropped first). Seconds per step; hscm in on-flush mode is held against tmpfs, \
        hscm in immediate mode against ext4 mounted `sync,dirsync` (every operation durable when it returns: the same \
        promise). The **FUSE bound** of a step is tmpfs's time plus one round trip (measured on the same mount: a \
        forced getattr, {:.1} µs) per request the step sent the daemon.\n",
        w.tree.files, hscm_lab::units::human_bytes(w.tree.bytes), w.tree.directories, args.c_units,
        w.round_trip_us.get("hscm").copied().unwrap_or(f64::NAN))?;
    let systems = hscm_lab::fs::WORK_FS_NAMES;
    writeln!(
        md,
        "| step | {} | hscm / tmpfs | hscm / its bound | immediate / ext4-sync |",
        systems.join(" | ")
    )?;
    writeln!(md, "|---|{}---:|---:|---:|", "---:|".repeat(systems.len()))?;
    let mut steps: Vec<String> = STEPS.iter().map(|s| s.to_string()).collect();
    steps.extend(args.ls_entries.iter().map(|n| format!("ls-l-{n}")));
    for step in &steps {
        let cells: Vec<String> = systems
            .iter()
            .map(|f| format!("{:.3}", seconds(&w, f, step)))
            .collect();
        writeln!(
            md,
            "| {step} | {} | {:.2}x | {:.2}x | {:.2}x |",
            cells.join(" | "),
            ratio(&w, &format!("{step} hscm/tmpfs")),
            ratio(&w, &format!("{step} hscm/bound")),
            ratio(&w, &format!("{step} hscm-immediate/ext4-sync")),
        )?;
    }
    writeln!(md)?;
    plot_steps(&out.join("fs_work.svg"), &w, &steps)?;
    writeln!(md, "![Real work over tmpfs](fs_work.svg)\n")?;
    writeln!(md, "hscm's requests travel {}; hscm-no-io-uring is the same on-flush mount by /dev/fuse reads and \
        writes, in the same run (one round trip {:.1} µs by the rings, {:.1} µs by /dev/fuse).\n",
        if w.io_uring { "by FUSE over io_uring (per-CPU rings shared with the kernel; the bench turns the kernel's \
            switch on for its run)" } else { "by /dev/fuse (this kernel offered no FUSE over io_uring)" },
        w.round_trip_us.get("hscm").copied().unwrap_or(f64::NAN),
        w.round_trip_us.get("hscm-no-io-uring").copied().unwrap_or(f64::NAN))?;
    writeln!(md, "From a thread pinned to one CPU, where request and reply stay on that CPU: {:.1} µs by the rings, \
        {:.1} µs by /dev/fuse. Unpinned, the scheduler wakes the waiting program on the other, idle CPU after each \
        reply, which the rings cannot save.\n",
        w.round_trip_pinned_us.get("hscm").copied().unwrap_or(f64::NAN),
        w.round_trip_pinned_us.get("hscm-no-io-uring").copied().unwrap_or(f64::NAN))?;
    writeln!(md, "Every request a step sends the daemon costs a round trip the kernel file systems do not pay: \
        where hscm is near its bound, what is left is the number of requests (an open per file read, two extended \
        attribute lookups per entry `ls -l` shows, three setattrs per file `tar` unpacks) and the round trip's cost \
        on this machine (docs/fs.md).\n")?;

    let (onflush, onflush_step) = worst(&w, "hscm", "tmpfs", &HELD_TO_2X);
    let (immediate, immediate_step) = worst(&w, "hscm-immediate", "ext4-sync", &HELD_TO_2X);
    let largest = args.ls_entries.iter().max().copied().unwrap_or(0);
    let ls = format!("ls-l-{largest}");
    let checks = vec![
        (
            format!(
                "worst: {onflush_step}; its FUSE bound {:.2}x tmpfs",
                ratio(&w, &format!("{onflush_step} hscm/bound")) * onflush
            ),
            Check::new(&targets::FS_WORK_ONFLUSH_VS_TMPFS, onflush),
        ),
        (
            "make -j".to_string(),
            Check::new(
                &targets::FS_WORK_BUILD_VS_TMPFS,
                ratio(&w, "build hscm/tmpfs"),
            ),
        ),
        (
            format!(
                "{largest} entries; its FUSE bound {:.2}x tmpfs",
                ratio(&w, &format!("{ls} hscm/bound")) * ratio(&w, &format!("{ls} hscm/tmpfs"))
            ),
            Check::new(
                &targets::FS_WORK_LS_VS_TMPFS,
                ratio(&w, &format!("{ls} hscm/tmpfs")),
            ),
        ),
        (
            format!("worst: {immediate_step}"),
            Check::new(&targets::FS_WORK_IMMEDIATE_VS_EXT4_SYNC, immediate),
        ),
    ];
    Ok((checks, w))
}

fn plot_steps(path: &Path, w: &FsWork, steps: &[String]) -> Result<()> {
    let over = |key: &dyn Fn(&str) -> String| -> Vec<Option<f64>> {
        steps
            .iter()
            .map(|s| Some(ratio(w, &key(s))).filter(|v| v.is_finite()))
            .collect()
    };
    let bound: Vec<Option<f64>> = steps
        .iter()
        .map(|s| {
            let b = w
                .rows
                .iter()
                .find(|r| r.fs == "hscm" && &r.workload == s)?
                .bound_seconds?;
            Some(b / seconds(w, "tmpfs", s)).filter(|v| v.is_finite())
        })
        .collect();
    let chart = plot::BarChart {
        title: "Real work: seconds over tmpfs (log scale)".into(),
        y_desc: "seconds / tmpfs".into(),
        y_axis: plot::Axis::Log10,
        categories: steps.to_vec(),
        series: vec![
            plot::Bars {
                name: "hscm (on-flush)".into(),
                color: plot::BLUE,
                values: over(&|s| format!("{s} hscm/tmpfs")),
            },
            plot::Bars {
                name: "FUSE bound (tmpfs + a round trip per request)".into(),
                color: plot::GREY,
                values: bound,
            },
            plot::Bars {
                name: "ext4".into(),
                color: plot::GREEN,
                values: over(&|s| format!("{s} ext4/tmpfs")),
            },
            plot::Bars {
                name: "hscm by /dev/fuse (no io_uring)".into(),
                color: plot::PURPLE,
                values: over(&|s| format!("{s} hscm-no-io-uring/tmpfs")),
            },
            plot::Bars {
                name: "hscm without passthrough".into(),
                color: plot::ORANGE,
                values: over(&|s| format!("{s} hscm-no-passthrough/tmpfs")),
            },
        ],
        baseline: Some(1.0),
        references: Vec::new(),
        size: (1000, 440),
    };
    hscm_lab::scratch::write_output(path, chart.to_svg()?.as_bytes())
}

//! `hscm bench fs-work`: the work people bring to a RAM file system, timed on hscm
//! and its baselines in one run. A generated source tree (`tree.rs`) is unpacked,
//! walked, searched, committed to git, built and removed; `ls -l` lists directories
//! of 2,000 to 32,000 entries. For hscm's mounts the bench also counts the requests
//! that reached the daemon and measures one round trip, so each step shows the FUSE
//! bound: tmpfs's time plus one round trip per request.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

use anyhow::{bail, Context, Result};
use serde::Serialize;

use super::mounts::{self, drop_caches, Mounted, Under};
use super::tree::{self, TreeShape, TreeSize};

/// The work people bring to a RAM file system, on hscm and its baselines in one
/// run: unpack a generated source tree (then syncfs), walk it (`find`, `du`),
/// `grep -r` it cold and warm, `git add -A && git commit`, `git status` cold,
/// build its C program with `make -j`, `rm -rf` it, and `ls -l` directories of
/// 2,000, 8,000 and 32,000 entries. Runs on tmpfs (the bound), ext4 and ext4
/// mounted `sync,dirsync` (immediate mode's promise) on loop files, and hscm in
/// on-flush mode, immediate mode and without passthrough. For hscm it counts the
/// requests each step sent the daemon and times one round trip: the FUSE bound of
/// a step is tmpfs's time plus one round trip per request. Needs root, tar, git,
/// make, a C compiler and e2fsprogs.
///
/// Example: hscm bench fs-work --fs tmpfs,hscm --json
#[derive(clap::Args, Clone, Debug)]
pub struct FsWorkArgs {
    /// Text files in the tree (besides the C program).
    #[arg(long, default_value_t = 12_000)]
    pub files: u64,
    /// Translation units of the tree's C program.
    #[arg(long, default_value_t = 160)]
    pub c_units: u64,
    /// The tree's seed: the same seed, the same bytes.
    #[arg(long, default_value_t = 51)]
    pub seed: u64,
    /// Directory sizes `ls -l` lists (comma-separated entry counts).
    #[arg(long, value_delimiter = ',', default_values_t = [2_000u64, 8_000, 32_000])]
    pub ls_entries: Vec<u64>,
    /// The file systems, in order (comma-separated): tmpfs, ext4, ext4-sync, hscm
    /// (on-flush, by FUSE over io_uring where the kernel has it: the bench turns its
    /// switch on for the run and back), hscm-no-io-uring (the same by /dev/fuse),
    /// hscm-immediate, hscm-no-passthrough.
    #[arg(long, value_delimiter = ',', default_values_t = FS_NAMES.map(String::from))]
    pub fs: Vec<String>,
    /// Directory for the volumes, the loop files and the tree's tar file (default:
    /// the system temporary directory). Removed afterwards.
    #[arg(long)]
    pub dir: Option<PathBuf>,
    /// Print JSON (a stable contract) instead of text.
    #[arg(long)]
    pub json: bool,
}

/// The file systems it can run, in the order it runs them by default.
pub const FS_NAMES: [&str; 7] = [
    "tmpfs",
    "ext4",
    "ext4-sync",
    "hscm",
    "hscm-no-io-uring",
    "hscm-immediate",
    "hscm-no-passthrough",
];

/// The rows compared with tmpfs (the rest: hscm-immediate with ext4-sync).
fn over_tmpfs(fs: &str) -> bool {
    matches!(
        fs,
        "hscm" | "hscm-no-io-uring" | "hscm-no-passthrough" | "ext4"
    )
}

/// The hscm mounts that carry a FUSE bound (tmpfs plus a round trip per request).
fn bounded(fs: &str) -> bool {
    matches!(fs, "hscm" | "hscm-no-io-uring" | "hscm-no-passthrough")
}

fn under_of(name: &str) -> Result<Under> {
    Ok(match name {
        "tmpfs" => Under::Tmpfs,
        "ext4" => Under::Ext4,
        "ext4-sync" => Under::Ext4Sync,
        "hscm" => Under::HscmOnFlush,
        "hscm-no-io-uring" => Under::HscmNoIoUring,
        "hscm-immediate" => Under::HscmImmediate,
        "hscm-no-passthrough" => Under::HscmClassic,
        other => bail!(
            "--fs: no file system {other:?} (one of {})",
            FS_NAMES.join(", ")
        ),
    })
}

/// One step on one file system. Field names are the `--json` contract.
#[derive(Debug, Clone, Serialize)]
pub struct WorkRow {
    /// untar, find, du, grep-cold, grep-warm, git-commit, git-status, build, rm-rf,
    /// ls-l-N (a directory of N entries).
    pub workload: String,
    /// tmpfs, ext4, ext4-sync, hscm, hscm-no-io-uring, hscm-immediate,
    /// hscm-no-passthrough.
    pub fs: String,
    pub seconds: f64,
    /// hscm: requests the step sent the daemon (releases included, which the
    /// kernel sends without waiting).
    pub requests: Option<u64>,
    /// hscm in on-flush mode and without passthrough: tmpfs's seconds for the step
    /// plus one round trip per request, where tmpfs ran.
    pub bound_seconds: Option<f64>,
}

#[derive(Debug, Clone, Serialize)]
pub struct FsWork {
    pub rows: Vec<WorkRow>,
    /// "WORKLOAD FS/BASE" → seconds over seconds: hscm, hscm-no-passthrough and
    /// ext4 over tmpfs, hscm-immediate over ext4-sync, hscm over its bound.
    pub ratios: BTreeMap<String, f64>,
    /// One FUSE round trip on each hscm mount (a forced getattr), microseconds.
    pub round_trip_us: BTreeMap<String, f64>,
    /// The same from a thread pinned to CPU 0: the request and its reply stay on
    /// one CPU (by the rings, that CPU's queue thread serves it), the transport's
    /// own cost apart from where the scheduler wakes the caller.
    pub round_trip_pinned_us: BTreeMap<String, f64>,
    pub tree: TreeSize,
    /// Whether the hscm mounts (all but hscm-no-io-uring) were served by FUSE over
    /// io_uring: false where the kernel has no such transport.
    pub io_uring: bool,
}

/// Runs `cmd` in silence and times it; `ok_codes`: exit codes that count as done
/// (grep's 1: nothing matched).
fn timed(cmd: &mut Command, ok_codes: &[i32]) -> Result<f64> {
    let what = format!("{cmd:?}");
    let started = Instant::now();
    let out = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .output()
        .with_context(|| format!("running {what}"))?;
    let seconds = started.elapsed().as_secs_f64();
    let code = out.status.code().unwrap_or(-1);
    if !out.status.success() && !ok_codes.contains(&code) {
        bail!(
            "{what} failed ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(seconds)
}

fn git(tree: &Path, home: &Path) -> Command {
    let mut c = Command::new("git");
    c.current_dir(tree)
        .env("HOME", home)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .args([
            "-c",
            "user.name=hscm",
            "-c",
            "user.email=bench@hscm.invalid",
        ])
        .args(["-c", "init.defaultBranch=main", "-c", "gc.auto=0"]);
    c
}

/// The daemon's requests so far (0 for kernel file systems).
fn requests(m: &Mounted) -> Option<u64> {
    let stats = m.stats.as_ref()?;
    Some(stats.snapshot().iter().map(|o| o.count + o.errors).sum())
}

/// One FUSE round trip: statx with AT_STATX_FORCE_SYNC makes the kernel ask the
/// daemon each time.
fn round_trip_us(at: &Path) -> Result<f64> {
    use rustix::fs::{statx, AtFlags, StatxFlags, CWD};
    const N: u32 = 20_000;
    let started = Instant::now();
    for _ in 0..N {
        statx(CWD, at, AtFlags::STATX_FORCE_SYNC, StatxFlags::BASIC_STATS)
            .with_context(|| format!("statx {}", at.display()))?;
    }
    Ok(started.elapsed().as_secs_f64() * 1e6 / f64::from(N))
}

/// One FUSE round trip on a mount, from an unpinned thread and from one pinned to
/// CPU 0, microseconds.
struct RoundTrip {
    unpinned_us: f64,
    pinned_us: f64,
}

/// [`round_trip_us`] from a thread pinned to CPU 0.
fn round_trip_pinned_us(at: &Path) -> Result<f64> {
    std::thread::scope(|s| {
        s.spawn(|| {
            let mut cpus = rustix::process::CpuSet::new();
            cpus.set(0);
            rustix::process::sched_setaffinity(None, &cpus).context("pinning a thread to CPU 0")?;
            round_trip_us(at)
        })
        .join()
        .map_err(|_| anyhow::anyhow!("the pinned round trip's thread panicked"))?
    })
}

/// Makes `n` empty files in a new directory `dir`.
fn fill_directory(dir: &Path, n: u64) -> Result<()> {
    std::fs::create_dir(dir).with_context(|| format!("creating {}", dir.display()))?;
    for i in 0..n {
        std::fs::File::create(dir.join(format!("entry-{i:06}")))
            .with_context(|| format!("creating entry {i} in {}", dir.display()))?;
    }
    Ok(())
}

struct Step<'a> {
    workload: String,
    /// Drop the page cache first (and read the tar file back, so that only the
    /// file system under test is timed).
    cold: bool,
    run: Box<dyn Fn() -> Result<f64> + 'a>,
}

fn steps<'a>(m: &'a Mounted, tar: &'a Path, home: &'a Path, with_build: bool) -> Vec<Step<'a>> {
    let root = m.at.clone();
    let tree = m.at.join("tree");
    let step = |workload: &str, cold: bool, run: Box<dyn Fn() -> Result<f64> + 'a>| Step {
        workload: workload.into(),
        cold,
        run,
    };
    let mut out = vec![
        step(
            "untar",
            true,
            Box::new({
                let root = root.clone();
                move || {
                    let t = timed(
                        Command::new("tar").arg("xf").arg(tar).arg("-C").arg(&root),
                        &[],
                    )?;
                    Ok(t + timed(Command::new("sync").arg("-f").arg(&root), &[])?)
                }
            }),
        ),
        step(
            "find",
            true,
            Box::new({
                let tree = tree.clone();
                move || {
                    timed(
                        Command::new("find")
                            .arg(&tree)
                            .args(["-printf", "%s %m\\n"]),
                        &[],
                    )
                }
            }),
        ),
        step(
            "du",
            false,
            Box::new({
                let tree = tree.clone();
                move || timed(Command::new("du").arg("-s").arg(&tree), &[])
            }),
        ),
    ];
    for (name, cold) in [("grep-cold", true), ("grep-warm", false)] {
        let tree = tree.clone();
        out.push(step(
            name,
            cold,
            Box::new(move || {
                timed(
                    Command::new("grep")
                        .args(["-r", "hscm-no-such-word"])
                        .arg(&tree),
                    &[1],
                )
            }),
        ));
    }
    out.push(step(
        "git-commit",
        false,
        Box::new({
            let tree = tree.clone();
            move || {
                let mut t = timed(git(&tree, home).args(["init", "-q"]), &[])?;
                t += timed(git(&tree, home).args(["add", "-A"]), &[])?;
                Ok(t + timed(git(&tree, home).args(["commit", "-q", "-m", "tree"]), &[])?)
            }
        }),
    ));
    out.push(step(
        "git-status",
        true,
        Box::new({
            let tree = tree.clone();
            move || timed(git(&tree, home).args(["status", "--porcelain"]), &[])
        }),
    ));
    if with_build {
        let jobs = std::thread::available_parallelism().map_or(2, |n| n.get());
        out.push(step(
            "build",
            false,
            Box::new({
                let tree = tree.clone();
                move || {
                    timed(
                        Command::new("make")
                            .arg("-s")
                            .arg(format!("-j{jobs}"))
                            .arg("-C")
                            .arg(tree.join("build")),
                        &[],
                    )
                }
            }),
        ));
    }
    out.push(step(
        "rm-rf",
        false,
        Box::new(move || timed(Command::new("rm").arg("-rf").arg(&tree), &[])),
    ));
    out
}

/// Runs every step on one file system; the rows, without bounds.
fn run_one(
    dir: &Path,
    under: Under,
    name: &str,
    a: &FsWorkArgs,
    tar: &Path,
    room: u64,
    with_build: bool,
) -> Result<(Vec<WorkRow>, Option<RoundTrip>, bool)> {
    let m = mounts::mount(dir, under, room)?;
    let home = dir.join("home");
    std::fs::create_dir_all(&home)?;
    let mut rows = Vec::new();
    let mut row = |workload: String, seconds: f64, requests: Option<u64>| {
        note!("[fs-work] {name}: {workload} {seconds:.3} s");
        rows.push(WorkRow {
            workload,
            fs: name.into(),
            seconds,
            requests,
            bound_seconds: None,
        });
    };
    for s in steps(&m, tar, &home, with_build) {
        if s.cold {
            drop_caches()?;
            // The tar file is read from the page cache, not the disk.
            std::io::copy(&mut std::fs::File::open(tar)?, &mut std::io::sink())?;
        }
        let before = requests(&m);
        let seconds = (s.run)()?;
        let sent = requests(&m).zip(before).map(|(a, b)| a - b);
        row(s.workload, seconds, sent);
    }
    for &n in &a.ls_entries {
        let listed = m.at.join(format!("ls-{n}"));
        fill_directory(&listed, n)?;
        drop_caches()?;
        let before = requests(&m);
        let seconds = timed(Command::new("ls").arg("-l").arg(&listed), &[])?;
        let sent = requests(&m).zip(before).map(|(a, b)| a - b);
        row(format!("ls-l-{n}"), seconds, sent);
        timed(Command::new("rm").arg("-rf").arg(&listed), &[])?;
    }
    let rtt = match m.stats {
        Some(_) => Some(RoundTrip {
            unpinned_us: round_trip_us(&m.at)?,
            pinned_us: round_trip_pinned_us(&m.at)?,
        }),
        None => None,
    };
    let by_rings = m.rings.as_ref().is_some_and(|r| r.active());
    Ok((rows, rtt, by_rings))
}

pub fn bench(a: &FsWorkArgs) -> Result<FsWork> {
    if !rustix::process::geteuid().is_root() {
        bail!("hscm bench fs-work mounts tmpfs, ext4 and FUSE file systems and drops the page cache: run it as root");
    }
    let unders: Vec<(Under, String)> =
        a.fs.iter()
            .map(|n| Ok((under_of(n)?, n.clone())))
            .collect::<Result<_>>()?;
    let missing: Vec<&str> = ["tar", "git", "find", "du", "grep", "mkfs.ext4"]
        .into_iter()
        .filter(|t| !crate::installed(t))
        .collect();
    if !missing.is_empty() {
        bail!(
            "hscm bench fs-work needs {} (bash scripts/setup.sh installs them)",
            missing.join(", ")
        );
    }
    let with_build = crate::installed("make") && crate::installed("cc");
    if !with_build {
        note!("[fs-work] no make or cc: the build step is left out");
    }
    let scratch = crate::scratch::Scratch::new("fs-work", a.dir.as_deref())?;
    let dir = scratch.path();
    note!(
        "[fs-work] generating the tree ({} files and a C program of {} units, seed {})",
        a.files,
        a.c_units,
        a.seed
    );
    let generated = dir.join("generated").join("tree");
    let size = tree::generate(
        &generated,
        TreeShape {
            files: a.files,
            c_units: a.c_units,
            seed: a.seed,
        },
    )?;
    let tar = dir.join("tree.tar");
    tree::pack(&generated, &tar)?;
    std::fs::remove_dir_all(dir.join("generated"))?;
    // Room for the tree, git's copy of it, the build and the listings, twice over.
    let room =
        (size.bytes * 2 + (a.ls_entries.iter().sum::<u64>() + size.files) * 8192).max(256 << 20);
    let _switch = RingSwitch::on_for_the_run(&unders)?;
    let mut rows = Vec::new();
    let (mut round_trip, mut pinned) = (BTreeMap::new(), BTreeMap::new());
    let mut io_uring = false;
    for (under, name) in &unders {
        note!("[fs-work] {name}");
        let own = dir.join(format!("fs-{name}"));
        std::fs::create_dir_all(&own)?;
        let (mut got, rtt, by_rings) = run_one(&own, *under, name, a, &tar, room, with_build)?;
        io_uring |= by_rings;
        if let Some(rtt) = rtt {
            round_trip.insert(name.clone(), rtt.unpinned_us);
            pinned.insert(name.clone(), rtt.pinned_us);
        }
        rows.append(&mut got);
        std::fs::remove_dir_all(&own).ok();
    }
    let mut w = bound_and_ratios(rows, round_trip, size)?;
    w.io_uring = io_uring;
    w.round_trip_pinned_us = pinned;
    Ok(w)
}

/// The kernel's switch for FUSE over io_uring, turned on for the bench's run where
/// it was off (and an hscm mount other than hscm-no-io-uring runs), and back off
/// when the run ends, so that the bench leaves the machine as it found it.
struct RingSwitch {
    turned_on: bool,
}

impl RingSwitch {
    fn on_for_the_run(unders: &[(Under, String)]) -> Result<RingSwitch> {
        let wants = unders.iter().any(|(u, _)| {
            matches!(
                u,
                Under::HscmOnFlush | Under::HscmImmediate | Under::HscmClassic
            )
        });
        if !wants || hscm_fuse::uring::kernel_switch() != Some(false) {
            return Ok(RingSwitch { turned_on: false });
        }
        let switch = std::path::Path::new(hscm_fuse::uring::KERNEL_SWITCH);
        // Recorded before it is turned on, so that a signal at any moment puts it back.
        crate::scratch::restore_on_signal(switch, "N");
        let turned_on = hscm_fuse::uring::enable_in_kernel();
        if !matches!(turned_on, Ok(true)) {
            crate::scratch::restored(switch);
        }
        let turned_on = turned_on?;
        if turned_on {
            note!(
                "[fs-work] turned on {} for this run (FUSE over io_uring)",
                hscm_fuse::uring::KERNEL_SWITCH
            );
        }
        Ok(RingSwitch { turned_on })
    }
}

impl Drop for RingSwitch {
    fn drop(&mut self) {
        if self.turned_on {
            if let Err(e) = std::fs::write(hscm_fuse::uring::KERNEL_SWITCH, "N") {
                note!(
                    "[fs-work] turning {} back off: {e}",
                    hscm_fuse::uring::KERNEL_SWITCH
                );
            }
            crate::scratch::restored(std::path::Path::new(hscm_fuse::uring::KERNEL_SWITCH));
        }
    }
}

fn bound_and_ratios(
    mut rows: Vec<WorkRow>,
    round_trip_us: BTreeMap<String, f64>,
    tree: TreeSize,
) -> Result<FsWork> {
    let seconds_of = |rows: &[WorkRow], fs: &str, w: &str| {
        rows.iter()
            .find(|r| r.fs == fs && r.workload == w)
            .map(|r| r.seconds)
    };
    let tmpfs: BTreeMap<String, f64> = rows
        .iter()
        .filter(|r| r.fs == "tmpfs")
        .map(|r| (r.workload.clone(), r.seconds))
        .collect();
    for r in rows.iter_mut().filter(|r| bounded(&r.fs)) {
        if let (Some(base), Some(n), Some(rtt)) =
            (tmpfs.get(&r.workload), r.requests, round_trip_us.get(&r.fs))
        {
            r.bound_seconds = Some(base + n as f64 * rtt / 1e6);
        }
    }
    let mut ratios = BTreeMap::new();
    for r in &rows {
        let base = match r.fs.as_str() {
            f if over_tmpfs(f) => "tmpfs",
            "hscm-immediate" => "ext4-sync",
            _ => continue,
        };
        if let Some(b) = seconds_of(&rows, base, &r.workload) {
            ratios.insert(format!("{} {}/{base}", r.workload, r.fs), r.seconds / b);
        }
        if let Some(bound) = r.bound_seconds {
            ratios.insert(format!("{} {}/bound", r.workload, r.fs), r.seconds / bound);
        }
    }
    Ok(FsWork {
        rows,
        ratios,
        round_trip_us,
        round_trip_pinned_us: BTreeMap::new(),
        tree,
        io_uring: false,
    })
}

pub fn print(w: &FsWork) -> Result<()> {
    outln!(
        "Real work: a generated tree of {} files ({}) in {} directories; seconds per step",
        w.tree.files,
        crate::units::human_bytes(w.tree.bytes),
        w.tree.directories
    )?;
    let systems: Vec<&str> = FS_NAMES
        .into_iter()
        .filter(|f| w.rows.iter().any(|r| r.fs == *f))
        .collect();
    let mut workloads: Vec<&str> = Vec::new();
    for r in &w.rows {
        if !workloads.contains(&r.workload.as_str()) {
            workloads.push(&r.workload);
        }
    }
    let mut head = format!("{:<12}", "step");
    for f in &systems {
        head.push_str(&format!(" {f:>19}"));
    }
    outln!("{head}")?;
    for wl in &workloads {
        let mut line = format!("{wl:<12}");
        for f in &systems {
            let cell = w
                .rows
                .iter()
                .find(|r| r.fs == *f && r.workload == *wl)
                .map_or(String::from("-"), |r| {
                    let ratio = match *f {
                        f if over_tmpfs(f) => w.ratios.get(&format!("{wl} {f}/tmpfs")),
                        "hscm-immediate" => w.ratios.get(&format!("{wl} {f}/ext4-sync")),
                        _ => None,
                    };
                    match ratio {
                        Some(x) => format!("{:.3} ({x:.1}x)", r.seconds),
                        None => format!("{:.3}", r.seconds),
                    }
                });
            line.push_str(&format!(" {cell:>19}"));
        }
        outln!("{line}")?;
    }
    outln!("(hscm, hscm-no-io-uring, hscm-no-passthrough, ext4: over tmpfs; hscm-immediate: over ext4-sync, the same promise)")?;
    outln!(
        "hscm's requests {}",
        if w.io_uring {
            "by FUSE over io_uring (hscm-no-io-uring: the same mount by /dev/fuse)"
        } else {
            "by /dev/fuse (this kernel offered no FUSE over io_uring)"
        }
    )?;
    for (fs, rtt) in &w.round_trip_us {
        let pinned = w.round_trip_pinned_us.get(fs).copied().unwrap_or(f64::NAN);
        outln!("{fs}: one round trip {rtt:.1} µs ({pinned:.1} µs from a thread pinned to one CPU); the FUSE bound of a step is tmpfs's time plus one round trip per request:")?;
        for r in w.rows.iter().filter(|r| &r.fs == fs) {
            if let (Some(n), Some(b)) = (r.requests, r.bound_seconds) {
                outln!(
                    "  {:<12} {n:>7} requests, bound {b:.3} s, measured {:.2}x the bound",
                    r.workload,
                    r.seconds / b
                )?;
            }
        }
    }
    Ok(())
}

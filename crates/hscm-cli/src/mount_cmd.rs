//! `hscm mount VOLUME MOUNTPOINT` and `hscm umount MOUNTPOINT`: the volume's file
//! system through FUSE (docs/fs.md).

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use clap::builder::TypedValueParser as _;
use hscm_fs::{FileSystem, MountOptions};
use hscm_volume::{Durability, OpenOptions, Volume};

#[derive(clap::Args, Debug)]
pub struct MountArgs {
    /// The volume, made with `hscm volume create PATH --size 4G --fs`.
    pub volume: PathBuf,
    /// An empty directory to mount it on.
    pub mountpoint: PathBuf,
    /// `immediate`: every completed write, create, rename… survives a power cut;
    /// `on-flush`: POSIX fsync semantics (an fsync commits everything before it).
    /// Default: the volume's own.
    #[arg(long)]
    pub durability: Option<Durability>,
    /// Stay in the foreground (logs to standard error) instead of serving from a
    /// background process.
    #[arg(long)]
    pub foreground: bool,
    /// Let other users than the one who mounted use it (FUSE's allow_other; for
    /// non-root mounts, /etc/fuse.conf must say user_allow_other).
    #[arg(long)]
    pub allow_other: bool,
    /// In on-flush mode, send every write(2) to the file system before it returns
    /// instead of letting the kernel's writeback cache hold it until fsync or
    /// writeback: slower, but a full file system answers the write itself with ENOSPC
    /// (with the cache, a later fsync or close does). Immediate mode never caches
    /// writes.
    #[arg(long)]
    pub no_writeback_cache: bool,
    /// Threads serving requests.
    #[arg(long, default_value_t = 4, value_parser = clap::value_parser!(u16).range(1..=64).map(usize::from))]
    pub threads: usize,
}

/// What the mounting process prints once the file system serves; the parent of a
/// background mount waits for it.
const READY: &str = "mounted";

pub fn mount(a: &MountArgs) -> Result<()> {
    if !a.mountpoint.is_dir() {
        bail!("{} is not a directory", a.mountpoint.display());
    }
    if !a.foreground {
        return mount_in_background(a);
    }
    // The file system decides when the device syncs; the volume only writes through.
    let volume = Volume::open(
        &a.volume,
        &OpenOptions {
            durability: Some(Durability::OnFlush),
            ..OpenOptions::default()
        },
    )
    .with_context(|| format!("opening {}", a.volume.display()))?;
    let durability = match a.durability.unwrap_or(volume.header().durability) {
        Durability::Immediate => hscm_fs::Durability::Immediate,
        Durability::OnFlush => hscm_fs::Durability::OnFlush,
    };
    let volume = Arc::new(volume);
    let fs = FileSystem::mount(volume.clone(), MountOptions { durability })
        .with_context(|| format!("mounting the file system of {}", a.volume.display()))?;
    let fs = Arc::new(fs);
    let source = std::fs::canonicalize(&a.volume).unwrap_or_else(|_| a.volume.clone());
    let config = hscm_fuse::session_config(
        &format!("hscm:{}", source.display()),
        a.threads,
        a.allow_other,
    );
    let mut served = hscm_fuse::Fuse::new(fs.clone());
    if a.no_writeback_cache {
        served = served.without_writeback_cache();
    }
    let writeback_cache = served.writeback_cache();
    let mut session = hscm_fuse::mount(served, &a.mountpoint, &config)
        .with_context(|| format!("mounting on {}", a.mountpoint.display()))?;
    // SIGINT and SIGTERM unmount; the session then ends as for `hscm umount`.
    let mut unmounter = session.unmount_callable();
    let mut signals = signal_hook::iterator::Signals::new([
        signal_hook::consts::SIGINT,
        signal_hook::consts::SIGTERM,
    ])
    .context("installing signal handlers")?;
    let mountpoint = a.mountpoint.clone();
    std::thread::spawn(move || {
        if signals.forever().next().is_some() {
            if let Err(e) = unmounter.unmount() {
                tracing::warn!("unmounting {}: {e}", mountpoint.display());
            }
        }
    });
    note!(
        "serving {} ({}) at {} with {} threads; `hscm umount {}` stops it",
        a.volume.display(),
        match (durability, writeback_cache) {
            (hscm_fs::Durability::Immediate, _) => "immediate",
            (hscm_fs::Durability::OnFlush, true) => "on-flush, kernel writeback cache",
            (hscm_fs::Durability::OnFlush, false) => "on-flush, writes through",
        },
        a.mountpoint.display(),
        a.threads,
        a.mountpoint.display()
    );
    outln!(
        "{READY} {} at {}",
        a.volume.display(),
        a.mountpoint.display()
    )?;
    session.run().context("serving the file system")?;
    fs.sync_all().context("committing at unmount")?;
    drop(fs);
    let volume = Arc::try_unwrap(volume)
        .map_err(|_| anyhow::anyhow!("the volume is still in use at unmount"))?;
    volume.close()?;
    note!("unmounted {}", a.mountpoint.display());
    Ok(())
}

/// Starts `hscm mount --foreground` as a detached process and returns once it
/// serves (or says why it cannot).
fn mount_in_background(a: &MountArgs) -> Result<()> {
    let exe = std::env::current_exe().context("finding the hscm binary")?;
    let mut cmd = Command::new(exe);
    cmd.arg("mount")
        .arg(&a.volume)
        .arg(&a.mountpoint)
        .arg("--foreground")
        .arg("--threads")
        .arg(a.threads.to_string());
    if let Some(d) = a.durability {
        cmd.arg("--durability").arg(d.name());
    }
    if a.allow_other {
        cmd.arg("--allow-other");
    }
    if a.no_writeback_cache {
        cmd.arg("--no-writeback-cache");
    }
    // Its log outlives this process: a pipe to us would break once we return.
    let log = log_path(&a.volume);
    let log_file = std::fs::File::create(&log)
        .with_context(|| format!("creating the mount's log {}", log.display()))?;
    cmd.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(log_file);
    // Its own session: the terminal's signals and hang-up do not reach it.
    use std::os::unix::process::CommandExt;
    cmd.process_group(0);
    let mut child = cmd.spawn().context("starting the mount process")?;
    let stdout = child.stdout.take().expect("piped");
    let mut line = String::new();
    BufReader::new(stdout).read_line(&mut line)?;
    if line.starts_with(READY) {
        outln!("{} (log: {})", line.trim_end(), log.display())?;
        return Ok(());
    }
    let status = child.wait()?;
    let why = std::fs::read_to_string(&log).unwrap_or_default();
    bail!(
        "the mount process ended ({status}): {}",
        why.trim().trim_start_matches("error: ")
    )
}

/// Where a background mount of `volume` logs.
fn log_path(volume: &Path) -> PathBuf {
    let stem = volume
        .file_stem()
        .map_or("volume".into(), |s| s.to_string_lossy().into_owned());
    std::env::temp_dir().join(format!("hscm-mount-{stem}.log"))
}

#[derive(clap::Args, Debug)]
pub struct UmountArgs {
    /// Where an `hscm mount` serves.
    pub mountpoint: PathBuf,
    /// Seconds to wait for the mount process to commit and close the volume.
    #[arg(long, default_value_t = 60.0)]
    pub wait: f64,
}

/// Unmounts, then waits until the mount process has committed and closed the volume,
/// so that what was written is durable when this returns.
pub fn umount(a: &UmountArgs) -> Result<()> {
    let mountpoint = std::fs::canonicalize(&a.mountpoint)
        .with_context(|| format!("{}", a.mountpoint.display()))?;
    let source = hscm_source(&mountpoint)?.with_context(|| {
        format!(
            "{} is not an hscm mount (see /proc/self/mountinfo)",
            mountpoint.display()
        )
    })?;
    let status = Command::new("fusermount3")
        .arg("-u")
        .arg(&mountpoint)
        .status()
        .or_else(|_| Command::new("umount").arg(&mountpoint).status())
        .context("running fusermount3 -u (Debian package fuse3)")?;
    if !status.success() {
        bail!(
            "{} could not be unmounted ({status}); is a process using it? (fuser -vm {})",
            mountpoint.display(),
            mountpoint.display()
        );
    }
    // The mount process holds the volume's lock until it has closed it.
    let deadline = Instant::now() + Duration::from_secs_f64(a.wait);
    while volume_in_use(&source) {
        if Instant::now() > deadline {
            bail!(
                "unmounted, but the mount process still holds {} after {} s",
                source.display(),
                a.wait
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    outln!("unmounted {}", mountpoint.display())?;
    Ok(())
}

/// The volume an hscm mount at `mountpoint` serves, from /proc/self/mountinfo
/// (its source is `hscm:VOLUME`).
fn hscm_source(mountpoint: &Path) -> Result<Option<PathBuf>> {
    let info =
        std::fs::read_to_string("/proc/self/mountinfo").context("reading /proc/self/mountinfo")?;
    let want = mountpoint.to_string_lossy();
    for line in info.lines() {
        let fields: Vec<&str> = line.split(' ').collect();
        let Some(dash) = fields.iter().position(|f| *f == "-") else {
            continue;
        };
        if fields.get(4).map(|m| unescape(m)) != Some(want.to_string()) {
            continue;
        }
        if let Some(src) = fields.get(dash + 2).and_then(|s| s.strip_prefix("hscm:")) {
            return Ok(Some(PathBuf::from(unescape(src))));
        }
    }
    Ok(None)
}

/// mountinfo escapes space, tab, newline and backslash as octal.
fn unescape(s: &str) -> String {
    s.replace("\\040", " ")
        .replace("\\011", "\t")
        .replace("\\012", "\n")
        .replace("\\134", "\\")
}

fn volume_in_use(path: &Path) -> bool {
    match std::fs::File::open(path) {
        Ok(f) => {
            hscm_durable::lock::acquire(&f, path, hscm_durable::lock::Hold::Exclusive).is_err()
        }
        Err(_) => false,
    }
}

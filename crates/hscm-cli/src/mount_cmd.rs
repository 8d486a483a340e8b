//! `hscm mount VOLUME MOUNTPOINT` and `hscm umount MOUNTPOINT`: the volume's file
//! system through FUSE (docs/fs.md).

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use clap::builder::TypedValueParser as _;

use hscm_volume::Durability;

#[derive(clap::Args, Debug)]
pub struct MountArgs {
    /// The volume, made with `hscm volume create PATH --size 4G --fs`.
    pub volume: PathBuf,
    /// An empty directory to mount it on (not one that already holds an hscm mount).
    pub mountpoint: PathBuf,
    /// `immediate`: every completed write, create, rename… survives a power cut;
    /// `on-flush`: POSIX fsync semantics (an fsync commits everything before it).
    /// Default: the volume's own.
    #[arg(long)]
    pub durability: Option<Durability>,
    /// Stay in the foreground (logs to standard error) instead of serving from a
    /// background process, which logs to a file in the runtime directory
    /// ($XDG_RUNTIME_DIR/hscm, or /run/hscm for root).
    #[arg(long)]
    pub foreground: bool,
    /// Let other users than the one who mounted use it (FUSE's allow_other), under
    /// the kernel's permission checks. The default for root, as with tmpfs; a user's
    /// mount needs `user_allow_other` in /etc/fuse.conf.
    #[arg(long, conflicts_with = "private")]
    pub allow_other: bool,
    /// Only the user who mounted may use it (not even root's other processes of
    /// other users): the old default of root mounts.
    #[arg(long)]
    pub private: bool,
    /// Honour setuid and setgid bits of the volume's files (default: nosuid, as
    /// libfuse mounts; a volume someone else made must not hand out their privileges).
    #[arg(long)]
    pub suid: bool,
    /// Honour device nodes on the volume (default: nodev).
    #[arg(long)]
    pub dev: bool,
    /// Mount read-only: nothing is written to the volume, not even a checkpoint.
    #[arg(long)]
    pub read_only: bool,
    /// Mount over a directory that is not empty (its files are hidden while mounted).
    #[arg(long)]
    pub nonempty: bool,
    /// In on-flush mode, send every write(2) to the file system before it returns
    /// instead of letting the kernel's writeback cache hold it until fsync or
    /// writeback: slower, but a full file system answers the write itself with ENOSPC
    /// (with the cache, a later fsync or close does). Immediate mode never caches
    /// writes.
    #[arg(long)]
    pub no_writeback_cache: bool,
    /// At most this much of the files' data in RAM (e.g. 4G): the hot files, chosen
    /// by --ram-policy; the rest is read from the device. Default: the budget
    /// `hscm volume create --fs --ram` recorded, else every file (and no more than
    /// the memory this machine has free for volumes).
    #[arg(long, value_parser = crate::units::parse_size)]
    pub ram: Option<u64>,
    /// Which files stay in RAM under a budget, as `hscm sim cache` names policies
    /// (lru, fifo, clock, sieve, s3fifo, arc, with +second-miss admission).
    #[arg(long, default_value = "lru", value_parser = parse_ram_policy)]
    pub ram_policy: hscm_policy::cache::PolicySpec,
    /// Serve every read through the daemon and the kernel's page cache, as FUSE did
    /// before passthrough: slower cold reads, and a second copy of what is read.
    /// Passthrough (Linux 6.9 on, root mounts) lets the kernel read a file's RAM
    /// directly for read-only opens.
    #[arg(long)]
    pub no_passthrough: bool,
    /// Threads serving requests.
    #[arg(long, default_value_t = 4, value_parser = clap::value_parser!(u16).range(1..=64).map(usize::from))]
    pub threads: usize,
    #[command(flatten)]
    pub service: crate::service_cmd::ServiceArgs,
}

fn parse_ram_policy(s: &str) -> Result<hscm_policy::cache::PolicySpec, String> {
    hscm_policy::cache::PolicySpec::parse(s).ok_or_else(|| {
        format!(
            "{s:?} is no cache policy (lru, fifo, clock, sieve, s3fifo, arc, lru+second-miss, ...)"
        )
    })
}

impl MountArgs {
    /// Whether other users get in: asked for, or by default for root (as tmpfs).
    fn allow_other(&self) -> bool {
        self.allow_other || (rustix::process::geteuid().is_root() && !self.private)
    }
}

/// What the mounting process prints once the file system serves; the parent of a
/// background mount waits for it.
const READY: &str = "mounted";

/// Refuses a place no one would mean to mount on: not a directory, one that holds
/// files (unless asked), one that already holds an hscm mount.
fn check_mountpoint(a: &MountArgs) -> Result<()> {
    if !a.mountpoint.is_dir() {
        bail!("{} is not a directory", a.mountpoint.display());
    }
    if let Some(top) = hscm_fuse::mounts::topmost(&a.mountpoint)
        .with_context(|| format!("looking at {}", a.mountpoint.display()))?
    {
        if let Some(volume) = top.hscm_volume() {
            bail!(
                "{} already holds an hscm mount (of {}); unmount it first with `hscm umount {}`",
                a.mountpoint.display(),
                volume.display(),
                a.mountpoint.display()
            );
        }
    }
    let mut entries = std::fs::read_dir(&a.mountpoint)
        .with_context(|| format!("reading {}", a.mountpoint.display()))?;
    if !a.nonempty && entries.next().is_some() {
        bail!(
            "{} is not empty (its files would be hidden while mounted); pass --nonempty to mount over it anyway",
            a.mountpoint.display()
        );
    }
    Ok(())
}

pub fn mount(a: &MountArgs) -> Result<()> {
    check_mountpoint(a)?;
    // Refused here, before a background process starts, with what to do instead.
    let kind = hscm_serving::detect(&a.volume)?;
    if kind != hscm_serving::Kind::FileSystem {
        bail!(
            "{} is a {kind}, which has no file system: {}",
            a.volume.display(),
            match kind {
                hscm_serving::Kind::Tiered => "serve it with `hscm nbd` instead",
                _ => "make one with `hscm volume create --fs`, or serve its blocks with `hscm nbd`",
            }
        );
    }
    if !a.foreground {
        return mount_in_background(a);
    }
    let mut opened = hscm_serving::open_files(
        &a.volume,
        &hscm_serving::FilesOptions {
            read_only: a.read_only,
            durability: a.durability,
            ram: a.ram,
            ram_policy: a.ram_policy,
        },
    )
    .with_context(|| format!("mounting the file system of {}", a.volume.display()))?;
    opened.load_in_background();
    let hscm_serving::Engine::Files { fs, volume } = opened.engine().clone() else {
        bail!(
            "{}: the serving layer opened no file system",
            a.volume.display()
        );
    };
    let durability = fs.durability();
    if let Some(why) = fs.read_only() {
        if !a.read_only {
            note!(
                "hscm: warning: serving {} read-only: {why}",
                a.volume.display()
            );
        }
    }
    let source = std::fs::canonicalize(&a.volume).unwrap_or_else(|_| a.volume.clone());
    let config = hscm_fuse::session_config(
        &format!("hscm:{}", source.display()),
        a.threads,
        hscm_fuse::Access {
            allow_other: a.allow_other(),
            suid: a.suid,
            dev: a.dev,
            read_only: fs.read_only().is_some(),
        },
    );
    let mut served = hscm_fuse::Fuse::new(fs.clone());
    if a.no_writeback_cache {
        served = served.without_writeback_cache();
    }
    if a.no_passthrough || !rustix::process::geteuid().is_root() {
        // Registering a backing file takes CAP_SYS_ADMIN.
        served = served.without_passthrough();
    }
    let passthrough = served.passthrough_wanted();
    let fuse_stats = served.stats();
    let writeback_cache = served.writeback_cache();
    let (session, mounted) = hscm_fuse::mount(served, &a.mountpoint, &config)
        .with_context(|| format!("mounting on {}", a.mountpoint.display()))?;
    // Every SIGINT or SIGTERM tries to unmount this mount (and nothing else); while
    // it is busy or covered, it goes on serving and says why.
    let mut signals = signal_hook::iterator::Signals::new([
        signal_hook::consts::SIGINT,
        signal_hook::consts::SIGTERM,
    ])
    .context("installing signal handlers")?;
    let unmounter = mounted.clone();
    std::thread::spawn(move || {
        for _ in signals.forever() {
            match unmounter.unmount() {
                Ok(()) => break,
                Err(e) => tracing::warn!(
                    "not unmounting {}: {e}; still serving",
                    unmounter.point().display()
                ),
            }
        }
    });
    note!(
        "serving {} ({}) at {} with {} threads; `hscm umount {}` stops it",
        a.volume.display(),
        match (
            fs.read_only().is_some(),
            durability,
            writeback_cache,
            passthrough
        ) {
            (true, _, _, true) => "read-only, FUSE passthrough from RAM",
            (true, _, _, false) => "read-only",
            (false, hscm_fs::Durability::Immediate, _, true) =>
                "immediate, FUSE passthrough reads from RAM",
            (false, hscm_fs::Durability::Immediate, _, false) => "immediate",
            (false, hscm_fs::Durability::OnFlush, _, true) =>
                "on-flush, FUSE passthrough: reads and writes in RAM, home at fsync",
            (false, hscm_fs::Durability::OnFlush, true, false) =>
                "on-flush, kernel writeback cache",
            (false, hscm_fs::Durability::OnFlush, false, false) => "on-flush, writes through",
        },
        a.mountpoint.display(),
        a.threads,
        a.mountpoint.display()
    );
    let mountpoint = std::fs::canonicalize(&a.mountpoint).unwrap_or_else(|_| a.mountpoint.clone());
    let service = {
        let (fs, volume) = (fs.clone(), volume.clone());
        a.service.start(
            "mount",
            &a.volume,
            mountpoint.display().to_string(),
            move |s| {
                hscm_service::probe::fs(s, &fs, &volume);
                let ops = fuse_stats.snapshot();
                crate::service_cmd::target_ops(s, &ops);
                s.errors
                    .insert("request".into(), ops.iter().map(|o| o.errors).sum());
            },
        )?
    };
    outln!(
        "{READY} {} at {}",
        a.volume.display(),
        a.mountpoint.display()
    )?;
    service.ready(&format!("serving {}", a.mountpoint.display()));
    let served = session.run().context("serving the file system");
    let _stopping = service.stopping();
    drop(service);
    served?;
    // The session's clones of the engine are gone with it; close commits and closes.
    drop((fs, volume));
    opened.close().context("committing at unmount")?;
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
    if let Some(ram) = a.ram {
        cmd.arg("--ram").arg(ram.to_string());
    }
    cmd.arg("--ram-policy").arg(a.ram_policy.name());
    if let Some(m) = &a.service.metrics {
        cmd.arg("--metrics").arg(m);
    }
    for (flag, on) in [
        ("--allow-other", a.allow_other),
        ("--private", a.private),
        ("--suid", a.suid),
        ("--dev", a.dev),
        ("--read-only", a.read_only),
        ("--nonempty", a.nonempty),
        ("--no-writeback-cache", a.no_writeback_cache),
        ("--no-passthrough", a.no_passthrough),
    ] {
        if on {
            cmd.arg(flag);
        }
    }
    // Its log outlives this process: a pipe to us would break once we return. One
    // log per mount, in a directory only this user can write.
    let stem = a
        .volume
        .file_stem()
        .map_or("volume".into(), |s| s.to_string_lossy().into_owned());
    let dir = hscm_durable::runtime::dir()?;
    let (log, log_file) = hscm_durable::runtime::create_fresh_file(&dir, "mount", &stem, "log")?;
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
        why.trim().trim_start_matches("hscm: error: ")
    )
}

#[derive(clap::Args, Debug)]
pub struct UmountArgs {
    /// Where an `hscm mount` serves.
    pub mountpoint: PathBuf,
    /// Seconds to wait for the mount process to commit and close the volume.
    #[arg(long, default_value_t = 60.0)]
    pub wait: f64,
}

/// Unmounts the hscm mount on top at the mount point (never what lies under or over
/// it), then waits until the mount process has committed and closed the volume, so
/// that what was written is durable when this returns.
pub fn umount(a: &UmountArgs) -> Result<()> {
    let mountpoint = std::fs::canonicalize(&a.mountpoint)
        .with_context(|| format!("{}", a.mountpoint.display()))?;
    let top = hscm_fuse::mounts::topmost(&mountpoint)
        .with_context(|| format!("looking at {}", mountpoint.display()))?;
    let Some(top) = top else {
        bail!(
            "{} is not an hscm mount (nothing is mounted there; see /proc/self/mountinfo)",
            mountpoint.display()
        );
    };
    let Some(source) = top.hscm_volume() else {
        bail!(
            "{} is not an hscm mount: the mount on top there is {} ({}); it is left alone",
            mountpoint.display(),
            top.source,
            top.fstype
        );
    };
    match hscm_fuse::mounts::fusermount_u(&mountpoint) {
        Ok(()) => {}
        Err(hscm_fuse::mounts::UnmountError::Busy) => bail!(
            "{} could not be unmounted: it is busy; is a process using it? (fuser -vm {})",
            mountpoint.display(),
            mountpoint.display()
        ),
        Err(e) => bail!("{} could not be unmounted: {e}", mountpoint.display()),
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

fn volume_in_use(path: &Path) -> bool {
    match std::fs::File::open(path) {
        Ok(f) => {
            hscm_durable::lock::acquire(&f, path, hscm_durable::lock::Hold::Exclusive).is_err()
        }
        Err(_) => false,
    }
}

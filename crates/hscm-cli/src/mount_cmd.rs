//! `hscm mount VOLUME MOUNTPOINT` and `hscm umount MOUNTPOINT`: the volume's file
//! system through FUSE (docs/fs.md).

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::Duration;

use anyhow::{bail, Context, Result};
use clap::builder::TypedValueParser as _;

use hscm_volume::Durability;

#[derive(clap::Args, Debug)]
pub struct MountArgs {
    /// The volume, made with `hscm volume create PATH --size 4G --fs`: a file, a block
    /// device, or the NBD URI of its home (docs/remote.md).
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
    /// Only with --no-passthrough (with passthrough the kernel has no writeback
    /// cache for FUSE: writes to files in RAM go to RAM). In on-flush mode, send
    /// every write(2) to the file system before it returns
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
    #[arg(long, default_value = "lru")]
    pub ram_policy: hscm_serving::PolicySpec,
    /// On-flush: how much of what closed files hold in RAM, not yet home, may wait
    /// for the next fsync (which takes it home). Past it, a close takes its file
    /// home itself, with everything waiting: a bound on the next fsync's work.
    #[arg(long, value_parser = crate::units::parse_size, default_value = crate::units::size_arg(hscm_serving::FilesOptions::default().dirty_max))]
    pub dirty_max: u64,
    /// Serve every read through the daemon and the kernel's page cache, as FUSE did
    /// before passthrough: slower cold reads, and a second copy of what is read.
    /// Passthrough (Linux 6.9 on, root mounts) lets the kernel read a file's RAM
    /// directly for read-only opens.
    #[arg(long)]
    pub no_passthrough: bool,
    /// Let the kernel read and write read-write opens' RAM directly too (by
    /// default only read-only and write-only opens are passed through): faster
    /// random writes by programs that open files read-write (databases, fio), but
    /// msync(MS_SYNC) of their shared mappings no longer reaches hscm, so what they
    /// write through a mapping is durable at the next fsync of any file, a close or
    /// unmount, not when msync returns.
    #[arg(long, conflicts_with = "no_passthrough")]
    pub passthrough_read_write: bool,
    /// How requests travel between the kernel and hscm: `auto` by FUSE over
    /// io_uring (per-CPU rings, Linux 6.14 on; about a third of a /dev/fuse round
    /// trip here) where the kernel's switch
    /// (/sys/module/fuse/parameters/enable_uring) is on, else by /dev/fuse; `on`
    /// the rings or no mount (root turns the switch on, for every later FUSE mount
    /// of this machine); `off` /dev/fuse only.
    #[arg(long, value_enum, default_value_t = IoUring::Auto)]
    pub io_uring: IoUring,
    /// Threads serving requests (with the rings: the requests that leave them,
    /// fsyncs, releases, and every change in immediate mode).
    #[arg(long, default_value_t = 4, value_parser = clap::value_parser!(u16).range(1..=64).map(usize::from))]
    pub threads: usize,
    #[command(flatten)]
    pub service: hscm_service::ServiceArgs,
}

/// `--io-uring`.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum IoUring {
    Auto,
    On,
    Off,
}

impl IoUring {
    /// Whether to ask the kernel for the rings; with `on`, turns the kernel's switch
    /// on first (root), or says why it cannot.
    fn wanted(self) -> Result<bool> {
        use hscm_fuse::uring::{enable_in_kernel, kernel_switch, KERNEL_SWITCH};
        match self {
            IoUring::Off => Ok(false),
            IoUring::Auto => Ok(kernel_switch() == Some(true)),
            IoUring::On => {
                if kernel_switch() == Some(false) && !rustix::process::geteuid().is_root() {
                    bail!(
                        "--io-uring on: {KERNEL_SWITCH} is N and only root may turn it on \
                         (`echo Y > {KERNEL_SWITCH}`, or fuse.enable_uring=1 on the kernel's command line); \
                         or mount with --io-uring auto"
                    );
                }
                if enable_in_kernel().context("--io-uring on")? {
                    note!("hscm: turned on {KERNEL_SWITCH} (FUSE over io_uring), for this and later FUSE mounts");
                }
                Ok(true)
            }
        }
    }
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

pub fn mount(a: &MountArgs) -> Result<()> {
    hscm_fuse::mounts::check_mount_point(&a.mountpoint, a.nonempty)?;
    // Refused here, before a background process starts, with what to do instead.
    if let Err(e) = hscm_serving::require_files(&a.volume) {
        let hscm_serving::Error::WrongKind { found, .. } = e else {
            return Err(e.into());
        };
        bail!(
            "{} is a {found}, which has no file system: {}",
            a.volume.display(),
            match found {
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
            dirty_max: a.dirty_max,
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
    let descriptors = hscm_fuse::raise_descriptor_limit();
    tracing::info!("up to {descriptors} open descriptors (a file in RAM holds one)");
    let mut served = hscm_fuse::Fuse::new(fs.clone());
    if a.no_writeback_cache {
        served = served.without_writeback_cache();
    }
    if a.passthrough_read_write {
        served = served.with_passthrough_read_write();
    }
    if a.no_passthrough || !rustix::process::geteuid().is_root() {
        // Registering a backing file takes CAP_SYS_ADMIN.
        served = served.without_passthrough();
    }
    let rings_wanted = a.io_uring.wanted()?;
    if rings_wanted {
        served = served.with_io_uring();
    }
    let (fuse_stats, mode, rings_state) = (served.stats(), served.mode(), served.rings());
    let (session, mounted) = hscm_fuse::mount(served, &a.mountpoint, &config)
        .with_context(|| format!("mounting on {}", a.mountpoint.display()))?;
    if a.io_uring == IoUring::On && !rings_state.granted() {
        drop(session);
        let _ = mounted.unmount();
        bail!(
            "--io-uring on: the kernel refused FUSE over io_uring at mount ({} is on); mounted nothing",
            hscm_fuse::uring::KERNEL_SWITCH
        );
    }
    mounted
        .unmount_on_signals()
        .context("installing signal handlers")?;
    note!(
        "serving {} ({mode}) at {} with {} threads; `hscm umount {}` stops it",
        a.volume.display(),
        a.mountpoint.display(),
        a.threads,
        a.mountpoint.display()
    );
    let mountpoint = std::fs::canonicalize(&a.mountpoint).unwrap_or_else(|_| a.mountpoint.clone());
    let service = {
        let (fs, volume, rings_state) = (fs.clone(), volume.clone(), rings_state.clone());
        crate::service_cmd::start(
            &a.service,
            "mount",
            &a.volume,
            mountpoint.display().to_string(),
            move |s| {
                hscm_service::probe::fs(s, &fs, &volume);
                let ops = fuse_stats.snapshot();
                hscm_service::probe::target_ops(s, &ops);
                s.fuse = Some(hscm_service::FuseTransport {
                    kind: rings_state.kind().into(),
                    ring_requests: rings_state.requests(),
                });
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
    let served =
        hscm_fuse::uring::serve(session, rings_state, a.threads).context("serving the file system");
    let _stopping = service.stopping();
    drop(service);
    served?;
    // What the kernel wrote into files' RAM and could not go home (a full file
    // system) is lost with this process: say which files, and end with an error.
    let unsaved: Vec<String> = fs
        .write_back_each()
        .into_iter()
        .map(|(ino, e)| {
            let name = fs.path_of(ino).unwrap_or_else(|| format!("inode {ino}"));
            format!("{name}: {e}")
        })
        .collect();
    // For `hscm umount`, which waits for the volume's lock: left before it goes.
    if let Err(e) = hscm_fuse::mounts::leave_unsaved_report(&a.volume, &unsaved) {
        tracing::warn!("leaving the list of unsaved files for `hscm umount`: {e}");
    }
    // The session's clones of the engine are gone with it; close commits and closes.
    drop((fs, volume));
    opened.close().context("committing at unmount")?;
    if !unsaved.is_empty() {
        bail!(
            "unmounted {}, but what was written to {} file(s) did not all reach the volume:\n  {}",
            a.mountpoint.display(),
            unsaved.len(),
            unsaved.join("\n  ")
        );
    }
    note!("unmounted {}", a.mountpoint.display());
    // A background mount's log has nothing to tell once it ended cleanly: removed,
    // so the runtime directory does not keep one per mount for ever. (A mount that
    // ends with an error keeps its log, which says why.)
    if let Some(log) = std::env::var_os(LOG_VARIABLE) {
        let _ = std::fs::remove_file(log);
    }
    Ok(())
}

/// Names, for a background mount's process, the log its parent made for it.
const LOG_VARIABLE: &str = "HSCM_MOUNT_LOG";

/// Starts this same command with `--foreground` as a detached process and returns
/// once it serves (or says why it cannot).
fn mount_in_background(a: &MountArgs) -> Result<()> {
    let exe = std::env::current_exe().context("finding the hscm binary")?;
    let mut cmd = Command::new(exe);
    cmd.args(crate::mount_helper::args_in_effect().into_iter().skip(1))
        .arg("--foreground");
    // Its log outlives this process: a pipe to us would break once we return. One
    // log per mount, in a directory only this user can write.
    let stem = hscm_durable::runtime::stem_of(&a.volume);
    let dir = hscm_durable::runtime::dir()?;
    let (log, log_file) = hscm_durable::runtime::create_fresh_file(&dir, "mount", &stem, "log")?;
    cmd.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(log_file)
        .env(LOG_VARIABLE, &log);
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

/// Unmounts the hscm mount on top at the mount point and waits until its process has
/// committed and closed the volume.
pub fn umount(a: &UmountArgs) -> Result<()> {
    let point = hscm_fuse::mounts::unmount_hscm(&a.mountpoint, Duration::from_secs_f64(a.wait))?;
    outln!("unmounted {}", point.display())?;
    Ok(())
}

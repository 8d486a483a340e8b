//! Mounting: the session settings (`nosuid,nodev` unless asked), the mount itself
//! (by mount(2) for root, so that fuser never unmounts by path), and what follows it
//! (the dirty share of a root mount with the writeback cache).

use std::path::Path;

use crate::{dirty, mounts, Fuse};

/// The share of the system's dirty page limit a root mount with the writeback cache
/// takes (see [`dirty`]).
pub const DIRTY_SHARE_PERCENT: u8 = 50;

/// Mounts `served` at `mountpoint` with `config` (see [`session_config`]): the
/// session, its notifications wired in, the dirty share lifted (see
/// [`after_mount`]), and the mount as this process knows it ([`mounts::Mounted`]),
/// to unmount it and nothing else. The caller runs or spawns the session.
///
/// fuser unmounts by path when its session ends, and by then the path may reach
/// another file system (one this mount lay over, once the kernel has unmounted this
/// one). So root mounts itself ([`mount_as_root`]) and hands fuser only the
/// /dev/fuse descriptor, which fuser never unmounts. A user's mount goes through
/// fusermount3, which unmounts only that user's own FUSE mounts.
pub fn mount(
    served: Fuse,
    mountpoint: &Path,
    config: &fuser::Config,
) -> std::io::Result<(fuser::Session<Fuse>, mounts::Mounted)> {
    let writeback_cache = served.writeback_cache;
    let notifier = served.notifier.clone();
    let point = std::fs::canonicalize(mountpoint)?;
    let session = if rustix::process::geteuid().is_root() {
        let fd = mount_as_root(&point, config)?;
        match fuser::Session::from_fd(served, fd, config.acl, config.clone()) {
            Ok(session) => session,
            Err(e) => {
                let _ = rustix::mount::unmount(&point, rustix::mount::UnmountFlags::DETACH);
                return Err(e);
            }
        }
    } else {
        user_may_open_dev_fuse()?;
        fuser::Session::new(served, &point, config)?
    };
    let mounted = mounts::Mounted::on_top_at(&point)?;
    let _ = notifier.set(session.notifier());
    after_mount(&point, writeback_cache);
    Ok((session, mounted))
}

/// A user's mount needs /dev/fuse open to that user: fuser opens it, and the setuid
/// fusermount3 it falls back to for mount(2) opens it as the user too (libfuse 3
/// drops its privileges for that open), so on a machine where /dev/fuse is root's
/// alone no user can mount any FUSE file system. Said here with the fixes, rather
/// than as a bare "Permission denied".
fn user_may_open_dev_fuse() -> std::io::Result<()> {
    use rustix::fs::Access;
    match rustix::fs::access("/dev/fuse", Access::READ_OK | Access::WRITE_OK) {
        Ok(()) => Ok(()),
        Err(e) => {
            let mode = std::fs::metadata("/dev/fuse")
                .map(|m| {
                    format!(
                        "mode {:o}",
                        std::os::unix::fs::PermissionsExt::mode(&m.permissions()) & 0o7777
                    )
                })
                .unwrap_or_else(|e| e.to_string());
            Err(std::io::Error::new(
                std::io::Error::from(e).kind(),
                format!(
                    "/dev/fuse ({mode}) cannot be opened by user {}: {e}. A FUSE mount by a user other than root \
                     needs it open to users (the kernel's and most distributions' default, mode 666: \
                     `chmod 666 /dev/fuse`, or a udev rule KERNEL==\"fuse\", MODE=\"0666\"); fusermount3 opens it as \
                     the user too. Or mount as root, which lets every user in (--allow-other is root's default; \
                     the hscm-mount@ unit does so at boot)",
                    rustix::process::getuid().as_raw()
                ),
            ))
        }
    }
}

/// mount(2) of a FUSE file system at `point` as `config` says: its /dev/fuse
/// descriptor. Type `fuse.hscm`, source the FSName option; `nosuid`, `nodev`, `ro`
/// and `default_permissions` from the options, `allow_other` from the ACL.
fn mount_as_root(point: &Path, config: &fuser::Config) -> std::io::Result<std::os::fd::OwnedFd> {
    use fuser::MountOption as O;
    use rustix::mount::MountFlags;
    use std::os::fd::AsRawFd;
    use std::os::unix::fs::MetadataExt;
    let dev = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/fuse")
        .map_err(|e| std::io::Error::new(e.kind(), format!("/dev/fuse: {e}")))?;
    let root_type = std::fs::metadata(point)?.mode() & 0o170000;
    let mut data = format!(
        "fd={},rootmode={root_type:o},user_id={},group_id={}",
        dev.as_raw_fd(),
        rustix::process::getuid().as_raw(),
        rustix::process::getgid().as_raw()
    );
    let mut flags = MountFlags::empty();
    let mut source = "hscm".to_string();
    for option in &config.mount_options {
        match option {
            O::FSName(name) => source = name.clone(),
            O::DefaultPermissions => data.push_str(",default_permissions"),
            O::NoSuid => flags |= MountFlags::NOSUID,
            O::NoDev => flags |= MountFlags::NODEV,
            O::RO => flags |= MountFlags::RDONLY,
            _ => {}
        }
    }
    if config.acl == fuser::SessionACL::All {
        data.push_str(",allow_other");
    }
    rustix::mount::mount(source.as_str(), point, "fuse.hscm", flags, data.as_str()).map_err(
        |e| {
            std::io::Error::new(
                std::io::Error::from(e).kind(),
                format!("mount(2) at {}: {e}", point.display()),
            )
        },
    )?;
    Ok(dev.into())
}

/// After mounting at `mountpoint`: when the writeback cache is on and this process is
/// root, lifts FUSE's strict 1% dirty share to [`DIRTY_SHARE_PERCENT`]. A failure
/// only costs speed, so it is logged, not returned.
fn after_mount(mountpoint: &Path, writeback_cache: bool) {
    if !writeback_cache || !rustix::process::geteuid().is_root() {
        return;
    }
    match dirty::lift_dirty_limit(mountpoint, DIRTY_SHARE_PERCENT) {
        Ok(bdi) => tracing::info!(
            "{}: this mount may hold {DIRTY_SHARE_PERCENT}% of the system's dirty page limit",
            bdi.display()
        ),
        Err(e) => tracing::warn!(
            "lifting the kernel's 1% dirty page share of {}: {e} (writes stall sooner)",
            mountpoint.display()
        ),
    }
}

/// Raises this process's limit on open descriptors as far as the system allows
/// (the hard limit; for root, `fs.nr_open`): each file in RAM holds a memfd, and
/// the default 1,024 or 20,000 would turn a large tree into "Too many open
/// files". Returns the limit now in force.
pub fn raise_descriptor_limit() -> u64 {
    use rustix::process::{getrlimit, setrlimit, Resource, Rlimit};
    let now = getrlimit(Resource::Nofile);
    let mut hard = now.maximum;
    if rustix::process::geteuid().is_root() {
        if let Some(nr_open) = std::fs::read_to_string("/proc/sys/fs/nr_open")
            .ok()
            .and_then(|s| s.trim().parse::<u64>().ok())
        {
            hard = Some(hard.map_or(nr_open, |h| h.max(nr_open)));
        }
    }
    let wanted = Rlimit {
        current: hard,
        maximum: hard,
    };
    match setrlimit(Resource::Nofile, wanted) {
        Ok(()) => hard.unwrap_or(u64::MAX),
        Err(e) => {
            // Not root: the soft limit can still rise to the hard one.
            let soft = Rlimit {
                current: now.maximum,
                maximum: now.maximum,
            };
            if setrlimit(Resource::Nofile, soft).is_err() {
                tracing::warn!("raising the open file limit: {e}");
            }
            getrlimit(Resource::Nofile).current.unwrap_or(u64::MAX)
        }
    }
}

/// How a mount lets others in.
#[derive(Debug, Clone, Copy, Default)]
pub struct Access {
    /// Other users than the one who mounted may use it (FUSE's `allow_other`), under
    /// the kernel's permission checks, as on any local file system.
    pub allow_other: bool,
    /// Honour setuid and setgid bits (off: `nosuid`).
    pub suid: bool,
    /// Honour device nodes (off: `nodev`).
    pub dev: bool,
    /// Refuse every change (`ro`).
    pub read_only: bool,
}

/// The session settings every hscm mount uses: named `fsname` (what `mount` and
/// /proc/mounts show), kernel permission checks (`default_permissions`), `threads`
/// serving threads each with its own /dev/fuse descriptor, and `nosuid,nodev`
/// unless `access` asks otherwise (libfuse's default too: a volume made by someone
/// else must not hand out their setuid files or device nodes).
pub fn session_config(fsname: &str, threads: usize, access: Access) -> fuser::Config {
    let mut config = fuser::Config::default();
    config.mount_options = vec![
        fuser::MountOption::FSName(fsname.to_string()),
        fuser::MountOption::Subtype("hscm".into()),
        fuser::MountOption::DefaultPermissions,
        if access.read_only {
            fuser::MountOption::RO
        } else {
            fuser::MountOption::RW
        },
        if access.dev {
            fuser::MountOption::Dev
        } else {
            fuser::MountOption::NoDev
        },
        if access.suid {
            fuser::MountOption::Suid
        } else {
            fuser::MountOption::NoSuid
        },
    ];
    if access.allow_other {
        config.acl = fuser::SessionACL::All;
    }
    config.n_threads = Some(threads);
    config.clone_fd = true;
    config
}

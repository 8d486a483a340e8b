//! How much written data the kernel may hold for a mount with the writeback cache.
//!
//! The kernel gives every FUSE mount a "strict" share of 1% of the system's dirty
//! page limit, so that an untrusted daemon cannot pin the system's memory in dirty
//! pages it never takes. With that share a write-heavy program stalls in the kernel
//! as soon as a few tens of MiB wait for writeback, and every write then waits for a
//! FUSE round trip after all. An `hscm mount` made by root is trusted as any local
//! file system is, so it may lift the share: the mount's backing-device entry in
//! /sys/class/bdi takes a larger `max_ratio` and no `strict_limit`; the system-wide
//! limits (vm.dirty_ratio) still apply.

use std::io;
use std::path::{Path, PathBuf};

/// The `MAJOR:MINOR` device of the newest mount at `mountpoint`, read from a
/// /proc/self/mountinfo text (fields: id, parent, MAJOR:MINOR, root, mount point, …;
/// spaces and other odd bytes in paths are octal escapes such as `\040`).
pub fn device_of(mountinfo: &str, mountpoint: &Path) -> Option<String> {
    crate::mounts::parse_mountinfo(mountinfo)
        .into_iter()
        .rev()
        .find(|m| m.point == mountpoint)
        .map(|m| m.device)
}

/// Lets the mount at `mountpoint` hold up to `percent` of the system's dirty page
/// limit, without FUSE's strict share. Needs root; returns the bdi directory changed.
pub fn lift_dirty_limit(mountpoint: &Path, percent: u8) -> io::Result<PathBuf> {
    let point = std::fs::canonicalize(mountpoint)?;
    let mountinfo = std::fs::read_to_string("/proc/self/mountinfo")?;
    let device = device_of(&mountinfo, &point).ok_or_else(|| {
        io::Error::new(
            io::ErrorKind::NotFound,
            format!("{} is not in /proc/self/mountinfo", point.display()),
        )
    })?;
    let bdi = Path::new("/sys/class/bdi").join(device);
    std::fs::write(bdi.join("max_ratio"), percent.min(100).to_string())?;
    // Kernels before 6.2 have no strict_limit file; their FUSE share is max_ratio's.
    match std::fs::write(bdi.join("strict_limit"), "0") {
        Err(e) if e.kind() != io::ErrorKind::NotFound => return Err(e),
        _ => {}
    }
    Ok(bdi)
}

#[cfg(test)]
mod tests {
    use super::*;

    const MOUNTINFO: &str = "\
22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw
98 22 0:39 / /tmp/a\\040b rw,nosuid,nodev,relatime shared:50 - fuse.hscm hscm:/tmp/v.hscm rw,user_id=0,group_id=0
99 22 0:40 / /tmp/m rw,relatime shared:51 - fuse.hscm hscm:/tmp/w.hscm rw
100 99 0:41 / /tmp/m rw,relatime shared:52 - fuse.hscm hscm:/tmp/x.hscm rw
";

    #[test]
    fn the_newest_mount_at_a_path_names_its_device() {
        assert_eq!(
            device_of(MOUNTINFO, Path::new("/tmp/m")).as_deref(),
            Some("0:41")
        );
        assert_eq!(device_of(MOUNTINFO, Path::new("/")).as_deref(), Some("8:1"));
    }

    #[test]
    fn escaped_spaces_in_mount_points_match() {
        assert_eq!(
            device_of(MOUNTINFO, Path::new("/tmp/a b")).as_deref(),
            Some("0:39")
        );
    }

    #[test]
    fn a_path_nothing_is_mounted_on_has_no_device() {
        assert_eq!(device_of(MOUNTINFO, Path::new("/tmp")), None);
        assert_eq!(device_of("garbage\n\n1 2\n", Path::new("/tmp")), None);
    }
}

//! Which mount is which: a mount is known by its device number (every FUSE mount
//! gets one of its own), never by its path alone, because other file systems can
//! lie under it or be stacked over it at the same path. Unmounting goes only to the
//! mount this process made, and only while it is the one on top.

use std::io;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

/// One line of /proc/self/mountinfo: what is mounted where.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MountEntry {
    /// The mount's ID, and the ID of the mount it lies on.
    pub id: u64,
    pub parent: u64,
    /// `MAJOR:MINOR` of the mounted file system.
    pub device: String,
    pub point: PathBuf,
    /// `fuse` or `fuse.hscm` for an hscm mount (the subtype shows where a helper
    /// mounted it).
    pub fstype: String,
    /// `hscm:VOLUME` for an hscm mount.
    pub source: String,
}

impl MountEntry {
    /// The volume an hscm mount serves.
    pub fn hscm_volume(&self) -> Option<PathBuf> {
        let fuse = self.fstype == "fuse" || self.fstype.starts_with("fuse.");
        fuse.then(|| self.source.strip_prefix("hscm:").map(PathBuf::from))
            .flatten()
    }
}

/// Every mount a /proc/self/mountinfo text lists, in its order (lines that do not
/// parse are skipped). Fields: id, parent, MAJOR:MINOR, root, mount point, options,
/// optional fields up to "-", type, source; odd bytes in paths are octal escapes.
pub fn parse_mountinfo(text: &str) -> Vec<MountEntry> {
    text.lines()
        .filter_map(|line| {
            let fields: Vec<&str> = line.split(' ').collect();
            let dash = fields.iter().position(|f| *f == "-")?;
            Some(MountEntry {
                id: fields.first()?.parse().ok()?,
                parent: fields.get(1)?.parse().ok()?,
                device: fields.get(2)?.to_string(),
                point: PathBuf::from(unescape(fields.get(4)?)),
                fstype: fields.get(dash + 1)?.to_string(),
                source: unescape(fields.get(dash + 2)?),
            })
        })
        .collect()
}

/// mountinfo's octal escapes (`\040` for a space) undone.
pub(crate) fn unescape(field: &str) -> String {
    let bytes = field.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let octal = bytes.get(i + 1..i + 4).and_then(|d| {
            let text = std::str::from_utf8(d).ok()?;
            u8::from_str_radix(text, 8).ok()
        });
        match (bytes[i], octal) {
            (b'\\', Some(b)) => {
                out.push(b);
                i += 4;
            }
            (b, _) => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Of the mounts at `point` (canonical), the one on top: no other mount at `point`
/// lies on it. Read from the mount table alone, without a `stat` of `point`, which
/// would wait forever on a FUSE mount whose daemon is not serving yet (or any more).
pub fn topmost_in(entries: &[MountEntry], point: &Path) -> Option<MountEntry> {
    let here: Vec<&MountEntry> = entries.iter().filter(|m| m.point == point).collect();
    here.iter()
        .rev()
        .find(|m| !here.iter().any(|other| other.parent == m.id))
        .map(|m| (*m).clone())
}

/// The mount a lookup of `point` reaches (the one on top), if `point` is a mount
/// point.
pub fn topmost(point: &Path) -> io::Result<Option<MountEntry>> {
    let point = std::fs::canonicalize(point)?;
    let info = std::fs::read_to_string("/proc/self/mountinfo")?;
    Ok(topmost_in(&parse_mountinfo(&info), &point))
}

/// Why a mount could not be unmounted.
#[derive(Debug)]
#[non_exhaustive]
pub enum UnmountError {
    /// A process uses it.
    Busy,
    /// Another file system is mounted over it.
    Covered {
        by: Box<MountEntry>,
    },
    Io(io::Error),
}

impl std::fmt::Display for UnmountError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            UnmountError::Busy => write!(f, "it is busy (a process uses it)"),
            UnmountError::Covered { by } => write!(
                f,
                "{} ({}) is mounted over it; unmount that first",
                by.source, by.fstype
            ),
            UnmountError::Io(e) => write!(f, "{e}"),
        }
    }
}

impl std::error::Error for UnmountError {}

/// A mount this process made: its mount point and its device.
#[derive(Debug, Clone)]
pub struct Mounted {
    point: PathBuf,
    id: u64,
    device: String,
}

impl Mounted {
    /// Records the mount now on top at `point` (canonical), which this process just
    /// made.
    pub fn on_top_at(point: &Path) -> io::Result<Mounted> {
        let info = std::fs::read_to_string("/proc/self/mountinfo")?;
        let entry = topmost_in(&parse_mountinfo(&info), point)
            .ok_or_else(|| io::Error::other(format!("{} is not a mount point", point.display())))?;
        Ok(Mounted {
            point: entry.point,
            id: entry.id,
            device: entry.device,
        })
    }

    fn is(&self, m: &MountEntry) -> bool {
        m.id == self.id && m.device == self.device
    }

    pub fn point(&self) -> &Path {
        &self.point
    }

    /// Whether the kernel still has this mount anywhere.
    pub fn is_mounted(&self) -> bool {
        std::fs::read_to_string("/proc/self/mountinfo")
            .map(|info| parse_mountinfo(&info).iter().any(|m| self.is(m)))
            .unwrap_or(false)
    }

    /// Unmounts this mount and nothing else: Ok if it is gone already; refused if
    /// another file system lies over it or a process uses it (it then goes on
    /// serving, and a later call may succeed).
    pub fn unmount(&self) -> Result<(), UnmountError> {
        if !self.is_mounted() {
            return Ok(());
        }
        match topmost(&self.point).map_err(UnmountError::Io)? {
            Some(top) if self.is(&top) => {}
            Some(top) => return Err(UnmountError::Covered { by: Box::new(top) }),
            None => return Ok(()),
        }
        match rustix::mount::unmount(&self.point, rustix::mount::UnmountFlags::NOFOLLOW) {
            Ok(()) => Ok(()),
            Err(rustix::io::Errno::BUSY) => Err(UnmountError::Busy),
            // Not root: fusermount3 unmounts what is on top at the path, which was
            // just checked to be this mount.
            Err(rustix::io::Errno::PERM) => fusermount_u(&self.point),
            Err(e) => Err(UnmountError::Io(e.into())),
        }
    }
}

impl Mounted {
    /// From now on, every SIGINT or SIGTERM tries to unmount this mount (and nothing
    /// else); while it is busy or covered, it goes on serving and logs why.
    pub fn unmount_on_signals(&self) -> io::Result<()> {
        use signal_hook::consts::{SIGINT, SIGTERM};
        let mut signals = signal_hook::iterator::Signals::new([SIGINT, SIGTERM])?;
        let mounted = self.clone();
        std::thread::spawn(move || {
            for _ in signals.forever() {
                match mounted.unmount() {
                    Ok(()) => break,
                    Err(e) => tracing::warn!(
                        "not unmounting {}: {e}; still serving",
                        mounted.point().display()
                    ),
                }
            }
        });
        Ok(())
    }
}

/// `fusermount3 -u POINT` (the setuid helper a user needs to unmount).
pub fn fusermount_u(point: &Path) -> Result<(), UnmountError> {
    let out = Command::new("fusermount3")
        .arg("-u")
        .arg(point)
        .output()
        .map_err(|e| {
            UnmountError::Io(io::Error::new(
                e.kind(),
                format!("running fusermount3 (Debian package fuse3): {e}"),
            ))
        })?;
    if out.status.success() {
        return Ok(());
    }
    let why = String::from_utf8_lossy(&out.stderr);
    if why.contains("busy") {
        Err(UnmountError::Busy)
    } else {
        Err(UnmountError::Io(io::Error::other(format!(
            "fusermount3 -u: {}",
            why.trim()
        ))))
    }
}

/// Why a directory is no place to mount on.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum MountPointError {
    #[error("{} is not a directory", .0.display())]
    NotADirectory(PathBuf),
    /// Mounting over it would hide an hscm mount its users still reach.
    #[error("{} already holds an hscm mount (of {})", point.display(), volume.display())]
    AlreadyHscm { point: PathBuf, volume: PathBuf },
    /// Its files would be hidden while mounted.
    #[error("{} is not empty (its files would be hidden while mounted)", .0.display())]
    NotEmpty(PathBuf),
    #[error("looking at {}: {source}", path.display())]
    Io { path: PathBuf, source: io::Error },
}

/// Refuses a place no one would mean to mount on: not a directory, one that already
/// holds an hscm mount, or (unless `nonempty`) one that holds files.
pub fn check_mount_point(point: &Path, nonempty: bool) -> Result<(), MountPointError> {
    let io = |source| MountPointError::Io {
        path: point.to_path_buf(),
        source,
    };
    if !point.is_dir() {
        return Err(MountPointError::NotADirectory(point.to_path_buf()));
    }
    if let Some(volume) = topmost(point).map_err(io)?.and_then(|t| t.hscm_volume()) {
        return Err(MountPointError::AlreadyHscm {
            point: point.to_path_buf(),
            volume,
        });
    }
    if !nonempty && std::fs::read_dir(point).map_err(io)?.next().is_some() {
        return Err(MountPointError::NotEmpty(point.to_path_buf()));
    }
    Ok(())
}

/// Why `hscm umount` did not finish.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum HscmUnmountError {
    #[error("{}: {source}", path.display())]
    Io { path: PathBuf, source: io::Error },
    #[error("{} is not an hscm mount (nothing is mounted there; see /proc/self/mountinfo)", .0.display())]
    NothingMounted(PathBuf),
    /// Another file system is on top there: it is left alone.
    #[error("{} is not an hscm mount: the mount on top there is {} ({}); it is left alone", point.display(), on_top.source, on_top.fstype)]
    NotHscm {
        point: PathBuf,
        on_top: Box<MountEntry>,
    },
    #[error("{} could not be unmounted: {source}", point.display())]
    Unmount {
        point: PathBuf,
        source: UnmountError,
    },
    /// The mount is gone but its process did not close the volume in time.
    #[error("unmounted, but the mount process still holds {} after {} s", volume.display(), waited.as_secs_f64())]
    StillHeld { volume: PathBuf, waited: Duration },
    /// The mount is gone and the volume closed, but what was written to these files
    /// did not all reach the volume (the mount process said so before it ended).
    #[error("unmounted {}, but what was written to {} file(s) did not all reach the volume:\n  {}", point.display(), files.len(), files.join("\n  "))]
    Unsaved { point: PathBuf, files: Vec<String> },
}

/// The runtime file in which the mount process of `volume` (process `pid`) leaves
/// the files whose data did not reach the volume, for `hscm umount` to report.
fn unsaved_report(volume: &Path, pid: u32) -> Option<PathBuf> {
    let dir = hscm_durable::runtime::dir().ok()?;
    let stem = hscm_durable::runtime::safe_stem(&hscm_durable::runtime::stem_of(volume));
    Some(dir.join(format!("mount-{stem}-{pid}.unsaved")))
}

/// Said by a mount process as it ends: `files` (one line each: the path and the
/// error) did not all reach `volume`. `hscm umount` reads it once the volume is
/// closed and ends with the same error; nothing is written when `files` is empty.
/// A failure to write it is returned (the caller still reports the files itself).
pub fn leave_unsaved_report(volume: &Path, files: &[String]) -> io::Result<()> {
    let Some(path) = unsaved_report(volume, std::process::id()) else {
        return Err(io::Error::other("no runtime directory for the report"));
    };
    // One left by an earlier process with this PID is stale.
    let _ = std::fs::remove_file(&path);
    if files.is_empty() {
        return Ok(());
    }
    let dir = path.parent().expect("a runtime file has a directory");
    let name = path.file_name().expect("a runtime file has a name");
    let (_, mut file) = hscm_durable::runtime::create_file(dir, &name.to_string_lossy())
        .map_err(io::Error::other)?;
    use std::io::Write;
    file.write_all(files.join("\n").as_bytes())?;
    file.sync_all()
}

/// Takes the report the mount process `pid` of `volume` left, if any.
fn take_unsaved_report(volume: &Path, pid: u32) -> Vec<String> {
    let Some(path) = unsaved_report(volume, pid) else {
        return Vec::new();
    };
    let Ok(text) = std::fs::read_to_string(&path) else {
        return Vec::new();
    };
    let _ = std::fs::remove_file(&path);
    text.lines().map(str::to_string).collect()
}

/// Unmounts the hscm mount on top at `point` (never what lies under or over it),
/// then waits up to `wait` until the mount process has committed and closed the
/// volume (it holds the volume's lock until then), so that what was written is
/// durable when this returns.
pub fn unmount_hscm(point: &Path, wait: Duration) -> Result<PathBuf, HscmUnmountError> {
    let point = std::fs::canonicalize(point).map_err(|source| HscmUnmountError::Io {
        path: point.to_path_buf(),
        source,
    })?;
    let top = topmost(&point).map_err(|source| HscmUnmountError::Io {
        path: point.clone(),
        source,
    })?;
    let Some(top) = top else {
        return Err(HscmUnmountError::NothingMounted(point));
    };
    let Some(volume) = top.hscm_volume() else {
        return Err(HscmUnmountError::NotHscm {
            point,
            on_top: Box::new(top),
        });
    };
    // The process that serves it, to find what it says as it ends.
    let server = hscm_durable::lock::holder(&volume).map(|h| h.pid);
    fusermount_u(&point).map_err(|source| HscmUnmountError::Unmount {
        point: point.clone(),
        source,
    })?;
    let deadline = Instant::now() + wait;
    while hscm_durable::lock::is_held(&volume) {
        if Instant::now() > deadline {
            return Err(HscmUnmountError::StillHeld {
                volume,
                waited: wait,
            });
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let files = server.map_or_else(Vec::new, |pid| take_unsaved_report(&volume, pid));
    if !files.is_empty() {
        return Err(HscmUnmountError::Unsaved { point, files });
    }
    Ok(point)
}

#[cfg(test)]
mod tests {
    use super::*;

    const MOUNTINFO: &str = "\
22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw
98 22 0:39 / /tmp/a\\040b rw,nosuid,nodev,relatime shared:50 - fuse.hscm hscm:/tmp/v\\040w.hscm rw,user_id=0,group_id=0
99 22 0:40 / /tmp/m rw,relatime - tmpfs tmpfs rw
garbage line
";

    #[test]
    fn mountinfo_lines_parse_with_their_escapes() {
        let m = parse_mountinfo(MOUNTINFO);
        assert_eq!(m.len(), 3);
        assert_eq!(m[1].point, Path::new("/tmp/a b"));
        assert_eq!(m[1].device, "0:39");
        assert_eq!(m[1].hscm_volume(), Some(PathBuf::from("/tmp/v w.hscm")));
        assert_eq!(m[2].hscm_volume(), None, "tmpfs is no hscm mount");
    }

    #[test]
    fn the_mount_on_top_is_the_one_nothing_lies_on() {
        let info = "\
22 1 8:1 / / rw - ext4 /dev/sda1 rw
40 22 0:40 / /m rw - tmpfs tmpfs rw
41 40 0:41 / /m rw - fuse hscm:/v rw
30 41 0:42 / /m rw - tmpfs tmpfs rw
";
        let all = parse_mountinfo(info);
        let top = topmost_in(&all, Path::new("/m")).unwrap();
        assert_eq!(
            top.id, 30,
            "a reused, smaller ID on top still counts as on top"
        );
        assert_eq!(topmost_in(&all[..3], Path::new("/m")).unwrap().id, 41);
        assert_eq!(topmost_in(&all, Path::new("/x")), None);
    }

    #[test]
    fn the_root_is_on_top_of_itself() {
        let top = topmost(Path::new("/"))
            .unwrap()
            .expect("/ is a mount point");
        assert_eq!(top.point, Path::new("/"));
    }
}

//! Between fuser's types and hscm-fs's: errors, times, kinds and attributes.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use fuser::{Errno, FileAttr, FileType, INodeNo, TimeOrNow};
use hscm_fs::{Attr, Kind, Time};

pub(crate) fn errno(e: hscm_fs::Error) -> Errno {
    tracing::debug!("answering an error: {e}");
    Errno::from_i32(e.errno())
}

pub(crate) fn to_system(t: Time) -> SystemTime {
    if t.secs >= 0 {
        UNIX_EPOCH + Duration::new(t.secs as u64, t.nanos)
    } else {
        UNIX_EPOCH - Duration::new(t.secs.unsigned_abs(), 0) + Duration::new(0, t.nanos)
    }
}

pub(crate) fn from_system(t: SystemTime) -> Time {
    match t.duration_since(UNIX_EPOCH) {
        Ok(d) => Time {
            secs: d.as_secs() as i64,
            nanos: d.subsec_nanos(),
        },
        Err(e) => {
            let d = e.duration();
            let (secs, nanos) = if d.subsec_nanos() == 0 {
                (-(d.as_secs() as i64), 0)
            } else {
                (-(d.as_secs() as i64) - 1, 1_000_000_000 - d.subsec_nanos())
            };
            Time { secs, nanos }
        }
    }
}

/// What a lookup answers for a name that is not there, for the kernel to cache:
/// node id 0 (a negative entry).
pub(crate) fn absent() -> FileAttr {
    FileAttr {
        ino: INodeNo(0),
        size: 0,
        blocks: 0,
        atime: UNIX_EPOCH,
        mtime: UNIX_EPOCH,
        ctime: UNIX_EPOCH,
        crtime: UNIX_EPOCH,
        kind: FileType::RegularFile,
        perm: 0,
        nlink: 0,
        uid: 0,
        gid: 0,
        rdev: 0,
        blksize: 0,
        flags: 0,
    }
}

pub(crate) fn time_or_now(t: TimeOrNow) -> Time {
    match t {
        TimeOrNow::SpecificTime(t) => from_system(t),
        TimeOrNow::Now => Time::now(),
    }
}

pub(crate) fn file_type(kind: Kind) -> FileType {
    match kind {
        Kind::File => FileType::RegularFile,
        Kind::Dir => FileType::Directory,
        Kind::Symlink => FileType::Symlink,
        Kind::Fifo => FileType::NamedPipe,
        Kind::Socket => FileType::Socket,
        Kind::CharDevice => FileType::CharDevice,
        Kind::BlockDevice => FileType::BlockDevice,
    }
}

pub(crate) fn file_attr(a: &Attr) -> FileAttr {
    FileAttr {
        ino: INodeNo(a.ino),
        size: a.size,
        blocks: a.allocated / 512,
        atime: to_system(a.atime),
        mtime: to_system(a.mtime),
        ctime: to_system(a.ctime),
        crtime: to_system(a.crtime),
        kind: file_type(a.kind),
        perm: a.perm,
        nlink: a.nlink,
        uid: a.uid,
        gid: a.gid,
        rdev: a.rdev,
        blksize: hscm_fs::BLOCK as u32,
        flags: 0,
    }
}

/// The kind a mode's S_IFMT bits name.
pub(crate) fn kind_of_mode(mode: u32) -> Option<Kind> {
    Some(match mode & 0o170000 {
        0o100000 | 0 => Kind::File,
        0o040000 => Kind::Dir,
        0o120000 => Kind::Symlink,
        0o010000 => Kind::Fifo,
        0o140000 => Kind::Socket,
        0o020000 => Kind::CharDevice,
        0o060000 => Kind::BlockDevice,
        _ => return None,
    })
}

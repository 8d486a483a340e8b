//! One owner per volume: advisory locks on the backing file or device.
//!
//! A read-write opener takes an exclusive `flock`, a read-only opener a shared one, both
//! without waiting, for as long as the file stays open. `flock` locks belong to the open
//! file description, so they conflict between two opens in one process as well as between
//! processes, and the kernel drops them when the holder exits, however it exits (kill -9
//! included): there is no lock file to go stale.
//!
//! The holder's PID, for the message, comes from `/proc/locks` where it can be read.

use std::fs::File;
use std::os::unix::fs::MetadataExt;
use std::path::Path;

use rustix::fs::FlockOperation;

use crate::error::{Error, Result};

/// How a backing store is held while it is open.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Hold {
    /// Read-write: nobody else may hold it at all.
    Exclusive,
    /// Read-only: other readers may, no writer may.
    Shared,
}

/// Takes `hold` on `file` (opened from `path`) or explains who has it.
pub(crate) fn acquire(file: &File, path: &Path, hold: Hold) -> Result<()> {
    let op = match hold {
        Hold::Exclusive => FlockOperation::NonBlockingLockExclusive,
        Hold::Shared => FlockOperation::NonBlockingLockShared,
    };
    match rustix::fs::flock(file, op) {
        Ok(()) => Ok(()),
        Err(e) if e == rustix::io::Errno::WOULDBLOCK => Err(Error::Locked {
            path: path.display().to_string(),
            holder: holder_of(file),
            read_write: hold == Hold::Exclusive,
        }),
        Err(e) => Err(Error::io(
            format!("cannot lock {}", path.display()),
            e.into(),
        )),
    }
}

/// A process holding a lock on a file, as `/proc/locks` reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LockHolder {
    pub pid: u32,
    /// True when it holds the file read-write (an exclusive lock).
    pub exclusive: bool,
}

/// The first process other than this one that `/proc/locks` says holds a `flock` on
/// `file`'s inode; None where that cannot be known.
fn holder_of(file: &File) -> Option<LockHolder> {
    let meta = file.metadata().ok()?;
    let locks = std::fs::read_to_string("/proc/locks").ok()?;
    let holders = parse_proc_locks(
        &locks,
        rustix::fs::major(meta.dev()),
        rustix::fs::minor(meta.dev()),
        meta.ino(),
    );
    let me = std::process::id();
    // Another process first; else this one, through another open of the same file.
    holders
        .iter()
        .find(|h| h.pid != me)
        .or(holders.first())
        .copied()
}

/// The sentence [`Error::Locked`] prints after the path.
pub(crate) fn describe_holder(holder: &Option<LockHolder>, read_write: &bool) -> String {
    let what = if *read_write {
        "a volume has one read-write owner at a time, and no reader while it has one"
    } else {
        "a volume open read-write admits no other opener"
    };
    match holder {
        Some(h) => format!(
            "process {} has it open {} ({what})",
            h.pid,
            if h.exclusive {
                "read-write"
            } else {
                "read-only"
            }
        ),
        None => format!("another process or open file holds it ({what})"),
    }
}

/// Granted `FLOCK` entries of `/proc/locks` on one inode. A line reads
/// `1: FLOCK  ADVISORY  WRITE 1234 08:01:5678 0 EOF` (device numbers in hex, inode in
/// decimal); waiting requests carry a `->` and are skipped.
fn parse_proc_locks(text: &str, major: u32, minor: u32, ino: u64) -> Vec<LockHolder> {
    text.lines()
        .filter(|line| !line.contains("->"))
        .filter_map(|line| {
            let f: Vec<&str> = line.split_whitespace().collect();
            if f.len() < 6 || f[1] != "FLOCK" {
                return None;
            }
            let mut id = f[5].split(':');
            let maj = u32::from_str_radix(id.next()?, 16).ok()?;
            let min = u32::from_str_radix(id.next()?, 16).ok()?;
            let inode: u64 = id.next()?.parse().ok()?;
            if (maj, min, inode) != (major, minor, ino) {
                return None;
            }
            Some(LockHolder {
                pid: f[4].parse().ok()?,
                exclusive: f[3] == "WRITE",
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn proc_locks_lines_are_matched_by_device_and_inode() {
        let text = "\
1: POSIX  ADVISORY  WRITE 77 08:01:42 0 EOF
2: FLOCK  ADVISORY  WRITE 1234 fd:01:42 0 EOF
2: -> FLOCK  ADVISORY  WRITE 999 fd:01:42 0 EOF
3: FLOCK  ADVISORY  READ 55 fd:01:43 0 EOF
4: FLOCK  ADVISORY  READ 56 fd:01:42 0 EOF
garbage
";
        assert_eq!(
            parse_proc_locks(text, 0xfd, 1, 42),
            vec![
                LockHolder {
                    pid: 1234,
                    exclusive: true
                },
                LockHolder {
                    pid: 56,
                    exclusive: false
                }
            ]
        );
        assert!(parse_proc_locks(text, 8, 1, 42).is_empty());
    }

    #[test]
    fn exclusive_excludes_everyone_and_shared_admits_readers() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("v");
        std::fs::write(&p, b"x").unwrap();
        let open = || File::open(&p).unwrap();
        let (a, b) = (open(), open());
        acquire(&a, &p, Hold::Shared).unwrap();
        acquire(&b, &p, Hold::Shared).unwrap();
        let c = open();
        let err = acquire(&c, &p, Hold::Exclusive).unwrap_err();
        let msg = err.to_string();
        assert!(msg.contains(&p.display().to_string()), "{msg}");
        assert!(
            msg.contains(&format!("process {}", std::process::id())),
            "{msg}"
        );
        drop((a, b));
        acquire(&c, &p, Hold::Exclusive).unwrap();
        let d = open();
        assert!(matches!(
            acquire(&d, &p, Hold::Shared),
            Err(Error::Locked { .. })
        ));
        drop(c);
        acquire(&d, &p, Hold::Shared).unwrap();
    }
}

//! One owner per store: advisory locks on the file or device that holds it (a volume's
//! backing store, a key-value store's manifest).
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
use std::time::{Duration, Instant};

use rustix::fs::FlockOperation;

/// Why a lock was not taken.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LockError {
    /// Another opener holds it (see docs/design.md, "One owner").
    #[error("{path} is in use: {}", describe_holder(.holder, .read_write))]
    Locked {
        path: String,
        holder: Option<LockHolder>,
        /// What this opener asked for: read-write (true) or read-only.
        read_write: bool,
    },
    #[error("cannot lock {path}: {source}")]
    Io {
        path: String,
        #[source]
        source: std::io::Error,
    },
}

/// How a backing store is held while it is open.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Hold {
    /// Read-write: nobody else may hold it at all.
    Exclusive,
    /// Read-only: other readers may, no writer may.
    Shared,
}

/// How long an opener waits for a lock whose holder has already exited.
const EXITED_HOLDER_WAIT: Duration = Duration::from_secs(5);

/// Takes `hold` on `file` (opened from `path`) or explains who has it.
///
/// A holder that has exited can keep the lock a little longer: after a `kill -9` in the
/// middle of io_uring writes, the kernel finishes them and tears the ring down after
/// the process is gone, and the ring holds the file until then. So while no running
/// process holds the lock (as far as `/proc/locks` tells), this waits, up to 5 s,
/// rather than refusing a restart after a crash.
pub fn acquire(file: &File, path: &Path, hold: Hold) -> Result<(), LockError> {
    let op = match hold {
        Hold::Exclusive => FlockOperation::NonBlockingLockExclusive,
        Hold::Shared => FlockOperation::NonBlockingLockShared,
    };
    let started = Instant::now();
    loop {
        match rustix::fs::flock(file, op) {
            Ok(()) => return Ok(()),
            Err(e) if e == rustix::io::Errno::WOULDBLOCK => {
                let entries = lock_entries(file);
                // Every lock on the file belongs to a process that is gone. Once it is
                // gone the kernel may no longer list its lock at all (it lists only
                // locks whose process it can name), so no entry counts as gone too.
                let exited = entries
                    .iter()
                    .all(|e| e.pid.is_none_or(|pid| !is_running(pid)));
                if exited && started.elapsed() < EXITED_HOLDER_WAIT {
                    std::thread::sleep(Duration::from_millis(10));
                    continue;
                }
                return Err(LockError::Locked {
                    path: path.display().to_string(),
                    holder: first_holder(&entries),
                    read_write: hold == Hold::Exclusive,
                });
            }
            Err(e) => {
                return Err(LockError::Io {
                    path: path.display().to_string(),
                    source: e.into(),
                })
            }
        }
    }
}

/// False once `pid` has exited (gone, or a zombie waiting to be reaped).
fn is_running(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        // The state follows the command name, which is in parentheses and may hold any
        // character: read it after the last ')'.
        Ok(stat) => stat
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().next())
            .is_some_and(|state| state != "Z" && state != "X"),
        Err(_) => false,
    }
}

/// A process holding a lock on a file, as `/proc/locks` reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LockHolder {
    pub pid: u32,
    /// True when it holds the file read-write (an exclusive lock).
    pub exclusive: bool,
}

/// A granted `flock` on the file, as `/proc/locks` lists it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct LockEntry {
    /// None where the kernel can no longer name the process (it has exited: -1).
    pid: Option<u32>,
    exclusive: bool,
}

/// The `flock`s `/proc/locks` lists on `file`'s inode; empty where it cannot be read.
fn lock_entries(file: &File) -> Vec<LockEntry> {
    let Ok(meta) = file.metadata() else {
        return Vec::new();
    };
    let Ok(locks) = std::fs::read_to_string("/proc/locks") else {
        return Vec::new();
    };
    parse_proc_locks(
        &locks,
        rustix::fs::major(meta.dev()),
        rustix::fs::minor(meta.dev()),
        meta.ino(),
    )
}

/// The holder to name: another process first, else this one (a second open of the
/// same file in one process).
fn first_holder(entries: &[LockEntry]) -> Option<LockHolder> {
    let named = entries.iter().filter_map(|e| {
        e.pid.map(|pid| LockHolder {
            pid,
            exclusive: e.exclusive,
        })
    });
    let me = std::process::id();
    named.clone().find(|h| h.pid != me).or(named.clone().next())
}

/// The process holding the store at `path` (another first), as `/proc/locks`
/// names it; None when nobody does or it cannot be told.
pub fn holder(path: &Path) -> Option<LockHolder> {
    let file = File::open(path).ok()?;
    first_holder(&lock_entries(&file))
}

/// Whether some process holds the store at `path` (its owner lock, either way): a
/// probe that takes and at once drops the lock. False when `path` cannot be opened.
pub fn is_held(path: &Path) -> bool {
    File::open(path).is_ok_and(|f| acquire(&f, path, Hold::Exclusive).is_err())
}

/// The sentence [`LockError::Locked`] prints after the path.
pub fn describe_holder(holder: &Option<LockHolder>, read_write: &bool) -> String {
    let what = if *read_write {
        "a store has one read-write owner at a time, and no reader while it has one"
    } else {
        "a store open read-write admits no other opener"
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
/// decimal; the PID is -1 once its process is gone); waiting requests carry a `->` and
/// are skipped.
fn parse_proc_locks(text: &str, major: u32, minor: u32, ino: u64) -> Vec<LockEntry> {
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
            let pid: i64 = f[4].parse().ok()?;
            Some(LockEntry {
                pid: u32::try_from(pid).ok().filter(|&p| p > 0),
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
5: FLOCK  ADVISORY  WRITE -1 fd:01:42 0 EOF
garbage
";
        let entries = parse_proc_locks(text, 0xfd, 1, 42);
        assert_eq!(
            entries,
            vec![
                LockEntry {
                    pid: Some(1234),
                    exclusive: true
                },
                LockEntry {
                    pid: Some(56),
                    exclusive: false
                },
                LockEntry {
                    pid: None,
                    exclusive: true
                }
            ]
        );
        assert_eq!(
            first_holder(&entries),
            Some(LockHolder {
                pid: 1234,
                exclusive: true
            })
        );
        assert!(parse_proc_locks(text, 8, 1, 42).is_empty());
    }

    #[test]
    fn a_running_process_and_an_exited_one_are_told_apart() {
        assert!(is_running(std::process::id()));
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let pid = child.id();
        // Exited but not reaped: a zombie, which no longer holds anything.
        std::thread::sleep(Duration::from_millis(200));
        assert!(!is_running(pid));
        child.wait().unwrap();
        assert!(!is_running(pid));
    }

    #[test]
    fn a_probe_sees_a_holder_and_leaves_a_free_store_free() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("v");
        assert!(!is_held(&p), "nothing there, nothing held");
        std::fs::write(&p, b"x").unwrap();
        assert!(!is_held(&p));
        // The probe released what it took: an owner can still lock it.
        let owner = File::open(&p).unwrap();
        acquire(&owner, &p, Hold::Shared).unwrap();
        assert!(is_held(&p), "a reader holds it");
        drop(owner);
        assert!(!is_held(&p));
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
            Err(LockError::Locked { .. })
        ));
        drop(c);
        acquire(&d, &p, Hold::Shared).unwrap();
    }
}

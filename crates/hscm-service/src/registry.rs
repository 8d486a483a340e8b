//! How `hscm status` finds the running instances: each one listens on a Unix socket
//! `status-STEM-PID.sock` in the runtime directory (its user's only: see
//! `hscm_durable::runtime`) and answers every connection with its [`Status`] as one
//! JSON document. A socket nobody answers on (a killed instance) is removed by the
//! next listing.

use std::io::{self, Read, Write};
use std::os::unix::fs::{FileTypeExt, PermissionsExt};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use crate::{Probe, Status};

const PREFIX: &str = "status-";
const SUFFIX: &str = ".sock";
/// Time a reader has to take the answer, and `hscm status` to get one.
const TIMEOUT: Duration = Duration::from_secs(2);
/// The largest answer `hscm status` reads.
const MAX_ANSWER: u64 = 4 << 20;
const POLL: Duration = Duration::from_millis(50);

/// Why an instance cannot register, or a listing cannot be made.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RegistryError {
    #[error(transparent)]
    Runtime(#[from] hscm_durable::runtime::RuntimeError),
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
}

/// This instance's status socket; dropping it stops answering and removes it.
pub struct Registration {
    path: PathBuf,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Registration {
    /// Listens in `dir` (a private runtime directory) for `hscm status`.
    pub fn start(dir: &Path, stem: &str, probe: Probe) -> Result<Registration, RegistryError> {
        let name = hscm_durable::runtime::file_name("status", stem, "sock");
        let path = dir.join(name);
        let io_err = |source| RegistryError::Io {
            path: path.clone(),
            source,
        };
        // A socket with our PID in its name was left by an earlier process that had
        // this PID: it is dead, and the directory is ours.
        if std::fs::symlink_metadata(&path).is_ok_and(|m| m.file_type().is_socket()) {
            let _ = std::fs::remove_file(&path);
        }
        let listener = UnixListener::bind(&path).map_err(io_err)?;
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).map_err(io_err)?;
        listener.set_nonblocking(true).map_err(io_err)?;
        let stop = Arc::new(AtomicBool::new(false));
        let thread = {
            let stop = stop.clone();
            std::thread::Builder::new()
                .name("hscm-status".into())
                .spawn(move || answer_loop(listener, probe, stop))
                .map_err(io_err)?
        };
        Ok(Registration {
            path,
            stop,
            thread: Some(thread),
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for Registration {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        let _ = std::fs::remove_file(&self.path);
    }
}

fn answer_loop(listener: UnixListener, probe: Probe, stop: Arc<AtomicBool>) {
    while !stop.load(Ordering::Relaxed) {
        match listener.accept() {
            Ok((mut stream, _)) => {
                // One at a time: the answer is written in full or the reader loses
                // it after TIMEOUT, so a reader that never reads costs that much.
                let _ = stream.set_nonblocking(false);
                let _ = stream.set_write_timeout(Some(TIMEOUT));
                let json = serde_json::to_vec(&probe()).unwrap_or_default();
                let _ = stream.write_all(&json);
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => std::thread::sleep(POLL),
            Err(_) => std::thread::sleep(POLL * 10),
        }
    }
}

/// One status socket's answer.
#[derive(Debug)]
pub enum Listed {
    Running(Box<Status>),
    /// It answered, but not with a status (another version, or garbage).
    Unreadable {
        socket: PathBuf,
        why: String,
    },
}

/// Every instance registered in `dir`, by PID. With `sweep` (the directory is this
/// user's), sockets nobody listens on are removed.
pub fn list(dir: &Path, sweep: bool) -> Result<Vec<Listed>, RegistryError> {
    list_trusting(dir, sweep, None)
}

/// [`list`], and with `owner` the uid everything in `dir` must belong to: the
/// sockets' files, and the processes that answer on them (their peer credentials);
/// a socket that fails either is not asked at all, or its answer is dropped.
fn list_trusting(
    dir: &Path,
    sweep: bool,
    owner: Option<u32>,
) -> Result<Vec<Listed>, RegistryError> {
    let entries = std::fs::read_dir(dir).map_err(|source| RegistryError::Io {
        path: dir.to_path_buf(),
        source,
    })?;
    let mut found = Vec::new();
    for entry in entries.flatten() {
        let name = entry.file_name();
        let name = name.to_string_lossy();
        if !(name.starts_with(PREFIX) && name.ends_with(SUFFIX)) {
            continue;
        }
        let path = entry.path();
        if !entry.file_type().is_ok_and(|t| t.is_socket()) {
            continue;
        }
        if let Some(uid) = owner {
            use std::os::unix::fs::MetadataExt;
            if !entry.metadata().is_ok_and(|m| m.uid() == uid) {
                continue;
            }
        }
        match query_from(&path, owner) {
            Ok(status) => found.push(Listed::Running(Box::new(status))),
            Err(e) if is_stale(&e) => {
                if sweep {
                    let _ = std::fs::remove_file(&path);
                }
            }
            Err(e) => found.push(Listed::Unreadable {
                socket: path,
                why: e.to_string(),
            }),
        }
    }
    found.sort_by_key(|l| match l {
        Listed::Running(s) => u64::from(s.pid),
        Listed::Unreadable { .. } => u64::MAX,
    });
    Ok(found)
}

fn is_stale(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::ConnectionRefused | io::ErrorKind::NotFound
    )
}

/// What `hscm status` sees.
#[derive(Debug, Default)]
pub struct Running {
    /// Every instance, by PID.
    pub instances: Vec<Status>,
    /// Sockets that answered with something else than a status, and why.
    pub unreadable: Vec<(PathBuf, String)>,
}

/// Every instance `hscm status` sees: this user's (stale sockets removed) and, for
/// root, every other user's.
pub fn running() -> Result<Running, RegistryError> {
    let own = hscm_durable::runtime::dir()?;
    let mut dirs = vec![(own.clone(), true)];
    if rustix::process::geteuid().is_root() {
        dirs.extend(
            other_users_dirs()
                .into_iter()
                .filter(|d| *d != own)
                .map(|d| (d, false)),
        );
    }
    let (mut running, mut unreadable) = (Vec::new(), Vec::new());
    for (dir, own) in &dirs {
        let owner = if *own {
            None
        } else {
            match trusted_owner(dir) {
                Some(uid) => Some(uid),
                None => continue,
            }
        };
        let listed = match list_trusting(dir, *own, owner) {
            Ok(l) => l,
            Err(e) if *own => return Err(e),
            Err(_) => continue,
        };
        for l in listed {
            match l {
                Listed::Running(s) => running.push(*s),
                Listed::Unreadable { socket, why } => unreadable.push((socket, why)),
            }
        }
    }
    running.sort_by_key(|s| s.pid);
    Ok(Running {
        instances: running,
        unreadable,
    })
}

/// Where other instances may register: root's `hscm status` lists them too (root may
/// connect to their sockets; it removes nothing there).
pub fn other_users_dirs() -> Vec<std::path::PathBuf> {
    // System units' instances (root's directory without XDG_RUNTIME_DIR), then each
    // logged-in user's, then users' without a runtime directory.
    let mut dirs = vec![std::path::PathBuf::from("/run/hscm")];
    if let Ok(users) = std::fs::read_dir("/run/user") {
        dirs.extend(users.flatten().map(|u| u.path().join("hscm")));
    }
    if let Ok(tmp) = std::fs::read_dir(std::env::temp_dir()) {
        dirs.extend(
            tmp.flatten()
                .filter(|e| e.file_name().to_string_lossy().starts_with("hscm-"))
                .map(|e| e.path()),
        );
    }
    dirs.retain(|d| d.is_dir());
    dirs
}

/// The uid another user's registry directory belongs to, if root may trust it:
/// a real directory (no symlink), mode 0700, owned by the user its place names
/// (`/run/hscm`: root; `/run/user/UID/hscm`; `$TMPDIR/hscm-UID[-N]`). Anyone may make
/// a directory under /tmp named for someone else, or open to all: such a place
/// is stepped around, never read.
fn trusted_owner(dir: &Path) -> Option<u32> {
    use std::os::unix::fs::MetadataExt;
    let meta = std::fs::symlink_metadata(dir).ok()?;
    if !meta.is_dir() || meta.mode() & 0o077 != 0 {
        return None;
    }
    let named = if dir == Path::new("/run/hscm") {
        0
    } else if let Some(uid) = dir
        .file_name()
        .and_then(|n| n.to_str())
        .and_then(|n| n.strip_prefix("hscm-"))
    {
        // hscm-UID, or hscm-UID-N where another user had taken hscm-UID
        // (`hscm_durable::runtime`).
        uid.split('-').next()?.parse().ok()?
    } else {
        // /run/user/UID/hscm
        dir.parent()?.file_name()?.to_str()?.parse().ok()?
    };
    (meta.uid() == named).then_some(named)
}

/// The status one socket answers with.
pub fn query(socket: &Path) -> io::Result<Status> {
    query_from(socket, None)
}

/// [`query`], with one deadline for the whole answer (a socket that sends a byte
/// now and then cannot hold `hscm status` up), and with `owner` the uid the
/// answering process must run as (`SO_PEERCRED`; root's processes may answer in
/// any user's place only if that user is root).
fn query_from(socket: &Path, owner: Option<u32>) -> io::Result<Status> {
    let mut stream = UnixStream::connect(socket)?;
    if let Some(uid) = owner {
        let peer = rustix::net::sockopt::get_socket_peercred(&stream)?;
        if peer.uid.as_raw() != uid {
            return Err(io::Error::new(
                io::ErrorKind::PermissionDenied,
                format!(
                    "answered by uid {}, not by the directory's owner {uid}",
                    peer.uid.as_raw()
                ),
            ));
        }
    }
    let deadline = std::time::Instant::now() + TIMEOUT;
    let mut json = Vec::new();
    let mut buf = [0u8; 8192];
    loop {
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        if left.is_zero() {
            return Err(io::Error::new(
                io::ErrorKind::TimedOut,
                "no whole status within the deadline",
            ));
        }
        stream.set_read_timeout(Some(left))?;
        let n = stream.read(&mut buf)?;
        if n == 0 {
            break;
        }
        json.extend_from_slice(&buf[..n]);
        if json.len() as u64 > MAX_ANSWER {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                "status too large",
            ));
        }
    }
    serde_json::from_slice(&json).map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_registered_instance_is_listed_and_a_dead_one_is_swept() {
        let dir = tempfile::tempdir().unwrap();
        let probe: Probe = Arc::new(|| Status {
            pid: std::process::id(),
            frontend: "nbd".into(),
            ..Default::default()
        });
        let reg = Registration::start(dir.path(), "v", probe).unwrap();
        let mode = std::fs::metadata(reg.path()).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        // A socket whose server died: bound, then its listener dropped.
        let dead = dir.path().join("status-x-1.sock");
        drop(UnixListener::bind(&dead).unwrap());
        std::fs::write(dir.path().join("status-not-a-socket.sock"), b"").unwrap();
        let listed = list(dir.path(), true).unwrap();
        assert_eq!(listed.len(), 1, "{listed:?}");
        match &listed[0] {
            Listed::Running(s) => assert_eq!(s.frontend, "nbd"),
            other => panic!("{other:?}"),
        }
        assert!(!dead.exists(), "the dead instance's socket is removed");
        let path = reg.path().to_path_buf();
        drop(reg);
        assert!(!path.exists());
        assert!(list(dir.path(), true).unwrap().is_empty());
    }
}

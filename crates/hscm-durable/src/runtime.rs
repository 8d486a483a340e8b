//! Where a running hscm keeps its runtime files (logs, sockets, the records of what
//! it serves): a directory only its user can write, so that no one else can plant a
//! symlink where a log will be created, squat a socket's name, or read a log.
//!
//! The directory is `$XDG_RUNTIME_DIR/hscm` when that variable names a directory of
//! the user's, `/run/hscm` for root, and otherwise `$TMPDIR/hscm-UID` (as tmux and
//! ssh-agent do). It is created mode 0700; one that exists must be a real directory
//! (not a symlink), owned by the user, and closed to group and others, or it is
//! refused by name; in a shared `$TMPDIR`, where anyone may have made the name
//! first, the next free name `hscm-UID-N` is used instead. Files in it are created
//! without following symlinks.

use std::fs::File;
use std::io;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// Why a runtime directory or file cannot be used.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RuntimeError {
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("{path} is a symlink; hscm keeps its runtime files only in a real directory")]
    Symlink { path: PathBuf },
    #[error("{path} is not a directory")]
    NotDirectory { path: PathBuf },
    #[error("{path} belongs to uid {owner}, not to uid {uid}; hscm keeps its runtime files only in a directory of its user's")]
    NotOwned { path: PathBuf, owner: u32, uid: u32 },
    #[error(
        "{path} is mode {mode:04o}: others could write or read it (chmod 700 it, or remove it)"
    )]
    TooOpen { path: PathBuf, mode: u32 },
}

fn io_err(path: &Path) -> impl FnOnce(io::Error) -> RuntimeError + '_ {
    move |source| RuntimeError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// The runtime directory for this user (see the module's documentation), created if
/// missing and checked.
pub fn dir() -> Result<PathBuf, RuntimeError> {
    let uid = rustix::process::geteuid().as_raw();
    let path = match std::env::var_os("XDG_RUNTIME_DIR").map(PathBuf::from) {
        Some(xdg) if xdg.is_absolute() && owned_by(&xdg, uid) => xdg.join("hscm"),
        _ if uid == 0 => PathBuf::from("/run/hscm"),
        _ => return shared_tmp_dir(&std::env::temp_dir(), uid),
    };
    private_dir(&path)?;
    Ok(path)
}

/// How many names `$TMPDIR/hscm-UID[-N]` are tried before giving up.
const TMP_NAMES: u32 = 16;

/// The user's runtime directory in a shared temporary directory: `hscm-UID`, or,
/// where another user made that name first (or made it a symlink, or opened it to
/// others), the first of `hscm-UID-1`, `hscm-UID-2`... that is, or can be made,
/// this user's own: stepped around, not obeyed, and the same name on every call,
/// so every hscm of this user finds the others. Only when every name is taken is
/// the first one's problem the error.
fn shared_tmp_dir(tmp: &Path, uid: u32) -> Result<PathBuf, RuntimeError> {
    let mut first = None;
    for n in 0..TMP_NAMES {
        let name = if n == 0 {
            format!("hscm-{uid}")
        } else {
            format!("hscm-{uid}-{n}")
        };
        let path = tmp.join(name);
        match private_dir(&path) {
            Ok(()) => return Ok(path),
            Err(e) => {
                if n == 0 {
                    tracing::warn!("{e}; looking for another name beside it");
                }
                first.get_or_insert(e);
            }
        }
    }
    Err(first.expect("at least one name was tried"))
}

fn owned_by(path: &Path, uid: u32) -> bool {
    std::fs::metadata(path).is_ok_and(|m| m.is_dir() && m.uid() == uid)
}

/// Makes `path` a directory only this user may use (0700), or checks that it is one.
pub fn private_dir(path: &Path) -> Result<(), RuntimeError> {
    match std::fs::DirBuilder::new().mode(0o700).create(path) {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(io_err(path)(e)),
    }
    let meta = std::fs::symlink_metadata(path).map_err(io_err(path))?;
    let path = path.to_path_buf();
    if meta.file_type().is_symlink() {
        return Err(RuntimeError::Symlink { path });
    }
    if !meta.is_dir() {
        return Err(RuntimeError::NotDirectory { path });
    }
    let uid = rustix::process::geteuid().as_raw();
    if meta.uid() != uid {
        return Err(RuntimeError::NotOwned {
            path,
            owner: meta.uid(),
            uid,
        });
    }
    let mode = meta.permissions().mode() & 0o7777;
    if mode & 0o077 != 0 {
        return Err(RuntimeError::TooOpen { path, mode });
    }
    Ok(())
}

/// Creates `name` in `dir` for writing, mode 0600: a new file, never one that
/// exists, and never through a symlink. `name` must be a plain file name.
pub fn create_file(dir: &Path, name: &str) -> Result<(PathBuf, File), RuntimeError> {
    let path = dir.join(name);
    if name.contains('/') || name.is_empty() || name == "." || name == ".." {
        return Err(RuntimeError::Io {
            path,
            source: io::Error::new(io::ErrorKind::InvalidInput, "not a plain file name"),
        });
    }
    let file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .custom_flags(libc_nofollow())
        .open(&path)
        .map_err(io_err(&path))?;
    Ok((path, file))
}

/// Creates a new runtime file of this process, as [`create_file`] does, named
/// `PREFIX-STEM-PID.EXT` ([`file_name`]), or `PREFIX-STEM-PID-N.EXT` for the first N
/// free when an earlier process with the same PID (PIDs are reused) left its file
/// behind. An existing file is never opened or replaced.
pub fn create_fresh_file(
    dir: &Path,
    prefix: &str,
    stem: &str,
    ext: &str,
) -> Result<(PathBuf, File), RuntimeError> {
    const TRIES: u32 = 100;
    let base = file_name(prefix, stem, ext);
    let stem_pid = base.strip_suffix(&format!(".{ext}")).unwrap_or(&base);
    let mut n = 0;
    loop {
        let name = if n == 0 {
            base.clone()
        } else {
            format!("{stem_pid}-{n}.{ext}")
        };
        match create_file(dir, &name) {
            Err(RuntimeError::Io { source, .. })
                if source.kind() == io::ErrorKind::AlreadyExists && n < TRIES =>
            {
                n += 1
            }
            other => return other,
        }
    }
}

/// O_NOFOLLOW, from rustix (create_new already refuses a dangling symlink; this
/// keeps a final symlink from being followed whatever the other flags say).
fn libc_nofollow() -> i32 {
    rustix::fs::OFlags::NOFOLLOW.bits() as i32
}

/// A name for a runtime file of this process: `PREFIX-STEM-PID.EXT`, where STEM is
/// reduced to the characters safe in any file name.
pub fn file_name(prefix: &str, stem: &str, ext: &str) -> String {
    format!("{prefix}-{}-{}.{ext}", safe_stem(stem), std::process::id())
}

/// The stem a runtime file of the store at `path` is named by: its file name without
/// the extension, made safe ([`safe_stem`]); `volume` when it has none.
pub fn stem_of(path: &Path) -> String {
    path.file_stem()
        .map_or("volume".into(), |s| safe_stem(&s.to_string_lossy()))
}

/// `stem` with every character but ASCII letters, digits, `-` and `_` made `_`, and
/// at most 64 of them: a part of a file name that cannot climb out of its directory.
pub fn safe_stem(stem: &str) -> String {
    stem.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .take(64)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_private_dir_is_made_0700_and_an_open_one_is_refused() {
        let root = tempfile::tempdir().unwrap();
        let d = root.path().join("rt");
        private_dir(&d).unwrap();
        let mode = std::fs::metadata(&d).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o700);
        private_dir(&d).expect("an existing private one is fine");
        std::fs::set_permissions(&d, std::fs::Permissions::from_mode(0o777)).unwrap();
        let err = private_dir(&d).unwrap_err();
        assert!(matches!(err, RuntimeError::TooOpen { .. }), "{err}");
    }

    #[test]
    fn a_file_left_by_an_earlier_process_with_our_pid_is_stepped_around() {
        let root = tempfile::tempdir().unwrap();
        let d = root.path().join("rt");
        private_dir(&d).unwrap();
        let stale = d.join(file_name("mount", "v", "log"));
        std::fs::write(&stale, b"an earlier life").unwrap();
        let (path, _f) = create_fresh_file(&d, "mount", "v", "log").unwrap();
        assert_ne!(path, stale);
        assert!(
            path.to_string_lossy().ends_with("-1.log"),
            "{}",
            path.display()
        );
        assert_eq!(std::fs::read(&stale).unwrap(), b"an earlier life");
        let (next, _g) = create_fresh_file(&d, "mount", "v", "log").unwrap();
        assert!(
            next.to_string_lossy().ends_with("-2.log"),
            "{}",
            next.display()
        );
    }

    /// Someone else's `hscm-UID` (here: a symlink and an open directory, which
    /// this user cannot take either) is stepped around, the same way every time.
    #[test]
    fn a_name_taken_in_a_shared_tmp_is_stepped_around() {
        let tmp = tempfile::tempdir().unwrap();
        let uid = rustix::process::geteuid().as_raw();
        std::os::unix::fs::symlink("/", tmp.path().join(format!("hscm-{uid}"))).unwrap();
        let open = tmp.path().join(format!("hscm-{uid}-1"));
        std::fs::create_dir(&open).unwrap();
        std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o777)).unwrap();
        let got = shared_tmp_dir(tmp.path(), uid).unwrap();
        assert_eq!(got, tmp.path().join(format!("hscm-{uid}-2")));
        assert_eq!(
            shared_tmp_dir(tmp.path(), uid).unwrap(),
            got,
            "the same every time"
        );
        let mode = std::fs::metadata(&got).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o700);
    }

    #[test]
    fn a_symlinked_dir_is_refused() {
        let root = tempfile::tempdir().unwrap();
        let real = root.path().join("real");
        std::fs::DirBuilder::new()
            .mode(0o700)
            .create(&real)
            .unwrap();
        let link = root.path().join("link");
        std::os::unix::fs::symlink(&real, &link).unwrap();
        let err = private_dir(&link).unwrap_err();
        assert!(matches!(err, RuntimeError::Symlink { .. }), "{err}");
    }

    #[test]
    fn a_file_is_never_created_through_a_planted_symlink_or_over_an_existing_one() {
        let root = tempfile::tempdir().unwrap();
        let victim = root.path().join("victim");
        std::fs::write(&victim, b"precious").unwrap();
        let d = root.path().join("rt");
        private_dir(&d).unwrap();
        std::os::unix::fs::symlink(&victim, d.join("x.log")).unwrap();
        assert!(create_file(&d, "x.log").is_err());
        assert_eq!(std::fs::read(&victim).unwrap(), b"precious");
        std::fs::write(d.join("y.log"), b"older").unwrap();
        assert!(create_file(&d, "y.log").is_err(), "not truncated");
        assert_eq!(std::fs::read(d.join("y.log")).unwrap(), b"older");
        let (path, _f) = create_file(&d, "z.log").unwrap();
        let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        assert!(create_file(&d, "../escape").is_err());
    }

    #[test]
    fn a_stores_stem_is_its_safe_file_name_without_extension() {
        assert_eq!(stem_of(Path::new("/srv/data.hscm")), "data");
        assert_eq!(stem_of(Path::new("/srv/my vol.hscm")), "my_vol");
        assert_eq!(stem_of(Path::new("/")), "volume");
    }

    #[test]
    fn file_names_keep_only_safe_characters() {
        let n = file_name("mount", "my vol/../x", "log");
        assert!(n.starts_with("mount-my_vol____x-"), "{n}");
        assert!(!n.contains('/'));
    }
}

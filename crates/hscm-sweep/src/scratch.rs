//! Nothing left behind: scratch directories and half-written outputs are removed,
//! and what a benchmark mounted is unmounted, on success, on error and on
//! SIGINT/SIGTERM.
//!
//! Every [`Scratch`] directory, every [`OutputFile`] not yet committed, every mount
//! a benchmark made ([`unmount_on_signal`]) and every system setting it changed
//! ([`restore_on_signal`]) is recorded in one list. The first one recorded installs a
//! handler thread for SIGINT and SIGTERM that undoes the list, newest first (so a
//! mount goes before the scratch directory it lies in), and ends the process with
//! 128 + the signal's number, as a shell expects of a command stopped by that signal.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, Once};
use std::time::Duration;

use anyhow::{Context, Result};

/// What a signal must undo before the process ends.
#[derive(Debug, PartialEq)]
enum Undo {
    /// A file or directory tree to remove.
    Remove(PathBuf),
    /// A mount to detach (lazily: a program still inside it does not keep it).
    Unmount(PathBuf),
    /// A setting to put back: these bytes written to this file.
    Write(PathBuf, String),
}

/// What to undo if the process is stopped by a signal, oldest first.
static LIVE: Mutex<Vec<Undo>> = Mutex::new(Vec::new());
static HANDLER: Once = Once::new();
/// Set once a signal arrived: the handler is undoing the list and will end the process.
static STOPPING: AtomicBool = AtomicBool::new(false);

fn track(undo: Undo) {
    HANDLER.call_once(|| {
        // Without the handler a signal still stops the command, only without cleaning.
        if let Ok(mut signals) = signal_hook::iterator::Signals::new([
            signal_hook::consts::SIGINT,
            signal_hook::consts::SIGTERM,
        ]) {
            let _ = std::thread::Builder::new()
                .name("hscm-cleanup".into())
                .spawn(move || {
                    if let Some(sig) = signals.forever().next() {
                        STOPPING.store(true, Ordering::SeqCst);
                        let name = if sig == signal_hook::consts::SIGINT {
                            "SIGINT"
                        } else {
                            "SIGTERM"
                        };
                        eprintln!(
                            "hscm: stopped by {name}: unmounting and removing what it made, then exiting"
                        );
                        undo_all_tracked();
                        std::process::exit(128 + sig);
                    }
                });
        }
    });
    lock_live().push(undo);
}

/// Where a signal is being handled, waits for the handler to end the process with the
/// signal's exit status: the command's own ending meanwhile (often an error, as what
/// it worked in is removed under it) must not win the race with a status of its own.
/// Returns at once otherwise, or if the handler has not ended it within a minute.
pub fn let_a_signal_end_the_process() {
    let mut waited = Duration::ZERO;
    while STOPPING.load(Ordering::SeqCst) && waited < Duration::from_secs(60) {
        std::thread::sleep(Duration::from_millis(50));
        waited += Duration::from_millis(50);
    }
}

fn untrack(undo: &Undo) {
    lock_live().retain(|u| u != undo);
}

fn lock_live() -> std::sync::MutexGuard<'static, Vec<Undo>> {
    // A panic elsewhere while holding it leaves a list that is still right.
    LIVE.lock().unwrap_or_else(|e| e.into_inner())
}

fn undo_all_tracked() {
    let undos: Vec<Undo> = lock_live().drain(..).rev().collect();
    for u in undos {
        match u {
            Undo::Remove(p) => remove(&p),
            Undo::Unmount(p) => {
                if let Err(e) = rustix::mount::unmount(&p, rustix::mount::UnmountFlags::DETACH) {
                    eprintln!("hscm: unmounting {}: {e}", p.display());
                }
            }
            Undo::Write(p, bytes) => {
                if let Err(e) = std::fs::write(&p, bytes) {
                    eprintln!("hscm: putting {} back: {e}", p.display());
                }
            }
        }
    }
}

/// Records a mount at `at` that a signal must detach before the process ends (the
/// caller unmounts it itself otherwise, then calls [`mounted_no_more`]).
pub fn unmount_on_signal(at: &Path) {
    track(Undo::Unmount(at.to_path_buf()));
}

/// The mount at `at` is gone: a signal leaves it alone.
pub fn mounted_no_more(at: &Path) {
    untrack(&Undo::Unmount(at.to_path_buf()));
}

/// Records a system setting a signal must put back: `bytes` written to `file` (the
/// caller puts it back itself otherwise, then calls [`restored`]).
pub fn restore_on_signal(file: &Path, bytes: &str) {
    track(Undo::Write(file.to_path_buf(), bytes.to_string()));
}

/// The setting in `file` is back as it was: a signal leaves it alone.
pub fn restored(file: &Path) {
    lock_live().retain(|u| !matches!(u, Undo::Write(p, _) if p == file));
}

/// Removes a file or a directory tree. Benchmark threads may still be creating files
/// in it, so a tree that is not empty yet is tried a few times.
fn remove(p: &Path) {
    for _ in 0..5 {
        let r = if p.is_dir() {
            std::fs::remove_dir_all(p)
        } else {
            std::fs::remove_file(p)
        };
        if r.is_ok() || !p.exists() {
            return;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

/// A scratch directory, removed when dropped or when a signal stops the process.
pub struct Scratch {
    dir: tempfile::TempDir,
}

impl Scratch {
    /// A fresh directory named `.hscm-<purpose>-XXXXXX` under `parent`, or under the
    /// system temporary directory (`$TMPDIR`, else /tmp) when none is given.
    pub fn new(purpose: &str, parent: Option<&Path>) -> Result<Scratch> {
        let parent = parent.map_or_else(std::env::temp_dir, Path::to_path_buf);
        let dir = tempfile::Builder::new()
            .prefix(&format!(".hscm-{purpose}-"))
            .tempdir_in(&parent)
            .with_context(|| format!("cannot make a scratch directory in {}", parent.display()))?;
        track(Undo::Remove(dir.path().to_path_buf()));
        Ok(Scratch { dir })
    }

    pub fn path(&self) -> &Path {
        self.dir.path()
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        // Removed before it leaves the list, so a signal in between still removes it.
        remove(self.dir.path());
        untrack(&Undo::Remove(self.dir.path().to_path_buf()));
    }
}

/// An output file written under a temporary name beside its destination and renamed
/// into place by [`OutputFile::commit`]; dropped uncommitted (an error, a full disk), or
/// stopped by a signal, it leaves nothing.
pub struct OutputFile {
    tmp: Option<tempfile::NamedTempFile>,
    dest: PathBuf,
}

impl OutputFile {
    pub fn create(dest: &Path) -> Result<OutputFile> {
        let parent = match dest.parent() {
            Some(p) if !p.as_os_str().is_empty() => p,
            _ => Path::new("."),
        };
        let name = dest
            .file_name()
            .with_context(|| format!("{} names no file", dest.display()))?;
        let tmp = tempfile::Builder::new()
            .prefix(&format!(".{}.", name.to_string_lossy()))
            .suffix(".partial")
            .tempfile_in(parent)
            .with_context(|| format!("cannot create {}", dest.display()))?;
        track(Undo::Remove(tmp.path().to_path_buf()));
        Ok(OutputFile {
            tmp: Some(tmp),
            dest: dest.to_path_buf(),
        })
    }

    /// A handle to write through (it shares the temporary file's offset).
    pub fn file(&self) -> Result<File> {
        self.tmp
            .as_ref()
            .expect("present until commit")
            .as_file()
            .try_clone()
            .with_context(|| format!("cannot write {}", self.dest.display()))
    }

    /// Makes the written bytes durable and gives the file its real name.
    pub fn commit(mut self) -> Result<()> {
        let tmp = self.tmp.take().expect("committed once");
        let tmp_path = tmp.path().to_path_buf();
        tmp.as_file()
            .sync_all()
            .with_context(|| format!("cannot write {}", self.dest.display()))?;
        let result = tmp
            .persist(&self.dest)
            .map(drop)
            .with_context(|| format!("cannot write {}", self.dest.display()));
        untrack(&Undo::Remove(tmp_path));
        result
    }
}

impl Drop for OutputFile {
    fn drop(&mut self) {
        if let Some(tmp) = self.tmp.take() {
            let p = tmp.path().to_path_buf();
            drop(tmp);
            untrack(&Undo::Remove(p));
        }
    }
}

/// Writes `bytes` to `dest` through an [`OutputFile`].
pub fn write_output(dest: &Path, bytes: &[u8]) -> Result<()> {
    use std::io::Write;
    let out = OutputFile::create(dest)?;
    out.file()?
        .write_all(bytes)
        .with_context(|| format!("cannot write {}", dest.display()))?;
    out.commit()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scratch_goes_when_dropped() {
        let parent = tempfile::tempdir().unwrap();
        let s = Scratch::new("test", Some(parent.path())).unwrap();
        std::fs::write(s.path().join("f"), b"x").unwrap();
        assert!(lock_live().contains(&Undo::Remove(s.path().to_path_buf())));
        let p = s.path().to_path_buf();
        drop(s);
        assert!(!p.exists());
        assert!(!lock_live().contains(&Undo::Remove(p.clone())));
    }

    #[test]
    fn an_uncommitted_output_leaves_nothing_and_a_committed_one_its_name_only() {
        let dir = tempfile::tempdir().unwrap();
        let dest = dir.path().join("out.txt");
        let o = OutputFile::create(&dest).unwrap();
        std::io::Write::write_all(&mut o.file().unwrap(), b"half").unwrap();
        drop(o);
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
        write_output(&dest, b"whole").unwrap();
        assert_eq!(std::fs::read(&dest).unwrap(), b"whole");
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
    }
}

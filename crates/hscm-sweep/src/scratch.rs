//! Nothing left behind: scratch directories and half-written outputs are removed on
//! success, on error and on SIGINT/SIGTERM.
//!
//! Every [`Scratch`] directory and every [`OutputFile`] not yet committed is recorded
//! in one list. The first one made installs a handler thread for SIGINT and SIGTERM
//! that removes whatever the list holds and ends the process with 128 + the signal's
//! number, as a shell expects of a command stopped by that signal.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, Once};

use anyhow::{Context, Result};

/// Paths to remove if the process is stopped by a signal.
static LIVE: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());
static HANDLER: Once = Once::new();

fn track(path: &Path) {
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
                        let name = if sig == signal_hook::consts::SIGINT {
                            "SIGINT"
                        } else {
                            "SIGTERM"
                        };
                        eprintln!(
                            "hscm: stopped by {name}: removing the scratch files it made, then exiting"
                        );
                        remove_all_tracked();
                        std::process::exit(128 + sig);
                    }
                });
        }
    });
    lock_live().push(path.to_path_buf());
}

fn untrack(path: &Path) {
    lock_live().retain(|p| p != path);
}

fn lock_live() -> std::sync::MutexGuard<'static, Vec<PathBuf>> {
    // A panic elsewhere while holding it leaves a list that is still right.
    LIVE.lock().unwrap_or_else(|e| e.into_inner())
}

fn remove_all_tracked() {
    for p in lock_live().drain(..) {
        remove(&p);
    }
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
        track(dir.path());
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
        untrack(self.dir.path());
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
        track(tmp.path());
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
        untrack(&tmp_path);
        result
    }
}

impl Drop for OutputFile {
    fn drop(&mut self) {
        if let Some(tmp) = self.tmp.take() {
            let p = tmp.path().to_path_buf();
            drop(tmp);
            untrack(&p);
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
        assert!(lock_live().contains(&s.path().to_path_buf()));
        let p = s.path().to_path_buf();
        drop(s);
        assert!(!p.exists());
        assert!(!lock_live().contains(&p));
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

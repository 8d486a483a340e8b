//! The files an engine keeps on one device, as a trait, so the same engine code runs on
//! a real directory and on a model that cuts the power (`testing::FaultyDisks`).
//!
//! What the engine may assume (and the model grants no more): a `write_at` that
//! returned is visible to reads but may sit in a volatile cache; `sync_data` makes a
//! file's returned writes and its length durable; creating, removing or replacing a
//! name is durable only after `sync_dir`, except [`Media::replace`], which is atomic
//! and durable when it returns. After a power cut, each unsynced write survives whole,
//! not at all, or torn at a 512-byte boundary.

use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// One device's files: a flat namespace.
pub trait Media: Send + Sync {
    /// Where it is, for messages (a directory path).
    fn describe(&self) -> String;
    /// Opens `name`, creating it empty if `create` and it does not exist.
    fn open(&self, name: &str, create: bool) -> io::Result<Arc<dyn MediaFile>>;
    /// The whole of `name`; `NotFound` if it does not exist.
    fn read(&self, name: &str) -> io::Result<Vec<u8>>;
    fn exists(&self, name: &str) -> bool;
    /// Every name, in no particular order.
    fn list(&self) -> io::Result<Vec<String>>;
    /// Removes `name` (durable after [`Media::sync_dir`]).
    fn remove(&self, name: &str) -> io::Result<()>;
    /// Replaces `name` with `bytes` atomically and durably: a reader after a power cut
    /// finds the old contents or the new, never a mix.
    fn replace(&self, name: &str, bytes: &[u8]) -> io::Result<()>;
    /// Makes every create and remove so far durable.
    fn sync_dir(&self) -> io::Result<()>;
}

/// One open file.
pub trait MediaFile: Send + Sync {
    fn len(&self) -> io::Result<u64>;
    fn is_empty(&self) -> io::Result<bool> {
        Ok(self.len()? == 0)
    }
    /// Cuts or extends the file (durable after [`MediaFile::sync_data`]).
    fn set_len(&self, len: u64) -> io::Result<()>;
    fn write_all_at(&self, bytes: &[u8], offset: u64) -> io::Result<()>;
    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()>;
    /// Makes every returned write, and the length, durable (`fdatasync`).
    fn sync_data(&self) -> io::Result<()>;
}

/// A directory of a real file system.
#[derive(Debug, Clone)]
pub struct DirMedia {
    dir: PathBuf,
}

impl DirMedia {
    pub fn new(dir: impl Into<PathBuf>) -> DirMedia {
        DirMedia { dir: dir.into() }
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    fn sync_dir_at(dir: &Path) -> io::Result<()> {
        File::open(dir)?.sync_all()
    }
}

impl Media for DirMedia {
    fn describe(&self) -> String {
        self.dir.display().to_string()
    }

    fn open(&self, name: &str, create: bool) -> io::Result<Arc<dyn MediaFile>> {
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(create)
            .truncate(false)
            .open(self.dir.join(name))?;
        Ok(Arc::new(file))
    }

    fn read(&self, name: &str) -> io::Result<Vec<u8>> {
        std::fs::read(self.dir.join(name))
    }

    fn exists(&self, name: &str) -> bool {
        self.dir.join(name).is_file()
    }

    fn list(&self) -> io::Result<Vec<String>> {
        let mut names = Vec::new();
        for entry in std::fs::read_dir(&self.dir)? {
            names.push(entry?.file_name().to_string_lossy().into_owned());
        }
        Ok(names)
    }

    fn remove(&self, name: &str) -> io::Result<()> {
        std::fs::remove_file(self.dir.join(name))
    }

    fn replace(&self, name: &str, bytes: &[u8]) -> io::Result<()> {
        let tmp = self.dir.join(format!("{name}.tmp"));
        std::fs::write(&tmp, bytes)?;
        File::open(&tmp)?.sync_all()?;
        std::fs::rename(&tmp, self.dir.join(name))?;
        Self::sync_dir_at(&self.dir)
    }

    fn sync_dir(&self) -> io::Result<()> {
        Self::sync_dir_at(&self.dir)
    }
}

impl MediaFile for File {
    fn len(&self) -> io::Result<u64> {
        Ok(self.metadata()?.len())
    }

    fn set_len(&self, len: u64) -> io::Result<()> {
        File::set_len(self, len)
    }

    fn write_all_at(&self, bytes: &[u8], offset: u64) -> io::Result<()> {
        FileExt::write_all_at(self, bytes, offset)
    }

    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        FileExt::read_exact_at(self, buf, offset)
    }

    fn sync_data(&self) -> io::Result<()> {
        File::sync_data(self)
    }
}

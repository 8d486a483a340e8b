//! An append-only file on one device, with group commit and an activity record.

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use parking_lot::Mutex;

use crate::{Error, Result};

/// A device's busy intervals (nanoseconds since the store's epoch), recorded around
/// every system call that touches the device's files.
pub(crate) struct Activity {
    epoch: Instant,
    spans: Mutex<Vec<(u64, u64)>>,
}

impl Activity {
    pub fn new(epoch: Instant) -> Activity {
        Activity {
            epoch,
            spans: Mutex::new(Vec::new()),
        }
    }

    pub fn now_ns(&self) -> u64 {
        self.epoch.elapsed().as_nanos() as u64
    }

    /// Runs `f`, recording the time it took as busy.
    pub fn busy<T>(&self, f: impl FnOnce() -> T) -> T {
        let begin = self.now_ns();
        let out = f();
        let end = self.now_ns();
        self.spans.lock().push((begin, end));
        out
    }

    pub fn spans(&self) -> Vec<(u64, u64)> {
        self.spans.lock().clone()
    }
}

struct Tail {
    /// Next append offset.
    end: u64,
}

/// An append-only log file. Appends are serialised; syncs are shared by every writer
/// whose bytes they cover (group commit).
pub(crate) struct LogFile {
    path: PathBuf,
    file: File,
    tail: Mutex<Tail>,
    /// Bytes known durable; the lock also serialises syncs.
    synced: Mutex<u64>,
    activity: Arc<Activity>,
}

impl LogFile {
    /// Opens (creating if asked) `path` whose first `len` bytes are valid; anything
    /// after is cut off.
    pub fn open(path: &Path, len: u64, create: bool, activity: Arc<Activity>) -> Result<LogFile> {
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(create)
            .truncate(false)
            .open(path)
            .map_err(|e| Error::io(format!("opening {}", path.display()), e))?;
        let actual = file
            .metadata()
            .map_err(|e| Error::io(format!("{}: stat", path.display()), e))?
            .len();
        if actual != len {
            file.set_len(len)
                .and_then(|_| file.sync_data())
                .map_err(|e| Error::io(format!("{}: cutting a torn tail", path.display()), e))?;
        }
        Ok(LogFile {
            path: path.to_path_buf(),
            file,
            tail: Mutex::new(Tail { end: len }),
            synced: Mutex::new(len),
            activity,
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    pub fn len(&self) -> u64 {
        self.tail.lock().end
    }

    /// Appends the bytes `fill(offset)` returns; `fill` runs under the append lock so
    /// anything it numbers (sequence numbers) is in file order. Returns the offset and
    /// the end of the appended bytes. Not durable until [`Self::sync_to`].
    pub fn append<T>(&self, fill: impl FnOnce(u64) -> (Vec<u8>, T)) -> Result<(u64, u64, T)> {
        let mut tail = self.tail.lock();
        let (bytes, extra) = fill(tail.end);
        let (at, end) = self.write_tail(&mut tail, &bytes)?;
        Ok((at, end, extra))
    }

    /// Appends `bytes` as they are; returns their offset and end.
    pub fn append_bytes(&self, bytes: &[u8]) -> Result<(u64, u64)> {
        self.write_tail(&mut self.tail.lock(), bytes)
    }

    fn write_tail(&self, tail: &mut Tail, bytes: &[u8]) -> Result<(u64, u64)> {
        let at = tail.end;
        self.activity
            .busy(|| self.file.write_all_at(bytes, at))
            .map_err(|e| Error::io(format!("{}: append at byte {at}", self.path.display()), e))?;
        tail.end = at + bytes.len() as u64;
        Ok((at, tail.end))
    }

    /// Returns once every byte before `end` is durable.
    pub fn sync_to(&self, end: u64) -> Result<()> {
        let mut synced = self.synced.lock();
        if *synced >= end {
            return Ok(());
        }
        let target = self.tail.lock().end;
        self.activity
            .busy(|| self.file.sync_data())
            .map_err(|e| Error::io(format!("{}: fdatasync", self.path.display()), e))?;
        *synced = target;
        Ok(())
    }

    pub fn read_at(&self, offset: u64, len: usize) -> Result<Vec<u8>> {
        let mut buf = vec![0u8; len];
        self.activity
            .busy(|| self.file.read_exact_at(&mut buf, offset))
            .map_err(|e| {
                Error::io(
                    format!("{}: reading {len} bytes at {offset}", self.path.display()),
                    e,
                )
            })?;
        Ok(buf)
    }
}

//! An append-only file on one device, with group commit and an activity record.

use std::sync::Arc;
use std::time::Instant;

use hscm_durable::{GroupCommit, Media, MediaFile, Poison};
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

/// One device as the logs on it see it: its files, its busy record, and the store's
/// poison (a failed sync on any device refuses writes on all of them).
#[derive(Clone)]
pub(crate) struct Disk {
    pub media: Arc<dyn Media>,
    pub activity: Arc<Activity>,
    pub poison: Arc<Poison>,
}

impl Disk {
    /// `name` on this device, for messages.
    pub fn path(&self, name: &str) -> String {
        format!("{}/{name}", self.media.describe())
    }

    /// A whole file (empty if it has no bytes).
    pub fn read(&self, name: &str) -> Result<Vec<u8>> {
        self.activity
            .busy(|| self.media.read(name))
            .map_err(|e| Error::io(format!("reading {}", self.path(name)), e))
    }

    /// Removes `name`; durable after [`Disk::sync_names`].
    pub fn remove(&self, name: &str) -> Result<()> {
        self.media
            .remove(name)
            .map_err(|e| Error::io(format!("removing {}", self.path(name)), e))
    }

    /// Makes the device's creates and removes durable.
    pub fn sync_names(&self) -> Result<()> {
        self.activity.busy(|| self.media.sync_dir()).map_err(|e| {
            Error::io(
                format!("syncing the directory {}", self.media.describe()),
                e,
            )
        })
    }
}

/// Whether a log holds acknowledged writes (its name must survive a power cut) or
/// volatile copies.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Keep {
    Durable,
    Volatile,
}

/// An append-only log file. Appends are serialised; syncs are shared by every writer
/// whose bytes they cover (hscm_durable::GroupCommit, tickets being end offsets).
pub(crate) struct LogFile {
    name: String,
    path: String,
    disk: Disk,
    file: Arc<dyn MediaFile>,
    tail: Mutex<Tail>,
    commit: GroupCommit,
}

impl LogFile {
    /// Opens `name` on `disk`, whose first `len` bytes are valid (anything after is cut
    /// off), or creates it empty: a new durable log's name is made durable before any
    /// write to it can be acknowledged.
    pub fn open(disk: &Disk, name: &str, len: u64, create: bool, keep: Keep) -> Result<LogFile> {
        let path = disk.path(name);
        let existed = disk.media.exists(name);
        let file = disk
            .activity
            .busy(|| disk.media.open(name, create))
            .map_err(|e| Error::io(format!("opening {path}"), e))?;
        let actual = file
            .len()
            .map_err(|e| Error::io(format!("{path}: stat"), e))?;
        if actual != len {
            file.set_len(len)
                .and_then(|_| file.sync_data())
                .map_err(|e| Error::io(format!("{path}: cutting a torn tail"), e))?;
        }
        if !existed && keep == Keep::Durable {
            disk.sync_names()?;
        }
        Ok(LogFile {
            name: name.to_string(),
            path,
            disk: disk.clone(),
            file,
            tail: Mutex::new(Tail { end: len }),
            commit: GroupCommit::new(len),
        })
    }

    /// The file's name on its device.
    pub fn name(&self) -> &str {
        &self.name
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
        self.disk
            .activity
            .busy(|| self.file.write_all_at(bytes, at))
            .map_err(|e| Error::io(format!("{}: append at byte {at}", self.path), e))?;
        tail.end = at + bytes.len() as u64;
        Ok((at, tail.end))
    }

    /// Returns once every byte before `end` is durable.
    pub fn sync_to(&self, end: u64) -> Result<()> {
        let what = || format!("{}: fdatasync", self.path);
        let issued = || self.tail.lock().end;
        let sync = || self.disk.activity.busy(|| self.file.sync_data());
        self.commit
            .wait(end, &self.disk.poison, what, issued, sync)
            .map_err(Error::from)
    }

    pub fn read_at(&self, offset: u64, len: usize) -> Result<Vec<u8>> {
        let mut buf = vec![0u8; len];
        self.disk
            .activity
            .busy(|| self.file.read_exact_at(&mut buf, offset))
            .map_err(|e| Error::io(format!("{}: reading {len} bytes at {offset}", self.path), e))?;
        Ok(buf)
    }
}

//! Directory listings, a page at a time from the live directory. An open
//! directory handle holds two names, never a copy of the directory: the name its
//! last reply ended with (where a reader resumes: the kernel asks for as many
//! bytes as the reader's buffer holds, and a `linux_dirent64` is smaller than a
//! `fuse_dirent`, so a reader consumes whole replies) and the name before that
//! reply's first entry (to resume inside it, for a reader with a buffer smaller
//! than a page). A thousand opens of a large directory cost a thousand small
//! cursors, and the directory can change while it is listed: resuming after a
//! name lists every entry present throughout exactly once.
//!
//! Offsets: 1 is ".", 2 is "..", and the k-th entry in name order is 2 + k, as
//! counted when it was sent. An offset inside the last reply is found again by
//! counting from its start; one the handle did not send last (a `seekdir` to an
//! old `telldir`) resumes after the entry at that position now.

use std::collections::HashMap;
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::sync::atomic::{AtomicU64, Ordering};

use fuser::{Generation, INodeNo, ReplyDirectory, ReplyDirectoryPlus};
use hscm_fs::{FileSystem, Kind};
use parking_lot::Mutex;

use crate::convert::{file_attr, file_type};
use crate::{Fuse, TTL};

/// A directory reply being filled: names only (readdir), or names with what a
/// lookup of each would answer (readdirplus: `ls -l` and `find` then make no
/// lookup per entry).
pub(crate) trait Listing {
    /// Adds an entry; Some(true) when the reply is full (the entry not added),
    /// None when the entry went meanwhile (skipped).
    fn add_entry(
        &mut self,
        fs: &FileSystem,
        ino: u64,
        offset: u64,
        kind: Kind,
        name: &[u8],
    ) -> Option<bool>;

    /// Sends the filled reply, or the error.
    fn answer(self, listed: Result<(), hscm_fs::Error>);
}

impl Listing for ReplyDirectory {
    fn add_entry(
        &mut self,
        _: &FileSystem,
        ino: u64,
        offset: u64,
        kind: Kind,
        name: &[u8],
    ) -> Option<bool> {
        Some(self.add(
            INodeNo(ino),
            offset,
            file_type(kind),
            OsStr::from_bytes(name),
        ))
    }

    fn answer(self, listed: Result<(), hscm_fs::Error>) {
        match listed {
            Ok(()) => self.ok(),
            Err(e) => self.error(crate::convert::errno(e)),
        }
    }
}

impl Listing for ReplyDirectoryPlus {
    fn add_entry(
        &mut self,
        fs: &FileSystem,
        ino: u64,
        offset: u64,
        _: Kind,
        name: &[u8],
    ) -> Option<bool> {
        let attr = fs.getattr(ino).ok()?;
        Some(self.add(
            INodeNo(ino),
            offset,
            OsStr::from_bytes(name),
            &TTL,
            &file_attr(&attr),
            Generation(0),
        ))
    }

    fn answer(self, listed: Result<(), hscm_fs::Error>) {
        match listed {
            Ok(()) => self.ok(),
            Err(e) => self.error(crate::convert::errno(e)),
        }
    }
}

/// Open directory handles one mount keeps at most; past it opendir fails with
/// EMFILE, so no peer can make the daemon's memory grow without bound.
pub(crate) const MAX_OPEN_DIRS: usize = 16_384;

/// Entries read from the file system per step of a reply (a reply of the
/// kernel's 4 KiB holds about a hundred).
const PAGE: usize = 256;

const DOT: u64 = 1;
const DOT_DOT: u64 = 2;

/// What one open directory handle remembers of its last reply.
#[derive(Default)]
struct Cursor {
    /// The offset and name of the entry before the reply's first (None: it
    /// began with the directory's first entry).
    first: (u64, Option<Vec<u8>>),
    /// The offset and name of its last entry.
    last: Option<(u64, Vec<u8>)>,
}

/// Where a listing resumes.
enum Resume {
    After(Option<Vec<u8>>),
    /// Count this many entries from after the name first.
    Count(Option<Vec<u8>>, u64),
    /// An offset the handle does not know.
    Position,
}

/// The cursors of open directory handles.
#[derive(Default)]
pub(crate) struct Dirs {
    next: AtomicU64,
    open: Mutex<HashMap<u64, Cursor>>,
}

impl Dirs {
    /// A new handle, or None when the mount has [`MAX_OPEN_DIRS`] open.
    pub(crate) fn open(&self) -> Option<u64> {
        let mut open = self.open.lock();
        if open.len() >= MAX_OPEN_DIRS {
            return None;
        }
        let fh = self.next.fetch_add(1, Ordering::Relaxed) + 1;
        open.insert(fh, Cursor::default());
        Some(fh)
    }

    pub(crate) fn close(&self, fh: u64) {
        self.open.lock().remove(&fh);
    }

    fn resume(&self, fh: u64, offset: u64) -> Resume {
        let open = self.open.lock();
        let Some(c) = open.get(&fh) else {
            return Resume::Position;
        };
        match &c.last {
            Some((o, name)) if *o == offset => Resume::After(Some(name.clone())),
            _ if c.first.0 == offset => Resume::After(c.first.1.clone()),
            Some((o, _)) if c.first.0 < offset && offset < *o => {
                Resume::Count(c.first.1.clone(), offset - c.first.0)
            }
            _ => Resume::Position,
        }
    }

    fn sent(&self, fh: u64, first: (u64, Option<Vec<u8>>), last: Option<(u64, Vec<u8>)>) {
        if let Some(c) = self.open.lock().get_mut(&fh) {
            if last.is_some() {
                *c = Cursor { first, last };
            }
        }
    }
}

impl Fuse {
    /// Answers a readdir or readdirplus of handle `fh` of directory `dir` from
    /// `offset`, counted as one READDIR.
    pub(crate) fn list_and_answer(&self, dir: u64, fh: u64, offset: u64, mut reply: impl Listing) {
        let listed = self.stats.time(
            crate::stats::READDIR,
            || self.list(dir, fh, offset, &mut reply),
            |_| 0,
        );
        reply.answer(listed)
    }

    /// Fills a readdir or readdirplus reply for handle `fh` of directory `dir`
    /// from `offset`.
    pub(crate) fn list(
        &self,
        dir: u64,
        fh: u64,
        offset: u64,
        reply: &mut impl Listing,
    ) -> Result<(), hscm_fs::Error> {
        let fs = &*self.fs;
        let mut at = offset;
        if at < DOT {
            if reply.add_entry(fs, dir, DOT, Kind::Dir, b".") != Some(false) {
                return Ok(());
            }
            at = DOT;
        }
        if at < DOT_DOT {
            let parent = self.fs.parent_of(dir).unwrap_or(dir);
            if reply.add_entry(fs, parent, DOT_DOT, Kind::Dir, b"..") != Some(false) {
                return Ok(());
            }
            at = DOT_DOT;
        }
        let mut after = match at {
            DOT_DOT => None,
            _ => match self.dirs.resume(fh, at) {
                Resume::After(name) => name,
                Resume::Count(from, k) => self.name_after(dir, from, k)?,
                Resume::Position => self.name_after(dir, None, at - DOT_DOT)?,
            },
        };
        if at > DOT_DOT && after.is_none() {
            // Past the end.
            return Ok(());
        }
        let first = (at, after.clone());
        let mut last = None;
        loop {
            let page = self.fs.readdir_page(dir, after.as_deref(), PAGE)?;
            let more = page.len() == PAGE;
            for (name, child, kind) in page {
                match reply.add_entry(fs, child, at + 1, kind, &name) {
                    Some(true) => {
                        self.dirs.sent(fh, first, last);
                        return Ok(());
                    }
                    Some(false) => {
                        at += 1;
                        after = Some(name.clone());
                        last = Some((at, name));
                    }
                    // Removed since the page was read: as if listed after it went.
                    None => after = Some(name),
                }
            }
            if !more {
                break;
            }
        }
        self.dirs.sent(fh, first, last);
        Ok(())
    }

    /// The name of the `k`-th entry (1-based, name order) after `from` (None: from
    /// the start) of `dir` now. None past the end.
    fn name_after(
        &self,
        dir: u64,
        from: Option<Vec<u8>>,
        k: u64,
    ) -> Result<Option<Vec<u8>>, hscm_fs::Error> {
        let mut after = from;
        let mut left = k;
        loop {
            let page = self.fs.readdir_page(dir, after.as_deref(), PAGE)?;
            if page.is_empty() {
                return Ok(None);
            }
            if (page.len() as u64) >= left {
                return Ok(Some(page[left as usize - 1].0.clone()));
            }
            left -= page.len() as u64;
            after = page.last().map(|e| e.0.clone());
        }
    }
}

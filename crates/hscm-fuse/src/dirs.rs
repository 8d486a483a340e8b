//! Directory listings: what `readdir` pages through for each open directory handle.

use std::sync::Arc;

use hscm_fs::Kind;

use crate::Fuse;

/// A directory's entries as a listing shows them: ".", "..", then the names.
pub(crate) type Listing = Arc<Vec<(Vec<u8>, u64, Kind)>>;

impl Fuse {
    pub(crate) fn listing(&self, dir: u64) -> Result<Listing, hscm_fs::Error> {
        let entries = self.fs.readdir(dir)?;
        let parent = self.fs.parent_of(dir).unwrap_or(dir);
        let mut v = Vec::with_capacity(entries.len() + 2);
        v.push((b".".to_vec(), dir, Kind::Dir));
        v.push((b"..".to_vec(), parent, Kind::Dir));
        v.extend(entries);
        Ok(Arc::new(v))
    }
}

/// The listings of open directory handles.
#[derive(Default)]
pub(crate) struct Dirs {
    next: std::sync::atomic::AtomicU64,
    open: std::sync::Mutex<std::collections::HashMap<u64, Listing>>,
}

impl Dirs {
    pub(crate) fn open(&self, listing: Listing) -> u64 {
        let fh = self.next.fetch_add(1, std::sync::atomic::Ordering::Relaxed) + 1;
        if let Ok(mut open) = self.open.lock() {
            open.insert(fh, listing);
        }
        fh
    }

    /// The handle's listing, unless the reader starts over (offset 0: a rewinddir
    /// sees the directory as it is now) or the handle is unknown.
    pub(crate) fn get(&self, fh: u64, offset: u64) -> Option<Listing> {
        if offset == 0 {
            return None;
        }
        self.open.lock().ok()?.get(&fh).cloned()
    }

    pub(crate) fn refresh(&self, fh: u64, listing: Listing) -> Listing {
        if let Ok(mut open) = self.open.lock() {
            if let Some(slot) = open.get_mut(&fh) {
                *slot = listing.clone();
            }
        }
        listing
    }

    pub(crate) fn close(&self, fh: u64) {
        if let Ok(mut open) = self.open.lock() {
            open.remove(&fh);
        }
    }
}

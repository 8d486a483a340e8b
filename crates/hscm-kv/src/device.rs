//! One device: its media (a directory) holding the device's home log (`data.log`) and,
//! when the device is a primary, the buffer logs and caches of the idle devices it
//! covers.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

use hscm_durable::codec::{sealed, CodecError, Dec, Enc};
use hscm_durable::{Media, Poison};
use parking_lot::RwLock;

use super::log::{Activity, Disk, Keep, LogFile};
use super::record::{self, Kind};
use crate::{Error, Result};

pub(crate) type Key = Box<[u8]>;

/// Index entry: where the newest value of a key lives on its home device.
pub(crate) struct Meta {
    /// Offset of the value bytes in `data.log`.
    pub offset: u64,
    pub len: u32,
    pub seq: u64,
    pub deleted: bool,
    /// Accesses since the store opened (the paper's "hotness").
    pub hotness: AtomicU32,
}

pub(crate) struct Device {
    pub id: usize,
    pub disk: Disk,
    pub data: LogFile,
    pub index: RwLock<BTreeMap<Key, Meta>>,
    /// Values read from this device on behalf of a client request.
    pub demand_reads: AtomicU64,
}

pub(crate) const DATA_LOG: &str = "data.log";
/// Access counts saved at a clean close (advisory: a missing or damaged file only
/// means the prefetcher starts without history).
const HOTNESS: &str = "hotness";

/// What opening a device found.
pub(crate) struct Opened {
    pub device: Device,
    pub max_seq: u64,
    pub torn_bytes: u64,
}

impl Device {
    pub fn open(
        id: usize,
        media: Arc<dyn Media>,
        epoch: Instant,
        poison: Arc<Poison>,
    ) -> Result<Opened> {
        let disk = Disk {
            media,
            activity: Arc::new(Activity::new(epoch)),
            poison,
        };
        if !disk.media.exists(DATA_LOG) {
            return Err(Error::MissingDevice {
                path: disk.media.describe(),
                reason: format!("{DATA_LOG} is missing"),
            });
        }
        let path = disk.path(DATA_LOG);
        let image = disk.read(DATA_LOG)?;
        let mut index = BTreeMap::new();
        let mut max_seq = 0;
        let scanned = record::scan(&image, |at, rec| {
            max_seq = max_seq.max(rec.seq);
            apply(&mut index, at, rec);
        });
        warn_cut(&path, &scanned);
        load_hotness(&disk, &index);
        let data = LogFile::open(&disk, DATA_LOG, scanned.valid_len, false, Keep::Durable)?;
        Ok(Opened {
            device: Device {
                id,
                disk,
                data,
                index: RwLock::new(index),
                demand_reads: AtomicU64::new(0),
            },
            max_seq,
            torn_bytes: scanned.torn_bytes,
        })
    }

    /// Saves every key's access count next to the log (format: repeated
    /// `u16 key_len, key, u32 hotness`, then a crc32c of all of it).
    pub fn save_hotness(&self) -> Result<()> {
        let mut e = Enc::default();
        for (key, meta) in self.index.read().iter() {
            let h = meta.hotness.load(Ordering::Relaxed);
            if h > 0 && !meta.deleted {
                e.u16(key.len() as u16).raw(key).u32(h);
            }
        }
        e.seal();
        self.disk
            .media
            .replace(HOTNESS, &e.0)
            .map_err(|e| Error::io(format!("writing {}", self.disk.path(HOTNESS)), e))
    }

    /// Appends already-encoded records (after checking them all) in synced runs of at
    /// most `piece` bytes, indexing each run once it is durable.
    pub fn append_records(&self, image: &[u8], piece: u64) -> Result<()> {
        let mut records = Vec::new();
        record::scan_whole("appended records", image, |off, rec| {
            records.push((off as usize, rec))
        })?;
        // Runs of whole records of at most `piece` bytes (a longer record alone), each
        // written and synced before the next: see `KvOptions::sync_piece`.
        let mut rest = &records[..];
        while let Some(&(start, _)) = rest.first() {
            let fits =
                |(off, rec): &&(usize, record::View<'_>)| (off + rec.len() - start) as u64 <= piece;
            let (run, tail) = rest.split_at(1 + rest[1..].iter().take_while(fits).count());
            let stop = run.last().map_or(start, |(off, rec)| off + rec.len());
            let (at, end) = self.data.append_bytes(&image[start..stop])?;
            self.data.sync_to(end)?;
            let mut index = self.index.write();
            for &(off, rec) in run {
                apply(&mut index, at + (off - start) as u64, rec);
            }
            rest = tail;
        }
        Ok(())
    }

    /// Writes one record durably to this device's home log.
    pub fn put(&self, seq: &AtomicU64, kind: Kind, key: &[u8], value: &[u8]) -> Result<u64> {
        let (at, end, seq) = self.data.append(record::numbered(seq, kind, key, value))?;
        self.data.sync_to(end)?;
        let rec = record::View {
            seq,
            kind,
            key,
            value,
        };
        apply(&mut self.index.write(), at, rec);
        Ok(seq)
    }

    /// Counts an access; returns the key's new hotness (0 if the device lacks it) and
    /// where its value lives, in one index lookup.
    pub fn touch(&self, key: &[u8]) -> (u32, Option<Loc>) {
        let index = self.index.read();
        let Some(m) = index.get(key) else {
            return (0, None);
        };
        let hotness = m.hotness.fetch_add(1, Ordering::Relaxed).saturating_add(1);
        (hotness, Loc::of(m))
    }

    /// Where the newest value lives, or `None` if absent or deleted.
    pub fn locate(&self, key: &[u8]) -> Option<Loc> {
        self.index.read().get(key).and_then(Loc::of)
    }

    /// Reads a located value on behalf of a client.
    pub fn read(&self, loc: Loc) -> Result<Vec<u8>> {
        self.demand_reads.fetch_add(1, Ordering::Relaxed);
        self.data.read_at(loc.offset, loc.len as usize)
    }
}

/// Where a live value sits in a device's `data.log`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Loc {
    pub offset: u64,
    pub len: u32,
    pub seq: u64,
    pub hotness: u32,
}

impl Loc {
    fn of(m: &Meta) -> Option<Loc> {
        (!m.deleted).then(|| Loc {
            offset: m.offset,
            len: m.len,
            seq: m.seq,
            hotness: m.hotness.load(Ordering::Relaxed),
        })
    }
}

/// Says what an open cut from a log: a torn tail, or valid records behind a bad one.
pub(crate) fn warn_cut(path: &str, scanned: &record::Scanned) {
    if let Some(e) = scanned.bad_record_error(path) {
        tracing::warn!("{e} ({} bytes cut)", scanned.torn_bytes);
    } else if scanned.torn_bytes > 0 {
        tracing::warn!(
            "{path}: cut a torn tail of {} bytes after byte {} (an unacknowledged write)",
            scanned.torn_bytes,
            scanned.valid_len
        );
    }
}

/// Indexes one record found at byte `at`; a record older than the indexed one is ignored.
pub(crate) fn apply(index: &mut BTreeMap<Key, Meta>, at: u64, rec: record::View<'_>) {
    let meta = Meta {
        offset: at + rec.value_offset() as u64,
        len: rec.value.len() as u32,
        seq: rec.seq,
        deleted: rec.kind == Kind::Delete,
        hotness: AtomicU32::new(0),
    };
    match index.get_mut(rec.key) {
        Some(old) if old.seq >= rec.seq => {}
        Some(old) => {
            meta.hotness
                .store(old.hotness.load(Ordering::Relaxed), Ordering::Relaxed);
            *old = meta;
        }
        None => {
            index.insert(rec.key.into(), meta);
        }
    }
}

fn load_hotness(disk: &Disk, index: &BTreeMap<Key, Meta>) {
    let Ok(bytes) = disk.media.read(HOTNESS) else {
        return;
    };
    let damaged = || {
        tracing::warn!(
            "{}: damaged, ignored (prefetching starts without history)",
            disk.path(HOTNESS)
        )
    };
    let Some(body_len) = bytes.len().checked_sub(4) else {
        return damaged();
    };
    if !sealed(&bytes, body_len) {
        return damaged();
    }
    let mut d = Dec::new(&bytes[..body_len], "the hotness file");
    while !d.is_empty() {
        let entry = (|| -> std::result::Result<_, CodecError> {
            let len = usize::from(d.u16()?);
            Ok((d.raw(len)?, d.u32()?))
        })();
        let Ok((key, h)) = entry else {
            return damaged();
        };
        if let Some(m) = index.get(key) {
            m.hotness.store(h, Ordering::Relaxed);
        }
    }
}

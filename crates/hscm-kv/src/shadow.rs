//! What a primary device keeps for one idle device it covers (the Sprint-AEP paper, §III-A/B): a
//! buffer log that absorbs the idle device's writes, and a cache of its values, with
//! the hot range lists (HRL) of the idle device and the cold range lists (CRL) of the
//! cache that steer prefetching.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use hscm_durable::Poison;
use hscm_policy::LeveledLru;
use parking_lot::{Condvar, Mutex, RwLock};
use rustc_hash::FxHashMap as HashMap;

use super::device::{Device, Key, Loc};
use super::log::{Keep, LogFile};
use super::record::{self, Kind};
use crate::Result;

/// A value read from the idle device: (key, value, seq, hotness).
pub(crate) type Fetched = (Key, Vec<u8>, u64, u32);
/// A value to prefetch and where it is.
type Planned = (Key, Loc);

/// One buffer log file; a new one starts whenever the previous is synced.
pub(crate) struct Segment {
    pub id: u64,
    pub log: LogFile,
}

#[derive(Clone)]
pub(crate) struct BufEntry {
    pub segment: Arc<Segment>,
    pub offset: u64,
    pub len: u32,
    pub seq: u64,
    pub deleted: bool,
}

pub(crate) struct CacheEntry {
    pub key: Key,
    pub file: Arc<LogFile>,
    pub offset: u64,
    pub len: u32,
    pub seq: u64,
    pub hotness: u32,
}

pub(crate) struct ShadowState {
    pub buffer: BTreeMap<Key, BufEntry>,
    /// Highest segment whose records are home on the idle device.
    pub synced_segment: u64,
    pub cache: HashMap<u64, CacheEntry>,
    pub cache_bytes: u64,
    pub cache_file: Arc<LogFile>,
    pub cache_generation: u64,
    pub crl: LeveledLru<u64>,
    pub hrl: LeveledLru<u64>,
    pub hrl_keys: HashMap<u64, Key>,
}

pub(crate) struct Shadow {
    pub idle: usize,
    pub primary: usize,
    pub buffer_capacity: u64,
    pub cache_capacity: u64,
    pub current: RwLock<Arc<Segment>>,
    pub state: Mutex<ShadowState>,
    /// Signalled when a sync frees buffer space.
    pub space: Condvar,
    pub sync_lock: Mutex<()>,
    pub retired: AtomicBool,
    pub prefetch_queued: AtomicBool,
    /// The store's: set when a device fails.
    poison: Arc<Poison>,
}

/// 64-bit key hash naming a key in the range lists and the cache map; a collision
/// only costs a cache miss (entries carry their key and are checked).
pub(crate) fn key_hash(key: &[u8]) -> u64 {
    let lo = crc32c::crc32c(key) as u64;
    let hi = crc32c::crc32c_append(0x9e37_79b9, key) as u64;
    (hi << 32) | lo
}

/// The buffer log on a primary for an idle device's writes (one per segment).
pub(crate) fn buffer_name(idle: usize, segment: u64) -> String {
    format!("buffer-{idle}-{segment}.log")
}

fn cache_name(idle: usize, generation: u64) -> String {
    format!("cache-{idle}-{generation}.dat")
}

/// Counters shared by every shadow of a store.
#[derive(Default)]
pub(crate) struct ShadowCounters {
    pub buffer_hits: AtomicU64,
    pub cache_hits: AtomicU64,
    pub prefetches: AtomicU64,
    pub prefetched_values: AtomicU64,
    pub log_syncs: AtomicU64,
    pub synced_bytes: AtomicU64,
    pub sync_ns: AtomicU64,
    pub prefetch_ns: AtomicU64,
}

impl Shadow {
    pub fn new(
        primary: &Device,
        idle: &Device,
        buffer_capacity: u64,
        cache_capacity: u64,
        first_segment: u64,
    ) -> Result<Shadow> {
        let seg = Segment {
            id: first_segment,
            log: LogFile::open(
                &primary.disk,
                &buffer_name(idle.id, first_segment),
                0,
                true,
                Keep::Durable,
            )?,
        };
        let cache_file = Arc::new(LogFile::open(
            &primary.disk,
            &cache_name(idle.id, 0),
            0,
            true,
            Keep::Volatile,
        )?);
        // The idle device's hot range lists start from its whole index (the paper
        // builds them from the idle device's B+-tree): keys never accessed sit in the
        // lowest level and are prefetched only while the cache has room.
        let mut hrl = LeveledLru::new();
        let mut hrl_keys = HashMap::default();
        for (key, meta) in idle.index.read().iter() {
            let h = meta.hotness.load(Ordering::Relaxed);
            if !meta.deleted {
                let hash = key_hash(key);
                hrl.touch(hash, h);
                hrl_keys.insert(hash, key.clone());
            }
        }
        Ok(Shadow {
            idle: idle.id,
            primary: primary.id,
            buffer_capacity,
            cache_capacity,
            current: RwLock::new(Arc::new(seg)),
            state: Mutex::new(ShadowState {
                buffer: BTreeMap::new(),
                synced_segment: first_segment.saturating_sub(1),
                cache: HashMap::default(),
                cache_bytes: 0,
                cache_file,
                cache_generation: 0,
                crl: LeveledLru::new(),
                hrl,
                hrl_keys,
            }),
            space: Condvar::new(),
            sync_lock: Mutex::new(()),
            retired: AtomicBool::new(false),
            prefetch_queued: AtomicBool::new(false),
            poison: primary.disk.poison.clone(),
        })
    }

    /// Durably logs a write meant for the idle device. Returns true when the log has
    /// reached its sync threshold (the paper's trigger is the log's size, so
    /// overwritten records count until a sync drops them).
    pub fn put(
        &self,
        seq: &AtomicU64,
        kind: Kind,
        key: &[u8],
        value: &[u8],
        threshold: f64,
    ) -> Result<bool> {
        {
            let mut st = self.state.lock();
            while self.current.read().log.len() >= self.buffer_capacity
                && !self.retired.load(Ordering::Relaxed)
            {
                // Only a sync frees space: once the store has failed none will come,
                // so a waiter looks at the poison too, at least every 10 ms (whoever
                // poisons the store holds locks a wake-up would need).
                self.poison.check()?;
                self.space
                    .wait_for(&mut st, std::time::Duration::from_millis(10));
            }
        }
        // The append happens under the segment's read lock: a sync seals the segment
        // under its write lock and then takes the log's length as what goes home, so an
        // append may not land in a sealed segment after that (it would be acknowledged
        // from a log that is then removed: the power-cut test found exactly this).
        let (segment, at, end, seq) = {
            let current = self.current.read();
            let (at, end, seq) = current
                .log
                .append(record::numbered(seq, kind, key, value))?;
            (current.clone(), at, end, seq)
        };
        segment.log.sync_to(end)?;
        let mut st = self.state.lock();
        if segment.id > st.synced_segment {
            let entry = BufEntry {
                offset: at + (record::HEADER + key.len()) as u64,
                len: value.len() as u32,
                seq,
                deleted: kind == Kind::Delete,
                segment,
            };
            if st.buffer.get(key).is_none_or(|old| old.seq < seq) {
                st.buffer.insert(key.into(), entry);
            }
        }
        let hash = key_hash(key);
        if st.cache.get(&hash).is_some_and(|c| *c.key == *key) {
            remove_cached(&mut st, hash);
        }
        drop(st);
        Ok(end as f64 >= threshold * self.buffer_capacity as f64)
    }

    /// A client read of an idle-device key. `Ok(None)` when neither buffer nor cache
    /// holds it (the caller goes to the idle device); `Ok(Some(None))` for a deletion.
    #[allow(clippy::option_option)]
    pub fn lookup(
        &self,
        key: &[u8],
        hotness: u32,
        counters: &ShadowCounters,
    ) -> Result<Option<Option<Vec<u8>>>> {
        let hash = key_hash(key);
        let mut st = self.state.lock();
        if let Some(b) = st.buffer.get(key) {
            let (deleted, segment, offset, len) = (b.deleted, b.segment.clone(), b.offset, b.len);
            drop(st);
            counters.buffer_hits.fetch_add(1, Ordering::Relaxed);
            if deleted {
                return Ok(Some(None));
            }
            return Ok(Some(Some(segment.log.read_at(offset, len as usize)?)));
        }
        let (file, offset, len, hot) = match st.cache.get_mut(&hash) {
            Some(c) if *c.key == *key => {
                c.hotness = c.hotness.max(hotness);
                (c.file.clone(), c.offset, c.len, c.hotness)
            }
            _ => return Ok(None),
        };
        st.crl.touch(hash, hot);
        drop(st);
        counters.cache_hits.fetch_add(1, Ordering::Relaxed);
        Ok(Some(Some(file.read_at(offset, len as usize)?)))
    }

    /// Caches values read from the idle device (one write to the primary), unless a
    /// newer write reached the buffer meanwhile. `items`: (key, value, seq, hotness).
    pub fn cache_insert(&self, idle: &Device, items: Vec<Fetched>) -> Result<()> {
        if items.is_empty() || self.retired.load(Ordering::Relaxed) {
            return Ok(());
        }
        let file = self.state.lock().cache_file.clone();
        let mut image = Vec::new();
        let mut offsets = Vec::with_capacity(items.len());
        for (_, value, _, _) in &items {
            offsets.push(image.len() as u64);
            image.extend_from_slice(value);
        }
        let (at, _) = file.append_bytes(&image)?;
        let mut st = self.state.lock();
        if !Arc::ptr_eq(&st.cache_file, &file) {
            return Ok(()); // the cache was compacted meanwhile; these values are dropped
        }
        for ((key, value, seq, hotness), off) in items.into_iter().zip(offsets) {
            // A newer write may have gone to the buffer, or already home.
            if st.buffer.contains_key(&key) || idle.locate(&key).map(|l| l.seq) != Some(seq) {
                continue;
            }
            let hash = key_hash(&key);
            if let Some(old) = st.cache.get(&hash) {
                if old.seq >= seq && *old.key == *key {
                    continue;
                }
                remove_cached(&mut st, hash);
            }
            let size = value.len() as u64 + key.len() as u64;
            while st.cache_bytes + size > self.cache_capacity {
                let Some((_, victim)) = st.crl.coldest() else {
                    break;
                };
                let evicted = remove_cached(&mut st, victim);
                if let Some(e) = evicted {
                    st.hrl.touch(victim, e.hotness);
                    st.hrl_keys.insert(victim, e.key);
                }
            }
            if st.cache_bytes + size > self.cache_capacity {
                continue;
            }
            st.hrl.remove(&hash);
            st.hrl_keys.remove(&hash);
            st.crl.touch(hash, hotness);
            st.cache_bytes += size;
            st.cache.insert(
                hash,
                CacheEntry {
                    key,
                    file: file.clone(),
                    offset: at + off,
                    len: value.len() as u32,
                    seq,
                    hotness,
                },
            );
        }
        Ok(())
    }

    /// Writes the sealed buffer home to the idle device in one compact burst, then
    /// moves the synced values into the cache (the Sprint-AEP paper, §III-B).
    pub fn sync(
        &self,
        primary: &Device,
        idle: &Device,
        counters: &ShadowCounters,
        piece: u64,
    ) -> Result<()> {
        let _one_at_a_time = self.sync_lock.lock();
        let sealed = {
            let mut current = self.current.write();
            if current.log.len() == 0 {
                return Ok(());
            }
            let next = Segment {
                id: current.id + 1,
                log: LogFile::open(
                    &primary.disk,
                    &buffer_name(self.idle, current.id + 1),
                    0,
                    true,
                    Keep::Durable,
                )?,
            };
            std::mem::replace(&mut *current, Arc::new(next))
        };
        self.notify_space();
        let len = sealed.log.len();
        sealed.log.sync_to(len)?;
        let image = sealed.log.read_at(0, len as usize)?;
        // Only each key's newest record in this log goes home (sequence numbers grow
        // in file order): an older one is superseded by one that is durable too.
        let mut newest: HashMap<&[u8], (usize, usize)> = HashMap::default();
        record::scan_whole(&primary.disk.path(sealed.log.name()), &image, |at, rec| {
            newest.insert(rec.key, (at as usize, rec.len()));
        })?;
        let mut spans: Vec<(usize, usize)> = newest.into_values().collect();
        spans.sort_unstable();
        let mut home = Vec::new();
        let mut moved = Vec::new();
        for (at, len) in spans {
            let rec = &image[at..at + len];
            home.extend_from_slice(rec);
            let rec = record::decode(rec).expect("scanned above");
            if rec.kind == Kind::Put {
                moved.push((rec.key.into(), rec.value.to_vec(), rec.seq, 1));
            }
        }
        let home_len = home.len() as u64;
        idle.append_records(&home, piece)?;
        {
            let mut st = self.state.lock();
            st.buffer.retain(|_, b| b.segment.id != sealed.id);
            st.synced_segment = sealed.id;
            self.space.notify_all();
        }
        // Its records are home and durable: the log may go (a removal that a power cut
        // undoes only replays them again, which changes nothing).
        let _ = primary.disk.remove(sealed.log.name());
        counters.log_syncs.fetch_add(1, Ordering::Relaxed);
        counters.synced_bytes.fetch_add(home_len, Ordering::Relaxed);
        let result = self.cache_insert(idle, moved);
        self.compact_cache_if_needed(primary)?;
        result
    }

    /// Fetches the idle device's hottest keys into the cache, up to `budget` bytes,
    /// with `threads` readers (the Sprint-AEP paper, §III-C).
    pub fn prefetch(
        &self,
        idle: &Device,
        budget: u64,
        threads: usize,
        counters: &ShadowCounters,
    ) -> Result<()> {
        let began = std::time::Instant::now();
        let plan: Vec<Planned> = {
            let st = self.state.lock();
            let cache_full = st.cache_bytes >= self.cache_capacity;
            let h_min = st.crl.min_level();
            let mut bytes = 0u64;
            let mut plan = Vec::new();
            for (level, hash) in st.hrl.hottest() {
                if bytes >= budget || (cache_full && level <= h_min) {
                    break;
                }
                let Some(key) = st.hrl_keys.get(&hash) else {
                    continue;
                };
                if let Some(loc) = idle.locate(key) {
                    bytes += loc.len as u64;
                    plan.push((key.clone(), loc));
                }
            }
            plan
        };
        if plan.is_empty() {
            return Ok(());
        }
        let read = |part: &[Planned]| -> Result<Vec<Fetched>> {
            part.iter()
                .map(|(k, l)| {
                    let value = idle.data.read_at(l.offset, l.len as usize)?;
                    Ok((k.clone(), value, l.seq, l.hotness.max(1)))
                })
                .collect()
        };
        let values = if threads <= 1 {
            read(&plan)?
        } else {
            let per = plan.len().div_ceil(threads);
            std::thread::scope(|s| {
                let handles: Vec<_> = plan.chunks(per).map(|c| s.spawn(move || read(c))).collect();
                let mut all = Vec::new();
                for h in handles {
                    all.extend(h.join().expect("prefetch reader panicked")?);
                }
                Ok::<_, crate::Error>(all)
            })?
        };
        counters.prefetches.fetch_add(1, Ordering::Relaxed);
        counters
            .prefetched_values
            .fetch_add(values.len() as u64, Ordering::Relaxed);
        self.cache_insert(idle, values)?;
        counters
            .prefetch_ns
            .fetch_add(began.elapsed().as_nanos() as u64, Ordering::Relaxed);
        Ok(())
    }

    /// Rewrites the cache file once dead space outgrows the live data.
    fn compact_cache_if_needed(&self, primary: &Device) -> Result<()> {
        let mut st = self.state.lock();
        if st.cache_file.len() <= 2 * self.cache_capacity + (1 << 20) {
            return Ok(());
        }
        let generation = st.cache_generation + 1;
        let fresh = Arc::new(LogFile::open(
            &primary.disk,
            &cache_name(self.idle, generation),
            0,
            true,
            Keep::Volatile,
        )?);
        let mut image = Vec::with_capacity(st.cache_bytes as usize);
        let mut moved = Vec::with_capacity(st.cache.len());
        for (&hash, e) in st.cache.iter() {
            moved.push((hash, image.len() as u64));
            image.extend_from_slice(&e.file.read_at(e.offset, e.len as usize)?);
        }
        let (at, _) = fresh.append_bytes(&image)?;
        for (hash, off) in moved {
            let e = st.cache.get_mut(&hash).unwrap();
            e.file = fresh.clone();
            e.offset = at + off;
        }
        let old = std::mem::replace(&mut st.cache_file, fresh);
        st.cache_generation = generation;
        let _ = primary.disk.remove(old.name());
        Ok(())
    }

    /// Wakes writers waiting for buffer space (under the lock they wait with, so no
    /// wake-up falls between their check and their wait).
    pub fn notify_space(&self) {
        let _st = self.state.lock();
        self.space.notify_all();
    }

    /// Empties the cache and removes its file (the shadow is being retired).
    pub fn drop_cache(&self, primary: &Device) {
        let st = self.state.lock();
        let _ = primary.disk.remove(st.cache_file.name());
    }
}

fn remove_cached(st: &mut ShadowState, hash: u64) -> Option<CacheEntry> {
    let e = st.cache.remove(&hash)?;
    st.cache_bytes -= e.len as u64 + e.key.len() as u64;
    st.crl.remove(&hash);
    Some(e)
}

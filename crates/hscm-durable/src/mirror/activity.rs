//! The activity log (DRBD's, docs/mirror.md): the extents of the volume that writes
//! may be in flight in, listed durably on the local member before a write to an
//! extent not yet listed leaves. After the primary stops uncleanly, a write in flight
//! may have reached one member and not another; only the listed extents can differ,
//! so only they are copied to the other members, not the whole volume.
//!
//! An extent leaves the list (to make room for another) only once no write to it is
//! in flight and every write to it is durable on every member in sync: written with
//! FUA, or covered by a flush that completed after the write did. A write that failed
//! keeps its extent listed until the mirror is opened again.
//!
//! The list lives in two 4 KiB slots written in turn, each sealed with a CRC-32C, so a
//! slot torn by a power cut leaves the one before it; with neither readable the
//! mirror falls back to a full copy.

use std::collections::HashMap;
use std::io;

use parking_lot::{Condvar, Mutex};

use super::ACTIVITY_AT;
use crate::codec::{newest, seal_at, sealed, Dec, Enc};
use crate::device::{AlignedBuf, Backend, IO_ALIGN};

/// What the first 8 bytes of a slot hold.
const MAGIC: &[u8; 8] = b"HSCMACT1";
/// The extent one entry stands for by default: DRBD's 4 MiB.
pub(super) const EXTENT: u64 = 4 << 20;
/// Entries a slot holds: after the fixed fields (40 bytes) and before the seal.
pub(super) const MAX_SLOTS: usize = (IO_ALIGN as usize - 40 - 4) / 4;
/// Extents listed at most by default (4,000 MiB of 4 MiB extents): the most a crash
/// of the primary makes the resync copy.
pub(super) const SLOTS: usize = 1000;

/// One slot's contents.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Record {
    /// Raised by every write of the list; the newer readable slot wins.
    pub seq: u64,
    pub extent: u64,
    pub slots: u16,
    /// A request needed more extents than the list holds: after a crash, everything
    /// is copied.
    pub everything: bool,
    pub extents: Vec<u32>,
}

impl Record {
    pub fn encode(&self) -> AlignedBuf {
        let mut e = Enc(Vec::with_capacity(IO_ALIGN as usize));
        e.raw(MAGIC)
            .u64(self.seq)
            .u64(self.extent)
            .u16(self.slots)
            .u8(u8::from(self.everything))
            .u8(0)
            .u32(self.extents.len() as u32)
            .raw(&[0; 8]);
        for x in &self.extents {
            e.u32(*x);
        }
        let mut b = e.0;
        assert!(
            b.len() <= IO_ALIGN as usize - 4,
            "an activity log of {} extents outgrew its slot",
            self.extents.len()
        );
        b.resize(IO_ALIGN as usize, 0);
        seal_at(&mut b, IO_ALIGN as usize - 4);
        let mut buf = AlignedBuf::zeroed(IO_ALIGN as usize);
        buf.copy_from_slice(&b);
        buf
    }

    /// None for a slot that is torn, damaged or was never written.
    pub fn decode(b: &[u8]) -> Option<Record> {
        let n = IO_ALIGN as usize;
        if b.len() < n || &b[..8] != MAGIC || !sealed(&b[..n], n - 4) {
            return None;
        }
        let mut d = Dec::new(&b[8..n - 4], "the activity log");
        let (seq, extent, slots) = (d.u64().ok()?, d.u64().ok()?, d.u16().ok()?);
        let everything = d.u8().ok()? != 0;
        d.u8().ok()?;
        let count = d.u32().ok()? as usize;
        d.raw(8).ok()?;
        if count > MAX_SLOTS || !extent.is_power_of_two() || extent < IO_ALIGN {
            return None;
        }
        let extents = (0..count).map(|_| d.u32()).collect::<Result<_, _>>().ok()?;
        Some(Record {
            seq,
            extent,
            slots,
            everything,
            extents,
        })
    }

    /// The newest readable record of the two slots at `at` on `local`.
    pub fn read(local: &dyn Backend, at: u64) -> io::Result<Option<Record>> {
        let mut buf = AlignedBuf::zeroed(2 * IO_ALIGN as usize);
        local.read_at(at, &mut buf)?;
        let (a, b) = buf.split_at(IO_ALIGN as usize);
        Ok(newest([Record::decode(a), Record::decode(b)], |r| r.seq))
    }

    /// The bitmap chunks (of `chunk` bytes, in a volume of `data_len`) its extents cover.
    pub fn chunks(&self, chunk: u64, data_len: u64) -> impl Iterator<Item = u64> + '_ {
        let per = (self.extent / chunk).max(1);
        let last = data_len.div_ceil(chunk);
        self.extents.iter().flat_map(move |&x| {
            // A damaged record may name an extent past any volume: it covers nothing.
            let first = u64::from(x)
                .checked_mul(self.extent)
                .map_or(last, |at| (at / chunk).min(last));
            first..(first + per).min(last)
        })
    }
}

/// Where the record of `seq` goes: the two slots in turn.
pub(super) fn slot_of(at: u64, seq: u64) -> u64 {
    at + (seq % 2) * IO_ALIGN
}

#[derive(Debug, Default)]
struct Extent {
    in_flight: u32,
    /// The write sequence number of the last write to it not made durable as it went
    /// (0: none); `u64::MAX` after a failed write.
    unsynced: u64,
    last_use: u64,
}

#[derive(Debug)]
struct State {
    extent: u64,
    slots: usize,
    /// The extents the record on the device lists (or a superset of them being
    /// written): only these take writes without a new record first.
    listed: HashMap<u64, Extent>,
    everything: bool,
    seq: u64,
    /// Non-durable writes completed so far, and how many of them the last completed
    /// flush covered.
    writes: u64,
    flushed: u64,
    tick: u64,
}

/// What [`ActivityLog::begin`] needs before the write can go.
pub(super) enum Begin {
    /// The write's extents are listed: it may go; [`ActivityLog::end`] when done.
    Listed,
    /// Nothing can leave the list until a flush covers what was written: flush, then
    /// try again.
    NeedsFlush,
}

/// The in-memory list and the rules of its changes; the caller writes the records.
pub(super) struct ActivityLog {
    state: Mutex<State>,
    /// Held while a record is written: one change at a time.
    writing: Mutex<()>,
    freed: Condvar,
}

impl ActivityLog {
    /// A list continuing after `seq`, holding nothing.
    pub fn new(extent: u64, slots: usize, seq: u64) -> ActivityLog {
        ActivityLog {
            state: Mutex::new(State {
                extent,
                slots: slots.clamp(1, MAX_SLOTS),
                listed: HashMap::new(),
                everything: false,
                seq,
                writes: 0,
                flushed: 0,
                tick: 0,
            }),
            writing: Mutex::new(()),
            freed: Condvar::new(),
        }
    }

    /// The empty record that starts this list: written before the first write.
    pub fn first_record(&self) -> Record {
        let mut s = self.state.lock();
        s.seq += 1;
        Record {
            seq: s.seq,
            extent: s.extent,
            slots: s.slots as u16,
            everything: false,
            extents: Vec::new(),
        }
    }

    /// The extents a write of `len` bytes at `offset` touches.
    pub fn extents_of(&self, spans: impl Iterator<Item = (u64, u64)>, out: &mut Vec<u64>) {
        let extent = self.state.lock().extent;
        for (offset, len) in spans.filter(|&(_, len)| len > 0) {
            out.extend(offset / extent..=(offset + len - 1) / extent);
        }
        out.sort_unstable();
        out.dedup();
    }

    /// Lists `extents` durably (by `write_record`) if they are not listed, and counts
    /// a write in flight in each.
    pub fn begin(
        &self,
        extents: &[u64],
        write_record: impl FnOnce(&Record) -> io::Result<()>,
    ) -> io::Result<Begin> {
        if self.try_listed(extents) {
            return Ok(Begin::Listed);
        }
        let _writing = self.writing.lock();
        let mut s = self.state.lock();
        let mut everything = s.everything || extents.len() > s.slots;
        while !everything {
            if Self::take(&mut s, extents) {
                return Ok(Begin::Listed);
            }
            let missing = extents.iter().filter(|x| !s.listed.contains_key(x)).count();
            if missing + s.listed.len() <= s.slots {
                break;
            }
            // Room, from the least recently used extents that may leave.
            let flushed = s.flushed;
            let mut free: Vec<(u64, u64)> = s
                .listed
                .iter()
                .filter(|(x, e)| e.in_flight == 0 && e.unsynced <= flushed && !extents.contains(x))
                .map(|(x, e)| (e.last_use, *x))
                .collect();
            let need = missing + s.listed.len() - s.slots;
            if free.len() >= need {
                free.sort_unstable();
                for (_, x) in &free[..need] {
                    s.listed.remove(x);
                }
                break;
            }
            let unflushed = |e: &Extent| e.unsynced > flushed && e.unsynced != u64::MAX;
            if s.listed.values().any(|e| e.in_flight == 0 && unflushed(e)) {
                return Ok(Begin::NeedsFlush);
            }
            if s.listed.values().any(|e| e.in_flight > 0) {
                // Wait for a write in flight to end.
                self.freed.wait(&mut s);
                continue;
            }
            // Every extent is pinned by a failed write: nothing may leave again.
            everything = true;
        }
        s.seq += 1;
        let mut listed: Vec<u32> = s.listed.keys().map(|&x| x as u32).collect();
        listed.extend(
            extents
                .iter()
                .filter(|x| !s.listed.contains_key(x))
                .map(|&x| x as u32),
        );
        listed.sort_unstable();
        if everything {
            listed.truncate(s.slots);
        }
        let record = Record {
            seq: s.seq,
            extent: s.extent,
            slots: s.slots as u16,
            everything,
            extents: listed,
        };
        drop(s);
        write_record(&record)?;
        let mut s = self.state.lock();
        s.everything = everything;
        for &x in extents {
            s.listed.entry(x).or_default();
        }
        let taken = Self::take(&mut s, extents);
        debug_assert!(taken || everything);
        if !taken {
            Self::count(&mut s, extents);
        }
        Ok(Begin::Listed)
    }

    fn try_listed(&self, extents: &[u64]) -> bool {
        let mut s = self.state.lock();
        Self::take(&mut s, extents)
    }

    /// Counts the write in flight if every one of its extents is listed (or the list
    /// says everything).
    fn take(s: &mut State, extents: &[u64]) -> bool {
        if !s.everything && !extents.iter().all(|x| s.listed.contains_key(x)) {
            return false;
        }
        Self::count(s, extents);
        true
    }

    fn count(s: &mut State, extents: &[u64]) {
        s.tick += 1;
        let tick = s.tick;
        for x in extents {
            if let Some(e) = s.listed.get_mut(x) {
                e.in_flight += 1;
                e.last_use = tick;
            }
        }
    }

    /// The write `begin` let go is done: `durable` if it went with FUA (or through),
    /// `ok` if it succeeded.
    pub fn end(&self, extents: &[u64], durable: bool, ok: bool) {
        let mut s = self.state.lock();
        s.writes += u64::from(!durable);
        let seq = match (ok, durable) {
            (false, _) => u64::MAX,
            (true, false) => s.writes,
            (true, true) => 0,
        };
        let mut freed = false;
        for x in extents {
            if let Some(e) = s.listed.get_mut(x) {
                e.in_flight = e.in_flight.saturating_sub(1);
                e.unsynced = e.unsynced.max(seq);
                freed |= e.in_flight == 0;
            }
        }
        drop(s);
        if freed {
            self.freed.notify_all();
        }
    }

    /// Non-durable writes completed so far: a flush that starts now covers them.
    pub fn writes(&self) -> u64 {
        self.state.lock().writes
    }

    /// A flush that started when [`ActivityLog::writes`] said `writes` completed on
    /// every member in sync.
    pub fn flushed(&self, writes: u64) {
        let mut s = self.state.lock();
        s.flushed = s.flushed.max(writes);
        drop(s);
        self.freed.notify_all();
    }

    /// Starts the list again, empty, with other extents: only once every write ended
    /// and a flush covered them (else an error, and nothing changes).
    pub fn reshape(
        &self,
        extent: u64,
        slots: usize,
        write_record: impl FnOnce(&Record) -> io::Result<()>,
    ) -> io::Result<()> {
        if !extent.is_power_of_two() || extent < IO_ALIGN {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("an activity log extent of {extent} bytes is not a power of two of at least 4 KiB"),
            ));
        }
        let _writing = self.writing.lock();
        let mut s = self.state.lock();
        let flushed = s.flushed;
        if s.listed
            .values()
            .any(|e| e.in_flight > 0 || e.unsynced > flushed)
        {
            return Err(io::Error::new(
                io::ErrorKind::WouldBlock,
                "the activity log changes only with no write in flight or unflushed",
            ));
        }
        s.extent = extent;
        s.slots = slots.clamp(1, MAX_SLOTS);
        s.listed.clear();
        s.everything = false;
        s.seq += 1;
        let record = Record {
            seq: s.seq,
            extent,
            slots: s.slots as u16,
            everything: false,
            extents: Vec::new(),
        };
        drop(s);
        write_record(&record)
    }

    /// Extents listed now (for status and tests).
    pub fn listed(&self) -> usize {
        self.state.lock().listed.len()
    }

    /// The most a crash now makes the resync copy, in a volume of `data_len` bytes.
    pub fn crash_copy(&self, data_len: u64) -> u64 {
        let s = self.state.lock();
        if s.everything {
            return data_len;
        }
        (s.listed.len() as u64 * s.extent).min(data_len)
    }
}

/// The mirror's side: the records written to the local member, and when.
impl super::Inner {
    /// Lists the extents of `spans` in the activity log (writing a record first if
    /// one is new): call before the write leaves, and `activity.end` once it returned
    /// and `finish` passed, so that an extent leaves the log only once every member
    /// has its writes or a persisted bitmap says what one lacks.
    pub(super) fn list(&self, spans: &[(u64, u64)]) -> io::Result<Vec<u64>> {
        let mut extents = Vec::new();
        self.activity
            .extents_of(spans.iter().copied(), &mut extents);
        loop {
            match self.activity.begin(&extents, |r| self.write_activity(r))? {
                Begin::Listed => return Ok(extents),
                Begin::NeedsFlush => self.sync()?,
            }
        }
    }

    pub(super) fn write_activity(&self, r: &Record) -> io::Result<()> {
        self.local
            .write_through_at(slot_of(ACTIVITY_AT, r.seq), &r.encode())
    }

    /// At open, as primary: what a crash left marked in the bitmaps made durable,
    /// then an empty activity log, then the header saying it is kept.
    pub(super) fn start_activity_log(&self) -> io::Result<()> {
        if self.persist_bitmaps()? {
            self.local.sync()?;
        }
        self.write_activity(&self.activity.first_record())?;
        self.header.lock().activity_log = true;
        Ok(())
    }
}

impl super::MirrorBackend {
    /// Makes the activity log list up to `slots` extents of `extent` bytes (by default
    /// 1,000 of 4 MiB): what a crash of the primary makes the resync copy at most,
    /// against how often a write to an extent not listed waits for a record on the
    /// local member. Kept across opens. Flushes first; fails while writes are in flight.
    pub fn reshape_activity_log(&self, extent: u64, slots: usize) -> io::Result<()> {
        let m = &self.inner;
        m.sync()?;
        m.activity.reshape(extent, slots, |r| m.write_activity(r))
    }

    /// Extents the activity log lists now.
    pub fn active_extents(&self) -> usize {
        self.inner.activity.listed()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::RefCell;

    fn log(slots: usize) -> (ActivityLog, RefCell<Vec<Record>>) {
        (
            ActivityLog::new(1 << 20, slots, 0),
            RefCell::new(Vec::new()),
        )
    }

    fn begin(al: &ActivityLog, written: &RefCell<Vec<Record>>, x: &[u64]) -> Begin {
        al.begin(x, |r| {
            written.borrow_mut().push(r.clone());
            Ok(())
        })
        .unwrap()
    }

    #[test]
    fn a_record_round_trips_and_a_torn_slot_leaves_the_one_before() {
        let r = Record {
            seq: 5,
            extent: 4 << 20,
            slots: 1000,
            everything: false,
            extents: vec![1, 7, 900],
        };
        let b = r.encode();
        assert_eq!(Record::decode(&b), Some(r.clone()));
        // The layout, byte by byte (docs/mirror.md): magic, sequence number, extent,
        // slots, everything, count, 8 reserved bytes, the extents, the seal at the end.
        assert_eq!(&b[..8], b"HSCMACT1");
        assert_eq!(b[8..16], 5u64.to_le_bytes());
        assert_eq!(b[16..24], (4u64 << 20).to_le_bytes());
        assert_eq!(b[24..26], 1000u16.to_le_bytes());
        assert_eq!((b[26], b[27]), (0, 0));
        assert_eq!(b[28..32], 3u32.to_le_bytes());
        assert_eq!(b[40..44], 1u32.to_le_bytes());
        assert_eq!(b[48..52], 900u32.to_le_bytes());
        assert_eq!(b[4092..], crc32c::crc32c(&b[..4092]).to_le_bytes());
        let mut torn = b.to_vec();
        torn[100..].fill(0);
        torn[20] ^= 1;
        assert_eq!(Record::decode(&torn), None);
        assert_eq!(Record::decode(&[0u8; 4096]), None);
        let older = Record {
            seq: 4,
            ..r.clone()
        };
        assert_eq!(
            newest([Record::decode(&older.encode()), None], |r| r.seq),
            Some(older)
        );
        // Extents as bitmap chunks: 4 MiB extents of 1 MiB chunks, cut at the end.
        let chunks: Vec<u64> = r.chunks(1 << 20, 30 << 20).collect();
        assert_eq!(chunks, vec![4, 5, 6, 7, 28, 29]);
        // Extents past the volume (or past u64 once multiplied) cover nothing.
        let wild = Record {
            extent: 1 << 62,
            extents: vec![u32::MAX, 3],
            ..r.clone()
        };
        assert_eq!(wild.chunks(1 << 20, 30 << 20).count(), 0);
        // An extent below a block is refused at decode.
        assert_eq!(
            Record::decode(
                &Record {
                    extent: 512,
                    ..r.clone()
                }
                .encode()
            ),
            None
        );
    }

    #[test]
    fn a_listed_extent_costs_no_record_and_a_new_one_costs_one() {
        let (al, written) = log(4);
        assert!(matches!(begin(&al, &written, &[1, 2]), Begin::Listed));
        assert_eq!(written.borrow().len(), 1);
        assert_eq!(written.borrow()[0].extents, vec![1, 2]);
        al.end(&[1, 2], true, true);
        assert!(matches!(begin(&al, &written, &[2]), Begin::Listed));
        assert_eq!(written.borrow().len(), 1, "a listed extent writes nothing");
        al.end(&[2], true, true);
    }

    #[test]
    fn an_extent_leaves_only_when_nothing_in_it_is_in_flight_or_unflushed() {
        let (al, written) = log(2);
        // 1 written without FUA and not flushed yet; 2 durable but in flight.
        begin(&al, &written, &[1]);
        al.end(&[1], false, true);
        begin(&al, &written, &[2]);
        // 3 needs room: 1 waits for a flush, 2 is in flight.
        assert!(matches!(begin(&al, &written, &[3]), Begin::NeedsFlush));
        let w = al.writes();
        al.flushed(w);
        assert!(matches!(begin(&al, &written, &[3]), Begin::Listed));
        let last = written.borrow().last().unwrap().clone();
        assert_eq!(last.extents, vec![2, 3], "1 left, 2 (in flight) stayed");
        // A failed write pins its extent: 2 fails, then 4 must evict 3, never 2.
        al.end(&[2], true, false);
        al.end(&[3], true, true);
        begin(&al, &written, &[4]);
        assert_eq!(written.borrow().last().unwrap().extents, vec![2, 4]);
        // A write that started before a flush is not covered by it.
        al.end(&[4], true, true);
        let before = al.writes();
        begin(&al, &written, &[5]);
        al.end(&[5], false, true);
        al.flushed(before);
        assert!(matches!(begin(&al, &written, &[6]), Begin::NeedsFlush));
    }

    #[test]
    fn a_write_wider_than_the_list_makes_the_record_say_everything() {
        let (al, written) = log(2);
        begin(&al, &written, &[1, 2, 3]);
        assert!(written.borrow().last().unwrap().everything);
        al.end(&[1, 2, 3], true, true);
        // From then on nothing is written: everything is copied after a crash anyway.
        begin(&al, &written, &[9]);
        assert_eq!(written.borrow().len(), 1);
    }

    #[test]
    fn a_writer_waits_for_a_write_in_flight_to_end_rather_than_evict_it() {
        let al = std::sync::Arc::new(ActivityLog::new(1 << 20, 1, 0));
        al.begin(&[1], |_| Ok(())).unwrap();
        let other = std::sync::Arc::clone(&al);
        let t = std::thread::spawn(move || {
            other.begin(&[2], |r| {
                assert_eq!(r.extents, vec![2]);
                Ok(())
            })
        });
        std::thread::sleep(std::time::Duration::from_millis(50));
        assert!(
            !t.is_finished(),
            "it evicted an extent with a write in flight"
        );
        al.end(&[1], true, true);
        assert!(matches!(t.join().unwrap().unwrap(), Begin::Listed));
    }
}

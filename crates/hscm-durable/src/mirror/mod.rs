//! A mirrored home (docs/mirror.md): a local file or device and one to four NBD
//! exports on other machines, kept equal. [`MirrorBackend`] is a [`Backend`], so any
//! engine that writes through a home (the flat volume, the file system on it) runs on
//! a mirror unchanged.
//!
//! The promise is DRBD's protocol C: a write counts as durable (a `sync` or a
//! `write_through_at` returns Ok) only once the local member and every member in sync
//! have it durably (FUA, or a FLUSH that covers it), and only while at least the
//! quorum of members is in sync (by default a majority). A member that fails a request
//! drops out of sync: the primary goes on without it if the quorum allows, recording
//! in a write-intent bitmap on its local member which chunks the absent member
//! missed, and a background thread copies those chunks (or everything, for a member
//! that needs a full copy) once it answers again, then flushes it and counts it in
//! sync. Without quorum, writes fail with ETIMEDOUT (`io-error`) or wait
//! (`suspend-io`); the volume above refuses writes while reads go on from RAM, and
//! lets them in again once a flush passes.
//!
//! Fencing: every member's header carries the set's generation; `promote` raises it,
//! claims every remote member it reaches (the owner record of [`crate::nbd::owner`]),
//! and a primary finds out it was replaced when its claim is gone: before its first
//! write after a lease of [`LEASE`] it reads the claim again, and every flush reads
//! it. A replaced primary turns read-only with the reason in every error.
//!
//! Layout of every member: [`META_LEN`] bytes of metadata (the mirror header, then
//! one bitmap region per remote member), the data, and the 4 KiB owner record at the
//! end, so any member can be exported over NBD to a new primary.

mod activity;
mod bits;
mod header;
mod open;
mod promote;
mod resync;

use std::collections::BTreeSet;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use parking_lot::{Mutex, RwLock};

use crate::device::{AlignedBuf, Backend, DeviceError, FileBackend, RemoteHealth, IO_ALIGN};
pub use crate::members::{MemberState, MemberStatus, MirrorStatus, OnNoQuorum};
use crate::nbd::owner::{hostname, random_u64, OWNER_BLOCK};
use crate::nbd::{NbdBackend, NbdUri};
use activity::{ActivityLog, Record};
use bits::{Bits, WORDS_PER_BLOCK};
pub use header::{Member, MirrorHeader, HEADER_LEN, MAGIC, MAX_NAME};
pub use open::create;
pub use promote::{promote, PromoteOptions, Promoted};

/// Metadata at the start of every member: the header, then the bitmaps.
pub const META_LEN: u64 = 1 << 20;
/// Remote members at most (each has a bitmap region).
pub const MAX_REMOTES: usize = 4;
/// One remote member's bitmap region.
const BITMAP_LEN: u64 = 240 << 10;
/// The activity log's two slots, after the last bitmap region.
const ACTIVITY_AT: u64 = HEADER_LEN as u64 + MAX_REMOTES as u64 * BITMAP_LEN;
const _: () = assert!(ACTIVITY_AT + 2 * IO_ALIGN <= META_LEN);
/// The smallest region one bitmap bit stands for.
const MIN_CHUNK: u64 = 64 << 10;
/// How long a check of a remote member's claim is trusted before writing to it again.
pub const LEASE: Duration = Duration::from_secs(1);
/// How long `suspend-io` holds a write waiting for the quorum.
pub const SUSPEND_LIMIT: Duration = Duration::from_secs(60);
/// Chunks the resync copies per step with writes held.
const RESYNC_BATCH: usize = 64;
/// How often the resync thread looks for work, and how often it tries an absent member.
const RESYNC_EVERY: Duration = Duration::from_millis(50);
const RETRY_ABSENT: Duration = Duration::from_millis(500);

/// What an export (or a local file) must hold to be a member of a mirror whose
/// volume needs `data_len` bytes.
pub fn member_len(data_len: u64) -> u64 {
    META_LEN + data_len.div_ceil(IO_ALIGN) * IO_ALIGN + OWNER_BLOCK
}

/// The region one bitmap bit stands for: at least 64 KiB, large enough for the
/// bitmap region to cover `data_len`.
pub fn chunk_for(data_len: u64) -> u64 {
    let bits = BITMAP_LEN * 8;
    data_len.div_ceil(bits).next_power_of_two().max(MIN_CHUNK)
}

/// True when the local file at `path` starts with a mirror header.
pub fn is_mirror(path: &Path) -> bool {
    use std::io::Read;
    let mut magic = [0u8; 8];
    std::fs::File::open(path)
        .and_then(|mut f| f.read_exact(&mut magic))
        .is_ok()
        && &magic == MAGIC
}

/// How a new mirror behaves.
#[derive(Debug, Clone, Default)]
pub struct MirrorOptions {
    /// Members that must be in sync to acknowledge a write; 0 for a majority.
    pub quorum: u8,
    pub on_no_quorum: OnNoQuorum,
    /// Take a local file that exists and exports that hold data.
    pub overwrite: bool,
}

/// A mirrored home: see the module documentation.
pub struct MirrorBackend {
    inner: Arc<Inner>,
    resync: Mutex<Option<JoinHandle<()>>>,
}

struct Inner {
    path: PathBuf,
    local: FileBackend,
    writable: bool,
    remotes: Vec<Remote>,
    /// The header's bytes per bitmap bit and data bytes, which never change once
    /// made: read by every write without the header's lock.
    chunk: u64,
    data_len: u64,
    header: Mutex<MirrorHeader>,
    /// Writes hold it shared; a resync step and the step into sync hold it alone.
    gate: RwLock<()>,
    fenced: Mutex<Option<String>>,
    /// The extents writes may be in flight in, listed on the local member.
    activity: ActivityLog,
    /// A member's state changed and the headers must say so before an acknowledgement.
    states_changed: AtomicBool,
    health: Arc<RemoteHealth>,
    stop: AtomicBool,
}

struct Remote {
    /// Its index in the header's members.
    slot: usize,
    uri: NbdUri,
    link: RwLock<Option<Arc<NbdBackend>>>,
    state: Mutex<MemberState>,
    absent: Mutex<Option<String>>,
    next_try: Mutex<Instant>,
    bits: Mutex<Bits>,
    /// When its claim was last read back as ours.
    lease: Mutex<Option<Instant>>,
    copied: AtomicU64,
}

fn err(kind: io::ErrorKind, msg: impl Into<String>) -> io::Error {
    io::Error::new(kind, msg.into())
}

fn dev_io(what: String) -> impl FnOnce(io::Error) -> DeviceError {
    move |source| DeviceError::Io { what, source }
}

/// Reads the mirror header a member holds at its start (None: no mirror header).
fn read_header(b: &dyn Backend) -> io::Result<Option<MirrorHeader>> {
    let mut block = AlignedBuf::zeroed(HEADER_LEN);
    b.read_at(0, &mut block)?;
    MirrorHeader::decode(&block)
        .map_err(|e| err(io::ErrorKind::InvalidData, format!("{}: {e}", b.describe())))
}

fn write_header(b: &dyn Backend, bytes: &[u8], durable: bool) -> io::Result<()> {
    let mut block = AlignedBuf::zeroed(HEADER_LEN);
    block.copy_from_slice(bytes);
    if durable {
        b.write_through_at(0, &block)
    } else {
        b.write_at(0, &block)
    }
}

fn primary_name() -> String {
    format!("{} (pid {})", hostname(), std::process::id())
}

impl Remote {
    fn new(
        slot: usize,
        uri: NbdUri,
        link: Option<NbdBackend>,
        state: MemberState,
        h: &MirrorHeader,
    ) -> Remote {
        let absent = link.is_none().then(|| "not reached yet".to_string());
        Remote {
            slot,
            uri,
            link: RwLock::new(link.map(Arc::new)),
            state: Mutex::new(state),
            absent: Mutex::new(absent),
            next_try: Mutex::new(Instant::now()),
            bits: Mutex::new(Bits::new(h.data_len.div_ceil(h.chunk))),
            lease: Mutex::new(Some(Instant::now())),
            copied: AtomicU64::new(0),
        }
    }

    fn link(&self) -> Option<Arc<NbdBackend>> {
        self.link.read().clone()
    }

    /// Answering and in sync: it takes every write.
    fn takes_writes(&self) -> bool {
        *self.state.lock() == MemberState::InSync && self.absent.lock().is_none()
    }

    fn bitmap_offset(&self) -> u64 {
        HEADER_LEN as u64 + (self.slot as u64 - 1) * BITMAP_LEN
    }
}

impl MirrorBackend {
    fn start(
        path: &Path,
        local: FileBackend,
        header: MirrorHeader,
        remotes: Vec<Remote>,
        writable: bool,
        activity: ActivityLog,
    ) -> MirrorBackend {
        let health = Arc::new(RemoteHealth::default());
        let inner = Arc::new(Inner {
            path: path.to_path_buf(),
            local,
            writable,
            remotes,
            chunk: header.chunk,
            data_len: header.data_len,
            header: Mutex::new(header),
            gate: RwLock::new(()),
            fenced: Mutex::new(None),
            activity,
            states_changed: AtomicBool::new(false),
            health,
            stop: AtomicBool::new(false),
        });
        inner.update_health();
        let resync = (writable && !inner.remotes.is_empty()).then(|| {
            let i = Arc::clone(&inner);
            std::thread::Builder::new()
                .name("hscm-mirror-resync".into())
                .spawn(move || i.resync_loop())
                .expect("spawning the mirror's resync thread")
        });
        MirrorBackend {
            inner,
            resync: Mutex::new(resync),
        }
    }

    pub fn status(&self) -> MirrorStatus {
        self.inner.status()
    }

    /// Blocks until every member is in sync or `timeout` passes; whether they are.
    pub fn wait_in_sync(&self, timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        loop {
            let s = self.status();
            if s.in_sync == s.members.len() {
                return true;
            }
            if Instant::now() > deadline {
                return false;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Inner {
    fn chunks(&self, offset: u64, len: u64) -> std::ops::Range<u64> {
        let chunk = self.chunk;
        if len == 0 {
            return 0..0;
        }
        offset / chunk..(offset + len - 1) / chunk + 1
    }

    fn check_writable(&self) -> io::Result<()> {
        if !self.writable {
            return Err(err(
                io::ErrorKind::PermissionDenied,
                format!("{}: opened read-only", self.path.display()),
            ));
        }
        match self.fenced.lock().clone() {
            Some(why) => Err(err(io::ErrorKind::PermissionDenied, why)),
            None => Ok(()),
        }
    }

    fn fence(&self, why: &io::Error) -> io::Error {
        let msg = format!(
            "{}: another primary took this mirror over ({why}); this one turned read-only",
            self.path.display()
        );
        tracing::error!("{msg}");
        let why = self.fenced.lock().get_or_insert(msg).clone();
        self.update_health();
        err(io::ErrorKind::PermissionDenied, why)
    }

    /// Runs `request` on remote `r` if it takes writes (its lease renewed first);
    /// records the chunks it missed otherwise. Err only when this primary is fenced.
    fn to_remote(
        &self,
        r: &Remote,
        chunks: &[u64],
        durable: bool,
        request: impl FnOnce(&NbdBackend) -> io::Result<()>,
    ) -> io::Result<()> {
        let link = r.link().filter(|_| r.takes_writes());
        let Some(link) = link else {
            let mut bits = r.bits.lock();
            chunks.iter().for_each(|&c| bits.mark(c));
            return Ok(());
        };
        let renewed = self.renew_lease(r, &link).and_then(|()| request(&link));
        match renewed {
            Ok(()) => {
                if !durable {
                    r.bits.lock().unflushed.extend_from_slice(chunks);
                }
                Ok(())
            }
            Err(e) if e.kind() == io::ErrorKind::PermissionDenied => Err(self.fence(&e)),
            Err(e) => {
                self.drop_out(r, &e, chunks);
                Ok(())
            }
        }
    }

    fn renew_lease(&self, r: &Remote, link: &NbdBackend) -> io::Result<()> {
        let fresh = r.lease.lock().is_some_and(|t| t.elapsed() < LEASE);
        if !fresh {
            link.verify_owner()?;
            *r.lease.lock() = Some(Instant::now());
        }
        Ok(())
    }

    /// Member `r` failed a request: out of sync, with what it may lack recorded.
    fn drop_out(&self, r: &Remote, e: &io::Error, missed: &[u64]) {
        tracing::warn!(
            "{}: mirror member {} dropped out of sync: {e}",
            self.path.display(),
            r.uri
        );
        *r.absent.lock() = Some(e.to_string());
        *r.next_try.lock() = Instant::now() + RETRY_ABSENT;
        {
            let mut state = r.state.lock();
            if *state == MemberState::InSync {
                *state = MemberState::Behind;
            }
        }
        let mut bits = r.bits.lock();
        let unflushed = std::mem::take(&mut bits.unflushed);
        unflushed
            .into_iter()
            .chain(missed.iter().copied())
            .for_each(|c| bits.mark(c));
        drop(bits);
        *self.health.last_error.lock() = Some(format!("{}: {e}", r.uri));
        self.health.failed_requests.fetch_add(1, Ordering::Relaxed);
        self.states_changed.store(true, Ordering::Release);
        self.update_health();
    }

    fn in_sync(&self) -> usize {
        1 + self.remotes.iter().filter(|r| r.takes_writes()).count()
    }

    fn update_health(&self) {
        let needed = self.header.lock().needed();
        self.health
            .reachable
            .store(self.in_sync() >= needed, Ordering::Relaxed);
    }

    /// Writes the bitmap blocks that changed to the local member (not synced).
    fn persist_bitmaps(&self) -> io::Result<bool> {
        let mut wrote = false;
        for r in &self.remotes {
            let blocks: Vec<(usize, AlignedBuf)> = {
                let mut bits = r.bits.lock();
                let changed = std::mem::take(&mut bits.changed_blocks);
                changed
                    .into_iter()
                    .map(|blk| (blk, bits.encode_block(blk)))
                    .collect()
            };
            for (blk, buf) in &blocks {
                let at = r.bitmap_offset() + *blk as u64 * IO_ALIGN;
                if let Err(e) = self.local.write_at(at, buf) {
                    r.bits.lock().changed_blocks.insert(*blk);
                    return Err(e);
                }
                wrote = true;
            }
        }
        Ok(wrote)
    }

    /// Writes the header, with every member's state and a new epoch, to the local
    /// member (durably) and to every remote member that answers.
    fn commit_header(&self) -> io::Result<()> {
        for _ in 0..=self.remotes.len() {
            self.states_changed.store(false, Ordering::Release);
            let mut h = self.header.lock();
            h.epoch += 1;
            for r in &self.remotes {
                h.members[r.slot].state = *r.state.lock();
            }
            write_header(&self.local, &h.encode_for(h.members[0].id), true)?;
            for r in &self.remotes {
                let Some(link) = r.link().filter(|_| r.absent.lock().is_none()) else {
                    continue;
                };
                let id = h.members[r.slot].id;
                if let Err(e) = write_header(link.as_ref(), &h.encode_for(id), true) {
                    drop(h);
                    if e.kind() == io::ErrorKind::PermissionDenied {
                        return Err(self.fence(&e));
                    }
                    self.drop_out(r, &e, &[]);
                    h = self.header.lock();
                }
            }
            drop(h);
            if !self.states_changed.load(Ordering::Acquire) {
                break;
            }
        }
        self.update_health();
        Ok(())
    }

    /// After a write or flush (the gate released): headers brought up to date where
    /// a member's state changed, then the quorum rule.
    fn finish(&self, durable: bool) -> io::Result<()> {
        if durable && self.states_changed.load(Ordering::Acquire) {
            if self.persist_bitmaps()? {
                self.local.sync()?;
            }
            self.commit_header()?;
        }
        self.check_writable()?;
        let (needed, policy) = {
            let h = self.header.lock();
            (h.needed(), h.on_no_quorum)
        };
        let started = Instant::now();
        loop {
            let have = self.in_sync();
            if have >= needed {
                return Ok(());
            }
            if policy == OnNoQuorum::IoError
                || started.elapsed() > SUSPEND_LIMIT
                || self.stop.load(Ordering::Relaxed)
            {
                return Err(err(
                    io::ErrorKind::TimedOut,
                    format!(
                        "{}: {have} of the mirror's members are in sync and {needed} are needed \
                         (on-no-quorum {}); writes are refused until enough are back \
                         (they are copied back in the background)",
                        self.path.display(),
                        policy.name()
                    ),
                ));
            }
            std::thread::sleep(Duration::from_millis(20));
            self.check_writable()?;
        }
    }

    fn write(&self, offset: u64, buf: &[u8], durable: bool) -> io::Result<()> {
        self.check_writable()?;
        self.checked(offset, buf.len() as u64)?;
        let extents = self.list(&[(offset, buf.len() as u64)])?;
        let done = self.write_listed(offset, buf, durable);
        self.activity.end(&extents, durable, done.is_ok());
        done
    }

    fn write_listed(&self, offset: u64, buf: &[u8], durable: bool) -> io::Result<()> {
        let chunks: Vec<u64> = self.chunks(offset, buf.len() as u64).collect();
        {
            let _shared = self.gate.read();
            let at = META_LEN + offset;
            if durable {
                let mut local = None;
                let remotes = self.durable_to(&self.remotes, &chunks, at, buf, &mut || {
                    local = Some(self.local.write_through_at(at, buf));
                });
                local.expect("durable_to runs it")?;
                remotes?;
            } else {
                self.local.write_at(at, buf)?;
                for r in &self.remotes {
                    self.to_remote(r, &chunks, false, |l| l.write_at(at, buf))?;
                }
            }
        }
        self.finish(durable)
    }

    /// A durable write of `buf` at `at` to each of `remotes`, each sent before the
    /// next, and `local` (the local copy's write and sync) run once all are on their
    /// way: a write costs the slowest of the members, not their sum, and needs no
    /// thread of its own. Err only when this primary is fenced.
    fn durable_to(
        &self,
        remotes: &[Remote],
        chunks: &[u64],
        at: u64,
        buf: &[u8],
        local: &mut dyn FnMut(),
    ) -> io::Result<()> {
        let Some((first, rest)) = remotes.split_first() else {
            local();
            return Ok(());
        };
        let mut rest_result = Ok(());
        let mut started = false;
        let mut the_rest = || {
            if !std::mem::replace(&mut started, true) {
                rest_result = self.durable_to(rest, chunks, at, buf, local);
            }
        };
        let mine = self.to_remote(first, chunks, true, |l| {
            l.write_durable_overlapped(at, buf, &mut the_rest)
        });
        the_rest();
        mine.and(rest_result)
    }

    fn checked(&self, offset: u64, len: u64) -> io::Result<()> {
        let data_len = self.data_len;
        if offset.checked_add(len).is_none_or(|end| end > data_len) {
            return Err(err(
                io::ErrorKind::InvalidInput,
                format!(
                    "{}: {len} bytes at {offset} run past the mirror's {data_len}",
                    self.path.display()
                ),
            ));
        }
        Ok(())
    }

    fn sync(&self) -> io::Result<()> {
        self.check_writable()?;
        let writes = self.activity.writes();
        {
            let _shared = self.gate.read();
            self.persist_bitmaps()?;
            self.local.sync()?;
            for r in &self.remotes {
                let taken = std::mem::take(&mut r.bits.lock().unflushed);
                let flushed = self.to_remote(r, &[], true, |l| l.sync());
                if !r.takes_writes() {
                    // Dropped out at this flush (or before): what it had not flushed
                    // counts as missed.
                    let mut bits = r.bits.lock();
                    taken.into_iter().for_each(|c| bits.mark(c));
                }
                flushed?;
            }
        }
        self.finish(true)?;
        self.activity.flushed(writes);
        Ok(())
    }

    fn status(&self) -> MirrorStatus {
        let h = self.header.lock().clone();
        let mut members = vec![MemberStatus {
            name: h.members[0].name.clone(),
            state: MemberState::InSync,
            absent: None,
            to_copy: 0,
            copied: 0,
        }];
        for r in &self.remotes {
            let state = *r.state.lock();
            let bits = r.bits.lock();
            let to_copy = if state == MemberState::NeedsFull && !bits.full_copy_started {
                h.data_len
            } else {
                (bits.dirty_count * h.chunk).min(h.data_len)
            };
            members.push(MemberStatus {
                name: r.uri.to_string(),
                state,
                absent: r.absent.lock().clone(),
                to_copy,
                copied: r.copied.load(Ordering::Relaxed),
            });
        }
        if !self.writable {
            // Read-only: what the header says, nothing connected.
            for m in &h.members[1..] {
                members.push(MemberStatus {
                    name: m.name.clone(),
                    state: m.state,
                    absent: Some("not connected (opened read-only)".into()),
                    to_copy: 0,
                    copied: 0,
                });
            }
        }
        MirrorStatus {
            generation: h.generation,
            epoch: h.epoch,
            needed: h.needed(),
            in_sync: if self.writable {
                self.in_sync()
            } else {
                1 + h.members[1..]
                    .iter()
                    .filter(|m| m.state == MemberState::InSync)
                    .count()
            },
            on_no_quorum: h.on_no_quorum,
            fenced: self.fenced.lock().clone(),
            members,
            crash_copy: if self.writable {
                self.activity.crash_copy(h.data_len)
            } else {
                0
            },
        }
    }

    /// At a clean stop: every member flushed, the headers say so.
    fn close(&self) {
        if !self.writable || self.fenced.lock().is_some() {
            return;
        }
        let synced = self.sync();
        let mut h = self.header.lock();
        h.clean = synced.is_ok();
        drop(h);
        if let Err(e) = self.commit_header() {
            tracing::warn!(
                "{}: could not mark the mirror stopped cleanly: {e}",
                self.path.display()
            );
        }
    }
}

impl Backend for MirrorBackend {
    fn len(&self) -> u64 {
        self.inner.data_len
    }

    fn read_at(&self, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        self.inner.checked(offset, buf.len() as u64)?;
        self.inner.local.read_at(META_LEN + offset, buf)
    }

    fn read_vectored_at(&self, offset: u64, bufs: &mut [&mut [u8]]) -> io::Result<()> {
        let total: u64 = bufs.iter().map(|b| b.len() as u64).sum();
        self.inner.checked(offset, total)?;
        self.inner.local.read_vectored_at(META_LEN + offset, bufs)
    }

    fn write_at(&self, offset: u64, buf: &[u8]) -> io::Result<()> {
        self.inner.write(offset, buf, false)
    }

    fn write_many(&self, writes: &[(u64, &[u8])]) -> io::Result<()> {
        let m = &self.inner;
        m.check_writable()?;
        for (at, b) in writes {
            m.checked(*at, b.len() as u64)?;
        }
        let spans: Vec<(u64, u64)> = writes.iter().map(|(a, b)| (*a, b.len() as u64)).collect();
        let extents = m.list(&spans)?;
        let done = self.write_many_listed(writes);
        m.activity.end(&extents, false, done.is_ok());
        done
    }

    fn sync(&self) -> io::Result<()> {
        self.inner.sync()
    }

    /// One FUA round trip per write beats a write and a share of a group sync: that
    /// costs two round trips, and a flush reads the member's claim first (a third;
    /// `hscm bench mirror` measured the group path at 0.37-0.53x of this one's rate
    /// at QD16).
    fn prefers_write_through(&self) -> bool {
        !self.inner.remotes.is_empty()
            && self
                .inner
                .remotes
                .iter()
                .all(|r| r.link().is_none_or(|l| l.prefers_write_through()))
    }

    fn write_through_at(&self, offset: u64, buf: &[u8]) -> io::Result<()> {
        self.inner.write(offset, buf, true)
    }

    fn describe(&self) -> String {
        format!(
            "{} (mirrored on {} more)",
            self.inner.path.display(),
            self.inner.header.lock().members.len() - 1
        )
    }

    fn is_direct(&self) -> bool {
        self.inner.local.is_direct()
    }

    fn exact_len(&self) -> bool {
        false
    }

    fn remote_health(&self) -> Option<Arc<RemoteHealth>> {
        (!self.inner.remotes.is_empty()).then(|| self.inner.health.clone())
    }

    fn mirror_status(&self) -> Option<MirrorStatus> {
        Some(self.status())
    }
}

impl MirrorBackend {
    fn write_many_listed(&self, writes: &[(u64, &[u8])]) -> io::Result<()> {
        let m = &self.inner;
        let shifted: Vec<(u64, &[u8])> = writes.iter().map(|(a, b)| (META_LEN + a, *b)).collect();
        let chunks: Vec<u64> = writes
            .iter()
            .flat_map(|(at, b)| m.chunks(*at, b.len() as u64))
            .collect();
        {
            let _shared = m.gate.read();
            m.local.write_many(&shifted)?;
            for r in &m.remotes {
                m.to_remote(r, &chunks, false, |l| l.write_many(&shifted))?;
            }
        }
        m.finish(false)
    }
}

impl Drop for MirrorBackend {
    fn drop(&mut self) {
        self.inner.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.resync.lock().take() {
            let _ = t.join();
        }
        self.inner.close();
    }
}

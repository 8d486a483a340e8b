//! The durable hybrid volume.
//!
//! Locking invariant (what makes the unsafe RAM accesses sound):
//! * Each chunk has an `io` mutex and a `ram` rwlock, and a `state`
//!   (Unloaded → Loading → Loaded, never backwards while the volume is open).
//! * RAM bytes of a chunk are written only by a thread holding the chunk's `io` lock:
//!   the loader (state Loading, nobody else touches that RAM then) or a writer (state
//!   Loaded, and then also under the `ram` write lock).
//! * Readers touch RAM only when state is Loaded (Acquire, paired with the loader's
//!   Release), under the `ram` read lock. A holder of `io` may read RAM without `ram`,
//!   since every RAM writer also holds `io`.
//! * Multi-chunk requests take `io` locks in ascending chunk order; the loader does too.
//! * With a journal, the batch leader writes RAM on behalf of the records in its batch.
//!   Each record's owner holds the io locks of its chunks and waits until the leader is
//!   done, so the leader acts as that holder; it also takes each chunk's `ram` write lock.
//! * The home location of a non-Loaded chunk is always current: writes to such chunks go
//!   home directly (journal records exist only for Loaded chunks, which never turn back),
//!   and recovery brings home up to date before anything is loaded. So reading a
//!   non-Loaded chunk from the backend is always current.
//! * Every RAM change of a Loaded chunk sets the chunk's dirty bits under its `ram` write
//!   lock; a checkpoint copies and clears them under the `ram` read lock, so what it
//!   captures is exactly what those bits describe.

use std::collections::VecDeque;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use parking_lot::{Condvar, Mutex, MutexGuard, RwLock};

use std::collections::BTreeMap;

use crate::backend::{AlignedBuf, Backend, FileBackend};
use crate::error::{Error, Result};
use crate::header::{
    validate_geometry, validate_journal, Header, FORMAT_VERSION, HEADER_LEN, SECTOR,
};
#[cfg(doc)]
use crate::journal::MIN_JOURNAL;
use crate::journal::{self, Checkpoint, JOURNAL_OFFSET};
use crate::ram::{check_fits_in_memory, RamImage};
use crate::Durability;
use hscm_durable::{CommitError, GroupCommit, Poison};

const UNLOADED: u8 = 0;
const LOADING: u8 = 1;
const LOADED: u8 = 2;

/// The loader reads at most this much in one request (several chunks at a time),
/// so warm-up runs at the backend's sequential speed even with small chunks.
const MAX_LOAD_BATCH: u64 = 8 << 20;

/// Loader threads: two keep two large reads in flight, which most devices need to
/// reach their sequential speed.
const LOADERS: usize = 2;

/// How far ahead of the loader's sweep the prefault thread populates RAM.
const PREFAULT_AHEAD: u64 = 64 << 20;

/// Default chunk: the unit of loading, locking and request prioritisation.
pub const DEFAULT_CHUNK_SIZE: u32 = 1 << 20;

/// How long a batch leader waits at most for writers released by the previous batch,
/// and how long without a new arrival makes it stop waiting.
const GATHER_WAIT: Duration = Duration::from_micros(60);
const GATHER_QUIET: Duration = Duration::from_micros(15);
/// Batches over which the largest one estimates the number of writers.
const PEAK_WINDOW: u32 = 64;

/// Home runs separated by at most this many clean sectors are written as one.
const MERGE_GAP_SECTORS: u64 = 4;

/// Checkpoints copy dirty sectors through a buffer of this size (reused).
const STAGING_BYTES: usize = 8 << 20;

/// A chunk with at least this many dirty sectors is written home as one span.
const DENSE_CHUNK_SECTORS: u64 = 8;

/// A checkpoint starts once this much of the journal is in use (the rest absorbs writes
/// while it runs), or after a second of quiet with anything in it. Later checkpoints
/// find more writes per chunk, so they write fewer bytes home per write.
fn checkpoint_threshold(journal_len: u64) -> u64 {
    journal_len / 4 * 3
}
const CHECKPOINT_IDLE: Duration = Duration::from_secs(1);

/// How a new volume is laid out.
#[derive(Debug, Clone)]
pub struct CreateOptions {
    pub chunk_size: u32,
    /// The volume's default durability, recorded in its header.
    pub durability: Durability,
    /// Replace an existing regular file at the path.
    pub overwrite: bool,
    /// Bytes of write-ahead journal: 0 (the default) for none, every write going to its
    /// home location; else at least [`MIN_JOURNAL`]. A journal pays off when it holds
    /// the writes between two checkpoints of the hot set (docs/design.md); it also
    /// bounds replay after a crash (one journal's worth).
    pub journal_size: u64,
}

impl Default for CreateOptions {
    fn default() -> Self {
        CreateOptions {
            chunk_size: DEFAULT_CHUNK_SIZE,
            durability: Durability::Immediate,
            overwrite: false,
            journal_size: 0,
        }
    }
}

impl CreateOptions {
    /// The geometry and journal rules a new volume of `volume_size` bytes must obey;
    /// `name` names the store in the error.
    fn validate(&self, volume_size: u64, name: &str) -> Result<()> {
        validate_geometry(volume_size, self.chunk_size)
            .and_then(|()| validate_journal(self.journal_size))
            .and_then(|()| {
                // Only new volumes: one made before this rule still opens.
                if u64::from(self.chunk_size) > volume_size {
                    Err(format!(
                        "chunk size {} is larger than the volume ({volume_size} bytes)",
                        self.chunk_size
                    ))
                } else {
                    Ok(())
                }
            })
            .map_err(|reason| Error::BadGeometry {
                path: name.to_string(),
                reason,
            })
    }

    /// Bytes the backing store needs for a volume of `volume_size` bytes.
    pub fn backing_len(&self, volume_size: u64) -> u64 {
        JOURNAL_OFFSET + self.journal_size + volume_size
    }
}

/// How an existing volume is opened.
#[derive(Debug, Clone)]
pub struct OpenOptions {
    /// Overrides the durability recorded in the header for this session.
    pub durability: Option<Durability>,
    /// Refuse writes; the backing store is opened read-only.
    pub read_only: bool,
    /// Warm the RAM copy in a background thread (the normal case). Without it, only
    /// unaligned writes (and, for tests, `Volume::load_step`) load chunks.
    pub background_load: bool,
    /// Ask the kernel to back the RAM copy with transparent huge pages (the default):
    /// fewer TLB misses on random reads over large volumes, harmless where THP is off.
    pub huge_pages: bool,
}

impl Default for OpenOptions {
    fn default() -> Self {
        OpenOptions {
            durability: None,
            read_only: false,
            background_load: true,
            huge_pages: true,
        }
    }
}

/// Where warm-up stands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LoadState {
    Running,
    Done,
    /// The loader stopped on an error; unloaded chunks are still served from the backend.
    Failed(String),
    Stopped,
}

#[derive(Debug, Clone)]
pub struct LoadProgress {
    pub loaded_chunks: usize,
    pub total_chunks: usize,
    pub loaded_bytes: u64,
    pub state: LoadState,
}

struct Chunk {
    state: AtomicU8,
    io: Mutex<()>,
    ram: RwLock<()>,
    /// Some of its sectors changed in RAM since the last checkpoint captured it.
    dirty: AtomicBool,
}

/// One record waiting for a batch: whole sectors at a sector-aligned volume offset.
struct Pending {
    id: u64,
    start: u64,
    data: Vec<u8>,
    /// The owner needs it durable before returning (an Immediate write).
    durable: bool,
}

struct CommitState {
    queue: VecDeque<Pending>,
    next_id: u64,
    /// Every record with a smaller id is written and applied to RAM.
    finished_id: u64,
    writing: bool,
    next_seq: u64,
    /// Log position after the last batch written.
    head: u64,
    /// Log position of the last durable checkpoint: replay starts here.
    tail: u64,
    nonce: u64,
    generation: u64,
    checkpoint_wanted: bool,
    stop: bool,
    /// Records in the last batch, and the largest batch of the last window (an
    /// estimate of how many writers there are), with the window being measured.
    last_batch: usize,
    recent_peak: usize,
    window_peak: usize,
    window_batches: u32,
}

/// The write-ahead journal of a writable volume (format v2 with a journal).
struct Journal {
    len: u64,
    state: Mutex<CommitState>,
    /// Batch completions and freed space.
    cv: Condvar,
    /// Wakes the checkpointer.
    checkpoint_cv: Condvar,
    /// One checkpoint at a time; holds its staging buffer between checkpoints.
    checkpoint_lock: Mutex<Option<AlignedBuf>>,
    /// One bit per sector of the volume: changed since the last checkpoint captured it.
    dirty: Box<[AtomicU64]>,
    checkpoints: AtomicU64,
    batches: AtomicU64,
    records: AtomicU64,
    home_runs: AtomicU64,
}

/// What [`Volume::inspect`] found.
#[derive(Debug, Clone)]
pub struct Inspection {
    pub header: Header,
    /// Bytes the backing store holds.
    pub backing_len: u64,
    /// Journal batches a crash left behind; the next writable open replays them.
    pub pending_batches: u64,
}

/// Journal figures, for `hscm volume info` and benchmarks.
#[derive(Debug, Clone, Default)]
pub struct JournalStats {
    pub journal_len: u64,
    /// Bytes between the last checkpoint and the head: what a crash now would replay.
    pub in_use: u64,
    pub batches: u64,
    /// Records (writes, or pieces of large ones) in those batches.
    pub records: u64,
    pub checkpoints: u64,
    /// Device writes the checkpoints made to home locations.
    pub home_runs: u64,
    /// Batches found and replayed when the volume was opened.
    pub replayed_batches: u64,
}

struct Shared {
    backend: Box<dyn Backend>,
    header: Header,
    name: String,
    durability: Durability,
    read_only: bool,
    ram: RamImage,
    chunks: Box<[Chunk]>,
    loaded_chunks: AtomicUsize,
    loaded_bytes: AtomicU64,
    /// Chunks that requests hit before they were loaded; the loader takes these first.
    urgent: Mutex<VecDeque<usize>>,
    /// Where the loader's sequential sweep stands.
    cursor: Mutex<usize>,
    stop: AtomicBool,
    /// Loader threads still running; the last one out records the outcome.
    active_loaders: AtomicUsize,
    load_state: Mutex<LoadState>,
    load_cv: Condvar,
    /// Set once, on the first failed backend write or sync: the volume is read-only from then on.
    failure: Poison,
    /// Tickets handed to completed backend writes, in completion order.
    completed: AtomicU64,
    /// Which tickets are durable (group commit of in-place writes and flushes).
    commit: GroupCommit,
    /// Writable volumes with a journal.
    journal: Option<Journal>,
    /// Read-only volumes whose journal held batches at open: their effect, applied to
    /// everything read from the backend (nothing is written back).
    overlay: BTreeMap<u64, Box<[u8]>>,
    replayed_batches: u64,
}

/// A byte-addressable volume whose working copy lives in RAM and whose every write
/// goes through to a durable backend. See docs/design.md for the durability contract.
pub struct Volume {
    shared: Arc<Shared>,
    loaders: Vec<JoinHandle<()>>,
    checkpointer: Option<JoinHandle<()>>,
}

impl Volume {
    /// Creates a volume of `size` bytes in a new file (or on a block device).
    pub fn create(path: &Path, size: u64, opts: &CreateOptions) -> Result<Header> {
        // Refused before the file exists, so a bad request leaves nothing behind.
        opts.validate(size, &path.display().to_string())?;
        let backend = FileBackend::create(path, opts.backing_len(size), opts.overwrite)?;
        Self::format(&backend, size, opts)
    }

    /// Writes a fresh header onto `backend` and makes it durable.
    pub fn format(backend: &dyn Backend, size: u64, opts: &CreateOptions) -> Result<Header> {
        let name = backend.describe();
        opts.validate(size, &name)?;
        let journal_len = opts.journal_size;
        if backend.len() < opts.backing_len(size) {
            return Err(Error::InvalidArgument(format!(
                "{name} holds {} bytes, fewer than the {} a {size}-byte volume with a {journal_len}-byte journal needs",
                backend.len(),
                opts.backing_len(size)
            )));
        }
        let header = Header {
            volume_size: size,
            chunk_size: opts.chunk_size,
            durability: opts.durability,
            uuid: *uuid::Uuid::new_v4().as_bytes(),
            created_unix_s: SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map_or(0, |d| d.as_secs()),
            version: FORMAT_VERSION,
            journal_len,
        };
        // Slot 0 starts the chain; slot 1 is blanked so no record of an earlier volume
        // on the same store can be taken for ours (the UUID already guards this).
        let first = Checkpoint {
            generation: 0,
            next_seq: 1,
            log_pos: 0,
            nonce: journal::new_nonce(),
        };
        let mut block = AlignedBuf::zeroed(JOURNAL_OFFSET as usize);
        block[..HEADER_LEN as usize].copy_from_slice(&header.encode());
        let slot = first.slot() as usize;
        block[slot..slot + SECTOR as usize].copy_from_slice(&first.encode(&header.uuid));
        backend
            .write_at(0, &block)
            .map_err(|e| Error::io(format!("cannot write the header of {name}"), e))?;
        // Written once now, the journal's blocks are real (not unwritten extents), so
        // an append never waits for a file-system metadata update and its sync commits
        // data only.
        let zeros = AlignedBuf::zeroed(journal_len.min(4 << 20) as usize);
        let mut at = 0;
        while at < journal_len {
            let n = (journal_len - at).min(zeros.len() as u64) as usize;
            backend
                .write_at(JOURNAL_OFFSET + at, &zeros[..n])
                .map_err(|e| Error::io(format!("cannot initialise the journal of {name}"), e))?;
            at += n as u64;
        }
        backend
            .sync()
            .map_err(|e| Error::io(format!("cannot sync the header of {name}"), e))?;
        Ok(header)
    }

    /// Reads and validates a volume without opening it for I/O or changing anything:
    /// header, backing size and (with a journal) the newest checkpoint record and the
    /// chain after it.
    pub fn inspect(path: &Path) -> Result<Inspection> {
        let backend = FileBackend::open_for_inspection(path)?;
        let header = read_header(&backend)?;
        check_backing_len(&backend, &header)?;
        let pending_batches = if header.journal_len == 0 {
            0
        } else {
            journal::scan(&backend, &header)?.batches
        };
        Ok(Inspection {
            backing_len: backend.len(),
            header,
            pending_batches,
        })
    }

    pub fn open(path: &Path, opts: &OpenOptions) -> Result<Volume> {
        let backend = FileBackend::open(path, !opts.read_only)?;
        Self::open_backend(Box::new(backend), opts)
    }

    /// Opens a volume on any backend. Returns at once; the RAM copy warms in the background.
    pub fn open_backend(backend: Box<dyn Backend>, opts: &OpenOptions) -> Result<Volume> {
        let header = read_header(backend.as_ref())?;
        check_backing_len(backend.as_ref(), &header)?;
        let name = backend.describe();
        let size = usize::try_from(header.volume_size).map_err(|_| {
            Error::InvalidArgument(format!("{name}: volume too large for this address space"))
        })?;
        check_fits_in_memory(&name, header.volume_size)?;
        let ram = RamImage::new(size, opts.huge_pages)
            .map_err(|e| Error::io(format!("cannot map {size} bytes of RAM for {name}"), e))?;
        let chunks = (0..header.chunk_count())
            .map(|_| Chunk {
                state: AtomicU8::new(UNLOADED),
                io: Mutex::new(()),
                ram: RwLock::new(()),
                dirty: AtomicBool::new(false),
            })
            .collect();
        let (journal, overlay, replayed_batches) = if header.journal_len == 0 {
            (None, BTreeMap::new(), 0)
        } else {
            let replay = journal::scan(backend.as_ref(), &header)?;
            let batches = replay.batches;
            if opts.read_only {
                (None, replay.sectors, batches)
            } else {
                (
                    Some(recover(backend.as_ref(), &header, replay)?),
                    BTreeMap::new(),
                    batches,
                )
            }
        };
        if replayed_batches > 0 {
            tracing::info!(volume = %name, batches = replayed_batches, "replayed the journal");
        }
        let shared = Arc::new(Shared {
            durability: opts.durability.unwrap_or(header.durability),
            backend,
            header,
            name,
            read_only: opts.read_only,
            ram,
            chunks,
            loaded_chunks: AtomicUsize::new(0),
            loaded_bytes: AtomicU64::new(0),
            urgent: Mutex::new(VecDeque::new()),
            cursor: Mutex::new(0),
            stop: AtomicBool::new(false),
            active_loaders: AtomicUsize::new(if opts.background_load { LOADERS } else { 0 }),
            load_state: Mutex::new(LoadState::Running),
            load_cv: Condvar::new(),
            failure: Poison::default(),
            completed: AtomicU64::new(0),
            commit: GroupCommit::new(0),
            journal,
            overlay,
            replayed_batches,
        });
        let loaders = if opts.background_load {
            let mut handles = Vec::new();
            for i in 0..LOADERS {
                let s = Arc::clone(&shared);
                let handle = std::thread::Builder::new()
                    .name(format!("hscm-loader-{i}"))
                    .spawn(move || s.guarded("loader", || s.run_loader()))
                    .map_err(|e| Error::io("cannot start the loader thread", e))?;
                handles.push(handle);
            }
            let s = Arc::clone(&shared);
            // Best effort: without it the loader still works, only slower. Joined with
            // the loaders, so that closing or dropping the volume releases the backend
            // (and its lock) before it returns.
            if let Ok(h) = std::thread::Builder::new()
                .name("hscm-prefault".into())
                .spawn(move || s.guarded("prefault", || s.run_prefault()))
            {
                handles.push(h);
            }
            handles
        } else {
            Vec::new()
        };
        let checkpointer = match &shared.journal {
            Some(_) => {
                let s = Arc::clone(&shared);
                Some(
                    std::thread::Builder::new()
                        .name("hscm-checkpoint".into())
                        .spawn(move || s.guarded("checkpoint", || s.run_checkpointer()))
                        .map_err(|e| Error::io("cannot start the checkpoint thread", e))?,
                )
            }
            None => None,
        };
        Ok(Volume {
            shared,
            loaders,
            checkpointer,
        })
    }

    pub fn header(&self) -> &Header {
        &self.shared.header
    }

    pub fn size(&self) -> u64 {
        self.shared.header.volume_size
    }

    pub fn durability(&self) -> Durability {
        self.shared.durability
    }

    /// True when the backend bypasses the page cache (O_DIRECT was accepted).
    /// True when opened read-only (writes refused from the start, not after a failure).
    pub fn is_read_only(&self) -> bool {
        self.shared.read_only
    }

    pub fn backend_is_direct(&self) -> bool {
        self.shared.backend.is_direct()
    }

    /// Why the volume refuses writes, if it does.
    pub fn failure(&self) -> Option<&str> {
        self.shared.failure.get().map(|f| f.reason.as_str())
    }

    /// Copies `buf.len()` bytes at `offset` into `buf`: from RAM for loaded chunks,
    /// from the backend for the others (which are then loaded next).
    pub fn read_at(&self, offset: u64, buf: &mut [u8]) -> Result<()> {
        self.shared.read_with(offset, buf.len(), |at, piece| {
            buf[at..at + piece.len()].copy_from_slice(piece)
        })
    }

    /// Hands the `len` bytes at `offset` to `sink` piece by piece, in order, as
    /// `(position within the request, bytes)`, without an intermediate copy for loaded
    /// chunks: a piece is the volume's RAM itself, under the chunk's read lock, so
    /// `sink` should copy and return (a front-end copying into a buffer of its own
    /// choosing, e.g. with non-temporal stores, saves a copy this way).
    pub fn read_with(&self, offset: u64, len: usize, sink: impl FnMut(usize, &[u8])) -> Result<()> {
        self.shared.read_with(offset, len, sink)
    }

    /// Writes with the volume's durability.
    pub fn write_at(&self, offset: u64, data: &[u8]) -> Result<()> {
        self.shared.write_at(offset, data, self.shared.durability)
    }

    /// Writes with the given durability for this one request.
    pub fn write_at_with(&self, offset: u64, data: &[u8], durability: Durability) -> Result<()> {
        self.shared.write_at(offset, data, durability)
    }

    /// Makes every completed write durable. Fails once the device has failed.
    pub fn flush(&self) -> Result<()> {
        self.shared.flush()
    }

    /// Writes every journaled change to its home location and empties the journal
    /// (after which a crash replays nothing). Runs in the background on its own;
    /// `close` calls it. A no-op on volumes without a journal and read-only ones.
    pub fn checkpoint(&self) -> Result<()> {
        self.shared.flush()?;
        self.shared.checkpoint()
    }

    pub fn journal_stats(&self) -> JournalStats {
        let s = &self.shared;
        let mut out = JournalStats {
            journal_len: s.header.journal_len,
            replayed_batches: s.replayed_batches,
            ..JournalStats::default()
        };
        if let Some(j) = &s.journal {
            let st = j.state.lock();
            out.in_use = st.head - st.tail;
            out.batches = j.batches.load(Ordering::Relaxed);
            out.checkpoints = j.checkpoints.load(Ordering::Relaxed);
            out.records = j.records.load(Ordering::Relaxed);
            out.home_runs = j.home_runs.load(Ordering::Relaxed);
        }
        out
    }

    pub fn load_progress(&self) -> LoadProgress {
        let s = &self.shared;
        LoadProgress {
            loaded_chunks: s.loaded_chunks.load(Ordering::Relaxed),
            total_chunks: s.chunks.len(),
            loaded_bytes: s.loaded_bytes.load(Ordering::Relaxed),
            state: s.load_state.lock().clone(),
        }
    }

    /// Blocks until warm-up ends, or `timeout` passes (then returns the progress so far).
    pub fn wait_loaded(&self, timeout: Option<Duration>) -> Result<LoadProgress> {
        {
            let mut st = self.shared.load_state.lock();
            let deadline = timeout.map(|t| std::time::Instant::now() + t);
            while *st == LoadState::Running && !self.loaders.is_empty() {
                match deadline {
                    Some(d) => {
                        if self.shared.load_cv.wait_until(&mut st, d).timed_out() {
                            break;
                        }
                    }
                    None => self.shared.load_cv.wait(&mut st),
                }
            }
            if let LoadState::Failed(why) = &*st {
                return Err(Error::io(
                    format!("warm-up of {} failed", self.shared.name),
                    std::io::Error::other(why.clone()),
                ));
            }
        }
        Ok(self.load_progress())
    }

    /// Loads the next batch of chunks in the calling thread; false when all are loaded.
    /// The background loader is a loop around this; tests call it to step the state machine.
    #[cfg(any(test, feature = "testing"))]
    pub fn load_step(&self) -> Result<bool> {
        self.shared.load_step()
    }

    /// Flushes, checkpoints (so the next open replays nothing) and stops the
    /// background threads, reporting a failure.
    pub fn close(mut self) -> Result<()> {
        let r = self.shared.flush().and_then(|()| self.shared.checkpoint());
        self.stop_threads();
        r
    }

    fn stop_threads(&mut self) {
        self.shared.stop.store(true, Ordering::Relaxed);
        if let Some(j) = &self.shared.journal {
            j.state.lock().stop = true;
            j.checkpoint_cv.notify_all();
        }
        for h in self.loaders.drain(..).chain(self.checkpointer.take()) {
            let _ = h.join();
        }
    }
}

impl Drop for Volume {
    fn drop(&mut self) {
        let s = &self.shared;
        if !s.read_only && s.failure.get().is_none() {
            if let Err(e) = s.flush().and_then(|()| s.checkpoint()) {
                tracing::error!(volume = %s.name, "flush on close failed: {e}");
            }
        }
        self.stop_threads();
    }
}

/// Brings the home locations up to date with what the journal holds, then starts a
/// new incarnation (a fresh nonce) whose chain begins where the old one ended.
fn recover(backend: &dyn Backend, header: &Header, replay: journal::Replay) -> Result<Journal> {
    let name = backend.describe();
    let fail = |what: &str, e| Error::io(format!("journal recovery of {name}: {what}"), e);
    if !replay.sectors.is_empty() {
        let runs = journal::runs_of(&replay.sectors);
        let writes: Vec<(u64, &[u8])> = runs
            .iter()
            .map(|(o, b)| (header.data_offset() + o, &b[..]))
            .collect();
        backend
            .write_many(&writes)
            .map_err(|e| fail("writing replayed sectors home", e))?;
        backend.sync().map_err(|e| fail("sync after replay", e))?;
    }
    let ck = Checkpoint {
        generation: replay.checkpoint.generation + 1,
        next_seq: replay.next_seq,
        log_pos: replay.end_pos,
        nonce: journal::new_nonce(),
    };
    ck.persist(backend, &header.uuid)
        .map_err(|e| fail("writing the checkpoint record", e))?;
    let sectors = header.volume_size / SECTOR;
    Ok(Journal {
        len: header.journal_len,
        state: Mutex::new(CommitState {
            queue: VecDeque::new(),
            next_id: 0,
            finished_id: 0,
            writing: false,
            next_seq: ck.next_seq,
            head: ck.log_pos,
            tail: ck.log_pos,
            nonce: ck.nonce,
            generation: ck.generation,
            checkpoint_wanted: false,
            stop: false,
            last_batch: 0,
            recent_peak: 0,
            window_peak: 0,
            window_batches: 0,
        }),
        cv: Condvar::new(),
        checkpoint_cv: Condvar::new(),
        checkpoint_lock: Mutex::new(None),
        dirty: (0..sectors.div_ceil(64))
            .map(|_| AtomicU64::new(0))
            .collect(),
        checkpoints: AtomicU64::new(0),
        batches: AtomicU64::new(0),
        records: AtomicU64::new(0),
        home_runs: AtomicU64::new(0),
    })
}

fn read_header(backend: &dyn Backend) -> Result<Header> {
    let name = backend.describe();
    if backend.len() < HEADER_LEN {
        return Err(Error::SizeMismatch {
            path: name,
            expected: HEADER_LEN,
            actual: backend.len(),
            volume_size: 0,
            kind: "truncated (not even a header)",
        });
    }
    let mut block = AlignedBuf::zeroed(HEADER_LEN as usize);
    backend
        .read_at(0, &mut block)
        .map_err(|e| Error::io(format!("cannot read the header of {name}"), e))?;
    Header::decode(&block, &name)
}

fn check_backing_len(backend: &dyn Backend, header: &Header) -> Result<()> {
    let expected = header.backing_len();
    let actual = backend.len();
    let kind = if actual < expected {
        "truncated"
    } else if actual > expected && backend.exact_len() {
        "resized (grown)"
    } else {
        return Ok(());
    };
    Err(Error::SizeMismatch {
        path: backend.describe(),
        expected,
        actual,
        volume_size: header.volume_size,
        kind,
    })
}

/// Sets the bits of sectors `[first, end)`.
fn mark_dirty(bits: &[AtomicU64], first: u64, end: u64) {
    for (word, mask) in word_masks(first, end) {
        bits[word as usize].fetch_or(mask, Ordering::Relaxed);
    }
}

/// Groups dirty sectors (ascending) into spans `(first, last)` to write home: one span
/// for a dense chunk, otherwise runs of nearby sectors. On the devices measured here,
/// scattered small writes slow every concurrent flush far more than sequential bytes
/// do (docs/design.md).
fn dirty_spans(sectors: &[u64]) -> Vec<(u64, u64)> {
    let (Some(&lo), Some(&hi)) = (sectors.first(), sectors.last()) else {
        return Vec::new();
    };
    if sectors.len() as u64 >= DENSE_CHUNK_SECTORS {
        return vec![(lo, hi)];
    }
    let mut spans: Vec<(u64, u64)> = Vec::new();
    for &s in sectors {
        match spans.last_mut() {
            Some((_, last)) if s - *last <= MERGE_GAP_SECTORS + 1 => *last = s,
            _ => spans.push((s, s)),
        }
    }
    spans
}

/// Clears the bits of sectors `[first, end)` and returns the sectors that were set.
fn take_dirty(bits: &[AtomicU64], first: u64, end: u64) -> Vec<u64> {
    let mut out = Vec::new();
    for (word, mask) in word_masks(first, end) {
        let mut got = bits[word as usize].fetch_and(!mask, Ordering::Relaxed) & mask;
        while got != 0 {
            out.push(word * 64 + u64::from(got.trailing_zeros()));
            got &= got - 1;
        }
    }
    out
}

/// The bitmap words covering bits `[first, end)`, each with the mask of its bits in range.
fn word_masks(first: u64, end: u64) -> impl Iterator<Item = (u64, u64)> {
    let mut s = first;
    std::iter::from_fn(move || {
        (s < end).then(|| {
            let word = s / 64;
            let hi = end.min((word + 1) * 64);
            let (lo, top) = (s % 64, hi - word * 64);
            let upto = if top == 64 {
                u64::MAX
            } else {
                (1u64 << top) - 1
            };
            s = hi;
            (word, upto & !((1u64 << lo) - 1))
        })
    })
}

fn align_down(x: u64) -> u64 {
    x - x % SECTOR
}

fn align_up(x: u64) -> u64 {
    x.next_multiple_of(SECTOR)
}

impl Shared {
    fn chunk_size(&self) -> u64 {
        u64::from(self.header.chunk_size)
    }

    fn chunk_of(&self, offset: u64) -> usize {
        (offset / self.chunk_size()) as usize
    }

    /// Byte range `[start, end)` of chunk `c` in the volume.
    fn chunk_range(&self, c: usize) -> (u64, u64) {
        let start = c as u64 * self.chunk_size();
        (
            start,
            (start + self.chunk_size()).min(self.header.volume_size),
        )
    }

    fn check_range(&self, offset: u64, len: usize) -> Result<()> {
        let size = self.header.volume_size;
        match offset.checked_add(len as u64) {
            Some(end) if end <= size => Ok(()),
            _ => Err(Error::OutOfRange {
                offset,
                len: len as u64,
                size,
            }),
        }
    }

    fn is_loaded(&self, c: usize) -> bool {
        self.chunks[c].state.load(Ordering::Acquire) == LOADED
    }

    fn read_with(&self, offset: u64, len: usize, mut sink: impl FnMut(usize, &[u8])) -> Result<()> {
        self.check_range(offset, len)?;
        let mut done = 0usize;
        let mut cold = Vec::new();
        while done < len {
            let at = offset + done as u64;
            let c = self.chunk_of(at);
            let n = ((self.chunk_range(c).1 - at) as usize).min(len - done);
            if self.is_loaded(c) {
                // Started before the lock, so the misses overlap its atomic operation.
                self.ram.prefetch(at as usize, n);
                let _shared = self.chunks[c].ram.read();
                // SAFETY: chunk is Loaded and we hold its ram read lock, so no writer
                // touches these bytes while the slice lives (module invariant).
                sink(done, unsafe { self.ram.slice(at as usize, n) });
            } else {
                self.prioritise(c);
                cold.resize(n, 0);
                self.read_backend(at, &mut cold)?;
                sink(done, &cold);
            }
            done += n;
        }
        Ok(())
    }

    /// Paper §3.3.2 case 2, plus: the chunk jumps the loader's queue.
    fn prioritise(&self, c: usize) {
        let mut q = self.urgent.lock();
        if !q.contains(&c) {
            q.push_front(c);
        }
    }

    fn read_backend(&self, at: u64, dst: &mut [u8]) -> Result<()> {
        let start = align_down(at);
        let end = align_up(at + dst.len() as u64);
        let mut tmp = AlignedBuf::zeroed((end - start) as usize);
        self.backend
            .read_at(self.header.data_offset() + start, &mut tmp)
            .map_err(|e| {
                Error::io(
                    format!(
                        "read of {} bytes at volume offset {start} from {}",
                        end - start,
                        self.name
                    ),
                    e,
                )
            })?;
        self.apply_overlay(start, &mut tmp);
        let skip = (at - start) as usize;
        dst.copy_from_slice(&tmp[skip..skip + dst.len()]);
        Ok(())
    }

    /// For read-only volumes opened after a crash: lays the journal's unreplayed
    /// sectors over bytes read from home (`at` is sector-aligned).
    fn apply_overlay(&self, at: u64, buf: &mut [u8]) {
        let end = at + buf.len() as u64;
        for (&off, data) in self.overlay.range(at..end) {
            let from = (off - at) as usize;
            buf[from..from + SECTOR as usize].copy_from_slice(data);
        }
    }

    fn refuse_writes(&self) -> Result<()> {
        if self.read_only {
            return Err(Error::ReadOnly {
                reason: format!("{} was opened read-only", self.name),
            });
        }
        self.failure.check().map_err(Error::from)
    }

    /// Runs a background thread's body. A panic there (a bug) poisons the volume, so
    /// writers waiting on that thread hear of it rather than wait forever, and ends any
    /// warm-up still running as failed.
    fn guarded(&self, thread: &str, body: impl FnOnce()) {
        if self.failure.guard(thread, body) {
            tracing::error!(volume = %self.name, "the {thread} thread panicked; the volume now refuses writes");
            self.fail_wake();
            let mut st = self.load_state.lock();
            if *st == LoadState::Running {
                *st = LoadState::Failed(format!("the {thread} thread panicked"));
            }
            drop(st);
            self.load_cv.notify_all();
        }
    }

    /// Poisons the volume with its first failure (later ones are logged only) and wakes
    /// every writer that waits, so each hears it.
    fn fail(&self, why: String, errno: Option<i32>) {
        tracing::error!(volume = %self.name, "{why}; the volume now refuses writes");
        self.failure.set(why, errno);
        self.fail_wake();
    }

    /// Wakes every writer waiting on a batch, a checkpoint or a sync, so that each
    /// sees the failure.
    fn fail_wake(&self) {
        self.commit.wake_all();
        if let Some(j) = &self.journal {
            // Under the lock: a writer that saw no failure a moment ago is waiting by
            // now, so it hears this. (Never called with the journal state held.)
            let _st = j.state.lock();
            j.cv.notify_all();
            j.checkpoint_cv.notify_all();
        }
    }

    fn write_at(&self, offset: u64, data: &[u8], durability: Durability) -> Result<()> {
        self.refuse_writes()?;
        self.check_range(offset, data.len())?;
        if data.is_empty() {
            return Ok(());
        }
        let end = offset + data.len() as u64;
        let (first, last) = (self.chunk_of(offset), self.chunk_of(end - 1));
        let _io: Vec<MutexGuard<'_, ()>> =
            (first..=last).map(|c| self.chunks[c].io.lock()).collect();
        // A writer we queued behind may have failed the volume.
        self.refuse_writes()?;

        // The backend is written in whole sectors. Partial head/tail sectors are
        // completed from the RAM copy, never read back from the device, so their
        // chunks must be loaded first (paper case 3 only covers whole-sector writes).
        let (start, stop) = (align_down(offset), align_up(end));
        let head_partial = start != offset;
        let tail_partial = stop != end;
        if head_partial {
            self.ensure_loaded_locked(first)?;
        }
        if tail_partial {
            self.ensure_loaded_locked(last)?;
        }
        let mut sectors = AlignedBuf::zeroed((stop - start) as usize);
        // SAFETY (both copies): we hold the io lock of the chunk, which every RAM writer
        // also holds, and the chunk is Loaded (ensured above).
        if head_partial {
            unsafe {
                self.ram
                    .copy_out(start as usize, &mut sectors[..SECTOR as usize])
            };
        }
        if tail_partial {
            let at = sectors.len() - SECTOR as usize;
            unsafe {
                self.ram
                    .copy_out((stop - SECTOR) as usize, &mut sectors[at..])
            };
        }
        let skip = (offset - start) as usize;
        sectors[skip..skip + data.len()].copy_from_slice(data);

        let ticket = match &self.journal {
            Some(j) => self.write_journaled(j, start, &sectors, durability)?,
            None => self.write_in_place(offset, data, start, &sectors)?,
        };
        drop(_io);
        match durability {
            Durability::Immediate => self.wait_durable(ticket),
            Durability::OnFlush => Ok(()),
        }
    }

    /// Journal mode: Loaded chunks get journal records (the batch leader updates their
    /// RAM); runs of non-Loaded chunks go home directly (paper case 3). The caller holds
    /// every io lock of `[start, start + sectors.len())`. Returns the ticket to wait for.
    fn write_journaled(
        &self,
        j: &Journal,
        start: u64,
        sectors: &[u8],
        durability: Durability,
    ) -> Result<u64> {
        let stop = start + sectors.len() as u64;
        let mut ticket = 0;
        let mut records = Vec::new();
        let mut at = start;
        while at < stop {
            let loaded = self.is_loaded(self.chunk_of(at));
            let mut end = self.chunk_range(self.chunk_of(at)).1.min(stop);
            while end < stop && self.is_loaded(self.chunk_of(end)) == loaded {
                end = self.chunk_range(self.chunk_of(end)).1.min(stop);
            }
            let part = &sectors[(at - start) as usize..(end - start) as usize];
            if loaded {
                let max = journal::max_payload(j.len) as usize;
                for (i, piece) in part.chunks(max).enumerate() {
                    records.push((at + (i * max) as u64, piece.to_vec()));
                }
            } else {
                // Chunk boundaries are sector multiples, so `part` stays 4 KiB-aligned.
                ticket = ticket.max(self.write_sectors_home(at, part)?);
            }
            at = end;
        }
        if !records.is_empty() {
            ticket = ticket.max(self.append(j, records, durability == Durability::Immediate)?);
        }
        Ok(ticket)
    }

    /// One device write of whole sectors at their home location; fails the volume on error.
    fn write_sectors_home(&self, start: u64, sectors: &[u8]) -> Result<u64> {
        if let Err(e) = self
            .backend
            .write_at(self.header.data_offset() + start, sectors)
        {
            let why = format!(
                "write of {} bytes at volume offset {start} to {} failed: {e}",
                sectors.len(),
                self.name
            );
            self.fail(why.clone(), e.raw_os_error());
            return Err(Error::io(why, e));
        }
        Ok(self.completed.fetch_add(1, Ordering::SeqCst) + 1)
    }

    /// Appends records to the journal and returns once they are written and in RAM
    /// (and durable, with `durable`). Whoever finds no batch in flight leads the next
    /// one: it takes the queue's head, writes it as one batch, applies it to RAM for
    /// every owner and, if any owner asked for durability, syncs before letting them go.
    /// Writers arriving meanwhile queue up, so one write and one sync serve them all.
    fn append(&self, j: &Journal, records: Vec<(u64, Vec<u8>)>, durable: bool) -> Result<u64> {
        let mut st = j.state.lock();
        let first_id = st.next_id;
        for (start, data) in records {
            let id = st.next_id;
            st.next_id += 1;
            st.queue.push_back(Pending {
                id,
                start,
                data,
                durable,
            });
        }
        let last_id = st.next_id - 1;
        loop {
            if st.finished_id > last_id {
                // A durable record's leader synced before finishing its batch: nothing
                // left to wait for. Others only need the ticket for a later flush.
                return Ok(if durable {
                    0
                } else {
                    self.completed.load(Ordering::SeqCst)
                });
            }
            // A batch in flight may hold our records, and its leader writes RAM for us
            // under our io locks: never leave before it ends.
            if st.writing {
                j.cv.wait(&mut st);
                continue;
            }
            if let Some(failure) = self.failure.get() {
                // Ours never reached the device, or an earlier batch of the same chain failed.
                st.queue.retain(|p| p.id < first_id || p.id > last_id);
                return Err(failure.clone().into());
            }
            if st.queue.is_empty() {
                j.cv.wait(&mut st);
                continue;
            }
            // Lead. The claim comes first, so nobody else leads while we gather.
            st.writing = true;
            // Writers released by the last batch need a moment to come back, and with
            // more writers than cores they come back one by one; left alone, batches
            // settle at half the writers (one group in flight, the other queued). So a
            // leader that is not alone keeps yielding while records keep arriving, for
            // a moment much shorter than the sync it is about to share.
            if st.last_batch > 1 || st.queue.len() > 1 {
                let start = std::time::Instant::now();
                let (mut seen, mut last_arrival) = (st.queue.len(), start);
                while seen < st.recent_peak.max(2) {
                    MutexGuard::unlocked(&mut st, std::thread::yield_now);
                    let now = std::time::Instant::now();
                    if st.queue.len() > seen {
                        (seen, last_arrival) = (st.queue.len(), now);
                    }
                    if now - last_arrival >= GATHER_QUIET || now - start >= GATHER_WAIT {
                        break;
                    }
                }
            }
            // The longest queue prefix that fits one batch.
            let limit = journal::max_batch(j.len) - SECTOR;
            let (mut count, mut bytes) = (0usize, 0u64);
            for p in &st.queue {
                if count == journal::MAX_ENTRIES || bytes + p.data.len() as u64 > limit {
                    break;
                }
                count += 1;
                bytes += p.data.len() as u64;
            }
            let pos = journal::place(st.head, j.len);
            if pos + SECTOR + bytes - st.tail > j.len {
                // Give up the claim: the checkpoint that frees space waits for it.
                st.writing = false;
                st.checkpoint_wanted = true;
                j.checkpoint_cv.notify_all();
                j.cv.notify_all();
                // Gathering let go of the lock: a failure may have been announced since
                // the check above, and its wake-up would be missed.
                if self.failure.get().is_none() {
                    j.cv.wait(&mut st);
                }
                continue;
            }
            st.last_batch = count;
            // The largest batch of the last PEAK_WINDOW: how many writers there are.
            st.window_peak = st.window_peak.max(count);
            st.window_batches += 1;
            if st.window_batches == PEAK_WINDOW {
                st.recent_peak = st.window_peak;
                (st.window_peak, st.window_batches) = (0, 0);
            }
            let batch: Vec<Pending> = st.queue.drain(..count).collect();
            let (seq, nonce) = (st.next_seq, st.nonce);
            let needs_sync = batch.iter().any(|p| p.durable);
            let written = MutexGuard::unlocked(&mut st, || {
                let ticket = self.write_batch(j, seq, nonce, pos, &batch)?;
                if needs_sync {
                    self.wait_durable(ticket)?;
                }
                Ok::<(), Error>(())
            });
            st.writing = false;
            if written.is_ok() {
                st.next_seq += 1;
                st.head = pos + SECTOR + bytes;
                st.finished_id = batch.last().map_or(st.finished_id, |p| p.id + 1);
                if st.head - st.tail >= checkpoint_threshold(j.len) {
                    j.checkpoint_cv.notify_all();
                }
            }
            j.cv.notify_all();
        }
    }

    /// Writes one batch to the journal, then applies it to RAM; returns its ticket.
    /// Fails the volume on error.
    fn write_batch(
        &self,
        j: &Journal,
        seq: u64,
        nonce: u64,
        pos: u64,
        batch: &[Pending],
    ) -> Result<u64> {
        let payloads: Vec<(u64, &[u8])> = batch.iter().map(|p| (p.start, &p.data[..])).collect();
        let buf = journal::encode_batch(&self.header.uuid, nonce, seq, pos, &payloads);
        if let Err(e) = self.backend.write_at(JOURNAL_OFFSET + pos % j.len, &buf) {
            let why = format!(
                "journal write of {} bytes ({} records) to {} failed: {e}",
                buf.len(),
                batch.len(),
                self.name
            );
            self.fail(why.clone(), e.raw_os_error());
            return Err(Error::io(why, e));
        }
        let ticket = self.completed.fetch_add(1, Ordering::SeqCst) + 1;
        j.batches.fetch_add(1, Ordering::Relaxed);
        j.records.fetch_add(batch.len() as u64, Ordering::Relaxed);
        for p in batch {
            let end = p.start + p.data.len() as u64;
            let mut at = p.start;
            while at < end {
                let c = self.chunk_of(at);
                let e = self.chunk_range(c).1.min(end);
                let _excl = self.chunks[c].ram.write();
                // SAFETY: the record's owner holds chunk c's io lock and waits for us
                // (module invariant), the chunk is Loaded (checked by the owner under
                // that lock), and we hold its ram write lock: exclusive.
                unsafe {
                    self.ram.copy_in(
                        at as usize,
                        &p.data[(at - p.start) as usize..(e - p.start) as usize],
                    )
                };
                mark_dirty(&j.dirty, at / SECTOR, e / SECTOR);
                self.chunks[c].dirty.store(true, Ordering::Release);
                at = e;
            }
        }
        Ok(ticket)
    }

    /// Volumes without a journal: the write goes home, then to RAM of Loaded chunks.
    fn write_in_place(
        &self,
        offset: u64,
        data: &[u8],
        start: u64,
        sectors: &AlignedBuf,
    ) -> Result<u64> {
        let end = offset + data.len() as u64;
        let (first, last) = (self.chunk_of(offset), self.chunk_of(end - 1));
        let ticket = self.write_sectors_home(start, sectors)?;

        // Paper §3.3.1 case 2 for loaded chunks; unloaded ones (case 3) got the backend
        // write only, and the loader — which waits for the caller's io lock — picks it up.
        for c in first..=last {
            if self.is_loaded(c) {
                let (cs, ce) = self.chunk_range(c);
                let (s, e) = (offset.max(cs), end.min(ce));
                let _excl = self.chunks[c].ram.write();
                // SAFETY: io lock and ram write lock held on a Loaded chunk: exclusive.
                unsafe {
                    self.ram.copy_in(
                        s as usize,
                        &data[(s - offset) as usize..(e - offset) as usize],
                    )
                };
            }
        }
        Ok(ticket)
    }

    /// Writes every change captured since the last checkpoint home, syncs, and moves
    /// the replay start past them, freeing their journal space.
    fn checkpoint(&self) -> Result<()> {
        let Some(j) = &self.journal else {
            return Ok(());
        };
        // Held for the whole checkpoint: one at a time, and its staging buffer.
        let mut staging = j.checkpoint_lock.lock();
        self.refuse_writes()?;
        // Every batch before (seq, pos) is written and applied to RAM once no batch is
        // in flight; batches after it may or may not be captured below, and replay from
        // (seq, pos) covers them either way.
        let (seq, pos, generation, nonce) = {
            let mut st = j.state.lock();
            while st.writing {
                j.cv.wait(&mut st);
            }
            if st.head == st.tail {
                return Ok(());
            }
            (st.next_seq, st.head, st.generation, st.nonce)
        };
        let fail = |what: String, e: std::io::Error| {
            let why = format!("checkpoint of {}: {what} failed: {e}", self.name);
            self.fail(why.clone(), e.raw_os_error());
            Error::io(why, e)
        };
        self.write_dirty_home(j, &mut staging)
            .map_err(|e| fail("writing dirty sectors home".into(), e))?;
        self.backend
            .sync()
            .map_err(|e| fail("sync of home writes".into(), e))?;
        let ck = Checkpoint {
            generation: generation + 1,
            next_seq: seq,
            log_pos: pos,
            nonce,
        };
        ck.persist(self.backend.as_ref(), &self.header.uuid)
            .map_err(|e| fail("writing the checkpoint record".into(), e))?;
        let mut st = j.state.lock();
        st.tail = pos;
        st.generation = ck.generation;
        j.checkpoints.fetch_add(1, Ordering::Relaxed);
        drop(st);
        j.cv.notify_all();
        Ok(())
    }

    /// Copies every dirty sector out of RAM (clearing its bit) and writes it home,
    /// through a staging buffer that is reused from one checkpoint to the next (fresh
    /// memory is costly: every page must be faulted in and zeroed). No sync.
    fn write_dirty_home(
        &self,
        j: &Journal,
        staging: &mut Option<AlignedBuf>,
    ) -> std::io::Result<()> {
        let stage = staging.get_or_insert_with(|| AlignedBuf::zeroed(STAGING_BYTES));
        // (volume offset, where in the stage, length)
        let mut staged: Vec<(u64, usize, usize)> = Vec::new();
        let mut used = 0usize;
        for (c, chunk) in self.chunks.iter().enumerate() {
            if !chunk.dirty.load(Ordering::Acquire) {
                continue;
            }
            let (cs, ce) = self.chunk_range(c);
            // A chunk never waits on device I/O while its ram lock is held: make room first.
            if used + (ce - cs) as usize > stage.len() {
                self.write_runs_home(j, stage, &staged)?;
                staged.clear();
                used = 0;
            }
            let oversized = (ce - cs) as usize > stage.len();
            let mut own;
            let buf: &mut [u8] = if oversized {
                own = AlignedBuf::zeroed((ce - cs) as usize);
                &mut own
            } else {
                &mut stage[used..]
            };
            let mut runs = Vec::new();
            {
                let _shared = chunk.ram.read();
                chunk.dirty.store(false, Ordering::Relaxed);
                let mut at = 0usize;
                for (first, last) in dirty_spans(&take_dirty(&j.dirty, cs / SECTOR, ce / SECTOR)) {
                    let len = ((last - first + 1) * SECTOR) as usize;
                    // SAFETY: chunk c is Loaded (only Loaded chunks get dirty bits) and
                    // we hold its ram read lock, so no writer changes these bytes.
                    unsafe {
                        self.ram
                            .copy_out((first * SECTOR) as usize, &mut buf[at..at + len])
                    };
                    runs.push((first * SECTOR, at, len));
                    at += len;
                }
            }
            if oversized {
                self.write_runs_home(j, buf, &runs)?;
            } else {
                let taken = runs.last().map_or(0, |&(_, at, len)| at + len);
                staged.extend(runs.into_iter().map(|(off, at, len)| (off, used + at, len)));
                used += taken;
            }
        }
        if !staged.is_empty() {
            self.write_runs_home(j, stage, &staged)?;
        }
        Ok(())
    }

    /// Writes runs `(volume offset, where in buf, length)` home, many at once.
    fn write_runs_home(
        &self,
        j: &Journal,
        buf: &[u8],
        runs: &[(u64, usize, usize)],
    ) -> std::io::Result<()> {
        let data_offset = self.header.data_offset();
        let writes: Vec<(u64, &[u8])> = runs
            .iter()
            .map(|&(off, at, len)| (data_offset + off, &buf[at..at + len]))
            .collect();
        j.home_runs
            .fetch_add(writes.len() as u64, Ordering::Relaxed);
        self.backend.write_many(&writes)
    }

    /// Checkpoints past the threshold, when a writer waits for space, or after a quiet
    /// second with anything in the journal.
    fn run_checkpointer(&self) {
        let Some(j) = &self.journal else {
            return;
        };
        loop {
            {
                let mut st = j.state.lock();
                loop {
                    if st.stop {
                        return;
                    }
                    let used = st.head - st.tail;
                    if st.checkpoint_wanted || used >= checkpoint_threshold(j.len) {
                        break;
                    }
                    if used == 0 {
                        j.checkpoint_cv.wait(&mut st);
                    } else if j
                        .checkpoint_cv
                        .wait_for(&mut st, CHECKPOINT_IDLE)
                        .timed_out()
                    {
                        break;
                    }
                }
                st.checkpoint_wanted = false;
            }
            if let Err(e) = self.checkpoint() {
                tracing::error!(volume = %self.name, "checkpoint failed: {e}");
                // Writers waiting for space must see the failure.
                j.cv.notify_all();
                return;
            }
        }
    }

    fn flush(&self) -> Result<()> {
        if self.read_only {
            return Ok(());
        }
        // A failed volume says so to every flush, even one whose writes were all
        // durable already: a success after a device error is what misleads callers.
        if let Some(failure) = self.failure.get() {
            return Err(failure.clone().into());
        }
        let ticket = self.completed.load(Ordering::SeqCst);
        self.wait_durable(ticket)
    }

    /// Group commit (hscm_durable::GroupCommit): one sync covers every write
    /// completed before it started; writers arriving meanwhile share the next.
    fn wait_durable(&self, ticket: u64) -> Result<()> {
        let what = format!("sync of {}", self.name);
        let issued = || self.completed.load(Ordering::SeqCst);
        match self
            .commit
            .wait(ticket, &self.failure, &what, issued, || self.backend.sync())
        {
            Ok(()) => Ok(()),
            Err(CommitError::SyncFailed { reason, source }) => {
                tracing::error!(volume = %self.name, "{reason}; the volume now refuses writes");
                self.fail_wake();
                Err(Error::io(reason, source))
            }
            Err(e) => Err(Error::from(e)),
        }
    }

    /// For a writer holding chunk `c`'s io lock: loads it now if it is not loaded.
    fn ensure_loaded_locked(&self, c: usize) -> Result<()> {
        if !self.is_loaded(c) {
            self.load_locked(c, 1)?;
        }
        Ok(())
    }

    /// Copies chunks `first..first+count` from the backend into RAM with one read.
    /// The caller holds all their io locks and none of them is Loaded.
    fn load_locked(&self, first: usize, count: usize) -> Result<()> {
        let (start, _) = self.chunk_range(first);
        let (_, end) = self.chunk_range(first + count - 1);
        for c in first..first + count {
            self.chunks[c].state.store(LOADING, Ordering::Relaxed);
        }
        // SAFETY: we hold the io locks of these chunks and they are not Loaded, so no
        // reader touches their RAM and no other writer can (module invariant).
        let dst = unsafe { self.ram.slice_mut(start as usize, (end - start) as usize) };
        let result = self.backend.read_at(self.header.data_offset() + start, dst);
        if result.is_ok() {
            self.apply_overlay(start, dst);
        }
        let new_state = if result.is_ok() { LOADED } else { UNLOADED };
        for c in first..first + count {
            self.chunks[c].state.store(new_state, Ordering::Release);
        }
        result.map_err(|e| Error::io(format!("load of [{start}, {end}) from {}", self.name), e))?;
        self.loaded_chunks.fetch_add(count, Ordering::Relaxed);
        self.loaded_bytes.fetch_add(end - start, Ordering::Relaxed);
        Ok(())
    }

    /// Picks the next batch and locks it: a requested chunk first, else the sweep's next
    /// unloaded chunk. Sequential batches are handed out under the cursor lock, so
    /// concurrent loaders get disjoint ones. None when nothing is left unloaded.
    fn next_batch(&self) -> Option<(usize, Vec<MutexGuard<'_, ()>>)> {
        loop {
            let Some(c) = self.urgent.lock().pop_front() else {
                break;
            };
            // Paper §3.3.1 case 3: a writer holding this chunk makes the loader wait.
            let g = self.chunks[c].io.lock();
            if self.chunks[c].state.load(Ordering::Acquire) == UNLOADED {
                return Some(self.extend_batch(c, g));
            }
        }
        let mut cursor = self.cursor.lock();
        let unloaded = |c: usize| self.chunks[c].state.load(Ordering::Acquire) == UNLOADED;
        while *cursor < self.chunks.len() && !unloaded(*cursor) {
            *cursor += 1;
        }
        if *cursor == self.chunks.len() {
            // A chunk whose inline load failed behind the sweep is retried from here.
            *cursor = (0..self.chunks.len()).find(|&c| unloaded(c))?;
        }
        let c = *cursor;
        let g = self.chunks[c].io.lock();
        if !unloaded(c) {
            return Some((c, Vec::new()));
        }
        let batch = self.extend_batch(c, g);
        *cursor = c + batch.1.len();
        Some(batch)
    }

    /// Extends a batch starting at locked chunk `c` over following unloaded chunks that
    /// nobody holds, up to MAX_LOAD_BATCH bytes.
    fn extend_batch<'a>(
        &'a self,
        c: usize,
        first: MutexGuard<'a, ()>,
    ) -> (usize, Vec<MutexGuard<'a, ()>>) {
        let max_chunks = (MAX_LOAD_BATCH / self.chunk_size()).max(1) as usize;
        let mut guards = vec![first];
        while guards.len() < max_chunks {
            let next = c + guards.len();
            if next >= self.chunks.len()
                || self.chunks[next].state.load(Ordering::Acquire) != UNLOADED
            {
                break;
            }
            match self.chunks[next].io.try_lock() {
                Some(g) if self.chunks[next].state.load(Ordering::Acquire) == UNLOADED => {
                    guards.push(g)
                }
                _ => break,
            }
        }
        (c, guards)
    }

    fn load_step(&self) -> Result<bool> {
        let Some((c, guards)) = self.next_batch() else {
            return Ok(false);
        };
        if !guards.is_empty() {
            self.load_locked(c, guards.len())?;
        }
        Ok(true)
    }

    /// Populates page tables up to PREFAULT_AHEAD past the loader's sweep, overlapping
    /// page-fault work with the loader's device reads.
    fn run_prefault(&self) {
        let step = MAX_LOAD_BATCH;
        let size = self.header.volume_size;
        let mut done = 0u64;
        while done < size
            && *self.load_state.lock() == LoadState::Running
            && !self.stop.load(Ordering::Relaxed)
        {
            let sweep = *self.cursor.lock() as u64 * self.chunk_size();
            done = done.max(sweep);
            if done >= sweep + PREFAULT_AHEAD {
                std::thread::sleep(Duration::from_micros(200));
                continue;
            }
            self.ram.prefault(done as usize, step as usize);
            done += step;
        }
    }

    fn run_loader(&self) {
        let outcome = loop {
            if self.stop.load(Ordering::Relaxed) {
                break LoadState::Stopped;
            }
            match self.load_step() {
                Ok(true) => {}
                Ok(false) => break LoadState::Done,
                Err(e) => {
                    tracing::error!(volume = %self.name, "warm-up stopped: {e}");
                    break LoadState::Failed(e.to_string());
                }
            }
        };
        let mut st = self.load_state.lock();
        // A failure or stop is final; Done only once every loader is done.
        let last = self.active_loaders.fetch_sub(1, Ordering::AcqRel) == 1;
        if *st == LoadState::Running && (outcome != LoadState::Done || last) {
            *st = outcome;
        }
        drop(st);
        self.load_cv.notify_all();
    }
}

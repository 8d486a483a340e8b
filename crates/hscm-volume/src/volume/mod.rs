//! The durable hybrid volume: its API, its options, and the invariants every part
//! keeps. The parts: `read`, `write` (group commit, failure), `started` (writes that
//! complete by callback), `checkpoint` (the journal's batches and checkpoints),
//! `loader` (warm-up), `dirty` (the dirty bitmap), `recovery` (what opening does).
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
//! * Written in place (no journal, no write-back): a writer first holds its sectors
//!   (`ranges`), then the `io` locks. While its chunks are all Loaded it lets the `io`
//!   locks go during its home write and takes them again to write RAM; its held
//!   sectors keep other writers off the bytes it reads and writes meanwhile. A started
//!   write holds its sectors until the home acknowledged it, but writes RAM first.
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

use std::collections::{BTreeMap, VecDeque};
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use parking_lot::{Condvar, Mutex, MutexGuard, RwLock};

use crate::backend::{AlignedBuf, Backend};
use crate::device_counters::{CountingBackend, DeviceCounters, DeviceStats};
use crate::error::{Error, Result};
use crate::header::{
    validate_geometry, validate_journal, Header, FORMAT_VERSION, HEADER_LEN, IO_ALIGN,
};
use crate::journal::{self, Checkpoint, JOURNAL_OFFSET};
use crate::ram::{check_fits_in_memory, RamImage};
use crate::Durability;
use hscm_durable::{home, CommitError, GroupCommit, Poison};

mod away;
mod batch;
mod checkpoint;
mod dirty;
mod loader;
mod ranges;
mod read;
mod recovery;
mod started;
mod write;
mod writeback;

use self::dirty::{dirty_spans, mark_dirty, take_dirty, SpanRule};
use self::recovery::{check_backing_len, read_header, recover};
pub use self::started::WriteDone;
use self::writeback::WriteBack;
pub use self::writeback::{WriteBackStats, DEFAULT_DIRTY_MAX};

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

/// Checkpoints and write-back passes copy dirty sectors through `STAGING_BUFFERS`
/// buffers of this size (reused): small enough that the first write starts soon, large
/// enough that each is one efficient device write.
const STAGING_BYTES: usize = 2 << 20;
const STAGING_BUFFERS: usize = 4;

/// The staging buffers of checkpoints or write-back passes, kept between them.
type Staging = Vec<AlignedBuf>;

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
    /// home location; else at least [`MIN_JOURNAL`](crate::MIN_JOURNAL). A journal pays off when it holds
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
    pub fn validate(&self, volume_size: u64, name: &str) -> Result<()> {
        validate_geometry(volume_size, self.chunk_size)
            .and_then(|()| validate_journal(self.journal_size))
            .and_then(|()| {
                if self.durability == Durability::WriteBack && self.journal_size > 0 {
                    Err(WRITE_BACK_WITH_JOURNAL.to_string())
                } else {
                    Ok(())
                }
            })
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

/// Why write-back and a journal do not mix: a journal exists to make each write
/// durable cheaply, write-back defers durability to the next flush.
const WRITE_BACK_WITH_JOURNAL: &str = "write-back needs a volume without a journal (a journal makes each write durable; write-back defers that to the next flush)";

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
    /// Keep a RAM copy of the whole volume (the normal case). Without it the volume
    /// is its durable home only: every read goes to the backend (O_DIRECT where it
    /// can, so no page cache either), nothing is loaded and no RAM is mapped for it.
    /// For an engine that keeps its own RAM copy of what it uses (the file system's
    /// per-file memory), so no byte sits in RAM twice.
    pub ram_copy: bool,
    /// In a write-back session, the most bytes changed in RAM and not yet written
    /// home; a writer waits while it is reached. `None`: [`DEFAULT_DIRTY_MAX`].
    pub dirty_max: Option<u64>,
}

impl Default for OpenOptions {
    fn default() -> Self {
        OpenOptions {
            durability: None,
            read_only: false,
            background_load: true,
            huge_pages: true,
            ram_copy: true,
            dirty_max: None,
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
    checkpoint_lock: Mutex<Staging>,
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
    /// What `backend` was asked to do (it counts into these).
    device: Arc<DeviceCounters>,
    header: Header,
    name: String,
    durability: Durability,
    read_only: bool,
    ram: RamImage,
    /// False for a volume opened as its home only (`OpenOptions::ram_copy`): no chunk
    /// is ever loaded, and `ram` is a stand-in nothing touches.
    ram_copy: bool,
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
    /// A network home that stopped answering, which the volume waits for (`away`).
    away: away::Away,
    /// Sectors being written in place (`ranges`).
    writing: ranges::WritingRanges,
    /// Tickets handed to completed backend writes, in completion order.
    completed: AtomicU64,
    /// Which tickets are durable (group commit of in-place writes and flushes).
    commit: GroupCommit,
    /// Writable volumes with a journal.
    journal: Option<Journal>,
    /// Writable write-back sessions (never together with a journal).
    writeback: Option<WriteBack>,
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
    flusher: Option<JoinHandle<()>>,
}

impl Volume {
    /// Creates a volume of `size` bytes in a new file (or on a block device).
    pub fn create(path: &Path, size: u64, opts: &CreateOptions) -> Result<Header> {
        // Refused before the file exists, so a bad request leaves nothing behind.
        opts.validate(size, &path.display().to_string())?;
        let backend = home::create(path, opts.backing_len(size), opts.overwrite)?;
        Self::format(backend.as_ref(), size, opts)
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
        block[slot..slot + IO_ALIGN as usize].copy_from_slice(&first.encode(&header.uuid));
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
        let backend = home::open_for_inspection(path)?;
        let header = read_header(backend.as_ref())?;
        check_backing_len(backend.as_ref(), &header)?;
        let pending_batches = if header.journal_len == 0 {
            0
        } else {
            journal::scan(backend.as_ref(), &header)?.batches
        };
        Ok(Inspection {
            backing_len: backend.len(),
            header,
            pending_batches,
        })
    }

    pub fn open(path: &Path, opts: &OpenOptions) -> Result<Volume> {
        let backend = home::open(path, !opts.read_only)?;
        Self::open_backend(backend, opts)
    }

    /// Opens a volume on any backend. Returns at once; the RAM copy warms in the background.
    pub fn open_backend(backend: Box<dyn Backend>, opts: &OpenOptions) -> Result<Volume> {
        let device = Arc::new(DeviceCounters::default());
        let backend: Box<dyn Backend> = Box::new(CountingBackend {
            inner: backend,
            counters: device.clone(),
        });
        let header = read_header(backend.as_ref())?;
        check_backing_len(backend.as_ref(), &header)?;
        let name = backend.describe();
        let size = usize::try_from(header.volume_size).map_err(|_| {
            Error::InvalidArgument(format!("{name}: volume too large for this address space"))
        })?;
        if opts.ram_copy {
            check_fits_in_memory(&name, header.volume_size)?;
        }
        // Home only: one page stands in for the mapping nothing will touch.
        let mapped = if opts.ram_copy { size } else { 4096 };
        let background_load = opts.background_load && opts.ram_copy;
        let ram = RamImage::new(mapped, opts.huge_pages)
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
        let durability = opts.durability.unwrap_or(header.durability);
        let writeback = if durability == Durability::WriteBack && !opts.read_only {
            if header.journal_len > 0 {
                return Err(Error::InvalidArgument(format!(
                    "{name}: {WRITE_BACK_WITH_JOURNAL}"
                )));
            }
            if !opts.ram_copy {
                return Err(Error::InvalidArgument(format!(
                    "{name}: write-back keeps dirty data in the volume's RAM copy, and this open has none"
                )));
            }
            Some(WriteBack::new(
                header.volume_size,
                opts.dirty_max.unwrap_or(DEFAULT_DIRTY_MAX),
            ))
        } else {
            None
        };
        let shared = Arc::new(Shared {
            device,
            durability,
            writeback,
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
            active_loaders: AtomicUsize::new(if background_load { LOADERS } else { 0 }),
            load_state: Mutex::new(if opts.ram_copy {
                LoadState::Running
            } else {
                LoadState::Stopped
            }),
            ram_copy: opts.ram_copy,
            load_cv: Condvar::new(),
            failure: Poison::default(),
            away: away::Away::default(),
            writing: ranges::WritingRanges::default(),
            completed: AtomicU64::new(0),
            commit: GroupCommit::new(0),
            journal,
            overlay,
            replayed_batches,
        });
        let mut loaders = if background_load {
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
        loaders.extend(away::watch_home(&shared));
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
        let flusher = match &shared.writeback {
            Some(_) => {
                let s = Arc::clone(&shared);
                Some(
                    std::thread::Builder::new()
                        .name("hscm-writeback".into())
                        .spawn(move || s.guarded("write-back", || s.run_flusher()))
                        .map_err(|e| Error::io("cannot start the write-back thread", e))?,
                )
            }
            None => None,
        };
        Ok(Volume {
            shared,
            loaders,
            checkpointer,
            flusher,
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

    /// How its home on the network is doing; None for a local home.
    pub fn home_health(&self) -> Option<Arc<hscm_durable::device::RemoteHealth>> {
        self.shared.backend.remote_health()
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

    /// Write-back figures; `None` unless this is a writable write-back session.
    pub fn writeback_stats(&self) -> Option<WriteBackStats> {
        self.shared.writeback.as_ref().map(WriteBack::stats)
    }

    /// Reads, writes and syncs this session sent to the device.
    pub fn device_stats(&self) -> DeviceStats {
        self.shared.device.snapshot()
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
        // Started writes are durable on their own (FUA): they need only complete.
        self.shared.writing.wait_for_started();
        self.shared.stop.store(true, Ordering::Relaxed);
        if let Some(j) = &self.shared.journal {
            j.state.lock().stop = true;
            j.checkpoint_cv.notify_all();
        }
        if let Some(wb) = &self.shared.writeback {
            wb.stop();
        }
        let threads = self.loaders.drain(..).chain(self.checkpointer.take());
        for h in threads.chain(self.flusher.take()) {
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

fn align_down(x: u64) -> u64 {
    x - x % IO_ALIGN
}

fn align_up(x: u64) -> u64 {
    x.next_multiple_of(IO_ALIGN)
}

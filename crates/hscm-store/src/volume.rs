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
//! * The backend always holds every completed write (writes go to it before they
//!   complete), so reading a non-Loaded chunk from the backend is always current.

use std::collections::VecDeque;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};
use std::thread::JoinHandle;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use parking_lot::{Condvar, Mutex, MutexGuard, RwLock};

use crate::backend::{AlignedBuf, Backend, FileBackend};
use crate::error::{Error, Result};
use crate::header::{validate_geometry, Header, HEADER_LEN, SECTOR};
use crate::ram::RamImage;
use crate::Durability;

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

/// How a new volume is laid out.
#[derive(Debug, Clone)]
pub struct CreateOptions {
    pub chunk_size: u32,
    /// The volume's default durability, recorded in its header.
    pub durability: Durability,
    /// Replace an existing regular file at the path.
    pub overwrite: bool,
}

impl Default for CreateOptions {
    fn default() -> Self {
        CreateOptions {
            chunk_size: DEFAULT_CHUNK_SIZE,
            durability: Durability::Immediate,
            overwrite: false,
        }
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
    /// [`Volume::load_step`] and unaligned writes load chunks.
    pub background_load: bool,
}

impl Default for OpenOptions {
    fn default() -> Self {
        OpenOptions {
            durability: None,
            read_only: false,
            background_load: true,
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
}

struct SyncState {
    /// Every write with a ticket at or below this is durable.
    durable: u64,
    syncing: bool,
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
    failure: OnceLock<String>,
    /// Tickets handed to completed backend writes, in completion order.
    completed: AtomicU64,
    sync: Mutex<SyncState>,
    sync_cv: Condvar,
}

/// A byte-addressable volume whose working copy lives in RAM and whose every write
/// goes through to a durable backend. See docs/design.md for the durability contract.
pub struct Volume {
    shared: Arc<Shared>,
    loaders: Vec<JoinHandle<()>>,
}

impl Volume {
    /// Creates a volume of `size` bytes in a new file (or on a block device).
    pub fn create(path: &Path, size: u64, opts: &CreateOptions) -> Result<Header> {
        validate_geometry(size, opts.chunk_size).map_err(|reason| Error::BadGeometry {
            path: path.display().to_string(),
            reason,
        })?;
        let backend = FileBackend::create(path, HEADER_LEN + size, opts.overwrite)?;
        Self::format(&backend, size, opts)
    }

    /// Writes a fresh header onto `backend` and makes it durable.
    pub fn format(backend: &dyn Backend, size: u64, opts: &CreateOptions) -> Result<Header> {
        let name = backend.describe();
        validate_geometry(size, opts.chunk_size).map_err(|reason| Error::BadGeometry {
            path: name.clone(),
            reason,
        })?;
        if backend.len() < HEADER_LEN + size {
            return Err(Error::InvalidArgument(format!(
                "{name} holds {} bytes, fewer than the {} a {size}-byte volume needs",
                backend.len(),
                HEADER_LEN + size
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
        };
        let mut block = AlignedBuf::zeroed(HEADER_LEN as usize);
        block.copy_from_slice(&header.encode());
        backend
            .write_at(0, &block)
            .map_err(|e| Error::io(format!("cannot write the header of {name}"), e))?;
        backend
            .sync()
            .map_err(|e| Error::io(format!("cannot sync the header of {name}"), e))?;
        Ok(header)
    }

    /// Reads and validates the header of a volume without opening it for I/O.
    pub fn inspect(path: &Path) -> Result<(Header, u64)> {
        let backend = FileBackend::open(path, false)?;
        let header = read_header(&backend)?;
        check_backing_len(&backend, &header)?;
        Ok((header, backend.len()))
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
        let ram = RamImage::new(size)
            .map_err(|e| Error::io(format!("cannot map {size} bytes of RAM for {name}"), e))?;
        let chunks = (0..header.chunk_count())
            .map(|_| Chunk {
                state: AtomicU8::new(UNLOADED),
                io: Mutex::new(()),
                ram: RwLock::new(()),
            })
            .collect();
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
            failure: OnceLock::new(),
            completed: AtomicU64::new(0),
            sync: Mutex::new(SyncState {
                durable: 0,
                syncing: false,
            }),
            sync_cv: Condvar::new(),
        });
        let loaders = if opts.background_load {
            let mut handles = Vec::new();
            for i in 0..LOADERS {
                let s = Arc::clone(&shared);
                let handle = std::thread::Builder::new()
                    .name(format!("hscm-loader-{i}"))
                    .spawn(move || s.run_loader())
                    .map_err(|e| Error::io("cannot start the loader thread", e))?;
                handles.push(handle);
            }
            let s = Arc::clone(&shared);
            // Best effort: without it the loader still works, only slower.
            let _ = std::thread::Builder::new()
                .name("hscm-prefault".into())
                .spawn(move || s.run_prefault());
            handles
        } else {
            Vec::new()
        };
        Ok(Volume { shared, loaders })
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
    pub fn backend_is_direct(&self) -> bool {
        self.shared.backend.is_direct()
    }

    /// Why the volume refuses writes, if it does.
    pub fn failure(&self) -> Option<&str> {
        self.shared.failure.get().map(String::as_str)
    }

    /// Copies `buf.len()` bytes at `offset` into `buf`: from RAM for loaded chunks,
    /// from the backend for the others (which are then loaded next).
    pub fn read_at(&self, offset: u64, buf: &mut [u8]) -> Result<()> {
        self.shared.read_at(offset, buf)
    }

    /// Writes with the volume's durability.
    pub fn write_at(&self, offset: u64, data: &[u8]) -> Result<()> {
        self.shared.write_at(offset, data, self.shared.durability)
    }

    /// Writes with the given durability for this one request.
    pub fn write_at_with(&self, offset: u64, data: &[u8], durability: Durability) -> Result<()> {
        self.shared.write_at(offset, data, durability)
    }

    /// Makes every completed write durable.
    pub fn flush(&self) -> Result<()> {
        self.shared.flush()
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
    pub fn load_step(&self) -> Result<bool> {
        self.shared.load_step()
    }

    /// Flushes and stops the loader, reporting a failed flush.
    pub fn close(mut self) -> Result<()> {
        let r = self.shared.flush();
        self.stop_loader();
        r
    }

    fn stop_loader(&mut self) {
        self.shared.stop.store(true, Ordering::Relaxed);
        for h in self.loaders.drain(..) {
            let _ = h.join();
        }
    }
}

impl Drop for Volume {
    fn drop(&mut self) {
        let s = &self.shared;
        if !s.read_only && s.failure.get().is_none() {
            if let Err(e) = s.flush() {
                tracing::error!(volume = %s.name, "flush on close failed: {e}");
            }
        }
        self.stop_loader();
    }
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

    fn read_at(&self, offset: u64, buf: &mut [u8]) -> Result<()> {
        self.check_range(offset, buf.len())?;
        let mut done = 0usize;
        while done < buf.len() {
            let at = offset + done as u64;
            let c = self.chunk_of(at);
            let n = ((self.chunk_range(c).1 - at) as usize).min(buf.len() - done);
            let dst = &mut buf[done..done + n];
            if self.is_loaded(c) {
                let _shared = self.chunks[c].ram.read();
                // SAFETY: chunk is Loaded and we hold its ram read lock, so no writer
                // touches these bytes (module invariant).
                unsafe { self.ram.copy_out(at as usize, dst) };
            } else {
                self.prioritise(c);
                self.read_backend(at, dst)?;
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
            .read_at(HEADER_LEN + start, &mut tmp)
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
        let skip = (at - start) as usize;
        dst.copy_from_slice(&tmp[skip..skip + dst.len()]);
        Ok(())
    }

    fn refuse_writes(&self) -> Result<()> {
        if self.read_only {
            return Err(Error::ReadOnly {
                reason: format!("{} was opened read-only", self.name),
            });
        }
        match self.failure.get() {
            Some(why) => Err(Error::ReadOnly {
                reason: why.clone(),
            }),
            None => Ok(()),
        }
    }

    fn fail(&self, why: String) {
        tracing::error!(volume = %self.name, "{why}; the volume is now read-only");
        let _ = self.failure.set(why);
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

        if let Err(e) = self.backend.write_at(HEADER_LEN + start, &sectors) {
            let why = format!(
                "write of {} bytes at volume offset {offset} to {} failed: {e}",
                data.len(),
                self.name
            );
            self.fail(why.clone());
            return Err(Error::io(why, e));
        }
        let ticket = self.completed.fetch_add(1, Ordering::SeqCst) + 1;

        // Paper §3.3.1 case 2 for loaded chunks; unloaded ones (case 3) got the backend
        // write only, and the loader — which waits for our io lock — picks it up.
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
        drop(_io);
        match durability {
            Durability::Immediate => self.wait_durable(ticket),
            Durability::OnFlush => Ok(()),
        }
    }

    fn flush(&self) -> Result<()> {
        if self.read_only {
            return Ok(());
        }
        let ticket = self.completed.load(Ordering::SeqCst);
        self.wait_durable(ticket)
    }

    /// Group commit: one sync covers every write completed before it started; writers
    /// arriving meanwhile wait for the next one, which one of them leads.
    fn wait_durable(&self, ticket: u64) -> Result<()> {
        let mut st = self.sync.lock();
        loop {
            if st.durable >= ticket {
                return Ok(());
            }
            if let Some(why) = self.failure.get() {
                return Err(Error::ReadOnly {
                    reason: why.clone(),
                });
            }
            if st.syncing {
                self.sync_cv.wait(&mut st);
                continue;
            }
            st.syncing = true;
            let target = self.completed.load(Ordering::SeqCst);
            let result = MutexGuard::unlocked(&mut st, || self.backend.sync());
            st.syncing = false;
            match result {
                Ok(()) => st.durable = st.durable.max(target),
                Err(e) => {
                    let why = format!("sync of {} failed: {e}", self.name);
                    self.fail(why.clone());
                    self.sync_cv.notify_all();
                    return Err(Error::io(why, e));
                }
            }
            self.sync_cv.notify_all();
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
        let result = self.backend.read_at(HEADER_LEN + start, dst);
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

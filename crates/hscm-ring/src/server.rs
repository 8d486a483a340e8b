//! The server: a control socket, and one worker thread per connected client that
//! serves every queue pair of that client's region against a block target (the
//! volume, or any other [`BlockTarget`]).

use std::fs::File;
use std::os::fd::OwnedFd;
use std::os::unix::fs::{FileTypeExt, PermissionsExt};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use hscm_block::BlockTarget;
use rustix::fs::{MemfdFlags, SealFlags};

use crate::error::{Error, Result};
use crate::proto::{parse, Request, Status};
use crate::region::{Geometry, QueuePairView, Region, QP_BROKEN, SERVER_CLOSED};
use crate::ring::{end_sleep, prepare_sleep, Consumer, CqEntry, Implausible, Producer, SqEntry};
use crate::wait::{ring, sleep_on, BUSY_SPIN};
use crate::wire::{self, peer_alive, LIVENESS_PERIOD};

/// Limits and defaults for the regions a server hands out.
#[derive(Debug, Clone)]
pub struct ServerOptions {
    pub default_queues: u32,
    pub max_queues: u32,
    pub default_depth: u32,
    pub max_depth: u32,
    pub default_db: u64,
    pub max_db: u64,
    /// How long a worker keeps polling an idle region before it sleeps on its doorbell.
    pub idle_spin: Duration,
    /// Clients served at once; more are refused with a message (each holds a region of
    /// up to `max_db` plus its queues, and a worker thread).
    pub max_clients: usize,
}

impl Default for ServerOptions {
    fn default() -> Self {
        ServerOptions {
            default_queues: 1,
            max_queues: 16,
            default_depth: 64,
            max_depth: 1024,
            default_db: 1 << 20,
            max_db: 64 << 20,
            idle_spin: Duration::from_micros(50),
            max_clients: 64,
        }
    }
}

/// Counters a running server keeps (for `hscm serve` and tests).
#[derive(Debug, Default)]
pub struct ServerStats {
    pub clients: AtomicU64,
    /// Clients being served now.
    pub connected: AtomicU64,
    pub commands: AtomicU64,
    pub errors: AtomicU64,
    pub broken_queues: AtomicU64,
    /// Times a worker went to sleep on its doorbell (idle, or nothing it could take).
    pub sleeps: AtomicU64,
}

/// A bound server of a block target `T`. [`Server::spawn`] runs it on a thread;
/// dropping the handle stops it. Generic rather than `dyn` so that a concrete target
/// (the volume) is called directly on the hot path and its read inlines into the
/// worker; `Server<dyn BlockTarget>` serves any target chosen at run time.
pub struct Server<T: BlockTarget + ?Sized = dyn BlockTarget> {
    listener: UnixListener,
    path: PathBuf,
    target: Arc<T>,
    opts: ServerOptions,
    stop: Arc<AtomicBool>,
    stats: Arc<ServerStats>,
}

/// Where a named endpoint lives: a NAME without a slash is `/dev/shm/hscm-NAME.sock`.
pub fn endpoint_path(name: &str) -> PathBuf {
    if name.contains('/') {
        PathBuf::from(name)
    } else {
        PathBuf::from(format!("/dev/shm/hscm-{name}.sock"))
    }
}

impl<T: BlockTarget + ?Sized + 'static> Server<T> {
    /// Binds the control socket (mode 0600). A socket left behind by a dead server is
    /// replaced; a live one is an error.
    pub fn bind(path: &Path, target: Arc<T>, opts: ServerOptions) -> Result<Server<T>> {
        if let Ok(meta) = std::fs::symlink_metadata(path) {
            if !meta.file_type().is_socket() {
                return Err(Error::Invalid(format!(
                    "{} exists and is not a socket; refusing to replace it",
                    path.display()
                )));
            }
            if UnixStream::connect(path).is_ok() {
                return Err(Error::Invalid(format!(
                    "a server is already listening on {}",
                    path.display()
                )));
            }
            std::fs::remove_file(path).map_err(Error::io("removing a stale socket"))?;
        }
        let listener = UnixListener::bind(path).map_err(|e| Error::Io {
            what: format!("binding {}", path.display()),
            source: e,
        })?;
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))
            .map_err(Error::io("restricting the socket to its owner"))?;
        Ok(Server {
            listener,
            path: path.to_path_buf(),
            target,
            opts,
            stop: Arc::new(AtomicBool::new(false)),
            stats: Arc::new(ServerStats::default()),
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    pub fn stats(&self) -> Arc<ServerStats> {
        self.stats.clone()
    }

    /// Accepts clients until stopped; each gets its own worker thread.
    pub fn run(&self) -> Result<()> {
        let mut workers: Vec<JoinHandle<()>> = Vec::new();
        for stream in self.listener.incoming() {
            if self.stop.load(Ordering::Acquire) {
                break;
            }
            let stream = match stream {
                Ok(s) => s,
                Err(e) if e.raw_os_error() == Some(rustix::io::Errno::INVAL.raw_os_error()) => {
                    break
                }
                Err(e) => {
                    tracing::warn!("accept on {}: {e}", self.path.display());
                    continue;
                }
            };
            workers.retain(|w| !w.is_finished());
            if workers.len() >= self.opts.max_clients {
                let mut stream = stream;
                let msg = format!(
                    "server busy: {} clients connected (its limit)",
                    workers.len()
                );
                let _ = wire::send_refusal(&mut stream, &msg);
                tracing::warn!("{msg}");
                continue;
            }
            let target = self.target.clone();
            let opts = self.opts.clone();
            let stop = self.stop.clone();
            let stats = self.stats.clone();
            let spawned = std::thread::Builder::new()
                .name("hscm-ring-worker".into())
                .spawn(move || {
                    if let Err(e) = serve_client(stream, target.as_ref(), &opts, &stop, &stats) {
                        tracing::info!("client dropped: {e}");
                    }
                });
            match spawned {
                Ok(w) => workers.push(w),
                Err(e) => tracing::warn!("cannot start a worker: {e}"),
            }
        }
        for w in workers {
            let _ = w.join();
        }
        Ok(())
    }

    /// Runs the server on a thread of its own.
    pub fn spawn(self) -> Result<ServerHandle> {
        let stop = self.stop.clone();
        let path = self.path.clone();
        let stats = self.stats.clone();
        let listener = self
            .listener
            .try_clone()
            .map_err(Error::io("cloning the listener"))?;
        let thread = std::thread::Builder::new()
            .name("hscm-ring-accept".into())
            .spawn(move || {
                let _ = self.run();
            })
            .map_err(Error::io("starting the server thread"))?;
        Ok(ServerHandle {
            stop,
            listener,
            path,
            stats,
            thread: Some(thread),
        })
    }
}

pub struct ServerHandle {
    stop: Arc<AtomicBool>,
    listener: UnixListener,
    path: PathBuf,
    stats: Arc<ServerStats>,
    thread: Option<JoinHandle<()>>,
}

impl ServerHandle {
    pub fn path(&self) -> &Path {
        &self.path
    }

    pub fn stats(&self) -> &ServerStats {
        &self.stats
    }

    /// Stops accepting, tells every client the server is closing, waits for workers.
    pub fn shutdown(mut self) {
        self.stop_now();
    }

    fn stop_now(&mut self) {
        self.stop.store(true, Ordering::Release);
        // Unblock accept(): on Linux, shutting a listening socket down makes it fail.
        let _ = rustix::net::shutdown(&self.listener, rustix::net::Shutdown::ReadWrite);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        let _ = std::fs::remove_file(&self.path);
    }
}

impl Drop for ServerHandle {
    fn drop(&mut self) {
        if self.thread.is_some() {
            self.stop_now();
        }
    }
}

/// A client's request for one geometry value: 0 takes the default, anything else is
/// capped at the limit; then rounded down to a power of two no smaller than `floor`.
fn granted(requested: u64, default: u64, max: u64, floor: u64) -> u64 {
    let v = if requested == 0 {
        default
    } else {
        requested.min(max)
    }
    .max(floor);
    1 << (63 - v.leading_zeros())
}

/// Builds the region for one client: a sealed memfd only this client receives.
fn make_region(geometry: Geometry) -> Result<(Region, OwnedFd)> {
    let fd =
        rustix::fs::memfd_create("hscm-ring", MemfdFlags::CLOEXEC | MemfdFlags::ALLOW_SEALING)?;
    rustix::fs::fchmod(&fd, rustix::fs::Mode::from_raw_mode(0o600))?;
    let file = File::from(fd);
    let region = Region::create(&file, geometry)?;
    // The client must not be able to shrink the file under our mapping (SIGBUS) or grow
    // it; sealing also forbids changing the seals.
    rustix::fs::fcntl_add_seals(&file, SealFlags::SHRINK | SealFlags::GROW | SealFlags::SEAL)?;
    Ok((region, OwnedFd::from(file)))
}

fn serve_client<T: BlockTarget + ?Sized>(
    mut stream: UnixStream,
    target: &T,
    opts: &ServerOptions,
    stop: &AtomicBool,
    stats: &ServerStats,
) -> Result<()> {
    stream
        .set_read_timeout(Some(Duration::from_secs(5)))
        .map_err(Error::io("socket timeout"))?;
    let hello = match wire::recv_hello(&mut stream) {
        Ok(h) => h,
        Err(e) => {
            let _ = wire::send_refusal(&mut stream, &e.to_string());
            return Err(e);
        }
    };
    let geometry = Geometry {
        queues: if hello.queues == 0 {
            opts.default_queues
        } else {
            hello.queues.min(opts.max_queues)
        },
        depth: granted(
            hello.depth.into(),
            opts.default_depth.into(),
            opts.max_depth.into(),
            2,
        ) as u32,
        db_len: granted(
            hello.db_len,
            opts.default_db,
            opts.max_db,
            crate::region::MIN_DB,
        )
        .min(crate::region::MAX_DB),
        volume_size: target.size(),
    };
    let (region, fd) = match make_region(geometry) {
        Ok(r) => r,
        Err(e) => {
            let _ = wire::send_refusal(&mut stream, &e.to_string());
            return Err(e);
        }
    };
    wire::send_accept(&stream, &fd, geometry.region_len())?;
    drop(fd);
    stats.clients.fetch_add(1, Ordering::Relaxed);
    stats.connected.fetch_add(1, Ordering::Relaxed);
    let result = Worker::new(&region, target, stats).run(&stream, opts, stop);
    stats.connected.fetch_sub(1, Ordering::Relaxed);
    // Whatever ended the session, tell any waiting client thread.
    region
        .server_state()
        .store(SERVER_CLOSED, Ordering::Release);
    for q in 0..geometry.queues {
        let qp = region.queue_pair(q);
        ring(qp.cq_doorbell);
    }
    result
}

struct QueueState<'a> {
    /// The queue pair's words and slots, located once per session.
    qp: QueuePairView<'a>,
    sq: Consumer<'a>,
    cq: Producer<'a>,
    broken: bool,
}

impl QueueState<'_> {
    /// The SQ entry at the head, if its slot is marked as holding it. Only this slot is
    /// polled (see crate::ring): the entry and the mark that it is there arrive in one
    /// cache line.
    fn head_entry(&self) -> Option<SqEntry> {
        self.qp.sq[self.sq.slot(0)].take(self.sq.position())
    }
}

struct Worker<'a, T: BlockTarget + ?Sized> {
    region: &'a Region,
    target: &'a T,
    stats: &'a ServerStats,
    geometry: Geometry,
    queues: Vec<QueueState<'a>>,
    /// Entries taken from an SQ and not yet completed, with what they parsed to.
    batch: Vec<(SqEntry, Result<Request, Status>)>,
}

/// Most entries taken from one queue before the worker looks at the next.
const BATCH: u32 = 32;

impl<'a, T: BlockTarget + ?Sized> Worker<'a, T> {
    fn new(region: &'a Region, target: &'a T, stats: &'a ServerStats) -> Worker<'a, T> {
        let geometry = region.geometry();
        let queues = (0..geometry.queues)
            .map(|i| {
                let qp = region.queue_pair(i);
                QueueState {
                    qp,
                    sq: Consumer::new(qp.sq_head, qp.sq_tail, geometry.depth),
                    cq: Producer::new(qp.cq_head, qp.cq_tail, geometry.depth),
                    broken: false,
                }
            })
            .collect();
        Worker {
            region,
            target,
            stats,
            geometry,
            queues,
            batch: Vec::with_capacity(BATCH as usize),
        }
    }

    fn run(&mut self, stream: &UnixStream, opts: &ServerOptions, stop: &AtomicBool) -> Result<()> {
        let mut idle_since: Option<Instant> = None;
        let mut spins = 0u32;
        loop {
            let mut worked = false;
            for q in 0..self.queues.len() {
                worked |= self.serve_queue(q);
            }
            if worked {
                idle_since = None;
                spins = 0;
                continue;
            }
            spins = spins.wrapping_add(1);
            // The clock is read once per 64 polls, not at the start of each gap: a poll
            // is a few loads, a clock read in this VM costs as much as several, and the
            // gap between a client's commands is often shorter than 64 polls.
            if spins % 64 != 0 {
                std::hint::spin_loop();
                continue;
            }
            if self.check_tails() {
                continue;
            }
            let now = Instant::now();
            let idle = now - *idle_since.get_or_insert(now);
            if idle < BUSY_SPIN {
                continue;
            }
            if idle < opts.idle_spin {
                // Leave the core to a client thread that shares it.
                std::thread::yield_now();
                continue;
            }
            if stop.load(Ordering::Acquire) || !peer_alive(stream) {
                return Ok(());
            }
            let doorbell = self.region.server_doorbell();
            let w = prepare_sleep(doorbell);
            if !self.any_work() {
                self.stats.sleeps.fetch_add(1, Ordering::Relaxed);
                sleep_on(doorbell, w, LIVENESS_PERIOD);
            }
            end_sleep(doorbell);
            idle_since = None;
        }
    }

    /// Whether a queue has entries the worker can take now: waiting entries and room
    /// for their completions (a client that never reaps must not keep the worker
    /// spinning; an honest one rings the doorbell with its next submission anyway).
    /// Impossible indices count as work, so the queue gets broken.
    fn any_work(&self) -> bool {
        self.queues.iter().any(|q| {
            !q.broken
                && match (q.sq.available(), q.cq.free()) {
                    (Ok(_), Ok(0)) => false,
                    (Ok(_), Ok(_)) => q.head_entry().is_some(),
                    _ => true,
                }
        })
    }

    /// Breaks every queue whose client published an impossible SQ tail. The fast path
    /// polls slots, not tails, so this runs while the worker idles (and before it
    /// sleeps, through `any_work`).
    fn check_tails(&mut self) -> bool {
        let mut broke = false;
        for q in 0..self.queues.len() {
            if self.queues[q].broken {
                continue;
            }
            if let Err(bad) = self.queues[q].sq.available() {
                broke |= self.break_queue(q, "SQ tail", bad);
            }
        }
        broke
    }

    /// Stops serving queue `q`, whose peer published `bad` as its `word`. Returns true
    /// (there was something to do: break the queue).
    fn break_queue(&mut self, q: usize, word: &str, bad: Implausible) -> bool {
        tracing::warn!(
            "queue {q}: {word} {} is more than a ring away from {}; no longer served",
            bad.theirs,
            bad.ours
        );
        let qp = self.queues[q].qp;
        qp.error.store(1, Ordering::Relaxed);
        qp.state.store(QP_BROKEN, Ordering::Release);
        ring(qp.cq_doorbell);
        self.queues[q].broken = true;
        self.stats.broken_queues.fetch_add(1, Ordering::Relaxed);
        true
    }

    /// Takes a batch of entries from queue `q`, executes them in order and completes
    /// each as soon as it is done. Returns whether there was anything to do.
    fn serve_queue(&mut self, q: usize) -> bool {
        let state = &self.queues[q];
        if state.broken {
            return false;
        }
        let Some(first) = state.head_entry() else {
            return false;
        };
        let pos = state.sq.position();
        let qp = state.qp;
        let room = match self.queues[q].cq.room_for(1) {
            Ok(n) => n,
            Err(bad) => return self.break_queue(q, "CQ head", bad),
        };
        // A client that does not reap its completions stalls only its own queue.
        if room == 0 {
            return false;
        }
        self.batch.clear();
        for k in 0..room.min(BATCH) {
            let entry = if k == 0 {
                first
            } else {
                match qp.sq[self.queues[q].sq.slot(k)].take(pos.wrapping_add(k)) {
                    Some(e) => e,
                    None => break,
                }
            };
            let mut parsed = parse(&entry, &self.geometry);
            if let Ok(r) = &parsed {
                if let Some(b) = r.buffer_range() {
                    let overlaps = self.batch.iter().any(|(_, p)| {
                        matches!(p, Ok(o) if o.buffer_range().is_some_and(|ob| ob.start < b.end && b.start < ob.end))
                    });
                    if overlaps {
                        parsed = Err(Status::BufferBusy);
                    }
                }
            }
            self.batch.push((entry, parsed));
        }
        // The entries are copied; the client may refill those slots now.
        self.queues[q].sq.release(self.batch.len() as u32);
        for i in 0..self.batch.len() {
            let (entry, parsed) = self.batch[i];
            let (status, len) = match parsed {
                Ok(req) => self.execute(&req),
                Err(s) => (s, 0),
            };
            let cq = &mut self.queues[q].cq;
            qp.cq[cq.slot(0)].fill(
                &CqEntry {
                    id: entry.id,
                    status: status as u32,
                    len,
                },
                cq.position(),
            );
            cq.publish(1);
            ring(qp.cq_doorbell);
            // Counted after the completion is out: these locked adds (tens of cycles
            // each, draining the store buffer) would otherwise delay it.
            self.stats.commands.fetch_add(1, Ordering::Relaxed);
            if status != Status::Ok {
                self.stats.errors.fetch_add(1, Ordering::Relaxed);
            }
        }
        true
    }

    fn execute(&self, req: &Request) -> (Status, u32) {
        let target = self.target;
        let outcome = match *req {
            Request::Read {
                offset,
                len,
                buffer,
            } => target
                .read_with(offset, len as usize, &mut |at, piece| {
                    // Plain stores: non-temporal ones (tried until 2026-11) sent the
                    // lines to memory, and the client, which reads them next, had to
                    // fetch them from there; `hscm bench ring` measured them slower
                    // at every chunk size, for copy-out and in-place reads alike.
                    self.region.db_write(buffer + at as u64, piece)
                })
                .map(|()| len),
            Request::Write {
                offset,
                len,
                buffer,
                flags,
            } => {
                // SAFETY: db_range checked the range lies in the data buffer, and the
                // region outlives this call. The batch check keeps this the only
                // reference the server makes to these bytes. The client may scribble
                // on them meanwhile (a protocol violation that can only garble its own
                // data: any byte value is valid, and nothing reads lengths or indices
                // from the buffer).
                let data = unsafe {
                    std::slice::from_raw_parts(
                        self.region.db_range(buffer, len as usize),
                        len as usize,
                    )
                };
                target.write_at(offset, data, flags).map(|()| len)
            }
            Request::Flush => target.flush().map(|()| 0),
            Request::Discard { offset, len, flags } => {
                target.discard(offset, len, flags).map(|()| 0)
            }
        };
        match outcome {
            Ok(n) => (Status::Ok, n as u32),
            Err(e) if e.refuses_writes() => (Status::ReadOnly, 0),
            Err(e) => {
                tracing::warn!("target: {e}");
                (Status::IoError, 0)
            }
        }
    }
}

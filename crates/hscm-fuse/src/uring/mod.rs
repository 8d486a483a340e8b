//! FUSE over io_uring (Linux 6.14 and later, `fs/fuse/dev_uring.c`): requests and
//! replies pass through per-CPU rings shared with the kernel instead of read(2) and
//! write(2) on /dev/fuse. A request from a task on CPU N lands in queue N, whose
//! thread (pinned to N) serves it and commits the reply with the fetch of the next
//! request in one submission: no cross-CPU wake-up, no system call per direction.
//!
//! How it fits in:
//! - The kernel offers it only where `enable_uring` ([`KERNEL_SWITCH`]) is on at
//!   FUSE_INIT, and only to a daemon that asks (`FUSE_OVER_IO_URING`, see
//!   `options.rs`). It moves the connection onto the rings once every queue has
//!   registered; until then, and for forgets, interrupts and notifications always,
//!   fuser's /dev/fuse readers serve as before.
//! - Each request is laid out as a /dev/fuse read gives it and run through fuser's own
//!   parser and the same [`crate::Fuse`] handlers (the vendored fuser's
//!   `RequestDispatcher`, `vendor/fuser/HSCM-PATCH.md`); the reply comes back through
//!   [`ReplyTransport`] into the request's ring entry.
//! - Only a queue's own thread submits to its ring. The kernel delivers an entry's
//!   next request as task work to the task that submitted the entry's last command:
//!   a worker that committed would get it, and a worker blocked in the kernel (an
//!   fsync waiting for a write-back it caused) would never pick it up. So a reply
//!   made on another thread is queued and the queue's eventfd woken.
//! - A queue's thread runs one request at a time, and the kernel's requests from that
//!   CPU wait behind it, so requests that may wait long, or wait for another request
//!   of this mount, go to workers ([`hands_off`]). The rule for a new handler: if it
//!   can wait for a FUSE request (a write-back of dirty pages, a page invalidation),
//!   its opcode belongs there.

use std::collections::VecDeque;
use std::io;
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{mpsc, Arc, Condvar, Mutex};
use std::thread::JoinHandle;

use fuser::transport::{ReplyTransport, RequestDispatcher, SideTransport};
use io_uring::IoUring;

use crate::Fuse;

mod entry;
#[cfg(test)]
mod tests;
mod wake;

use entry::{
    command, IoVec, Queue, CMD_COMMIT_AND_FETCH, CMD_REGISTER, DEPTH, FUSE_OUT_HEADER, HEADER_LEN,
    HEADER_SPAN, IN_OUT, PAYLOAD, PAYLOAD_KEPT,
};
use wake::{QueueRing, WAKE};

/// The kernel's switch for FUSE over io_uring: a daemon may ask for the rings only
/// while it reads `Y`, at the moment of FUSE_INIT.
pub const KERNEL_SWITCH: &str = "/sys/module/fuse/parameters/enable_uring";

/// Whether this kernel has FUSE over io_uring and its switch is on: `None` where it
/// has no such switch (a kernel before 6.14, or one built without it).
pub fn kernel_switch() -> Option<bool> {
    read_switch(Path::new(KERNEL_SWITCH))
}

/// Turns the kernel's switch on (root only). `Ok(true)` if this call turned it on,
/// `Ok(false)` if it was on already. The switch only lets daemons ask for the rings;
/// mounts made before keep their transport.
pub fn enable_in_kernel() -> io::Result<bool> {
    enable_at(Path::new(KERNEL_SWITCH))
}

fn read_switch(switch: &Path) -> Option<bool> {
    std::fs::read_to_string(switch)
        .ok()
        .map(|s| matches!(s.trim(), "Y" | "y" | "1"))
}

fn enable_at(switch: &Path) -> io::Result<bool> {
    match read_switch(switch) {
        None => Err(io::Error::new(
            io::ErrorKind::Unsupported,
            format!(
                "{} does not exist: this kernel has no FUSE over io_uring (Linux 6.14 and later, CONFIG_FUSE_IO_URING)",
                switch.display()
            ),
        )),
        Some(true) => Ok(false),
        Some(false) => std::fs::write(switch, "Y").map(|()| true).map_err(|e| {
            io::Error::new(e.kind(), format!("turning on {}: {e}", switch.display()))
        }),
    }
}

/// What the mount asked for, what the kernel granted, and what the rings carried:
/// shared by the served file system (which asks at FUSE_INIT), the transport and the
/// mount's status.
#[derive(Debug, Default)]
pub struct RingState {
    pub(crate) wanted: AtomicBool,
    /// The file system's changes sync before they return (immediate mode): they
    /// leave the queues' threads (see [`hands_off`]).
    pub(crate) immediate: AtomicBool,
    pub(crate) granted: AtomicBool,
    /// Releases arrived and not yet served, on either transport: the rings count
    /// one at its queue, before it waits for a worker.
    pub(crate) releases: Arc<crate::releases::ReleasesInFlight>,
    active: AtomicBool,
    requests: AtomicU64,
}

impl RingState {
    /// True once every queue has registered with the kernel: requests then arrive by
    /// the rings.
    pub fn active(&self) -> bool {
        self.active.load(Ordering::Relaxed)
    }

    /// True if the kernel agreed to the rings at FUSE_INIT.
    pub fn granted(&self) -> bool {
        self.granted.load(Ordering::Relaxed)
    }

    /// Requests the rings carried.
    pub fn requests(&self) -> u64 {
        self.requests.load(Ordering::Relaxed)
    }

    /// The transport in a word, for status: `io_uring` or `dev-fuse`.
    pub fn kind(&self) -> &'static str {
        if self.active() {
            "io_uring"
        } else {
            "dev-fuse"
        }
    }
}

/// Opcodes whose handlers may wait long or wait for another request of this mount:
/// served by workers, not on a queue's thread. `immediate`: every change syncs the
/// device before it returns.
pub(crate) fn hands_off(opcode: u32, immediate: bool) -> bool {
    // FSYNC 20, FSYNCDIR 30, SETLKW 33, RELEASE 18 (the last cached open's release
    // drops its pages, which may write dirty ones back through this mount first).
    const ALWAYS: [u32; 4] = [20, 30, 33, 18];
    // FLUSH 25 and the changes: SETATTR 4, SYMLINK 6, MKNOD 8, MKDIR 9, UNLINK 10,
    // RMDIR 11, RENAME 12, LINK 13, WRITE 16, SETXATTR 21, REMOVEXATTR 24, CREATE 35,
    // FALLOCATE 43, RENAME2 45, COPY_FILE_RANGE 47.
    const IMMEDIATE: [u32; 16] = [25, 4, 6, 8, 9, 10, 11, 12, 13, 16, 21, 24, 35, 43, 45, 47];
    ALWAYS.contains(&opcode) || (immediate && IMMEDIATE.contains(&opcode))
}

/// A request handed to a worker: its entry, which the worker reads it from and
/// answers into (no copy of its bytes between threads).
struct Job {
    queue: Arc<Queue>,
    transport: Arc<dyn ReplyTransport>,
    index: u64,
    /// The inode of a release, counted in flight from its arrival
    /// ([`RingState::releases`]) until served.
    release_of: Option<u64>,
}

/// Serves `session` until it ends: by the rings beside /dev/fuse where the kernel
/// granted them at mount (`state`, the served file system's [`Fuse::rings`]), with
/// `workers` threads for the requests that leave the queues; by /dev/fuse alone
/// elsewhere.
pub fn serve(
    session: fuser::Session<Fuse>,
    state: Arc<RingState>,
    workers: usize,
) -> io::Result<()> {
    if !state.granted() {
        return session.run();
    }
    let mut rings = Rings::new(&session, state, workers)?;
    session.run_with(Some(&mut rings))
}

/// The rings of one mount: a queue per possible CPU, each with its thread, and the
/// workers that serve what [`hands_off`] names.
pub struct Rings {
    device: OwnedFd,
    state: Arc<RingState>,
    immediate: bool,
    workers: usize,
    stop: Arc<AtomicBool>,
    queues: Vec<(Arc<Queue>, JoinHandle<()>)>,
    jobs: Option<HandedOff>,
    worker_threads: Vec<JoinHandle<()>>,
}

impl Rings {
    /// Rings for the session on `device` (the mount's /dev/fuse descriptor), with
    /// the state the served file system shares ([`Fuse::rings`]), `workers`
    /// threads for the requests that leave the queues.
    pub fn new(device: &impl AsFd, state: Arc<RingState>, workers: usize) -> io::Result<Rings> {
        Ok(Rings {
            device: device.as_fd().try_clone_to_owned()?,
            immediate: state.immediate.load(Ordering::Relaxed),
            state,
            workers: workers.max(1),
            stop: Arc::default(),
            queues: Vec::new(),
            jobs: None,
            worker_threads: Vec::new(),
        })
    }

    /// Starts the workers; returns the queues they take jobs from: changes and
    /// syncs, and releases apart. A release may be what a waiting change waits for
    /// (a write that finds no room waits for the release of a file unlinked while
    /// open), so no release queues behind changes: with every worker in such a
    /// wait, it would come only after their waits gave up, with ENOSPC.
    fn start_workers(&mut self, dispatcher: &RequestDispatcher<Fuse>) -> io::Result<HandedOff> {
        let handed = HandedOff {
            changes: self.start_pool(dispatcher, "work", self.workers)?,
            releases: self.start_pool(dispatcher, "release", 1)?,
        };
        self.jobs = Some(handed.clone());
        Ok(handed)
    }

    /// `count` workers named `name` taking jobs from a queue of their own.
    fn start_pool(
        &mut self,
        dispatcher: &RequestDispatcher<Fuse>,
        name: &str,
        count: usize,
    ) -> io::Result<Jobs> {
        let jobs: Jobs = Arc::default();
        for n in 0..count {
            let (jobs, stop, dispatcher) = (jobs.clone(), self.stop.clone(), dispatcher.clone());
            let releases = self.state.releases.clone();
            self.worker_threads.push(
                std::thread::Builder::new()
                    .name(format!("hscm-ring-{name}-{n}"))
                    .spawn(move || {
                        // One buffer per worker, kept: at most a payload's worth.
                        let mut request = Vec::with_capacity(PAYLOAD_KEPT);
                        loop {
                            let job = {
                                let mut queue = jobs.0.lock().unwrap();
                                loop {
                                    if let Some(job) = queue.pop_front() {
                                        break job;
                                    }
                                    if stop.load(Ordering::Acquire) {
                                        return;
                                    }
                                    queue = jobs.1.wait(queue).unwrap();
                                }
                            };
                            // SAFETY: the queue's thread handed the entry over: it is
                            // this worker's until its reply is queued.
                            let parsed =
                                unsafe { job.queue.request(job.index as usize, &mut request) };
                            if parsed.is_none() {
                                request.clear();
                            }
                            serve_request(
                                &dispatcher,
                                &job.queue,
                                &job.transport,
                                job.index,
                                &request,
                            );
                            if let Some(ino) = job.release_of {
                                releases.finished(ino);
                            }
                        }
                    })?,
            );
        }
        Ok(jobs)
    }
}

/// Requests handed to workers, and the condition they wait on.
type Jobs = Arc<(Mutex<VecDeque<Job>>, Condvar)>;

/// The two queues of handed-off requests ([`Rings::start_workers`]).
#[derive(Clone)]
struct HandedOff {
    changes: Jobs,
    releases: Jobs,
}

impl HandedOff {
    fn push(&self, opcode: u32, job: Job) {
        let jobs = if opcode == RELEASE {
            &self.releases
        } else {
            &self.changes
        };
        jobs.0.lock().unwrap().push_back(job);
        jobs.1.notify_one();
    }

    fn wake_all(&self) {
        self.changes.1.notify_all();
        self.releases.1.notify_all();
    }
}

/// FUSE_RELEASE's opcode.
const RELEASE: u32 = 18;
/// FUSE_UNLINK's, FUSE_RENAME's and FUSE_RENAME2's opcodes.
const UNLINK: u32 = 10;
const RENAME: u32 = 12;
const RENAME2: u32 = 45;

/// Runs one request; where its bytes do not parse, answers EIO so that the entry is
/// not lost.
fn serve_request(
    dispatcher: &RequestDispatcher<Fuse>,
    queue: &Queue,
    transport: &Arc<dyn ReplyTransport>,
    index: u64,
    request: &[u8],
) {
    if request.is_empty() || !dispatcher.dispatch(request, transport, index) {
        // SAFETY: the entry is the caller's until its reply is queued.
        let header = unsafe { queue.header(index as usize) };
        let unique: [u8; 8] = header[IN_OUT + 8..IN_OUT + 16].try_into().unwrap();
        let mut reply = [0u8; FUSE_OUT_HEADER];
        reply[..4].copy_from_slice(&(FUSE_OUT_HEADER as u32).to_le_bytes());
        reply[4..8].copy_from_slice(&(-5i32).to_le_bytes());
        reply[8..].copy_from_slice(&unique);
        tracing::warn!(
            "a request on FUSE ring {} did not parse: answered EIO",
            queue.qid
        );
        let _ = queue.lay_reply(index as usize, &[io::IoSlice::new(&reply)]);
    }
}

/// The CPUs the kernel may run tasks on, as it numbers its queues
/// (`/sys/devices/system/cpu/possible`, "0-3,5").
pub(crate) fn possible_cpus(list: &str) -> Vec<usize> {
    let mut cpus = Vec::new();
    for part in list.trim().split(',').filter(|p| !p.is_empty()) {
        let mut ends = part.splitn(2, '-').map(|n| n.trim().parse::<usize>());
        match (ends.next(), ends.next()) {
            (Some(Ok(a)), None) => cpus.push(a),
            (Some(Ok(a)), Some(Ok(b))) if a <= b => cpus.extend(a..=b),
            _ => {}
        }
    }
    cpus
}

impl SideTransport<Fuse> for Rings {
    fn start(&mut self, dispatcher: RequestDispatcher<Fuse>) -> io::Result<()> {
        if !self.state.granted() {
            return Ok(());
        }
        let list = std::fs::read_to_string("/sys/devices/system/cpu/possible")?;
        let cpus = possible_cpus(&list);
        let queues = cpus.iter().max().map_or(0, |m| m + 1);
        if queues == 0 || queues > u16::MAX as usize {
            return Err(io::Error::other(format!("possible CPUs {list:?}")));
        }
        let jobs = self.start_workers(&dispatcher)?;
        let (started, registered) = mpsc::channel();
        for qid in 0..queues {
            let mut memory = memmap2::MmapMut::map_anon(DEPTH * (HEADER_SPAN + PAYLOAD))?;
            let base = memory.as_mut_ptr();
            let queue = Arc::new(Queue {
                qid: qid as u16,
                _memory: memory,
                base,
                replied: Mutex::default(),
                reply_len: Default::default(),
                wake: rustix::event::eventfd(0, rustix::event::EventfdFlags::CLOEXEC)?,
                thread: Default::default(),
            });
            let serving = QueueThread {
                queue: queue.clone(),
                device: self.device.try_clone()?,
                dispatcher: dispatcher.clone(),
                jobs: jobs.clone(),
                state: self.state.clone(),
                stop: self.stop.clone(),
                immediate: self.immediate,
            };
            let started = started.clone();
            let thread = std::thread::Builder::new()
                .name(format!("hscm-ring-{qid}"))
                .spawn(move || serving.run(started))?;
            self.queues.push((queue, thread));
        }
        drop(started);
        let mut failed = None;
        for _ in 0..queues {
            match registered.recv() {
                Ok(Ok(())) => {}
                Ok(Err(e)) => failed = Some(e),
                Err(_) => failed = Some(io::Error::other("a ring thread ended before registering")),
            }
        }
        match failed {
            None => {
                self.state.active.store(true, Ordering::Relaxed);
                tracing::info!("FUSE over io_uring: {queues} queues of {DEPTH} entries");
                Ok(())
            }
            Some(e) => {
                // The kernel moves to the rings only once every queue registered;
                // with one missing it stays on /dev/fuse.
                self.stop();
                Err(e)
            }
        }
    }

    fn stop(&mut self) {
        self.stop.store(true, Ordering::Release);
        for (queue, _) in &self.queues {
            let _ = rustix::io::write(&queue.wake, &1u64.to_ne_bytes());
        }
        for (_, thread) in self.queues.drain(..) {
            let _ = thread.join();
        }
        if let Some(jobs) = self.jobs.take() {
            jobs.wake_all();
        }
        for thread in self.worker_threads.drain(..) {
            let _ = thread.join();
        }
        self.state.active.store(false, Ordering::Relaxed);
    }
}

/// What a queue's thread holds.
struct QueueThread {
    queue: Arc<Queue>,
    device: OwnedFd,
    dispatcher: RequestDispatcher<Fuse>,
    jobs: HandedOff,
    state: Arc<RingState>,
    stop: Arc<AtomicBool>,
    immediate: bool,
}

impl QueueThread {
    fn run(self, started: mpsc::Sender<io::Result<()>>) {
        let _ = self.queue.thread.set(std::thread::current().id());
        let qid = self.queue.qid;
        let mut set = rustix::process::CpuSet::new();
        set.set(qid as usize);
        if let Err(e) = rustix::process::sched_setaffinity(None, &set) {
            tracing::debug!("pinning FUSE ring {qid} to its CPU: {e}");
        }
        let ring = match IoUring::builder()
            .setup_cqsize(4 * DEPTH as u32)
            .build(2 * DEPTH as u32)
        {
            Ok(ring) => ring,
            Err(e) => {
                let _ = started.send(Err(io::Error::new(
                    e.kind(),
                    format!("io_uring for FUSE ring {qid}: {e}"),
                )));
                return;
            }
        };
        let mut ring = QueueRing::new(ring, self.queue.wake.as_raw_fd());
        let device = self.device.as_raw_fd();
        let iovecs: Vec<[IoVec; 2]> = (0..DEPTH)
            .map(|i| {
                let entry = self.queue.entry(i);
                [
                    IoVec {
                        base: entry,
                        len: HEADER_LEN,
                    },
                    // SAFETY: within the entry's span.
                    IoVec {
                        base: unsafe { entry.add(HEADER_SPAN) },
                        len: PAYLOAD,
                    },
                ]
            })
            .collect();
        let mut early = Vec::new();
        let registered = (|| -> io::Result<()> {
            for (i, iov) in iovecs.iter().enumerate() {
                let sqe = command(
                    device,
                    CMD_REGISTER,
                    qid,
                    0,
                    Some(iov.as_ptr() as u64),
                    i as u64,
                );
                // SAFETY: the kernel copies the iovecs at registration; the memory
                // they name is the queue's, which outlives the ring (the `Arc` this
                // thread holds is dropped after it).
                unsafe { ring.ring.submission().push(&sqe) }
                    .map_err(|_| io::Error::other("ring full"))?;
            }
            ring.push_wake_read()?;
            ring.ring.submit()?;
            // A refused registration completes at once; accepted ones complete when
            // a request arrives, which may be at once too: those are served below.
            for cqe in ring.ring.completion() {
                if cqe.result() < 0 && cqe.user_data() != WAKE {
                    return Err(io::Error::from_raw_os_error(-cqe.result()));
                }
                early.push((cqe.user_data(), cqe.result()));
            }
            Ok(())
        })();
        let failed = registered.is_err();
        let _ = started
            .send(registered.map_err(|e| {
                io::Error::new(e.kind(), format!("registering FUSE ring {qid}: {e}"))
            }));
        if failed {
            return;
        }
        let transport: Arc<dyn ReplyTransport> = self.queue.clone();
        let mut commit_ids = [0u64; DEPTH];
        let mut live = DEPTH;
        // Kept between requests: at most a payload's worth.
        let mut request = Vec::with_capacity(PAYLOAD_KEPT);
        let mut done = early;
        loop {
            let mut rearm = false;
            for &(user_data, result) in &done {
                if user_data == WAKE {
                    ring.wake_pending = false;
                    // A count read, or a read the kernel interrupted: read again. Any
                    // other failure ends the wake-ups (replies from workers then
                    // wait for the next request's completion).
                    let errno = -result;
                    rearm = result >= 0
                        || errno == rustix::io::Errno::INTR.raw_os_error()
                        || errno == rustix::io::Errno::AGAIN.raw_os_error();
                    if !rearm {
                        tracing::error!(
                            "FUSE ring {qid}: reading its eventfd: {}",
                            io::Error::from_raw_os_error(errno)
                        );
                    }
                    continue;
                }
                let index = user_data as usize;
                if result < 0 {
                    // ENOTCONN and friends: the connection is going; the entry is gone.
                    let errno = -result;
                    if errno != rustix::io::Errno::NOTCONN.raw_os_error()
                        && errno != rustix::io::Errno::CANCELED.raw_os_error()
                    {
                        tracing::warn!(
                            "FUSE ring {qid} entry {index}: {}",
                            io::Error::from_raw_os_error(errno)
                        );
                    }
                    live -= 1;
                    continue;
                }
                self.state.requests.fetch_add(1, Ordering::Relaxed);
                let (unique, opcode, nodeid) = {
                    // SAFETY: the kernel completed the entry's command: it is ours.
                    let header = unsafe { self.queue.header(index) };
                    let word = |at: usize| {
                        u64::from_le_bytes(header[IN_OUT + at..IN_OUT + at + 8].try_into().unwrap())
                    };
                    let opcode =
                        u32::from_le_bytes(header[IN_OUT + 4..IN_OUT + 8].try_into().unwrap());
                    (word(8), opcode, word(16))
                };
                commit_ids[index] = unique;
                // An unlink or a rename may wait for a release in flight
                // (`releases.rs`), which may wait for requests this thread serves.
                let waits =
                    matches!(opcode, UNLINK | RENAME | RENAME2) && self.state.releases.any();
                if waits || hands_off(opcode, self.immediate) {
                    let release_of = (opcode == RELEASE).then(|| {
                        self.state.releases.arrived(nodeid);
                        nodeid
                    });
                    let job = Job {
                        queue: self.queue.clone(),
                        transport: transport.clone(),
                        index: index as u64,
                        release_of,
                    };
                    self.jobs.push(opcode, job);
                } else {
                    // SAFETY: ours, as above.
                    if unsafe { self.queue.request(index, &mut request) }.is_none() {
                        request.clear();
                    }
                    serve_request(
                        &self.dispatcher,
                        &self.queue,
                        &transport,
                        index as u64,
                        &request,
                    );
                }
            }
            let replied = std::mem::take(&mut *self.queue.replied.lock().unwrap());
            for index in replied {
                let sqe = command(
                    device,
                    CMD_COMMIT_AND_FETCH,
                    qid,
                    commit_ids[index as usize],
                    None,
                    index as u64,
                );
                // SAFETY: the entry's memory outlives the ring; at most DEPTH
                // commits and one read are ever queued, within the ring's size.
                if unsafe { ring.ring.submission().push(&sqe) }.is_err() {
                    tracing::error!("FUSE ring {qid}: submission queue full");
                }
            }
            if rearm {
                let _ = ring.push_wake_read();
            }
            if live == 0 || self.stop.load(Ordering::Acquire) {
                break;
            }
            match ring.ring.submit_and_wait(1) {
                Ok(_) => {}
                Err(e) if e.raw_os_error() == Some(rustix::io::Errno::INTR.raw_os_error()) => {}
                Err(e) => {
                    tracing::error!("FUSE ring {qid}: {e}");
                    break;
                }
            }
            done.clear();
            done.extend(ring.ring.completion().map(|c| (c.user_data(), c.result())));
        }
        // `ring` drops before the queue (held in `self`, dropped after the locals),
        // whose memory the entries name; the kernel copied the iovecs at
        // registration.
    }
}

//! Connections many callers share at once. A caller queues its requests on a
//! connection and waits; whoever finds nobody driving the connection drives it: sends
//! what is queued (up to the in-flight window), reads replies, matches each to its
//! request by cookie and hands it back to its caller, and leaves once its own requests
//! are answered, waking a caller whose requests are still out to take over. So one
//! connection carries the requests of every caller at once, as a kernel or libnbd
//! client would, with no thread of its own, and TLS streams need no splitting.
//!
//! Requests travel as copies that own their bytes ([`Op::detached`]), so a caller that
//! gives up at its deadline leaves nothing borrowed behind. A lost connection hands
//! every request it held or had queued back unanswered, to be sent again by its caller
//! (after the replay copy: see the parent module).
//!
//! A started write ([`crate::device::Backend::start_write_through`]) has no caller
//! waiting: its entry carries the callback that completes it, and the connection's
//! helper thread (see `backend`) drives while such entries are out, as a caller would.
//! One lost under a connection goes out again from a thread of its own.

use std::collections::{HashMap, VecDeque};
use std::io;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::thread::Thread;
use std::time::{Duration, Instant};

use parking_lot::Mutex;

use super::session::{ConnectError, Op, Session};
use super::wire::*;
use super::{
    command, is_permanent, mark, NbdClient, FIRST_BACKOFF, MAX_BACKOFF, MAX_BYTES_IN_FLIGHT,
    MAX_IN_FLIGHT,
};
use crate::device::WriteDone;

/// How long a waiting caller sleeps before looking again whether the connection needs
/// a driver (a wake-up is normally what ends the wait).
const LOOK_AGAIN: Duration = Duration::from_millis(5);
/// A caller whose requests are still out this long past their deadline gives up
/// waiting (the driver fails them at the deadline; this only bounds a bug).
const GIVE_UP_AFTER: Duration = Duration::from_secs(2);

/// Work a caller does while its requests are on their way (see
/// [`NbdClient::write_durable_overlapped`]); taken when called, so it runs once.
pub(super) type Meanwhile<'a> = Option<&'a mut dyn FnMut()>;

/// One connection to the server and the requests on it.
pub(crate) struct Conn {
    inner: Mutex<Inner>,
}

#[derive(Default)]
struct Inner {
    /// None while a driver holds it, or while it is lost and not yet made again.
    session: Option<Session>,
    driving: bool,
    queue: VecDeque<Entry>,
    pending: HashMap<u64, Entry>,
    bytes_in_flight: u64,
    next_cookie: u64,
    /// Started writes queued or out: while there are any, the helper drives.
    started: usize,
    /// The thread that drives for started writes (None until it runs).
    helper: Option<Thread>,
}

/// A request on its way, and whose it is.
struct Entry {
    op: Op<'static>,
    waiter: Waiter,
    deadline: Instant,
}

/// Who hears of a request's answer.
enum Waiter {
    /// A caller waiting in [`NbdClient::submit`]: its group, and which of its requests.
    Caller { group: Arc<Group>, index: usize },
    /// A started write: its callback.
    Started(WriteDone),
}

/// Whose requests a driver waits for: it drives until they are answered.
#[derive(Clone, Copy)]
enum Mine<'a> {
    Group(&'a Group),
    /// The helper's: every started write on the connection.
    Started,
}

impl Mine<'_> {
    fn complete(self, inner: &Inner) -> bool {
        match self {
            Mine::Group(g) => g.complete(),
            Mine::Started => inner.started == 0,
        }
    }

    fn owns(self, e: &Entry) -> bool {
        match (self, &e.waiter) {
            (Mine::Group(g), Waiter::Caller { group, .. }) => std::ptr::eq(Arc::as_ptr(group), g),
            (Mine::Started, Waiter::Started(_)) => true,
            _ => false,
        }
    }
}

/// One caller's requests: handed back one by one as they are answered or lost.
struct Group {
    state: Mutex<GroupState>,
    owner: Thread,
}

struct GroupState {
    ops: Vec<Option<Op<'static>>>,
    waiting: usize,
    /// Why the connection was lost under some of them.
    lost: Option<(io::ErrorKind, String)>,
}

impl Group {
    fn complete(&self) -> bool {
        self.state.lock().waiting == 0
    }

    fn hand_back(&self, index: usize, op: Op<'static>, lost: Option<&(io::ErrorKind, String)>) {
        let mut st = self.state.lock();
        st.ops[index] = Some(op);
        st.waiting -= 1;
        if let (None, Some(why)) = (&st.lost, lost) {
            st.lost = Some(why.clone());
        }
        let done = st.waiting == 0;
        drop(st);
        if done {
            self.owner.unpark();
        }
    }
}

impl Conn {
    pub fn new(session: Session) -> Conn {
        Conn {
            inner: Mutex::new(Inner {
                session: Some(session),
                ..Inner::default()
            }),
        }
    }

    /// Requests queued or out on this connection (to spread callers over several).
    pub fn load(&self) -> usize {
        let inner = self.inner.lock();
        inner.queue.len() + inner.pending.len()
    }

    /// Names the thread that drives for started writes.
    pub fn set_helper(&self, helper: Thread) {
        self.inner.lock().helper = Some(helper);
    }

    /// Takes the connection to drive for started writes, if any are queued or out and
    /// nobody drives it; else whether any are (the helper then waits for a wake-up).
    pub fn take_for_started(&self) -> Result<Option<Session>, bool> {
        let mut inner = self.inner.lock();
        if inner.started == 0 || inner.driving {
            return Err(inner.started > 0);
        }
        inner.driving = true;
        Ok(inner.session.take())
    }

    /// Ends the connection, if nobody is driving it (a driver notices on its own).
    pub fn close(&self) {
        let mut inner = self.inner.lock();
        if !inner.driving {
            if let Some(s) = inner.session.take() {
                s.disconnect();
            }
        }
    }
}

impl Inner {
    /// The earliest deadline of what is out or queued.
    fn earliest(&self) -> Option<Instant> {
        self.pending
            .values()
            .chain(self.queue.iter())
            .map(|e| e.deadline)
            .min()
    }

    /// Wakes the caller of some request still out or queued, to drive in our place:
    /// the one sent last, whose answer comes last, so it drives longest and callers
    /// hand the connection over (a thread's wake-up each time) as seldom as may be.
    fn wake_a_successor(&self) {
        let newest = self.pending.iter().max_by_key(|(cookie, _)| **cookie);
        if let Some(e) = newest.map(|(_, e)| e).or(self.queue.front()) {
            self.wake(e);
        }
    }

    /// Wakes whoever waits for `e`: its caller, or the helper for a started write.
    fn wake(&self, e: &Entry) {
        match &e.waiter {
            Waiter::Caller { group, .. } => group.owner.unpark(),
            Waiter::Started(_) => {
                if let Some(h) = &self.helper {
                    h.unpark();
                }
            }
        }
    }
}

impl NbdClient {
    /// Runs a batch of requests on one connection, pipelined, until every one has its
    /// answer: a lost connection is made again (and the replay copy written first)
    /// until the deadline. The first error a server answered with fails the batch.
    pub(super) fn run(&self, ops: &mut [Op<'_>]) -> io::Result<()> {
        self.run_with(ops, &mut None)
    }

    /// As [`Self::run`], calling `meanwhile` once the batch is first on its way.
    pub(super) fn run_with(
        &self,
        ops: &mut [Op<'_>],
        meanwhile: &mut Meanwhile<'_>,
    ) -> io::Result<()> {
        self.run_until(ops, Instant::now() + self.uri.timeout, meanwhile)
    }

    /// As [`Self::run_with`], with the deadline given.
    pub(super) fn run_until(
        &self,
        ops: &mut [Op<'_>],
        deadline: Instant,
        meanwhile: &mut Meanwhile<'_>,
    ) -> io::Result<()> {
        let conn = self.pick();
        let mut backoff = FIRST_BACKOFF;
        loop {
            let tried = self.try_once(conn, ops, deadline, meanwhile);
            let Err(e) = tried else { break };
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() || is_permanent(&e) {
                return Err(self.failed(e));
            }
            std::thread::sleep(backoff.min(left));
            backoff = (backoff * 2).min(MAX_BACKOFF);
        }
        match ops.iter().find(|o| o.error.is_some()) {
            Some(op) => Err(self.server_failed(op)),
            None => Ok(()),
        }
    }

    /// What the caller of `op`, which the server answered with an error, is told.
    pub(super) fn server_failed(&self, op: &Op<'_>) -> io::Error {
        let (errno, msg) = op.error.clone().unwrap_or((EIO, String::new()));
        self.health.failed_requests.fetch_add(1, Ordering::Relaxed);
        let base = io::Error::from_raw_os_error(errno as i32);
        io::Error::new(
            base.kind(),
            format!(
                "{}: the server failed a {} of {} bytes at {}: {base}{}",
                self.uri,
                command(op.kind),
                op.len,
                op.offset,
                if msg.is_empty() {
                    String::new()
                } else {
                    format!(" ({msg})")
                }
            ),
        )
    }

    /// One pass of [`Self::run`]: the replay copy first where a connection was lost,
    /// then the batch. A lost connection leaves the batch's unanswered requests to
    /// be sent again.
    fn try_once(
        &self,
        conn: usize,
        ops: &mut [Op<'_>],
        deadline: Instant,
        meanwhile: &mut Meanwhile<'_>,
    ) -> io::Result<()> {
        if self.needs_replay.load(Ordering::Acquire) {
            self.replay_all(conn, deadline)?;
        }
        // (Started writes check the same before they go out: see `backend`.)
        let _shared = self.gate.read();
        self.submit(&self.conns[conn], ops, deadline, meanwhile)?;
        // A server that failed a request is still there: only a lost connection
        // (handled in `mux`) calls for a replay.
        Ok(())
    }

    pub(super) fn failed(&self, e: io::Error) -> io::Error {
        self.health.failed_requests.fetch_add(1, Ordering::Relaxed);
        let msg = format!(
            "{}: no answer within {:.1} s ({e}); nothing unanswered is counted as written",
            self.uri,
            self.uri.timeout.as_secs_f64()
        );
        *self.health.last_error.lock() = Some(msg.clone());
        io::Error::new(
            if is_permanent(&e) {
                io::ErrorKind::InvalidData
            } else {
                io::ErrorKind::TimedOut
            },
            msg,
        )
    }

    /// Sends the requests of `ops` not yet answered on `conn` and waits until each is
    /// answered (Ok, each with what the server said) or the connection is lost under
    /// them (Err; the unanswered ones are left to be sent again).
    pub(crate) fn submit(
        &self,
        conn: &Conn,
        ops: &mut [Op<'_>],
        deadline: Instant,
        meanwhile: &mut Meanwhile<'_>,
    ) -> io::Result<()> {
        let open: Vec<usize> = (0..ops.len()).filter(|&i| !ops[i].done).collect();
        if open.is_empty() {
            return Ok(());
        }
        let group = Arc::new(Group {
            state: Mutex::new(GroupState {
                ops: (0..ops.len()).map(|_| None).collect(),
                waiting: open.len(),
                lost: None,
            }),
            owner: std::thread::current(),
        });
        {
            let mut inner = conn.inner.lock();
            for &i in &open {
                let mut op = ops[i].detached();
                op.resend();
                inner.queue.push_back(Entry {
                    op,
                    waiter: Waiter::Caller {
                        group: group.clone(),
                        index: i,
                    },
                    deadline,
                });
            }
        }
        if let Some(work) = meanwhile.take() {
            self.push_out(conn, Mine::Group(&group));
            work();
        }
        while !group.complete() {
            let session = {
                let mut inner = conn.inner.lock();
                if inner.driving {
                    None
                } else {
                    inner.driving = true;
                    Some(inner.session.take())
                }
            };
            match session {
                Some(session) => self.drive(conn, session, Mine::Group(&group)),
                None => {
                    if Instant::now() > deadline + GIVE_UP_AFTER {
                        return Err(io::Error::new(
                            io::ErrorKind::TimedOut,
                            "no answer, and the connection's driver is stuck",
                        ));
                    }
                    std::thread::park_timeout(LOOK_AGAIN);
                }
            }
        }
        let mut st = group.state.lock();
        for &i in &open {
            if let Some(op) = st.ops[i].take() {
                ops[i].settle(op);
            }
        }
        match st.lost.take() {
            Some((kind, msg)) => Err(io::Error::new(kind, msg)),
            None => Ok(()),
        }
    }

    /// Queues a started write on `conn` and sends it now if nobody drives the
    /// connection; the helper then drives for its answer. The caller holds the gate
    /// shared and counted the write in `started`.
    pub(super) fn start(
        &self,
        conn: &Conn,
        mut op: Op<'static>,
        done: WriteDone,
        deadline: Instant,
    ) {
        op.resend();
        {
            let mut inner = conn.inner.lock();
            inner.started += 1;
            inner.queue.push_back(Entry {
                op,
                waiter: Waiter::Started(done),
                deadline,
            });
        }
        self.push_out(conn, Mine::Started);
    }

    /// Drives `conn` for the started writes on it (the helper's part).
    pub(super) fn drive_started(&self, conn: &Conn, session: Option<Session>) {
        self.drive(conn, session, Mine::Started)
    }

    /// Drives `conn` until `mine` is answered (or the connection is lost), holding
    /// its session; leaves it to the next caller.
    fn drive(&self, conn: &Conn, mut session: Option<Session>, mine: Mine<'_>) {
        loop {
            if session.is_none() {
                let deadline = conn.inner.lock().earliest();
                let Some(deadline) = deadline else {
                    let mut inner = conn.inner.lock();
                    inner.driving = false;
                    return;
                };
                match self.reconnect(deadline) {
                    Ok(s) => session = Some(s),
                    Err(e) => return self.lose(conn, None, Vec::new(), e),
                }
            }
            let s = session.as_mut().expect("made above");
            if let Err((batch, e)) = send_window(conn, s) {
                return self.lose(conn, session, batch, e);
            }
            let deadline = {
                let mut inner = conn.inner.lock();
                let idle = inner.pending.is_empty() && inner.queue.is_empty();
                // Replies already read are handed out first: cheaper here than by a
                // successor woken for them.
                if idle || (mine.complete(&inner) && !s.reply_at_hand()) {
                    inner.session = session;
                    inner.driving = false;
                    inner.wake_a_successor();
                    return;
                }
                match inner.pending.values().map(|e| e.deadline).min() {
                    Some(d) => d,
                    None => continue,
                }
            };
            s.deadline(deadline);
            let head = match s.receive_head() {
                Ok(h) => h,
                Err(e) => return self.lose(conn, session, Vec::new(), e),
            };
            let Some(mut e) = conn.inner.lock().pending.remove(&head.cookie()) else {
                let why = io::Error::new(
                    io::ErrorKind::InvalidData,
                    format!(
                        "a reply for cookie {}, which no request in flight has",
                        head.cookie()
                    ),
                );
                return self.lose(conn, session, Vec::new(), why);
            };
            if let Err(why) = s.apply(head, &mut e.op) {
                return self.lose(conn, session, vec![e], why);
            }
            if !e.op.done {
                conn.inner.lock().pending.insert(head.cookie(), e);
                continue;
            }
            conn.inner.lock().bytes_in_flight -= e.op.len as u64;
            if e.op
                .error
                .as_ref()
                .is_some_and(|(errno, _)| *errno == ESHUTDOWN)
            {
                // A server shutting down answers ESHUTDOWN without doing the request:
                // as a lost connection, it goes out again once one is made.
                e.op.done = false;
                let why = io::Error::new(
                    io::ErrorKind::ConnectionAborted,
                    "the server is shutting down",
                );
                return self.lose(conn, session, vec![e], why);
            }
            let written = matches!(e.op.kind, CMD_WRITE | CMD_WRITE_ZEROES) && e.op.error.is_none();
            if written && e.op.flags & CMD_FLAG_FUA == 0 {
                if let Some(bytes) = e.op.data.write_bytes(CMD_WRITE) {
                    self.keep_for_replay(e.op.offset, bytes);
                }
            } else if written {
                // Durable now: an older copy of these blocks written again after a lost
                // connection would undo it.
                let bytes =
                    e.op.data
                        .write_bytes(e.op.kind)
                        .filter(|_| e.op.kind == CMD_WRITE);
                self.forget_replay_of(e.op.offset, u64::from(e.op.len), bytes);
            }
            self.health.reachable.store(true, Ordering::Relaxed);
            match e.waiter {
                Waiter::Caller { group, index } => group.hand_back(index, e.op, None),
                Waiter::Started(done) => {
                    conn.inner.lock().started -= 1;
                    self.started.fetch_sub(1, Ordering::AcqRel);
                    let outcome = match e.op.error {
                        None => Ok(()),
                        Some(_) => Err(self.server_failed(&e.op)),
                    };
                    done(outcome);
                }
            }
        }
    }

    /// Sends what is queued on `conn` (up to the window) if nobody is driving it, and
    /// leaves the replies to whoever drives next: a caller with work of its own to do
    /// meanwhile, or one that started a write. Another caller whose requests are out
    /// (the helper, for a started write) is woken to read replies, since one may have
    /// found the connection taken while this one sent.
    fn push_out(&self, conn: &Conn, mine: Mine<'_>) {
        let mut session = {
            let mut inner = conn.inner.lock();
            if inner.driving || inner.session.is_none() {
                // A lost connection is made again by its next driver: for a started
                // write, the helper.
                if let (Mine::Started, false, Some(h)) = (mine, inner.driving, &inner.helper) {
                    h.unpark();
                }
                return;
            }
            inner.driving = true;
            inner.session.take().expect("looked at")
        };
        if let Err((batch, e)) = send_window(conn, &mut session) {
            return self.lose(conn, Some(session), batch, e);
        }
        let mut inner = conn.inner.lock();
        inner.session = Some(session);
        inner.driving = false;
        if let Mine::Started = mine {
            // The helper drives for every started write, and hands over to a caller
            // once they are answered.
            if let Some(h) = &inner.helper {
                h.unpark();
            }
            return;
        }
        let not_mine = |e: &&Entry| !mine.owns(e);
        let other = inner
            .pending
            .iter()
            .filter(|(_, e)| not_mine(e))
            .max_by_key(|(cookie, _)| **cookie)
            .map(|(_, e)| e)
            // Nothing of another's out, but some queued past the window: its owner
            // sends it once replies make room.
            .or_else(|| inner.queue.iter().find(not_mine));
        if let Some(e) = other {
            inner.wake(e);
        }
    }

    /// The connection is gone: every request it held or had queued goes back to its
    /// caller unanswered, and what it had acknowledged is written again before
    /// anything else (the server may have lost it).
    fn lose(&self, conn: &Conn, session: Option<Session>, mut held: Vec<Entry>, why: io::Error) {
        if let Some(s) = session {
            s.disconnect();
        }
        let why = (why.kind(), why.to_string());
        let mut inner = conn.inner.lock();
        inner.driving = false;
        inner.bytes_in_flight = 0;
        inner.started = 0;
        held.extend(inner.pending.drain().map(|(_, e)| e));
        held.extend(inner.queue.drain(..));
        drop(inner);
        self.needs_replay.store(true, Ordering::Release);
        self.health.reachable.store(false, Ordering::Relaxed);
        let mut started = Vec::new();
        for mut e in held {
            e.op.resend();
            match e.waiter {
                Waiter::Caller { group, index } => group.hand_back(index, e.op, Some(&why)),
                Waiter::Started(done) => started.push((e.op, done, e.deadline)),
            }
        }
        if !started.is_empty() {
            self.started.fetch_sub(started.len(), Ordering::AcqRel);
            self.retry_started(started, &why.1);
        }
    }

    /// A new connection in place of a lost one, to the same export.
    fn reconnect(&self, deadline: Instant) -> io::Result<Session> {
        let (s, export) = Session::connect(&self.uri, self.tls.as_ref(), deadline).map_err(mark)?;
        if export.size != self.export.size {
            return Err(mark(ConnectError::permanent(format!(
                "{}: the export came back with {} bytes, not {}: not the export the volume was opened on",
                self.uri, export.size, self.export.size
            ))));
        }
        self.health.reconnects.fetch_add(1, Ordering::Relaxed);
        Ok(s)
    }
}

/// Sends what fits in the window from `conn`'s queue on `s` (held by the caller as
/// its driver) and counts it in flight; on a send error, hands back what it took.
fn send_window(conn: &Conn, s: &mut Session) -> Result<(), (Vec<Entry>, io::Error)> {
    let batch: Vec<(u64, Entry)> = {
        let mut inner = conn.inner.lock();
        let mut batch = Vec::new();
        while let Some(e) = inner.queue.front() {
            let len = e.op.len as u64;
            let out = inner.pending.len() + batch.len();
            if out >= MAX_IN_FLIGHT
                || (out > 0 && inner.bytes_in_flight + len > MAX_BYTES_IN_FLIGHT)
            {
                break;
            }
            let e = inner.queue.pop_front().expect("looked at");
            inner.bytes_in_flight += len;
            inner.next_cookie += 1;
            batch.push((inner.next_cookie, e));
        }
        batch
    };
    for (cookie, e) in &batch {
        s.deadline(e.deadline);
        if let Err(why) = s.send(&e.op, *cookie) {
            return Err((batch.into_iter().map(|(_, e)| e).collect(), why));
        }
    }
    let mut inner = conn.inner.lock();
    for (cookie, mut e) in batch {
        e.op.sent = true;
        inner.pending.insert(cookie, e);
    }
    Ok(())
}

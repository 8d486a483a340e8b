//! The transmission phase: a connection's threads take turns reading requests (and
//! their payloads), run them, and write each whole reply under one lock. A durable
//! write the target can start (a volume on a network home) is started by the reader,
//! which reads on, and answered when it completes (`replies`).

use std::io::{self, Read};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex};

use hscm_block::{WriteDone, WriteFlags};

use crate::proto::{self, Request, REQUEST_LEN};
use crate::stream::Stream;
use crate::Error;

use super::replies::Replies;
use super::requests::{errno_of, error_reply};
use super::{Server, Session};

/// Writes larger than this are refused and, since their payload cannot be skipped
/// cheaply, end the connection.
const MAX_PAYLOAD_SKIP: u32 = 64 << 20;
/// A READ's reply goes out in pieces of this many bytes (see `answer_read`).
const READ_PIECE: usize = 256 << 10;

/// One connection in its transmission phase, shared by the threads serving it.
struct Connection<'a> {
    /// Whole replies go out through this, one at a time.
    replies: Arc<Replies>,
    /// Locked only by the thread whose turn it is to read.
    reader: Mutex<io::BufReader<Stream>>,
    turn: Mutex<Turn>,
    /// Signalled when the turn to read is free, or when reading ended.
    turn_free: Condvar,
    session: Session,
    stop: &'a AtomicBool,
}

/// Whose turn it is to read, and who could take it.
struct Turn {
    taken: bool,
    /// Threads waiting for the turn.
    idle: usize,
    /// Threads serving the connection.
    threads: usize,
    /// Set when reading ended: cleanly (DISC, end of stream, a stop) or with the error
    /// that ended it. Every thread then leaves once its request is answered.
    ended: Option<Result<(), Error>>,
}

/// Requests are read through a buffer this large: at depth one receive brings in
/// several, and what is left in it tells that the client has sent more. Each open
/// connection holds one, so it is kept small: at 64 KiB, 1,000 idle connections held
/// 64 MiB (`hscm bench nbd-strangers`); a write's payload larger than what is
/// buffered is read straight into its own buffer anyway.
const READ_BUFFER: usize = 16 << 10;

impl Server {
    pub(super) fn transmit(
        &self,
        stream: Stream,
        session: Session,
        stop: &AtomicBool,
    ) -> Result<(), Error> {
        let conn = Connection {
            replies: Arc::new(Replies::new(stream.try_clone()?)),
            reader: Mutex::new(io::BufReader::with_capacity(READ_BUFFER, stream)),
            turn: Mutex::new(Turn {
                taken: false,
                idle: 0,
                threads: 1,
                ended: None,
            }),
            turn_free: Condvar::new(),
            session,
            stop,
        };
        std::thread::scope(|scope| self.take_turns(&conn, scope));
        conn.replies.wait_for_started();
        let turn = match conn.turn.into_inner() {
            Ok(turn) => turn,
            Err(poisoned) => poisoned.into_inner(),
        };
        turn.ended.unwrap_or(Ok(()))
    }

    /// One of a connection's threads. Threads take turns reading: the one whose turn
    /// it is reads a request, then runs it and writes its reply while another reads
    /// (the leader/follower pattern), so a request never changes threads.
    ///
    /// Requests answered from RAM keep the turn: their copy costs less than waking
    /// another thread. For the others the turn passes on eagerly when the client has
    /// already sent more (a deep client) or the request may wait long: a waiting
    /// thread is woken, or one is added up to the export's limit, to read on while
    /// this one waits on the device (see [`Pace`]).
    fn take_turns<'scope, 'env>(
        &'env self,
        conn: &'env Connection<'env>,
        scope: &'scope std::thread::Scope<'scope, 'env>,
    ) {
        let mut my_turn = false;
        loop {
            if !my_turn {
                let Ok(mut turn) = conn.turn.lock() else {
                    return;
                };
                loop {
                    if turn.ended.is_some() {
                        return;
                    }
                    if !turn.taken {
                        turn.taken = true;
                        break;
                    }
                    turn.idle += 1;
                    let Ok(woken) = conn.turn_free.wait(turn) else {
                        return;
                    };
                    turn = woken;
                    turn.idle -= 1;
                }
            }
            let (next, more_sent) = {
                let Ok(mut reader) = conn.reader.lock() else {
                    return;
                };
                let next = self.read_request(&mut *reader, conn.stop);
                let pace = match &next {
                    Ok(Some((req, _))) => self.pace(req),
                    _ => Pace::Ram,
                };
                // Asked only where it matters: a request that keeps the turn reads on.
                let more_sent = pace != Pace::Ram
                    && (!reader.buffer().is_empty() || reader.get_ref().pending() > 0);
                (next.map(|r| r.map(|request| (request, pace))), more_sent)
            };
            // A durable write started keeps the turn, as a copy out of RAM does:
            // nothing waits for it here. Only for a deep client (more sent, or writes
            // started already): at depth one, waiting here costs no thread's wake-up.
            if let Ok(Some(((req, payload), Pace::Long))) = &next {
                let deep = more_sent || conn.replies.any_started();
                if req.kind == proto::CMD_WRITE && deep && self.start_write(conn, req, payload) {
                    my_turn = true;
                    continue;
                }
            }
            let (req, payload) = {
                let Ok(mut turn) = conn.turn.lock() else {
                    return;
                };
                match next {
                    Ok(Some((request, pace))) => {
                        // A copy out of RAM costs less than waking another thread to
                        // read meanwhile: keep the turn, answer, read on.
                        my_turn = pace == Pace::Ram;
                        if !my_turn {
                            turn.taken = false;
                            // Someone must read what comes next while this request
                            // waits: at once if the client has sent more, or if the
                            // request may wait long (a sync). A brief device write
                            // with nothing behind it is left to run alone: whoever
                            // finishes first reads on, and a QD1 client pays no
                            // wake-up of another thread.
                            if more_sent || pace == Pace::Long {
                                let max = self.export.workers_per_connection.max(1);
                                if turn.idle > 0 {
                                    conn.turn_free.notify_one();
                                } else if turn.threads < max {
                                    turn.threads += 1;
                                    scope.spawn(move || self.take_turns(conn, scope));
                                }
                            }
                        }
                        request
                    }
                    Ok(None) => {
                        turn.ended = Some(Ok(()));
                        conn.turn_free.notify_all();
                        return;
                    }
                    Err(e) => {
                        turn.ended = Some(Err(e));
                        conn.turn_free.notify_all();
                        return;
                    }
                }
            };
            let sent = if req.kind == proto::CMD_READ {
                self.answer_read(&conn.replies, &req, conn.session)
            } else {
                conn.replies
                    .send(&self.execute(&req, &payload, conn.session))
            };
            if !sent {
                // The client is gone (the failed reply shut the stream down): the
                // connection ends for every thread.
                if let Ok(mut turn) = conn.turn.lock() {
                    turn.ended.get_or_insert(Ok(()));
                    conn.turn_free.notify_all();
                }
                return;
            }
        }
    }

    /// Reads the next request and its payload; None at DISC, at the end of the stream
    /// between requests, or once `stop` is set.
    fn read_request(
        &self,
        s: &mut impl Read,
        stop: &AtomicBool,
    ) -> Result<Option<(Request, Vec<u8>)>, Error> {
        if stop.load(Ordering::Relaxed) {
            return Ok(None);
        }
        let mut header = [0u8; REQUEST_LEN];
        match read_header(s, &mut header) {
            Ok(true) => {}
            Ok(false) => return Ok(None),
            Err(e) if stop.load(Ordering::Relaxed) => {
                tracing::debug!("connection ended at shutdown: {e}");
                return Ok(None);
            }
            Err(e) => return Err(e),
        }
        let req = proto::parse_request(&header)?;
        self.stats.commands.fetch_add(1, Ordering::Relaxed);
        let max = self.caps.block_sizes.maximum;
        let mut payload = Vec::new();
        if req.kind == proto::CMD_WRITE {
            if req.len > max {
                if req.len > MAX_PAYLOAD_SKIP {
                    return Err(Error::Protocol(format!(
                        "a write of {} bytes (at most {max})",
                        req.len
                    )));
                }
                skip(s, u64::from(req.len))?;
            } else {
                payload = vec![0u8; req.len as usize];
                s.read_exact(&mut payload)?;
            }
        }
        if req.kind == proto::CMD_DISC {
            return Ok(None);
        }
        Ok(Some((req, payload)))
    }

    /// Starts a durable write (checked as any request is first), its reply sent when
    /// it completes; false where it is not started (an error to answer, the
    /// connection's bound on started writes reached, a target that cannot start it):
    /// it then runs the waiting way.
    fn start_write(&self, conn: &Connection<'_>, req: &Request, payload: &[u8]) -> bool {
        if self.check(req, conn.session).is_err() || req.len > self.caps.block_sizes.maximum {
            return false;
        }
        let bytes = u64::from(req.len);
        if !conn.replies.try_start(bytes) {
            return false;
        }
        // Counted until dropped: answered, or never started after all.
        let counted = StartedWrite {
            replies: conn.replies.clone(),
            bytes,
        };
        let (stats, req_copy, session) = (self.stats.clone(), *req, conn.session);
        let done: WriteDone = Box::new(move |r| {
            let reply = match r {
                Ok(()) => proto::simple_reply(0, req_copy.cookie).to_vec(),
                Err(e) => {
                    stats.errors.fetch_add(1, Ordering::Relaxed);
                    error_reply(&req_copy, session, errno_of(&e), &e.to_string())
                }
            };
            counted.replies.post(&reply);
            drop(counted);
        });
        let flags = if req.flags & proto::CMD_FLAG_FUA != 0 {
            WriteFlags::FUA
        } else {
            WriteFlags::NONE
        };
        self.target
            .start_write(req.offset, payload, flags, done)
            .is_ok()
    }

    fn pace(&self, req: &Request) -> Pace {
        match req.kind {
            proto::CMD_READ | proto::CMD_CACHE | proto::CMD_BLOCK_STATUS => Pace::Ram,
            // A target that needs no FLUSH makes every write durable before it returns.
            proto::CMD_WRITE if req.flags & proto::CMD_FLAG_FUA == 0 && self.caps.flush => {
                Pace::Brief
            }
            _ => Pace::Long,
        }
    }

    /// Answers a READ a piece at a time, under the connection's writer lock: a
    /// reply of up to the maximum block size (32 MiB) never sits whole in memory, so
    /// a client that stops reading its replies holds at most one piece here. The
    /// first piece is read before the header goes out, so an error found there is
    /// answered as an error; one found later (the header already said success)
    /// ends the connection. False once the client is gone.
    fn answer_read(&self, replies: &Replies, req: &Request, session: Session) -> bool {
        if let Err((errno, why)) = self.check(req, session) {
            self.stats.errors.fetch_add(1, Ordering::Relaxed);
            return replies.send(&error_reply(req, session, errno, &why));
        }
        let Some(mut w) = replies.hold() else {
            return false;
        };
        let len = req.len as usize;
        let mut piece = Vec::with_capacity(len.min(READ_PIECE));
        let mut at = 0;
        while at < len {
            let n = (len - at).min(READ_PIECE);
            piece.clear();
            let read = self
                .target
                .read_with(req.offset + at as u64, n, &mut |_, bytes| {
                    piece.extend_from_slice(bytes)
                });
            if let Err(e) = read {
                self.stats.errors.fetch_add(1, Ordering::Relaxed);
                if at == 0 {
                    let reply = error_reply(req, session, errno_of(&e), &e.to_string());
                    drop(w);
                    return replies.send(&reply);
                }
                tracing::warn!("a read failed after its reply began: {e}; dropping the client");
                w.shutdown();
                return false;
            }
            if at == 0 {
                let header = if session.structured {
                    let mut h = proto::chunk_header(
                        proto::REPLY_FLAG_DONE,
                        proto::REPLY_TYPE_OFFSET_DATA,
                        req.cookie,
                        8 + req.len,
                    )
                    .to_vec();
                    h.extend_from_slice(&req.offset.to_be_bytes());
                    h
                } else {
                    proto::simple_reply(0, req.cookie).to_vec()
                };
                if !w.write_all(&header) {
                    return false;
                }
            }
            if !w.write_all(&piece) {
                return false;
            }
            at += n;
        }
        true
    }
}

/// A started write, counted against its connection's bound until dropped.
struct StartedWrite {
    replies: Arc<Replies>,
    bytes: u64,
}

impl Drop for StartedWrite {
    fn drop(&mut self) {
        self.replies.finish_started(self.bytes);
    }
}

/// How long a request may keep its thread, which decides who reads the next one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Pace {
    /// A copy out of RAM (a CACHE of a cold range may read the device, rarely).
    Ram,
    /// One device write, no sync.
    Brief,
    /// A sync, or a range of writes: FLUSH, FUA, TRIM, WRITE_ZEROES, and every write
    /// to a target that syncs each one.
    Long,
}

/// Reads a whole request header; false when the client closed cleanly between requests.
fn read_header(s: &mut impl Read, header: &mut [u8; REQUEST_LEN]) -> Result<bool, Error> {
    let mut got = 0;
    while got < REQUEST_LEN {
        match s.read(&mut header[got..]) {
            Ok(0) if got == 0 => return Ok(false),
            Ok(0) => {
                return Err(Error::Protocol(format!(
                    "the client left {got} bytes into a request header"
                )))
            }
            Ok(n) => got += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e.into()),
        }
    }
    Ok(true)
}

/// Reads and drops `n` bytes.
pub(super) fn skip(s: &mut impl Read, n: u64) -> io::Result<()> {
    let copied = io::copy(&mut Read::by_ref(s).take(n), &mut io::sink())?;
    if copied < n {
        return Err(io::Error::new(
            io::ErrorKind::UnexpectedEof,
            "the client left mid-payload",
        ));
    }
    Ok(())
}

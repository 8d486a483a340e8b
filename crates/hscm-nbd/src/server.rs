//! The server: the fixed-newstyle handshake, then the transmission phase, serving
//! one [`BlockTarget`] to any number of connections.
//!
//! Each connection has a few threads that take turns: one reads a request and its
//! payload, then runs it on the target and writes its whole reply under one lock while
//! the next thread reads, so requests are pipelined and replies may complete out of
//! order, as the protocol allows. A client that breaks the protocol is
//! disconnected; one that asks for something wrong gets the spec's error and goes on.

use std::io::{self, Read, Write};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

use hscm_block::{BlockTarget, Capabilities, FuaSupport, WriteFlags, ZeroFlags};

use crate::proto::{self, Request, REQUEST_LEN};
use crate::stream::Stream;
use crate::Error;

/// What the export is called and how it is served.
#[derive(Debug, Clone)]
pub struct ExportOptions {
    /// The export's name; a client asking for "" gets it too (the default export).
    pub name: String,
    /// Shown by `nbdinfo` and NBD_OPT_LIST.
    pub description: String,
    /// Refuse writes, trims and zeroes even if the target takes them.
    pub read_only: bool,
    /// Requests each connection runs at once, at most (threads start as one and grow
    /// while requests wait on the device).
    pub workers_per_connection: usize,
    /// A client must finish the handshake within this time, or it is dropped.
    pub handshake_timeout: Duration,
    /// A client that sends nothing for this long is dropped (None: never, as a
    /// block device's client may rightly sit idle for hours).
    pub idle_timeout: Option<Duration>,
    /// A reply the client does not take within this time ends the connection: a
    /// client that never reads holds a thread and one piece of a reply at most
    /// this long.
    pub send_timeout: Duration,
    /// Whether clients may or must start TLS (NBD_OPT_STARTTLS), with what
    /// credentials.
    pub tls: crate::Tls,
}

impl Default for ExportOptions {
    fn default() -> Self {
        ExportOptions {
            name: String::new(),
            description: "hscm durable hybrid RAM volume".into(),
            read_only: false,
            workers_per_connection: 16,
            handshake_timeout: Duration::from_secs(10),
            idle_timeout: None,
            send_timeout: Duration::from_secs(30),
            tls: crate::Tls::off(),
        }
    }
}

/// Counters over the server's life.
#[derive(Debug, Default)]
pub struct Stats {
    pub connections: AtomicU64,
    /// Connections being served now.
    pub connected: AtomicU64,
    pub commands: AtomicU64,
    /// Commands answered with an error.
    pub errors: AtomicU64,
    /// Connections dropped for breaking the protocol.
    pub protocol_errors: AtomicU64,
}

/// Writes larger than this are refused and, since their payload cannot be skipped
/// cheaply, end the connection.
const MAX_PAYLOAD_SKIP: u32 = 64 << 20;
/// The largest range one BLOCK_STATUS request describes (the client asks again).
const MAX_STATUS_RANGE: u64 = 64 << 20;
/// A READ's reply goes out in pieces of this many bytes (see `answer_read`).
const READ_PIECE: usize = 256 << 10;
/// The id of the one metadata context, base:allocation.
const BASE_ALLOCATION_ID: u32 = 1;

/// One export of one target.
pub struct Server {
    target: Arc<dyn BlockTarget>,
    export: ExportOptions,
    caps: Capabilities,
    stats: Arc<Stats>,
}

/// One connection in its transmission phase, shared by the threads serving it.
struct Connection<'a> {
    /// Whole replies go out under this lock.
    writer: Mutex<Stream>,
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

/// What the handshake agreed on.
#[derive(Default, Clone, Copy)]
struct Session {
    structured: bool,
    allocation_context: bool,
}

enum Handshake {
    /// Go on to transmission.
    Transmit(Session),
    /// The client ended the handshake (ABORT, or an export it did not like).
    Done,
}

impl Server {
    pub fn new(target: Arc<dyn BlockTarget>, export: ExportOptions) -> Server {
        let caps = target.capabilities();
        Server {
            target,
            export,
            caps,
            stats: Arc::new(Stats::default()),
        }
    }

    pub fn stats(&self) -> Arc<Stats> {
        self.stats.clone()
    }

    fn read_only(&self) -> bool {
        self.export.read_only || self.caps.read_only
    }

    /// The transmission flags this export advertises.
    pub fn transmission_flags(&self) -> u16 {
        let c = &self.caps;
        let mut f = proto::TX_HAS_FLAGS | proto::TX_SEND_FLUSH | proto::TX_SEND_DF;
        f |= proto::TX_SEND_CACHE;
        if self.read_only() {
            f |= proto::TX_READ_ONLY;
        } else {
            if c.fua != FuaSupport::None {
                f |= proto::TX_SEND_FUA;
            }
            if c.trim {
                f |= proto::TX_SEND_TRIM;
            }
            if c.zero {
                f |= proto::TX_SEND_WRITE_ZEROES;
                if c.fast_zero {
                    f |= proto::TX_SEND_FAST_ZERO;
                }
            }
        }
        if c.multi_conn {
            f |= proto::TX_CAN_MULTI_CONN;
        }
        f
    }

    fn name_matches(&self, name: &str) -> bool {
        name.is_empty() || name == self.export.name
    }

    /// Serves one connection until the client leaves, breaks the protocol, or `stop`
    /// is set (requests already read are answered first).
    pub fn serve(&self, stream: Stream, stop: &AtomicBool) -> Result<(), Error> {
        self.stats.connections.fetch_add(1, Ordering::Relaxed);
        self.stats.connected.fetch_add(1, Ordering::Relaxed);
        let result = self.serve_connection(stream, stop);
        self.stats.connected.fetch_sub(1, Ordering::Relaxed);
        result
    }

    fn serve_connection(&self, mut stream: Stream, stop: &AtomicBool) -> Result<(), Error> {
        let send = limit(self.export.send_timeout);
        stream.set_timeouts(limit(self.export.handshake_timeout), send)?;
        let result = match self.handshake(&mut stream) {
            Ok(Handshake::Transmit(session)) => {
                stream.set_timeouts(self.export.idle_timeout.and_then(limit), send)?;
                self.transmit(stream, session, stop)
            }
            Ok(Handshake::Done) => Ok(()),
            Err(e) => Err(e),
        };
        if matches!(result, Err(Error::Protocol(_))) {
            self.stats.protocol_errors.fetch_add(1, Ordering::Relaxed);
        }
        result
    }

    fn handshake(&self, s: &mut Stream) -> Result<Handshake, Error> {
        let mut hello = Vec::with_capacity(18);
        hello.extend_from_slice(&proto::NBD_MAGIC.to_be_bytes());
        hello.extend_from_slice(&proto::IHAVEOPT.to_be_bytes());
        hello
            .extend_from_slice(&(proto::FLAG_FIXED_NEWSTYLE | proto::FLAG_NO_ZEROES).to_be_bytes());
        s.write_all(&hello)?;
        let client_flags = read_u32(s)?;
        let known = proto::CLIENT_FIXED_NEWSTYLE | proto::CLIENT_NO_ZEROES;
        if client_flags & !known != 0 {
            return Err(Error::Protocol(format!(
                "unknown client flags {client_flags:#x}"
            )));
        }
        let no_zeroes = client_flags & proto::CLIENT_NO_ZEROES != 0;
        let mut session = Session::default();
        let mut tls_started = false;
        let tls_mode = self.export.tls.mode;
        loop {
            let magic = read_u64(s)?;
            if magic != proto::IHAVEOPT {
                return Err(Error::Proto(proto::ProtoError::OptionMagic(magic)));
            }
            let option = read_u32(s)?;
            let len = read_u32(s)?;
            if len > proto::MAX_OPTION_LEN {
                skip(s, u64::from(len))?;
                reply(s, option, proto::REP_ERR_TOO_BIG, b"option too large")?;
                continue;
            }
            let mut data = vec![0u8; len as usize];
            s.read_exact(&mut data)?;
            let plaintext_refused = tls_mode == crate::TlsMode::Require
                && !tls_started
                && !matches!(option, proto::OPT_STARTTLS | proto::OPT_ABORT);
            if plaintext_refused {
                if option == proto::OPT_EXPORT_NAME {
                    // It has no error reply: hang up.
                    return Ok(Handshake::Done);
                }
                reply(
                    s,
                    option,
                    proto::REP_ERR_TLS_REQD,
                    b"this server requires TLS",
                )?;
                continue;
            }
            match option {
                proto::OPT_STARTTLS => {
                    if tls_mode == crate::TlsMode::Off {
                        reply(
                            s,
                            option,
                            proto::REP_ERR_UNSUP,
                            b"TLS is off on this server",
                        )?;
                    } else if tls_started || !data.is_empty() {
                        let msg: &[u8] = if tls_started {
                            b"TLS is already on"
                        } else {
                            b"STARTTLS takes no data"
                        };
                        reply(s, option, proto::REP_ERR_INVALID, msg)?;
                    } else {
                        reply(s, option, proto::REP_ACK, &[])?;
                        let raw = s.try_clone()?;
                        *s = self.export.tls.start(raw, self.export.send_timeout)?;
                        // The handshake's time limit holds past STARTTLS too.
                        s.set_timeouts(
                            limit(self.export.handshake_timeout),
                            limit(self.export.send_timeout),
                        )?;
                        tls_started = true;
                        // Nothing agreed in plaintext carries over (the spec's rule).
                        session = Session::default();
                    }
                }
                proto::OPT_EXPORT_NAME => {
                    let name = String::from_utf8_lossy(&data);
                    if !self.name_matches(&name) {
                        // The old-style option has no error reply: hang up.
                        return Ok(Handshake::Done);
                    }
                    let mut v = Vec::with_capacity(134);
                    v.extend_from_slice(&self.target.size().to_be_bytes());
                    v.extend_from_slice(&self.transmission_flags().to_be_bytes());
                    if !no_zeroes {
                        v.extend_from_slice(&[0u8; 124]);
                    }
                    s.write_all(&v)?;
                    return Ok(Handshake::Transmit(session));
                }
                proto::OPT_ABORT => {
                    // The client may already be gone; an ACK it never reads is fine.
                    let _ = reply(s, option, proto::REP_ACK, &[]);
                    return Ok(Handshake::Done);
                }
                proto::OPT_LIST => {
                    if !data.is_empty() {
                        reply(s, option, proto::REP_ERR_INVALID, b"LIST takes no data")?;
                        continue;
                    }
                    let mut v = Vec::new();
                    v.extend_from_slice(&(self.export.name.len() as u32).to_be_bytes());
                    v.extend_from_slice(self.export.name.as_bytes());
                    v.extend_from_slice(self.export.description.as_bytes());
                    reply(s, option, proto::REP_SERVER, &v)?;
                    reply(s, option, proto::REP_ACK, &[])?;
                }
                proto::OPT_INFO | proto::OPT_GO => {
                    let parsed = proto::parse_info_request(&data);
                    let Some(req) = self.accept_option(s, option, parsed, |r| &r.name)? else {
                        continue;
                    };
                    self.send_info(s, option, &req.requests)?;
                    reply(s, option, proto::REP_ACK, &[])?;
                    if option == proto::OPT_GO {
                        return Ok(Handshake::Transmit(session));
                    }
                }
                proto::OPT_STRUCTURED_REPLY => {
                    if !data.is_empty() {
                        reply(s, option, proto::REP_ERR_INVALID, b"takes no data")?;
                    } else {
                        session.structured = true;
                        reply(s, option, proto::REP_ACK, &[])?;
                    }
                }
                proto::OPT_LIST_META_CONTEXT | proto::OPT_SET_META_CONTEXT => {
                    let set = option == proto::OPT_SET_META_CONTEXT;
                    if !session.structured {
                        let msg = b"negotiate structured replies first";
                        reply(s, option, proto::REP_ERR_INVALID, msg)?;
                        continue;
                    }
                    let parsed = proto::parse_meta_request(&data);
                    let Some(req) = self.accept_option(s, option, parsed, |r| &r.export)? else {
                        continue;
                    };
                    // LIST with no queries lists every context; SET with none selects none.
                    let selected = req.queries.iter().any(|q| {
                        if set {
                            q == proto::BASE_ALLOCATION
                        } else {
                            proto::selects_base_allocation(q)
                        }
                    }) || (!set && req.queries.is_empty());
                    if set {
                        session.allocation_context = selected;
                    }
                    if selected {
                        let mut v = BASE_ALLOCATION_ID.to_be_bytes().to_vec();
                        v.extend_from_slice(proto::BASE_ALLOCATION.as_bytes());
                        reply(s, option, proto::REP_META_CONTEXT, &v)?;
                    }
                    reply(s, option, proto::REP_ACK, &[])?;
                }
                _ => {
                    let msg = format!("option {option} is not supported");
                    reply(s, option, proto::REP_ERR_UNSUP, msg.as_bytes())?;
                }
            }
        }
    }

    /// An option's decoded payload if it is well formed and names this export; else
    /// the option's error reply is sent and the handshake goes on (None).
    fn accept_option<T>(
        &self,
        s: &mut Stream,
        option: u32,
        parsed: Result<T, proto::ProtoError>,
        export_of: impl Fn(&T) -> &String,
    ) -> Result<Option<T>, Error> {
        match parsed {
            Err(e) => {
                reply(s, option, proto::REP_ERR_INVALID, e.to_string().as_bytes())?;
                Ok(None)
            }
            Ok(r) if !self.name_matches(export_of(&r)) => {
                let msg = format!("no export named {:?}", export_of(&r));
                reply(s, option, proto::REP_ERR_UNKNOWN, msg.as_bytes())?;
                Ok(None)
            }
            Ok(r) => Ok(Some(r)),
        }
    }

    fn send_info(&self, s: &mut Stream, option: u32, asked: &[u16]) -> Result<(), Error> {
        let mut export = proto::INFO_EXPORT.to_be_bytes().to_vec();
        export.extend_from_slice(&self.target.size().to_be_bytes());
        export.extend_from_slice(&self.transmission_flags().to_be_bytes());
        reply(s, option, proto::REP_INFO, &export)?;
        for &info in asked {
            let mut v = info.to_be_bytes().to_vec();
            match info {
                proto::INFO_NAME => v.extend_from_slice(self.export.name.as_bytes()),
                proto::INFO_DESCRIPTION => v.extend_from_slice(self.export.description.as_bytes()),
                proto::INFO_BLOCK_SIZE => {
                    let b = self.caps.block_sizes;
                    for n in [b.minimum, b.preferred, b.maximum] {
                        v.extend_from_slice(&n.to_be_bytes());
                    }
                }
                // INFO_EXPORT went first; unknown ones are ignored, as the spec says.
                _ => continue,
            }
            reply(s, option, proto::REP_INFO, &v)?;
        }
        Ok(())
    }

    fn transmit(&self, stream: Stream, session: Session, stop: &AtomicBool) -> Result<(), Error> {
        let conn = Connection {
            writer: Mutex::new(stream.try_clone()?),
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
                self.answer_read(&conn.writer, &req, conn.session)
            } else {
                send(&conn.writer, &self.execute(&req, &payload, conn.session))
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

    /// Runs one request and returns its whole reply.
    fn execute(&self, req: &Request, payload: &[u8], session: Session) -> Vec<u8> {
        let result = self.run(req, payload, session);
        if let Err((errno, _)) = &result {
            self.stats.errors.fetch_add(1, Ordering::Relaxed);
            tracing::debug!(
                "{} at {} +{}: error {errno}",
                proto::command_name(req.kind),
                req.offset,
                req.len
            );
        }
        match result {
            Ok(Reply::Status(descriptors)) => {
                let mut body = BASE_ALLOCATION_ID.to_be_bytes().to_vec();
                for (len, flags) in descriptors {
                    body.extend_from_slice(&len.to_be_bytes());
                    body.extend_from_slice(&flags.to_be_bytes());
                }
                let mut v = proto::chunk_header(
                    proto::REPLY_FLAG_DONE,
                    proto::REPLY_TYPE_BLOCK_STATUS,
                    req.cookie,
                    body.len() as u32,
                )
                .to_vec();
                v.extend_from_slice(&body);
                v
            }
            Ok(Reply::Done) => proto::simple_reply(0, req.cookie).to_vec(),
            Err((errno, why)) => error_reply(req, session, errno, &why),
        }
    }

    /// Answers a READ a piece at a time, under the connection's writer lock: a
    /// reply of up to the maximum block size (32 MiB) never sits whole in memory, so
    /// a client that stops reading its replies holds at most one piece here. The
    /// first piece is read before the header goes out, so an error found there is
    /// answered as an error; one found later (the header already said success)
    /// ends the connection. False once the client is gone.
    fn answer_read(&self, writer: &Mutex<Stream>, req: &Request, session: Session) -> bool {
        if let Err((errno, why)) = self.check(req, session) {
            self.stats.errors.fetch_add(1, Ordering::Relaxed);
            return send(writer, &error_reply(req, session, errno, &why));
        }
        let Ok(mut w) = writer.lock() else {
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
                    return send(writer, &reply);
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
                if w.write_all(&header).is_err() {
                    w.shutdown();
                    return false;
                }
            }
            if w.write_all(&piece).is_err() {
                w.shutdown();
                return false;
            }
            at += n;
        }
        true
    }

    /// What every command is checked for before it runs: known flags, the export's
    /// mode, the range, and for READ its length.
    fn check(&self, req: &Request, session: Session) -> Result<(), (u32, String)> {
        let invalid = |why: String| Err((proto::EINVAL, why));
        let size = self.target.size();
        let len = u64::from(req.len);
        let writes = matches!(
            req.kind,
            proto::CMD_WRITE | proto::CMD_TRIM | proto::CMD_WRITE_ZEROES
        );
        let known_flags = proto::CMD_FLAG_FUA
            | proto::CMD_FLAG_NO_HOLE
            | proto::CMD_FLAG_DF
            | proto::CMD_FLAG_REQ_ONE
            | proto::CMD_FLAG_FAST_ZERO;
        if req.flags & !known_flags != 0 {
            return invalid(format!("unknown command flags {:#x}", req.flags));
        }
        if writes && self.read_only() {
            return Err((proto::EPERM, "the export is read-only".into()));
        }
        let in_range = req.offset.checked_add(len).is_some_and(|end| end <= size);
        let needs_range = !matches!(req.kind, proto::CMD_FLUSH);
        if needs_range && !in_range {
            let errno = if req.kind == proto::CMD_WRITE {
                proto::ENOSPC
            } else {
                proto::EINVAL
            };
            return Err((
                errno,
                format!("[{}, +{}) is past the end ({size})", req.offset, len),
            ));
        }
        let max = self.caps.block_sizes.maximum;
        if req.kind == proto::CMD_READ && req.len > max {
            let errno = if session.structured {
                proto::EOVERFLOW
            } else {
                proto::EINVAL
            };
            return Err((
                errno,
                format!("a read of {} bytes (at most {max})", req.len),
            ));
        }
        Ok(())
    }

    /// Runs one command other than READ ([`Self::answer_read`] streams those).
    fn run(&self, req: &Request, payload: &[u8], session: Session) -> Result<Reply, (u32, String)> {
        self.check(req, session)?;
        let invalid = |why: String| Err((proto::EINVAL, why));
        let len = u64::from(req.len);
        let max = self.caps.block_sizes.maximum;
        let fua = req.flags & proto::CMD_FLAG_FUA != 0;
        let wflags = if fua {
            WriteFlags::FUA
        } else {
            WriteFlags::NONE
        };
        let target_err = |e: hscm_block::Error| (errno_of(&e), e.to_string());
        match req.kind {
            proto::CMD_WRITE => {
                if req.len > max {
                    return invalid(format!("a write of {} bytes (at most {max})", req.len));
                }
                self.target
                    .write_at(req.offset, payload, wflags)
                    .map_err(target_err)?;
                Ok(Reply::Done)
            }
            proto::CMD_FLUSH => {
                self.target.flush().map_err(target_err)?;
                Ok(Reply::Done)
            }
            proto::CMD_TRIM if self.caps.trim => {
                self.target
                    .discard(req.offset, len, wflags)
                    .map_err(target_err)?;
                Ok(Reply::Done)
            }
            proto::CMD_WRITE_ZEROES if self.caps.zero => {
                let fast_only = req.flags & proto::CMD_FLAG_FAST_ZERO != 0;
                if fast_only && !self.caps.fast_zero {
                    return Err((proto::ENOTSUP, "zeroing is not fast here".into()));
                }
                let flags = ZeroFlags {
                    fua,
                    may_trim: req.flags & proto::CMD_FLAG_NO_HOLE == 0,
                    fast_only,
                };
                self.target
                    .write_zeroes(req.offset, len, flags)
                    .map_err(target_err)?;
                Ok(Reply::Done)
            }
            proto::CMD_CACHE => {
                // Reading pulls cold chunks into RAM ahead of the loader; the bytes
                // themselves are not needed.
                self.target
                    .read_with(req.offset, req.len as usize, &mut |_, _| {})
                    .map_err(target_err)?;
                Ok(Reply::Done)
            }
            proto::CMD_BLOCK_STATUS => {
                if !session.allocation_context {
                    return invalid("no metadata context was negotiated".into());
                }
                if len == 0 {
                    return invalid("BLOCK_STATUS of zero bytes".into());
                }
                let one = req.flags & proto::CMD_FLAG_REQ_ONE != 0;
                self.block_status(req.offset, len.min(MAX_STATUS_RANGE), one)
                    .map(Reply::Status)
                    .map_err(target_err)
            }
            other => invalid(format!("command {other} is not supported")),
        }
    }

    /// base:allocation over `[offset, offset + len)`: the target's runs of data and of
    /// zeroes (`BlockTarget::extents`; the volume keeps no holes, so a zeroed or trimmed
    /// range reads back as zeroes and is reported as STATE_ZERO). `len` is at most
    /// `MAX_STATUS_RANGE`, so every run's length fits the reply's 32 bits.
    fn block_status(
        &self,
        offset: u64,
        len: u64,
        only_one: bool,
    ) -> hscm_block::Result<Vec<(u32, u32)>> {
        let runs = self.target.extents(offset, len, only_one)?;
        let take = if only_one { 1 } else { runs.len() };
        Ok(runs
            .iter()
            .take(take)
            .map(|r| {
                let flags = match r.kind {
                    hscm_block::ExtentKind::Zero => proto::STATE_ZERO,
                    hscm_block::ExtentKind::Data => 0,
                };
                (r.len as u32, flags)
            })
            .collect())
    }
}

enum Reply {
    Done,
    Status(Vec<(u32, u32)>),
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

/// The NBD error for a target's failure.
fn errno_of(e: &hscm_block::Error) -> u32 {
    match e.errno() {
        30 | 1 => proto::EPERM, // EROFS, EPERM
        28 => proto::ENOSPC,
        12 => proto::ENOMEM,
        22 => proto::EINVAL,
        95 => proto::ENOTSUP,
        _ => proto::EIO,
    }
}

/// A socket timeout from a limit: zero means none (a socket refuses a zero timeout).
fn limit(d: Duration) -> Option<Duration> {
    (!d.is_zero()).then_some(d)
}

/// The reply to a command that failed: a structured client gets a READ's or
/// BLOCK_STATUS's error as a chunk with the reason; anything else a simple reply.
fn error_reply(req: &Request, session: Session, errno: u32, why: &str) -> Vec<u8> {
    match req.kind {
        proto::CMD_READ | proto::CMD_BLOCK_STATUS if session.structured => {
            proto::error_chunk(req.cookie, errno, why)
        }
        _ => proto::simple_reply(errno, req.cookie).to_vec(),
    }
}

/// Writes one whole reply; false once the client is gone (then reading stops too).
fn send(writer: &Mutex<Stream>, reply: &[u8]) -> bool {
    let Ok(mut w) = writer.lock() else {
        return false;
    };
    if w.write_all(reply).is_err() {
        w.shutdown();
        return false;
    }
    true
}

fn reply(s: &mut Stream, option: u32, kind: u32, data: &[u8]) -> Result<(), Error> {
    s.write_all(&proto::option_reply(option, kind, data))?;
    Ok(())
}

fn read_u32(s: &mut Stream) -> io::Result<u32> {
    let mut b = [0u8; 4];
    s.read_exact(&mut b)?;
    Ok(u32::from_be_bytes(b))
}

fn read_u64(s: &mut Stream) -> io::Result<u64> {
    let mut b = [0u8; 8];
    s.read_exact(&mut b)?;
    Ok(u64::from_be_bytes(b))
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
fn skip(s: &mut impl Read, n: u64) -> io::Result<()> {
    let copied = io::copy(&mut Read::by_ref(s).take(n), &mut io::sink())?;
    if copied < n {
        return Err(io::Error::new(
            io::ErrorKind::UnexpectedEof,
            "the client left mid-payload",
        ));
    }
    Ok(())
}

//! One NBD connection from the client side: the fixed-newstyle handshake (STARTTLS,
//! structured replies, NBD_OPT_GO with the block-size constraints, NBD_OPT_EXPORT_NAME
//! for servers without GO) and the transmission phase: pipelined requests, simple and
//! structured replies matched to their requests by cookie.

use std::io::{self, Read, Write};
use std::time::Instant;

use super::stream::{Stream, Timed, TlsClient};
use super::uri::NbdUri;
use super::wire::*;

/// What the server said about the export.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Export {
    pub size: u64,
    pub flags: u16,
    pub min_block: u32,
    pub preferred_block: u32,
    pub max_block: u32,
}

impl Export {
    pub fn has(&self, flag: u16) -> bool {
        self.flags & flag != 0
    }
}

/// Why a connection could not be made: `permanent` when trying again cannot help
/// (no such export, TLS refused, a server that speaks another protocol).
#[derive(Debug)]
pub(crate) struct ConnectError {
    pub permanent: bool,
    pub error: io::Error,
}

impl ConnectError {
    pub fn permanent(msg: String) -> ConnectError {
        ConnectError {
            permanent: true,
            error: io::Error::new(io::ErrorKind::InvalidData, msg),
        }
    }
}

impl From<io::Error> for ConnectError {
    fn from(error: io::Error) -> ConnectError {
        ConnectError {
            permanent: false,
            error,
        }
    }
}

/// Option replies longer than this are refused (error strings and export info are
/// short; a server sending more is not one to trust with our memory).
const MAX_OPTION_REPLY: u32 = 64 << 10;
/// Non-data chunks (errors, chunk types we did not ask for) longer than this end the
/// connection.
const MAX_CHUNK_EXTRA: u32 = 64 << 10;

pub(crate) struct Session {
    stream: Stream,
    structured: bool,
}

fn be16(b: &[u8]) -> u16 {
    u16::from_be_bytes([b[0], b[1]])
}
fn be32(b: &[u8]) -> u32 {
    u32::from_be_bytes([b[0], b[1], b[2], b[3]])
}
fn be64(b: &[u8]) -> u64 {
    u64::from_be_bytes(b[..8].try_into().expect("8 bytes"))
}

fn protocol(msg: impl Into<String>) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, msg.into())
}

impl Session {
    /// Connects and negotiates up to the transmission phase.
    pub fn connect(
        uri: &NbdUri,
        tls: Option<&TlsClient>,
        deadline: Instant,
    ) -> Result<(Session, Export), ConnectError> {
        let mut stream = Stream::Plain(Timed::connect(uri, deadline)?);
        let mut hello = [0u8; 18];
        stream.read_exact(&mut hello)?;
        if be64(&hello) != NBD_MAGIC {
            return Err(ConnectError::permanent(format!(
                "{uri}: the server does not speak NBD (no NBDMAGIC in its greeting)"
            )));
        }
        match be64(&hello[8..]) {
            IHAVEOPT => {}
            OLDSTYLE_MAGIC => {
                return Err(ConnectError::permanent(format!(
                    "{uri}: the server speaks oldstyle NBD, which names no export and has no TLS; hscm speaks fixed newstyle"
                )))
            }
            other => {
                return Err(ConnectError::permanent(format!(
                    "{uri}: unknown handshake magic {other:#x}"
                )))
            }
        }
        let server_flags = be16(&hello[16..]);
        if server_flags & FLAG_FIXED_NEWSTYLE == 0 {
            return Err(ConnectError::permanent(format!(
                "{uri}: the server does not offer fixed newstyle negotiation"
            )));
        }
        let no_zeroes = server_flags & FLAG_NO_ZEROES != 0;
        let client_flags = CLIENT_FIXED_NEWSTYLE | if no_zeroes { CLIENT_NO_ZEROES } else { 0 };
        stream.write_all(&client_flags.to_be_bytes())?;
        let mut s = Session {
            stream,
            structured: false,
        };
        if let Some(config) = tls {
            let (kind, data) = s.option(OPT_STARTTLS, &[])?;
            if kind != REP_ACK {
                return Err(ConnectError::permanent(format!(
                    "{uri}: the server refused TLS ({})",
                    reply_name(kind, &data)
                )));
            }
            let plain = std::mem::replace(&mut s.stream, Stream::Taken);
            s.stream = plain.start_tls(config, &uri.server_name()).map_err(|e| {
                let permanent = e.kind() != io::ErrorKind::TimedOut
                    && e.kind() != io::ErrorKind::ConnectionReset
                    && e.kind() != io::ErrorKind::UnexpectedEof;
                ConnectError {
                    permanent,
                    error: io::Error::new(e.kind(), format!("{uri}: TLS handshake: {e}")),
                }
            })?;
        }
        let (kind, _) = s.option(OPT_STRUCTURED_REPLY, &[])?;
        s.structured = kind == REP_ACK;
        let export = s.go(uri, no_zeroes)?;
        Ok((s, export))
    }

    fn option(&mut self, option: u32, data: &[u8]) -> io::Result<(u32, Vec<u8>)> {
        self.send_option(option, data)?;
        self.option_reply(option)
    }

    fn send_option(&mut self, option: u32, data: &[u8]) -> io::Result<()> {
        let mut msg = Vec::with_capacity(16 + data.len());
        msg.extend_from_slice(&IHAVEOPT.to_be_bytes());
        msg.extend_from_slice(&option.to_be_bytes());
        msg.extend_from_slice(&(data.len() as u32).to_be_bytes());
        msg.extend_from_slice(data);
        self.stream.write_all(&msg)?;
        self.stream.flush()
    }

    fn option_reply(&mut self, option: u32) -> io::Result<(u32, Vec<u8>)> {
        let mut head = [0u8; 20];
        self.stream.read_exact(&mut head)?;
        if be64(&head) != REPLY_MAGIC || be32(&head[8..]) != option {
            return Err(protocol(format!(
                "bad reply to option {option}: magic {:#x}, option {}",
                be64(&head),
                be32(&head[8..])
            )));
        }
        let kind = be32(&head[12..]);
        let len = be32(&head[16..]);
        if len > MAX_OPTION_REPLY {
            return Err(protocol(format!("an option reply of {len} bytes")));
        }
        let mut data = vec![0u8; len as usize];
        self.stream.read_exact(&mut data)?;
        Ok((kind, data))
    }

    /// NBD_OPT_GO asking for the block-size constraints; NBD_OPT_EXPORT_NAME where
    /// the server does not know GO.
    fn go(&mut self, uri: &NbdUri, no_zeroes: bool) -> Result<Export, ConnectError> {
        let name = uri.export.as_bytes();
        let mut data = Vec::with_capacity(8 + name.len());
        data.extend_from_slice(&(name.len() as u32).to_be_bytes());
        data.extend_from_slice(name);
        data.extend_from_slice(&1u16.to_be_bytes());
        data.extend_from_slice(&INFO_BLOCK_SIZE.to_be_bytes());
        self.send_option(OPT_GO, &data)?;
        let mut export: Option<Export> = None;
        let mut blocks = (1u32, 4096u32, 32u32 << 20);
        loop {
            let (kind, data) = self.option_reply(OPT_GO)?;
            match kind {
                REP_INFO if data.len() >= 2 => match be16(&data) {
                    INFO_EXPORT if data.len() == 12 => {
                        export = Some(Export {
                            size: be64(&data[2..]),
                            flags: be16(&data[10..]),
                            min_block: 1,
                            preferred_block: 4096,
                            max_block: 32 << 20,
                        })
                    }
                    INFO_BLOCK_SIZE if data.len() == 14 => {
                        blocks = (be32(&data[2..]), be32(&data[6..]), be32(&data[10..]))
                    }
                    _ => {}
                },
                REP_ACK => break,
                REP_ERR_UNSUP => return self.export_name(uri, no_zeroes),
                REP_ERR_UNKNOWN => {
                    return Err(ConnectError::permanent(format!(
                        "{uri}: the server has no export named {:?}{}",
                        uri.export,
                        server_says(&data)
                    )))
                }
                REP_ERR_TLS_REQD => {
                    return Err(ConnectError::permanent(format!(
                        "{uri}: the server requires TLS: use nbds:// with ?tls-certificates=DIR{}",
                        server_says(&data)
                    )))
                }
                other => {
                    // A server that is shutting down may accept us again later.
                    let e = format!(
                        "{uri}: the server refused the export ({}",
                        reply_name(other, &data)
                    );
                    return Err(if other == REP_ERR_SHUTDOWN {
                        ConnectError::from(io::Error::new(
                            io::ErrorKind::ConnectionRefused,
                            e + ")",
                        ))
                    } else {
                        ConnectError::permanent(e + ")")
                    });
                }
            }
        }
        let mut export = export.ok_or_else(|| {
            ConnectError::permanent(format!(
                "{uri}: the server accepted the export without saying its size"
            ))
        })?;
        (export.min_block, export.preferred_block, export.max_block) = blocks;
        Ok(export)
    }

    fn export_name(&mut self, uri: &NbdUri, no_zeroes: bool) -> Result<Export, ConnectError> {
        let mut msg = Vec::new();
        msg.extend_from_slice(&IHAVEOPT.to_be_bytes());
        msg.extend_from_slice(&OPT_EXPORT_NAME.to_be_bytes());
        msg.extend_from_slice(&(uri.export.len() as u32).to_be_bytes());
        msg.extend_from_slice(uri.export.as_bytes());
        self.stream.write_all(&msg)?;
        self.stream.flush()?;
        let mut reply = vec![0u8; if no_zeroes { 10 } else { 134 }];
        self.stream.read_exact(&mut reply).map_err(|e| {
            if e.kind() == io::ErrorKind::UnexpectedEof {
                ConnectError::permanent(format!(
                    "{uri}: the server closed the connection: it has no export named {:?}",
                    uri.export
                ))
            } else {
                e.into()
            }
        })?;
        Ok(Export {
            size: be64(&reply),
            flags: be16(&reply[8..]),
            min_block: 1,
            preferred_block: 4096,
            max_block: 32 << 20,
        })
    }

    pub fn deadline(&mut self, deadline: Instant) {
        if let Some(t) = self.stream.timed() {
            t.deadline = deadline;
        }
    }

    /// Whether the next reply is already here, so reading it waits for nothing.
    pub fn reply_at_hand(&self) -> bool {
        self.stream.has_buffered()
    }

    /// Sends one request (and a write's bytes).
    pub fn send(&mut self, op: &Op<'_>, cookie: u64) -> io::Result<()> {
        let mut head = [0u8; REQUEST_LEN];
        head[0..4].copy_from_slice(&REQUEST_MAGIC.to_be_bytes());
        head[4..6].copy_from_slice(&op.flags.to_be_bytes());
        head[6..8].copy_from_slice(&op.kind.to_be_bytes());
        head[8..16].copy_from_slice(&cookie.to_be_bytes());
        head[16..24].copy_from_slice(&op.offset.to_be_bytes());
        head[24..28].copy_from_slice(&op.len.to_be_bytes());
        match op.data.write_bytes(op.kind) {
            Some(bytes) if bytes.len() <= 64 << 10 => {
                // One write, so small requests leave in one packet.
                let mut msg = Vec::with_capacity(REQUEST_LEN + bytes.len());
                msg.extend_from_slice(&head);
                msg.extend_from_slice(bytes);
                self.stream.write_all(&msg)?;
            }
            Some(bytes) => {
                self.stream.write_all(&head)?;
                self.stream.write_all(bytes)?;
            }
            None => self.stream.write_all(&head)?,
        }
        self.stream.flush()
    }

    /// Reads the head of one reply or structured chunk: whose it is, and what follows.
    pub fn receive_head(&mut self) -> io::Result<Head> {
        let mut magic = [0u8; 4];
        self.stream.read_exact(&mut magic)?;
        match be32(&magic) {
            SIMPLE_REPLY_MAGIC => {
                let mut rest = [0u8; 12];
                self.stream.read_exact(&mut rest)?;
                Ok(Head::Simple {
                    error: be32(&rest),
                    cookie: be64(&rest[4..]),
                })
            }
            STRUCTURED_REPLY_MAGIC if self.structured => {
                let mut head = [0u8; 16];
                self.stream.read_exact(&mut head)?;
                Ok(Head::Chunk {
                    flags: be16(&head),
                    kind: be16(&head[2..]),
                    cookie: be64(&head[4..]),
                    len: be32(&head[12..]),
                })
            }
            other => Err(protocol(format!("bad reply magic {other:#010x}"))),
        }
    }

    /// Reads the rest of the reply `head` began into `op`, the request it answers.
    pub fn apply(&mut self, head: Head, op: &mut Op<'_>) -> io::Result<()> {
        let (flags, kind, len) = match head {
            Head::Simple { error, .. } => {
                if error != 0 {
                    op.error.get_or_insert((error, String::new()));
                } else if let Some(buf) = op.data.read_buf(op.kind) {
                    if self.structured {
                        return Err(protocol(
                            "a simple reply to a read after structured replies were agreed",
                        ));
                    }
                    self.stream.read_exact(buf)?;
                }
                op.done = true;
                return Ok(());
            }
            Head::Chunk {
                flags, kind, len, ..
            } => (flags, kind, len),
        };
        match kind {
            REPLY_TYPE_NONE if len == 0 => {}
            REPLY_TYPE_OFFSET_DATA | REPLY_TYPE_OFFSET_HOLE if len >= 8 => {
                let (op_offset, op_kind) = (op.offset, op.kind);
                let Some(buf) = op.data.read_buf(op_kind) else {
                    return Err(protocol("a data chunk for a request that is not a read"));
                };
                let mut at = [0u8; 8];
                self.stream.read_exact(&mut at)?;
                let n = if kind == REPLY_TYPE_OFFSET_DATA {
                    len as u64 - 8
                } else {
                    let mut hole = [0u8; 4];
                    if len != 12 {
                        return Err(protocol("a hole chunk that is not 12 bytes"));
                    }
                    self.stream.read_exact(&mut hole)?;
                    be32(&hole) as u64
                };
                let start = be64(&at)
                    .checked_sub(op_offset)
                    .filter(|s| s.checked_add(n).is_some_and(|e| e <= buf.len() as u64))
                    .ok_or_else(|| protocol("a read chunk outside the range asked for"))?
                    as usize;
                let range = start..start + n as usize;
                if kind == REPLY_TYPE_OFFSET_DATA {
                    self.stream.read_exact(&mut buf[range])?;
                } else {
                    buf[range].fill(0);
                }
                op.covered += n;
            }
            REPLY_TYPE_ERROR | REPLY_TYPE_ERROR_OFFSET if (6..=MAX_CHUNK_EXTRA).contains(&len) => {
                let mut body = vec![0u8; len as usize];
                self.stream.read_exact(&mut body)?;
                let msg_len = be16(&body[4..]) as usize;
                let msg = body
                    .get(6..6 + msg_len)
                    .ok_or_else(|| protocol("an error chunk whose message overruns it"))?;
                op.error.get_or_insert((
                    be32(&body).max(1),
                    String::from_utf8_lossy(msg).into_owned(),
                ));
            }
            k if k & (1 << 15) == 0 && len <= MAX_CHUNK_EXTRA => {
                // A chunk type we did not ask for and need not read: skip it.
                let mut skip = vec![0u8; len as usize];
                self.stream.read_exact(&mut skip)?;
            }
            _ => {
                return Err(protocol(format!(
                    "a reply chunk of type {kind} and {len} bytes"
                )))
            }
        }
        if flags & REPLY_FLAG_DONE != 0 {
            if op.error.is_none() {
                let kind = op.kind;
                if let Some(buf) = op.data.read_buf(kind) {
                    if op.covered != buf.len() as u64 {
                        return Err(protocol(format!(
                            "a read of {} bytes answered with {}",
                            buf.len(),
                            op.covered
                        )));
                    }
                }
            }
            op.done = true;
        }
        Ok(())
    }

    /// Tells the server we are leaving (best effort: the connection may be gone).
    pub fn disconnect(mut self) {
        let op = Op::new(CMD_DISC, 0, 0, 0, Data::None);
        let _ = self.send(&op, 0);
        if let Some(t) = self.stream.timed() {
            t.shutdown();
        }
    }
}

fn server_says(data: &[u8]) -> String {
    if data.is_empty() {
        String::new()
    } else {
        format!(" (the server says: {})", String::from_utf8_lossy(data))
    }
}

fn reply_name(kind: u32, data: &[u8]) -> String {
    let name = match kind {
        REP_ERR_UNSUP => "unsupported".into(),
        REP_ERR_POLICY => "refused by policy".into(),
        REP_ERR_INVALID => "invalid".into(),
        REP_ERR_PLATFORM => "not on this platform".into(),
        REP_ERR_TLS_REQD => "TLS required".into(),
        REP_ERR_UNKNOWN => "unknown export".into(),
        REP_ERR_SHUTDOWN => "the server is shutting down".into(),
        REP_ERR_BLOCK_SIZE_REQD => "block sizes required".into(),
        other => format!("reply {other:#x}"),
    };
    name + &server_says(data)
}

/// The head of a reply: a simple reply whole, or a structured chunk's header.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Head {
    Simple {
        error: u32,
        cookie: u64,
    },
    Chunk {
        flags: u16,
        kind: u16,
        cookie: u64,
        len: u32,
    },
}

impl Head {
    pub fn cookie(&self) -> u64 {
        match *self {
            Head::Simple { cookie, .. } | Head::Chunk { cookie, .. } => cookie,
        }
    }
}

/// What a request carries or receives: the caller's buffers, or (for a request
/// handed to a connection another thread drives) a copy of its own.
pub(crate) enum Data<'a> {
    None,
    Read(&'a mut [u8]),
    Write(&'a [u8]),
    /// A read's buffer or a write's bytes, by the request's kind.
    Owned(Vec<u8>),
}

impl Data<'_> {
    /// Where a read's bytes go (None for a request that is not a read).
    pub fn read_buf(&mut self, kind: u16) -> Option<&mut [u8]> {
        match self {
            Data::Read(buf) => Some(buf),
            Data::Owned(v) if kind == CMD_READ => Some(v),
            _ => None,
        }
    }

    /// A write's bytes (None for a request that sends none).
    pub fn write_bytes(&self, kind: u16) -> Option<&[u8]> {
        match self {
            Data::Write(bytes) => Some(bytes),
            Data::Owned(v) if kind != CMD_READ => Some(v),
            _ => None,
        }
    }
}

/// One request of a batch and what its reply said.
pub(crate) struct Op<'a> {
    pub kind: u16,
    pub flags: u16,
    pub offset: u64,
    pub len: u32,
    pub data: Data<'a>,
    pub sent: bool,
    pub done: bool,
    /// Bytes a structured read reply has filled in.
    pub covered: u64,
    /// The server's errno and message.
    pub error: Option<(u32, String)>,
}

impl<'a> Op<'a> {
    pub fn new(kind: u16, flags: u16, offset: u64, len: u32, data: Data<'a>) -> Op<'a> {
        Op {
            kind,
            flags,
            offset,
            len,
            data,
            sent: false,
            done: false,
            covered: 0,
            error: None,
        }
    }

    /// A copy that owns its bytes (a write's) or its buffer (a read's), for a
    /// connection another thread may drive.
    pub fn detached(&self) -> Op<'static> {
        let data = match &self.data {
            Data::None => Data::None,
            Data::Read(buf) => Data::Owned(vec![0; buf.len()]),
            Data::Write(bytes) => Data::Owned(bytes.to_vec()),
            Data::Owned(v) => Data::Owned(v.clone()),
        };
        Op {
            kind: self.kind,
            flags: self.flags,
            offset: self.offset,
            len: self.len,
            data,
            sent: self.sent,
            done: self.done,
            covered: self.covered,
            error: self.error.clone(),
        }
    }

    /// Takes the outcome of `copy`, a [`Self::detached`] copy: a read's bytes into
    /// this request's buffer, and whether and how it was answered.
    pub fn settle(&mut self, mut copy: Op<'static>) {
        let kind = self.kind;
        if copy.done && copy.error.is_none() {
            if let (Some(to), Some(from)) = (self.data.read_buf(kind), copy.data.read_buf(kind)) {
                to.copy_from_slice(from);
            }
        }
        self.sent = copy.sent;
        self.done = copy.done;
        self.covered = copy.covered;
        self.error = copy.error;
    }

    /// Forgets a send whose reply never came (the connection was lost), so the
    /// request goes out again.
    pub fn resend(&mut self) {
        if !self.done {
            self.sent = false;
            self.covered = 0;
            self.error = None;
        }
    }
}

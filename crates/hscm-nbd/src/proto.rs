//! The NBD wire format: the numbers of the protocol (the NBD project's `doc/proto.md`)
//! and the decoding of what a client sends. Everything here is pure (bytes in, values
//! out), so the fuzz target and the property tests drive it without a socket.

pub use hscm_durable::nbd::wire::*;

/// The one metadata context served: allocation, with zeroed ranges reported as such.
pub const BASE_ALLOCATION: &str = "base:allocation";
/// base:allocation status bits.
pub const STATE_HOLE: u32 = 1 << 0;
pub const STATE_ZERO: u32 = 1 << 1;

/// Strings longer than this are refused (the spec's hard limit).
pub const MAX_STRING: usize = 4096;
/// The largest option payload read; more is refused with NBD_REP_ERR_TOO_BIG.
pub const MAX_OPTION_LEN: u32 = 64 << 10;

/// A transmission-phase request header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Request {
    pub flags: u16,
    pub kind: u16,
    pub cookie: u64,
    pub offset: u64,
    pub len: u32,
}

/// What can be wrong with a message a client sent.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ProtoError {
    #[error("bad request magic {0:#010x}")]
    RequestMagic(u32),
    #[error("bad option magic {0:#018x}")]
    OptionMagic(u64),
    #[error("{what}: needs {need} bytes, has {have}")]
    Short {
        what: &'static str,
        need: usize,
        have: usize,
    },
    #[error("{what}: string of {len} bytes (at most {MAX_STRING})")]
    StringTooLong { what: &'static str, len: usize },
    #[error("{what}: not UTF-8 or contains NUL")]
    BadString { what: &'static str },
    #[error("{what}: {extra} bytes left over")]
    Trailing { what: &'static str, extra: usize },
}

pub fn parse_request(b: &[u8; REQUEST_LEN]) -> Result<Request, ProtoError> {
    let magic = u32::from_be_bytes([b[0], b[1], b[2], b[3]]);
    if magic != REQUEST_MAGIC {
        return Err(ProtoError::RequestMagic(magic));
    }
    Ok(Request {
        flags: u16::from_be_bytes([b[4], b[5]]),
        kind: u16::from_be_bytes([b[6], b[7]]),
        cookie: u64::from_be_bytes(b[8..16].try_into().expect("8 bytes")),
        offset: u64::from_be_bytes(b[16..24].try_into().expect("8 bytes")),
        len: u32::from_be_bytes(b[24..28].try_into().expect("4 bytes")),
    })
}

/// A cursor over an option's payload.
pub struct Reader<'a> {
    bytes: &'a [u8],
    what: &'static str,
}

impl<'a> Reader<'a> {
    pub fn new(bytes: &'a [u8], what: &'static str) -> Self {
        Reader { bytes, what }
    }

    fn take(&mut self, n: usize) -> Result<&'a [u8], ProtoError> {
        if self.bytes.len() < n {
            return Err(ProtoError::Short {
                what: self.what,
                need: n,
                have: self.bytes.len(),
            });
        }
        let (head, rest) = self.bytes.split_at(n);
        self.bytes = rest;
        Ok(head)
    }

    pub fn u16(&mut self) -> Result<u16, ProtoError> {
        Ok(u16::from_be_bytes(
            self.take(2)?.try_into().expect("2 bytes"),
        ))
    }

    pub fn u32(&mut self) -> Result<u32, ProtoError> {
        Ok(u32::from_be_bytes(
            self.take(4)?.try_into().expect("4 bytes"),
        ))
    }

    /// A string preceded by its 32-bit length.
    pub fn string(&mut self) -> Result<String, ProtoError> {
        let len = self.u32()? as usize;
        if len > MAX_STRING {
            return Err(ProtoError::StringTooLong {
                what: self.what,
                len,
            });
        }
        let raw = self.take(len)?;
        match std::str::from_utf8(raw) {
            Ok(s) if !s.contains('\0') => Ok(s.to_string()),
            _ => Err(ProtoError::BadString { what: self.what }),
        }
    }

    pub fn finish(self) -> Result<(), ProtoError> {
        if self.bytes.is_empty() {
            Ok(())
        } else {
            Err(ProtoError::Trailing {
                what: self.what,
                extra: self.bytes.len(),
            })
        }
    }
}

/// NBD_OPT_INFO and NBD_OPT_GO: the export's name and the information asked for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InfoRequest {
    pub name: String,
    pub requests: Vec<u16>,
}

pub fn parse_info_request(data: &[u8]) -> Result<InfoRequest, ProtoError> {
    let mut r = Reader::new(data, "info request");
    let name = r.string()?;
    let n = r.u16()?;
    let requests = (0..n).map(|_| r.u16()).collect::<Result<_, _>>()?;
    r.finish()?;
    Ok(InfoRequest { name, requests })
}

/// NBD_OPT_LIST_META_CONTEXT and NBD_OPT_SET_META_CONTEXT: an export and queries.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MetaRequest {
    pub export: String,
    pub queries: Vec<String>,
}

pub fn parse_meta_request(data: &[u8]) -> Result<MetaRequest, ProtoError> {
    let mut r = Reader::new(data, "meta context request");
    let export = r.string()?;
    let n = r.u32()?;
    // Each query takes at least its 4-byte length: more than that is a lie.
    if n as usize > data.len() / 4 {
        return Err(ProtoError::Short {
            what: "meta context queries",
            need: n as usize * 4,
            have: data.len(),
        });
    }
    let queries = (0..n).map(|_| r.string()).collect::<Result<_, _>>()?;
    r.finish()?;
    Ok(MetaRequest { export, queries })
}

/// Does a meta-context query select base:allocation? (`base:` alone lists the
/// namespace; an empty list in LIST means every context.)
pub fn selects_base_allocation(query: &str) -> bool {
    query == BASE_ALLOCATION || query == "base:"
}

/// An option reply header: magic, option, reply type, length.
pub fn option_reply(option: u32, reply: u32, data: &[u8]) -> Vec<u8> {
    let mut v = Vec::with_capacity(20 + data.len());
    v.extend_from_slice(&REPLY_MAGIC.to_be_bytes());
    v.extend_from_slice(&option.to_be_bytes());
    v.extend_from_slice(&reply.to_be_bytes());
    v.extend_from_slice(&(data.len() as u32).to_be_bytes());
    v.extend_from_slice(data);
    v
}

pub fn simple_reply(error: u32, cookie: u64) -> [u8; 16] {
    let mut v = [0u8; 16];
    v[0..4].copy_from_slice(&SIMPLE_REPLY_MAGIC.to_be_bytes());
    v[4..8].copy_from_slice(&error.to_be_bytes());
    v[8..16].copy_from_slice(&cookie.to_be_bytes());
    v
}

/// A structured reply chunk's header; `len` bytes of payload follow.
pub fn chunk_header(flags: u16, kind: u16, cookie: u64, len: u32) -> [u8; 20] {
    let mut v = [0u8; 20];
    v[0..4].copy_from_slice(&STRUCTURED_REPLY_MAGIC.to_be_bytes());
    v[4..6].copy_from_slice(&flags.to_be_bytes());
    v[6..8].copy_from_slice(&kind.to_be_bytes());
    v[8..16].copy_from_slice(&cookie.to_be_bytes());
    v[16..20].copy_from_slice(&len.to_be_bytes());
    v
}

/// A whole NBD_REPLY_TYPE_ERROR chunk (final) with a message for people.
pub fn error_chunk(cookie: u64, error: u32, message: &str) -> Vec<u8> {
    let msg = &message.as_bytes()[..message.len().min(MAX_STRING)];
    let mut v = Vec::with_capacity(26 + msg.len());
    v.extend_from_slice(&chunk_header(
        REPLY_FLAG_DONE,
        REPLY_TYPE_ERROR,
        cookie,
        6 + msg.len() as u32,
    ));
    v.extend_from_slice(&error.to_be_bytes());
    v.extend_from_slice(&(msg.len() as u16).to_be_bytes());
    v.extend_from_slice(msg);
    v
}

/// A short name for a command, for logs and errors.
pub fn command_name(kind: u16) -> &'static str {
    match kind {
        CMD_READ => "READ",
        CMD_WRITE => "WRITE",
        CMD_DISC => "DISC",
        CMD_FLUSH => "FLUSH",
        CMD_TRIM => "TRIM",
        CMD_CACHE => "CACHE",
        CMD_WRITE_ZEROES => "WRITE_ZEROES",
        CMD_BLOCK_STATUS => "BLOCK_STATUS",
        _ => "unknown",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_request_round_trips_and_a_bad_magic_is_named() {
        let mut b = [0u8; REQUEST_LEN];
        b[0..4].copy_from_slice(&REQUEST_MAGIC.to_be_bytes());
        b[4..6].copy_from_slice(&CMD_FLAG_FUA.to_be_bytes());
        b[6..8].copy_from_slice(&CMD_WRITE.to_be_bytes());
        b[8..16].copy_from_slice(&7u64.to_be_bytes());
        b[16..24].copy_from_slice(&4096u64.to_be_bytes());
        b[24..28].copy_from_slice(&512u32.to_be_bytes());
        let r = parse_request(&b).unwrap();
        assert_eq!(
            r,
            Request {
                flags: CMD_FLAG_FUA,
                kind: CMD_WRITE,
                cookie: 7,
                offset: 4096,
                len: 512
            }
        );
        b[0] = 0;
        assert!(matches!(
            parse_request(&b),
            Err(ProtoError::RequestMagic(_))
        ));
    }

    #[test]
    fn option_payloads_refuse_lies_about_their_lengths() {
        // Name length says 10, only 3 bytes follow.
        let mut d = 10u32.to_be_bytes().to_vec();
        d.extend_from_slice(b"abc");
        assert!(parse_info_request(&d).is_err());
        // A query count far beyond what the payload could hold.
        let mut d = 0u32.to_be_bytes().to_vec();
        d.extend_from_slice(&u32::MAX.to_be_bytes());
        assert!(parse_meta_request(&d).is_err());
        // Trailing bytes.
        let mut d = 0u32.to_be_bytes().to_vec();
        d.extend_from_slice(&0u16.to_be_bytes());
        d.push(9);
        assert!(matches!(
            parse_info_request(&d),
            Err(ProtoError::Trailing { .. })
        ));
        // NUL inside a name.
        let mut d = 2u32.to_be_bytes().to_vec();
        d.extend_from_slice(b"a\0");
        d.extend_from_slice(&0u16.to_be_bytes());
        assert!(matches!(
            parse_info_request(&d),
            Err(ProtoError::BadString { .. })
        ));
    }

    #[test]
    fn a_meta_request_lists_its_queries() {
        let mut d = 0u32.to_be_bytes().to_vec();
        d.extend_from_slice(&1u32.to_be_bytes());
        d.extend_from_slice(&(BASE_ALLOCATION.len() as u32).to_be_bytes());
        d.extend_from_slice(BASE_ALLOCATION.as_bytes());
        let m = parse_meta_request(&d).unwrap();
        assert_eq!(m.export, "");
        assert_eq!(m.queries, [BASE_ALLOCATION]);
        assert!(selects_base_allocation(&m.queries[0]));
        assert!(!selects_base_allocation("qemu:dirty-bitmap:x"));
    }
}

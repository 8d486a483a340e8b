//! The fixed-newstyle handshake: the greeting, the client's flags, then options until
//! the client picks an export (GO, EXPORT_NAME) or leaves (ABORT).

use std::io::{self, Read, Write};

use crate::proto;
use crate::stream::Stream;
use crate::Error;

use super::requests::BASE_ALLOCATION_ID;
use super::transmission::skip;
use super::{limit, Server, Session};

/// Options one handshake may send: a client needs a handful (STARTTLS, structured
/// replies, a meta context, INFO, GO); a peer looping on cheap options only holds
/// a connection slot (nbdkit caps them the same way).
const MAX_OPTIONS: u32 = 32;

pub(super) enum Handshake {
    /// Go on to transmission.
    Transmit(Session),
    /// The client ended the handshake (ABORT, or an export it did not like).
    Done,
}

impl Server {
    pub(super) fn handshake(&self, s: &mut Stream) -> Result<Handshake, Error> {
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
        let mut options = 0;
        loop {
            options += 1;
            if options > MAX_OPTIONS {
                return Err(Error::Protocol(format!(
                    "more than {MAX_OPTIONS} options in one handshake"
                )));
            }
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

//! One request: checked against the spec and the export (flags, mode, range,
//! length), run on the target, and answered with its reply or the spec's error.

use std::sync::atomic::Ordering;

use hscm_block::{WriteFlags, ZeroFlags};

use crate::proto::{self, Request};

use super::{Server, Session};

/// The largest range one BLOCK_STATUS request describes (the client asks again).
const MAX_STATUS_RANGE: u64 = 64 << 20;
/// The id of the one metadata context, base:allocation.
pub(super) const BASE_ALLOCATION_ID: u32 = 1;

impl Server {
    /// Runs one request and returns its whole reply.
    pub(super) fn execute(&self, req: &Request, payload: &[u8], session: Session) -> Vec<u8> {
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

    /// What every command is checked for before it runs: known flags, the export's
    /// mode, the range, and for READ its length.
    pub(super) fn check(&self, req: &Request, session: Session) -> Result<(), (u32, String)> {
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

/// The NBD error for a target's failure.
pub(super) fn errno_of(e: &hscm_block::Error) -> u32 {
    match e.errno() {
        30 | 1 => proto::EPERM, // EROFS, EPERM
        28 => proto::ENOSPC,
        12 => proto::ENOMEM,
        22 => proto::EINVAL,
        95 => proto::ENOTSUP,
        _ => proto::EIO,
    }
}

/// The reply to a command that failed: a structured client gets a READ's or
/// BLOCK_STATUS's error as a chunk with the reason; anything else a simple reply.
pub(super) fn error_reply(req: &Request, session: Session, errno: u32, why: &str) -> Vec<u8> {
    match req.kind {
        proto::CMD_READ | proto::CMD_BLOCK_STATUS if session.structured => {
            proto::error_chunk(req.cookie, errno, why)
        }
        _ => proto::simple_reply(errno, req.cookie).to_vec(),
    }
}

//! hscm's compact binary trace format (docs/format.md, "Memory traces").
//!
//! A 16-byte header (magic `HSCMTRC1`, timing unit, a post-cache flag — 1 when the
//! references already went through caches —, 6 reserved zero bytes), then one
//! record per reference: a tag byte (bits 0-1 access kind: 0 read, 1 write, 2 fetch;
//! bit 2: a size other than 64 follows; bit 3: a non-zero delta follows; bits 4-7
//! zero), the address as a zigzag LEB128 difference from the previous record's
//! address, then the optional delta and size as LEB128. Usually zstd-compressed as a
//! whole; readers accept both.

use std::io::{BufRead, Write};

use crate::{Access, MemRef, Timing, TraceError};

pub const MAGIC: &[u8; 8] = b"HSCMTRC1";
const HEADER_LEN: usize = 16;
const MAX_RECORD: usize = 1 + 10 + 10 + 5;

fn timing_code(t: Timing) -> u8 {
    match t {
        Timing::None => 0,
        Timing::Instructions => 1,
        Timing::Cycles => 2,
    }
}

/// Writes references in the binary format.
pub struct TraceWriter<W: Write> {
    out: W,
    last_addr: u64,
    buf: Vec<u8>,
    records: u64,
}

impl<W: Write> TraceWriter<W> {
    pub fn new(mut out: W, timing: Timing, post_cache: bool) -> std::io::Result<Self> {
        let mut header = [0u8; HEADER_LEN];
        header[..8].copy_from_slice(MAGIC);
        header[8] = timing_code(timing);
        header[9] = u8::from(post_cache);
        out.write_all(&header)?;
        Ok(Self {
            out,
            last_addr: 0,
            buf: Vec::with_capacity(1 << 16),
            records: 0,
        })
    }

    pub fn write(&mut self, r: &MemRef) -> std::io::Result<()> {
        let kind = match r.kind {
            Access::Read => 0u8,
            Access::Write => 1,
            Access::Fetch => 2,
        };
        let tag = kind | (u8::from(r.size != 64) << 2) | (u8::from(r.delta != 0) << 3);
        self.buf.push(tag);
        let diff = r.addr.wrapping_sub(self.last_addr) as i64;
        put_varint(&mut self.buf, ((diff << 1) ^ (diff >> 63)) as u64);
        if r.delta != 0 {
            put_varint(&mut self.buf, r.delta);
        }
        if r.size != 64 {
            put_varint(&mut self.buf, u64::from(r.size));
        }
        self.last_addr = r.addr;
        self.records += 1;
        if self.buf.len() > (1 << 16) - MAX_RECORD {
            self.out.write_all(&self.buf)?;
            self.buf.clear();
        }
        Ok(())
    }

    pub fn records(&self) -> u64 {
        self.records
    }

    /// Flushes and returns the inner writer (finish a zstd encoder after this).
    pub fn finish(mut self) -> std::io::Result<W> {
        self.out.write_all(&self.buf)?;
        self.out.flush()?;
        Ok(self.out)
    }
}

fn put_varint(buf: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        buf.push((v as u8) | 0x80);
        v >>= 7;
    }
    buf.push(v as u8);
}

/// A read window over a stream: records are decoded straight from `buf[pos..len]`,
/// refilled in large reads (shared by the binary record readers).
pub(crate) struct Window<R> {
    input: R,
    pub(crate) buf: Vec<u8>,
    pub(crate) pos: usize,
    pub(crate) len: usize,
    /// Stream offset of buf[0].
    pub(crate) base: u64,
    pub(crate) eof: bool,
}

impl<R: std::io::Read> Window<R> {
    pub(crate) fn new(input: R, capacity: usize, base: u64) -> Self {
        Self {
            input,
            buf: vec![0; capacity],
            pos: 0,
            len: 0,
            base,
            eof: false,
        }
    }

    /// Makes at least `want` bytes available unless the stream ends first.
    #[inline]
    pub(crate) fn fill(&mut self, want: usize) -> std::io::Result<()> {
        if self.len - self.pos >= want || self.eof {
            return Ok(());
        }
        self.buf.copy_within(self.pos..self.len, 0);
        self.base += self.pos as u64;
        self.len -= self.pos;
        self.pos = 0;
        while !self.eof && self.len < self.buf.len() {
            let n = self.input.read(&mut self.buf[self.len..])?;
            if n == 0 {
                self.eof = true;
            }
            self.len += n;
        }
        Ok(())
    }

    /// Stream offset of the next unread byte.
    pub(crate) fn offset(&self) -> u64 {
        self.base + self.pos as u64
    }
}

pub(crate) struct BinaryReader<R> {
    win: Window<R>,
    name: String,
    timing: Timing,
    post_cache: bool,
    last_addr: u64,
    failed: bool,
}

impl<R: BufRead> BinaryReader<R> {
    pub(crate) fn new(mut input: R, name: &str) -> Result<Self, TraceError> {
        let mut header = [0u8; HEADER_LEN];
        input
            .read_exact(&mut header)
            .map_err(|e| TraceError::Binary {
                name: name.to_string(),
                offset: 0,
                message: format!("header too short: {e}"),
            })?;
        let bad = |message: String| TraceError::Binary {
            name: name.to_string(),
            offset: 0,
            message,
        };
        if &header[..8] != MAGIC {
            return Err(bad("not an hscm trace (bad magic)".into()));
        }
        let timing = match header[8] {
            0 => Timing::None,
            1 => Timing::Instructions,
            2 => Timing::Cycles,
            t => return Err(bad(format!("unknown timing unit {t}"))),
        };
        if header[9] > 1 {
            return Err(bad(format!("bad post-cache flag {}", header[9])));
        }
        if header[10..].iter().any(|&b| b != 0) {
            return Err(bad(
                "reserved header bytes are not zero (newer format?)".into()
            ));
        }
        Ok(Self {
            name: name.to_string(),
            timing,
            post_cache: header[9] == 1,
            win: Window::new(input, 1 << 16, HEADER_LEN as u64),
            last_addr: 0,
            failed: false,
        })
    }

    pub(crate) fn timing(&self) -> Timing {
        self.timing
    }

    pub(crate) fn post_cache(&self) -> bool {
        self.post_cache
    }

    fn error(&self, message: &str) -> TraceError {
        TraceError::Binary {
            name: self.name.clone(),
            offset: self.win.offset(),
            message: message.to_string(),
        }
    }

    #[inline]
    fn varint(&mut self) -> Option<u64> {
        let mut v = 0u64;
        for shift in (0..64).step_by(7) {
            let b = *self.win.buf[..self.win.len].get(self.win.pos)?;
            self.win.pos += 1;
            v |= u64::from(b & 0x7f) << shift;
            if b & 0x80 == 0 {
                return Some(v);
            }
        }
        None
    }

    #[inline]
    pub(crate) fn next(&mut self) -> Option<Result<MemRef, TraceError>> {
        if self.failed {
            return None;
        }
        if let Err(e) = self.win.fill(MAX_RECORD) {
            self.failed = true;
            return Some(Err(TraceError::io(&self.name, e)));
        }
        if self.win.pos == self.win.len {
            return None;
        }
        let start = self.win.pos;
        let tag = self.win.buf[self.win.pos];
        self.win.pos += 1;
        let kind = match tag & 3 {
            0 => Access::Read,
            1 => Access::Write,
            2 => Access::Fetch,
            _ => {
                self.win.pos = start;
                self.failed = true;
                return Some(Err(self.error("bad record tag (access kind 3)")));
            }
        };
        if tag & 0xf0 != 0 {
            self.win.pos = start;
            self.failed = true;
            return Some(Err(self.error("bad record tag (reserved bits set)")));
        }
        let parsed = (|| {
            let zz = self.varint()?;
            let diff = ((zz >> 1) as i64) ^ -((zz & 1) as i64);
            let delta = if tag & 8 != 0 { self.varint()? } else { 0 };
            let size = if tag & 4 != 0 {
                u32::try_from(self.varint()?).ok()?
            } else {
                64
            };
            Some((diff, delta, size))
        })();
        match parsed {
            Some((diff, delta, size)) => {
                self.last_addr = self.last_addr.wrapping_add(diff as u64);
                Some(Ok(MemRef {
                    addr: self.last_addr,
                    kind,
                    size,
                    delta,
                }))
            }
            None => {
                self.win.pos = start;
                self.failed = true;
                Some(Err(self.error("truncated or overlong record")))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Format, TraceReader};
    use proptest::prelude::*;

    fn encode(refs: &[MemRef], compress: bool) -> Vec<u8> {
        let mut w = TraceWriter::new(Vec::new(), Timing::Instructions, false).unwrap();
        for r in refs {
            w.write(r).unwrap();
        }
        let raw = w.finish().unwrap();
        if compress {
            zstd::encode_all(&raw[..], 3).unwrap()
        } else {
            raw
        }
    }

    fn decode(bytes: Vec<u8>) -> Result<Vec<MemRef>, TraceError> {
        let r = TraceReader::from_reader(Box::new(std::io::Cursor::new(bytes)), "b", None)?;
        assert_eq!(r.format(), Format::Hscm);
        r.collect()
    }

    fn memref() -> impl Strategy<Value = MemRef> {
        (
            any::<u64>(),
            0u8..3,
            prop_oneof![Just(64u32), any::<u32>()],
            prop_oneof![Just(0u64), any::<u64>()],
        )
            .prop_map(|(addr, k, size, delta)| MemRef {
                addr,
                kind: [Access::Read, Access::Write, Access::Fetch][k as usize],
                size,
                delta,
            })
    }

    proptest! {
        #[test]
        fn round_trips_plain_and_compressed(refs in proptest::collection::vec(memref(), 0..3000), z in any::<bool>()) {
            prop_assert_eq!(decode(encode(&refs, z)).unwrap(), refs);
        }

        /// Arbitrary bytes after a valid header: an error or records, never a panic.
        #[test]
        fn garbage_never_panics(body in proptest::collection::vec(any::<u8>(), 0..2000)) {
            let mut bytes = encode(&[], false);
            bytes.extend(body);
            let _ = decode(bytes);
        }
    }

    #[test]
    fn truncation_and_bad_headers_are_reported_with_offsets() {
        let refs = vec![MemRef {
            addr: 1 << 40,
            kind: Access::Write,
            size: 8,
            delta: 300,
        }];
        let mut bytes = encode(&refs, false);
        bytes.pop();
        let err = decode(bytes).unwrap_err().to_string();
        assert!(err.contains("b: byte 16: truncated"), "{err}");
        let mut bytes = encode(&refs, false);
        bytes[10] = 1;
        assert!(decode(bytes)
            .unwrap_err()
            .to_string()
            .contains("reserved header bytes"));
        let mut bytes = encode(&refs, false);
        bytes[8] = 9;
        assert!(decode(bytes)
            .unwrap_err()
            .to_string()
            .contains("unknown timing unit 9"));
        let err = TraceReader::from_reader(
            Box::new(std::io::Cursor::new(b"HSCMTRC1".to_vec())),
            "b",
            None,
        )
        .err()
        .unwrap()
        .to_string();
        assert!(err.contains("header too short"), "{err}");
    }
}

//! Key-value log records (docs/format.md, "Key-value logs").
//!
//! ```text
//! 0  magic     u32  "KVR1"
//! 4  crc32c    u32  over bytes 8.. of the record
//! 8  seq       u64  store-wide sequence number: the highest wins
//! 16 kind      u8   1 put, 2 delete
//! 17 reserved  u8   0
//! 18 key_len   u16
//! 20 value_len u32
//! 24 key, then value
//! ```

use crate::{Error, Result};

pub(crate) const MAGIC: u32 = u32::from_le_bytes(*b"KVR1");
pub(crate) const HEADER: usize = 24;
/// Longest key accepted.
pub const MAX_KEY: usize = 4096;
/// Largest value the format can hold, whatever the configured limit.
pub const MAX_VALUE_LIMIT: usize = 64 << 20;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    Put = 1,
    Delete = 2,
}

/// One record, borrowed from a buffer.
#[derive(Debug, Clone, Copy)]
pub(crate) struct View<'a> {
    pub seq: u64,
    pub kind: Kind,
    pub key: &'a [u8],
    pub value: &'a [u8],
}

impl View<'_> {
    pub fn len(&self) -> usize {
        HEADER + self.key.len() + self.value.len()
    }
    /// Offset of the value from the record start.
    pub fn value_offset(&self) -> usize {
        HEADER + self.key.len()
    }
}

pub(crate) fn encoded_len(key: &[u8], value: &[u8]) -> usize {
    HEADER + key.len() + value.len()
}

/// Appends one encoded record to `out`.
pub(crate) fn encode(out: &mut Vec<u8>, seq: u64, kind: Kind, key: &[u8], value: &[u8]) {
    let start = out.len();
    out.extend_from_slice(&MAGIC.to_le_bytes());
    out.extend_from_slice(&[0; 4]);
    out.extend_from_slice(&seq.to_le_bytes());
    out.push(kind as u8);
    out.push(0);
    out.extend_from_slice(&(key.len() as u16).to_le_bytes());
    out.extend_from_slice(&(value.len() as u32).to_le_bytes());
    out.extend_from_slice(key);
    out.extend_from_slice(value);
    let crc = crc32c::crc32c(&out[start + 8..]);
    out[start + 4..start + 8].copy_from_slice(&crc.to_le_bytes());
}

/// Decodes the record at the start of `buf`, or says why it is not one.
pub(crate) fn decode(buf: &[u8]) -> std::result::Result<View<'_>, String> {
    if buf.len() < HEADER {
        return Err(format!(
            "{} bytes left, a record header needs {HEADER}",
            buf.len()
        ));
    }
    let u32_at = |o: usize| u32::from_le_bytes(buf[o..o + 4].try_into().unwrap());
    if u32_at(0) != MAGIC {
        return Err(format!("bad magic {:#010x}", u32_at(0)));
    }
    let key_len = u16::from_le_bytes([buf[18], buf[19]]) as usize;
    let value_len = u32_at(20) as usize;
    if key_len == 0 || key_len > MAX_KEY {
        return Err(format!("key length {key_len} outside 1..={MAX_KEY}"));
    }
    if value_len > MAX_VALUE_LIMIT {
        return Err(format!("value length {value_len} over {MAX_VALUE_LIMIT}"));
    }
    let len = HEADER + key_len + value_len;
    if buf.len() < len {
        return Err(format!(
            "record of {len} bytes runs past the end ({} left)",
            buf.len()
        ));
    }
    let crc = crc32c::crc32c(&buf[8..len]);
    if crc != u32_at(4) {
        return Err(format!(
            "checksum mismatch (stored {:#010x}, computed {crc:#010x})",
            u32_at(4)
        ));
    }
    let kind = match buf[16] {
        1 => Kind::Put,
        2 => Kind::Delete,
        k => return Err(format!("unknown record kind {k}")),
    };
    Ok(View {
        seq: u64::from_le_bytes(buf[8..16].try_into().unwrap()),
        kind,
        key: &buf[HEADER..HEADER + key_len],
        value: &buf[HEADER + key_len..len],
    })
}

/// Scans a log image as opening a store does: the number of whole records and what
/// was found after them (a torn tail, or damage as an error). Public for fuzzing.
pub fn scan_image(name: &str, image: &[u8]) -> Result<(u64, u64)> {
    let mut records = 0;
    let s = scan(name, image, |_, _| records += 1)?;
    Ok((records, s.valid_len))
}

/// What a scan found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Scanned {
    /// Bytes of whole, valid records from the start.
    pub valid_len: u64,
    /// Bytes after them that hold no valid record: a write torn by a crash.
    pub torn_bytes: u64,
}

/// Calls `each(offset, record)` for every record of a log image. A bad record with no
/// valid record after it is a torn tail (reported, not an error); one followed by a
/// valid record is damage: [`Error::CorruptRecord`].
pub(crate) fn scan<'a>(
    path: &str,
    buf: &'a [u8],
    mut each: impl FnMut(u64, View<'a>),
) -> Result<Scanned> {
    let mut at = 0usize;
    while at < buf.len() {
        match decode(&buf[at..]) {
            Ok(rec) => {
                each(at as u64, rec);
                at += rec.len();
            }
            Err(reason) => {
                if let Some(next) = next_valid(buf, at + 1) {
                    return Err(Error::CorruptRecord {
                        path: path.to_string(),
                        offset: at as u64,
                        reason: format!("{reason} (next valid record at byte {next})"),
                    });
                }
                return Ok(Scanned {
                    valid_len: at as u64,
                    torn_bytes: (buf.len() - at) as u64,
                });
            }
        }
    }
    Ok(Scanned {
        valid_len: at as u64,
        torn_bytes: 0,
    })
}

/// Offset of the first valid record at or after `from`.
fn next_valid(buf: &[u8], from: usize) -> Option<usize> {
    let magic = MAGIC.to_le_bytes();
    (from..buf.len().saturating_sub(HEADER - 1))
        .filter(|&o| buf[o..o + 4] == magic)
        .find(|&o| decode(&buf[o..]).is_ok())
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn log(records: &[(u64, &[u8], &[u8])]) -> Vec<u8> {
        let mut out = Vec::new();
        for &(seq, k, v) in records {
            encode(&mut out, seq, Kind::Put, k, v);
        }
        out
    }

    type Rec = (u64, Vec<u8>, Vec<u8>);

    fn all(buf: &[u8]) -> Result<(Vec<Rec>, Scanned)> {
        let mut got = Vec::new();
        let s = scan("t", buf, |_, r| {
            got.push((r.seq, r.key.to_vec(), r.value.to_vec()))
        })?;
        Ok((got, s))
    }

    #[test]
    fn round_trip() {
        let buf = log(&[(1, b"a", b"one"), (7, b"bb", b""), (3, b"c", &[9; 1000])]);
        let (got, s) = all(&buf).unwrap();
        assert_eq!(got.len(), 3);
        assert_eq!(got[1], (7, b"bb".to_vec(), vec![]));
        assert_eq!(
            s,
            Scanned {
                valid_len: buf.len() as u64,
                torn_bytes: 0
            }
        );
    }

    #[test]
    fn a_torn_tail_is_cut_not_an_error() {
        let buf = log(&[(1, b"a", b"one"), (2, b"b", b"two")]);
        let first = encoded_len(b"a", b"one");
        for cut in first + 1..buf.len() {
            let (got, s) = all(&buf[..cut]).unwrap();
            assert_eq!(got.len(), 1, "cut {cut}");
            assert_eq!(s.valid_len, first as u64);
            assert_eq!(s.torn_bytes, (cut - first) as u64);
        }
    }

    #[test]
    fn damage_before_valid_records_is_an_error_naming_the_offset() {
        let mut buf = log(&[(1, b"a", b"one"), (2, b"b", b"two"), (3, b"c", b"three")]);
        let second = encoded_len(b"a", b"one");
        buf[second + HEADER + 1] ^= 0x40; // a bit flip in the second record's value
        let err = all(&buf).unwrap_err().to_string();
        assert!(
            err.contains(&format!("corrupt record at byte {second}")),
            "{err}"
        );
        assert!(err.contains("checksum mismatch"), "{err}");
    }

    proptest! {
        /// Garbage never panics the scanner, and whatever it accepts re-encodes to the
        /// same bytes.
        #[test]
        fn garbage_is_handled(bytes in proptest::collection::vec(any::<u8>(), 0..300)) {
            let mut spans = Vec::new();
            if let Ok(s) = scan("g", &bytes, |o, r| spans.push((o, r.seq, r.kind, r.key.to_vec(), r.value.to_vec()))) {
                let mut again = Vec::new();
                for (_, seq, kind, k, v) in &spans {
                    encode(&mut again, *seq, *kind, k, v);
                }
                prop_assert_eq!(&again[..], &bytes[..s.valid_len as usize]);
            }
        }
    }
}

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

use hscm_durable::codec::{CodecError, Dec, Enc};

use crate::{Error, Result};

pub(crate) const MAGIC: [u8; 4] = *b"KVR1";
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
    let mut e = Enc(std::mem::take(out));
    let start = e.0.len();
    e.raw(&MAGIC)
        .u32(0) // the checksum, once the rest is there
        .u64(seq)
        .u8(kind as u8)
        .u8(0)
        .u16(key.len() as u16)
        .u32(value.len() as u32)
        .raw(key)
        .raw(value);
    let crc = crc32c::crc32c(&e.0[start + 8..]);
    e.put_u32_at(start + 4, crc);
    *out = e.0;
}

/// Decodes the record at the start of `buf`, or says why it is not one.
pub(crate) fn decode(buf: &[u8]) -> std::result::Result<View<'_>, String> {
    if buf.len() < HEADER {
        return Err(format!(
            "{} bytes left, a record header needs {HEADER}",
            buf.len()
        ));
    }
    let short = |e: CodecError| e.0;
    let mut d = Dec::new(buf, "a key-value record");
    let magic = d.raw(4).map_err(short)?;
    if magic != MAGIC {
        return Err(format!("bad magic {magic:02x?}"));
    }
    let stored_crc = d.u32().map_err(short)?;
    let seq = d.u64().map_err(short)?;
    let kind = d.u8().map_err(short)?;
    d.u8().map_err(short)?; // reserved
    let key_len = usize::from(d.u16().map_err(short)?);
    let value_len = d.u32().map_err(short)? as usize;
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
    if crc != stored_crc {
        return Err(format!(
            "checksum mismatch (stored {stored_crc:#010x}, computed {crc:#010x})"
        ));
    }
    let kind = match kind {
        1 => Kind::Put,
        2 => Kind::Delete,
        k => return Err(format!("unknown record kind {k}")),
    };
    Ok(View {
        seq,
        kind,
        key: &buf[HEADER..HEADER + key_len],
        value: &buf[HEADER + key_len..len],
    })
}

/// The next record to append: takes the store-wide sequence number when the log's
/// append lock runs it (so numbers are in file order), for [`crate::log::LogFile::append`].
pub(crate) fn numbered<'a>(
    seq: &'a std::sync::atomic::AtomicU64,
    kind: Kind,
    key: &'a [u8],
    value: &'a [u8],
) -> impl FnOnce(u64) -> (Vec<u8>, u64) + 'a {
    move |_| {
        let seq = seq.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let mut buf = Vec::with_capacity(encoded_len(key, value));
        encode(&mut buf, seq, kind, key, value);
        (buf, seq)
    }
}

/// Scans a log image as opening a store does: the number of whole records kept and
/// the bytes they span. Public for fuzzing.
pub fn scan_image(image: &[u8]) -> (u64, u64) {
    let mut records = 0;
    let s = scan(image, |_, _| records += 1);
    (records, s.valid_len)
}

/// What a scan found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Scanned {
    /// Bytes of whole, valid records from the start.
    pub valid_len: u64,
    /// Bytes after them, cut: a write torn by a power cut, or whatever follows a bad
    /// record.
    pub torn_bytes: u64,
    /// Why the record at `valid_len` is bad, when the image does not end there.
    pub bad: Option<String>,
    /// Where the first valid record after the bad one starts, if any does.
    pub next_valid: Option<u64>,
}

impl Scanned {
    /// The warning (or `check` finding) for valid records behind a bad one.
    pub fn bad_record_error(&self, path: &str) -> Option<Error> {
        let next = self.next_valid?;
        Some(Error::CorruptRecord {
            path: path.to_string(),
            offset: self.valid_len,
            reason: format!(
                "{}; valid records follow from byte {next}",
                self.bad.as_deref().unwrap_or("bad record")
            ),
        })
    }
}

/// Calls `each(offset, record)` for every record of a log image up to the first bad
/// one, and cuts there: point-in-time recovery. Every byte a sync covered is intact
/// (docs/design.md, the assumptions about the media), so a bad record lies past the
/// last sync, and so does everything after it: the cut drops no acknowledged record,
/// even where the device persisted a later unsynced write and lost an earlier one
/// (out-of-order write-back before a power cut). Valid records after the cut are
/// reported in [`Scanned::next_valid`], for a warning.
pub(crate) fn scan<'a>(buf: &'a [u8], mut each: impl FnMut(u64, View<'a>)) -> Scanned {
    let mut at = 0usize;
    while at < buf.len() {
        match decode(&buf[at..]) {
            Ok(rec) => {
                each(at as u64, rec);
                at += rec.len();
            }
            Err(reason) => {
                return Scanned {
                    valid_len: at as u64,
                    torn_bytes: (buf.len() - at) as u64,
                    bad: Some(reason),
                    next_valid: next_valid(buf, at + 1).map(|n| n as u64),
                };
            }
        }
    }
    Scanned {
        valid_len: at as u64,
        torn_bytes: 0,
        bad: None,
        next_valid: None,
    }
}

/// Like [`scan`], for bytes this store wrote and synced itself (a sealed buffer log
/// read back, records about to be appended): any bad record is damage or a bug, so it
/// is an error rather than a cut.
pub(crate) fn scan_whole<'a>(
    path: &str,
    buf: &'a [u8],
    each: impl FnMut(u64, View<'a>),
) -> Result<()> {
    let scanned = scan(buf, each);
    match scanned.bad {
        None => Ok(()),
        Some(reason) => Err(Error::CorruptRecord {
            path: path.to_string(),
            offset: scanned.valid_len,
            reason: format!("{reason} (in bytes this store synced itself)"),
        }),
    }
}

/// Offset of the first valid record at or after `from`.
fn next_valid(buf: &[u8], from: usize) -> Option<usize> {
    (from..buf.len().saturating_sub(HEADER - 1))
        .filter(|&o| buf[o..o + 4] == MAGIC)
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

    fn all(buf: &[u8]) -> (Vec<Rec>, Scanned) {
        let mut got = Vec::new();
        let s = scan(buf, |_, r| {
            got.push((r.seq, r.key.to_vec(), r.value.to_vec()))
        });
        (got, s)
    }

    /// The bytes of one put and one delete as docs/format.md lays them out: what stores
    /// on disk hold, so no change of the code may move them.
    #[test]
    fn encoding_is_the_documented_layout() {
        let mut out = Vec::new();
        encode(&mut out, 0x0102_0304_0506_0708, Kind::Put, b"key", b"value");
        encode(&mut out, 9, Kind::Delete, b"k", b"");
        let hex: String = out.iter().map(|x| format!("{x:02x}")).collect();
        assert_eq!(
            hex,
            "4b565231cd80bf30080706050403020101000300050000006b657976616c7565\
             4b5652315cbe2a0c090000000000000002000100000000006b"
        );
    }

    #[test]
    fn round_trip() {
        let buf = log(&[(1, b"a", b"one"), (7, b"bb", b""), (3, b"c", &[9; 1000])]);
        let (got, s) = all(&buf);
        assert_eq!(got.len(), 3);
        assert_eq!(got[1], (7, b"bb".to_vec(), vec![]));
        assert_eq!(
            s,
            Scanned {
                valid_len: buf.len() as u64,
                torn_bytes: 0,
                bad: None,
                next_valid: None,
            }
        );
    }

    #[test]
    fn a_torn_tail_is_cut_not_an_error() {
        let buf = log(&[(1, b"a", b"one"), (2, b"b", b"two")]);
        let first = encoded_len(b"a", b"one");
        for cut in first + 1..buf.len() {
            let (got, s) = all(&buf[..cut]);
            assert_eq!(got.len(), 1, "cut {cut}");
            assert_eq!(s.valid_len, first as u64);
            assert_eq!(s.torn_bytes, (cut - first) as u64);
            assert_eq!(s.next_valid, None, "a plain torn tail");
        }
    }

    #[test]
    fn a_bad_record_cuts_the_log_and_names_the_valid_records_behind_it() {
        let mut buf = log(&[(1, b"a", b"one"), (2, b"b", b"two"), (3, b"c", b"three")]);
        let second = encoded_len(b"a", b"one");
        buf[second + HEADER + 1] ^= 0x40; // a bit flip in the second record's value
        let (got, s) = all(&buf);
        assert_eq!(got.len(), 1, "only the record before the bad one is kept");
        assert_eq!(s.valid_len, second as u64);
        assert_eq!(s.torn_bytes, (buf.len() - second) as u64);
        let third = second + encoded_len(b"b", b"two");
        let err = s.bad_record_error("t").unwrap().to_string();
        assert!(
            err.contains(&format!("corrupt record at byte {second}")),
            "{err}"
        );
        assert!(err.contains("checksum mismatch"), "{err}");
        assert!(
            err.contains(&format!("valid records follow from byte {third}")),
            "{err}"
        );
        // Bytes the store synced itself must be whole: the same damage is an error.
        let strict = scan_whole("t", &buf, |_, _| ()).unwrap_err().to_string();
        assert!(
            strict.contains(&format!("corrupt record at byte {second}")),
            "{strict}"
        );
    }

    proptest! {
        /// Garbage never panics the scanner, and whatever it accepts re-encodes to the
        /// same bytes.
        #[test]
        fn garbage_is_handled(bytes in proptest::collection::vec(any::<u8>(), 0..300)) {
            let mut spans = Vec::new();
            let s = scan(&bytes, |o, r| spans.push((o, r.seq, r.kind, r.key.to_vec(), r.value.to_vec())));
            let mut again = Vec::new();
            for (_, seq, kind, k, v) in &spans {
                encode(&mut again, *seq, *kind, k, v);
            }
            prop_assert_eq!(&again[..], &bytes[..s.valid_len as usize]);
            prop_assert_eq!(s.valid_len + s.torn_bytes, bytes.len() as u64);
        }
    }
}

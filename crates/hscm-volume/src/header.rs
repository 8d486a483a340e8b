//! The on-media header: one 4 KiB block at offset 0. Version 1 puts the data area
//! right after it; version 2 puts two checkpoint slots and the journal in between.
//! Layout (little endian) is documented in docs/format.md; keep the two in step.

use hscm_durable::codec::{sealed, CodecError, Dec, Enc};

use crate::error::{Error, Result};
use crate::Durability;

pub const MAGIC: [u8; 8] = *b"HSCMVOL\0";
/// The version this hscm writes; it reads every version from 1 up to it.
pub const FORMAT_VERSION: u32 = 2;
/// The header block's size. Every region after it starts at a multiple of 4 KiB, so
/// I/O stays aligned for O_DIRECT on both 512-byte and 4 KiB-sector devices.
pub const HEADER_LEN: u64 = 4096;
/// Bytes of the header covered by the checksum (the checksum field follows them).
const CHECKED_LEN_V1: usize = 64;
const CHECKED_LEN_V2: usize = 80;

/// What the header says about a volume.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Header {
    pub volume_size: u64,
    pub chunk_size: u32,
    pub durability: Durability,
    pub uuid: [u8; 16],
    pub created_unix_s: u64,
    /// The on-media format version this volume was written with.
    pub version: u32,
    /// Bytes of write-ahead journal (0: writes go straight to their home locations).
    pub journal_len: u64,
}

impl Header {
    pub fn uuid_string(&self) -> String {
        uuid::Uuid::from_bytes(self.uuid).hyphenated().to_string()
    }

    /// Backing offset of volume byte 0.
    pub fn data_offset(&self) -> u64 {
        data_offset(self.version, self.journal_len)
    }

    /// Bytes the backing store must hold: header, checkpoint slots, journal, data area.
    pub fn backing_len(&self) -> u64 {
        self.data_offset() + self.volume_size
    }

    pub fn chunk_count(&self) -> usize {
        self.volume_size.div_ceil(u64::from(self.chunk_size)) as usize
    }

    pub fn encode(&self) -> [u8; HEADER_LEN as usize] {
        let mut e = Enc(Vec::with_capacity(CHECKED_LEN_V2 + 4));
        e.raw(&MAGIC)
            .u32(self.version)
            .u32(HEADER_LEN as u32)
            .u64(self.volume_size)
            .u32(self.chunk_size)
            .u32(self.durability.code())
            .raw(&self.uuid)
            .u64(self.data_offset())
            .u64(self.created_unix_s);
        if self.version != 1 {
            e.u64(JOURNAL_OFFSET).u64(self.journal_len);
        }
        e.seal();
        let mut b = [0u8; HEADER_LEN as usize];
        b[..e.0.len()].copy_from_slice(&e.0);
        b
    }

    /// Parses and validates a header block. `path` only names the volume in errors.
    pub fn decode(b: &[u8], path: &str) -> Result<Header> {
        let bad = |reason: String| Error::BadGeometry {
            path: path.to_string(),
            reason,
        };
        if b.len() < CHECKED_LEN_V2 + 4 {
            return Err(bad(format!(
                "header is {} bytes, shorter than the {} needed",
                b.len(),
                CHECKED_LEN_V2 + 4
            )));
        }
        // Every field in order; version 1 ends (with its checksum) where version 2's
        // journal fields begin, and those are used only for version 2.
        let short = |e: CodecError| bad(e.0);
        let mut d = Dec::new(b, "the volume header");
        let magic: [u8; 8] = d.raw(8).map_err(short)?.try_into().expect("8 bytes");
        let version = d.u32().map_err(short)?;
        let header_len = d.u32().map_err(short)?;
        let volume_size = d.u64().map_err(short)?;
        let chunk_size = d.u32().map_err(short)?;
        let durability = d.u32().map_err(short)?;
        let uuid: [u8; 16] = d.raw(16).map_err(short)?.try_into().expect("16 bytes");
        let data_offset = d.u64().map_err(short)?;
        let created_unix_s = d.u64().map_err(short)?;
        let journal_offset = d.u64().map_err(short)?;
        let journal_len = d.u64().map_err(short)?;
        if magic != MAGIC {
            return Err(Error::BadMagic {
                path: path.to_string(),
                found: magic,
                expected: MAGIC,
            });
        }
        // The version is checked before the checksum: a newer format may checksum differently.
        if version > FORMAT_VERSION {
            return Err(Error::UnsupportedVersion {
                path: path.to_string(),
                found: version,
                supported: FORMAT_VERSION,
            });
        }
        let checked = if version <= 1 {
            CHECKED_LEN_V1
        } else {
            CHECKED_LEN_V2
        };
        if !sealed(b, checked) {
            let stored = Dec::new(&b[checked..], "the volume header's checksum")
                .u32()
                .map_err(|e| bad(e.0))?;
            return Err(Error::HeaderChecksum {
                path: path.to_string(),
                stored,
                computed: crc32c::crc32c(&b[..checked]),
            });
        }
        if version == 0 {
            return Err(bad("format version 0 does not exist".into()));
        }
        if u64::from(header_len) != HEADER_LEN {
            return Err(bad(format!(
                "header length {header_len}; version {version} requires {HEADER_LEN}"
            )));
        }
        let journal_len = if version == 1 {
            0
        } else {
            if journal_offset != JOURNAL_OFFSET {
                return Err(bad(format!(
                    "journal offset {journal_offset}; version {version} requires {JOURNAL_OFFSET}"
                )));
            }
            journal_len
        };
        validate_journal(journal_len).map_err(bad)?;
        if data_offset != self::data_offset(version, journal_len) {
            return Err(bad(format!(
                "data offset {data_offset}; version {version} with a {journal_len}-byte journal requires {}",
                self::data_offset(version, journal_len)
            )));
        }
        let durability = Durability::from_code(durability)
            .ok_or_else(|| bad(format!("unknown durability code {durability}")))?;
        let h = Header {
            volume_size,
            chunk_size,
            durability,
            uuid,
            created_unix_s,
            version,
            journal_len,
        };
        validate_geometry(h.volume_size, h.chunk_size).map_err(bad)?;
        Ok(h)
    }
}

/// Backing offset of the data area for a version and journal size.
fn data_offset(version: u32, journal_len: u64) -> u64 {
    if version == 1 {
        HEADER_LEN
    } else {
        JOURNAL_OFFSET + journal_len
    }
}

/// A journal is absent (0) or at least MIN_JOURNAL bytes, in whole sectors.
pub fn validate_journal(journal_len: u64) -> std::result::Result<(), String> {
    if journal_len != 0 && (journal_len < MIN_JOURNAL || journal_len % IO_ALIGN != 0) {
        return Err(format!(
            "journal size {journal_len} must be 0 (none) or a multiple of {IO_ALIGN} bytes of at least {MIN_JOURNAL}"
        ));
    }
    if journal_len > 1 << 40 {
        return Err(format!("journal size {journal_len} is beyond 1 TiB"));
    }
    Ok(())
}

/// The rules every volume's geometry obeys; shared by create and open.
pub fn validate_geometry(volume_size: u64, chunk_size: u32) -> std::result::Result<(), String> {
    if volume_size == 0 || volume_size % IO_ALIGN != 0 {
        return Err(format!(
            "volume size {volume_size} must be a positive multiple of {IO_ALIGN} bytes"
        ));
    }
    if chunk_size < IO_ALIGN as u32 || chunk_size % IO_ALIGN as u32 != 0 {
        return Err(format!(
            "chunk size {chunk_size} must be a multiple of {IO_ALIGN} bytes"
        ));
    }
    if volume_size.div_ceil(u64::from(chunk_size)) > u64::from(u32::MAX) {
        return Err(format!(
            "{volume_size} bytes in {chunk_size}-byte chunks is too many chunks; use larger chunks"
        ));
    }
    Ok(())
}

/// The backend's alignment unit, which the on-media layout follows (see `backend`).
pub use crate::backend::IO_ALIGN;

/// Where the journal region starts (backing offset), in format version 2.
pub const JOURNAL_OFFSET: u64 = 12288;
/// The smallest journal a volume may have (0 = none).
pub const MIN_JOURNAL: u64 = 256 << 10;

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Header {
        Header {
            volume_size: 1 << 30,
            chunk_size: 1 << 20,
            durability: Durability::OnFlush,
            uuid: [7; 16],
            created_unix_s: 1_700_000_000,
            version: FORMAT_VERSION,
            journal_len: 1 << 20,
        }
    }

    /// The bytes docs/format.md lays out, for a version 2 and a version 1 header:
    /// what volumes on disk hold, so no change of the code may move them.
    #[test]
    fn encoding_is_the_documented_layout() {
        let v1 = Header {
            version: 1,
            journal_len: 0,
            ..sample()
        };
        for (h, golden) in [(sample(), "4853434d564f4c0002000000001000000000004000000000000010000100000007070707070707070707070707070707003010000000000000f1536500000000003000000000000000001000000000004f6d7e08"), (v1, "4853434d564f4c0001000000001000000000004000000000000010000100000007070707070707070707070707070707001000000000000000f1536500000000bd26ea8b")] {
            let b = h.encode();
            let n = golden.len() / 2;
            let hex: String = b[..n].iter().map(|x| format!("{x:02x}")).collect();
            assert_eq!(hex, golden, "version {}", h.version);
            assert!(b[n..].iter().all(|&x| x == 0), "version {}", h.version);
            assert_eq!(b.len() as u64, HEADER_LEN);
        }
    }

    #[test]
    fn version_1_headers_still_decode_with_their_layout() {
        let h = Header {
            version: 1,
            journal_len: 0,
            ..sample()
        };
        let back = Header::decode(&h.encode(), "v").unwrap();
        assert_eq!(back, h);
        assert_eq!(back.data_offset(), HEADER_LEN);
        assert_eq!(sample().data_offset(), JOURNAL_OFFSET + (1 << 20));
    }

    #[test]
    fn a_journal_below_the_minimum_is_refused() {
        let h = Header {
            journal_len: 8192,
            ..sample()
        };
        assert!(Header::decode(&h.encode(), "v").is_err());
    }

    #[test]
    fn round_trips() {
        let h = sample();
        assert_eq!(Header::decode(&h.encode(), "v").unwrap(), h);
    }

    #[test]
    fn any_flipped_bit_in_checked_bytes_is_caught() {
        let enc = sample().encode();
        for byte in 0..CHECKED_LEN_V2 + 4 {
            let mut b = enc;
            b[byte] ^= 0x10;
            assert!(
                Header::decode(&b, "v").is_err(),
                "flip in byte {byte} went unnoticed"
            );
        }
    }

    #[test]
    fn newer_version_is_named() {
        let mut b = sample().encode();
        b[8..12].copy_from_slice(&(FORMAT_VERSION + 1).to_le_bytes());
        let err = Header::decode(&b, "vol.hscm").unwrap_err();
        assert!(
            matches!(err, Error::UnsupportedVersion { found, .. } if found == FORMAT_VERSION + 1)
        );
        assert!(err.to_string().contains("vol.hscm"));
    }

    #[test]
    fn geometry_rules() {
        assert!(validate_geometry(0, 4096).is_err());
        assert!(validate_geometry(4097, 4096).is_err());
        assert!(validate_geometry(8192, 1000).is_err());
        assert!(validate_geometry(8192, 4096).is_ok());
        // A last partial chunk is allowed.
        assert!(validate_geometry(12288, 8192).is_ok());
    }
}

#[cfg(test)]
mod robustness {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2000))]
        /// Arbitrary bytes never panic the parser, and whatever it accepts obeys the
        /// geometry rules and re-encodes to the same header.
        #[test]
        fn decode_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..200)) {
            if let Ok(h) = Header::decode(&bytes, "fuzz") {
                prop_assert!(validate_geometry(h.volume_size, h.chunk_size).is_ok());
                prop_assert_eq!(Header::decode(&h.encode(), "fuzz").unwrap(), h);
            }
        }

        /// A valid header with any single byte of its checked part replaced is refused.
        #[test]
        fn corrupted_valid_headers_are_refused(size_sectors in 1u64..1 << 30, chunk_sectors in 1u32..1024,
                                               at in 0usize..84, value in any::<u8>(), journal_sectors in 64u64..1 << 20) {
            let h = Header { volume_size: size_sectors * IO_ALIGN, chunk_size: chunk_sectors * IO_ALIGN as u32,
                             durability: Durability::Immediate, uuid: [3; 16], created_unix_s: 1,
                             version: FORMAT_VERSION, journal_len: journal_sectors * IO_ALIGN };
            let mut b = h.encode();
            prop_assume!(b[at] != value);
            b[at] = value;
            prop_assert!(Header::decode(&b, "fuzz").is_err());
        }
    }
}

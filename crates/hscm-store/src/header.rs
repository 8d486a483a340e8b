//! The on-media header: one 4 KiB block at offset 0, the data area right after it.
//! Layout (little endian) is documented in docs/format.md; keep the two in step.

use crate::error::{Error, Result};
use crate::Durability;

pub const MAGIC: [u8; 8] = *b"HSCMVOL\0";
pub const FORMAT_VERSION: u32 = 1;
/// The header block's size; also the data area's offset, so the data area stays
/// aligned for O_DIRECT on both 512-byte and 4 KiB-sector devices.
pub const HEADER_LEN: u64 = 4096;
/// Bytes of the header covered by the checksum (the checksum field follows them).
const CHECKED_LEN: usize = 64;

/// What the header says about a volume.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Header {
    pub volume_size: u64,
    pub chunk_size: u32,
    pub durability: Durability,
    pub uuid: [u8; 16],
    pub created_unix_s: u64,
}

impl Header {
    pub fn uuid_string(&self) -> String {
        uuid::Uuid::from_bytes(self.uuid).hyphenated().to_string()
    }

    /// Bytes the backing store must hold: header plus data area.
    pub fn backing_len(&self) -> u64 {
        HEADER_LEN + self.volume_size
    }

    pub fn chunk_count(&self) -> usize {
        self.volume_size.div_ceil(u64::from(self.chunk_size)) as usize
    }

    pub fn encode(&self) -> [u8; HEADER_LEN as usize] {
        let mut b = [0u8; HEADER_LEN as usize];
        b[0..8].copy_from_slice(&MAGIC);
        b[8..12].copy_from_slice(&FORMAT_VERSION.to_le_bytes());
        b[12..16].copy_from_slice(&(HEADER_LEN as u32).to_le_bytes());
        b[16..24].copy_from_slice(&self.volume_size.to_le_bytes());
        b[24..28].copy_from_slice(&self.chunk_size.to_le_bytes());
        b[28..32].copy_from_slice(&self.durability.code().to_le_bytes());
        b[32..48].copy_from_slice(&self.uuid);
        b[48..56].copy_from_slice(&HEADER_LEN.to_le_bytes());
        b[56..64].copy_from_slice(&self.created_unix_s.to_le_bytes());
        let crc = crc32c::crc32c(&b[..CHECKED_LEN]);
        b[64..68].copy_from_slice(&crc.to_le_bytes());
        b
    }

    /// Parses and validates a header block. `path` only names the volume in errors.
    pub fn decode(b: &[u8], path: &str) -> Result<Header> {
        let bad = |reason: String| Error::BadGeometry {
            path: path.to_string(),
            reason,
        };
        if b.len() < CHECKED_LEN + 4 {
            return Err(bad(format!(
                "header is {} bytes, shorter than the {} needed",
                b.len(),
                CHECKED_LEN + 4
            )));
        }
        let u32_at = |o: usize| u32::from_le_bytes(b[o..o + 4].try_into().expect("4 bytes"));
        let u64_at = |o: usize| u64::from_le_bytes(b[o..o + 8].try_into().expect("8 bytes"));
        let magic: [u8; 8] = b[0..8].try_into().expect("8 bytes");
        if magic != MAGIC {
            return Err(Error::BadMagic {
                path: path.to_string(),
                found: magic,
                expected: MAGIC,
            });
        }
        // The version is checked before the checksum: a newer format may checksum differently.
        let version = u32_at(8);
        if version > FORMAT_VERSION {
            return Err(Error::UnsupportedVersion {
                path: path.to_string(),
                found: version,
                supported: FORMAT_VERSION,
            });
        }
        let stored = u32_at(64);
        let computed = crc32c::crc32c(&b[..CHECKED_LEN]);
        if stored != computed {
            return Err(Error::HeaderChecksum {
                path: path.to_string(),
                stored,
                computed,
            });
        }
        if version == 0 {
            return Err(bad("format version 0 does not exist".into()));
        }
        let header_len = u32_at(12);
        let data_offset = u64_at(48);
        if u64::from(header_len) != HEADER_LEN || data_offset != HEADER_LEN {
            return Err(bad(format!(
                "header length {header_len} / data offset {data_offset}; version {version} requires {HEADER_LEN}"
            )));
        }
        let durability = Durability::from_code(u32_at(28))
            .ok_or_else(|| bad(format!("unknown durability code {}", u32_at(28))))?;
        let h = Header {
            volume_size: u64_at(16),
            chunk_size: u32_at(24),
            durability,
            uuid: b[32..48].try_into().expect("16 bytes"),
            created_unix_s: u64_at(56),
        };
        validate_geometry(h.volume_size, h.chunk_size).map_err(bad)?;
        Ok(h)
    }
}

/// The rules every volume's geometry obeys; shared by create and open.
pub fn validate_geometry(volume_size: u64, chunk_size: u32) -> std::result::Result<(), String> {
    if volume_size == 0 || volume_size % SECTOR != 0 {
        return Err(format!(
            "volume size {volume_size} must be a positive multiple of {SECTOR} bytes"
        ));
    }
    if chunk_size < SECTOR as u32 || chunk_size % SECTOR as u32 != 0 {
        return Err(format!(
            "chunk size {chunk_size} must be a multiple of {SECTOR} bytes"
        ));
    }
    if volume_size.div_ceil(u64::from(chunk_size)) > u64::from(u32::MAX) {
        return Err(format!(
            "{volume_size} bytes in {chunk_size}-byte chunks is too many chunks; use larger chunks"
        ));
    }
    Ok(())
}

/// Alignment of every backend I/O: 4 KiB satisfies O_DIRECT on 512e and 4Kn devices alike.
pub const SECTOR: u64 = 4096;

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
        }
    }

    #[test]
    fn round_trips() {
        let h = sample();
        assert_eq!(Header::decode(&h.encode(), "v").unwrap(), h);
    }

    #[test]
    fn any_flipped_bit_in_checked_bytes_is_caught() {
        let enc = sample().encode();
        for byte in 0..CHECKED_LEN + 4 {
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
                                               at in 0usize..68, value in any::<u8>()) {
            let h = Header { volume_size: size_sectors * SECTOR, chunk_size: chunk_sectors * SECTOR as u32,
                             durability: Durability::Immediate, uuid: [3; 16], created_unix_s: 1 };
            let mut b = h.encode();
            prop_assume!(b[at] != value);
            b[at] = value;
            prop_assert!(Header::decode(&b, "fuzz").is_err());
        }
    }
}

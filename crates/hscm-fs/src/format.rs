//! Where things are on the target (docs/fs-format.md): two superblocks, the log, two
//! checkpoint slots, then data blocks; and the superblock's and the log records'
//! encodings, each with a CRC-32C so that a torn write is found, never believed.

use crate::{Error, Result};
use hscm_durable::codec::{Dec, Enc};

/// The block size of data and of the layout.
pub const BLOCK: u64 = 4096;
/// The newest on-target format this code reads and writes.
pub const FORMAT_VERSION: u32 = 1;
const MAGIC: &[u8; 8] = b"HSCMFS\0\x01";
const RECORD_MAGIC: u32 = 0x4c47_5346; // "FSGL"
/// A record's header: magic, payload length, sequence number, CRC.
pub(crate) const RECORD_HEADER: u64 = 4 + 4 + 8 + 4;

/// The layout of a target of a given size, in blocks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Geometry {
    pub total_blocks: u64,
    /// The log: blocks [2, 2 + log_blocks).
    pub log_blocks: u64,
    /// Each of the two checkpoint slots.
    pub checkpoint_blocks: u64,
}

impl Geometry {
    /// The layout for `size` bytes: a log of 1/64 of the target (1-64 MiB) and two
    /// checkpoint slots of 1/32 each (1-256 MiB).
    pub fn for_size(size: u64) -> Result<Geometry> {
        let total_blocks = size / BLOCK;
        let log_blocks = (total_blocks / 64).clamp(256, 16 << 10);
        let checkpoint_blocks = (total_blocks / 32).clamp(256, 64 << 10);
        let g = Geometry {
            total_blocks,
            log_blocks,
            checkpoint_blocks,
        };
        if g.data_start() + 16 > total_blocks {
            return Err(Error::Invalid(format!(
                "{size} bytes is too small for a file system (at least {} KiB)",
                (g.data_start() + 16) * BLOCK / 1024
            )));
        }
        Ok(g)
    }

    pub fn log_offset(&self) -> u64 {
        2 * BLOCK
    }
    pub fn log_len(&self) -> u64 {
        self.log_blocks * BLOCK
    }
    pub fn checkpoint_offset(&self, slot: u32) -> u64 {
        (2 + self.log_blocks + u64::from(slot) * self.checkpoint_blocks) * BLOCK
    }
    pub fn checkpoint_len(&self) -> u64 {
        self.checkpoint_blocks * BLOCK
    }
    /// The first data block.
    pub fn data_start(&self) -> u64 {
        2 + self.log_blocks + 2 * self.checkpoint_blocks
    }
    pub fn data_blocks(&self) -> u64 {
        self.total_blocks - self.data_start()
    }
}

/// Whether `block` starts with a superblock's magic: how a volume holding this file
/// system is recognised without mounting it (either copy may be torn, so a caller
/// checks both).
pub fn looks_formatted(block: &[u8]) -> bool {
    block.starts_with(MAGIC)
}

/// One superblock copy. Copy `slot` (0 or 1, at block `slot`) describes checkpoint
/// slot `slot`; a mount takes the valid copy with the highest generation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Superblock {
    pub version: u32,
    pub geometry: Geometry,
    pub generation: u64,
    pub slot: u32,
    pub checkpoint_len: u64,
    pub checkpoint_crc: u32,
    /// The sequence number of the first log record after this checkpoint.
    pub next_seq: u64,
}

/// The checksummed part of a superblock: magic, version, geometry, generation,
/// slot, checkpoint length and checksum, next sequence number.
pub(crate) const SUPERBLOCK_BODY: usize = 8 + 4 + 8 * 3 + 8 + 4 + 8 + 4 + 8;

impl Superblock {
    pub fn encode(&self) -> Vec<u8> {
        let mut e = Enc::default();
        e.0.extend_from_slice(MAGIC);
        e.u32(self.version)
            .u64(self.geometry.total_blocks)
            .u64(self.geometry.log_blocks)
            .u64(self.geometry.checkpoint_blocks)
            .u64(self.generation)
            .u32(self.slot)
            .u64(self.checkpoint_len)
            .u32(self.checkpoint_crc)
            .u64(self.next_seq);
        e.seal();
        e.0.resize(BLOCK as usize, 0);
        e.0
    }

    /// The superblock in `block`, or why there is none: `NotFormatted` without the
    /// magic, `NewerFormat`, or `Corrupt` (a torn or damaged copy).
    pub fn decode(block: &[u8]) -> Result<Superblock> {
        if block.len() < 8 || &block[..8] != MAGIC {
            return Err(Error::NotFormatted);
        }
        let mut d = Dec::new(&block[8..], "the superblock");
        let version = d.u32()?;
        let geometry = Geometry {
            total_blocks: d.u64()?,
            log_blocks: d.u64()?,
            checkpoint_blocks: d.u64()?,
        };
        let (generation, slot) = (d.u64()?, d.u32()?);
        let (checkpoint_len, checkpoint_crc, next_seq) = (d.u64()?, d.u32()?, d.u64()?);
        d.u32()?; // the seal, checked over the whole body just below
        let intact = hscm_durable::codec::sealed(block, SUPERBLOCK_BODY);
        // A version this hscm does not know is believed only from an intact copy: a
        // damaged byte must not send the user looking for a newer hscm.
        match (version > FORMAT_VERSION, intact) {
            (true, true) => {
                return Err(Error::NewerFormat {
                    found: version,
                    supported: FORMAT_VERSION,
                })
            }
            (true, false) => {
                return Err(Error::Corrupt(format!(
                    "superblock checksum mismatch (it says format version {version}: damaged, or written by a newer hscm in another layout)"
                )))
            }
            (false, false) => {
                return Err(Error::Corrupt("superblock checksum mismatch".into()))
            }
            (false, true) => {}
        }
        if slot > 1 || checkpoint_len > geometry.checkpoint_len() {
            return Err(Error::Corrupt("superblock fields out of range".into()));
        }
        Ok(Superblock {
            version,
            geometry,
            generation,
            slot,
            checkpoint_len,
            checkpoint_crc,
            next_seq,
        })
    }
}

/// A log record: header and payload.
pub(crate) fn encode_record(seq: u64, payload: &[u8]) -> Vec<u8> {
    let mut e = Enc::default();
    e.u32(RECORD_MAGIC).u32(payload.len() as u32).u64(seq);
    let mut crc = crc32c::crc32c(&e.0[4..]);
    crc = crc32c::crc32c_append(crc, payload);
    e.u32(crc);
    e.0.extend_from_slice(payload);
    e.0
}

/// The record at the start of `log` if it is whole, has sequence number `seq` and
/// checks out: its payload and length. None marks the end of the log (a torn record,
/// an older one left from before the last checkpoint, or never-written space).
pub(crate) fn decode_record(log: &[u8], seq: u64) -> Option<(&[u8], u64)> {
    let header = log.get(..RECORD_HEADER as usize)?;
    let mut d = Dec::new(header, "a log record's header");
    let magic = d.u32().ok()?;
    let len = d.u32().ok()? as usize;
    let found_seq = d.u64().ok()?;
    let crc = d.u32().ok()?;
    if magic != RECORD_MAGIC || found_seq != seq {
        return None;
    }
    let payload = log.get(RECORD_HEADER as usize..RECORD_HEADER as usize + len)?;
    let want = crc32c::crc32c_append(crc32c::crc32c(&header[4..16]), payload);
    (want == crc).then_some((payload, RECORD_HEADER + len as u64))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_superblock_reads_back_and_a_torn_one_is_caught() {
        let sb = Superblock {
            version: FORMAT_VERSION,
            geometry: Geometry::for_size(64 << 20).unwrap(),
            generation: 7,
            slot: 1,
            checkpoint_len: 100,
            checkpoint_crc: 5,
            next_seq: 42,
        };
        let mut bytes = sb.encode();
        assert_eq!(Superblock::decode(&bytes).unwrap(), sb);
        bytes[20] ^= 1;
        assert!(matches!(Superblock::decode(&bytes), Err(Error::Corrupt(_))));
        assert!(matches!(
            Superblock::decode(&[0u8; 4096]),
            Err(Error::NotFormatted)
        ));
        let mut newer = sb;
        newer.version = FORMAT_VERSION + 1;
        assert!(matches!(
            Superblock::decode(&newer.encode()),
            Err(Error::NewerFormat { .. })
        ));
    }

    #[test]
    fn a_record_reads_back_only_whole_and_with_its_own_sequence_number() {
        let r = encode_record(9, b"payload");
        assert_eq!(
            decode_record(&r, 9),
            Some((&b"payload"[..], r.len() as u64))
        );
        assert_eq!(decode_record(&r, 10), None, "an older record ends the log");
        assert_eq!(decode_record(&r[..r.len() - 1], 9), None, "a short one");
        let mut torn = r.clone();
        *torn.last_mut().unwrap() ^= 0xff;
        assert_eq!(decode_record(&torn, 9), None, "a torn one");
    }
}

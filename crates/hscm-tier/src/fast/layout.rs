//! The fast tier's device: what is where, and the per-slot records.
//!
//! ```text
//! 0       header page: magic HSCMFAST, version, block, slots, volume id, CRC-32C
//! 4096    state page: clean-close flag, durable-sequence watermark, CRC-32C
//! 8192    records: 32 bytes per slot (block, sequence, state, data CRC, record CRC)
//! ...     slots: `slots` blocks of data, page-aligned
//! ```
//!
//! A record is 32 bytes and never straddles a 512-byte sector, and records are written
//! a 4 KiB page at a time (the unit direct I/O takes) from an in-memory mirror of the
//! table, so a power cut (which may tear a write only at a 512-byte boundary:
//! `hscm_durable::media`) leaves each record either old or new, never a mix; the other
//! records of the page are rewritten with the bytes they already hold.

use hscm_durable::codec::{seal_at, sealed, Dec, Enc};
use hscm_durable::device::{AlignedBuf, Backend};

pub(crate) const MAGIC: &[u8; 8] = b"HSCMFAST";
const STATE_MAGIC: &[u8; 8] = b"HSCMFSTA";
const VERSION: u32 = 1;
const PAGE: u64 = 4096;
/// The unit of a record or state write (direct I/O's alignment).
pub(crate) const IO_ALIGN: usize = hscm_durable::device::IO_ALIGN as usize;
/// The unit a power cut tears at; a record never straddles one.
const TEAR: usize = 512;
pub(crate) const RECORD: usize = 32;
const STATE_AT: u64 = PAGE;
const RECORDS_AT: u64 = 2 * PAGE;

/// A slot's record says what the slot holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum SlotState {
    /// Nothing to recover.
    Free,
    /// A copy of what home holds.
    Clean,
    /// A version home does not hold yet: the only durable copy.
    Dirty,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Record {
    pub block: u64,
    pub seq: u64,
    pub state: SlotState,
    /// CRC-32C of the slot's bytes (checked at recovery for records newer than the
    /// durable watermark: a torn data write fails it).
    pub data_crc: u32,
}

impl Record {
    pub(crate) const FREE: Record = Record {
        block: 0,
        seq: 0,
        state: SlotState::Free,
        data_crc: 0,
    };

    /// 32 bytes: block, sequence, state (then 3 bytes of padding), the data's CRC
    /// (then 4 bytes of padding), sealed with the CRC-32C of the first 28.
    pub(crate) fn encode(&self, out: &mut [u8]) {
        let mut e = Enc::default();
        e.u64(self.block)
            .u64(self.seq)
            .u8(match self.state {
                SlotState::Free => 0,
                SlotState::Clean => 1,
                SlotState::Dirty => 2,
            })
            .raw(&[0; 3])
            .u32(self.data_crc)
            .raw(&[0; 4])
            .seal();
        out[..RECORD].copy_from_slice(&e.0);
    }

    /// None for a record whose checksum fails (never written, or damaged), or that is
    /// shorter than a record.
    pub(crate) fn decode(bytes: &[u8]) -> Option<Record> {
        if !sealed(bytes, RECORD - 4) {
            return None;
        }
        let mut d = Dec::new(bytes, "a fast-tier record");
        let (block, seq) = (d.u64().ok()?, d.u64().ok()?);
        let state = match d.u8().ok()? {
            0 => SlotState::Free,
            1 => SlotState::Clean,
            2 => SlotState::Dirty,
            _ => return None,
        };
        d.raw(3).ok()?;
        Some(Record {
            block,
            seq,
            state,
            data_crc: d.u32().ok()?,
        })
    }
}

/// Geometry of one fast device.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Layout {
    pub block: u32,
    /// Physical slots: the policy's capacity plus a reserve, because a write never
    /// overwrites the only durable copy of a block and a replaced slot is reused only
    /// once its replacement is durable.
    pub slots: u32,
    /// Pairs the device with its volume (the same number is in the home header).
    pub id: u64,
}

impl Layout {
    /// Slots for a tier caching `capacity_blocks` blocks.
    pub(crate) fn for_capacity(block: u32, capacity_blocks: u64, id: u64) -> Layout {
        let reserve = (capacity_blocks / 16).max(16);
        Layout {
            block,
            slots: (capacity_blocks + reserve).min(u64::from(u32::MAX)) as u32,
            id,
        }
    }

    pub(crate) fn records_len(&self) -> u64 {
        (self.slots as u64 * RECORD as u64).next_multiple_of(PAGE)
    }

    pub(crate) fn data_offset(&self) -> u64 {
        RECORDS_AT + self.records_len()
    }

    pub(crate) fn slot_offset(&self, slot: u32) -> u64 {
        self.data_offset() + slot as u64 * u64::from(self.block)
    }

    /// Bytes the device needs.
    pub(crate) fn device_len(&self) -> u64 {
        self.slot_offset(self.slots)
    }

    /// The byte offset of the sector holding `slot`'s record, and the record's place
    /// in the table mirror.
    pub(crate) fn record_sector(&self, slot: u32) -> (u64, usize) {
        let at = slot as usize * RECORD;
        let sector = at / IO_ALIGN * IO_ALIGN;
        (RECORDS_AT + sector as u64, sector)
    }

    /// The header page: magic, version, block, slots, 4 bytes of padding, the volume
    /// id, zeroes, and the CRC-32C of all before it in the page's last 4 bytes.
    pub(crate) fn encode(&self) -> Vec<u8> {
        let n = PAGE as usize;
        let mut e = Enc::default();
        e.raw(MAGIC)
            .u32(VERSION)
            .u32(self.block)
            .u32(self.slots)
            .raw(&[0; 4])
            .u64(self.id);
        let mut h = e.0;
        h.resize(n, 0);
        seal_at(&mut h, n - 4);
        h
    }

    pub(crate) fn decode(h: &[u8]) -> Result<Layout, String> {
        let n = PAGE as usize;
        if h.len() < n || !h.starts_with(MAGIC) {
            return Err("no HSCMFAST magic in its first bytes: not a fast tier".into());
        }
        if !sealed(h, n - 4) {
            return Err("its header fails its checksum".into());
        }
        let mut d = Dec::new(&h[MAGIC.len()..], "the fast tier's header");
        let field = |r: Result<u32, hscm_durable::codec::CodecError>| r.map_err(|e| e.to_string());
        let version = field(d.u32())?;
        if version != VERSION {
            return Err(format!(
                "format version {version}; this build reads {VERSION}"
            ));
        }
        let (block, slots) = (field(d.u32())?, field(d.u32())?);
        d.raw(4).map_err(|e| e.to_string())?;
        Ok(Layout {
            block,
            slots,
            id: d.u64().map_err(|e| e.to_string())?,
        })
    }
}

/// The state page: whether the last session closed cleanly (then clean records are
/// trusted too), and a sequence number at or below which every record's data is
/// durable (so recovery checks data checksums only above it).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct State {
    pub clean: bool,
    pub durable_seq: u64,
}

impl State {
    /// Its bytes: everything, checksum included, in the first 512 bytes, so a torn
    /// write leaves the old state or the new.
    pub(crate) fn encode(&self) -> AlignedBuf {
        let mut e = Enc::default();
        e.raw(STATE_MAGIC)
            .u8(u8::from(self.clean))
            .raw(&[0; 7])
            .u64(self.durable_seq);
        let mut s = AlignedBuf::zeroed(IO_ALIGN);
        s[..e.0.len()].copy_from_slice(&e.0);
        seal_at(&mut s, TEAR - 4);
        s
    }

    /// A damaged or missing state reads as "not clean, nothing known durable":
    /// recovery then trusts only dirty records whose data checksums hold.
    pub(crate) fn decode(s: &[u8]) -> State {
        Self::fields(s).unwrap_or_default()
    }

    fn fields(s: &[u8]) -> Option<State> {
        let mut d = Dec::new(s, "the fast tier's state");
        if d.raw(8).ok()? != STATE_MAGIC || !sealed(s, TEAR - 4) {
            return None;
        }
        let clean = d.u8().ok()? == 1;
        d.raw(7).ok()?;
        Some(State {
            clean,
            durable_seq: d.u64().ok()?,
        })
    }

    pub(crate) fn write(&self, dev: &dyn Backend) -> std::io::Result<()> {
        dev.write_at(STATE_AT, &self.encode())
    }

    pub(crate) fn read(dev: &dyn Backend) -> std::io::Result<State> {
        let mut s = AlignedBuf::zeroed(IO_ALIGN);
        dev.read_at(STATE_AT, &mut s)?;
        Ok(State::decode(&s))
    }
}

/// Reads the record table (one request).
pub(crate) fn read_table(dev: &dyn Backend, layout: &Layout) -> std::io::Result<AlignedBuf> {
    let mut t = AlignedBuf::zeroed(layout.records_len() as usize);
    dev.read_at(RECORDS_AT, &mut t)?;
    Ok(t)
}

/// Writes the whole record table (one request).
pub(crate) fn write_table(dev: &dyn Backend, table: &AlignedBuf) -> std::io::Result<()> {
    dev.write_at(RECORDS_AT, table)
}

/// The fast tier's geometry lives here, beside the layout, so the header (which only
/// records the configuration) does not depend on the fast tier's code.
impl crate::header::FastConfig {
    /// The device's geometry for blocks of `block` bytes.
    pub(crate) fn layout(&self, block: u32) -> Layout {
        Layout::for_capacity(block, self.size / u64::from(block), self.id)
    }

    /// Bytes the fast device needs for blocks of `block` bytes.
    pub fn device_len(&self, block: u32) -> u64 {
        self.layout(block).device_len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_round_trip_and_a_damaged_one_reads_as_none() {
        let r = Record {
            block: 77,
            seq: 9,
            state: SlotState::Dirty,
            data_crc: 0xdead_beef,
        };
        let mut b = [0u8; RECORD];
        r.encode(&mut b);
        assert_eq!(Record::decode(&b), Some(r));
        b[3] ^= 1;
        assert_eq!(Record::decode(&b), None);
        assert_eq!(Record::decode(&[0u8; RECORD]), None);
    }

    #[test]
    fn records_never_straddle_a_sector() {
        let l = Layout::for_capacity(4096, 1000, 1);
        for slot in 0..l.slots {
            let (_, sector) = l.record_sector(slot);
            let at = slot as usize * RECORD;
            assert!(at >= sector && at + RECORD <= sector + IO_ALIGN);
            assert_eq!(at / TEAR, (at + RECORD - 1) / TEAR);
        }
        assert_eq!(l.data_offset() % 4096, 0);
        assert_eq!(Layout::decode(&l.encode()), Ok(l));
    }

    #[test]
    fn the_state_sector_round_trips_and_damage_means_unclean() {
        let s = State {
            clean: true,
            durable_seq: 41,
        };
        let mut b = s.encode();
        assert_eq!(State::decode(&b), s);
        b[20] ^= 1;
        assert_eq!(State::decode(&b), State::default());
    }
}

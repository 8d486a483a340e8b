//! The write-ahead journal: on-media records and recovery.
//!
//! Layout (docs/format.md, version 2): two checkpoint slots (4 KiB each) after the
//! header, then a circular journal region of `journal_len` bytes, then the data area.
//! Writes to loaded chunks are appended to the journal in batches (one sequential
//! device write for many writers); a checkpoint later writes the dirty sectors to their
//! home locations, syncs, and records in a checkpoint slot where replay must start.
//!
//! Positions in the journal are monotone byte counts ("log positions"); the physical
//! offset is `position % journal_len`. A batch never straddles the region's end: one
//! that would start less than [`max_batch`] bytes before the end starts at the next lap
//! instead ([`place`]). Writer and recovery apply the same rule, so recovery can walk
//! the chain of batches without any pointer stored between them.

use std::collections::BTreeMap;

use hscm_durable::codec::{newest, sealed, Dec, Enc};

use crate::backend::IO_ALIGN;
use crate::backend::{AlignedBuf, Backend};
use crate::error::{Error, Result};
use crate::header::Header;
pub use crate::header::{JOURNAL_OFFSET, MIN_JOURNAL};

/// Where the two checkpoint slots live (backing offsets).
pub(crate) const CHECKPOINT_SLOTS: [u64; 2] = [4096, 8192];
/// The largest batch: bounds one device write and the region's unused tail.
const MAX_BATCH_CAP: u64 = 4 << 20;

const BATCH_MAGIC: [u8; 8] = *b"HSCMJNL\0";
const CHECKPOINT_MAGIC: [u8; 8] = *b"HSCMCKP\0";
/// A checkpoint record's sealed body: magic, UUID and four fields (its CRC-32C follows).
const CHECKPOINT_BODY: usize = 8 + 16 + 4 * 8;
/// Bytes of a batch descriptor before its entries.
const DESCRIPTOR_FIXED: usize = 64;
/// Where a batch's checksum lies in its descriptor.
const CRC_AT: usize = 56;
const ENTRY_LEN: usize = 16;
/// Records one batch can describe.
pub(crate) const MAX_ENTRIES: usize = (IO_ALIGN as usize - DESCRIPTOR_FIXED) / ENTRY_LEN;

/// The largest batch (descriptor included) for a journal of `journal_len` bytes.
pub(crate) fn max_batch(journal_len: u64) -> u64 {
    (journal_len / 4).min(MAX_BATCH_CAP) / IO_ALIGN * IO_ALIGN
}

/// The largest record payload one batch carries.
pub(crate) fn max_payload(journal_len: u64) -> u64 {
    max_batch(journal_len) - IO_ALIGN
}

/// Where a batch that follows log position `pos` starts.
pub(crate) fn place(pos: u64, journal_len: u64) -> u64 {
    let off = pos % journal_len;
    if off + max_batch(journal_len) > journal_len {
        pos - off + journal_len
    } else {
        pos
    }
}

/// Where replay starts, as recorded by the last checkpoint. `nonce` names the
/// incarnation: every open for writing starts a new one, so batches left in the region
/// by an earlier incarnation can never be mistaken for current ones.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Checkpoint {
    pub generation: u64,
    pub next_seq: u64,
    pub log_pos: u64,
    pub nonce: u64,
}

impl Checkpoint {
    pub(crate) fn slot(&self) -> u64 {
        CHECKPOINT_SLOTS[(self.generation % 2) as usize]
    }

    /// The record: magic, the volume's UUID, the four fields, sealed with a CRC-32C
    /// (hscm-durable's double-slot rule), in one aligned block.
    pub(crate) fn encode(&self, uuid: &[u8; 16]) -> AlignedBuf {
        let mut e = Enc::default();
        e.raw(&CHECKPOINT_MAGIC)
            .raw(uuid)
            .u64(self.generation)
            .u64(self.next_seq)
            .u64(self.log_pos)
            .u64(self.nonce)
            .seal();
        let mut b = AlignedBuf::zeroed(IO_ALIGN as usize);
        b[..e.0.len()].copy_from_slice(&e.0);
        b
    }

    /// Writes the record to its slot and syncs: durable when this returns Ok.
    pub(crate) fn persist(&self, backend: &dyn Backend, uuid: &[u8; 16]) -> std::io::Result<()> {
        backend.write_at(self.slot(), &self.encode(uuid))?;
        backend.sync()
    }

    /// None if the block is not a valid checkpoint of this volume (torn, never written).
    pub(crate) fn decode(b: &[u8], uuid: &[u8; 16]) -> Option<Checkpoint> {
        let mut d = Dec::new(b, "a checkpoint record");
        if d.raw(8).ok()? != CHECKPOINT_MAGIC || d.raw(16).ok()? != uuid {
            return None;
        }
        if !sealed(b, CHECKPOINT_BODY) {
            return None;
        }
        Some(Checkpoint {
            generation: d.u64().ok()?,
            next_seq: d.u64().ok()?,
            log_pos: d.u64().ok()?,
            nonce: d.u64().ok()?,
        })
    }
}

/// One write in a batch: whole sectors at a sector-aligned volume offset.
pub(crate) struct Entry {
    pub offset: u64,
    pub len: u64,
}

/// Builds a batch: descriptor, then every payload in order, checksummed together.
pub(crate) fn encode_batch(
    uuid: &[u8; 16],
    nonce: u64,
    seq: u64,
    log_pos: u64,
    payloads: &[(u64, &[u8])],
) -> AlignedBuf {
    assert!(
        payloads.len() <= MAX_ENTRIES,
        "too many records for one batch"
    );
    let total: usize = IO_ALIGN as usize + payloads.iter().map(|(_, p)| p.len()).sum::<usize>();
    let mut e = Enc(Vec::with_capacity(IO_ALIGN as usize));
    e.raw(&BATCH_MAGIC)
        .raw(uuid)
        .u64(nonce)
        .u64(seq)
        .u64(log_pos)
        .u32(total as u32)
        .u32(payloads.len() as u32)
        .u32(0) // the checksum, over the whole batch with this field zero
        .raw(&[0; DESCRIPTOR_FIXED - 60]);
    for (offset, data) in payloads {
        e.u64(*offset).u64(data.len() as u64);
    }
    let mut b = AlignedBuf::zeroed(total);
    b[..e.0.len()].copy_from_slice(&e.0);
    let mut at = IO_ALIGN as usize;
    for (_, data) in payloads {
        b[at..at + data.len()].copy_from_slice(data);
        at += data.len();
    }
    let crc = crc32c::crc32c(&b);
    e.0.truncate(0);
    e.u32(crc);
    b[CRC_AT..CRC_AT + 4].copy_from_slice(&e.0);
    b
}

/// What a batch descriptor promises, if it is one of the expected batch.
fn decode_descriptor(
    d: &[u8],
    header: &Header,
    ck: &Checkpoint,
    seq: u64,
    pos: u64,
) -> Option<(u64, Vec<Entry>)> {
    let mut fields = Dec::new(d, "a journal batch descriptor");
    if fields.raw(8).ok()? != BATCH_MAGIC
        || fields.raw(16).ok()? != header.uuid
        || fields.u64().ok()? != ck.nonce
        || fields.u64().ok()? != seq
        || fields.u64().ok()? != pos
    {
        return None;
    }
    let (total, count) = (fields.u32().ok()?, fields.u32().ok()?);
    let total = u64::from(total);
    let count = count as usize;
    if total < IO_ALIGN || total > max_batch(header.journal_len) || total % IO_ALIGN != 0 {
        return None;
    }
    if count > MAX_ENTRIES {
        return None;
    }
    let mut entries = Vec::with_capacity(count);
    let mut sum = IO_ALIGN;
    let mut table = Dec::new(d.get(DESCRIPTOR_FIXED..)?, "a journal batch's entries");
    for _ in 0..count {
        let (offset, len) = (table.u64().ok()?, table.u64().ok()?);
        let end = offset.checked_add(len)?;
        if offset % IO_ALIGN != 0 || len == 0 || len % IO_ALIGN != 0 || end > header.volume_size {
            return None;
        }
        sum = sum.checked_add(len)?;
        entries.push(Entry { offset, len });
    }
    (sum == total).then_some((total, entries))
}

/// What recovery found in the journal.
pub(crate) struct Replay {
    /// The checkpoint replay started from.
    pub checkpoint: Checkpoint,
    /// Valid batches found after it.
    pub batches: u64,
    /// Their effect, latest write wins: sector offset → 4 KiB of data.
    pub sectors: BTreeMap<u64, Box<[u8]>>,
    /// The sequence number and log position after the last valid batch.
    pub next_seq: u64,
    pub end_pos: u64,
}

/// Reads both checkpoint slots and returns the newest valid one.
pub(crate) fn read_checkpoint(backend: &dyn Backend, header: &Header) -> Result<Checkpoint> {
    let mut slots = [None, None];
    for (found, slot) in slots.iter_mut().zip(CHECKPOINT_SLOTS) {
        let mut b = AlignedBuf::zeroed(IO_ALIGN as usize);
        backend.read_at(slot, &mut b).map_err(|e| {
            Error::io(
                format!(
                    "cannot read the checkpoint slot at {slot} of {}",
                    backend.describe()
                ),
                e,
            )
        })?;
        *found = Checkpoint::decode(&b, &header.uuid);
    }
    newest(slots, |ck| ck.generation).ok_or_else(|| Error::CorruptCheckpoint {
        path: backend.describe(),
    })
}

/// Walks the chain of batches after the newest checkpoint.
pub(crate) fn scan(backend: &dyn Backend, header: &Header) -> Result<Replay> {
    let ck = read_checkpoint(backend, header)?;
    let j = header.journal_len;
    let mut replay = Replay {
        checkpoint: ck,
        batches: 0,
        sectors: BTreeMap::new(),
        next_seq: ck.next_seq,
        end_pos: ck.log_pos,
    };
    let read = |pos: u64, buf: &mut [u8]| {
        backend.read_at(JOURNAL_OFFSET + pos % j, buf).map_err(|e| {
            Error::io(
                format!(
                    "cannot read the journal of {} at log position {pos}",
                    backend.describe()
                ),
                e,
            )
        })
    };
    loop {
        let pos = place(replay.end_pos, j);
        // A valid chain never holds more than one region's worth past the checkpoint.
        if pos + IO_ALIGN - ck.log_pos > j {
            break;
        }
        let mut desc = AlignedBuf::zeroed(IO_ALIGN as usize);
        read(pos, &mut desc)?;
        let Some((total, entries)) = decode_descriptor(&desc, header, &ck, replay.next_seq, pos)
        else {
            break;
        };
        if pos + total - ck.log_pos > j {
            break;
        }
        let mut payload = AlignedBuf::zeroed((total - IO_ALIGN) as usize);
        if total > IO_ALIGN {
            read(pos + IO_ALIGN, &mut payload)?;
        }
        let mut check = desc.to_vec();
        check[CRC_AT..CRC_AT + 4].fill(0);
        let Ok(stored) = Dec::new(&desc[CRC_AT..], "a journal batch's checksum").u32() else {
            break;
        };
        let crc = crc32c::crc32c_append(
            crc32c::crc32c(&check),
            &payload[..(total - IO_ALIGN) as usize],
        );
        if crc != stored {
            break;
        }
        let mut at = 0usize;
        for e in entries {
            for s in 0..e.len / IO_ALIGN {
                let from = at + (s * IO_ALIGN) as usize;
                replay.sectors.insert(
                    e.offset + s * IO_ALIGN,
                    payload[from..from + IO_ALIGN as usize].into(),
                );
            }
            at += e.len as usize;
        }
        replay.batches += 1;
        replay.next_seq += 1;
        replay.end_pos = pos + total;
    }
    Ok(replay)
}

/// Groups sorted sectors into runs of consecutive ones, each copied into one buffer.
pub(crate) fn runs_of(sectors: &BTreeMap<u64, Box<[u8]>>) -> Vec<(u64, AlignedBuf)> {
    let mut runs: Vec<(u64, Vec<&[u8]>)> = Vec::new();
    for (&off, data) in sectors {
        match runs.last_mut() {
            Some((start, parts)) if *start + parts.len() as u64 * IO_ALIGN == off => {
                parts.push(data)
            }
            _ => runs.push((off, vec![data])),
        }
    }
    runs.into_iter()
        .map(|(start, parts)| {
            let mut b = AlignedBuf::zeroed(parts.len() * IO_ALIGN as usize);
            for (i, p) in parts.iter().enumerate() {
                b[i * IO_ALIGN as usize..(i + 1) * IO_ALIGN as usize].copy_from_slice(p);
            }
            (start, b)
        })
        .collect()
}

/// A fresh random incarnation number.
pub(crate) fn new_nonce() -> u64 {
    let b = *uuid::Uuid::new_v4().as_bytes();
    Dec::new(&b, "a random UUID").u64().expect("16 bytes")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A batch's bytes as docs/format.md lays them out (a CRC-32C of the whole batch
    /// stands for them): what journals on disk hold, so no change of the code may move
    /// them.
    #[test]
    fn a_batch_is_the_documented_layout() {
        let one = vec![0x11u8; IO_ALIGN as usize];
        let two = vec![0x22u8; 2 * IO_ALIGN as usize];
        let b = encode_batch(
            &[5; 16],
            0xaabb_ccdd_eeff_0011,
            7,
            3 << 12,
            &[(8192, &one), (1 << 20, &two)],
        );
        assert_eq!(b.len(), 4 * IO_ALIGN as usize);
        assert_eq!(crc32c::crc32c(&b), 0x0ad3_4a0a);
    }

    use crate::testing::FaultyBackend;
    use crate::Durability;
    use proptest::prelude::*;

    fn header() -> Header {
        Header {
            volume_size: 1 << 20,
            chunk_size: 1 << 16,
            durability: Durability::Immediate,
            uuid: [9; 16],
            created_unix_s: 0,
            version: crate::FORMAT_VERSION,
            journal_len: MIN_JOURNAL,
        }
    }

    /// A device holding a valid first checkpoint and `journal` in the journal region.
    fn device(h: &Header, ck: &Checkpoint, journal: &[u8]) -> FaultyBackend {
        let dev = FaultyBackend::new((h.backing_len()) as usize, "scan-dev");
        dev.write_at(ck.slot(), &ck.encode(&h.uuid)).unwrap();
        dev.write_at(JOURNAL_OFFSET, journal).unwrap();
        dev
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(300))]
        /// Garbage in the journal region never panics recovery and never replays.
        #[test]
        fn garbage_journals_replay_nothing(bytes in proptest::collection::vec(any::<u8>(), 0..12288)) {
            let (h, ck) = (header(), Checkpoint { generation: 0, next_seq: 1, log_pos: 0, nonce: 5 });
            let r = scan(&device(&h, &ck, &bytes), &h).unwrap();
            prop_assert_eq!(r.batches, 0);
        }

        /// A valid batch with any one descriptor byte changed is refused whole (the
        /// entry table, the counts and positions are all checked or checksummed).
        #[test]
        fn a_damaged_descriptor_is_refused(at in 0usize..64 + 16, value in any::<u8>()) {
            let (h, ck) = (header(), Checkpoint { generation: 0, next_seq: 1, log_pos: 0, nonce: 5 });
            let payload = vec![7u8; IO_ALIGN as usize];
            let good = encode_batch(&h.uuid, ck.nonce, 1, 0, &[(8192, &payload)]);
            prop_assert_eq!(scan(&device(&h, &ck, &good), &h).unwrap().batches, 1);
            let mut bad = good.to_vec();
            prop_assume!(bad[at] != value);
            bad[at] = value;
            prop_assert_eq!(scan(&device(&h, &ck, &bad), &h).unwrap().batches, 0);
        }
    }

    #[test]
    fn placement_never_straddles_the_end() {
        let j = MIN_JOURNAL;
        let mb = max_batch(j);
        for pos in (0..4 * j).step_by(IO_ALIGN as usize) {
            let p = place(pos, j);
            assert!(p >= pos && p - pos < mb.max(IO_ALIGN));
            assert!(p % j + mb <= j, "batch at {p} could cross the end");
        }
    }

    #[test]
    fn checkpoint_round_trips_and_rejects_other_volumes_and_flips() {
        let ck = Checkpoint {
            generation: 9,
            next_seq: 77,
            log_pos: 123 * IO_ALIGN,
            nonce: 0xfeed,
        };
        let enc = ck.encode(&[1; 16]);
        assert_eq!(Checkpoint::decode(&enc, &[1; 16]), Some(ck));
        assert_eq!(Checkpoint::decode(&enc, &[2; 16]), None);
        for byte in 0..60 {
            let mut b = enc.to_vec();
            b[byte] ^= 4;
            assert_eq!(Checkpoint::decode(&b, &[1; 16]), None, "byte {byte}");
        }
    }
}

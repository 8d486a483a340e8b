//! The metadata log: records appended in whole blocks, one commit at a time, and
//! the checkpoint that starts it over (docs/fs-format.md). Every append writes whole
//! blocks (the last block's earlier bytes again, unchanged, then the records, then
//! zeroes), so the device never reads a block to merge a record into it, and a
//! write torn at any sector leaves the records before it intact.

use hscm_block::{BlockTarget, WriteFlags};

use super::FileSystem;
use crate::format::{self, Geometry, Superblock, BLOCK, FORMAT_VERSION};
use crate::Result;

pub(super) struct LogWriter {
    /// Where the next record goes, from the log's start.
    pub(super) at: u64,
    pub(super) generation: u64,
    pub(super) slot: u32,
    /// The log's bytes from the start of `at`'s block to `at`: each append writes
    /// whole blocks (these bytes again, then the records, then zeroes), so the
    /// device never reads a block to merge a record into it.
    pub(super) tail: Vec<u8>,
}

impl FileSystem {
    /// Makes every operation up to record `seq` durable: data first (so no record
    /// maps a block whose data could be lost), then the records, then a sync. One
    /// commit at a time; a writer whose record an earlier commit took just waits.
    pub(crate) fn commit(&self, seq: u64) -> Result<()> {
        let mut log = self.log.lock();
        if self.state.read().durable_seq >= seq {
            return Ok(());
        }
        self.refuse_if_failed()?;
        let (records, data_first) = {
            let mut st = self.state.write();
            let data_first = std::mem::take(&mut st.data_first);
            (std::mem::take(&mut st.unwritten), data_first)
        };
        let Some(&(last, _)) = records.last() else {
            // Only in-place data to sync.
            return self.sync();
        };
        if data_first {
            self.sync()?;
        }
        let framed: Vec<u8> = records
            .iter()
            .flat_map(|(s, payload)| format::encode_record(*s, payload))
            .collect();
        if log.at + framed.len() as u64 + format::RECORD_HEADER > self.geometry.log_len() {
            // The log is full: a checkpoint holds these records' effects instead.
            return self.checkpoint(&mut log);
        }
        // Whole blocks: the tail of the block `at` is in, the records, zeroes (which
        // no replay reads as a record). The tail's bytes are written again as they
        // are, so a write torn at any sector leaves the records before intact.
        let block_start = log.at - log.tail.len() as u64;
        let new_at = log.at + framed.len() as u64;
        let mut whole = std::mem::take(&mut log.tail);
        whole.extend_from_slice(&framed);
        let keep = (new_at % BLOCK) as usize;
        let new_tail = whole[whole.len() - keep..].to_vec();
        let padded = (whole.len() as u64)
            .next_multiple_of(BLOCK)
            .min(self.geometry.log_len() - block_start);
        whole.resize(padded as usize, 0);
        let offset = self.geometry.log_offset() + block_start;
        if let Err(e) = self.target.write_at(offset, &whole, WriteFlags::NONE) {
            let why = format!("writing {} log records: {e}", records.len());
            return Err(self.fail(why, Some(e.errno())));
        }
        log.at = new_at;
        log.tail = new_tail;
        self.sync()?;
        let _no_write_in_flight = self.in_place.write();
        let mut st = self.state.write();
        st.durable_seq = last;
        st.alloc.durable(last);
        Ok(())
    }

    /// Commits everything done so far (fsync; any fsync commits everything).
    pub fn sync_all(&self) -> Result<()> {
        let seq = self.state.read().next_seq - 1;
        self.commit(seq)?;
        // In-place writes since the last commit.
        self.sync()
    }

    pub(super) fn sync(&self) -> Result<()> {
        self.target
            .flush()
            .map_err(|e| self.fail(format!("syncing the target: {e}"), Some(e.errno())))
    }

    /// Writes the whole metadata to the spare checkpoint slot and points the spare
    /// superblock at it; the log starts over. Called with the log held.
    pub(super) fn checkpoint(&self, log: &mut LogWriter) -> Result<()> {
        let (bytes, through) = {
            let mut st = self.state.write();
            st.unwritten.clear();
            let bytes = st.meta.encode();
            debug_assert_eq!(
                bytes.len() as u64,
                st.meta.encoded_len(),
                "the metadata's kept size is its encoded size"
            );
            (bytes, st.next_seq - 1)
        };
        if bytes.len() as u64 > self.geometry.checkpoint_len() {
            return Err(self.fail(
                format!(
                    "the metadata ({} bytes) outgrew its checkpoint area ({} bytes)",
                    bytes.len(),
                    self.geometry.checkpoint_len()
                ),
                None,
            ));
        }
        let slot = 1 - log.slot;
        let sb = Superblock {
            version: FORMAT_VERSION,
            geometry: self.geometry,
            generation: log.generation + 1,
            slot,
            checkpoint_len: bytes.len() as u64,
            checkpoint_crc: crc32c::crc32c(&bytes),
            next_seq: through + 1,
        };
        let write = |offset: u64, what: &str, bytes: &[u8]| {
            self.target
                .write_at(offset, bytes, WriteFlags::NONE)
                .map_err(|e| self.fail(format!("writing the {what}: {e}"), Some(e.errno())))
        };
        // Data the snapshot maps, then the snapshot, then the superblock naming it.
        self.sync()?;
        write(self.geometry.checkpoint_offset(slot), "checkpoint", &bytes)?;
        self.sync()?;
        write(u64::from(slot) * BLOCK, "superblock", &sb.encode())?;
        self.sync()?;
        log.at = 0;
        log.tail.clear();
        log.generation += 1;
        log.slot = slot;
        let _no_write_in_flight = self.in_place.write();
        let mut st = self.state.write();
        st.durable_seq = through;
        st.alloc.durable(through);
        Ok(())
    }
}

/// The log's bytes from the start of the block `at` is in up to `at`
/// ([`LogWriter::tail`]).
pub(super) fn log_tail(target: &dyn BlockTarget, geometry: &Geometry, at: u64) -> Result<Vec<u8>> {
    let mut tail = vec![0u8; (at % BLOCK) as usize];
    if !tail.is_empty() {
        target.read_at(geometry.log_offset() + at - tail.len() as u64, &mut tail)?;
    }
    Ok(tail)
}

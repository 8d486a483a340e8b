//! Formatting a fast device, and opening one: the scan that rebuilds the map and the
//! dirty set from the records (rule 4 of the module).

use std::sync::Arc;
use std::time::Instant;

use hscm_durable::device::{AlignedBuf, Backend};
use rustc_hash::FxHashMap as HashMap;

use super::layout::{self, Layout, Record, SlotState, State, RECORD};
use super::{Failure, FastTier, Live, Outcome};
use crate::device::Device;
use crate::header::FastConfig;

/// What opening the fast tier found.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize)]
pub struct Recovery {
    /// The last session closed cleanly: clean blocks were trusted too.
    pub clean_close: bool,
    /// Blocks put back in the tier, and how many of them are dirty.
    pub restored: u64,
    pub dirty: u64,
    /// Records whose slot failed its data checksum (a write torn by the cut, never
    /// acknowledged).
    pub torn: u64,
    /// Older dirty records of a block with a newer version, cleared.
    pub superseded: u64,
    pub seconds: f64,
}

/// Writes an empty fast tier on `dev`: header, no records, and syncs.
pub(crate) fn format(dev: &dyn Backend, layout: &Layout) -> std::io::Result<()> {
    let mut h = AlignedBuf::zeroed(4096);
    h.copy_from_slice(&layout.encode());
    dev.write_at(0, &h)?;
    layout::write_table(dev, &AlignedBuf::zeroed(layout.records_len() as usize))?;
    State::default().write(dev)?;
    dev.sync()
}

/// Reads the header of the device and checks it belongs to this volume.
pub(crate) fn read_layout(dev: &dyn Backend, expected: &Layout) -> Result<Layout, String> {
    let mut h = AlignedBuf::zeroed(4096);
    dev.read_at(0, &mut h)
        .map_err(|e| format!("cannot read its header: {e}"))?;
    let found = Layout::decode(&h)?;
    if found.id != expected.id {
        return Err(format!(
            "it belongs to another volume (id {:016x}, this volume's is {:016x})",
            found.id, expected.id
        ));
    }
    if found != *expected {
        return Err(format!(
            "its geometry ({} slots of {} bytes) is not the volume's ({} of {})",
            found.slots, found.block, expected.slots, expected.block
        ));
    }
    if dev.len() < found.device_len() {
        return Err(format!(
            "it holds {} bytes; its slots need {}",
            dev.len(),
            found.device_len()
        ));
    }
    Ok(found)
}

impl FastTier {
    /// Opens the fast tier on `dev` (its header already checked by [`read_layout`]):
    /// scans the records, keeps per block the highest valid sequence (every dirty one;
    /// clean ones too after a clean close), writes the rebuilt table and an unclean
    /// state, and syncs before serving.
    pub(crate) fn open(
        dev: Arc<Device>,
        layout: Layout,
        cfg: &FastConfig,
        home: &Device,
    ) -> Outcome<(FastTier, Recovery)> {
        let started = Instant::now();
        let mut tier = FastTier::empty(dev.clone(), layout, cfg, layout.block);
        let fail = |what: &str| {
            let what = format!("{what} on the fast tier {}", dev.describe());
            move |e| Failure::Fast(what, e)
        };
        let raw = dev.dev.as_ref();
        let state = State::read(raw).map_err(fail("cannot read the state sector"))?;
        let table = layout::read_table(raw, &layout).map_err(fail("cannot read the records"))?;
        let mut report = Recovery {
            clean_close: state.clean,
            ..Recovery::default()
        };
        let mut candidates: Vec<(u32, Record)> = Vec::new();
        for slot in 0..layout.slots {
            let i = slot as usize * RECORD;
            if let Some(r) = Record::decode(&table[i..i + RECORD]) {
                if r.state != SlotState::Free {
                    candidates.push((slot, r));
                }
            }
        }
        // Records newer than the durable watermark: their slots' data is checked (a
        // write the cut tore fails), read in runs of consecutive slots up to 1 MiB.
        let block = layout.block as usize;
        let mut bulk = AlignedBuf::zeroed(block.max(1 << 20));
        let per_read = bulk.len() / block;
        let mut torn = vec![false; candidates.len()];
        let unchecked: Vec<usize> = (0..candidates.len())
            .filter(|&k| candidates[k].1.seq > state.durable_seq)
            .collect();
        let mut k = 0;
        while k < unchecked.len() {
            let first = candidates[unchecked[k]].0;
            let mut n = 1;
            while k + n < unchecked.len()
                && n < per_read
                && candidates[unchecked[k + n]].0 == first + n as u32
            {
                n += 1;
            }
            raw.read_at(layout.slot_offset(first), &mut bulk[..n * block])
                .map_err(fail(&format!("cannot read slots {first}..")))?;
            for j in 0..n {
                let c = unchecked[k + j];
                torn[c] =
                    crc32c::crc32c(&bulk[j * block..(j + 1) * block]) != candidates[c].1.data_crc;
            }
            k += n;
        }
        let mut newest: HashMap<u64, (u32, Record)> = HashMap::default();
        let mut valid: Vec<(u32, Record)> = Vec::new();
        let mut dirty_records = 0u64;
        let mut max_seq = 0;
        for (c, &(slot, r)) in candidates.iter().enumerate() {
            if torn[c] {
                report.torn += 1;
                continue;
            }
            max_seq = max_seq.max(r.seq);
            valid.push((slot, r));
            dirty_records += u64::from(r.state == SlotState::Dirty);
            match newest.get(&r.block) {
                Some((_, n)) if n.seq >= r.seq => {}
                _ => {
                    newest.insert(r.block, (slot, r));
                }
            }
        }
        // Phase one: superseded dirty records freed, and durably so, before anything
        // else changes, so that no half-written table leaves one as a block's newest.
        let losers: Vec<u32> = valid
            .iter()
            .filter(|(slot, r)| {
                r.state == SlotState::Dirty && newest.get(&r.block).is_some_and(|(s, _)| s != slot)
            })
            .map(|(slot, _)| *slot)
            .collect();
        if !losers.is_empty() {
            let mut t = table;
            for &slot in &losers {
                let i = slot as usize * RECORD;
                Record::FREE.encode(&mut t[i..i + RECORD]);
            }
            layout::write_table(raw, &t).map_err(fail("cannot write the records"))?;
            raw.sync().map_err(fail("sync failed"))?;
        }
        let mut keep: Vec<(u64, u32, Record)> = newest
            .into_iter()
            .filter(|(_, (_, r))| r.state == SlotState::Dirty || state.clean)
            .map(|(b, (slot, r))| (b, slot, r))
            .collect();
        keep.sort_unstable_by_key(|k| k.2.seq);
        let dirty_kept = keep
            .iter()
            .filter(|k| k.2.state == SlotState::Dirty)
            .count() as u64;
        report.superseded = dirty_records - dirty_kept;
        let now = Instant::now();
        for (block, slot, r) in keep {
            // Oldest first, so a recency policy ends in the old order; evictions (only
            // when more came back than fit) write dirty blocks home.
            tier.insert(home, block, true)?;
            let dirty = r.state == SlotState::Dirty;
            tier.map.insert(
                block,
                Live {
                    slot,
                    seq: r.seq,
                    data_crc: r.data_crc,
                    dirty,
                    dirty_since: dirty.then_some(now),
                    record: 0,
                },
            );
            tier.dirty += u64::from(dirty);
        }
        // Rebuild from what is cached now: every other slot free.
        tier.retired.clear();
        tier.lagging.clear();
        let mut occupied = vec![false; layout.slots as usize];
        for live in tier.map.values() {
            occupied[live.slot as usize] = true;
        }
        tier.free = (0..layout.slots)
            .rev()
            .filter(|&s| !occupied[s as usize])
            .collect();
        tier.seq = max_seq;
        tier.rebuild_table();
        let restored = tier.map.len() as u64;
        layout::write_table(raw, &tier.table).map_err(fail("cannot write the records"))?;
        raw.sync().map_err(fail("sync failed"))?;
        State {
            clean: false,
            durable_seq: max_seq,
        }
        .write(raw)
        .map_err(fail("cannot write the state sector"))?;
        raw.sync().map_err(fail("sync failed"))?;
        report.restored = restored;
        report.dirty = tier.dirty;
        tier.stats.restored = restored;
        report.seconds = started.elapsed().as_secs_f64();
        Ok((tier, report))
    }
}

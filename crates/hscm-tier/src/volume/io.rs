//! The request paths: reads (DRAM, then the fast tier, then home) and writes (through
//! to home, or back through the fast tier).

use std::sync::atomic::Ordering;

use hscm_block::WriteFlags;

use crate::dram::Served;
use crate::header::WriteMode;
use crate::snapshot::Counters;
use crate::volume::{Inner, Lower, Shared, TieredVolume};
use crate::{Error, Result};

impl Shared {
    fn read_error(&self, block: u64, e: std::io::Error) -> Error {
        Error::io(
            format!("cannot read block {block} from {}", self.home.describe()),
            e,
        )
    }

    fn read_home(&self, counters: &mut Counters, block: u64, buf: &mut [u8]) -> Result<()> {
        counters.home_reads += 1;
        self.home
            .read_at(self.cfg.home_offset(block), buf)
            .map_err(|e| self.read_error(block, e))
    }

    /// Reads `block` into `buf` for a read that missed DRAM: from the fast tier on a
    /// hit there, else from home, then offered to the fast tier (its counters and
    /// policy see the lookup).
    fn fetch(
        &self,
        lower: &mut Lower,
        counters: &mut Counters,
        block: u64,
        buf: &mut [u8],
        sequential: bool,
    ) -> Result<()> {
        if let Some(fast) = lower.fast.as_mut() {
            match fast.find(block, false) {
                Some(slot) => match fast.read_slot(slot, buf) {
                    Ok(()) => return Ok(()),
                    // Pass-through now (the tier held nothing dirty): home has it.
                    Err(f) => self.fail(lower, f)?,
                },
                None => {
                    self.read_home(counters, block, buf)?;
                    if let Err(f) = fast.offer_clean(&self.home, block, buf, sequential) {
                        // The bytes are home's and right; the tier is out either way.
                        let _ = self.fail(lower, f);
                    }
                    return Ok(());
                }
            }
        }
        self.read_home(counters, block, buf)
    }

    /// Reads the authoritative copy of `block` (the fast tier's, else home's) without
    /// touching any policy or tier counter: what a partial write starts from.
    fn peek(
        &self,
        lower: &mut Lower,
        counters: &mut Counters,
        block: u64,
        buf: &mut [u8],
    ) -> Result<()> {
        if let Some(fast) = lower.fast.as_ref() {
            match fast.peek(block, buf) {
                Ok(true) => return Ok(()),
                Ok(false) => {}
                Err(f) => self.fail(lower, f)?,
            }
        }
        self.read_home(counters, block, buf)
    }
}

/// Consecutive blocks on their way home, written as one request.
#[derive(Default)]
struct HomeRun {
    first: u64,
    blocks: u64,
    bytes: Vec<u8>,
}

impl HomeRun {
    /// A run is written once it would pass this (a request servers all take).
    const MAX_BYTES: usize = 8 << 20;
}

/// Counts a request in the fast tier's request counters, from its lookups before
/// it (DRAM's are the volume's own, `Counters::count_request`).
fn count_fast_request(lower: &mut Lower, before: Option<(u64, u64)>) {
    if let (Some(fast), Some(before)) = (lower.fast.as_mut(), before) {
        fast.stats.count_request(before);
    }
}

impl TieredVolume {
    /// How its home on the network is doing; None for a local home.
    pub fn home_health(&self) -> Option<std::sync::Arc<hscm_durable::device::RemoteHealth>> {
        self.shared.home.dev.remote_health()
    }

    /// Its mirrored home's members and their states; None for a home of one copy.
    pub fn mirror_status(&self) -> Option<hscm_durable::mirror::MirrorStatus> {
        self.shared.home.dev.mirror_status()
    }

    fn check(&self, offset: u64, len: u64) -> Result<()> {
        let size = self.shared.cfg.size;
        hscm_block::check_range(size, offset, len).map_err(|_| Error::OutOfRange {
            offset,
            len,
            size,
        })
    }

    /// Hands `[offset, offset + len)` to `sink` block by block, as
    /// `(position within the request, bytes)`.
    pub fn read_with(
        &self,
        offset: u64,
        len: usize,
        sink: &mut dyn FnMut(usize, &[u8]),
    ) -> Result<()> {
        self.check(offset, len as u64)?;
        if len == 0 {
            return Ok(());
        }
        let shared = &*self.shared;
        match shared.dram_index.serve(offset, len, sink) {
            Served::Logged => return Ok(()),
            Served::LogFull(hit) => {
                shared.lock().record_hit(hit);
                return Ok(());
            }
            Served::No => {}
        }
        let bs = u64::from(shared.cfg.block);
        let mut guard = shared.lock();
        let Inner {
            dram,
            lower,
            counters,
            scratch,
            bulk,
        } = &mut *guard;
        let sequential = dram.sequential(offset, len as u64);
        let (mut hits, mut blocks) = (0, 0);
        let before = lower.fast.as_ref().map(|f| f.stats.lookups());
        // Consecutive blocks that bypass DRAM and have no fast-tier copy are read from
        // home in one request (a scan reads at the device's sequential speed):
        // (first block, blocks, first byte of the request they cover).
        let mut run: Option<(u64, u64, u64)> = None;
        let max_run = bulk.len() as u64 / bs;
        // Blocks read from home ahead for DRAM misses (first, count), held in `bulk`
        // until a bypassing run needs it: a miss of many blocks costs one request.
        let mut ahead: Option<(u64, u64)> = None;
        let flush_run = |run: &mut Option<(u64, u64, u64)>,
                         counters: &mut Counters,
                         to: u64,
                         sink: &mut dyn FnMut(usize, &[u8]),
                         bulk: &mut [u8],
                         ahead: &mut Option<(u64, u64)>|
         -> Result<()> {
            let Some((first, count, from)) = run.take() else {
                return Ok(());
            };
            *ahead = None;
            let bytes = (count * bs) as usize;
            counters.home_reads += 1;
            shared
                .home
                .read_at(shared.cfg.home_offset(first), &mut bulk[..bytes])
                .map_err(|e| shared.read_error(first, e))?;
            let skip = (from - first * bs) as usize;
            sink(
                (from - offset) as usize,
                &bulk[skip..skip + (to - from) as usize],
            );
            Ok(())
        };
        let mut at = offset;
        let end = offset + len as u64;
        while at < end {
            let block = at / bs;
            let within = (at % bs) as usize;
            let n = ((bs - at % bs).min(end - at)) as usize;
            let pos = (at - offset) as usize;
            blocks += 1;
            match dram.place_reading(block, false, sequential, Some((within, n))) {
                crate::dram::Place::Slot { slot, fresh } => {
                    let extends = matches!(run, Some((first, count, _)) if first + count == block
                        && count < max_run);
                    if !fresh && extends && lower.fast.is_none() {
                        // A DRAM hit inside a scan that bypasses DRAM: with no fast tier
                        // home holds the same bytes, so the scan's one request reads it
                        // too rather than being cut in two at every hit.
                        hits += 1;
                        run = run.map(|(first, count, from)| (first, count + 1, from));
                        at += n as u64;
                        continue;
                    }
                    flush_run(&mut run, counters, at, sink, bulk, &mut ahead)?;
                    if fresh {
                        let buf = dram
                            .unfilled_mut(block)
                            .expect("a fresh slot is not filled");
                        let last = (end - 1) / bs;
                        let held = ahead.filter(|(f, c)| (*f..f + c).contains(&block));
                        if held.is_some() || (lower.fast.is_none() && last > block) {
                            // With no fast tier home holds every block's last version
                            // (writes go through under this lock): read the rest of
                            // the request ahead, once.
                            let (first, _) = match held {
                                Some(h) => h,
                                None => {
                                    let count = (last - block + 1).min(max_run);
                                    counters.home_reads += 1;
                                    shared
                                        .home
                                        .read_at(
                                            shared.cfg.home_offset(block),
                                            &mut bulk[..(count * bs) as usize],
                                        )
                                        .map_err(|e| shared.read_error(block, e))?;
                                    ahead = Some((block, count));
                                    (block, count)
                                }
                            };
                            let at = ((block - first) * bs) as usize;
                            buf.copy_from_slice(&bulk[at..at + bs as usize]);
                        } else {
                            shared.fetch(lower, counters, block, buf, sequential)?;
                        }
                        dram.set_filled(block);
                    } else {
                        hits += 1;
                    }
                    sink(pos, &dram.slot(slot)[within..within + n]);
                }
                crate::dram::Place::Bypassed => {
                    let via_fast = match lower.fast.as_mut() {
                        Some(f) if !sequential || f.contains(block) => true,
                        Some(f) => {
                            // A scan past the cutoff skips the fast tier too.
                            f.find(block, false);
                            f.stats.bypassed_sequential += 1;
                            false
                        }
                        None => false,
                    };
                    if via_fast {
                        flush_run(&mut run, counters, at, sink, bulk, &mut ahead)?;
                        shared.fetch(lower, counters, block, scratch, sequential)?;
                        sink(pos, &scratch[within..within + n]);
                    } else {
                        run = match run {
                            Some((first, count, from)) if count < max_run => {
                                Some((first, count + 1, from))
                            }
                            Some(r) => {
                                let mut full = Some(r);
                                flush_run(&mut full, counters, at, sink, bulk, &mut ahead)?;
                                Some((block, 1, at))
                            }
                            None => Some((block, 1, at)),
                        };
                    }
                }
            }
            at += n as u64;
        }
        flush_run(&mut run, counters, end, sink, bulk, &mut ahead)?;
        counters.count_request(hits, blocks);
        count_fast_request(lower, before);
        Ok(())
    }

    /// Reads `buf.len()` bytes at `offset`.
    pub fn read_at(&self, offset: u64, buf: &mut [u8]) -> Result<()> {
        let len = buf.len();
        self.read_with(offset, len, &mut |at, piece| {
            buf[at..at + piece.len()].copy_from_slice(piece)
        })
    }

    /// Writes `data` at `offset`; durable on return when the volume's durability is
    /// `Immediate` or `flags.fua` is set, else after the next flush.
    pub fn write_at(&self, offset: u64, data: &[u8], flags: WriteFlags) -> Result<()> {
        self.write_range(offset, data.len() as u64, flags, &mut |pos, dst| {
            dst.copy_from_slice(&data[pos..pos + dst.len()])
        })
    }

    /// Writes zeroes over `[offset, offset + len)` (also what a discard does).
    pub fn write_zeroes(&self, offset: u64, len: u64, flags: WriteFlags) -> Result<()> {
        self.write_range(offset, len, flags, &mut |_, dst| dst.fill(0))
    }

    /// The write path: `fill(position in the request, destination)` supplies the bytes.
    fn write_range(
        &self,
        offset: u64,
        len: u64,
        flags: WriteFlags,
        fill: &mut dyn FnMut(usize, &mut [u8]),
    ) -> Result<()> {
        self.check(offset, len)?;
        let shared = &*self.shared;
        shared.poison.check()?;
        if len == 0 {
            return Ok(());
        }
        let bs = u64::from(shared.cfg.block);
        let ticket;
        {
            let mut guard = shared.lock();
            // Checked again under the lock: a write that failed meanwhile poisoned it.
            shared.poison.check()?;
            let Inner {
                dram,
                lower,
                counters,
                scratch,
                ..
            } = &mut *guard;
            let sequential = dram.sequential(offset, len);
            let (mut hits, mut blocks) = (0, 0);
            let before = lower.fast.as_ref().map(|f| f.stats.lookups());
            let mut home_run = HomeRun::default();
            let mut at = offset;
            let end = offset + len;
            while at < end {
                let block = at / bs;
                let within = (at % bs) as usize;
                let n = ((bs - at % bs).min(end - at)) as usize;
                let pos = (at - offset) as usize;
                let whole = n as u64 == bs;
                blocks += 1;
                match dram.place(block, true, sequential) {
                    crate::dram::Place::Slot { slot, fresh } => {
                        if !fresh {
                            hits += 1;
                        }
                        if fresh && !whole {
                            let buf = dram
                                .unfilled_mut(block)
                                .expect("a fresh slot is not filled");
                            shared.peek(lower, counters, block, buf)?;
                        }
                        dram.write_slot(block, |buf| fill(pos, &mut buf[within..within + n]));
                        dram.set_filled(block);
                        self.store(lower, counters, block, dram.slot(slot), &mut home_run)?;
                    }
                    crate::dram::Place::Bypassed => {
                        if !whole {
                            shared.peek(lower, counters, block, scratch)?;
                        }
                        fill(pos, &mut scratch[within..within + n]);
                        self.store(lower, counters, block, scratch, &mut home_run)?;
                    }
                }
                at += n as u64;
            }
            self.write_home_run(lower, counters, &mut home_run)?;
            counters.count_request(hits, blocks);
            count_fast_request(lower, before);
            ticket = self.issued.fetch_add(1, Ordering::SeqCst) + 1;
        }
        if flags.fua || shared.cfg.durability == hscm_durable::Durability::Immediate {
            self.sync_through(ticket)?;
        }
        Ok(())
    }

    /// Puts a block's new bytes where the write mode says: a fresh fast-tier slot
    /// (write-back), or home and the fast tier's clean copy (write-through). Blocks
    /// bound for home join `run` and go out together, one request for each run of
    /// consecutive blocks ([`Self::write_home_run`]): on a network home a 1 MiB write
    /// costs one round trip, not one for each block.
    fn store(
        &self,
        lower: &mut Lower,
        counters: &mut Counters,
        block: u64,
        bytes: &[u8],
        run: &mut HomeRun,
    ) -> Result<()> {
        let shared = &*self.shared;
        if let Some(fast) = lower
            .fast
            .as_mut()
            .filter(|f| f.mode == WriteMode::WriteBack)
        {
            fast.find(block, true);
            match fast.write_dirty(&shared.home, block, bytes) {
                Ok(Some(_)) => return Ok(()),
                // The tier's policy cannot hold the block: it goes home.
                Ok(None) => {}
                // The tier held nothing dirty: pass-through, the write goes home.
                Err(f) => shared.fail(lower, f)?,
            }
        }
        let follows = run.first + run.blocks == block;
        if run.blocks > 0 && (!follows || run.bytes.len() + bytes.len() > HomeRun::MAX_BYTES) {
            self.write_home_run(lower, counters, run)?;
        }
        if run.blocks == 0 {
            run.first = block;
        }
        run.bytes.extend_from_slice(bytes);
        run.blocks += 1;
        Ok(())
    }

    /// Writes the blocks `run` gathered home in one request, then refreshes the fast
    /// tier's clean copies of them.
    fn write_home_run(
        &self,
        lower: &mut Lower,
        counters: &mut Counters,
        run: &mut HomeRun,
    ) -> Result<()> {
        if run.blocks == 0 {
            return Ok(());
        }
        let shared = &*self.shared;
        let (first, blocks) = (run.first, run.blocks);
        run.blocks = 0;
        counters.home_writes += 1;
        let written = shared
            .home
            .write_at(shared.cfg.home_offset(first), &run.bytes);
        let bytes = std::mem::take(&mut run.bytes);
        match written {
            Ok(n) => {
                shared.request_home_writes.fetch_max(n, Ordering::SeqCst);
            }
            Err(e) => {
                let what = if blocks == 1 {
                    format!("block {first}")
                } else {
                    format!("blocks {first} to {}", first + blocks - 1)
                };
                let reason = format!("write of {what} to {} failed: {e}", shared.home.describe());
                shared.poison.set(reason, e.raw_os_error());
                self.commit.wake_all();
                return Err(Error::io(
                    format!("cannot write {what} to {}", shared.home.describe()),
                    e,
                ));
            }
        }
        let mut failed = None;
        if let Some(fast) = lower.fast.as_mut() {
            let bs = bytes.len() / blocks as usize;
            for (i, piece) in bytes.chunks(bs).enumerate() {
                let block = first + i as u64;
                fast.find(block, true);
                if let Err(f) = fast.refresh_clean(block, piece) {
                    // The tier is out from here on: no more clean copies to refresh.
                    failed = Some(f);
                    break;
                }
            }
        }
        if let Some(f) = failed {
            shared.fail(lower, f)?;
        }
        run.bytes = bytes;
        run.bytes.clear();
        Ok(())
    }

    /// Reads block `block` (its authoritative copy: the fast tier's, else home's)
    /// without touching any tier, policy or counter: what a replay rewrites so that
    /// replaying a trace leaves the volume's data as it was.
    pub fn peek_block(&self, block: u64, buf: &mut [u8]) -> Result<()> {
        let shared = &*self.shared;
        let bs = u64::from(shared.cfg.block);
        self.check(block.saturating_mul(bs), buf.len() as u64)?;
        let mut guard = shared.inner.lock();
        let Inner { lower, scratch, .. } = &mut *guard;
        shared.peek(lower, &mut Counters::default(), block, scratch)?;
        let n = buf.len().min(bs as usize);
        buf[..n].copy_from_slice(&scratch[..n]);
        Ok(())
    }
}

//! Replaying a block trace through a real tiered volume, for comparison with what
//! `hscm sim cache` predicts for the same policy and size (`hscm volume replay`,
//! Python's `TieredVolume.replay`).

use std::collections::HashMap;

use anyhow::{bail, Context, Result};
use hscm_tier::{TierStats, TieredVolume};
use hscm_trace::{Request, TraceError};
use serde::Serialize;

/// What a replay did, per tier (the `hscm volume replay --json` contract).
#[derive(Debug, Clone, Serialize)]
pub struct Replay {
    pub requests: u64,
    pub reads: u64,
    pub writes: u64,
    /// Distinct blocks the trace touched (each mapped to its own block of the volume).
    pub blocks: u64,
    /// Requests whose size is not the volume's block: each still counts as one block,
    /// so the simulator (which weighs by size) agrees only when this is 0.
    pub size_mismatches: u64,
    /// Bytes each tier held when the replay began (DRAM first). `hscm sim cache` starts
    /// empty, so the two agree exactly only on a replay that started cold.
    pub cached_at_start_bytes: Vec<u64>,
    /// True when any tier held blocks at the start (an earlier replay, or the hot list
    /// restored when the volume opened).
    pub started_warm: bool,
    pub tiers: Vec<TierStats>,
    pub seconds: f64,
    /// The volume's block size: each request counts as one block.
    pub block: u32,
}

/// Replays `requests` on `vol`: each distinct key gets the next free block of the
/// volume (first touch), a read reads that block, a write rewrites it with the bytes
/// it already holds (so a replay changes no data). Counts are this replay's alone.
pub fn replay(
    vol: &TieredVolume,
    requests: impl Iterator<Item = Result<Request, TraceError>>,
    progress: &mut dyn FnMut(u64),
) -> Result<Replay> {
    let block = u64::from(vol.config().block);
    let capacity = vol.size() / block;
    let before = vol.stats().tiers;
    let cached_at_start_bytes: Vec<u64> = before.iter().map(|t| t.occupancy_bytes).collect();
    let start = std::time::Instant::now();
    let mut blocks: HashMap<u64, u64> = HashMap::new();
    let mut buf = vec![0u8; block as usize];
    let (mut n, mut reads, mut writes, mut mismatches) = (0u64, 0u64, 0u64, 0u64);
    for r in requests {
        let r = r?;
        let next = blocks.len() as u64;
        let b = *blocks.entry(r.key).or_insert(next);
        if b >= capacity {
            bail!(
                "the trace touches more than the volume's {capacity} blocks of {block} bytes; \
                 replay it on a larger volume"
            );
        }
        mismatches += u64::from(u64::from(r.size) != block);
        let at = b * block;
        if r.write {
            vol.peek_block(b, &mut buf)?;
            vol.write_at(at, &buf, hscm_block::WriteFlags::NONE)
                .with_context(|| format!("request {n}: write of block {b}"))?;
            writes += 1;
        } else {
            vol.read_at(at, &mut buf)
                .with_context(|| format!("request {n}: read of block {b}"))?;
            reads += 1;
        }
        n += 1;
        if n & 0xffff == 0 {
            progress(n);
        }
    }
    progress(n);
    let after = vol.stats().tiers;
    let tiers = after.iter().zip(&before).map(|(a, b)| a.since(b)).collect();
    Ok(Replay {
        requests: n,
        reads,
        writes,
        blocks: blocks.len() as u64,
        size_mismatches: mismatches,
        started_warm: cached_at_start_bytes.iter().any(|&b| b > 0),
        cached_at_start_bytes,
        tiers,
        seconds: start.elapsed().as_secs_f64(),
        block: vol.config().block,
    })
}

/// Replay a block trace through a tiered volume, reading and writing its blocks (each
/// write rewrites the block's own bytes, so the data is unchanged), and count DRAM hits
/// and misses: for the same policy and size they equal what `hscm sim cache --size RAM
/// --block BLOCK` predicts (with the sequential cutoff off).
///
/// Example: hscm volume replay /srv/big.hscm --trace web.msr.csv --json
#[derive(clap::Args, Debug)]
pub struct ReplayArgs {
    /// The tiered volume (not in use by another process).
    pub path: std::path::PathBuf,
    /// Block trace (plain or zstd), any format `hscm sim cache` reads.
    #[arg(long)]
    pub trace: std::path::PathBuf,
    /// oracle-general, csv, lis, spc, msr or lackey; detected when omitted.
    #[arg(long, value_parser = crate::vmsim::parse_request_format)]
    pub format: Option<hscm_trace::RequestFormat>,
    /// One JSON object (a stable contract): {"requests", "tiers": [{"tier", "hits",
    /// "misses", …}], …}; a failure prints {"ok": false, "error": ...}.
    #[arg(long)]
    pub json: bool,
}

impl crate::experiment::Experiment for ReplayArgs {
    type Output = Replay;
    fn json(&self) -> bool {
        self.json
    }
    fn run(&self) -> Result<Replay> {
        use std::io::IsTerminal;
        let vol = TieredVolume::open(&self.path)?;
        let reader = hscm_trace::RequestReader::open(&self.trace, self.format, vol.config().block)
            .with_context(|| format!("reading {}", self.trace.display()))?;
        let bar = (!self.json && std::io::stderr().is_terminal()).then(|| {
            crate::par::spinner(format!("replaying {}", self.trace.display()), "requests")
        });
        let r = replay(&vol, reader, &mut crate::par::ticker(bar.as_ref()))?;
        if let Some(b) = bar {
            b.finish_and_clear();
        }
        vol.close()?;
        Ok(r)
    }
    fn print(&self, out: &Replay) -> Result<()> {
        use crate::units::human_bytes;
        let block = out.block;
        outln!(
            "{} requests ({} reads, {} writes) over {} distinct blocks in {:.2} s",
            out.requests,
            out.reads,
            out.writes,
            out.blocks,
            out.seconds
        )?;
        if out.started_warm {
            outln!(
            "started warm: {} already cached ({}); `hscm sim cache` starts empty, so its counts match a replay on a freshly created volume",
            out.cached_at_start_bytes
                .iter()
                .zip(&out.tiers)
                .map(|(b, t)| format!("{} in {}", human_bytes(*b), t.tier))
                .collect::<Vec<_>>()
                .join(", "),
            "an earlier replay, or the hot list restored at open"
        )?;
        } else {
            outln!("started cold: nothing cached, as `hscm sim cache` starts")?;
        }
        for t in &out.tiers {
            let total = (t.hits + t.misses).max(1) as f64;
            outln!(
            "{:<5} hits {} misses {} (hit ratio {:.4}); admitted {}, evicted {}, bypassed {} by admission and {} as sequential",
            t.tier,
            t.hits,
            t.misses,
            t.hits as f64 / total,
            t.promotions,
            t.evictions,
            t.bypassed_admission,
            t.bypassed_sequential
        )?;
        }
        if out.size_mismatches > 0 {
            outln!(
            "note: {} requests are not one {}-byte block; each counted as one, so `hscm sim cache` (which weighs by size) will differ",
            out.size_mismatches,
            block
        )?;
        }
        Ok(())
    }
}

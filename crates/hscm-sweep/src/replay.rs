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
    })
}

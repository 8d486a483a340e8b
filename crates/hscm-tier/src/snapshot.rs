//! The counters a volume saves on home: at every clean close and, while a server runs
//! it, every few seconds, so `hscm volume stats` can read them from another process
//! without opening the volume. One page after the data: a length, a CRC-32C, then the
//! JSON. Like the hot list, it is a report, never trusted for data.

use hscm_durable::codec::{Dec, Enc};
use serde::{Deserialize, Serialize};

use crate::dram::TierStats;
use crate::header::TierConfig;

const PAGE: usize = 4096;

/// What `hscm volume stats` prints.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Snapshot {
    /// `open` while a process serves the volume (saved periodically), `closed` after a
    /// clean close.
    pub state: String,
    pub pid: u32,
    /// Seconds since the Unix epoch when it was saved.
    pub saved_at: u64,
    /// `write-through` (every write reaches home before it is acknowledged, so nothing
    /// is dirty) or `write-back` (the fast tier holds writes home lacks: `dirty_bytes`).
    pub mode: String,
    pub dirty_bytes: u64,
    /// Why the fast tier is out of service, if it is.
    #[serde(default)]
    pub fast_failure: Option<String>,
    /// Seconds since this process opened the volume (the session's counters cover
    /// them), and the fast tier's write-back rate over them, blocks per second.
    #[serde(default)]
    pub session_s: f64,
    #[serde(default)]
    pub writeback_blocks_per_s: f64,
    /// Counters since this process opened the volume, and over the volume's life
    /// (every earlier session that closed cleanly, plus this one).
    pub session: Counters,
    pub lifetime: Counters,
}

/// The counters as `hscm volume stats` prints them: when and by whom they were saved,
/// then this session's and the lifetime's requests, device I/O and each tier's counts.
impl std::fmt::Display for Snapshot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        use hscm_durable::units::human_bytes;
        let age = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs())
            .saturating_sub(self.saved_at);
        write!(
            f,
            "counters      saved {age} s ago by pid {} ({}); {}, {} dirty",
            self.pid,
            self.state,
            self.mode,
            human_bytes(self.dirty_bytes)
        )?;
        if self.writeback_blocks_per_s > 0.0 {
            write!(
                f,
                "\nwrite-back    {:.1} blocks/s over this session's {:.0} s",
                self.writeback_blocks_per_s, self.session_s
            )?;
        }
        if let Some(why) = &self.fast_failure {
            write!(f, "\nfast tier     OUT OF SERVICE: {why}")?;
        }
        for (name, c) in [("session", &self.session), ("lifetime", &self.lifetime)] {
            write!(
                f,
                "\n{name:<13} {} requests: {} all hits, {} partial, {} misses; home {} reads, {} writes, {} syncs",
                c.requests, c.request_hits, c.request_partial_hits, c.request_misses, c.home_reads, c.home_writes, c.syncs
            )?;
            for t in &c.tiers {
                write!(
                    f,
                    "\n  {:<11} reads {} hits / {} misses, writes {} / {}; bypassed {} (admission) {} (sequential); promoted {}, evicted {}; {} of {} used",
                    t.tier, t.read_hits, t.read_misses, t.write_hits, t.write_misses, t.bypassed_admission,
                    t.bypassed_sequential, t.promotions, t.evictions, human_bytes(t.occupancy_bytes), human_bytes(t.capacity_bytes)
                )?;
                write!(
                    f,
                    "\n  {:<11} requests: {} all hits, {} partial, {} misses (of the blocks that reached it)",
                    "", t.request_hits, t.request_partial_hits, t.request_misses
                )?;
                if t.written_back > 0 || t.dirty_bytes > 0 || t.demotions > 0 {
                    write!(
                        f,
                        "\n  {:<11} written back {} blocks in {} runs, {} on eviction; {} dirty, oldest {} ms",
                        "", t.written_back, t.writeback_runs, t.demotions, human_bytes(t.dirty_bytes), t.dirty_age_ms
                    )?;
                }
            }
        }
        Ok(())
    }
}

/// Requests by what their blocks found in DRAM (reads and writes), device reads,
/// writes and syncs, and each tier's counters.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Counters {
    pub requests: u64,
    pub request_hits: u64,
    pub request_partial_hits: u64,
    pub request_misses: u64,
    pub home_reads: u64,
    pub home_writes: u64,
    pub syncs: u64,
    pub tiers: Vec<TierStats>,
}

impl Counters {
    /// Counts one request of `blocks` blocks, `hits` of them found in DRAM.
    pub(crate) fn count_request(&mut self, hits: u64, blocks: u64) {
        self.requests += 1;
        if hits == blocks {
            self.request_hits += 1;
        } else if hits == 0 {
            self.request_misses += 1;
        } else {
            self.request_partial_hits += 1;
        }
    }

    /// `self + other`, tier by tier; occupancy and capacity are `other`'s (the later).
    pub fn plus(&self, other: &Counters) -> Counters {
        let tiers = other
            .tiers
            .iter()
            .map(|o| match self.tiers.iter().find(|s| s.tier == o.tier) {
                Some(s) => o.plus(s),
                None => o.clone(),
            })
            .collect();
        Counters {
            requests: self.requests + other.requests,
            request_hits: self.request_hits + other.request_hits,
            request_partial_hits: self.request_partial_hits + other.request_partial_hits,
            request_misses: self.request_misses + other.request_misses,
            home_reads: self.home_reads + other.home_reads,
            home_writes: self.home_writes + other.home_writes,
            syncs: self.syncs + other.syncs,
            tiers,
        }
    }
}

/// The page for `snap` (a snapshot too large for it is cut to an empty one).
pub(crate) fn encode(snap: &Snapshot) -> Vec<u8> {
    let json = serde_json::to_vec(snap).unwrap_or_default();
    let mut page = vec![0u8; PAGE];
    if json.len() + 8 <= PAGE {
        let mut e = Enc(Vec::with_capacity(PAGE));
        e.u32(json.len() as u32)
            .u32(crc32c::crc32c(&json))
            .raw(&json);
        page[..e.0.len()].copy_from_slice(&e.0);
    }
    page
}

/// The snapshot a page holds, if it is intact.
pub fn decode(page: &[u8]) -> Option<Snapshot> {
    let mut d = Dec::new(page, "a stats snapshot");
    let n = d.u32().ok()? as usize;
    let crc = d.u32().ok()?;
    let json = d.raw(n).ok()?;
    if n == 0 || crc32c::crc32c(json) != crc {
        return None;
    }
    serde_json::from_slice(json).ok()
}

/// Writes `snap` on home (not synced: a report, not data).
pub(crate) fn save(
    home: &dyn hscm_durable::device::Backend,
    cfg: &TierConfig,
    snap: &Snapshot,
) -> std::io::Result<()> {
    crate::header::write_region(home, cfg.stats_offset(), &encode(snap))
}

/// The snapshot saved on home, if any.
pub(crate) fn load(home: &dyn hscm_durable::device::Backend, cfg: &TierConfig) -> Option<Snapshot> {
    let page = crate::header::read_region(home, cfg.stats_offset(), PAGE).ok()?;
    decode(&page)
}

/// Reads the snapshot saved in the tiered volume at `path` without opening it (no lock:
/// a server may hold it), or None when none was saved.
pub fn read_saved(path: &std::path::Path, cfg: &TierConfig) -> std::io::Result<Option<Snapshot>> {
    let home = hscm_durable::home::open_for_inspection(path).map_err(std::io::Error::other)?;
    let page = crate::header::read_region(home.as_ref(), cfg.stats_offset(), PAGE)?;
    Ok(decode(&page))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A cleanly closed volume's snapshot with these session counters.
    fn closed(session: Counters) -> Snapshot {
        Snapshot {
            state: "closed".into(),
            pid: 7,
            saved_at: 1,
            mode: "write-through".into(),
            dirty_bytes: 0,
            fast_failure: None,
            session_s: 0.0,
            writeback_blocks_per_s: 0.0,
            session,
            lifetime: Counters::default(),
        }
    }

    /// A page's layout: the JSON's length and its CRC-32C (little-endian u32 each),
    /// then the JSON, then zeroes.
    #[test]
    fn a_page_is_the_documented_layout() {
        let snap = closed(Counters::default());
        let page = encode(&snap);
        let json = serde_json::to_vec(&snap).unwrap();
        assert_eq!(page.len(), PAGE);
        assert_eq!(page[..4], (json.len() as u32).to_le_bytes());
        assert_eq!(page[4..8], crc32c::crc32c(&json).to_le_bytes());
        assert_eq!(page[8..8 + json.len()], json[..]);
        assert!(page[8 + json.len()..].iter().all(|&b| b == 0));
    }

    #[test]
    fn a_snapshot_reads_back_and_damage_reads_as_none() {
        let snap = closed(Counters {
            requests: 3,
            ..Counters::default()
        });
        let page = encode(&snap);
        assert_eq!(decode(&page).unwrap().session.requests, 3);
        let mut torn = page.clone();
        torn[20] ^= 1;
        assert!(decode(&torn).is_none());
        assert!(decode(&[0u8; PAGE]).is_none());
    }

    #[test]
    fn lifetime_counters_add_tier_by_tier() {
        let t = |hits| TierStats {
            tier: "dram".into(),
            hits,
            occupancy_bytes: hits,
            ..TierStats::default()
        };
        let a = Counters {
            requests: 2,
            tiers: vec![t(5)],
            ..Counters::default()
        };
        let b = Counters {
            requests: 3,
            tiers: vec![t(7)],
            ..Counters::default()
        };
        let sum = a.plus(&b);
        assert_eq!((sum.requests, sum.tiers[0].hits), (5, 12));
        assert_eq!(sum.tiers[0].occupancy_bytes, 7);
    }
}

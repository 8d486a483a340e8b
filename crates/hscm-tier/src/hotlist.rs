//! The saved hot list: which blocks DRAM held at the last clean close, hottest first,
//! in a region of its own after the data. It is only a hint (home is authoritative,
//! and every block is read from home when it is refilled), so a stale or missing list
//! costs a cold start, never data; a damaged one is ignored.

use crate::header::{read_region, write_region, TierConfig, HEADER_LEN};

const MAGIC: &[u8; 8] = b"HSCMHOT1";
const PAGE: u64 = 4096;

impl TierConfig {
    /// Where the saved counters are on home: one page after the data.
    pub fn stats_offset(&self) -> u64 {
        HEADER_LEN + self.size
    }

    /// Where the hot list starts on home, after the counters' page.
    pub fn hot_list_offset(&self) -> u64 {
        self.stats_offset() + PAGE
    }

    /// Bytes reserved for the hot list: a page of header, then 8 bytes per DRAM block.
    pub fn hot_list_len(&self) -> u64 {
        PAGE + (8 * self.ram_blocks()).next_multiple_of(PAGE)
    }

    /// Bytes home needs: header, data, counters, hot list.
    pub fn home_len(&self) -> u64 {
        self.hot_list_offset() + self.hot_list_len()
    }
}

/// Saves `blocks` (hottest first) on home and syncs.
pub(crate) fn save(
    home: &dyn hscm_durable::device::Backend,
    cfg: &TierConfig,
    blocks: &[u64],
) -> std::io::Result<()> {
    write_region(home, cfg.hot_list_offset(), &encode(cfg, blocks))?;
    home.sync()
}

/// The saved hot list, hottest first; empty when there is none or it is damaged.
pub(crate) fn load(home: &dyn hscm_durable::device::Backend, cfg: &TierConfig) -> Vec<u64> {
    let Ok(page) = read_region(home, cfg.hot_list_offset(), PAGE as usize) else {
        return Vec::new();
    };
    let Some(n) = count(cfg, &page) else {
        return Vec::new();
    };
    let len = (PAGE as usize + 8 * n).next_multiple_of(PAGE as usize);
    read_region(home, cfg.hot_list_offset(), len)
        .ok()
        .and_then(|region| decode(cfg, &region[..len]))
        .unwrap_or_default()
}

/// The region's bytes for `blocks` (at most the DRAM's block count), sector-padded.
pub(crate) fn encode(cfg: &TierConfig, blocks: &[u64]) -> Vec<u8> {
    let n = blocks.len().min(cfg.ram_blocks() as usize);
    let mut list = Vec::with_capacity(n * 8);
    for b in &blocks[..n] {
        list.extend_from_slice(&b.to_le_bytes());
    }
    let mut out = vec![0u8; PAGE as usize];
    out[..8].copy_from_slice(MAGIC);
    out[8..16].copy_from_slice(&(n as u64).to_le_bytes());
    out[16..20].copy_from_slice(&crc32c::crc32c(&list).to_le_bytes());
    let head_crc = crc32c::crc32c(&out[..20]);
    out[20..24].copy_from_slice(&head_crc.to_le_bytes());
    out.extend_from_slice(&list);
    out.resize(out.len().next_multiple_of(PAGE as usize), 0);
    out
}

/// The count the region's first page announces, if that page is intact.
pub(crate) fn count(cfg: &TierConfig, page: &[u8]) -> Option<usize> {
    if page.len() < 24 || &page[..8] != MAGIC {
        return None;
    }
    let head_crc = u32::from_le_bytes(page[20..24].try_into().ok()?);
    if crc32c::crc32c(&page[..20]) != head_crc {
        return None;
    }
    let n = u64::from_le_bytes(page[8..16].try_into().ok()?);
    (n <= cfg.ram_blocks()).then_some(n as usize)
}

/// The blocks of an intact region (`region` = its first page and the list after it),
/// or None: damaged lists and blocks outside the volume are ignored.
pub(crate) fn decode(cfg: &TierConfig, region: &[u8]) -> Option<Vec<u64>> {
    let n = count(cfg, region)?;
    let list = region.get(PAGE as usize..PAGE as usize + n * 8)?;
    let crc = u32::from_le_bytes(region[16..20].try_into().ok()?);
    if crc32c::crc32c(list) != crc {
        return None;
    }
    let blocks = cfg.size / u64::from(cfg.block);
    let out: Vec<u64> = list
        .chunks_exact(8)
        .map(|c| u64::from_le_bytes(c.try_into().expect("8 bytes")))
        .collect();
    out.iter().all(|&b| b < blocks).then_some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_hot_list_reads_back_and_a_damaged_one_is_ignored() {
        let cfg = TierConfig::new(1 << 20, 64 << 10);
        let region = encode(&cfg, &[7, 3, 200, 0]);
        assert_eq!(region.len() % 4096, 0);
        assert_eq!(decode(&cfg, &region), Some(vec![7, 3, 200, 0]));
        let mut torn = region.clone();
        torn[4096 + 9] ^= 1;
        assert_eq!(decode(&cfg, &torn), None);
        assert_eq!(decode(&cfg, &vec![0; 8192]), None);
        // A block outside the volume (256 blocks) makes the list untrusted.
        assert_eq!(decode(&cfg, &encode(&cfg, &[1, 256])), None);
        // Never more than DRAM holds.
        let many: Vec<u64> = (0..100).collect();
        assert_eq!(decode(&cfg, &encode(&cfg, &many)).unwrap().len(), 16);
    }
}

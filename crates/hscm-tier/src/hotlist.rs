//! The saved hot list: which blocks DRAM held at the last clean close, hottest first,
//! in a region of its own after the data. It is only a hint (home is authoritative,
//! and every block is read from home when it is refilled), so a stale or missing list
//! costs a cold start, never data; a damaged one is ignored.

use hscm_durable::codec::{sealed, Dec, Enc};

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
    let mut list = Enc(Vec::with_capacity(n * 8));
    for &b in &blocks[..n] {
        list.u64(b);
    }
    // The first page: magic, count and the list's CRC-32C, sealed by a CRC-32C of its own.
    let mut e = Enc(Vec::with_capacity(PAGE as usize + list.0.len()));
    e.raw(MAGIC)
        .u64(n as u64)
        .u32(crc32c::crc32c(&list.0))
        .seal();
    let mut out = e.0;
    out.resize(PAGE as usize, 0);
    out.extend_from_slice(&list.0);
    out.resize(out.len().next_multiple_of(PAGE as usize), 0);
    out
}

/// Bytes of the first page the seal covers: magic, count, the list's CRC-32C.
const HEAD: usize = 20;

/// The count the region's first page announces, if that page is intact.
pub(crate) fn count(cfg: &TierConfig, page: &[u8]) -> Option<usize> {
    if page.len() < HEAD + 4 || &page[..8] != MAGIC || !sealed(page, HEAD) {
        return None;
    }
    let n = Dec::new(&page[8..], "a hot list's count").u64().ok()?;
    (n <= cfg.ram_blocks()).then_some(n as usize)
}

/// The blocks of an intact region (`region` = its first page and the list after it),
/// or None: damaged lists and blocks outside the volume are ignored.
pub(crate) fn decode(cfg: &TierConfig, region: &[u8]) -> Option<Vec<u64>> {
    let n = count(cfg, region)?;
    let list = region.get(PAGE as usize..PAGE as usize + n * 8)?;
    let crc = Dec::new(&region[16..], "a hot list's CRC").u32().ok()?;
    if crc32c::crc32c(list) != crc {
        return None;
    }
    let blocks = cfg.size / u64::from(cfg.block);
    let mut d = Dec::new(list, "a hot list");
    let out: Vec<u64> = (0..n).map_while(|_| d.u64().ok()).collect();
    (out.len() == n && out.iter().all(|&b| b < blocks)).then_some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The region's bytes for a list (a CRC-32C of them stands for them): what tiered
    /// volumes on disk hold, so no change of the code may move them.
    #[test]
    fn a_region_is_the_documented_layout() {
        let cfg = TierConfig::new(1 << 20, 64 << 10);
        let bytes = encode(&cfg, &[3, 1, 0x0102_0304]);
        assert_eq!(bytes.len() as u64, 2 * PAGE);
        assert_eq!(crc32c::crc32c(&bytes), 0xbb4f_773e);
    }

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

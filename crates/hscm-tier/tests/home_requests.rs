//! What a request of many blocks costs home: one device request for each run of
//! consecutive blocks, not one for each block (on a network home, one round trip for
//! a 1 MiB write or miss, not 256), with the bytes right after a restart.

use std::sync::Arc;

use hscm_block::WriteFlags;
use hscm_tier::{Durability, FastConfig, TierConfig, TieredVolume, WriteMode};
use hscm_volume::testing::FaultyBackend;

const BLOCK: usize = 4096;
const BLOCKS: u64 = 256;

fn open(fast: bool) -> (FaultyBackend, TierConfig, TieredVolume) {
    let mut cfg = TierConfig::new(BLOCKS * BLOCK as u64, 64 * BLOCK as u64);
    cfg.durability = Durability::Immediate;
    cfg.sequential_cutoff = 0;
    // A write-through fast tier: every write goes home too, and its clean copies are
    // refreshed from the run written.
    cfg.fast = fast.then(|| {
        let mut f = FastConfig::new(32 * BLOCK as u64);
        f.mode = WriteMode::WriteThrough;
        f
    });
    let home = FaultyBackend::new(cfg.home_len() as usize, "home");
    let fast_dev = cfg
        .fast
        .map(|f| FaultyBackend::new(f.device_len(cfg.block) as usize, "fast"));
    TieredVolume::format_with(&home, fast_dev.as_ref().map(|f| f as _), &cfg, "fast").unwrap();
    let vol = TieredVolume::open_with(
        Arc::new(home.clone()),
        fast_dev.map(|f| Arc::new(f) as Arc<dyn hscm_volume::Backend>),
    )
    .unwrap();
    (home, cfg, vol)
}

fn pattern(seed: u8, len: usize) -> Vec<u8> {
    (0..len).map(|i| (i / 7) as u8 ^ seed).collect()
}

#[test]
fn a_write_of_many_blocks_goes_home_in_one_request() {
    for fast in [false, true] {
        let (home, _, vol) = open(fast);
        let data = pattern(3, 32 * BLOCK);
        let before = home.write_count();
        vol.write_at(8 * BLOCK as u64, &data, WriteFlags::default())
            .unwrap();
        assert_eq!(
            home.write_count() - before,
            1,
            "32 consecutive blocks (fast tier: {fast}) went home in more than one write"
        );
        // Two runs, split by a block the request does not cover: two requests.
        let before = home.write_count();
        vol.write_at(
            100 * BLOCK as u64,
            &data[..4 * BLOCK],
            WriteFlags::default(),
        )
        .unwrap();
        vol.write_at(
            105 * BLOCK as u64,
            &data[..4 * BLOCK],
            WriteFlags::default(),
        )
        .unwrap();
        assert_eq!(home.write_count() - before, 2);
        let mut back = vec![0u8; data.len()];
        vol.read_at(8 * BLOCK as u64, &mut back).unwrap();
        assert!(back == data, "fast tier: {fast}");
        drop(vol);
        let vol = TieredVolume::open_with(Arc::new(home.clone()), None);
        if !fast {
            let mut back = vec![0u8; data.len()];
            vol.unwrap().read_at(8 * BLOCK as u64, &mut back).unwrap();
            assert!(back == data, "after a restart");
        }
    }
}

#[test]
fn a_miss_of_many_blocks_is_read_from_home_in_one_request() {
    let (home, _, vol) = open(false);
    let data = pattern(9, 48 * BLOCK);
    vol.write_at(64 * BLOCK as u64, &data, WriteFlags::default())
        .unwrap();
    drop(vol);
    let vol = TieredVolume::open_with(Arc::new(home.clone()), None).unwrap();
    // A hit in the middle of the range: the read ahead must not hand it stale bytes.
    let newer = pattern(11, BLOCK);
    vol.write_at(80 * BLOCK as u64, &newer, WriteFlags::default())
        .unwrap();
    let before = vol.stats().home_reads;
    let mut back = vec![0u8; data.len()];
    vol.read_at(64 * BLOCK as u64, &mut back).unwrap();
    assert_eq!(
        vol.stats().home_reads - before,
        1,
        "48 missing blocks, one read"
    );
    let mut want = data.clone();
    want[16 * BLOCK..17 * BLOCK].copy_from_slice(&newer);
    assert!(
        back == want,
        "the bytes read ahead differ from what was written"
    );
}

#[test]
fn a_scan_past_the_cutoff_is_not_cut_at_every_dram_hit() {
    let mut cfg = TierConfig::new(BLOCKS * BLOCK as u64, 64 * BLOCK as u64);
    cfg.durability = Durability::Immediate;
    cfg.sequential_cutoff = 8 * BLOCK as u64;
    let home = FaultyBackend::new(cfg.home_len() as usize, "home");
    TieredVolume::format_with(&home, None, &cfg, "fast").unwrap();
    let data = pattern(5, 48 * BLOCK);
    {
        let vol = TieredVolume::open_with(Arc::new(home.clone()), None).unwrap();
        vol.write_at(64 * BLOCK as u64, &data, WriteFlags::default())
            .unwrap();
    }
    let vol = TieredVolume::open_with(Arc::new(home.clone()), None).unwrap();
    // Small reads (under the cutoff) bring two blocks of the range into DRAM.
    let mut one = vec![0u8; BLOCK];
    for block in [70u64, 90] {
        vol.read_at(block * BLOCK as u64, &mut one).unwrap();
    }
    let before = vol.stats();
    let mut back = vec![0u8; data.len()];
    vol.read_at(64 * BLOCK as u64, &mut back).unwrap();
    let after = vol.stats();
    assert_eq!(
        after.tiers[0].read_hits - before.tiers[0].read_hits,
        2,
        "the two blocks read before are DRAM hits"
    );
    assert_eq!(
        after.home_reads - before.home_reads,
        1,
        "one scan, one read"
    );
    assert!(back == data);
}

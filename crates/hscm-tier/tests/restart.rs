//! Restarts: a clean close saves which blocks DRAM held, and the next open serves at
//! once while a background thread refills them hottest first, so the cache comes back
//! warm. The hot list is only a hint: damaged, it costs a cold start and nothing else.

use std::sync::Arc;

use hscm_policy::cache::{AdmissionName, EvictionName};
use hscm_tier::{TierConfig, TieredVolume};
use hscm_volume::testing::FaultyBackend;
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

const BLOCK: u64 = 4096;
const BLOCKS: u64 = 4096;

fn config(eviction: EvictionName, admission: Option<AdmissionName>) -> TierConfig {
    let mut cfg = TierConfig::new(BLOCKS * BLOCK, 256 * BLOCK);
    cfg.eviction = eviction;
    cfg.admission = admission;
    cfg.durability = hscm_tier::Durability::OnFlush;
    cfg
}

fn fresh(cfg: &TierConfig) -> FaultyBackend {
    let home = FaultyBackend::new(cfg.home_len() as usize, "home");
    TieredVolume::format(&home, cfg).unwrap();
    home
}

/// A skewed stream of block reads: 90% in a hot set of 200 blocks (under the 256 DRAM
/// blocks), the rest anywhere.
fn requests(seed: u64, n: usize) -> Vec<u64> {
    let mut rng = SmallRng::seed_from_u64(seed);
    (0..n)
        .map(|_| {
            if rng.gen_bool(0.9) {
                rng.gen_range(0..200)
            } else {
                rng.gen_range(0..BLOCKS)
            }
        })
        .collect()
}

/// DRAM hit ratio of `blocks` read on `vol`.
fn hit_ratio(vol: &TieredVolume, blocks: &[u64]) -> f64 {
    let before = vol.stats().tiers[0].clone();
    let mut buf = vec![0u8; BLOCK as usize];
    for &b in blocks {
        vol.read_at(b * BLOCK, &mut buf).unwrap();
    }
    let after = vol.stats().tiers[0].clone();
    let hits = after.hits - before.hits;
    let misses = after.misses - before.misses;
    hits as f64 / (hits + misses) as f64
}

#[test]
fn after_a_clean_restart_the_first_10000_requests_hit_as_before_shutdown() {
    for (eviction, admission) in [
        (EvictionName::Lru, None),
        (EvictionName::S3fifo, None),
        (EvictionName::Arc, None),
        (EvictionName::Clock, Some(AdmissionName::SecondMiss)),
        (EvictionName::Sieve, Some(AdmissionName::SeenBefore)),
    ] {
        let cfg = config(eviction, admission);
        let home = fresh(&cfg);
        let vol = TieredVolume::open_on(Arc::new(home.clone())).unwrap();
        hit_ratio(&vol, &requests(1, 50_000)); // warm up
        let steady = hit_ratio(&vol, &requests(2, 10_000));
        let held = vol.hot_list().len();
        vol.close().unwrap();

        let mut vol = TieredVolume::open_on(Arc::new(home)).unwrap();
        vol.wait_warm();
        let dram = vol.stats().tiers[0].clone();
        assert_eq!(dram.restored as usize, held, "{eviction:?}");
        assert_eq!(dram.warmed, dram.restored, "{eviction:?}");
        let after = hit_ratio(&vol, &requests(3, 10_000));
        assert!(
            after >= 0.95 * steady,
            "{eviction:?} + {admission:?}: {after:.3} after the restart, {steady:.3} before"
        );
        // And a cold start is what that saves.
        let cold_home = fresh(&cfg);
        let cold = TieredVolume::open_on(Arc::new(cold_home)).unwrap();
        let cold_ratio = hit_ratio(&cold, &requests(3, 10_000));
        assert!(
            cold_ratio < after - 0.01,
            "{eviction:?}: cold {cold_ratio:.3}, warm {after:.3}"
        );
    }
}

#[test]
fn requests_served_while_it_warms_read_the_right_bytes() {
    let cfg = config(EvictionName::Lru, None);
    let home = fresh(&cfg);
    let vol = TieredVolume::open_on(Arc::new(home.clone())).unwrap();
    let image: Vec<u8> = (0..cfg.size).map(|i| (i * 31 % 253) as u8).collect();
    vol.write_at(0, &image, hscm_block::WriteFlags::NONE)
        .unwrap();
    hit_ratio(&vol, &requests(1, 5_000));
    vol.close().unwrap();
    for round in 0..5 {
        let vol = TieredVolume::open_on(Arc::new(home.clone())).unwrap();
        // Writes and reads race the loader.
        let mut rng = SmallRng::seed_from_u64(round);
        let mut model = image.clone();
        for _ in 0..300 {
            let b = rng.gen_range(0..200u64);
            if rng.gen_bool(0.3) {
                let data = vec![rng.gen::<u8>(); 100];
                let at = b * BLOCK + 7;
                vol.write_at(at, &data, hscm_block::WriteFlags::NONE)
                    .unwrap();
                model[at as usize..at as usize + 100].copy_from_slice(&data);
            } else {
                let mut buf = vec![0u8; BLOCK as usize];
                vol.read_at(b * BLOCK, &mut buf).unwrap();
                assert!(buf[..] == model[(b * BLOCK) as usize..((b + 1) * BLOCK) as usize]);
            }
        }
        let mut all = vec![0u8; cfg.size as usize];
        vol.read_at(0, &mut all).unwrap();
        assert!(all == model, "round {round}: the image differs");
        // Put the original back for the next round.
        vol.write_at(0, &image, hscm_block::WriteFlags::NONE)
            .unwrap();
        vol.close().unwrap();
    }
}

#[test]
fn a_damaged_hot_list_costs_a_cold_start_and_nothing_else() {
    let cfg = config(EvictionName::Lru, None);
    let home = fresh(&cfg);
    let vol = TieredVolume::open_on(Arc::new(home.clone())).unwrap();
    vol.write_at(5 * BLOCK, b"kept", hscm_block::WriteFlags::NONE)
        .unwrap();
    hit_ratio(&vol, &requests(1, 5_000));
    vol.close().unwrap();
    // Flip a byte inside the saved list.
    use hscm_volume::Backend;
    let at = cfg.hot_list_offset() + 4096 + 16;
    let mut page = vec![0u8; 4096];
    home.read_at(at - 16, &mut page).unwrap();
    page[16] ^= 0xff;
    home.write_at(at - 16, &page).unwrap();
    let vol = TieredVolume::open_on(Arc::new(home)).unwrap();
    assert_eq!(vol.stats().tiers[0].restored, 0);
    let mut buf = [0u8; 4];
    vol.read_at(5 * BLOCK, &mut buf).unwrap();
    assert_eq!(&buf, b"kept");
}

//! The DRAM hit path without the volume's lock: a hit does not wait for a miss that
//! holds the lock, the counters and the policy still hear of every hit, and readers
//! racing writers, evictions and the write-back see whole blocks, never older than
//! what they saw before.

mod common;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use common::Writers;
use hscm_policy::cache::EvictionName;
use hscm_tier::{Durability, FastConfig, TierConfig, TieredVolume, WriteMode};
use hscm_volume::testing::{stamped_version, FaultyBackend};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

const BLOCK: usize = 4096;
const BLOCKS: u64 = 64;

fn config(ram_blocks: u64, fast: Option<WriteMode>) -> TierConfig {
    let mut cfg = TierConfig::new(BLOCKS * BLOCK as u64, ram_blocks * BLOCK as u64);
    cfg.durability = Durability::OnFlush;
    cfg.sequential_cutoff = 0;
    cfg.fast = fast.map(|mode| {
        let mut f = FastConfig::new(32 * BLOCK as u64);
        f.mode = mode;
        f
    });
    cfg
}

fn open(cfg: &TierConfig) -> (FaultyBackend, TieredVolume) {
    let home = FaultyBackend::new(cfg.home_len() as usize, "home");
    let fast = cfg
        .fast
        .map(|f| FaultyBackend::new(f.device_len(cfg.block) as usize, "fast"));
    TieredVolume::format_with(&home, fast.as_ref().map(|f| f as _), cfg, "fast").unwrap();
    let vol = TieredVolume::open_with(
        Arc::new(home.clone()),
        fast.map(|f| Arc::new(f) as Arc<dyn hscm_volume::Backend>),
    )
    .unwrap();
    (home, vol)
}

#[test]
fn a_hit_does_not_wait_for_a_miss_holding_the_lock() {
    let (home, vol) = open(&config(4, None));
    let vol = Arc::new(vol);
    let mut buf = vec![0u8; BLOCK];
    vol.read_at(0, &mut buf).unwrap();
    home.set_read_latency(Duration::from_millis(800));
    let miss = {
        let vol = vol.clone();
        std::thread::spawn(move || {
            let mut buf = vec![0u8; BLOCK];
            vol.read_at(9 * BLOCK as u64, &mut buf)
        })
    };
    // Let the miss take the lock and reach home.
    std::thread::sleep(Duration::from_millis(100));
    vol.read_at(0, &mut buf).unwrap();
    vol.read_at(100, &mut buf[..200]).unwrap();
    assert!(
        !miss.is_finished(),
        "the hits waited for the miss's 800 ms read"
    );
    miss.join().unwrap().unwrap();
    home.set_read_latency(Duration::ZERO);
    let s = vol.stats();
    let dram = &s.tiers[0];
    assert_eq!((dram.read_hits, dram.read_misses), (2, 2));
    assert_eq!((s.requests, s.request_hits, s.request_misses), (4, 2, 2));
}

/// What the policy heard of hits decides what it evicts: with LRU over two slots, a
/// hit on the older block keeps it, so the next miss evicts the other.
#[test]
fn the_policy_hears_of_hits_before_the_next_miss() {
    let mut cfg = config(2, None);
    cfg.eviction = EvictionName::Lru;
    let (_home, vol) = open(&cfg);
    let mut buf = vec![0u8; BLOCK];
    for b in [1u64, 2, 1, 3] {
        vol.read_at(b * BLOCK as u64, &mut buf).unwrap();
    }
    let mut hot = vol.hot_list();
    hot.sort_unstable();
    assert_eq!(hot, vec![1, 3]);
}

/// Two writers (stamped blocks), two readers of one to three blocks at a time and, in
/// write-back mode, a thread writing back: every block a reader sees is whole (a
/// version, or never written), and never older than one it saw before.
fn race(fast: Option<WriteMode>, seed: u64) {
    let (_home, vol) = open(&config(8, fast));
    let vol = Arc::new(vol);
    let writers = Writers::start(&vol, seed, BLOCKS, BLOCK);
    let stop = Arc::new(AtomicBool::new(false));
    let readers: Vec<_> = (0..2u64)
        .map(|r| {
            let (vol, stop) = (vol.clone(), stop.clone());
            std::thread::spawn(move || {
                let mut rng = SmallRng::seed_from_u64(seed * 10 + r);
                let mut seen = vec![0u64; BLOCKS as usize];
                let mut reads = 0u64;
                while !stop.load(Ordering::Relaxed) || reads < 1000 {
                    let n = rng.gen_range(1..=3u64);
                    let first = rng.gen_range(0..BLOCKS - n + 1);
                    let mut buf = vec![0u8; n as usize * BLOCK];
                    vol.read_at(first * BLOCK as u64, &mut buf).unwrap();
                    for (i, piece) in buf.chunks(BLOCK).enumerate() {
                        let b = first + i as u64;
                        let v = match stamped_version(b, piece) {
                            Some(v) => v,
                            None if piece.iter().all(|&x| x == 0) => 0,
                            None => panic!("block {b} read torn or foreign"),
                        };
                        assert!(v >= seen[b as usize], "block {b} went back to {v}");
                        seen[b as usize] = v;
                    }
                    reads += 1;
                }
                reads
            })
        })
        .collect();
    let flusher = fast.map(|_| {
        let (vol, stop) = (vol.clone(), stop.clone());
        std::thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                vol.write_back_all().unwrap();
            }
        })
    });
    std::thread::sleep(Duration::from_millis(1500));
    stop.store(true, Ordering::Relaxed);
    let (acked, _) = writers.stop();
    for r in readers {
        assert!(r.join().unwrap() >= 1000);
    }
    if let Some(f) = flusher {
        f.join().unwrap();
    }
    let mut buf = vec![0u8; BLOCK];
    for b in 0..BLOCKS {
        vol.read_at(b * BLOCK as u64, &mut buf).unwrap();
        let v = stamped_version(b, &buf).unwrap_or(0);
        assert_eq!(v, acked[b as usize], "block {b} after the race");
    }
    let s = vol.stats();
    assert!(s.tiers[0].hits > 0 && s.tiers[0].evictions > 0);
}

#[test]
fn readers_racing_writers_and_evictions_see_whole_blocks() {
    race(None, 1);
}

#[test]
fn readers_racing_the_write_back_see_whole_blocks() {
    race(Some(WriteMode::WriteBack), 2);
}

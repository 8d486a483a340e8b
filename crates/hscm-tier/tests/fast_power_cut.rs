//! Power cuts over both devices of a volume with a fast tier: a thousand rounds per
//! write mode of random writes of self-describing blocks, reads, flushes and
//! write-backs, cut at a random moment (each device keeps what a sync covered plus any
//! subset of the rest, whole or torn at 512 bytes), sometimes after a failed sync on
//! either device or failed writes on the fast one, then reopened. No acknowledged write may be lost, no block may hold
//! anything older than its last acknowledged version or newer than its last attempted
//! one, and the fast tier may come back with at most the blocks that were dirty plus
//! the one write in flight dirty (never "everything").

use std::sync::Arc;

mod common;

use common::Writers;
use hscm_policy::cache::{AdmissionName, EvictionName};
use hscm_tier::{Durability, FastConfig, TierConfig, TieredVolume, WriteMode};
use hscm_volume::testing::{check_restarted_block, stamped_block, stamped_version, FaultyBackend};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

const BLOCKS: u64 = 48;
const BLOCK: usize = 4096;

fn config(round: u64, mode: WriteMode) -> TierConfig {
    let mut cfg = TierConfig::new(BLOCKS * BLOCK as u64, (1 + round % 5) * BLOCK as u64);
    cfg.eviction = EvictionName::ALL[(round % 6) as usize];
    cfg.sequential_cutoff = if round % 4 == 0 { 2 * BLOCK as u64 } else { 0 };
    cfg.durability = [Durability::Immediate, Durability::OnFlush][(round / 6 % 2) as usize];
    let mut fast = FastConfig::new((3 + round % 11) * BLOCK as u64);
    fast.mode = mode;
    fast.eviction = EvictionName::ALL[(round / 2 % 6) as usize];
    fast.admission = [None, Some(AdmissionName::SecondMiss)][(round / 12 % 2) as usize];
    cfg.fast = Some(fast);
    cfg
}

fn devices(cfg: &TierConfig) -> (FaultyBackend, FaultyBackend) {
    let home = FaultyBackend::new(cfg.home_len() as usize, "home");
    let fast = FaultyBackend::new(
        cfg.fast.unwrap().device_len(cfg.block) as usize,
        "fast tier",
    );
    TieredVolume::format_with(&home, Some(&fast), cfg, "fast").unwrap();
    (home, fast)
}

fn open(home: &FaultyBackend, fast: &FaultyBackend) -> TieredVolume {
    TieredVolume::open_with(Arc::new(home.clone()), Some(Arc::new(fast.clone())))
        .expect("a cut volume reopens")
}

/// Reopens the cut devices and checks every block and the dirty bound; returns the
/// reopened volume's recovered dirty count.
/// Stricter than the flat volume's oracle: when every write went to the fast tier
/// (write-back, the tier never failed, its policy took every block), no write is ever
/// made in place, so no block may be torn: it holds a whole version, or zeroes if none
/// was acknowledged.
fn check_untorn(b: u64, bytes: &[u8], acked: u64, attempted: u64) -> Result<(), String> {
    match stamped_version(b, bytes) {
        Some(v) if v >= acked && v <= attempted => Ok(()),
        Some(v) => Err(format!(
            "block {b} holds v{v}; acknowledged v{acked}, attempted up to v{attempted}"
        )),
        None if acked == 0 && bytes.iter().all(|&x| x == 0) => Ok(()),
        None => Err(format!(
            "block {b} is torn (acknowledged v{acked}, attempted up to v{attempted}); write-back never writes in place"
        )),
    }
}

#[allow(clippy::too_many_arguments)]
fn verify(
    home: FaultyBackend,
    fast: FaultyBackend,
    acked: &[u64],
    attempted: &[u64],
    dirty_bound: u64,
    untorn: bool,
    round: u64,
) -> u64 {
    let vol = open(&home, &fast);
    let recovered = vol.recovery().expect("a fast tier").dirty;
    assert!(
        recovered <= dirty_bound,
        "round {round}: {recovered} blocks came back dirty; at most {dirty_bound} were dirty or in flight"
    );
    let mut bytes = vec![0u8; BLOCK];
    for b in 0..BLOCKS {
        vol.read_at(b * BLOCK as u64, &mut bytes).unwrap();
        let (a, t) = (acked[b as usize], attempted[b as usize]);
        let checked = if untorn {
            check_untorn(b, &bytes, a, t)
        } else {
            check_restarted_block(b, &bytes, a, t)
        };
        if let Err(e) = checked {
            panic!("round {round}: {e}");
        }
    }
    // Written back and reopened again: home alone agrees.
    vol.write_back_all().unwrap();
    vol.close().unwrap();
    let again = open(&home, &fast);
    for b in 0..BLOCKS {
        again.read_at(b * BLOCK as u64, &mut bytes).unwrap();
        if let Err(e) = check_restarted_block(b, &bytes, acked[b as usize], attempted[b as usize]) {
            panic!("round {round}, after write-back and a clean reopen: {e}");
        }
    }
    recovered
}

fn rounds(mode: WriteMode) {
    let mut came_back_dirty = 0;
    for round in 0..1000u64 {
        let cfg = config(round, mode);
        let (home, fast) = devices(&cfg);
        let vol = open(&home, &fast);
        let mut rng = SmallRng::seed_from_u64(round);
        let mut acked = vec![0u64; BLOCKS as usize];
        let mut attempted = vec![0u64; BLOCKS as usize];
        let mut pending: Vec<(usize, u64)> = Vec::new();
        match rng.gen_range(0..10) {
            0 | 1 => home.fail_sync_after(rng.gen_range(0..20)),
            2 | 3 => fast.fail_sync_after(rng.gen_range(0..20)),
            4 => fast.fail_write_after(rng.gen_range(0..60), 5),
            _ => {}
        }
        let mut in_flight = 0;
        let ops = rng.gen_range(1..100);
        for _ in 0..ops {
            let b = if rng.gen_bool(0.7) {
                rng.gen_range(0..BLOCKS / 3)
            } else {
                rng.gen_range(0..BLOCKS)
            } as usize;
            let roll = rng.gen_range(0..100);
            if roll < 15 {
                let mut buf = vec![0u8; BLOCK];
                let _ = vol.read_at(b as u64 * BLOCK as u64, &mut buf);
                continue;
            }
            if roll < 22 {
                // A write-back step (the background thread's work, at a chosen moment).
                let _ = vol.write_back_all();
                continue;
            }
            if roll < 30 {
                if vol.flush().is_ok() {
                    for (pb, v) in pending.drain(..) {
                        acked[pb] = acked[pb].max(v);
                    }
                }
                continue;
            }
            let v = attempted[b] + 1;
            attempted[b] = v;
            let fua = rng.gen_bool(0.2);
            let data = stamped_block(b as u64, v, BLOCK);
            match vol.write_at(
                b as u64 * BLOCK as u64,
                &data,
                hscm_block::WriteFlags { fua },
            ) {
                Ok(()) if cfg.durability == Durability::Immediate || fua => {
                    acked[b] = v;
                    if fua {
                        for (pb, pv) in pending.drain(..) {
                            acked[pb] = acked[pb].max(pv);
                        }
                    }
                }
                Ok(()) => pending.push((b, v)),
                Err(_) => {
                    in_flight = 1;
                    if vol.failure().is_some() {
                        let again = vol.write_at(
                            0,
                            &stamped_block(0, 999, BLOCK),
                            hscm_block::WriteFlags::NONE,
                        );
                        assert!(again.is_err(), "round {round}: a write after a failure");
                        break;
                    }
                    // The fast tier failed holding nothing dirty: pass-through goes on.
                    assert!(
                        vol.fast_failure().is_some(),
                        "round {round}: an error that neither poisoned nor dropped the fast tier"
                    );
                }
            }
        }
        let dirty_before = vol.dirty_blocks();
        let untorn = mode == WriteMode::WriteBack
            && vol.fast_failure().is_none()
            && cfg.fast.unwrap().eviction != EvictionName::S3fifo;
        let (home_cut, fast_cut) = (home.power_cut(round), fast.power_cut(round ^ 0x5555));
        drop(vol);
        came_back_dirty += verify(
            home_cut,
            fast_cut,
            &acked,
            &attempted,
            dirty_before + in_flight,
            untorn,
            round,
        );
    }
    if mode == WriteMode::WriteBack {
        assert!(came_back_dirty > 0, "no round left dirty blocks to recover");
    } else {
        assert_eq!(came_back_dirty, 0, "write-through left dirty blocks");
    }
}

#[test]
fn a_thousand_power_cuts_in_write_back_lose_nothing_acknowledged_and_bound_the_dirty_count() {
    rounds(WriteMode::WriteBack);
}

#[test]
fn a_thousand_power_cuts_in_write_through_with_a_fast_tier_lose_nothing_acknowledged() {
    rounds(WriteMode::WriteThrough);
}

/// Writers on two threads and the background write-back while the power goes.
#[test]
fn power_cut_under_concurrent_writers_and_background_write_back_loses_no_acknowledged_write() {
    for round in 0..60u64 {
        let mut cfg = config(round, WriteMode::WriteBack);
        cfg.durability = Durability::Immediate;
        let (home, fast) = devices(&cfg);
        let vol = Arc::new(open(&home, &fast));
        let writers = Writers::start(&vol, round, BLOCKS, BLOCK);
        // Long enough for the write-back thread (every 50 ms) to run now and then.
        std::thread::sleep(std::time::Duration::from_millis(20 + round * 7 % 90));
        let dirty_before = vol.dirty_blocks();
        let (home_cut, fast_cut) = (home.power_cut(round), fast.power_cut(round + 1));
        let (acked, attempted) = writers.stop();
        drop(vol);
        // Two writes in flight, and the write-back may have been between its home sync
        // and its clean marks' sync (those blocks count as dirty until then).
        let bound = dirty_before + 2 + cfg.fast.unwrap().size / BLOCK as u64;
        verify(home_cut, fast_cut, &acked, &attempted, bound, false, round);
    }
}

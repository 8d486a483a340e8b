//! Power cuts: a thousand rounds per durability mode of random writes of self-describing
//! blocks over a home device that keeps only what a sync covered (plus any subset of the
//! rest, whole or torn), cut at a random moment, sometimes after a failed sync, then
//! reopened. No acknowledged write may be lost and no block may hold anything older
//! than its last acknowledged version or newer than its last attempted one.

use std::sync::Arc;

mod common;

use common::Writers;
use hscm_policy::cache::{AdmissionName, EvictionName};
use hscm_tier::{Durability, TierConfig, TieredVolume};
use hscm_volume::testing::{check_restarted_block, stamped_block, FaultyBackend};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

const BLOCKS: u64 = 48;
const BLOCK: usize = 4096;

fn config(round: u64, durability: Durability) -> TierConfig {
    let mut cfg = TierConfig::new(BLOCKS * BLOCK as u64, (2 + round % 7) * BLOCK as u64);
    cfg.eviction = EvictionName::ALL[(round % 6) as usize];
    cfg.admission = [None, Some(AdmissionName::SecondMiss)][(round / 6 % 2) as usize];
    cfg.sequential_cutoff = if round % 3 == 0 { 2 * BLOCK as u64 } else { 0 };
    cfg.durability = durability;
    cfg
}

fn verify(home: FaultyBackend, acked: &[u64], attempted: &[u64], round: u64) {
    let vol = TieredVolume::open_on(Arc::new(home)).expect("a cut volume reopens");
    let mut bytes = vec![0u8; BLOCK];
    for b in 0..BLOCKS {
        vol.read_at(b * BLOCK as u64, &mut bytes).unwrap();
        if let Err(e) = check_restarted_block(b, &bytes, acked[b as usize], attempted[b as usize]) {
            panic!("round {round}: {e}");
        }
    }
}

fn rounds(durability: Durability) {
    for round in 0..1000u64 {
        let cfg = config(round, durability);
        let home = FaultyBackend::new(cfg.home_len() as usize, "home");
        TieredVolume::format(&home, &cfg).unwrap();
        let vol = TieredVolume::open_on(Arc::new(home.clone())).unwrap();
        let mut rng = SmallRng::seed_from_u64(round);
        let mut acked = vec![0u64; BLOCKS as usize];
        let mut attempted = vec![0u64; BLOCKS as usize];
        // Written since the last successful flush (OnFlush acknowledges at flushes).
        let mut pending: Vec<(usize, u64)> = Vec::new();
        if rng.gen_bool(0.3) {
            home.fail_sync_after(rng.gen_range(0..20));
        }
        let ops = rng.gen_range(1..80);
        for _ in 0..ops {
            // A hot third, to exercise DRAM hits and evictions.
            let b = if rng.gen_bool(0.7) {
                rng.gen_range(0..BLOCKS / 3)
            } else {
                rng.gen_range(0..BLOCKS)
            } as usize;
            if rng.gen_bool(0.15) {
                let mut buf = vec![0u8; BLOCK];
                let _ = vol.read_at(b as u64 * BLOCK as u64, &mut buf);
                continue;
            }
            if durability == Durability::OnFlush && rng.gen_bool(0.1) {
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
                Ok(()) if durability == Durability::Immediate || fua => {
                    acked[b] = v;
                    // A FUA write's sync covers every earlier write too.
                    if fua {
                        for (pb, pv) in pending.drain(..) {
                            acked[pb] = acked[pb].max(pv);
                        }
                    }
                }
                Ok(()) => pending.push((b, v)),
                // Refused (a sync failed): the volume must stay refused.
                Err(_) => {
                    assert!(
                        vol.failure().is_some(),
                        "round {round}: an error without poison"
                    );
                    let again = vol.write_at(
                        0,
                        &stamped_block(0, 999, BLOCK),
                        hscm_block::WriteFlags::NONE,
                    );
                    assert!(again.is_err(), "round {round}: a write after a failure");
                    break;
                }
            }
        }
        let cut = home.power_cut(round);
        drop(vol);
        verify(cut, &acked, &attempted, round);
    }
}

#[test]
fn a_thousand_power_cuts_lose_no_acknowledged_write_when_every_write_is_durable() {
    rounds(Durability::Immediate);
}

#[test]
fn a_thousand_power_cuts_lose_nothing_flushed_or_fua_when_writes_wait_for_flush() {
    rounds(Durability::OnFlush);
}

/// Writers on two threads while the power goes: each block has one writer, so its
/// versions are ordered; a write acknowledged before the cut must survive it.
#[test]
fn power_cut_under_concurrent_writers_loses_no_acknowledged_write() {
    for round in 0..100u64 {
        let cfg = config(round, Durability::Immediate);
        let home = FaultyBackend::new(cfg.home_len() as usize, "home");
        TieredVolume::format(&home, &cfg).unwrap();
        let vol = Arc::new(TieredVolume::open_on(Arc::new(home.clone())).unwrap());
        let writers = Writers::start(&vol, round, BLOCKS, BLOCK);
        std::thread::sleep(std::time::Duration::from_micros(200 + round * 13 % 800));
        let cut = home.power_cut(round);
        let (acked, attempted) = writers.stop();
        drop(vol);
        verify(cut, &acked, &attempted, round);
    }
}

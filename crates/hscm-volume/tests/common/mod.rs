//! Shared by the power-cut tests: writer threads that record, per block, the highest
//! version acknowledged and the highest attempted, the two bounds
//! `testing::check_restarted_block` checks a restarted block against.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use hscm_volume::testing::stamped_block;
use hscm_volume::{Durability, Volume};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

pub struct Ledger {
    acked: Mutex<Vec<u64>>,
    attempted: Mutex<Vec<u64>>,
}

impl Ledger {
    pub fn new(blocks: u64) -> Arc<Ledger> {
        Arc::new(Ledger {
            acked: Mutex::new(vec![0; blocks as usize]),
            attempted: Mutex::new(vec![0; blocks as usize]),
        })
    }

    /// (acknowledged, attempted) per block.
    pub fn bounds(&self) -> (Vec<u64>, Vec<u64>) {
        (
            self.acked.lock().unwrap().clone(),
            self.attempted.lock().unwrap().clone(),
        )
    }
}

/// How the writers run: writer `w` writes stamped blocks of `block_len` bytes at the
/// blocks `pick(w, rng)` chooses (each block written by one writer only, so its
/// versions are ordered), until `stop` or the first error. On-flush and write-back
/// writers flush
/// after about one write in `flush_one_in`; a write counts as acknowledged once
/// `write_at` returned (immediate) or a later flush did (the others).
pub struct Writers {
    pub count: u64,
    pub durability: Durability,
    pub block_len: usize,
    pub seed: u64,
    pub flush_one_in: u32,
    pub pick: fn(u64, &mut SmallRng) -> u64,
}

impl Writers {
    pub fn spawn(
        &self,
        v: &Arc<Volume>,
        ledger: &Arc<Ledger>,
        stop: &Arc<AtomicBool>,
    ) -> Vec<JoinHandle<()>> {
        (0..self.count)
            .map(|w| {
                let (v, ledger, stop) = (v.clone(), ledger.clone(), stop.clone());
                let (durability, len, pick, one_in) = (
                    self.durability,
                    self.block_len,
                    self.pick,
                    self.flush_one_in,
                );
                let mut rng = SmallRng::seed_from_u64(self.seed * 100 + w);
                std::thread::spawn(move || {
                    let mut completed: Vec<(u64, u64)> = Vec::new();
                    for version in 1.. {
                        if stop.load(Ordering::Relaxed) {
                            break;
                        }
                        let block = pick(w, &mut rng);
                        ledger.attempted.lock().unwrap()[block as usize] = version;
                        let data = stamped_block(block, version, len);
                        if v.write_at(block * len as u64, &data).is_err() {
                            break;
                        }
                        match durability {
                            Durability::Immediate => {
                                ledger.acked.lock().unwrap()[block as usize] = version
                            }
                            Durability::OnFlush | Durability::WriteBack => {
                                completed.push((block, version));
                                if rng.gen_ratio(1, one_in) {
                                    if v.flush().is_err() {
                                        break;
                                    }
                                    let mut a = ledger.acked.lock().unwrap();
                                    for (b, ver) in completed.drain(..) {
                                        a[b as usize] = a[b as usize].max(ver);
                                    }
                                }
                            }
                        }
                    }
                })
            })
            .collect()
    }
}

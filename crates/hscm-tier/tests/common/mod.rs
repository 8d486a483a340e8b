//! What the power-cut tests share: writers on two threads over one volume.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;

use hscm_tier::TieredVolume;
use hscm_volume::testing::stamped_block;
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

type Versions = (Vec<u64>, Vec<u64>);

/// Two threads writing stamped blocks until stopped: thread `t` owns the blocks `b`
/// with `b % 2 == t`, so each block's versions are ordered. A write that fails ends
/// its thread.
pub struct Writers {
    stop: Arc<AtomicBool>,
    threads: Vec<JoinHandle<Versions>>,
    blocks: usize,
}

impl Writers {
    pub fn start(vol: &Arc<TieredVolume>, seed: u64, blocks: u64, block: usize) -> Writers {
        let stop = Arc::new(AtomicBool::new(false));
        let threads = (0..2u64)
            .map(|t| {
                let (vol, stop) = (vol.clone(), stop.clone());
                std::thread::spawn(move || {
                    let mut rng = SmallRng::seed_from_u64(seed * 2 + t);
                    let mut acked = vec![0u64; blocks as usize];
                    let mut attempted = vec![0u64; blocks as usize];
                    while !stop.load(Ordering::Relaxed) {
                        let b = (rng.gen_range(0..blocks / 2) * 2 + t) as usize;
                        let v = attempted[b] + 1;
                        attempted[b] = v;
                        let data = stamped_block(b as u64, v, block);
                        if vol
                            .write_at(b as u64 * block as u64, &data, hscm_block::WriteFlags::NONE)
                            .is_err()
                        {
                            break;
                        }
                        acked[b] = v;
                    }
                    (acked, attempted)
                })
            })
            .collect();
        Writers {
            stop,
            threads,
            blocks: blocks as usize,
        }
    }

    /// Stops them and returns, per block, the last acknowledged and attempted version.
    pub fn stop(self) -> Versions {
        self.stop.store(true, Ordering::Relaxed);
        let mut acked = vec![0u64; self.blocks];
        let mut attempted = vec![0u64; self.blocks];
        for w in self.threads {
            let (a, t) = w.join().unwrap();
            for b in 0..self.blocks {
                acked[b] = acked[b].max(a[b]);
                attempted[b] = attempted[b].max(t[b]);
            }
        }
        (acked, attempted)
    }
}

//! Power cuts at random moments under concurrent writers: after restart, every
//! acknowledged write is there (Immediate: acknowledged by write_at; OnFlush and
//! WriteBack: completed before a successful flush), and every block holds some version
//! that was written.

mod common;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use hscm_volume::testing::{check_restarted_block, FaultyBackend};
use hscm_volume::{CreateOptions, Durability, OpenOptions, Volume};
use rand::{Rng, SeedableRng};

const BLOCK: usize = 1536; // not a sector multiple: exercises unaligned writes too
const BLOCKS_PER_WRITER: u64 = 40;
const WRITERS: u64 = 4;

fn round(durability: Durability, seed: u64, opts: &OpenOptions) {
    round_on(durability, seed, opts, false)
}

/// `write_through`: the device prefers durable writes of their own (FUA, as an NBD
/// home does), so immediate writes take them instead of sharing a sync.
fn round_on(durability: Durability, seed: u64, opts: &OpenOptions, write_through: bool) {
    let size = (WRITERS * BLOCKS_PER_WRITER * BLOCK as u64).next_multiple_of(4096);
    let dev = FaultyBackend::new(
        CreateOptions::default().backing_len(size) as usize,
        "cut-dev",
    );
    if write_through {
        dev.prefer_write_through();
    }
    Volume::format(
        &dev,
        size,
        &CreateOptions {
            chunk_size: 8192,
            durability,
            overwrite: false,
            journal_size: 0,
        },
    )
    .unwrap();
    let v = Arc::new(Volume::open_backend(Box::new(dev.clone()), opts).unwrap());
    let ledger = common::Ledger::new(WRITERS * BLOCKS_PER_WRITER);
    let stop = Arc::new(AtomicBool::new(false));
    let writers = common::Writers {
        count: WRITERS,
        durability,
        block_len: BLOCK,
        seed,
        flush_one_in: 8,
        pick: |w, rng| w * BLOCKS_PER_WRITER + rng.gen_range(0..BLOCKS_PER_WRITER),
    }
    .spawn(&v, &ledger, &stop);
    let mut rng = rand::rngs::SmallRng::seed_from_u64(seed);
    std::thread::sleep(Duration::from_micros(rng.gen_range(0..3000)));
    let after = dev.power_cut(seed);
    stop.store(true, Ordering::Relaxed);
    for w in writers {
        w.join().unwrap();
    }
    let (acked, attempted) = ledger.bounds();
    let v2 = Volume::open_backend(Box::new(after), &OpenOptions::default()).unwrap();
    for block in 0..WRITERS * BLOCKS_PER_WRITER {
        let mut b = vec![0u8; BLOCK];
        v2.read_at(block * BLOCK as u64, &mut b).unwrap();
        if let Err(e) =
            check_restarted_block(block, &b, acked[block as usize], attempted[block as usize])
        {
            panic!("{durability} seed {seed}: {e}");
        }
    }
}

#[test]
fn acknowledged_writes_survive_power_cuts_immediate() {
    for seed in 1..=60 {
        round(Durability::Immediate, seed, &OpenOptions::default());
    }
}

#[test]
fn acknowledged_writes_survive_power_cuts_immediate_through_fua() {
    for seed in 1..=60 {
        round_on(Durability::Immediate, seed, &OpenOptions::default(), true);
    }
}

#[test]
fn acknowledged_writes_survive_power_cuts_on_flush() {
    for seed in 1..=60 {
        round(Durability::OnFlush, seed, &OpenOptions::default());
    }
}

/// Write-back: 1,000 cuts. A third of the rounds hold at most one sector dirty (every
/// write waits for a pass), a third 16 KiB (writers and background passes overlap),
/// the rest the default bound (only flushes write home); some warm up in the
/// background while they run.
#[test]
fn acknowledged_writes_survive_power_cuts_write_back() {
    for seed in 1..=1000u64 {
        let opts = OpenOptions {
            dirty_max: Some([4096, 16 << 10, hscm_volume::DEFAULT_DIRTY_MAX][(seed % 3) as usize]),
            background_load: seed % 5 != 0,
            ..OpenOptions::default()
        };
        round(Durability::WriteBack, seed, &opts);
    }
}

//! The chunk state machine (paper §3.3) against a reference model: any interleaving of
//! reads, writes (aligned or not, across chunks) and loader steps must read back
//! exactly what a flat byte array would, and once loaded, RAM must equal the device.
//! Run with and without a journal: both layouts obey the same model.

use hscm_volume::testing::FaultyBackend;
use hscm_volume::{CreateOptions, Durability, OpenOptions, Volume, MIN_JOURNAL};
use proptest::prelude::*;

const SIZE: u64 = 16 * 4096;
const CHUNK: u32 = 2 * 4096;

#[derive(Debug, Clone)]
enum Op {
    Write { offset: u64, len: usize, seed: u8 },
    Read { offset: u64, len: usize },
    LoadStep,
    Flush,
}

fn op() -> impl Strategy<Value = Op> {
    let range = (0..SIZE).prop_flat_map(|off| (Just(off), 1..=((SIZE - off).min(20_000) as usize)));
    prop_oneof![
        3 => (range.clone(), any::<u8>()).prop_map(|((offset, len), seed)| Op::Write { offset, len, seed }),
        // Sector-aligned writes exercise case 3 (backend only) on unloaded chunks.
        2 => ((0..SIZE / 4096), 1..4u64, any::<u8>()).prop_map(|(s, n, seed)| {
            let n = n.min(SIZE / 4096 - s);
            Op::Write { offset: s * 4096, len: (n * 4096) as usize, seed }
        }),
        3 => range.prop_map(|(offset, len)| Op::Read { offset, len }),
        2 => Just(Op::LoadStep),
        1 => Just(Op::Flush),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]
    #[test]
    fn volume_matches_a_flat_model(ops in proptest::collection::vec(op(), 1..60), journaled in any::<bool>()) {
        let opts = CreateOptions { chunk_size: CHUNK, durability: Durability::OnFlush, overwrite: false,
                                   journal_size: if journaled { MIN_JOURNAL } else { 0 } };
        let dev = FaultyBackend::new(opts.backing_len(SIZE) as usize, "model-dev");
        Volume::format(&dev, SIZE, &opts).unwrap();
        let v = Volume::open_backend(Box::new(dev.clone()), &OpenOptions { background_load: false, ..OpenOptions::default() }).unwrap();
        let mut model = vec![0u8; SIZE as usize];
        let mut loaded_before = 0;
        for op in &ops {
            match *op {
                Op::Write { offset, len, seed } => {
                    let data: Vec<u8> = (0..len).map(|i| seed.wrapping_add(i as u8)).collect();
                    v.write_at(offset, &data).unwrap();
                    model[offset as usize..offset as usize + len].copy_from_slice(&data);
                }
                Op::Read { offset, len } => {
                    let mut got = vec![0u8; len];
                    v.read_at(offset, &mut got).unwrap();
                    prop_assert!(got[..] == model[offset as usize..offset as usize + len], "read {offset}+{len}");
                }
                Op::LoadStep => { v.load_step().unwrap(); }
                Op::Flush => v.flush().unwrap(),
            }
            let p = v.load_progress();
            prop_assert!(p.loaded_chunks >= loaded_before, "a chunk was unloaded");
            prop_assert!(p.loaded_chunks <= p.total_chunks);
            loaded_before = p.loaded_chunks;
        }
        // After a checkpoint (a no-op without a journal) the home area holds every
        // completed write.
        v.checkpoint().unwrap();
        let data_offset = v.header().data_offset() as usize;
        prop_assert!(dev.live_image()[data_offset..] == model[..]);
        while v.load_step().unwrap() {}
        let mut all = vec![0u8; SIZE as usize];
        v.read_at(0, &mut all).unwrap();
        prop_assert!(all == model, "RAM differs from the model once fully loaded");
    }
}

#[test]
fn reads_of_unloaded_chunks_jump_the_queue() {
    let size = 64 * 4096;
    let dev = FaultyBackend::new(
        CreateOptions::default().backing_len(size) as usize,
        "prio-dev",
    );
    Volume::format(
        &dev,
        size,
        &CreateOptions {
            chunk_size: 4096,
            ..CreateOptions::default()
        },
    )
    .unwrap();
    let v = Volume::open_backend(
        Box::new(dev),
        &OpenOptions {
            background_load: false,
            ..OpenOptions::default()
        },
    )
    .unwrap();
    let mut b = [0u8; 1];
    v.read_at(40 * 4096 + 5, &mut b).unwrap();
    assert_eq!(
        v.load_progress().loaded_chunks,
        0,
        "a read must not load synchronously"
    );
    v.load_step().unwrap();
    // The first load step took the requested chunk (and the unloaded ones after it),
    // not chunk 0.
    let p = v.load_progress();
    assert_eq!(
        p.loaded_chunks, 24,
        "expected chunks 40..64 loaded first, got {p:?}"
    );
}

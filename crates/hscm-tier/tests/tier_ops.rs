//! The tiered volume under the whole-engine fuzz driver (`hscm_tier::testing::tier_ops`,
//! also the `tier_ops` cargo-fuzz target) on seeded random sequences: requests at any
//! offset and length, injected write and sync failures, power cuts and clean closes,
//! every restart checked against the model, over every policy, admission filter, DRAM
//! share and durability the first byte picks.
//!
//! `HSCM_FUZZ_CASES` raises the count; a failing case prints its input in hex.

use hscm_tier::testing::tier_ops;
use hscm_volume::testing::volume_ops::Outcome;
use rand::{Rng, SeedableRng};

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[test]
fn random_operation_sequences_keep_every_promise_across_failures_and_power_cuts() {
    let cases: usize = std::env::var("HSCM_FUZZ_CASES")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(400);
    let mut rng = rand::rngs::SmallRng::seed_from_u64(0x7_1e25);
    let mut total = Outcome::default();
    for _ in 0..cases {
        let len = rng.gen_range(1..600);
        let input: Vec<u8> = (0..len).map(|_| rng.gen()).collect();
        match tier_ops(&input) {
            Ok(o) => {
                total.ops += o.ops;
                total.restarts += o.restarts;
                total.refused += o.refused;
            }
            Err(broken) => panic!("{broken}\ninput (hex): {}", hex(&input)),
        }
    }
    assert!(
        total.restarts > cases,
        "only {} restarts in {cases} sequences",
        total.restarts
    );
    assert!(
        total.refused > 0,
        "no request was ever refused after a failure"
    );
    eprintln!("{cases} sequences: {total:?}");
}

#[test]
fn saved_inputs_replay_clean() {
    // Whatever a local `cargo fuzz run tier_ops` left in its (untracked) corpus.
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let Ok(entries) = std::fs::read_dir(root.join("../../fuzz/corpus/tier_ops")) else {
        return;
    };
    for entry in entries {
        let path = entry.unwrap().path();
        let input = std::fs::read(&path).unwrap();
        if let Err(broken) = tier_ops(&input) {
            panic!("{}: {broken}", path.display());
        }
    }
}

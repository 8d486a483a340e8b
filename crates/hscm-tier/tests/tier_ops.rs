//! The tiered volume under the whole-engine fuzz driver (`hscm_tier::testing::tier_ops`,
//! also the `tier_ops` cargo-fuzz target) on seeded random sequences: requests at any
//! offset and length, injected write and sync failures, power cuts and clean closes,
//! every restart checked against the model, over every policy, admission filter, DRAM
//! share and durability the first byte picks.
//!
//! `HSCM_FUZZ_CASES` raises the count; a failing case prints its input in hex.

use hscm_tier::testing::tier_ops;
use hscm_volume::testing::volume_ops::{check_sequences, fuzz_cases, replay_saved};
use rand::{Rng, SeedableRng};

#[test]
fn random_operation_sequences_keep_every_promise_across_failures_and_power_cuts() {
    let cases = fuzz_cases(400);
    let mut rng = rand::rngs::SmallRng::seed_from_u64(0x7_1e25);
    let inputs = (0..cases).map(|_| {
        let len = rng.gen_range(1..600);
        (0..len).map(|_| rng.gen()).collect::<Vec<u8>>()
    });
    let total = check_sequences(inputs, tier_ops);
    eprintln!("{cases} sequences: {total:?}");
}

#[test]
fn saved_inputs_replay_clean() {
    // Whatever a local `cargo fuzz run tier_ops` left in its (untracked) corpus.
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    replay_saved(&[&root.join("../../fuzz/corpus/tier_ops")], tier_ops);
}

/// The fast-tier driver (`hscm_tier::testing::fast_tier_ops`, also the `tier_fast_ops`
/// cargo-fuzz target) on seeded random sequences: both write modes, power cuts over
/// both devices, failures injected on either, clean restarts.
#[test]
fn random_sequences_over_a_fast_tier_keep_every_promise_across_failures_and_power_cuts() {
    use hscm_tier::testing::fast_tier_ops;
    let cases = fuzz_cases(600);
    let mut rng = rand::rngs::SmallRng::seed_from_u64(0xfa57);
    let mut total = hscm_tier::testing::FastOutcome::default();
    for _ in 0..cases {
        let len = rng.gen_range(2..400);
        let input: Vec<u8> = (0..len).map(|_| rng.gen()).collect();
        match fast_tier_ops(&input) {
            Ok(o) => {
                total.writes += o.writes;
                total.power_cuts += o.power_cuts;
                total.clean_restarts += o.clean_restarts;
                total.refused += o.refused;
                total.pass_through += o.pass_through;
                total.recovered_dirty += o.recovered_dirty;
            }
            Err(e) => panic!("{e}\ninput: {}", hex(&input)),
        }
    }
    eprintln!("{cases} sequences: {total:?}");
    assert!(
        total.power_cuts > 100 && total.clean_restarts > 100,
        "{total:?}"
    );
    assert!(
        total.recovered_dirty > 0 && total.pass_through > 0 && total.refused > 0,
        "{total:?}"
    );
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

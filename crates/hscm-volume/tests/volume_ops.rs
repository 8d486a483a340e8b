//! The whole-volume fuzz target (`hscm_volume::testing::volume_ops`, also the
//! `volume_ops` cargo-fuzz target) on a bounded number of seeded random sequences, plus
//! every saved input under `tests/volume_ops_inputs` (and a local
//! `fuzz/corpus/volume_ops`): requests, loader steps, injected device failures, power
//! cuts and clean closes, each restart checked against the model.
//!
//! `HSCM_FUZZ_CASES` raises the count for a longer run; a failing case prints its input
//! in hex, to save under `tests/volume_ops_inputs` and replay.

use hscm_volume::testing::volume_ops;
use rand::{Rng, SeedableRng};

#[test]
fn random_operation_sequences_keep_every_promise_across_failures_and_power_cuts() {
    let cases = volume_ops::fuzz_cases(400);
    let mut rng = rand::rngs::SmallRng::seed_from_u64(0x5eed_f022);
    let inputs = (0..cases).map(|_| {
        let len = rng.gen_range(1..600);
        (0..len).map(|_| rng.gen()).collect::<Vec<u8>>()
    });
    let total = volume_ops::check_sequences(inputs, volume_ops::run);
    eprintln!("{cases} sequences: {total:?}");
}

#[test]
fn saved_inputs_replay_clean() {
    // Regression inputs kept with the tests, and whatever a local `cargo fuzz` run left
    // in its (untracked) corpus.
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let kept = root.join("tests/volume_ops_inputs");
    let fuzzed = root.join("../../fuzz/corpus/volume_ops");
    let replayed = volume_ops::replay_saved(&[&kept, &fuzzed], volume_ops::run);
    // At least the input that found a failed volume answering flush with success.
    assert!(replayed > 0, "no saved inputs under {}", kept.display());
}

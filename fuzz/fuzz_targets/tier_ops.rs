//! Whole tiered-volume operation sequences over the fault-injecting home device:
//! requests, injected failures, power cuts and clean closes, checked against the model
//! after every restart (the driver is `hscm_tier::testing::tier_ops`; the crate's tests
//! run it on seeded inputs). Run: cargo +nightly fuzz run tier_ops
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Err(broken) = hscm_tier::testing::tier_ops(data) {
        panic!("{broken}");
    }
});

//! Whole operation sequences over a tiered volume with a fast tier: two fault-injecting
//! devices, requests, write-backs, injected failures on either device, power cuts over
//! both and clean closes, every restart checked against the model and the dirty bound
//! (the driver is `hscm_tier::testing::fast_tier_ops`; the crate's tests run it on
//! seeded inputs). Run: cargo +nightly fuzz run tier_fast_ops
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Err(broken) = hscm_tier::testing::fast_tier_ops(data) {
        panic!("{broken}");
    }
});

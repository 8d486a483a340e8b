//! Whole-volume operation sequences over the fault-injecting device: requests, loader
//! steps, injected failures, power cuts and clean closes, checked against a model after
//! every restart (the driver is `hscm_volume::testing::volume_ops`; the crate's tests run
//! it on seeded inputs).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Err(broken) = hscm_volume::testing::volume_ops::run(data) {
        panic!("{broken}");
    }
});

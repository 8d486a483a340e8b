//! Whatever a server sends, the NBD client home fails cleanly: an error, never a panic
//! or a hang. The input is everything the server sends on each connection.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    hscm_durable::nbd::testing::run_client(data);
});

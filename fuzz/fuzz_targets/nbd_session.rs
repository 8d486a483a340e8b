//! Whatever a client sends, the NBD server answers or hangs up, and never panics.
//! The first byte picks a read-only or a writable export; the rest is the session.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Some((&mode, session)) = data.split_first() {
        hscm_nbd::testing::run_session(session, mode & 1 == 1);
    }
});

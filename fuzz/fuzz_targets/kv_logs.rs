//! Key-value log records and recorded operation traces: any bytes give records or a
//! clear error, never a panic.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok((_, valid)) = hscm_store::kv::record::scan_image("fuzz", data) {
        assert!(valid as usize <= data.len());
    }
    let _ = hscm_trace::parse_op_trace("fuzz", data, 1000);
});

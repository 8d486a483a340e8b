//! Key-value log records and recorded operation traces: any bytes give the records
//! before the first bad one, never a panic.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let (_, valid) = hscm_kv::record::scan_image(data);
    assert!(valid as usize <= data.len());
    let _ = hscm_trace::parse_op_trace("fuzz", data, 1000);
});

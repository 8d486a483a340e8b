//! Arbitrary bytes through format detection and every trace reader: errors are fine,
//! panics and hangs are not. Run: cargo +nightly fuzz run trace_any
#![no_main]

use hscm_trace::{Format, TraceReader};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let formats = [
        None,
        Some(Format::Lackey),
        Some(Format::Ramulator),
        Some(Format::Dramsim3),
        Some(Format::Nvmain),
        Some(Format::Dramsys),
        Some(Format::Hscm),
    ];
    for f in formats {
        if let Ok(r) =
            TraceReader::from_reader(Box::new(std::io::Cursor::new(data.to_vec())), "fuzz", f)
        {
            for item in r.take(100_000) {
                if item.is_err() {
                    break;
                }
            }
        }
    }
});

//! Arbitrary text as a sweep spec: expansion and every check (the parameters through
//! each simulator's flags) may refuse it, never panic; an error names a line inside
//! the text. Run: cargo +nightly fuzz run sweep_spec
#![no_main]

use std::path::Path;

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    match hscm_lab::sweep::expand(text, Path::new("fuzz.toml"), Path::new("/nonexistent")) {
        Ok(sweep) => assert!(!sweep.points.is_empty()),
        Err(e) => {
            if let Some(line) = e.line {
                assert!(line >= 1 && line <= text.lines().count().max(1) + 1, "{e}");
            }
        }
    }
});

//! The file system's operations with offsets, sizes and lengths anywhere in u64,
//! chosen by the fuzzer (the first byte picks the mode): no call may panic or
//! allocate by the length asked, and what was done must read back the same after a
//! remount. The same code runs seeded in `crates/hscm-fs/tests/extreme.rs`.
#![no_main]

#[path = "../../crates/hscm-fs/tests/common/mod.rs"]
mod common;

use hscm_fs::Durability;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&mode, ops)) = data.split_first() else {
        return;
    };
    let durability = if mode & 1 == 0 {
        Durability::Immediate
    } else {
        Durability::OnFlush
    };
    common::extreme::run(ops, durability);
});

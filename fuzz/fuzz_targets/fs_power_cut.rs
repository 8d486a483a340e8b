//! The file system's whole API under power cuts, with the fuzzer choosing: the
//! input's first 8 bytes pick the mode (bit 0), one writer or several at once
//! (bit 1), where the device fails (a write or a sync) and what of the unsynced
//! writes survives; the rest choose the operations and their arguments.
//! - One writer: create, mkdir, write, truncate, unlink, rmdir, rename with its
//!   flags, link, fallocate and punch, symlink, chmod, fsync. After the cut the file
//!   system must mount and hold what its mode promises, as
//!   `crates/hscm-fs/tests/power_cut.rs` checks for seeded rounds (the same code).
//! - Several writers at once, each on its own open file: appends, rewrites in
//!   place of synced blocks, writes into the file's RAM behind the file system's
//!   back (as FUSE passthrough and shared mappings make them), fsyncs; the rest of
//!   the input is dealt out among them. After the cut each file must hold what its
//!   writer saw acknowledged, as `crates/hscm-fs/tests/power_cut_concurrent.rs`
//!   checks for seeded rounds (the same code).
#![no_main]

#[path = "../../crates/hscm-fs/tests/common/mod.rs"]
mod common;

use hscm_fs::Durability;
use libfuzzer_sys::fuzz_target;
use rand::RngCore;

/// Randomness that is the fuzzer's bytes, then zeroes: every choice the operations
/// make comes from the input.
struct InputChoices<'a> {
    bytes: &'a [u8],
}

impl RngCore for InputChoices<'_> {
    fn next_u32(&mut self) -> u32 {
        self.next_u64() as u32
    }
    fn next_u64(&mut self) -> u64 {
        let mut b = [0u8; 8];
        self.fill_bytes(&mut b);
        u64::from_le_bytes(b)
    }
    fn fill_bytes(&mut self, dest: &mut [u8]) {
        let n = dest.len().min(self.bytes.len());
        dest[..n].copy_from_slice(&self.bytes[..n]);
        dest[n..].fill(0);
        self.bytes = &self.bytes[n..];
    }
    fn try_fill_bytes(&mut self, dest: &mut [u8]) -> Result<(), rand::Error> {
        self.fill_bytes(dest);
        Ok(())
    }
}

fuzz_target!(|data: &[u8]| {
    let Some((seed, choices)) = data.split_first_chunk::<8>() else {
        return;
    };
    let seed = u64::from_le_bytes(*seed);
    let durability = if seed & 1 == 0 {
        Durability::Immediate
    } else {
        Durability::OnFlush
    };
    if seed & 2 == 0 {
        common::power_cut::round(seed, durability, || InputChoices { bytes: choices });
    } else {
        let writers = common::concurrent_cut::WRITERS as usize;
        let share = choices.len().div_ceil(writers).max(1);
        common::concurrent_cut::round(seed, durability, |w| InputChoices {
            bytes: choices.chunks(share).nth(w as usize).unwrap_or(&[]),
        });
    }
});

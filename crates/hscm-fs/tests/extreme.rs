//! Offsets, sizes and lengths anywhere in u64 (tests/common/extreme.rs): seeded
//! random inputs and the cases that used to hurt (fallocate of 8 EiB collected a
//! block number per block before asking the allocator).

mod common;

use std::sync::Arc;

use common::OWNER;
use hscm_block::MemTarget;
use hscm_fs::{Allocate, Durability, FileSystem, Kind, MountOptions, ROOT};
use rand::{RngCore, SeedableRng};

#[test]
fn seeded_operations_with_any_offsets_and_lengths_read_back_after_a_remount() {
    let rounds: u64 = std::env::var("HSCM_FS_EXTREME_ROUNDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(200);
    for seed in 0..rounds {
        let mut rng = rand::rngs::SmallRng::seed_from_u64(seed);
        let mut bytes = vec![0u8; 600];
        rng.fill_bytes(&mut bytes);
        let durability = if seed % 2 == 0 {
            Durability::Immediate
        } else {
            Durability::OnFlush
        };
        common::extreme::run(&bytes, durability);
    }
}

#[test]
fn fallocate_of_a_huge_range_is_refused_by_the_free_blocks_alone() {
    let target = Arc::new(MemTarget::new(16 << 20));
    FileSystem::format(target.as_ref(), 0, 0).unwrap();
    let fs = FileSystem::mount(target.clone(), MountOptions::default()).unwrap();
    let f = fs
        .mknod(ROOT, b"f", Kind::File, 0o644, 0, OWNER)
        .unwrap()
        .ino;
    fs.write(f, 1 << 20, b"x").unwrap();
    let free = fs.statfs().free_blocks;
    for (offset, len) in [
        (0, i64::MAX as u64),
        (4096, 64 << 30),
        (0, (i64::MAX as u64) - 4096),
    ] {
        for mode in [Allocate::Extend, Allocate::KeepSize] {
            let err = fs.fallocate(f, offset, len, mode).unwrap_err();
            assert_eq!(err.errno(), 28, "{offset}+{len} {mode:?}: {err}");
        }
    }
    let err = fs
        .fallocate(f, u64::MAX - 10, 100, Allocate::Extend)
        .unwrap_err();
    assert_eq!(err.errno(), 22, "past the largest file: {err}");
    assert_eq!(fs.statfs().free_blocks, free, "nothing taken");
    // Punching 8 EiB costs what the file maps.
    fs.fallocate(f, 0, i64::MAX as u64, Allocate::PunchHole)
        .unwrap();
    assert_eq!(fs.getattr(f).unwrap().allocated, 0);
    fs.truncate(f, i64::MAX as u64).unwrap();
    fs.truncate(f, 0).unwrap();
    assert_eq!(fs.statfs().free_blocks, free + 1);
}

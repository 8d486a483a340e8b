//! Power cuts under the file system (the rounds are in `common::power_cut`), and
//! the failures around them: a failed sync, growth interrupted after a truncate, a
//! dropped setuid bit.

mod common;

use common::power_cut::{device, open_volume, round};
use common::*;
use hscm_fs::{Durability, FileSystem, MountOptions};
use hscm_volume::testing::FaultyBackend;
use hscm_volume::Volume;
use std::sync::Arc;

/// Rounds per mode here; `HSCM_FS_POWER_CUT_ROUNDS` asks for more.
const ROUNDS: u64 = 40;

fn rounds() -> u64 {
    std::env::var("HSCM_FS_POWER_CUT_ROUNDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(ROUNDS)
}

/// A fresh device with an immediate-mode file system holding one empty file "f" of
/// mode `perm`: the device, the volume, the file system and the file's inode.
fn mounted_with_file(perm: u32) -> (FaultyBackend, Arc<Volume>, FileSystem, u64) {
    let dev = device();
    let vol = open_volume(&dev);
    let fs = FileSystem::mount(vol.clone(), MountOptions::default()).unwrap();
    let ino = fs
        .mknod(hscm_fs::ROOT, b"f", hscm_fs::Kind::File, perm, 0, OWNER)
        .unwrap()
        .ino;
    (dev, vol, fs, ino)
}

#[test]
fn immediate_mode_keeps_every_operation_that_returned_across_power_cuts() {
    for seed in 0..rounds() {
        round(seed, Durability::Immediate, || rng(seed));
    }
}

#[test]
fn on_flush_mode_keeps_everything_up_to_the_last_fsync_across_power_cuts() {
    for seed in 0..rounds() {
        round(1_000_000 + seed, Durability::OnFlush, || {
            rng(1_000_000 + seed)
        });
    }
}

#[test]
fn a_failed_sync_turns_the_file_system_read_only_with_the_reason() {
    let (dev, _vol, fs, ino) = mounted_with_file(0o644);
    fs.write(ino, 0, b"kept").unwrap();
    dev.fail_sync_after(0);
    let err = fs.write(ino, 4, b"lost").unwrap_err();
    assert_eq!(err.errno(), 30, "the failing write: {err}");
    let err = fs.mkdir(hscm_fs::ROOT, b"d", 0o755, OWNER).unwrap_err();
    assert_eq!(err.errno(), 30, "every later change is refused: {err}");
    assert!(err.to_string().contains("sync"), "with the reason: {err}");
    assert_eq!(&fs.read(ino, 0, 4).unwrap(), b"kept", "reads go on");
    // The first failure is kept with the device's errno (hscm-durable's poison), not
    // only as text: EIO from the failed sync.
    assert!(fs.failure().is_some_and(|why| why.contains("sync")));
    assert_eq!(fs.failure_errno(), Some(5));
}

#[test]
fn bytes_cut_off_by_a_truncate_never_come_back_when_a_crash_interrupts_growth() {
    for seed in 0..64 {
        let (dev, vol, fs, ino) = mounted_with_file(0o644);
        fs.write(ino, 0, &[0x55; 8000]).unwrap();
        fs.truncate(ino, 100).unwrap();
        // Growing the file zeroes its last block past byte 100 first; the cut comes at
        // the first sync after.
        // Half the rounds grow by truncate, half by a write inside the same block:
        // neither allocates a block.
        dev.fail_sync_after(0);
        let grown = if seed % 2 == 0 {
            fs.truncate(ino, 6000)
        } else {
            fs.write(ino, 6000 - 1, b"\0").map(|_| ())
        };
        assert!(grown.is_err());
        let survivor = dev.power_cut(seed);
        drop(fs);
        drop(vol);
        let fs = FileSystem::mount(open_volume(&survivor), MountOptions::default()).unwrap();
        let data = fs.read(ino, 0, 10_000).unwrap();
        assert!(
            data.len() == 100 || data.len() == 6000,
            "seed {seed}: size {}",
            data.len()
        );
        assert!(
            data[..100].iter().all(|&b| b == 0x55),
            "seed {seed}: the kept bytes"
        );
        assert!(
            data[100..data.len().min(6000)].iter().all(|&b| b == 0),
            "seed {seed}: bytes truncated away came back"
        );
    }
}

#[test]
fn a_write_over_a_setuid_file_drops_the_bit_durably_with_the_bytes() {
    // An overwrite in place makes its bytes durable with one sync and lets its new
    // mtime wait for the next commit; a dropped setuid bit may not wait: a crash
    // must not give new bytes the old privileges.
    for seed in 0..32 {
        let (dev, vol, fs, ino) = mounted_with_file(0o4755);
        fs.write(ino, 0, &[0x11; 8192]).unwrap();
        fs.setattr(
            ino,
            hscm_fs::SetAttr {
                mode: Some(0o4755),
                ..Default::default()
            },
        )
        .unwrap();
        fs.write(ino, 100, &[0x22; 512]).unwrap();
        let survivor = dev.power_cut(seed);
        drop(fs);
        drop(vol);
        let fs = FileSystem::mount(open_volume(&survivor), MountOptions::default()).unwrap();
        let data = fs.read(ino, 0, 8192).unwrap();
        assert_eq!(
            data[100], 0x22,
            "seed {seed}: the write returned, so it is kept"
        );
        let perm = fs.getattr(ino).unwrap().perm;
        assert_eq!(perm & 0o4000, 0, "seed {seed}: setuid is back: {perm:o}");
    }
}

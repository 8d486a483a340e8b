//! Damaged images: bytes flipped anywhere in the superblocks, the log or the
//! checkpoint slots of a used file system. Mounting says what is wrong or mounts
//! what it can trust; it never panics, and what it mounts works: every file reads,
//! operations run, and a remount gives the same tree.

mod common;

use std::sync::Arc;

use common::*;
use hscm_block::{BlockTarget, MemTarget, WriteFlags};
use hscm_fs::{FileSystem, Kind, MountOptions, Owner, ROOT};
use proptest::prelude::*;

const SIZE: usize = 4 << 20;

/// A file system after some operations, unmounted: its bytes and where its
/// metadata lies (the superblocks, the log and the checkpoint slots all sit before
/// the data blocks).
fn used_image(seed: u64) -> (Vec<u8>, u64) {
    let target = Arc::new(MemTarget::new(SIZE));
    FileSystem::format(target.as_ref(), 0, 0).unwrap();
    let fs = FileSystem::mount(target.clone(), MountOptions::default()).unwrap();
    let mut rng = rng(seed);
    let mut touched = Vec::new();
    for _ in 0..150 {
        let _ = random_op(&fs, &mut rng, &mut touched);
    }
    fs.sync_all().unwrap();
    let metadata_end = fs.geometry().data_start();
    drop(fs);
    let mut bytes = vec![0u8; SIZE];
    target.read_at(0, &mut bytes).unwrap();
    (bytes, metadata_end)
}

/// Walks the tree the way a reader would, answering errors rather than panicking
/// on them: the file system owes a clear error for damage, not a right answer.
fn read_everything(fs: &FileSystem, dir: u64, depth: u32) -> Vec<String> {
    let mut seen = Vec::new();
    let Ok(entries) = fs.readdir(dir) else {
        return seen;
    };
    for (name, ino, kind) in entries {
        seen.push(String::from_utf8_lossy(&name).into_owned());
        let _ = fs.getattr(ino);
        match kind {
            Kind::Dir if depth < 16 && name != b"." && name != b".." => {
                seen.extend(read_everything(fs, ino, depth + 1));
            }
            Kind::File => {
                let _ = fs.read(ino, 0, 1 << 20);
            }
            Kind::Symlink => {
                let _ = fs.readlink(ino);
            }
            _ => {}
        }
        let _ = fs.listxattr(ino);
    }
    seen
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 96, ..ProptestConfig::default() })]

    #[test]
    fn flipped_metadata_bytes_are_an_error_or_a_working_file_system(
        seed in 0u64..4,
        flips in proptest::collection::vec((any::<bool>(), any::<u64>(), 1u8..=255), 1..12),
    ) {
        let (mut bytes, metadata_end) = used_image(seed);
        // Most of the metadata area is unused (zero): half the flips land on bytes
        // in use (superblocks, records, the checkpoint), half anywhere.
        let in_use: Vec<usize> = (0..metadata_end as usize).filter(|&i| bytes[i] != 0).collect();
        for (used, at, mask) in flips {
            let i = if used {
                in_use[(at % in_use.len() as u64) as usize]
            } else {
                (at % metadata_end) as usize
            };
            bytes[i] ^= mask;
        }
        let target = Arc::new(MemTarget::new(SIZE));
        target.write_at(0, &bytes, WriteFlags::NONE).unwrap();
        let fs = match FileSystem::mount(target.clone(), MountOptions::default()) {
            Ok(fs) => fs,
            Err(e) => {
                // A clear error: it names what is wrong.
                prop_assert!(!e.to_string().is_empty());
                return Ok(());
            }
        };
        read_everything(&fs, ROOT, 0);
        // It goes on working: a new file, written and read back.
        let owner = Owner { uid: 0, gid: 0 };
        if let Ok(a) = fs.mknod(ROOT, b"after-damage", Kind::File, 0o644, 0, owner) {
            if fs.write(a.ino, 0, b"new").is_ok() {
                prop_assert_eq!(fs.read(a.ino, 0, 16).unwrap(), b"new".to_vec());
            }
        }
        let _ = fs.sync_all();
        let tree = read_everything(&fs, ROOT, 0);
        drop(fs);
        // What the mount accepted (and checkpointed) mounts again, the same.
        let again = FileSystem::mount(target, MountOptions::default());
        prop_assert!(again.is_ok(), "a mounted image no longer mounts: {:?}", again.err());
        prop_assert_eq!(read_everything(&again.unwrap(), ROOT, 0), tree);
    }
}

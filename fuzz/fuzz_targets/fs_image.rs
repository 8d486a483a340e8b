//! Damaged file system images: the input's bytes are laid over the metadata area
//! (superblocks, log, checkpoints) of a small used file system, which is then
//! mounted. Mounting must answer an error or a file system whose tree can be read
//! and written without a panic (the crate's `tests/corrupt.rs` runs the same checks
//! on random flips).
#![no_main]

use std::sync::{Arc, OnceLock};

use hscm_block::{BlockTarget, MemTarget, WriteFlags};
use hscm_fs::{FileSystem, Kind, MountOptions, Owner, ROOT};
use libfuzzer_sys::fuzz_target;

const SIZE: usize = 4 << 20;

/// A formatted image with a few files, directories and links, and where its data
/// blocks begin.
fn base() -> &'static (Vec<u8>, usize) {
    static BASE: OnceLock<(Vec<u8>, usize)> = OnceLock::new();
    BASE.get_or_init(|| {
        let target = Arc::new(MemTarget::new(SIZE));
        FileSystem::format(target.as_ref(), 0, 0).unwrap();
        let fs = FileSystem::mount(target.clone(), MountOptions::default()).unwrap();
        let owner = Owner { uid: 0, gid: 0 };
        let d = fs.mkdir(ROOT, b"d", 0o755, owner).unwrap();
        for i in 0..8u8 {
            let f = fs.mknod(d.ino, &[b'f', i], Kind::File, 0o644, 0, owner).unwrap();
            fs.write(f.ino, u64::from(i) * 5000, &[i; 3000]).unwrap();
        }
        fs.symlink(ROOT, b"s", b"d/f", owner).unwrap();
        fs.sync_all().unwrap();
        let end = fs.geometry().data_start() as usize;
        drop(fs);
        let mut bytes = vec![0u8; SIZE];
        target.read_at(0, &mut bytes).unwrap();
        (bytes, end)
    })
}

fn walk(fs: &FileSystem, dir: u64, depth: u32) {
    let Ok(entries) = fs.readdir(dir) else { return };
    for (name, ino, kind) in entries {
        let _ = fs.getattr(ino);
        match kind {
            Kind::Dir if depth < 8 && name != b"." && name != b".." => walk(fs, ino, depth + 1),
            Kind::File => {
                let _ = fs.read(ino, 0, 1 << 16);
                let _ = fs.write(ino, 7, b"fuzz");
            }
            _ => {}
        }
    }
}

fuzz_target!(|data: &[u8]| {
    let (base, metadata_end) = base();
    let mut image = base.clone();
    // The input: (u16 offset hint, bytes) pairs, each overwriting a piece.
    let mut rest = data;
    while rest.len() > 3 {
        let at = usize::from(u16::from_le_bytes([rest[0], rest[1]])) * 64 % metadata_end;
        let len = usize::from(rest[2]).min(rest.len() - 3).min(metadata_end - at);
        image[at..at + len].copy_from_slice(&rest[3..3 + len]);
        rest = &rest[3 + len..];
    }
    let target = Arc::new(MemTarget::new(SIZE));
    target.write_at(0, &image, WriteFlags::NONE).unwrap();
    if let Ok(fs) = FileSystem::mount(target.clone(), MountOptions::default()) {
        walk(&fs, ROOT, 0);
        let _ = fs.sync_all();
        drop(fs);
        assert!(
            FileSystem::mount(target, MountOptions::default()).is_ok(),
            "an image that mounted no longer mounts"
        );
    }
});

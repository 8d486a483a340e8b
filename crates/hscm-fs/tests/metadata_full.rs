//! A full metadata area is an ordinary state: the operation that would not fit is
//! refused with ENOSPC before anything is acknowledged, everything acknowledged
//! before it mounts again and reads back, `statfs` counts what still fits, and
//! freeing names makes room again. A volume whose metadata outgrew its checkpoint
//! slot (as hscm before the bound could leave one) still mounts, read-only.

mod common;

use std::sync::Arc;

use common::*;
use hscm_block::{BlockTarget, MemTarget};
use hscm_fs::{Durability, Error, FileSystem, Kind, MountOptions, ROOT, XATTR_BYTES_PER_INODE};

/// 16 MiB: a 1 MiB checkpoint slot, the smallest there is, so it fills fast.
const SIZE: usize = 16 << 20;

fn mount(target: &Arc<MemTarget>, durability: Durability) -> FileSystem {
    FileSystem::mount(
        target.clone(),
        MountOptions {
            durability,
            ..Default::default()
        },
    )
    .unwrap()
}

fn fresh(durability: Durability) -> (Arc<MemTarget>, FileSystem) {
    let target = Arc::new(MemTarget::new(SIZE));
    FileSystem::format(target.as_ref(), 0, 0).unwrap();
    let fs = mount(&target, durability);
    (target, fs)
}

fn whole(target: &MemTarget) -> Vec<u8> {
    let mut image = vec![0u8; SIZE];
    target.read_at(0, &mut image).unwrap();
    image
}

const MODES: [Durability; 2] = [Durability::Immediate, Durability::OnFlush];

/// Runs `op(i)` for i = 0, 1, … until it answers ENOSPC; the count that succeeded.
/// Any other error fails the test; so does never filling up.
fn fill(mut op: impl FnMut(usize) -> Result<(), Error>) -> usize {
    for i in 0..1_000_000 {
        match op(i) {
            Ok(()) => {}
            Err(e) if e.errno() == 28 => {
                assert!(
                    e.to_string().contains("metadata") || e.to_string().contains("extended"),
                    "refused for its metadata: {e}"
                );
                return i;
            }
            Err(e) => panic!("operation {i}: {e} (errno {})", e.errno()),
        }
    }
    panic!("a million operations never filled the metadata area");
}

/// What every test checks once the area is full: fsync succeeds (nothing was
/// acknowledged that cannot be kept), a remount shows the same tree, and freeing
/// makes room for a new file.
fn survives_a_remount(target: &Arc<MemTarget>, fs: FileSystem, durability: Durability) {
    fs.sync_all()
        .expect("an fsync after ENOSPC commits everything acknowledged");
    let before = snapshot(&fs);
    drop(fs);
    let fs = mount(target, durability);
    assert_eq!(fs.read_only(), None, "{durability:?}: it mounts read-write");
    assert_eq!(
        snapshot(&fs),
        before,
        "{durability:?}: every acknowledged name is back"
    );
    // Room comes back: remove a few names, and a new file fits.
    let names: Vec<_> = fs.readdir(ROOT).unwrap().into_iter().take(40).collect();
    for (name, _, kind) in names {
        if kind == Kind::Dir {
            continue;
        }
        fs.unlink(ROOT, &name).unwrap();
    }
    fs.mknod(ROOT, b"after", Kind::File, 0o644, 0, OWNER)
        .expect("unlinking made room");
    fs.sync_all().unwrap();
}

#[test]
fn many_files_fill_the_metadata_then_enospc_and_all_come_back() {
    for durability in MODES {
        let (target, fs) = fresh(durability);
        let predicted = fs.statfs().free_files;
        let made = fill(|i| {
            let name = format!("file-{i:08}-with-a-name");
            fs.mknod(ROOT, name.as_bytes(), Kind::File, 0o644, 0, OWNER)
                .map(|_| ())
        });
        let st = fs.statfs();
        assert!(
            st.free_files <= 1,
            "{durability:?}: statfs says {} inodes free once full",
            st.free_files
        );
        let ratio = made as f64 / predicted as f64;
        assert!(
            (0.8..=1.25).contains(&ratio),
            "{durability:?}: statfs predicted {predicted} files, {made} fitted"
        );
        survives_a_remount(&target, fs, durability);
    }
}

#[test]
fn long_names_symlinks_and_hard_links_fill_it_too() {
    for durability in MODES {
        let (target, fs) = fresh(durability);
        let long = |i: usize| format!("{i:08}{}", "n".repeat(247));
        let made = fill(|i| {
            fs.mknod(ROOT, long(i).as_bytes(), Kind::File, 0o644, 0, OWNER)
                .map(|_| ())
        });
        assert!(made > 100, "{made} long names");
        survives_a_remount(&target, fs, durability);

        let (target, fs) = fresh(durability);
        let dest = vec![b'x'; 4000];
        let made = fill(|i| {
            fs.symlink(ROOT, format!("s{i}").as_bytes(), &dest, OWNER)
                .map(|_| ())
        });
        assert!(made > 100, "{made} symlinks");
        survives_a_remount(&target, fs, durability);

        let (target, fs) = fresh(durability);
        let d = fs.mkdir(ROOT, b"d", 0o755, OWNER).unwrap().ino;
        let f = fs.mknod(d, b"f", Kind::File, 0o644, 0, OWNER).unwrap().ino;
        fs.write(f, 0, b"linked").unwrap();
        let made = fill(|i| {
            // Hard links stop at the link limit: spread them over several files.
            let f = if i % 60_000 == 0 && i > 0 {
                fs.mknod(d, format!("f{i}").as_bytes(), Kind::File, 0o644, 0, OWNER)?
                    .ino
            } else {
                f
            };
            fs.link(f, ROOT, long(i).as_bytes()).map(|_| ())
        });
        assert!(made > 100, "{made} hard links");
        survives_a_remount(&target, fs, durability);
    }
}

#[test]
fn xattrs_are_bounded_per_inode_and_by_the_area() {
    for durability in MODES {
        let (target, fs) = fresh(durability);
        let f = fs
            .mknod(ROOT, b"f", Kind::File, 0o644, 0, OWNER)
            .unwrap()
            .ino;
        let value = vec![7u8; 30 << 10];
        fs.setxattr(f, b"user.a", &value, false, false).unwrap();
        fs.setxattr(f, b"user.b", &value, false, false).unwrap();
        let err = fs.setxattr(f, b"user.c", &value, false, false).unwrap_err();
        assert_eq!(err.errno(), 28, "{err}");
        assert!(
            err.to_string().contains(&XATTR_BYTES_PER_INODE.to_string()),
            "{err}"
        );
        // Replacing one stays within the limit: its old value does not count.
        fs.setxattr(f, b"user.a", &value, false, true).unwrap();

        // Many inodes each with big xattrs: the area fills, then ENOSPC.
        let made = fill(|i| {
            let name = format!("x{i}");
            let ino = fs
                .mknod(ROOT, name.as_bytes(), Kind::File, 0o644, 0, OWNER)?
                .ino;
            fs.setxattr(ino, b"user.big", &value, false, false)
        });
        assert!(made > 5, "{made} inodes with xattrs");
        survives_a_remount(&target, fs, durability);
    }
}

#[test]
fn posix_acls_are_refused_so_tools_fall_back_to_chmod() {
    let (_target, fs) = fresh(Durability::Immediate);
    let f = fs
        .mknod(ROOT, b"f", Kind::File, 0o600, 0, OWNER)
        .unwrap()
        .ino;
    for name in [&b"system.posix_acl_access"[..], b"system.posix_acl_default"] {
        let err = fs
            .setxattr(f, name, &[2, 0, 0, 0], false, false)
            .unwrap_err();
        assert_eq!(err.errno(), 95, "EOPNOTSUPP for {name:?}: {err}");
    }
    assert!(fs.listxattr(f).unwrap().is_empty());
}

#[test]
fn writes_that_need_more_metadata_than_is_left_are_refused_whole() {
    let (target, fs) = fresh(Durability::Immediate);
    let f = fs
        .mknod(ROOT, b"data", Kind::File, 0o644, 0, OWNER)
        .unwrap()
        .ino;
    fs.write(f, 0, &[1u8; 4096]).unwrap();
    fill(|i| {
        fs.mknod(
            ROOT,
            format!("{i:0200}").as_bytes(),
            Kind::File,
            0o644,
            0,
            OWNER,
        )
        .map(|_| ())
    });
    // Every other block: each a run of its own, until the map has no more room.
    let mut written = vec![0u64];
    let mut refused = None;
    for b in (2..4000u64).step_by(2) {
        match fs.write(f, b * 4096, &[b as u8; 4096]) {
            Ok(_) => written.push(b),
            Err(e) => {
                refused = Some(e);
                break;
            }
        }
    }
    let err = refused.expect("the block map outgrew the room left");
    assert_eq!(err.errno(), 28, "{err}");
    fs.sync_all().unwrap();
    drop(fs);
    let fs = mount(&target, Durability::Immediate);
    for b in written {
        let want = if b == 0 { 1 } else { b as u8 };
        assert_eq!(
            fs.read(f, b * 4096, 4096).unwrap(),
            vec![want; 4096],
            "block {b}"
        );
    }
}

#[test]
fn metadata_larger_than_a_checkpoint_slot_mounts_read_only_saying_why() {
    let (target, fs) = fresh(Durability::Immediate);
    let f = fs
        .mknod(ROOT, b"keep", Kind::File, 0o644, 0, OWNER)
        .unwrap()
        .ino;
    fs.write(f, 0, b"the data to get out").unwrap();
    // What hscm without the bound did: records past what a checkpoint holds,
    // committed to the log until it fills.
    fs.unbound_metadata_for_testing();
    let value = vec![1u8; 60 << 10];
    let mut failed = None;
    for i in 0..200 {
        let ino = match fs.mknod(
            ROOT,
            format!("x{i}").as_bytes(),
            Kind::File,
            0o644,
            0,
            OWNER,
        ) {
            Ok(a) => a.ino,
            Err(e) => {
                failed = Some(e);
                break;
            }
        };
        if let Err(e) = fs.setxattr(ino, b"user.big", &value, false, false) {
            failed = Some(e);
            break;
        }
    }
    let err = failed.expect("the unbounded metadata outgrew the slot at a checkpoint");
    assert!(err.to_string().contains("outgrew"), "{err}");
    drop(fs);

    let fs = mount(&target, Durability::Immediate);
    let why = fs.read_only().expect("mounted read-only").to_string();
    assert!(why.contains("larger than a checkpoint slot"), "{why}");
    let keep = fs.lookup(ROOT, b"keep").unwrap().ino;
    assert_eq!(fs.read(keep, 0, 100).unwrap(), b"the data to get out");
    let err = fs
        .mknod(ROOT, b"new", Kind::File, 0o644, 0, OWNER)
        .unwrap_err();
    assert_eq!(err.errno(), 30, "EROFS: {err}");
    assert!(err.to_string().contains("read-only"), "{err}");
}

#[test]
fn a_read_only_mount_writes_nothing() {
    let (target, fs) = fresh(Durability::Immediate);
    fs.mknod(ROOT, b"f", Kind::File, 0o644, 0, OWNER).unwrap();
    drop(fs);
    let image = whole(&target);
    let fs = FileSystem::mount(
        target.clone(),
        MountOptions {
            read_only: true,
            ..Default::default()
        },
    )
    .unwrap();
    assert!(fs.read_only().is_some());
    assert!(fs.lookup(ROOT, b"f").is_ok());
    assert_eq!(
        fs.mknod(ROOT, b"g", Kind::File, 0o644, 0, OWNER)
            .unwrap_err()
            .errno(),
        30
    );
    fs.sync_all().unwrap();
    drop(fs);
    assert!(whole(&target) == image, "not one byte written");
}

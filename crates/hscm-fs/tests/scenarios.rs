//! The file system's behaviour, one scenario a test, on a memory target.

mod common;

use std::sync::Arc;

use common::*;
use hscm_block::{BlockTarget, MemTarget};
use hscm_fs::{
    Allocate, DropSetid, Durability, Error, FileSystem, Kind, MountOptions, RenameFlags, SetAttr,
    WriteOptions, BLOCK, ROOT,
};

fn fresh(size: usize) -> (Arc<MemTarget>, FileSystem) {
    let target = Arc::new(MemTarget::new(size));
    FileSystem::format(target.as_ref(), 0, 0).unwrap();
    let fs = FileSystem::mount(target.clone(), MountOptions::default()).unwrap();
    (target, fs)
}

fn remount(target: &Arc<MemTarget>) -> FileSystem {
    FileSystem::mount(target.clone(), MountOptions::default()).unwrap()
}

fn file(fs: &FileSystem, parent: u64, name: &str) -> u64 {
    fs.mknod(parent, name.as_bytes(), Kind::File, 0o644, 0, OWNER)
        .unwrap()
        .ino
}

#[test]
fn a_tree_written_then_remounted_reads_back_the_same() {
    let (target, fs) = fresh(16 << 20);
    let d = fs.mkdir(ROOT, b"dir", 0o750, OWNER).unwrap().ino;
    let f = file(&fs, d, "f");
    fs.write(f, 0, b"hello").unwrap();
    fs.write(f, 10_000, &[7u8; 5000]).unwrap();
    fs.symlink(ROOT, b"s", b"dir/f", OWNER).unwrap();
    fs.link(f, ROOT, b"hard").unwrap();
    fs.setxattr(f, b"user.k", b"v", false, false).unwrap();
    let before = snapshot(&fs);
    drop(fs);
    let fs = remount(&target);
    assert_eq!(snapshot(&fs), before);
    assert_eq!(
        fs.getxattr(resolve(&fs, "dir/f").unwrap(), b"user.k")
            .unwrap(),
        b"v"
    );
    let data = fs.read(resolve(&fs, "hard").unwrap(), 0, 20_000).unwrap();
    assert_eq!(&data[..5], b"hello");
    assert!(
        data[5..10_000].iter().all(|&b| b == 0),
        "the hole reads zeroes"
    );
    assert!(data[10_000..].iter().all(|&b| b == 7));
}

#[test]
fn a_file_truncated_then_extended_reads_zeroes_where_it_was_cut() {
    let (_t, fs) = fresh(16 << 20);
    let f = file(&fs, ROOT, "f");
    fs.write(f, 0, &[9u8; 6000]).unwrap();
    fs.truncate(f, 100).unwrap();
    fs.truncate(f, 6000).unwrap();
    let data = fs.read(f, 0, 6000).unwrap();
    assert!(data[..100].iter().all(|&b| b == 9));
    assert!(
        data[100..].iter().all(|&b| b == 0),
        "no old bytes come back"
    );
    fs.truncate(f, 50).unwrap();
    fs.write(f, 3000, b"x").unwrap();
    let data = fs.read(f, 0, 4000).unwrap();
    assert_eq!(data.len(), 3001);
    assert!(
        data[50..3000].iter().all(|&b| b == 0),
        "a write past the end leaves zeroes"
    );
}

#[test]
fn an_unlinked_file_lives_until_its_last_handle_closes() {
    let (target, fs) = fresh(16 << 20);
    let f = file(&fs, ROOT, "f");
    fs.write(f, 0, &[1u8; 40_000]).unwrap();
    let free_before = fs.statfs().free_blocks;
    fs.open(f).unwrap();
    fs.unlink(ROOT, b"f").unwrap();
    assert_eq!(fs.lookup(ROOT, b"f").unwrap_err().errno(), 2);
    assert_eq!(fs.read(f, 0, 10).unwrap(), vec![1u8; 10], "still readable");
    assert_eq!(fs.statfs().free_blocks, free_before);
    fs.release(f).unwrap();
    assert!(matches!(fs.getattr(f), Err(Error::NotFound)));
    assert_eq!(
        fs.statfs().free_blocks,
        free_before + 10,
        "its 10 blocks are free at once"
    );
    // An open unlinked file at a crash is dropped at the next mount.
    let g = file(&fs, ROOT, "g");
    fs.write(g, 0, &[2u8; 8192]).unwrap();
    fs.open(g).unwrap();
    fs.unlink(ROOT, b"g").unwrap();
    let free = fs.statfs().free_blocks;
    drop(fs);
    let fs = remount(&target);
    assert!(matches!(fs.getattr(g), Err(Error::NotFound)));
    assert_eq!(fs.statfs().free_blocks, free + 2);
}

#[test]
fn rename_replaces_refuses_or_exchanges_as_asked() {
    let (_t, fs) = fresh(16 << 20);
    let a = file(&fs, ROOT, "a");
    let b = file(&fs, ROOT, "b");
    let noreplace = RenameFlags {
        no_replace: true,
        exchange: false,
    };
    assert_eq!(
        fs.rename(ROOT, b"a", ROOT, b"b", noreplace)
            .unwrap_err()
            .errno(),
        17
    );
    let exchange = RenameFlags {
        no_replace: false,
        exchange: true,
    };
    fs.rename(ROOT, b"a", ROOT, b"b", exchange).unwrap();
    assert_eq!(fs.lookup(ROOT, b"a").unwrap().ino, b);
    assert_eq!(fs.lookup(ROOT, b"b").unwrap().ino, a);
    fs.rename(ROOT, b"a", ROOT, b"b", RenameFlags::default())
        .unwrap();
    assert_eq!(fs.lookup(ROOT, b"b").unwrap().ino, b);
    assert!(
        matches!(fs.getattr(a), Err(Error::NotFound)),
        "the replaced file is gone"
    );
    let d = fs.mkdir(ROOT, b"d", 0o755, OWNER).unwrap().ino;
    let e = fs.mkdir(d, b"e", 0o755, OWNER).unwrap().ino;
    assert_eq!(
        fs.rename(ROOT, b"d", e, b"x", RenameFlags::default())
            .unwrap_err()
            .errno(),
        22
    );
    assert_eq!(
        fs.rename(ROOT, b"b", ROOT, b"d", RenameFlags::default())
            .unwrap_err()
            .errno(),
        21
    );
    file(&fs, e, "inside");
    assert_eq!(
        fs.rename(d, b"e", ROOT, b"d", RenameFlags::default())
            .unwrap_err()
            .errno(),
        39
    );
    // A directory moved to another parent moves its ".." and both parents' links.
    let root_links = fs.getattr(ROOT).unwrap().nlink;
    fs.rename(d, b"e", ROOT, b"e", RenameFlags::default())
        .unwrap();
    assert_eq!(fs.parent_of(e).unwrap(), ROOT);
    assert_eq!(fs.getattr(ROOT).unwrap().nlink, root_links + 1);
    assert_eq!(fs.getattr(d).unwrap().nlink, 2);
}

#[test]
fn a_full_file_system_says_no_space_and_unlink_frees_it_at_once() {
    let (_t, fs) = fresh(4 << 20);
    let f = file(&fs, ROOT, "f");
    let free = fs.statfs().free_blocks;
    let chunk = vec![3u8; 60 << 10];
    let mut written = 0u64;
    let mut short = false;
    let err = loop {
        match fs.write(f, written, &chunk) {
            Ok(n) => {
                short |= (n as usize) < chunk.len();
                written += u64::from(n)
            }
            Err(e) => break e,
        }
    };
    assert!(short, "the last write that fit only in part was short");
    assert_eq!(err.errno(), 28, "ENOSPC, not EIO: {err}");
    assert_eq!(written / BLOCK, free, "every free block was used");
    assert_eq!(fs.statfs().free_blocks, 0);
    assert_eq!(
        fs.getattr(f).unwrap().size,
        written,
        "the failed write changed nothing"
    );
    fs.unlink(ROOT, b"f").unwrap();
    assert_eq!(fs.statfs().free_blocks, free);
    let g = file(&fs, ROOT, "g");
    fs.write(g, 0, &chunk).unwrap();
}

#[test]
fn a_whole_write_that_does_not_fit_writes_nothing() {
    // The kernel's writeback takes any answer but an error as the whole page
    // written, so its writes are all or nothing.
    let (_t, fs) = fresh(4 << 20);
    let f = file(&fs, ROOT, "f");
    let free = fs.statfs().free_blocks;
    let fill = vec![4u8; ((free - 1) * BLOCK) as usize];
    fs.write_whole(f, 0, &fill).unwrap();
    let before = fs.getattr(f).unwrap();
    let err = fs
        .write_whole(f, before.size, &[5u8; 2 * BLOCK as usize])
        .unwrap_err();
    assert_eq!(err.errno(), 28, "ENOSPC, not EIO: {err}");
    let after = fs.getattr(f).unwrap();
    assert_eq!(
        after.size, before.size,
        "nothing of the refused write landed"
    );
    assert_eq!(after.allocated, before.allocated);
    assert_eq!(fs.statfs().free_blocks, 1);
    // What fits still goes in whole.
    fs.write_whole(f, before.size, &[6u8; BLOCK as usize])
        .unwrap();
    assert_eq!(fs.statfs().free_blocks, 0);
}

#[test]
fn punching_a_hole_frees_whole_blocks_and_zeroes_the_edges() {
    let (_t, fs) = fresh(16 << 20);
    let f = file(&fs, ROOT, "f");
    fs.write(f, 0, &[5u8; 5 * 4096]).unwrap();
    let allocated = fs.getattr(f).unwrap().allocated;
    fs.fallocate(f, 100, 3 * 4096, Allocate::PunchHole).unwrap();
    let a = fs.getattr(f).unwrap();
    assert_eq!(a.size, 5 * 4096, "size kept");
    assert_eq!(
        a.allocated,
        allocated - 2 * 4096,
        "the two whole blocks inside are freed"
    );
    let data = fs.read(f, 0, 5 * 4096).unwrap();
    assert!(data[..100].iter().all(|&b| b == 5));
    assert!(data[100..100 + 3 * 4096].iter().all(|&b| b == 0));
    assert!(data[100 + 3 * 4096..].iter().all(|&b| b == 5));
    fs.fallocate(f, 0, 8 * 4096, Allocate::Extend).unwrap();
    let a = fs.getattr(f).unwrap();
    assert_eq!((a.size, a.allocated), (8 * 4096, 8 * 4096));
    let data = fs.read(f, 0, 8 * 4096).unwrap();
    assert!(
        data[..100].iter().all(|&b| b == 5),
        "fallocate keeps what was there"
    );
    assert!(data[5 * 4096..].iter().all(|&b| b == 0));
}

#[test]
fn names_and_kinds_are_checked() {
    let (_t, fs) = fresh(16 << 20);
    let long = vec![b'x'; 256];
    assert_eq!(fs.mkdir(ROOT, &long, 0o755, OWNER).unwrap_err().errno(), 36);
    assert_eq!(fs.mkdir(ROOT, b"..", 0o755, OWNER).unwrap_err().errno(), 22);
    let f = file(&fs, ROOT, "f");
    assert_eq!(fs.mkdir(ROOT, b"f", 0o755, OWNER).unwrap_err().errno(), 17);
    assert_eq!(fs.mkdir(f, b"x", 0o755, OWNER).unwrap_err().errno(), 20);
    assert_eq!(fs.rmdir(ROOT, b"f").unwrap_err().errno(), 20);
    fs.mkdir(ROOT, b"d", 0o755, OWNER).unwrap();
    assert_eq!(fs.unlink(ROOT, b"d").unwrap_err().errno(), 21);
    assert_eq!(
        fs.read(resolve(&fs, "d").unwrap(), 0, 1)
            .unwrap_err()
            .errno(),
        21
    );
    assert_eq!(fs.getxattr(f, b"user.none").unwrap_err().errno(), 61);
    assert_eq!(
        fs.setxattr(f, b"user.a", b"1", false, true)
            .unwrap_err()
            .errno(),
        61
    );
    fs.setxattr(f, b"user.a", b"1", true, false).unwrap();
    assert_eq!(
        fs.setxattr(f, b"user.a", b"2", true, false)
            .unwrap_err()
            .errno(),
        17
    );
    fs.removexattr(f, b"user.a").unwrap();
    assert!(fs.listxattr(f).unwrap().is_empty());
}

#[test]
fn an_unformatted_or_newer_target_is_a_clear_error() {
    let target = Arc::new(MemTarget::new(8 << 20));
    let err = FileSystem::mount(target.clone(), MountOptions::default())
        .err()
        .unwrap();
    assert!(matches!(err, Error::NotFormatted), "{err}");
    FileSystem::format(target.as_ref(), 0, 0).unwrap();
    let set_version = |version: u8, checksum: bool| {
        for slot in 0..2u64 {
            let mut block = vec![0u8; 4096];
            target.read_at(slot * 4096, &mut block).unwrap();
            if &block[..6] == b"HSCMFS" {
                block[8] = version;
                if checksum {
                    // The checksum follows the 68 bytes it covers.
                    let crc = crc32c::crc32c(&block[..68]);
                    block[68..72].copy_from_slice(&crc.to_le_bytes());
                }
                target
                    .write_at(slot * 4096, &block, hscm_block::WriteFlags::NONE)
                    .unwrap();
            }
        }
    };
    // A damaged version byte is damage, not a newer format.
    set_version(7, false);
    let err = FileSystem::mount(target.clone(), MountOptions::default())
        .err()
        .unwrap();
    assert!(matches!(err, Error::Corrupt(_)), "{err}");
    assert!(err.to_string().contains("checksum"), "{err}");
    // Version 1 + 1, intact, in both superblocks.
    set_version(2, true);
    let err = FileSystem::mount(target, MountOptions::default())
        .err()
        .unwrap();
    assert!(matches!(err, Error::NewerFormat { found: 2, .. }), "{err}");
}

#[test]
fn many_operations_fill_the_log_and_checkpoints_keep_everything() {
    let (target, fs) = fresh(8 << 20);
    // An 8 MiB target has a 1 MiB log: thousands of records wrap it many times.
    let f = file(&fs, ROOT, "f");
    for i in 0..20_000u64 {
        fs.write(f, (i % 64) * 100, &[i as u8; 100]).unwrap();
        if i % 1000 == 0 {
            file(&fs, ROOT, &format!("n{i}"));
        }
    }
    let before = snapshot(&fs);
    drop(fs);
    assert_eq!(snapshot(&remount(&target)), before);
}

#[test]
fn random_operations_survive_a_remount_in_both_modes() {
    for (seed, durability) in [(1, Durability::Immediate), (2, Durability::OnFlush)] {
        let target = Arc::new(MemTarget::new(16 << 20));
        FileSystem::format(target.as_ref(), 0, 0).unwrap();
        let fs = FileSystem::mount(
            target.clone(),
            MountOptions {
                durability,
                ..Default::default()
            },
        )
        .unwrap();
        let mut rng = rng(seed);
        let mut touched = Vec::new();
        for _ in 0..2000 {
            let _ = random_op(&fs, &mut rng, &mut touched);
        }
        fs.sync_all().unwrap();
        let before = snapshot(&fs);
        assert!(before.nodes.len() > 3, "the run made a tree: {before:?}");
        drop(fs);
        let fs = FileSystem::mount(
            target,
            MountOptions {
                durability,
                ..Default::default()
            },
        )
        .unwrap();
        assert_eq!(snapshot(&fs), before, "{durability:?}");
    }
}

#[test]
fn writes_truncates_and_chowns_drop_setuid_and_setgid_as_linux_does() {
    let (_target, fs) = fresh(16 << 20);
    let setid_file = |name: &str, perm: u32| {
        let ino = file(&fs, ROOT, name);
        let set = SetAttr {
            mode: Some(perm),
            ..SetAttr::default()
        };
        fs.setattr(ino, set).unwrap();
        ino
    };
    let perm = |ino| fs.getattr(ino).unwrap().perm;
    let write = |ino, offset, drop_setid| {
        let how = WriteOptions {
            all_or_nothing: false,
            drop_setid,
        };
        fs.write_with(ino, offset, b"x", how).unwrap();
    };
    let stranger = DropSetid::Modify { caller_gid: 4242 };

    // A caller with CAP_FSETID keeps both, on a new block and in place.
    let kept = setid_file("kept", 0o6755);
    write(kept, 0, DropSetid::Keep);
    write(kept, 0, DropSetid::Keep);
    assert_eq!(perm(kept), 0o6755);
    // Anyone else: setuid goes, and setgid where the group may execute...
    let exec = setid_file("exec", 0o6777);
    write(exec, 0, stranger);
    assert_eq!(perm(exec), 0o777);
    // ... or, without group execute, where the writer is outside the file's group;
    // in place (over a block the file has) as on a new block.
    let locking = setid_file("locking", 0o2666);
    write(locking, 0, DropSetid::Keep);
    write(locking, 0, DropSetid::Modify { caller_gid: 0 });
    assert_eq!(perm(locking), 0o2666, "a member of the group keeps it");
    write(locking, 0, stranger);
    assert_eq!(perm(locking), 0o666);
    // The plain write stands for a writer with no privileges and no group.
    let plain = setid_file("plain", 0o6777);
    fs.write(plain, 0, b"x").unwrap();
    assert_eq!(perm(plain), 0o777);

    // A fallocate, as a write, in its own record.
    let grown = setid_file("grown", 0o6755);
    fs.fallocate_with(grown, 0, 8192, Allocate::Extend, DropSetid::Keep)
        .unwrap();
    assert_eq!(perm(grown), 0o6755);
    fs.fallocate_with(grown, 0, 16384, Allocate::Extend, stranger)
        .unwrap();
    assert_eq!(perm(grown), 0o755);

    // A truncate by an unprivileged caller, as a write.
    let cut = setid_file("cut", 0o6755);
    let truncate = SetAttr {
        size: Some(0),
        drop_setid: stranger,
        ..SetAttr::default()
    };
    fs.setattr(cut, truncate).unwrap();
    assert_eq!(perm(cut), 0o755);
    // A chown, even root's: setuid always, setgid with group execute.
    let owned = setid_file("owned", 0o6755);
    let locked = setid_file("locked", 0o6745);
    let chown = SetAttr {
        uid: Some(7),
        drop_setid: DropSetid::Chown {
            caller_gid: 0,
            privileged: true,
        },
        ..SetAttr::default()
    };
    fs.setattr(owned, chown).unwrap();
    fs.setattr(locked, chown).unwrap();
    assert_eq!(perm(owned), 0o755);
    assert_eq!(perm(locked), 0o2745);
    // A directory's setgid (inherited groups) is not a privilege: a chown keeps it.
    let dir = fs.mkdir(ROOT, b"d", 0o2775, OWNER).unwrap().ino;
    fs.setattr(dir, chown).unwrap();
    assert_eq!(perm(dir), 0o2775);
}

#[test]
fn rename_of_a_directory_into_a_full_parent_is_too_many_links() {
    let (_target, fs) = fresh(512 << 20);
    let full = fs.mkdir(ROOT, b"full", 0o755, OWNER).unwrap().ino;
    let mut made = 0;
    let err = loop {
        match fs.mkdir(full, format!("d{made}").as_bytes(), 0o755, OWNER) {
            Ok(_) => made += 1,
            Err(e) => break e,
        }
    };
    assert_eq!(err.errno(), 31, "EMLINK after {made}: {err}");
    let other = fs.mkdir(ROOT, b"other", 0o755, OWNER).unwrap().ino;
    fs.mkdir(other, b"mover", 0o755, OWNER).unwrap();
    let err = fs
        .rename(other, b"mover", full, b"mover", RenameFlags::default())
        .unwrap_err();
    assert_eq!(err.errno(), 31, "{err}");
    let nlink = fs.getattr(full).unwrap().nlink;
    assert!(nlink <= 65_000, "{nlink}");
    // A file moves in: it adds no link to the directory.
    fs.mknod(other, b"f", Kind::File, 0o644, 0, OWNER).unwrap();
    fs.rename(other, b"f", full, b"f", RenameFlags::default())
        .unwrap();
}

#[test]
fn a_mount_asked_for_write_back_keeps_writes_until_fsync_as_on_flush() {
    let (target, fs) = fresh(8 << 20);
    drop(fs);
    for (asked, got) in [
        (Durability::Immediate, Durability::Immediate),
        (Durability::OnFlush, Durability::OnFlush),
        (Durability::WriteBack, Durability::OnFlush),
    ] {
        let fs = FileSystem::mount(
            target.clone(),
            MountOptions {
                durability: asked,
                ..MountOptions::default()
            },
        )
        .unwrap();
        assert_eq!(fs.durability(), got, "asked for {asked:?}");
    }
}

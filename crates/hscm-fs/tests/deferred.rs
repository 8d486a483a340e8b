//! In on-flush mode a close of a file the kernel wrote in RAM leaves its write-back
//! to the next fsync (`close_after_kernel_writes`): nothing waits for the device
//! before an fsync. What may wait is bounded (`dirty_max`), the file system is
//! never made to look emptier than it is, `stat` shows the file's size and blocks
//! meanwhile, and the next fsync takes all of it home. Immediate mode writes home
//! at the close. The kernel's writes are made with pwrite on the file's memfd.

mod common;

use std::sync::Arc;

use common::OWNER;
use hscm_block::MemTarget;
use hscm_fs::{Durability, FileSystem, Kind, MountOptions, RamBacking, RamOptions, ROOT};

fn mount(target: &Arc<MemTarget>, durability: Durability, dirty_max: u64) -> FileSystem {
    FileSystem::mount(
        target.clone(),
        MountOptions {
            durability,
            dirty_max,
            ram: RamOptions {
                backing: RamBacking::Memfd,
                ..RamOptions::default()
            },
            ..MountOptions::default()
        },
    )
    .unwrap()
}

fn fresh(size: usize) -> Arc<MemTarget> {
    let target = Arc::new(MemTarget::new(size));
    FileSystem::format(target.as_ref(), 0, 0).unwrap();
    target
}

/// A new file `name`, `len` bytes of `byte` written by "the kernel", then closed
/// as the FUSE front-end closes it. Returns its inode and what the close wrote home.
fn written_and_closed(fs: &FileSystem, name: &str, len: usize, byte: u8) -> (u64, u64) {
    let ino = fs
        .mknod(ROOT, name.as_bytes(), Kind::File, 0o644, 0, OWNER)
        .unwrap()
        .ino;
    fs.open(ino).unwrap();
    assert!(fs.begin_kernel_writes(ino).unwrap(), "{name} is in RAM");
    let ram = fs.file_ram(ino).unwrap();
    let data = vec![byte; len];
    let mut done = 0;
    while done < len {
        done += ram
            .with_fd(|fd| rustix::io::pwrite(fd, &data[done..], done as u64))
            .unwrap()
            .unwrap();
    }
    let home = fs.close_after_kernel_writes(ino).unwrap();
    fs.end_kernel_writes(ino);
    fs.release(ino).unwrap();
    (ino, home)
}

fn home_of(fs: &FileSystem, ino: u64) -> Vec<u8> {
    fs.read_from_target(ino, 0, u32::MAX).unwrap()
}

#[test]
fn an_on_flush_close_leaves_the_write_back_to_the_next_fsync() {
    let target = fresh(16 << 20);
    let fs = mount(&target, Durability::OnFlush, 8 << 20);
    let (ino, home) = written_and_closed(&fs, "f", 10_000, 7);
    assert_eq!(home, 0, "the close wrote nothing home");
    assert!(
        home_of(&fs, ino).is_empty(),
        "the device holds none of it yet"
    );
    let a = fs.getattr(ino).unwrap();
    assert_eq!(a.size, 10_000, "stat shows the size the kernel wrote");
    assert!(
        a.allocated >= 10_000,
        "stat shows its blocks before they are mapped: {}",
        a.allocated
    );
    assert!(fs.may_defer_write_back());
    // What an fsync does (`hscm-fuse`'s fsync): every file's RAM home, then commit.
    fs.write_back_all(None).unwrap();
    fs.sync_all().unwrap();
    assert!(home_of(&fs, ino) == vec![7u8; 10_000]);
    drop(fs);
    let fs = mount(&target, Durability::OnFlush, 8 << 20);
    assert!(fs.read(ino, 0, u32::MAX).unwrap() == vec![7u8; 10_000]);
}

#[test]
fn past_dirty_max_a_close_takes_every_waiting_file_home() {
    let target = fresh(32 << 20);
    let fs = mount(&target, Durability::OnFlush, 64 << 10);
    let mut files = Vec::new();
    let mut crossed = None;
    for i in 0..8u8 {
        let (ino, home) = written_and_closed(&fs, &format!("f{i}"), 20_000, i + 1);
        files.push(ino);
        if home > 0 {
            crossed = Some(i);
            break;
        }
    }
    let crossed = crossed.expect("no close took files home past a 64 KiB bound");
    // 20,000 bytes take 5 blocks: the fourth file passes 64 KiB.
    assert_eq!(crossed, 3, "the close that passed the bound");
    for (i, &ino) in files.iter().enumerate() {
        assert!(
            home_of(&fs, ino) == vec![i as u8 + 1; 20_000],
            "file {i} went home with the close that passed the bound"
        );
    }
    assert!(fs.may_defer_write_back(), "nothing waits any more");
    let (_, home) = written_and_closed(&fs, "after", 1000, 9);
    assert_eq!(home, 0, "and the next close waits again");
}

#[test]
fn an_immediate_close_writes_home_before_it_returns() {
    let target = fresh(16 << 20);
    let fs = mount(&target, Durability::Immediate, 8 << 20);
    assert!(!fs.may_defer_write_back());
    let (ino, home) = written_and_closed(&fs, "f", 10_000, 3);
    assert_eq!(home, 10_000);
    assert!(home_of(&fs, ino) == vec![3u8; 10_000]);
}

/// Waiting files count as used: the file system is near full before the files
/// that wait would fill it, so the close that would overfill it writes home and
/// reports the lack of room itself, and nothing a close acknowledged is lost.
#[test]
fn waiting_files_count_as_used_so_a_full_file_system_is_reported() {
    let target = fresh(4 << 20);
    let fs = mount(&target, Durability::OnFlush, 1 << 30);
    let mut acknowledged = Vec::new();
    let mut refused = false;
    for i in 0..64u8 {
        let ino = fs
            .mknod(
                ROOT,
                format!("f{i}").as_bytes(),
                Kind::File,
                0o644,
                0,
                OWNER,
            )
            .unwrap()
            .ino;
        fs.open(ino).unwrap();
        assert!(fs.begin_kernel_writes(ino).unwrap());
        let ram = fs.file_ram(ino).unwrap();
        let data = vec![i + 1; 256 << 10];
        ram.with_fd(|fd| rustix::io::pwrite(fd, &data, 0))
            .unwrap()
            .unwrap();
        let closed = fs.close_after_kernel_writes(ino);
        fs.end_kernel_writes(ino);
        fs.release(ino).unwrap();
        match closed {
            Ok(0) => {
                assert!(
                    !fs.near_full(),
                    "file {i}: a close waited while the file system was near full"
                );
                acknowledged.push((ino, i + 1));
            }
            Ok(_) => acknowledged.push((ino, i + 1)),
            Err(e) => {
                assert_eq!(e.errno(), 28, "file {i}: ENOSPC, not {e}");
                refused = true;
                break;
            }
        }
    }
    assert!(refused, "64 files of 256 KiB fitted in 4 MiB");
    // Every file whose close succeeded goes home at the fsync, whole.
    fs.write_back_all(None).unwrap();
    fs.sync_all().unwrap();
    drop(fs);
    let fs = mount(&target, Durability::OnFlush, 1 << 30);
    for (ino, byte) in acknowledged {
        let got = fs.read(ino, 0, u32::MAX).unwrap();
        assert!(
            got == vec![byte; 256 << 10],
            "file {byte}: {} bytes back",
            got.len()
        );
    }
}

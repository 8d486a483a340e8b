//! Writes the kernel makes straight into a file's RAM (FUSE passthrough, shared
//! mappings), mixed with the file system's own writes, truncates and punches: after
//! `write_back_ram`, the target holds exactly what RAM holds, and a remount reads it.
//! The kernel's writes are made here with pwrite on the file's memfd, as the kernel
//! makes them.

mod common;

use std::sync::Arc;

use common::OWNER;
use hscm_block::MemTarget;
use hscm_fs::{Allocate, FileSystem, Kind, MountOptions, ROOT};
use proptest::prelude::*;

#[derive(Debug, Clone)]
enum Op {
    /// Through the memfd, behind the file system's back (may append).
    Kernel {
        offset: u64,
        len: usize,
        byte: u8,
    },
    /// The file system's own write.
    Write {
        offset: u64,
        len: usize,
        byte: u8,
    },
    Truncate(u64),
    Punch {
        offset: u64,
        len: u64,
    },
    WriteBack,
}

fn op() -> impl Strategy<Value = Op> {
    let offset = common::edge_offset();
    prop_oneof![
        4 => (offset.clone(), 1..9_000usize, any::<u8>()).prop_map(|(offset, len, byte)| Op::Kernel { offset, len, byte }),
        2 => (offset.clone(), 1..9_000usize, any::<u8>()).prop_map(|(offset, len, byte)| Op::Write { offset, len, byte }),
        1 => (0..45_000u64).prop_map(Op::Truncate),
        1 => (offset, 1..20_000u64).prop_map(|(offset, len)| Op::Punch { offset, len }),
        2 => Just(Op::WriteBack),
    ]
}

fn put(model: &mut Vec<u8>, offset: u64, len: usize, byte: u8) {
    let end = offset as usize + len;
    if model.len() < end {
        model.resize(end, 0);
    }
    model[offset as usize..end].fill(byte);
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn what_the_kernel_wrote_in_ram_goes_home(ops in proptest::collection::vec(op(), 1..40)) {
        let target = Arc::new(MemTarget::new(8 << 20));
        FileSystem::format(target.as_ref(), 0, 0).unwrap();
        let fs = FileSystem::mount(target.clone(), MountOptions::default()).unwrap();
        let ino = fs.mknod(ROOT, b"f", Kind::File, 0o644, 0, OWNER).unwrap().ino;
        fs.open(ino).unwrap();
        prop_assert!(fs.begin_kernel_writes(ino).unwrap(), "the open file is in RAM");
        let ram = fs.file_ram(ino).unwrap();
        let mut model = Vec::new();
        for op in &ops {
            match *op {
                Op::Kernel { offset, len, byte } => {
                    let buf = vec![byte; len];
                    let mut done = 0;
                    while done < len {
                        done += ram
                            .with_fd(|fd| rustix::io::pwrite(fd, &buf[done..], offset + done as u64))
                            .unwrap()
                            .unwrap();
                    }
                    put(&mut model, offset, len, byte);
                    prop_assert_eq!(fs.getattr(ino).unwrap().size, model.len() as u64, "stat sees the kernel's size");
                }
                Op::Write { offset, len, byte } => {
                    fs.write(ino, offset, &vec![byte; len]).unwrap();
                    put(&mut model, offset, len, byte);
                }
                Op::Truncate(size) => {
                    fs.truncate(ino, size).unwrap();
                    model.resize(size as usize, 0);
                }
                Op::Punch { offset, len } => {
                    fs.fallocate(ino, offset, len, Allocate::PunchHole).unwrap();
                    let end = ((offset + len) as usize).min(model.len());
                    if (offset as usize) < end {
                        model[offset as usize..end].fill(0);
                    }
                }
                Op::WriteBack => {
                    fs.write_back_ram(ino).unwrap();
                    let home = fs.read_from_target(ino, 0, u32::MAX).unwrap();
                    prop_assert!(home == model, "the target after a write-back, after {:?}", ops);
                }
            }
            let got = fs.read(ino, 0, u32::MAX).unwrap();
            prop_assert!(got == model, "RAM after {:?}", op);
        }
        fs.write_back_ram(ino).unwrap();
        fs.end_kernel_writes(ino);
        fs.sync_all().unwrap();
        drop(ram);
        drop(fs);
        let fs = FileSystem::mount(target.clone(), MountOptions::default()).unwrap();
        prop_assert_eq!(fs.getattr(ino).unwrap().size, model.len() as u64);
        let home = fs.read_from_target(ino, 0, u32::MAX).unwrap();
        prop_assert!(home == model, "after a remount");
    }
}

/// A write-back that runs while the kernel appends to the file: each byte's value
/// says where it belongs, so a block written home at the wrong place shows. (A
/// write-back whose first read ended inside a block went on from that unaligned
/// place, and wrote every later block home shifted.)
#[test]
fn a_write_back_beside_appends_puts_every_block_in_its_place() {
    let at = |i: u64| (i % 251) as u8 + 1;
    for round in 0..20u64 {
        let target = Arc::new(MemTarget::new(64 << 20));
        FileSystem::format(target.as_ref(), 0, 0).unwrap();
        let fs = Arc::new(FileSystem::mount(target, MountOptions::default()).unwrap());
        let ino = fs
            .mknod(ROOT, b"f", Kind::File, 0o644, 0, OWNER)
            .unwrap()
            .ino;
        fs.open(ino).unwrap();
        assert!(fs.begin_kernel_writes(ino).unwrap());
        let ram = fs.file_ram(ino).unwrap();
        let done = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let appender = {
            let (ram, done) = (ram.clone(), done.clone());
            std::thread::spawn(move || {
                // Appends of odd sizes, so that the end is mostly inside a block.
                let mut end = 0u64;
                let step = 777 + round * 131;
                while end < (3 << 20) {
                    let piece: Vec<u8> = (end..end + step).map(at).collect();
                    ram.with_fd(|fd| rustix::io::pwrite(fd, &piece, end))
                        .unwrap()
                        .unwrap();
                    end += step;
                }
                done.store(true, std::sync::atomic::Ordering::SeqCst);
                end
            })
        };
        while !done.load(std::sync::atomic::Ordering::SeqCst) {
            fs.write_back_ram(ino).unwrap();
            // What is home now, before any later write-back could mend it (a
            // power cut could come here): each byte in its place, or not there yet.
            let size = fs.getattr(ino).unwrap().size.min(u64::from(u32::MAX));
            let home = fs.read_from_target(ino, 0, size as u32).unwrap();
            if let Some(i) = (0..home.len() as u64).find(|&i| {
                let b = home[i as usize];
                b != 0 && b != at(i)
            }) {
                panic!(
                    "round {round}: byte {i} home is {}, belongs {}",
                    home[i as usize],
                    at(i)
                );
            }
        }
        let end = appender.join().unwrap();
        fs.write_back_ram(ino).unwrap();
        assert_eq!(fs.getattr(ino).unwrap().size, end);
        let home = fs.read_from_target(ino, 0, end as u32).unwrap();
        if let Some(i) = (0..end).find(|&i| home[i as usize] != at(i)) {
            panic!(
                "round {round}: byte {i} home is {}, belongs {}",
                home[i as usize],
                at(i)
            );
        }
    }
}

/// The file system's own writes that start or end inside a block (as `tar` writes:
/// 10 KiB at a time) leave nothing for a write-back: the file system wrote those
/// blocks whole and knows what the target holds. (It marked them unknown, and the
/// close of every such file wrote its partial blocks home a second time, with a
/// sync each.) A kernel write into one of those blocks after them still goes home.
#[test]
fn the_file_systems_own_unaligned_writes_leave_nothing_to_write_back() {
    for durability in [hscm_fs::Durability::OnFlush, hscm_fs::Durability::Immediate] {
        let target = Arc::new(MemTarget::new(8 << 20));
        FileSystem::format(target.as_ref(), 0, 0).unwrap();
        let opts = MountOptions {
            durability,
            ..MountOptions::default()
        };
        let fs = FileSystem::mount(target.clone(), opts.clone()).unwrap();
        let ino = fs
            .mknod(ROOT, b"f", Kind::File, 0o644, 0, OWNER)
            .unwrap()
            .ino;
        fs.open(ino).unwrap();
        assert!(
            fs.begin_kernel_writes(ino).unwrap(),
            "the open file is in RAM"
        );
        let mut model = Vec::new();
        // Appends into new blocks, then over blocks the file has, then in place.
        for (offset, len, byte) in [(0u64, 9216usize, 1u8), (9216, 3784, 2), (5000, 3000, 3)] {
            fs.write(ino, offset, &vec![byte; len]).unwrap();
            put(&mut model, offset, len, byte);
        }
        assert_eq!(
            fs.write_back_ram(ino).unwrap(),
            0,
            "{durability:?}: the target already holds every block"
        );
        assert_eq!(fs.read_from_target(ino, 0, u32::MAX).unwrap(), model);
        // The kernel changes a byte of a partial block the file system wrote.
        let ram = fs.file_ram(ino).unwrap();
        ram.with_fd(|fd| rustix::io::pwrite(fd, &[9], 12_900))
            .unwrap()
            .unwrap();
        put(&mut model, 12_900, 1, 9);
        assert!(
            fs.write_back_ram(ino).unwrap() > 0,
            "{durability:?}: the kernel's byte goes home"
        );
        fs.end_kernel_writes(ino);
        fs.sync_all().unwrap();
        drop(ram);
        drop(fs);
        let fs = FileSystem::mount(target, opts).unwrap();
        assert_eq!(fs.read_from_target(ino, 0, u32::MAX).unwrap(), model);
    }
}

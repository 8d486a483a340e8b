//! The file system's operations with offsets, sizes and lengths anywhere in u64
//! (what a FUSE request or a fuzzer can send), on a small target: every call
//! answers (an error is fine), none panics or allocates by the length asked, and
//! what was done reads back the same after a remount. The fuzz target `fs_ops`
//! feeds it the fuzzer's bytes; `tests/extreme.rs` seeded and hand-picked ones.

use std::sync::Arc;

use hscm_block::MemTarget;
use hscm_fs::{Allocate, Durability, FileSystem, Kind, MountOptions, RenameFlags, SetAttr, ROOT};

use super::OWNER;

/// Reads the input as numbers, then zeroes once it runs out.
struct Input<'a>(&'a [u8]);

impl Input<'_> {
    fn u8(&mut self) -> u8 {
        let (&b, rest) = self.0.split_first().unwrap_or((&0, &[]));
        self.0 = rest;
        b
    }
    fn u64(&mut self) -> u64 {
        let mut b = [0u8; 8];
        for x in &mut b {
            *x = self.u8();
        }
        // Small values, edges and anything, in turn: a fuzzer's raw u64 is rarely
        // near a file's end.
        match b[0] % 4 {
            0 => u64::from(b[1]) * 4096 + u64::from(b[2]),
            1 => [u64::MAX, i64::MAX as u64, (i64::MAX as u64) + 1, 1 << 40, 0][b[1] as usize % 5]
                .wrapping_sub(u64::from(b[2] % 4)),
            _ => u64::from_le_bytes(b),
        }
    }
    fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

const TARGET: usize = 16 << 20;

fn name(i: u8) -> Vec<u8> {
    format!("n{}", i % 8).into_bytes()
}

/// Runs the operations `bytes` encode, then checks a remount.
pub fn run(bytes: &[u8], durability: Durability) {
    let target = Arc::new(MemTarget::new(TARGET));
    FileSystem::format(target.as_ref(), 0, 0).unwrap();
    let opts = MountOptions {
        durability,
        ..Default::default()
    };
    let fs = FileSystem::mount(target.clone(), opts.clone()).unwrap();
    let mut input = Input(bytes);
    let mut touched = vec![0u64];
    let lookup = |fs: &FileSystem, n: u8| fs.lookup(ROOT, &name(n)).map(|a| a.ino).unwrap_or(0);
    let mut ops = 0;
    while !input.is_empty() && ops < 256 {
        ops += 1;
        let op = input.u8();
        let n = input.u8();
        let ino = lookup(&fs, n);
        let _ = match op % 13 {
            0 => fs
                .mknod(ROOT, &name(n), Kind::File, 0o644, 0, OWNER)
                .map(drop),
            1 => {
                let offset = input.u64();
                touched.push(offset);
                let len = usize::from(input.u8()) * 97;
                fs.write(ino, offset, &vec![n; len]).map(drop)
            }
            2 => {
                let (offset, len) = (input.u64(), input.u64() as u32);
                fs.read(ino, offset, len.min(1 << 20)).map(drop)
            }
            3 => fs.truncate(ino, input.u64()),
            4 => {
                let (offset, len) = (input.u64(), input.u64());
                touched.extend([offset, offset.saturating_add(len).saturating_sub(1)]);
                let mode = [Allocate::Extend, Allocate::KeepSize, Allocate::PunchHole]
                    [usize::from(input.u8() % 3)];
                fs.fallocate(ino, offset, len, mode)
            }
            5 => {
                let key = format!("user.{}", "k".repeat(usize::from(input.u8())));
                let len = (input.u64() % 70_000) as usize;
                fs.setxattr(ino, key.as_bytes(), &vec![1; len], false, false)
            }
            6 => fs.unlink(ROOT, &name(n)),
            7 => fs.link(ino, ROOT, &name(input.u8())).map(drop),
            8 => fs.rename(
                ROOT,
                &name(n),
                ROOT,
                &name(input.u8()),
                RenameFlags::default(),
            ),
            9 => fs.fsync(ino),
            10 => fs.mkdir(ROOT, &name(n), 0o755, OWNER).map(drop),
            11 => {
                let len = (input.u64() % 5000) as usize + 1;
                fs.symlink(ROOT, &name(n), &vec![b'x'; len], OWNER)
                    .map(drop)
            }
            _ => fs
                .setattr(
                    ino,
                    SetAttr {
                        size: Some(input.u64()),
                        ..Default::default()
                    },
                )
                .map(drop),
        };
        let st = fs.statfs();
        assert!(st.free_blocks <= st.blocks, "statfs: {st:?}");
    }
    fs.sync_all().expect("everything done commits");
    let before = view(&fs, &touched);
    drop(fs);
    let fs = FileSystem::mount(target, opts).expect("it mounts again");
    assert_eq!(
        view(&fs, &touched),
        before,
        "what was done reads back the same"
    );
}

/// What a reader sees: each name's attributes (less times) and, for files, the
/// bytes around every offset an operation touched (files may be sparse and up to
/// 8 EiB long, so not the whole of them).
fn view(fs: &FileSystem, touched: &[u64]) -> Vec<(Vec<u8>, String, Vec<Vec<u8>>)> {
    let mut out = Vec::new();
    for (name, ino, kind) in fs.readdir(ROOT).unwrap() {
        let a = fs.getattr(ino).unwrap();
        let attrs = format!(
            "{kind:?} ino {} size {} allocated {} perm {:o} nlink {} xattrs {:?}",
            a.ino,
            a.size,
            a.allocated,
            a.perm,
            a.nlink,
            fs.listxattr(ino).unwrap()
        );
        let mut windows = Vec::new();
        if kind == Kind::File {
            for &at in touched {
                windows.push(fs.read(ino, at.saturating_sub(4096), 3 * 4096).unwrap());
            }
        }
        out.push((name, attrs, windows));
    }
    out
}

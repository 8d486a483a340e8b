//! Operations from several threads at once, as FUSE's threads send them: writes in
//! place run beside truncates, unlinks and commits, and no byte ever lands in a
//! block another file has since got.

mod common;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use common::*;
use hscm_block::{BlockTarget, Capabilities, MemTarget, WriteFlags, ZeroFlags};
use hscm_fs::{Durability, FileSystem, Kind, MountOptions, ROOT};

const FILE: usize = 64 << 10;

/// The small writes (the in-place ones below) take a while to land, as on a
/// device: long enough for other threads to free and reuse blocks meanwhile.
struct SlowSmallWrites(MemTarget);

impl BlockTarget for SlowSmallWrites {
    fn size(&self) -> u64 {
        self.0.size()
    }
    fn capabilities(&self) -> Capabilities {
        self.0.capabilities()
    }
    fn read_with(
        &self,
        offset: u64,
        len: usize,
        sink: &mut dyn FnMut(usize, &[u8]),
    ) -> hscm_block::Result<()> {
        self.0.read_with(offset, len, sink)
    }
    fn write_at(&self, offset: u64, data: &[u8], flags: WriteFlags) -> hscm_block::Result<()> {
        if data.len() <= 512 {
            std::thread::sleep(std::time::Duration::from_micros(300));
        }
        self.0.write_at(offset, data, flags)
    }
    fn flush(&self) -> hscm_block::Result<()> {
        self.0.flush()
    }
    fn discard(&self, offset: u64, len: u64, flags: WriteFlags) -> hscm_block::Result<()> {
        self.0.discard(offset, len, flags)
    }
    fn write_zeroes(&self, offset: u64, len: u64, flags: ZeroFlags) -> hscm_block::Result<()> {
        self.0.write_zeroes(offset, len, flags)
    }
}

fn mounted(durability: Durability) -> Arc<FileSystem> {
    let target = Arc::new(SlowSmallWrites(MemTarget::new(4 << 20)));
    FileSystem::format(target.as_ref(), 0, 0).unwrap();
    Arc::new(
        FileSystem::mount(
            target,
            MountOptions {
                durability,
                ..Default::default()
            },
        )
        .unwrap(),
    )
}

fn in_place_writes_never_reach_a_block_reused_by_another_file(durability: Durability) {
    let fs = mounted(durability);
    let x = fs
        .mknod(ROOT, b"x", Kind::File, 0o644, 0, OWNER)
        .unwrap()
        .ino;
    fs.write(x, 0, &[b'x'; FILE]).unwrap();
    // Space for little more than x and y: y takes the blocks x just gave back.
    let filler = fs
        .mknod(ROOT, b"filler", Kind::File, 0o644, 0, OWNER)
        .unwrap()
        .ino;
    let spare = fs.statfs().free_blocks - 20;
    fs.write(filler, 0, &vec![b'f'; spare as usize * 4096])
        .unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let mut threads = Vec::new();
    // Writes in place into x, wherever x is long enough.
    for t in 0..2u64 {
        let (fs, stop) = (fs.clone(), stop.clone());
        threads.push(std::thread::spawn(move || {
            let mut i = t;
            while !stop.load(Ordering::Relaxed) {
                let at = (i * 4096 + 100) % (FILE as u64 - 512);
                let _ = fs.write(x, at, &[b'x'; 512]);
                i += 2;
            }
        }));
    }
    // Cuts x and grows it back: its blocks are freed and new ones mapped.
    {
        let (fs, stop) = (fs.clone(), stop.clone());
        threads.push(std::thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                fs.truncate(x, 0).unwrap();
                // Frees wait for their record to be durable (on-flush: a commit);
                // then, for a while, x's old blocks are free for y to take.
                fs.sync_all().unwrap();
                std::thread::sleep(std::time::Duration::from_micros(500));
                // y may hold the blocks for now.
                while fs.write_whole(x, 0, &[b'x'; FILE]).is_err() && !stop.load(Ordering::Relaxed)
                {
                    std::thread::sleep(std::time::Duration::from_micros(100));
                }
            }
        }));
    }
    // Another file, made, committed (freed blocks become free), checked, removed.
    for round in 0..200 {
        let name = format!("y{round}");
        let y = fs
            .mknod(ROOT, name.as_bytes(), Kind::File, 0o644, 0, OWNER)
            .unwrap()
            .ino;
        while fs.write_whole(y, 0, &[b'y'; FILE]).is_err() {
            std::thread::sleep(std::time::Duration::from_micros(100));
        }
        fs.sync_all().unwrap();
        // Long enough for a delayed in-place write to land.
        std::thread::sleep(std::time::Duration::from_millis(1));
        let back = fs.read(y, 0, FILE as u32).unwrap();
        let stray = back.iter().filter(|&&b| b != b'y').count();
        assert_eq!(
            stray, 0,
            "round {round}: {stray} bytes of y are another file's"
        );
        fs.unlink(ROOT, name.as_bytes()).unwrap();
    }
    stop.store(true, Ordering::Relaxed);
    for t in threads {
        t.join().unwrap();
    }
}

#[test]
fn in_place_writes_never_reach_a_reused_block_in_on_flush_mode() {
    in_place_writes_never_reach_a_block_reused_by_another_file(Durability::OnFlush);
}

#[test]
fn in_place_writes_never_reach_a_reused_block_in_immediate_mode() {
    in_place_writes_never_reach_a_block_reused_by_another_file(Durability::Immediate);
}

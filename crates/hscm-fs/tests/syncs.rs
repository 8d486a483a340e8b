//! What an operation costs the device in syncs (issue 51, item 5): in immediate
//! mode a create, mkdir, rename, unlink, rmdir or chmod is durable when it returns
//! at the cost of one flush, and operations that run at once share flushes (group
//! commit); in on-flush mode they cost none until the fsync. Counted on the
//! target, under a flush slow enough that concurrent operations meet.

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::OWNER;
use hscm_block::{BlockTarget, Capabilities, Counted, MemTarget, Result, WriteFlags, ZeroFlags};
use hscm_fs::{Durability, FileSystem, Kind, MountOptions, RenameFlags, SetAttr, ROOT};

/// A memory target whose flush takes `delay`, as a device's does.
struct SlowFlush {
    inner: MemTarget,
    delay: Duration,
}

impl BlockTarget for SlowFlush {
    fn size(&self) -> u64 {
        self.inner.size()
    }
    fn capabilities(&self) -> Capabilities {
        self.inner.capabilities()
    }
    fn read_with(&self, offset: u64, len: usize, sink: &mut dyn FnMut(usize, &[u8])) -> Result<()> {
        self.inner.read_with(offset, len, sink)
    }
    fn write_at(&self, offset: u64, data: &[u8], flags: WriteFlags) -> Result<()> {
        self.inner.write_at(offset, data, flags)
    }
    fn flush(&self) -> Result<()> {
        std::thread::sleep(self.delay);
        self.inner.flush()
    }
    fn discard(&self, offset: u64, len: u64, flags: WriteFlags) -> Result<()> {
        self.inner.discard(offset, len, flags)
    }
    fn write_zeroes(&self, offset: u64, len: u64, flags: ZeroFlags) -> Result<()> {
        self.inner.write_zeroes(offset, len, flags)
    }
}

fn mounted(durability: Durability, delay: Duration) -> (Arc<Counted<SlowFlush>>, FileSystem) {
    let target = Arc::new(Counted::new(SlowFlush {
        inner: MemTarget::new(32 << 20),
        delay,
    }));
    FileSystem::format(target.as_ref(), 0, 0).unwrap();
    let opts = MountOptions {
        durability,
        ..MountOptions::default()
    };
    let fs = FileSystem::mount(target.clone(), opts).unwrap();
    (target, fs)
}

/// Flushes `op` cost the target.
fn flushes(target: &Counted<SlowFlush>, op: impl FnOnce()) -> u64 {
    let before = target.snapshot().flushes;
    op();
    target.snapshot().flushes - before
}

/// An operation to count, given the directory's and the file's inode numbers.
type Step<'a> = (&'static str, Box<dyn FnOnce(&mut u64, &mut u64) + 'a>);

#[test]
fn each_namespace_operation_costs_one_flush_in_immediate_mode_and_none_on_flush() {
    for (durability, want) in [(Durability::Immediate, 1), (Durability::OnFlush, 0)] {
        let (t, fs) = mounted(durability, Duration::ZERO);
        let mut dir = 0;
        let mut file = 0;
        let steps: Vec<Step> = vec![
            (
                "mkdir",
                Box::new(|d, _| *d = fs.mkdir(ROOT, b"d", 0o755, OWNER).unwrap().ino),
            ),
            (
                "create",
                Box::new(|d, f| *f = fs.mknod(*d, b"a", Kind::File, 0o644, 0, OWNER).unwrap().ino),
            ),
            (
                "rename",
                Box::new(|d, _| {
                    fs.rename(*d, b"a", ROOT, b"b", RenameFlags::default())
                        .unwrap()
                }),
            ),
            (
                "chmod",
                Box::new(|_, f| {
                    let set = SetAttr {
                        mode: Some(0o600),
                        ..SetAttr::default()
                    };
                    fs.setattr(*f, set).unwrap();
                }),
            ),
            ("unlink", Box::new(|_, _| fs.unlink(ROOT, b"b").unwrap())),
            ("rmdir", Box::new(|_, _| fs.rmdir(ROOT, b"d").unwrap())),
        ];
        for (what, step) in steps {
            let n = flushes(&t, || step(&mut dir, &mut file));
            assert_eq!(n, want, "{durability:?}: {what} cost {n} flushes");
        }
        // Everything the steps did becomes durable at the fsync, with flushes.
        assert!(flushes(&t, || fs.sync_all().unwrap()) >= 1);
    }
}

#[test]
fn writes_cost_at_most_two_flushes_and_one_in_place() {
    let (t, fs) = mounted(Durability::Immediate, Duration::ZERO);
    let ino = fs
        .mknod(ROOT, b"f", Kind::File, 0o644, 0, OWNER)
        .unwrap()
        .ino;
    // New blocks: their bytes are made durable before the record that maps them
    // (so that no crash can show a block's earlier contents), then the record.
    let n = flushes(&t, || {
        fs.write(ino, 0, &[1; 9216]).unwrap();
    });
    assert!(n <= 2, "an appending write cost {n} flushes");
    // Over blocks the file has: the bytes in place and one sync.
    let n = flushes(&t, || {
        fs.write(ino, 100, &[2; 5000]).unwrap();
    });
    assert_eq!(n, 1, "a write in place cost {n} flushes");
    // The unlink of a file that has blocks frees them in the same one commit.
    let n = flushes(&t, || fs.unlink(ROOT, b"f").unwrap());
    assert_eq!(n, 1, "the unlink of a written file cost {n} flushes");
}

#[test]
fn concurrent_creates_share_flushes() {
    const THREADS: usize = 8;
    const EACH: usize = 25;
    let (t, fs) = mounted(Durability::Immediate, Duration::from_millis(2));
    let fs = Arc::new(fs);
    let dirs: Vec<u64> = (0..THREADS)
        .map(|i| {
            fs.mkdir(ROOT, format!("d{i}").as_bytes(), 0o755, OWNER)
                .unwrap()
                .ino
        })
        .collect();
    let n = flushes(&t, || {
        std::thread::scope(|s| {
            for &dir in &dirs {
                let fs = fs.clone();
                s.spawn(move || {
                    for j in 0..EACH {
                        fs.mknod(dir, format!("f{j}").as_bytes(), Kind::File, 0o644, 0, OWNER)
                            .unwrap();
                    }
                });
            }
        });
    });
    let ops = (THREADS * EACH) as u64;
    // One at a time they would cost one flush each; at once, a flush carries the
    // records of every create that waited for it.
    assert!(
        n * 2 <= ops,
        "{ops} concurrent creates cost {n} flushes (one each would be {ops})"
    );
    // And each create is there, durable, after a remount.
    drop(fs);
    let fs = FileSystem::mount(t.clone(), MountOptions::default()).unwrap();
    for &dir in &dirs {
        for j in 0..EACH {
            fs.lookup(dir, format!("f{j}").as_bytes()).unwrap();
        }
    }
}

//! Power cuts with several writers at once (`tests/power_cut_concurrent.rs` runs
//! seeded rounds, the fuzz target `fs_power_cut` rounds whose writers' choices are
//! the fuzzer's). Each writer owns a file that is open, so in RAM, and mixes the
//! file system's own writes (appends, and rewrites in place of blocks an fsync
//! already made durable), writes into the file's RAM behind the file system's back
//! (what FUSE passthrough and shared mappings do), and fsyncs (which take every
//! file's RAM home, then commit). The power goes at a moment the round's seed
//! picks while they run, on the device model that keeps what a sync covered plus a
//! random subset of the rest, each write whole or torn at a 512-byte boundary.
//! After a remount each file must hold everything its writer saw acknowledged:
//! every byte as of its last fsync that returned before the cut, except where a
//! later write (acknowledged or not) may have put its own byte.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use super::power_cut::{device, open_volume};
use super::*;
use hscm_fs::{Durability, FileSystem, MountOptions, ROOT};
use rand::Rng;

pub const WRITERS: u64 = 4;
/// Operations per writer at most; they run until the cut.
const MAX_OPS: u64 = 100_000;
/// Files grow to about this, then are rewritten (the device holds 16 MiB).
const FILE_BYTES: usize = 256 << 10;

/// What one writer knows of its file.
#[derive(Default)]
struct Model {
    /// The file as its last fsync that returned before the cut left it.
    acked: Vec<u8>,
    /// Every write since: (offset, length, fill byte).
    since: Vec<(u64, u64, u8)>,
    /// The file as the writer last left it (what a read would return).
    now: Vec<u8>,
}

impl Model {
    /// A write about to be made: whatever its outcome, its bytes may reach the
    /// device (a write cut in the middle fails, but what it wrote before may stay).
    fn intend(&mut self, offset: u64, len: u64, byte: u8) {
        self.since.push((offset, len, byte));
    }

    /// The write returned: reads now show it.
    fn wrote(&mut self, offset: u64, len: u64, byte: u8) {
        let end = (offset + len) as usize;
        if self.now.len() < end {
            self.now.resize(end, 0);
        }
        self.now[offset as usize..end].fill(byte);
    }

    fn synced(&mut self) {
        self.acked = self.now.clone();
        self.since.clear();
    }

    /// Whether `got` (the file after the cut) keeps what was acknowledged.
    fn check(&self, got: &[u8]) -> Result<(), String> {
        let max_end = self
            .since
            .iter()
            .map(|&(o, l, _)| o + l)
            .max()
            .unwrap_or(0)
            .max(self.acked.len() as u64) as usize;
        if got.len() < self.acked.len() || got.len() > max_end {
            return Err(format!(
                "size {} outside [{}, {max_end}]",
                got.len(),
                self.acked.len()
            ));
        }
        for (i, &g) in got.iter().enumerate() {
            let old = self.acked.get(i).copied().unwrap_or(0);
            let later = || {
                self.since
                    .iter()
                    .any(|&(o, l, b)| (o..o + l).contains(&(i as u64)) && b == g)
            };
            if g != old && !later() {
                return Err(format!(
                    "byte {i} is {g}: acknowledged {old}, and no later write put {g} there"
                ));
            }
        }
        Ok(())
    }
}

/// One writer's run until the device goes dark (or `MAX_OPS`): its model.
fn writer(fs: &FileSystem, ino: u64, mut rng: impl Rng, cut: &AtomicBool) -> Model {
    let mut m = Model::default();
    let mut kernel = false;
    for _ in 0..MAX_OPS {
        let byte = rng.gen_range(1..=255u8);
        let len = rng.gen_range(1..12_000u64);
        let ok = match rng.gen_range(0..11) {
            // Append.
            0..=2 if m.now.len() < FILE_BYTES => {
                let at = m.now.len() as u64;
                m.intend(at, len, byte);
                let done = fs.write_whole(ino, at, &vec![byte; len as usize]).is_ok();
                if done {
                    m.wrote(at, len, byte);
                }
                done
            }
            // Rewrite in place, over blocks an fsync made durable.
            0..=4 if !m.acked.is_empty() => {
                let at = rng.gen_range(0..m.acked.len() as u64);
                let len = len.min(m.acked.len() as u64 - at).max(1);
                m.intend(at, len, byte);
                let done = fs.write_whole(ino, at, &vec![byte; len as usize]).is_ok();
                if done {
                    m.wrote(at, len, byte);
                }
                done
            }
            // The kernel writes RAM: inside the file or past its end.
            5..=7 => {
                if !kernel {
                    kernel = fs.begin_kernel_writes(ino).unwrap_or(false);
                }
                let Some(ram) = fs.file_ram(ino).filter(|_| kernel) else {
                    continue;
                };
                let at = rng.gen_range(0..=m.now.len() as u64);
                let buf = vec![byte; len as usize];
                m.intend(at, len, byte);
                let written = ram
                    .with_fd(|fd| {
                        let mut done = 0;
                        while done < buf.len() {
                            done += rustix::io::pwrite(fd, &buf[done..], at + done as u64)?;
                        }
                        Ok::<_, rustix::io::Errno>(())
                    })
                    .map(|r| r.is_ok())
                    .unwrap_or(false);
                if written {
                    m.wrote(at, len, byte);
                }
                written
            }
            // A close of an open the kernel wrote through (the writer keeps
            // another): on-flush leaves the write-back to the next fsync, or,
            // past the small `dirty_max` below, takes every waiting file home.
            // Nothing is acknowledged by it.
            10 if kernel => fs.close_after_kernel_writes(ino).is_ok(),
            // fsync: every file's RAM home, then a commit.
            _ => {
                let done = fs.write_back_all(Some(ino)).is_ok() && fs.fsync(ino).is_ok();
                // Acknowledged before the cut only if the cut had not begun once
                // the fsync returned.
                if done && !cut.load(Ordering::SeqCst) {
                    m.synced();
                }
                done
            }
        };
        if cut.load(Ordering::SeqCst) && (!ok || rng.gen_bool(0.2)) {
            break;
        }
    }
    if kernel {
        fs.end_kernel_writes(ino);
    }
    m
}

/// One round; `choices(w)` draws writer `w`'s operations, `seed` the moment of the
/// cut and what of the unsynced writes survives it. Returns (bytes acknowledged,
/// writes after the last acknowledgment) over its writers, to show the cut fell
/// among live work.
pub fn round<R: Rng + Send>(
    seed: u64,
    durability: Durability,
    choices: impl Fn(u64) -> R,
) -> (u64, u64) {
    let dev = device();
    let vol = open_volume(&dev);
    let fs = Arc::new(
        FileSystem::mount(
            vol.clone(),
            MountOptions {
                durability,
                // Small, so that closes pass it and write home while others write.
                dirty_max: 64 << 10,
                ..Default::default()
            },
        )
        .unwrap(),
    );
    let inos: Vec<u64> = (0..WRITERS)
        .map(|w| {
            let name = format!("w{w}");
            let ino = fs
                .mknod(ROOT, name.as_bytes(), hscm_fs::Kind::File, 0o644, 0, OWNER)
                .unwrap()
                .ino;
            fs.open(ino).unwrap();
            ino
        })
        .collect();
    fs.sync_all().unwrap();
    let cut = AtomicBool::new(false);
    let (models, survivor) = std::thread::scope(|s| {
        let writers: Vec<_> = inos
            .iter()
            .enumerate()
            .map(|(w, &ino)| {
                let (fs, cut, rng) = (&fs, &cut, choices(w as u64));
                s.spawn(move || writer(fs, ino, rng, cut))
            })
            .collect();
        let mut pick = rng(seed ^ 0xc07);
        std::thread::sleep(std::time::Duration::from_micros(pick.gen_range(0..20_000)));
        cut.store(true, Ordering::SeqCst);
        let survivor = dev.power_cut(seed);
        let models: Vec<Model> = writers.into_iter().map(|t| t.join().unwrap()).collect();
        (models, survivor)
    });
    drop(fs);
    drop(vol);
    let fs = FileSystem::mount(
        open_volume(&survivor),
        MountOptions {
            durability,
            ..Default::default()
        },
    )
    .unwrap_or_else(|e| panic!("seed {seed}: no mount after the cut: {e}"));
    for (w, m) in models.iter().enumerate() {
        let ino = fs
            .lookup(ROOT, format!("w{w}").as_bytes())
            .unwrap_or_else(|e| panic!("seed {seed}: w{w} is gone: {e}"))
            .ino;
        let size = fs.getattr(ino).unwrap().size;
        let mut got = Vec::new();
        while (got.len() as u64) < size {
            let piece = fs.read(ino, got.len() as u64, 1 << 20).unwrap();
            assert!(!piece.is_empty());
            got.extend_from_slice(&piece);
        }
        if let Err(why) = m.check(&got) {
            panic!(
                "seed {seed} ({durability:?}): writer {w}: {why} (acknowledged {} bytes, {} writes since)",
                m.acked.len(),
                m.since.len()
            );
        }
    }
    models.iter().fold((0, 0), |(a, s), m| {
        (a + m.acked.len() as u64, s + m.since.len() as u64)
    })
}

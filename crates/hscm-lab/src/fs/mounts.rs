//! The file systems `hscm bench fs` compares, each mounted in the scratch directory
//! for as long as its [`Mounted`] lives.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;

use anyhow::{bail, Context, Result};
use hscm_fs::{FileSystem, MountOptions};
use hscm_sweep::scratch;
use hscm_volume::{CreateOptions, Durability, OpenOptions, Volume};

/// What is measured. Names (`name()`) are the `fs` field of the JSON rows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Under {
    /// hscm in on-flush mode as `hscm mount` serves it: FUSE passthrough from each
    /// file's RAM (reads, and writes, which go home at fsync): the paper's fast mode.
    HscmOnFlush,
    /// hscm in on-flush mode on the classic FUSE path (`--no-passthrough`): every
    /// cold read a round trip to the daemon, writes in the kernel's writeback cache.
    HscmClassic,
    /// hscm in on-flush mode with `--passthrough-read-write`: read-write opens
    /// (fio's writers) by passthrough too, msync of their mappings not durable on
    /// return. Only the points that write run on it.
    HscmReadWritePassthrough,
    /// hscm in immediate mode: every write durable when it returns.
    HscmImmediate,
    /// hscm on-flush as `HscmOnFlush`, its requests by /dev/fuse reads and writes
    /// (`--io-uring off`): what the rings change, in the same run.
    HscmNoIoUring,
    /// Volatile, in RAM: the bound.
    Tmpfs,
    Ext4,
    /// ext4 mounted `sync,dirsync`: every write and every change of a directory
    /// durable when it returns, immediate mode's promise.
    Ext4Sync,
    Ext3,
    /// bindfs over a tmpfs directory: what FUSE itself costs.
    Passthrough,
    /// No file system of its own: a plain file in the scratch directory, on the
    /// host's file system on the same disk. Only the durable write runs on it, with an
    /// fdatasync after each write: the least one durable write costs on this disk.
    DiskFile,
}

impl Under {
    pub fn name(self) -> &'static str {
        match self {
            Under::HscmOnFlush | Under::HscmImmediate => "hscm",
            Under::HscmClassic => "hscm-no-passthrough",
            Under::HscmNoIoUring => "hscm-no-io-uring",
            Under::HscmReadWritePassthrough => "hscm-passthrough-read-write",
            Under::Tmpfs => "tmpfs",
            Under::Ext4 => "ext4",
            Under::Ext4Sync => "ext4-sync",
            Under::Ext3 => "ext3",
            Under::Passthrough => "fuse-passthrough",
            Under::DiskFile => "disk-file",
        }
    }

    /// Its mode, as the progress lines say it.
    pub fn label(self) -> &'static str {
        match self {
            Under::HscmOnFlush => "hscm (on-flush)",
            Under::HscmImmediate => "hscm (immediate)",
            other => other.name(),
        }
    }
}

/// A file system under test, mounted at `at` while this lives.
pub struct Mounted {
    pub under: Under,
    pub at: PathBuf,
    keep: Keep,
    /// hscm's file system, whose files' RAM the memory figure counts.
    ram: Option<Arc<FileSystem>>,
    /// What hscm's daemon served, by request (None for the others).
    pub stats: Option<Arc<hscm_fuse::FuseStats>>,
    /// hscm's transport: what the rings carried (None for the others).
    pub rings: Option<Arc<hscm_fuse::uring::RingState>>,
}

impl Mounted {
    /// Bytes of RAM hscm's files hold (their memfds); 0 for the others.
    pub fn file_ram_bytes(&self) -> u64 {
        self.ram
            .as_ref()
            .map_or(0, |fs| fs.ram_usage().resident_bytes)
    }
}

enum Keep {
    Hscm(
        Option<(
            std::thread::JoinHandle<std::io::Result<()>>,
            hscm_fuse::mounts::Mounted,
        )>,
    ),
    Kernel,
    /// A directory of the scratch directory: nothing to unmount.
    Directory,
    /// The FUSE mount first, then the tmpfs under it.
    Passthrough {
        backing: PathBuf,
    },
}

impl Drop for Mounted {
    fn drop(&mut self) {
        self.unmount();
        // Unmounted first, so that a signal in between still detaches it.
        scratch::mounted_no_more(&self.at);
        if let Keep::Passthrough { backing } = &self.keep {
            scratch::mounted_no_more(backing);
        }
    }
}

impl Mounted {
    fn unmount(&mut self) {
        match &mut self.keep {
            Keep::Hscm(session) => {
                if let Some((s, mounted)) = session.take() {
                    // Unmounted by its identity; the session then ends by itself.
                    if mounted.unmount().is_ok() {
                        let _ = s.join();
                    }
                }
            }
            Keep::Kernel => {
                let _ = Command::new("umount").arg(&self.at).status();
            }
            Keep::Directory => {}
            Keep::Passthrough { backing } => {
                let _ = Command::new("fusermount3").arg("-u").arg(&self.at).status();
                let _ = Command::new("umount").arg(&*backing).status();
            }
        }
    }
}

fn sh(cmd: &mut Command, what: &str) -> Result<()> {
    let out = cmd.output().with_context(|| format!("running {what}"))?;
    if !out.status.success() {
        bail!(
            "{what} failed: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(())
}

/// Mounts `under` in `dir` with room for the workloads on a `size`-byte data file:
/// at the most the data file and the video's copy of it, with slack.
pub fn mount(dir: &Path, under: Under, size: u64) -> Result<Mounted> {
    let room = 2 * size + size / 4 + (64 << 20);
    match under {
        Under::HscmOnFlush => mount_hscm(dir, room, under),
        Under::HscmClassic => mount_hscm(dir, room, under),
        Under::HscmReadWritePassthrough => mount_hscm(dir, room, under),
        Under::HscmImmediate => mount_hscm(dir, room, under),
        Under::HscmNoIoUring => mount_hscm(dir, room, under),
        Under::Tmpfs => {
            let at = dir.join("tmpfs");
            mount_tmpfs(&at, room)?;
            Ok(Mounted {
                under,
                at,
                keep: Keep::Kernel,
                ram: None,
                stats: None,
                rings: None,
            })
        }
        Under::Ext4 | Under::Ext4Sync | Under::Ext3 => mount_ext(dir, under, room),
        Under::DiskFile => {
            let at = dir.join("disk-file");
            std::fs::create_dir_all(&at)?;
            Ok(Mounted {
                under,
                at,
                keep: Keep::Directory,
                ram: None,
                stats: None,
                rings: None,
            })
        }
        Under::Passthrough => {
            let backing = dir.join("passthrough-backing");
            mount_tmpfs(&backing, room)?;
            let at = dir.join("fuse-passthrough");
            std::fs::create_dir_all(&at)?;
            // Several threads, as hscm serves with several.
            let mounted = sh(
                Command::new("bindfs")
                    .arg("--multithreaded")
                    .arg(&backing)
                    .arg(&at),
                "bindfs (the FUSE passthrough baseline; Debian package bindfs)",
            );
            if let Err(e) = mounted {
                let _ = Command::new("umount").arg(&backing).status();
                scratch::mounted_no_more(&backing);
                return Err(e);
            }
            scratch::unmount_on_signal(&at);
            Ok(Mounted {
                under,
                at,
                keep: Keep::Passthrough { backing },
                ram: None,
                stats: None,
                rings: None,
            })
        }
    }
}

fn mount_tmpfs(at: &Path, room: u64) -> Result<()> {
    std::fs::create_dir_all(at)?;
    sh(
        Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={room}")])
            .arg("tmpfs")
            .arg(at),
        "mount -t tmpfs",
    )?;
    scratch::unmount_on_signal(at);
    Ok(())
}

fn mount_ext(dir: &Path, under: Under, room: u64) -> Result<Mounted> {
    let name = under.name();
    let (kind, options) = match under {
        Under::Ext4Sync => ("ext4", "loop,sync,dirsync"),
        Under::Ext3 => ("ext3", "loop"),
        _ => ("ext4", "loop"),
    };
    let at = dir.join(name);
    std::fs::create_dir_all(&at)?;
    let image = dir.join(format!("{name}.img"));
    std::fs::File::create(&image)?.set_len(room)?;
    sh(
        Command::new(format!("mkfs.{kind}"))
            .args(["-F", "-q"])
            .arg(&image),
        &format!("mkfs.{kind} (Debian package e2fsprogs)"),
    )?;
    sh(
        Command::new("mount")
            .args(["-o", options])
            .arg(&image)
            .arg(&at),
        &format!("mounting {name} on a loop device"),
    )?;
    scratch::unmount_on_signal(&at);
    Ok(Mounted {
        under,
        at,
        keep: Keep::Kernel,
        ram: None,
        stats: None,
        rings: None,
    })
}

fn mount_hscm(dir: &Path, room: u64, under: Under) -> Result<Mounted> {
    let (tag, durability, passthrough) = match under {
        Under::HscmImmediate => ("immediate", hscm_fs::Durability::Immediate, true),
        Under::HscmClassic => ("classic", hscm_fs::Durability::OnFlush, false),
        Under::HscmReadWritePassthrough => ("rw-passthrough", hscm_fs::Durability::OnFlush, true),
        Under::HscmNoIoUring => ("no-io-uring", hscm_fs::Durability::OnFlush, true),
        _ => ("on-flush", hscm_fs::Durability::OnFlush, true),
    };
    let path = dir.join(format!("fs-{tag}.hscm"));
    Volume::create(
        &path,
        room.div_ceil(1 << 20) << 20,
        &CreateOptions::default(),
    )?;
    // As `hscm mount` opens it: the file system decides when the device syncs and
    // keeps the files' bytes in RAM itself, so the volume is its home only.
    let volume = Volume::open(
        &path,
        &OpenOptions {
            durability: Some(Durability::OnFlush),
            ram_copy: false,
            ..OpenOptions::default()
        },
    )?;
    FileSystem::format(&volume, 0, 0)?;
    let fs = Arc::new(FileSystem::mount(
        Arc::new(volume),
        MountOptions {
            durability,
            ..Default::default()
        },
    )?);
    let _loader = fs.load_in_background();
    let at = dir.join(format!("hscm-{tag}"));
    std::fs::create_dir_all(&at)?;
    let config = hscm_fuse::session_config("hscm-bench", 4, hscm_fuse::Access::default());
    let mut served = hscm_fuse::Fuse::new(fs.clone());
    if !passthrough {
        served = served.without_passthrough();
    }
    if under == Under::HscmReadWritePassthrough {
        served = served.with_passthrough_read_write();
    }
    // By the rings where the kernel's switch is on, as `hscm mount` (auto).
    if under != Under::HscmNoIoUring && hscm_fuse::uring::kernel_switch() == Some(true) {
        served = served.with_io_uring();
    }
    let (stats, rings) = (served.stats(), served.rings());
    let (session, mounted) = hscm_fuse::mount(served, &at, &config)
        .context("mounting hscm (FUSE: /dev/fuse and fusermount3, Debian package fuse3)")?;
    // Its daemon is this process: a signal that ends it must not leave the mount
    // behind, disconnected.
    scratch::unmount_on_signal(&at);
    let serving = rings.clone();
    let session = std::thread::Builder::new()
        .name("hscm-bench-fuse".into())
        .spawn(move || hscm_fuse::uring::serve(session, serving, 4))?;
    Ok(Mounted {
        under,
        at,
        keep: Keep::Hscm(Some((session, mounted))),
        ram: Some(fs),
        stats: Some(stats),
        rings: Some(rings),
    })
}

/// RAM a file system holds for its files, as the machine counts it: the page cache
/// and shmem (`Cached` in /proc/meminfo: tmpfs's pages, hscm's memfds, every
/// cached page of every file system, the loop files' under ext4 and ext3 included)
/// plus this process's own memory (`RssAnon`: hscm's daemon runs in it).
pub fn ram_in_use() -> Result<u64> {
    let field = |text: &str, name: &str| -> Result<u64> {
        text.lines()
            .find_map(|l| {
                l.strip_prefix(name)?
                    .trim()
                    .strip_suffix("kB")?
                    .trim()
                    .parse::<u64>()
                    .ok()
            })
            .map(|kb| kb * 1024)
            .with_context(|| format!("no {name}"))
    };
    let meminfo = std::fs::read_to_string("/proc/meminfo").context("reading /proc/meminfo")?;
    let status =
        std::fs::read_to_string("/proc/self/status").context("reading /proc/self/status")?;
    Ok(field(&meminfo, "Cached:")? + field(&status, "RssAnon:")?)
}

/// Settles the machine's memory before a measurement: what the last file system
/// freed (the kernel frees a passthrough backing file after its last user, not at
/// once) is gone, and the page cache is empty.
pub fn settle_memory() -> Result<()> {
    std::thread::sleep(std::time::Duration::from_secs(1));
    drop_caches()
}

/// Writes dirty pages back and empties the page cache, so that the next point starts
/// cold: a kernel file system then reads from its disk, hscm from its volume's RAM
/// through FUSE, tmpfs from its pages (which are its storage and stay).
pub fn drop_caches() -> Result<()> {
    rustix::fs::sync();
    std::fs::write("/proc/sys/vm/drop_caches", "3").context("dropping the page cache (needs root)")
}

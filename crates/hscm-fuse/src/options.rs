//! How a [`Fuse`] is made and what it asks the kernel for at mount.

use std::sync::Arc;

use hscm_fs::FileSystem;

use crate::dirs::Dirs;
use crate::passthrough::Opens;
use crate::{Fuse, FuseStats};

impl Fuse {
    /// Serves `fs`, with the kernel's writeback cache when its mode is OnFlush.
    pub fn new(fs: Arc<FileSystem>) -> Fuse {
        let writeback_cache = fs.durability() != hscm_fs::Durability::Immediate;
        let rings = crate::uring::RingState::default();
        rings
            .immediate
            .store(!writeback_cache, std::sync::atomic::Ordering::Relaxed);
        Fuse {
            fs,
            writeback_cache,
            kills_setid: false,
            notifier: Arc::default(),
            dirs: Dirs::default(),
            passthrough_wanted: true,
            passthrough_read_write: false,
            opens: Opens::default(),
            syncer: Default::default(),
            stats: Arc::default(),
            rings: Arc::new(rings),
        }
    }

    /// Asks the kernel at mount for FUSE over io_uring (see [`crate::uring`]); a
    /// kernel whose switch is off serves by /dev/fuse, as without this.
    pub fn with_io_uring(self) -> Fuse {
        self.rings
            .wanted
            .store(true, std::sync::atomic::Ordering::Relaxed);
        self
    }

    /// What the mount asked of FUSE over io_uring, was granted and carried: for
    /// [`crate::uring::Rings`] and the mount's status.
    pub fn rings(&self) -> Arc<crate::uring::RingState> {
        self.rings.clone()
    }

    /// The requests served, counted and timed (for the mount's metrics).
    pub fn stats(&self) -> Arc<FuseStats> {
        self.stats.clone()
    }

    /// Serves every open through the page cache, as FUSE did before passthrough
    /// (Linux 6.9): reads of files in RAM then cost a round trip to the daemon.
    pub fn without_passthrough(mut self) -> Fuse {
        self.passthrough_wanted = false;
        self
    }

    /// Serves read-write opens by passthrough too (while no cached open of the file
    /// is left): their reads and writes then never reach the daemon, but a shared
    /// mapping made through one maps the file's RAM itself, and msync(MS_SYNC) of it
    /// never reaches the file system: what a program wrote through such a mapping
    /// goes home at the next fsync of any file, the file's last close, or unmount,
    /// not at msync. By default read-write opens go through the page cache and
    /// the daemon, and msync is durable on return.
    pub fn with_passthrough_read_write(mut self) -> Fuse {
        self.passthrough_read_write = true;
        self
    }

    /// True while the kernel serves read-only opens of files in RAM by passthrough:
    /// set once the kernel agreed at mount, cleared if it later refuses a backing
    /// file.
    pub fn passthrough_flag(&self) -> Arc<std::sync::atomic::AtomicBool> {
        self.opens.flag()
    }

    /// Every write(2) reaches the file system before it returns, in OnFlush mode too
    /// (a full file system then answers the write itself with ENOSPC, not a later
    /// fsync or close).
    pub fn without_writeback_cache(mut self) -> Fuse {
        self.writeback_cache = false;
        self
    }

    /// Whether the kernel's writeback cache is asked for at mount.
    /// (The kernel takes FUSE passthrough or the writeback cache, not both
    /// (`fs/fuse/inode.c`, `process_init_reply`): with passthrough asked for, the
    /// cache is asked for only if the kernel refuses passthrough.)
    pub fn writeback_cache(&self) -> bool {
        self.writeback_cache && !self.passthrough_wanted
    }

    /// Whether FUSE passthrough is asked for at mount.
    pub fn passthrough_wanted(&self) -> bool {
        self.passthrough_wanted
    }

    /// How this mount keeps and serves data, in a few words for its log.
    pub fn mode(&self) -> &'static str {
        use hscm_fs::Durability::Immediate;
        match (
            self.fs.read_only().is_some(),
            self.fs.durability(),
            self.writeback_cache(),
            self.passthrough_wanted,
        ) {
            (true, _, _, true) => "read-only, FUSE passthrough from RAM",
            (true, _, _, false) => "read-only",
            (false, Immediate, _, true) => "immediate, FUSE passthrough reads from RAM",
            (false, Immediate, _, false) => "immediate",
            (false, _, _, true) => {
                "on-flush, FUSE passthrough: reads and writes in RAM, home at fsync"
            }
            (false, _, true, false) => "on-flush, kernel writeback cache",
            (false, _, false, false) => "on-flush, writes through",
        }
    }
}

impl Fuse {
    /// What the mount asks of the kernel at FUSE_INIT, and what it got.
    pub(crate) fn negotiate(&mut self, config: &mut fuser::KernelConfig) {
        // Ask for 1 MiB writes; an older kernel keeps its own limit.
        let _ = config.set_max_write(crate::MAX_WRITE);
        self.kills_setid = config
            .add_capabilities(fuser::InitFlags::FUSE_HANDLE_KILLPRIV_V2)
            .is_ok();
        // Readdirplus where a listing is followed by stats (`ls -l`, `find`), the
        // kernel's choice; lookups and creates in one directory at once; symlink
        // targets in the page cache (a symlink never changes).
        for wanted in [
            fuser::InitFlags::FUSE_DO_READDIRPLUS,
            fuser::InitFlags::FUSE_READDIRPLUS_AUTO,
            fuser::InitFlags::FUSE_PARALLEL_DIROPS,
            fuser::InitFlags::FUSE_CACHE_SYMLINKS,
        ] {
            if let Err(missing) = config.add_capabilities(wanted) {
                tracing::info!("the kernel does not offer {missing:?}");
            }
        }
        if self.rings.wanted.load(std::sync::atomic::Ordering::Relaxed) {
            match config.add_capabilities(fuser::InitFlags::FUSE_OVER_IO_URING) {
                Ok(()) => self.rings.granted.store(true, std::sync::atomic::Ordering::Relaxed),
                Err(_) => tracing::info!(
                    "the kernel does not offer FUSE over io_uring ({} was off at mount): requests go by /dev/fuse",
                    crate::uring::KERNEL_SWITCH
                ),
            }
        }
        if !self.passthrough_wanted {
            tracing::info!("FUSE passthrough off: every read goes through the daemon");
        } else {
            // Depth 1: the backing files (memfds) sit on no stacked file system, and
            // this mount can still be stacked under one.
            match config.add_capabilities(fuser::InitFlags::FUSE_PASSTHROUGH) {
                Ok(()) if config.set_max_stack_depth(1).is_ok() => {
                    tracing::info!("FUSE passthrough on: the kernel reads and writes files in RAM directly");
                    self.opens.enable(true)
                }
                _ => tracing::warn!(
                    "the kernel offers no FUSE passthrough (Linux 6.9 and later have it): files are read through the daemon"
                ),
            }
        }
        if self.writeback_cache && !self.opens.enabled() {
            if let Err(missing) = config.add_capabilities(fuser::InitFlags::FUSE_WRITEBACK_CACHE) {
                tracing::warn!("the kernel has no writeback cache for FUSE ({missing:?}): every write goes through");
                self.writeback_cache = false;
            }
        } else {
            self.writeback_cache = false;
        }
    }
}

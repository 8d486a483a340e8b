//! Opening a volume of any kind, and closing it cleanly.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use hscm_block::{BlockTarget, Counted};
use hscm_fs::{FileSystem, MountOptions, RamOptions};
use hscm_policy::cache::PolicySpec;
use hscm_tier::TieredVolume;
use hscm_volume::{Durability, Volume};

use crate::lifecycle::StatsSaver;
use crate::{detect, Error, Kind, Result};

/// How often a front-end saves a served tiered volume's counters, so `hscm volume
/// stats` run beside it is at most this old.
pub const SERVED_STATS_EVERY: Duration = Duration::from_secs(2);

/// How a volume opens as a block target.
#[derive(Debug, Clone, Default)]
pub struct TargetOptions {
    /// Refuse writes (a flat volume only; a tiered volume opens read-write).
    pub read_only: bool,
    /// Override the durability recorded in a flat volume's header.
    pub durability: Option<Durability>,
    /// A flat volume in write-back: the most dirty bytes before writers wait.
    pub dirty_max: Option<u64>,
    /// A tiered volume: save its counters this often while it is open.
    pub save_stats_every: Option<Duration>,
}

/// How a volume's file system mounts.
#[derive(Debug, Clone)]
pub struct FilesOptions {
    pub read_only: bool,
    /// Override the durability recorded in the volume's header: immediate keeps every
    /// change durable on return; on-flush (and write-back) until fsync.
    pub durability: Option<Durability>,
    /// At most this many bytes of file data in RAM. None: the budget the volume
    /// records, else every file as long as this machine has the memory.
    pub ram: Option<u64>,
    /// The policy that chooses resident files under a budget.
    pub ram_policy: PolicySpec,
    /// On-flush: what closed files may leave in RAM for the next fsync
    /// ([`hscm_fs::MountOptions::dirty_max`]).
    pub dirty_max: u64,
}

impl Default for FilesOptions {
    fn default() -> Self {
        FilesOptions {
            read_only: false,
            durability: None,
            ram: None,
            ram_policy: RamOptions::default().policy,
            dirty_max: hscm_fs::DEFAULT_DIRTY_MAX,
        }
    }
}

/// The engine behind an opened volume (cloning shares it: a server's status probe
/// holds a clone, dropped before the close).
#[derive(Clone)]
pub enum Engine {
    Flat(Arc<Volume>),
    Tiered(Arc<TieredVolume>),
    /// A mounted file system and the volume under it.
    Files {
        fs: Arc<FileSystem>,
        volume: Arc<Volume>,
    },
}

/// An opened volume: its engine, holding the owner lock until [`Opened::close`].
pub struct Opened {
    path: PathBuf,
    kind: Kind,
    engine: Engine,
    read_only: bool,
    saver: Option<StatsSaver>,
    loader: Option<JoinHandle<()>>,
}

/// Opens the volume at `path` as a block target, whatever its kind: a volume with a
/// file system opens as the blocks under it.
pub fn open_target(path: &Path, opts: &TargetOptions) -> Result<Opened> {
    let kind = detect(path)?;
    let engine = match kind {
        Kind::Tiered => {
            let unsupported = |what| Error::Unsupported {
                path: path.to_path_buf(),
                kind,
                what,
            };
            if opts.read_only {
                return Err(unsupported("read-only access"));
            }
            if opts.durability.is_some() {
                return Err(unsupported("a durability other than its own"));
            }
            Engine::Tiered(Arc::new(TieredVolume::open(path)?))
        }
        Kind::Flat | Kind::FileSystem => {
            // The volume serves from the moment it opens: reads of chunks not yet
            // warm go to the device and move those chunks forward in the loader.
            Engine::Flat(Arc::new(Volume::open(
                path,
                &hscm_volume::OpenOptions {
                    read_only: opts.read_only,
                    durability: opts.durability,
                    dirty_max: opts.dirty_max,
                    ..Default::default()
                },
            )?))
        }
    };
    let saver = match (&engine, opts.save_stats_every) {
        (Engine::Tiered(volume), Some(every)) => Some(StatsSaver::start(volume.clone(), every)),
        _ => None,
    };
    Ok(Opened {
        path: path.to_path_buf(),
        kind,
        engine,
        read_only: opts.read_only,
        saver,
        loader: None,
    })
}

/// Refuses, by its header and before anything opens, a volume that holds no file
/// system: the one check a mount makes, in the process that mounts or before it
/// starts one.
pub fn require_files(path: &Path) -> Result<()> {
    match detect(path)? {
        Kind::FileSystem => Ok(()),
        found => Err(Error::WrongKind {
            path: path.to_path_buf(),
            found,
            lacks: "holds no file system",
        }),
    }
}

/// Mounts the file system of the volume at `path` (a volume made with `--fs`).
pub fn open_files(path: &Path, opts: &FilesOptions) -> Result<Opened> {
    require_files(path)?;
    // The file system decides when the device syncs; the volume only writes through.
    // It keeps no RAM copy: the file system keeps each file's bytes in RAM itself.
    let volume = Volume::open(
        path,
        &hscm_volume::OpenOptions {
            durability: Some(Durability::OnFlush),
            read_only: opts.read_only,
            ram_copy: false,
            ..Default::default()
        },
    )?;
    let durability = opts.durability.unwrap_or(volume.header().durability);
    let volume = Arc::new(volume);
    let mount_with = |budget: Option<u64>| {
        FileSystem::mount(
            volume.clone(),
            MountOptions {
                durability,
                read_only: opts.read_only,
                ram: RamOptions {
                    budget,
                    policy: opts.ram_policy,
                    ..RamOptions::default()
                },
                dirty_max: opts.dirty_max,
            },
        )
    };
    let mut fs = mount_with(opts.ram)?;
    if opts.ram.is_none() {
        // The budget the volume records, else every file, as long as this machine
        // has the memory.
        let free = hscm_volume::memory_available_for_volumes().unwrap_or(u64::MAX);
        let budget = fs
            .recorded_ram_budget()
            .or_else(|| (volume.size() > free).then_some(free));
        if budget.is_some() {
            drop(fs);
            fs = mount_with(budget)?;
        }
    }
    Ok(Opened {
        path: path.to_path_buf(),
        kind: Kind::FileSystem,
        engine: Engine::Files {
            fs: Arc::new(fs),
            volume,
        },
        read_only: opts.read_only,
        saver: None,
        loader: None,
    })
}

/// Opens the volume at `path` by its kind's natural face: a file system mounted, any
/// other volume as a block target (Python's `hscm.open`).
pub fn open(path: &Path, read_only: bool) -> Result<Opened> {
    match detect(path)? {
        Kind::FileSystem => open_files(
            path,
            &FilesOptions {
                read_only,
                ..Default::default()
            },
        ),
        _ => open_target(
            path,
            &TargetOptions {
                read_only,
                ..Default::default()
            },
        ),
    }
}

impl std::fmt::Debug for Opened {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Opened")
            .field("path", &self.path)
            .field("kind", &self.kind)
            .field("read_only", &self.read_only)
            .finish_non_exhaustive()
    }
}

impl Opened {
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The kind its header says (a file-system volume opened as a target says so too).
    pub fn kind(&self) -> Kind {
        self.kind
    }

    pub fn engine(&self) -> &Engine {
        &self.engine
    }

    /// Whether it was opened read-only (a file system may also have become read-only
    /// on its own: [`FileSystem::read_only`]).
    pub fn read_only(&self) -> bool {
        self.read_only
    }

    /// The block target: the flat or tiered volume, or the volume under a file system.
    pub fn target(&self) -> Arc<dyn BlockTarget> {
        match &self.engine {
            Engine::Flat(v) | Engine::Files { volume: v, .. } => v.clone(),
            Engine::Tiered(t) => t.clone(),
        }
    }

    /// [`Opened::target`] with its operations counted, as a front-end serves it (the
    /// counts are what its status probe reports).
    pub fn counted_target(&self) -> Arc<Counted<Arc<dyn BlockTarget>>> {
        Arc::new(Counted::new(self.target()))
    }

    /// Bytes the target holds.
    pub fn size(&self) -> u64 {
        match &self.engine {
            Engine::Flat(v) | Engine::Files { volume: v, .. } => v.size(),
            Engine::Tiered(t) => t.size(),
        }
    }

    /// A mounted file system: starts loading its files into RAM in the background
    /// (it serves at once; reads of what is not loaded yet go to the device).
    pub fn load_in_background(&mut self) {
        if let Engine::Files { fs, .. } = &self.engine {
            if self.loader.is_none() {
                self.loader = fs.load_in_background();
            }
        }
    }

    /// The engine, for a caller that manages its life itself (Python's objects, which
    /// close it when asked): the stats saver and the file loader stop here.
    pub fn into_engine(mut self) -> Engine {
        drop(self.saver.take());
        if let Engine::Files { fs, .. } = &self.engine {
            fs.stop_loading();
        }
        if let Some(loader) = self.loader.take() {
            let _ = loader.join();
        }
        self.engine
    }

    /// Closes the volume: stops the helpers, makes durable what is owed (a flat
    /// volume's flush, a file system's commit), and closes the engine, which releases
    /// the owner lock. Refused while another holder of the engine remains.
    pub fn close(mut self) -> Result<()> {
        // The saver holds the tiered volume: stopped (and joined) first.
        drop(self.saver.take());
        let in_use = |holder| Error::InUse {
            path: self.path.clone(),
            holder,
        };
        match self.engine {
            Engine::Flat(volume) => {
                let volume = Arc::try_unwrap(volume).map_err(|_| in_use("a server"))?;
                if !self.read_only {
                    BlockTarget::flush(&volume)?;
                }
                volume.close()?;
            }
            Engine::Tiered(volume) => {
                let volume = Arc::try_unwrap(volume).map_err(|_| in_use("a server"))?;
                volume.close()?;
            }
            Engine::Files { fs, volume } => {
                fs.stop_loading();
                if let Some(loader) = self.loader.take() {
                    let _ = loader.join();
                }
                fs.sync_all()?;
                drop(Arc::try_unwrap(fs).map_err(|_| in_use("a file-system session"))?);
                let volume = Arc::try_unwrap(volume).map_err(|_| in_use("the file system"))?;
                volume.close()?;
            }
        }
        Ok(())
    }
}

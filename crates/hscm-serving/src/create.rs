//! Making a volume of any kind: the one path `hscm volume create` and Python take, so
//! a flat volume, a file-system volume and a tiered volume are made, checked against
//! this machine's memory and described the same way whoever asks.

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use hscm_durable::units::human_bytes;
use hscm_durable::Durability;
use hscm_tier::{TierConfig, TieredVolume};
use hscm_volume::{CreateOptions, Header, OpenOptions, Volume};

use crate::{Error, Result};

/// What the new volume is.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub enum Layout {
    /// A flat volume: all of it in RAM once open, `chunk_size` the unit of warm-up,
    /// `journal_size` its write-ahead journal (0: writes go straight home).
    Flat { chunk_size: u32, journal_size: u64 },
    /// A flat volume formatted with hscm's file system (its root owned by `owner`,
    /// uid and gid). `ram_budget`, when given, is recorded as the most file data its
    /// mounts keep in RAM, so the volume need not fit in memory.
    FileSystem {
        chunk_size: u32,
        journal_size: u64,
        owner: (u32, u32),
        ram_budget: Option<u64>,
    },
    /// A tiered volume; with `fast_path`, its durable fast tier on that file or
    /// device (`config.fast` must describe it).
    Tiered {
        config: TierConfig,
        fast_path: Option<PathBuf>,
    },
}

/// How to make a volume of `size` bytes.
#[derive(Debug, Clone)]
pub struct CreateSpec {
    pub size: u64,
    pub durability: Durability,
    pub layout: Layout,
    /// Replace an existing file (never one another process holds).
    pub overwrite: bool,
    /// Make a flat volume even though this machine's memory cannot hold it (for
    /// another machine).
    pub larger_than_ram: bool,
    /// Mirror the volume's home onto NBD exports on other machines (docs/mirror.md).
    pub mirror: Option<MirrorSpec>,
}

/// A mirrored home: the local file at the volume's path and these remote members.
#[derive(Debug, Clone, Default)]
pub struct MirrorSpec {
    /// The remote members, NBD URIs (one to four).
    pub members: Vec<String>,
    /// Members that must be in sync to acknowledge a write; 0: a majority.
    pub quorum: u8,
    pub on_no_quorum: hscm_durable::mirror::OnNoQuorum,
}

impl MirrorSpec {
    fn options(&self, overwrite: bool) -> hscm_durable::mirror::MirrorOptions {
        hscm_durable::mirror::MirrorOptions {
            quorum: self.quorum,
            on_no_quorum: self.on_no_quorum,
            overwrite,
        }
    }
}

/// What was made, as `hscm volume create` reports it (its `Display`).
#[derive(Debug, Clone)]
#[non_exhaustive]
pub enum Created {
    Flat {
        path: PathBuf,
        header: Header,
    },
    FileSystem {
        path: PathBuf,
        header: Header,
        geometry: hscm_fs::Geometry,
        ram_budget: Option<u64>,
    },
    Tiered {
        path: PathBuf,
        config: TierConfig,
        fast_path: Option<PathBuf>,
    },
}

/// Makes the volume `spec` describes at `path`.
pub fn create(path: &Path, spec: &CreateSpec) -> Result<Created> {
    let flat = |chunk_size, journal_size| {
        let opts = CreateOptions {
            chunk_size,
            durability: spec.durability,
            overwrite: spec.overwrite,
            journal_size,
        };
        let Some(m) = &spec.mirror else {
            return Volume::create(path, spec.size, &opts).map_err(Error::from);
        };
        // Refused before any member is touched, as a plain create does.
        opts.validate(spec.size, &path.display().to_string())?;
        let home = hscm_durable::mirror::create(
            path,
            opts.backing_len(spec.size),
            &m.members,
            &m.options(spec.overwrite),
        )
        .map_err(hscm_volume::Error::from)?;
        Volume::format(&home, spec.size, &opts).map_err(Error::from)
    };
    match &spec.layout {
        Layout::Flat {
            chunk_size,
            journal_size,
        } => {
            if !spec.larger_than_ram {
                fits_in_memory(path, spec.size)?;
            }
            let header = flat(*chunk_size, *journal_size)?;
            Ok(Created::Flat {
                path: path.to_path_buf(),
                header,
            })
        }
        // A file system keeps in RAM what its files hold (at most its budget), not
        // the volume's size.
        Layout::FileSystem {
            chunk_size,
            journal_size,
            owner,
            ram_budget,
        } => {
            let header = flat(*chunk_size, *journal_size)?;
            let geometry = format_fs(path, *owner, *ram_budget)?;
            Ok(Created::FileSystem {
                path: path.to_path_buf(),
                header,
                geometry,
                ram_budget: *ram_budget,
            })
        }
        Layout::Tiered { config, fast_path }
            if spec.mirror.is_some() && (config.fast.is_some() || fast_path.is_some()) =>
        {
            Err(Error::Invalid {
                path: path.to_path_buf(),
                why: "a tiered volume with a fast tier cannot be mirrored: the fast tier acknowledges \
                      writes on this machine alone before they reach home; mirror one without it \
                      (docs/mirror.md)"
                    .into(),
            })
        }
        Layout::Tiered { config, fast_path } => {
            let config = TierConfig {
                size: spec.size,
                durability: spec.durability,
                ..*config
            };
            config.validate()?;
            if config.ram > config.size {
                return Err(Error::Invalid {
                    path: path.to_path_buf(),
                    why: format!(
                        "its DRAM tier ({}) is larger than the volume ({}); a volume wholly in RAM is a flat one",
                        human_bytes(config.ram),
                        human_bytes(config.size)
                    ),
                });
            }
            fits_in_memory(path, config.ram)?;
            match fast_path {
                Some(fast) if config.fast.is_some() => {
                    TieredVolume::create_with_fast(path, &config, fast, spec.overwrite)?
                }
                Some(_) => {
                    return Err(Error::Invalid {
                        path: path.to_path_buf(),
                        why: "a fast tier's file is given without its size".into(),
                    })
                }
                None => match &spec.mirror {
                    Some(m) => {
                        config.validate()?;
                        let home = hscm_durable::mirror::create(
                            path,
                            config.home_len(),
                            &m.members,
                            &m.options(spec.overwrite),
                        )
                        .map_err(hscm_volume::Error::from)?;
                        TieredVolume::format(&home, &config)?;
                    }
                    None => TieredVolume::create(path, &config, spec.overwrite)?,
                },
            }
            Ok(Created::Tiered {
                path: path.to_path_buf(),
                config,
                fast_path: fast_path.clone().filter(|_| config.fast.is_some()),
            })
        }
    }
}

fn fits_in_memory(path: &Path, bytes: u64) -> Result<()> {
    hscm_volume::check_fits_in_memory(&path.display().to_string(), bytes).map_err(|source| {
        Error::WouldNotOpenHere {
            path: path.to_path_buf(),
            source,
        }
    })
}

/// Writes an empty file system over the flat volume at `path`, and its RAM budget.
fn format_fs(
    path: &Path,
    (uid, gid): (u32, u32),
    budget: Option<u64>,
) -> Result<hscm_fs::Geometry> {
    // Home only: the file system keeps its files in RAM itself, by use.
    let volume = Arc::new(Volume::open(
        path,
        &OpenOptions {
            durability: Some(Durability::OnFlush),
            ram_copy: false,
            ..OpenOptions::default()
        },
    )?);
    let geometry = hscm_fs::FileSystem::format(&volume, uid, gid)?;
    if let Some(budget) = budget {
        let fs = hscm_fs::FileSystem::mount(volume.clone(), hscm_fs::MountOptions::default())?;
        fs.set_ram_budget(budget)?;
        fs.sync_all()?;
    }
    let volume = Arc::try_unwrap(volume).map_err(|_| Error::InUse {
        path: path.to_path_buf(),
        holder: "the file system just formatted",
    })?;
    volume.close()?;
    Ok(geometry)
}

/// A flat volume's journal as people read it.
pub(crate) fn journal_text(journal_len: u64) -> String {
    if journal_len == 0 {
        "none (writes go straight home)".into()
    } else {
        human_bytes(journal_len)
    }
}

/// A cache policy as people name it: the eviction, then its admission filter.
pub(crate) fn policy_text(
    eviction: hscm_policy::cache::EvictionName,
    admission: Option<hscm_policy::cache::AdmissionName>,
) -> String {
    match admission {
        Some(a) => format!("{} + {}", eviction.name(), a.name()),
        None => eviction.name().to_string(),
    }
}

pub(crate) fn cutoff_text(cutoff: u64) -> String {
    if cutoff == 0 {
        "off".into()
    } else {
        human_bytes(cutoff)
    }
}

fn flat_line(f: &mut fmt::Formatter<'_>, path: &Path, h: &Header) -> fmt::Result {
    write!(
        f,
        "created {}: {} volume, {} chunks of {}, durability {}, journal {}, uuid {}",
        path.display(),
        human_bytes(h.volume_size),
        h.chunk_count(),
        human_bytes(u64::from(h.chunk_size)),
        h.durability,
        journal_text(h.journal_len),
        h.uuid_string()
    )
}

impl fmt::Display for Created {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Created::Flat { path, header } => flat_line(f, path, header),
            Created::FileSystem {
                path,
                header,
                geometry: g,
                ram_budget,
            } => {
                flat_line(f, path, header)?;
                write!(
                    f,
                    "\nformatted {} with hscm's file system: {} of data blocks, a {} log, two {} checkpoint slots",
                    path.display(),
                    human_bytes(g.data_blocks() * hscm_fs::BLOCK),
                    human_bytes(g.log_len()),
                    human_bytes(g.checkpoint_len())
                )?;
                if let Some(budget) = ram_budget {
                    write!(
                        f,
                        "\nits mounts keep at most {} of file data in RAM (hscm mount --ram overrides it)",
                        human_bytes(*budget)
                    )?;
                }
                Ok(())
            }
            Created::Tiered {
                path,
                config: c,
                fast_path,
            } => {
                write!(
                    f,
                    "created {}: tiered volume of {}, {} of it in DRAM ({} blocks of {}), {}, sequential cutoff {}, durability {}",
                    path.display(),
                    human_bytes(c.size),
                    human_bytes(c.ram),
                    c.ram_blocks(),
                    human_bytes(u64::from(c.block)),
                    policy_text(c.eviction, c.admission),
                    cutoff_text(c.sequential_cutoff),
                    c.durability.name(),
                )?;
                if let (Some(fast), Some(fc)) = (fast_path, &c.fast) {
                    write!(
                        f,
                        "\nfast tier on {}: {} ({} of device), {}, {}",
                        fast.display(),
                        human_bytes(fc.size),
                        human_bytes(fc.device_len(c.block)),
                        policy_text(fc.eviction, fc.admission),
                        fc.mode.name()
                    )?;
                }
                Ok(())
            }
        }
    }
}

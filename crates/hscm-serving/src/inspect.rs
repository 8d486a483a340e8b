//! Reading what a volume of any kind is, without opening it: `hscm volume info` and
//! `check` (text and JSON) and `hscm volume stats`, one path for every kind.

use std::fmt;
use std::path::{Path, PathBuf};

use hscm_durable::units::human_bytes;
use hscm_tier::snapshot::Snapshot;
use hscm_tier::{TierConfig, TieredVolume};
use hscm_volume::{Inspection, Volume, HEADER_LEN, JOURNAL_OFFSET};
use serde_json::{json, Value};

use crate::create::{cutoff_text, journal_text, policy_text};
use crate::{Error, Kind, Result};

/// A volume's header and geometry, checked against its backing store.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub enum Description {
    /// A flat volume; `file_system` when it holds hscm's file system.
    Flat {
        path: PathBuf,
        found: Inspection,
        file_system: bool,
    },
    /// A tiered volume, its fast tier's file, and the counters it last saved.
    Tiered {
        path: PathBuf,
        config: TierConfig,
        fast_path: Option<PathBuf>,
        saved: Option<Box<Snapshot>>,
    },
}

/// Reads and checks the header of the volume at `path` (any kind); takes no lock, so
/// it works while the volume is served. Every problem is an error naming the path.
pub fn describe(path: &Path) -> Result<Description> {
    // Anything not recognised as tiered gets the flat volume's own diagnosis (bad
    // magic, checksum, geometry).
    let kind = crate::detect(path).ok();
    if kind == Some(Kind::Tiered) {
        let (config, fast_path) = TieredVolume::inspect_with_fast_path(path)?;
        let saved = hscm_tier::snapshot::read_saved(path, &config)
            .ok()
            .flatten()
            .map(Box::new);
        return Ok(Description::Tiered {
            path: path.to_path_buf(),
            config,
            fast_path,
            saved,
        });
    }
    Ok(Description::Flat {
        path: path.to_path_buf(),
        found: Volume::inspect(path)?,
        file_system: kind == Some(Kind::FileSystem),
    })
}

/// The counters the tiered volume at `path` saved (none before its first save).
pub fn saved_counters(path: &Path) -> Result<(TierConfig, Option<Snapshot>)> {
    match crate::detect(path) {
        Ok(Kind::Tiered) => {}
        Ok(_) | Err(Error::NotAVolume { .. }) => {
            return Err(Error::NotTiered {
                path: path.to_path_buf(),
            })
        }
        Err(e) => return Err(e),
    }
    let config = TieredVolume::inspect(path)?;
    let saved = hscm_tier::snapshot::read_saved(path, &config).map_err(|source| Error::Io {
        path: path.to_path_buf(),
        source,
    })?;
    Ok((config, saved))
}

impl Description {
    /// The JSON `hscm volume info --json` and `check --json` print: the fields every
    /// kind has (`path`, `kind`, `volume_size`, `durability`, `ok`), then its own.
    pub fn to_json(&self) -> Value {
        match self {
            Description::Flat {
                path,
                found,
                file_system,
            } => {
                let h = &found.header;
                json!({
                    "path": path.display().to_string(),
                    "kind": "flat",
                    "file_system": file_system,
                    "ok": true,
                    "format_version": h.version,
                    "uuid": h.uuid_string(),
                    "volume_size": h.volume_size,
                    "chunk_size": h.chunk_size,
                    "chunks": h.chunk_count(),
                    "durability": h.durability.name(),
                    "created_unix_s": h.created_unix_s,
                    "backing_len": found.backing_len,
                    "data_offset": h.data_offset(),
                    "journal_len": h.journal_len,
                    "journal_pending_batches": found.pending_batches,
                })
            }
            Description::Tiered {
                path,
                config,
                fast_path,
                saved,
            } => json!({
                "path": path.display().to_string(),
                "kind": "tiered",
                "volume_size": config.size,
                "durability": config.durability.name(),
                "ok": true,
                "tier": config,
                "fast_tier_path": fast_path,
                "stats": saved,
            }),
        }
    }

    /// The one line `hscm volume check` prints when all is well.
    pub fn check_line(&self) -> String {
        match self {
            Description::Flat { path, found, .. } => {
                let h = &found.header;
                format!(
                    "{}: ok (hscm volume v{}, {} in {} chunks, header checksum valid, backing size matches, journal {}{})",
                    path.display(),
                    h.version,
                    human_bytes(h.volume_size),
                    h.chunk_count(),
                    journal_text(h.journal_len),
                    match found.pending_batches {
                        0 => String::new(),
                        n => format!(" with {n} batches to replay"),
                    }
                )
            }
            Description::Tiered { path, config, .. } => format!(
                "{}: ok (tiered volume of {}, {} in DRAM, header checksum valid)",
                path.display(),
                human_bytes(config.size),
                human_bytes(config.ram)
            ),
        }
    }
}

/// `hscm volume info`'s text: one field per line.
impl fmt::Display for Description {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Description::Flat { path, found, .. } => {
                let h = &found.header;
                writeln!(f, "volume        {}", path.display())?;
                writeln!(f, "uuid          {}", h.uuid_string())?;
                writeln!(f, "format        version {}", h.version)?;
                writeln!(
                    f,
                    "size          {} ({} bytes)",
                    human_bytes(h.volume_size),
                    h.volume_size
                )?;
                writeln!(
                    f,
                    "chunks        {} of {}",
                    h.chunk_count(),
                    human_bytes(u64::from(h.chunk_size))
                )?;
                writeln!(f, "durability    {}", h.durability)?;
                writeln!(f, "journal       {}", journal_text(h.journal_len))?;
                let layout = if h.version == 1 {
                    format!("header {HEADER_LEN} + data")
                } else {
                    format!(
                        "header and checkpoint slots {JOURNAL_OFFSET} + journal {} + data",
                        h.journal_len
                    )
                };
                write!(f, "backing       {} bytes ({layout})", found.backing_len)?;
                if found.pending_batches > 0 {
                    write!(
                        f,
                        "\nreplay        {} journal batches left by a crash; the next writable open replays them",
                        found.pending_batches
                    )?;
                }
                Ok(())
            }
            Description::Tiered {
                path,
                config: c,
                fast_path,
                saved,
            } => {
                writeln!(f, "{}: tiered volume", path.display())?;
                writeln!(f, "size          {}", human_bytes(c.size))?;
                writeln!(
                    f,
                    "DRAM tier     {} ({} blocks of {})",
                    human_bytes(c.ram),
                    c.ram_blocks(),
                    human_bytes(u64::from(c.block))
                )?;
                writeln!(f, "policy        {}", policy_text(c.eviction, c.admission))?;
                writeln!(f, "seq. cutoff   {}", cutoff_text(c.sequential_cutoff))?;
                write!(f, "durability    {}", c.durability.name())?;
                if let Some(fc) = &c.fast {
                    write!(
                        f,
                        "\nfast tier     {} on {} ({}), {}",
                        human_bytes(fc.size),
                        fast_path
                            .as_ref()
                            .map_or("?".into(), |p| p.display().to_string()),
                        policy_text(fc.eviction, fc.admission),
                        fc.mode.name()
                    )?;
                }
                if let Some(s) = saved {
                    write!(f, "\n{s}")?;
                }
                Ok(())
            }
        }
    }
}

/// What a front-end says about a volume it serves: its size and how writes are kept.
impl crate::Opened {
    pub fn describe(&self) -> String {
        match self.engine() {
            crate::Engine::Flat(v) | crate::Engine::Files { volume: v, .. } => format!(
                "{}, {}",
                human_bytes(v.size()),
                match v.writeback_stats() {
                    Some(wb) => format!("write-back, at most {} dirty", human_bytes(wb.dirty_max)),
                    None => v.durability().name().to_string(),
                }
            ),
            crate::Engine::Tiered(t) => format!(
                "tiered, {}, {} in DRAM, {}",
                human_bytes(t.size()),
                human_bytes(t.config().ram),
                t.config().durability.name()
            ),
        }
    }
}

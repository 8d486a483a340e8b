//! `hscm volume …`: create, inspect, check and warm volumes.

use std::io::IsTerminal;
use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use std::path::PathBuf;

use anyhow::{Context, Result};
use clap::Subcommand;
use hscm_volume::{
    CreateOptions, Durability, Header, Inspection, OpenOptions, Volume, HEADER_LEN, JOURNAL_OFFSET,
};
use serde_json::json;

use hscm_lab::units::{self, human_bytes};
use hscm_lab::vmsim;
use hscm_lab::volume::watch_warmup;

use crate::tier_cmd;

#[derive(Subcommand)]
pub enum VolumeCmd {
    /// Create a volume: a 4 KiB header, two checkpoint slots, a write-ahead journal and
    /// the data area, in a new file (space is reserved up front) or on a block device.
    /// With --ram, a tiered volume instead: larger than RAM, every block on the file
    /// (its home), the hot ones also in that much DRAM, every write durable on home
    /// before it is acknowledged.
    ///
    /// Example: hscm volume create /var/lib/app.hscm --size 4G --chunk 1M
    /// Example: hscm volume create /srv/big.hscm --size 64G --ram 4G --policy s3fifo
    Create {
        /// File to create (or, with --force, a block device to format).
        path: PathBuf,
        /// Data area size (e.g. 512M, 4G); a multiple of 4 KiB.
        #[arg(long, value_parser = units::parse_size, allow_hyphen_values = true)]
        size: u64,
        /// Unit of warm-up and locking after a restart (e.g. 256k, 1M, 4M).
        #[arg(long, default_value = "1M", value_parser = units::parse_size, allow_hyphen_values = true)]
        chunk: u64,
        /// Default durability: `immediate` (a write returns once it survives power
        /// loss) or `on-flush` (block-device semantics: durable after a flush).
        #[arg(long, default_value = "immediate")]
        durability: Durability,
        /// Write-ahead journal size (0: none, every write goes straight home, as the
        /// paper's design). With a journal, concurrent writers share one sequential
        /// write and one sync per batch, and a background checkpoint writes changes
        /// home in large sequential spans. It pays off for random writes when it is
        /// about as large as the data they touch (the hot set); smaller, it costs more
        /// than it saves (docs/design.md). At least 256K. After a crash, opening
        /// replays at most one journal's worth.
        #[arg(long, default_value = "0", value_parser = units::parse_size, allow_hyphen_values = true)]
        journal: u64,
        /// Overwrite an existing file at PATH (never one another process has open).
        #[arg(long)]
        force: bool,
        /// Create it even though it is larger than this machine's memory and swap (for
        /// another machine: the whole volume lives in RAM, so it cannot open here).
        #[arg(long)]
        larger_than_ram: bool,
        /// Format it with hscm's file system, for `hscm mount` (root directory owned by
        /// the caller).
        #[arg(long)]
        fs: bool,
        #[command(flatten)]
        tier: tier_cmd::TierFlags,
    },
    /// A tiered volume's counters, as it saved them: while a server runs it (every few
    /// seconds, `state: open`) and at every clean close (`closed`). Hits, partial hits
    /// and misses per tier and operation, bypasses by reason, promotions, evictions,
    /// occupancy, device reads, writes and syncs; this session's and the volume's
    /// lifetime. Reads the file without opening the volume, so it works while the volume
    /// is served.
    ///
    /// Example: hscm volume stats /srv/big.hscm --json
    Stats {
        /// The tiered volume's file or device.
        path: PathBuf,
        /// Print JSON (a stable contract) instead of text; a failure prints {"ok": false, "error": ...}.
        #[arg(long)]
        json: bool,
    },
    /// Replay a block trace through a tiered volume, reading and writing its blocks
    /// (each write rewrites the block's own bytes, so the data is unchanged), and count
    /// DRAM hits and misses: for the same policy and size they equal what `hscm sim
    /// cache --size RAM --block BLOCK` predicts (with the sequential cutoff off).
    ///
    /// Example: hscm volume replay /srv/big.hscm --trace web.msr.csv --json
    Replay {
        /// The tiered volume (not in use by another process).
        path: PathBuf,
        /// Block trace (plain or zstd), any format `hscm sim cache` reads.
        #[arg(long)]
        trace: PathBuf,
        /// oracle-general, csv, lis, spc, msr or lackey; detected when omitted.
        #[arg(long, value_parser = vmsim::parse_request_format)]
        format: Option<hscm_trace::RequestFormat>,
        /// One JSON object (a stable contract): {"requests", "tiers": [{"tier", "hits",
        /// "misses", …}], …}; a failure prints {"ok": false, "error": ...}.
        #[arg(long)]
        json: bool,
    },
    /// Show a volume's header and geometry; with --load, open it and time the warm-up.
    Info {
        /// The volume's file or block device.
        path: PathBuf,
        /// Open the volume read-only and warm it into RAM, with a progress bar.
        #[arg(long)]
        load: bool,
        /// Print JSON (a stable contract) instead of text; a failure prints {"ok": false, "error": ...}.
        #[arg(long)]
        json: bool,
    },
    /// Validate header (magic, version, checksum) and geometry against the backing
    /// store. Exits non-zero with the reason on any problem.
    Check {
        /// The volume's file or block device.
        path: PathBuf,
        /// Print JSON (a stable contract) instead of text; a failure prints {"ok": false, "error": ...}.
        #[arg(long)]
        json: bool,
    },
}

/// Runs one `hscm volume` command.
pub fn run(cmd: VolumeCmd) -> Result<()> {
    match cmd {
        VolumeCmd::Create {
            path,
            size,
            chunk,
            durability,
            journal,
            force,
            larger_than_ram,
            fs,
            tier,
        } => {
            if let (true, Some(budget)) = (fs, tier.ram) {
                // A flat volume whose file system keeps only `budget` of file data in
                // RAM: it need not fit in memory.
                create(&path, size, chunk, durability, journal, force)?;
                format_fs(&path)?;
                return set_fs_ram_budget(&path, budget);
            }
            if let Some(ram) = tier.ram {
                return tier_cmd::create(&path, size, ram, durability, &tier, force);
            }
            // A file system keeps in RAM what its files hold (`hscm mount --ram`), not
            // the volume's size.
            if !larger_than_ram && !fs {
                hscm_volume::check_fits_in_memory(&path.display().to_string(), size)
                    .context("refusing to create a volume that cannot open on this machine (--larger-than-ram creates it anyway)")?;
            }
            create(&path, size, chunk, durability, journal, force)?;
            if fs {
                format_fs(&path)?;
            }
            Ok(())
        }
        VolumeCmd::Info { path, load, json } => {
            if tier_cmd::is_tiered(&path) {
                let cfg = hscm_tier::TieredVolume::inspect(&path)?;
                return tier_cmd::info(&path, &cfg, json);
            }
            info(&path, json, load)
        }
        VolumeCmd::Check { path, json } => {
            if tier_cmd::is_tiered(&path) {
                return tier_cmd::check(&path, json);
            }
            check(&path, json)
        }
        VolumeCmd::Stats { path, json } => tier_cmd::stats(&path, json),
        VolumeCmd::Replay {
            path,
            trace,
            format,
            json,
        } => tier_cmd::replay(&path, &trace, format, json),
    }
}

pub fn create(
    path: &Path,
    size: u64,
    chunk: u64,
    durability: Durability,
    journal: u64,
    force: bool,
) -> Result<()> {
    let chunk_size = u32::try_from(chunk).context("--chunk must be below 4 GiB")?;
    let header = Volume::create(
        path,
        size,
        &CreateOptions {
            chunk_size,
            durability,
            overwrite: force,
            journal_size: journal,
        },
    )?;
    outln!(
        "created {}: {} volume, {} chunks of {}, durability {}, journal {}, uuid {}",
        path.display(),
        human_bytes(header.volume_size),
        header.chunk_count(),
        human_bytes(u64::from(header.chunk_size)),
        header.durability,
        journal_text(&header),
        header.uuid_string()
    )?;
    Ok(())
}

/// Writes an empty hscm file system over a volume, its root owned by the caller.
pub fn format_fs(path: &Path) -> Result<()> {
    // Home only: the file system keeps its files in RAM itself, by use.
    let volume = Volume::open(
        path,
        &OpenOptions {
            durability: Some(Durability::OnFlush),
            ram_copy: false,
            ..OpenOptions::default()
        },
    )?;
    let uid = rustix::process::getuid().as_raw();
    let gid = rustix::process::getgid().as_raw();
    let g = hscm_fs::FileSystem::format(&volume, uid, gid)
        .with_context(|| format!("formatting {}", path.display()))?;
    volume.close()?;
    outln!(
        "formatted {} with hscm's file system: {} of data blocks, a {} log, two {} checkpoint slots",
        path.display(),
        human_bytes(g.data_blocks() * hscm_fs::BLOCK),
        human_bytes(g.log_len()),
        human_bytes(g.checkpoint_len())
    )?;
    Ok(())
}

/// Records in the file system of the volume at `path` how many bytes of file data
/// its mounts keep in RAM by default (`hscm_fs::RAM_BUDGET_XATTR` on its root).
pub fn set_fs_ram_budget(path: &Path, budget: u64) -> Result<()> {
    let volume = Arc::new(Volume::open(
        path,
        &OpenOptions {
            durability: Some(Durability::OnFlush),
            ram_copy: false,
            ..OpenOptions::default()
        },
    )?);
    let fs = hscm_fs::FileSystem::mount(volume.clone(), hscm_fs::MountOptions::default())
        .with_context(|| format!("mounting the file system of {}", path.display()))?;
    fs.set_ram_budget(budget)
        .with_context(|| format!("recording the RAM budget in {}", path.display()))?;
    fs.sync_all()?;
    drop(fs);
    Arc::try_unwrap(volume)
        .map_err(|_| anyhow::anyhow!("the volume is still in use"))?
        .close()?;
    outln!(
        "its mounts keep at most {} of file data in RAM (hscm mount --ram overrides it)",
        human_bytes(budget)
    )?;
    Ok(())
}

fn journal_text(h: &Header) -> String {
    if h.journal_len == 0 {
        "none (writes go straight home)".into()
    } else {
        human_bytes(h.journal_len)
    }
}

fn header_json(path: &Path, found: &Inspection) -> serde_json::Value {
    let h = &found.header;
    json!({
        "path": path.display().to_string(),
        "kind": "flat",
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

fn print_header(path: &Path, found: &Inspection) -> anyhow::Result<()> {
    let (h, backing_len) = (&found.header, found.backing_len);
    outln!("volume        {}", path.display())?;
    outln!("uuid          {}", h.uuid_string())?;
    outln!("format        version {}", h.version)?;
    outln!(
        "size          {} ({} bytes)",
        human_bytes(h.volume_size),
        h.volume_size
    )?;
    outln!(
        "chunks        {} of {}",
        h.chunk_count(),
        human_bytes(u64::from(h.chunk_size))
    )?;
    outln!("durability    {}", h.durability)?;
    outln!("journal       {}", journal_text(h))?;
    let layout = if h.version == 1 {
        format!("header {HEADER_LEN} + data")
    } else {
        format!(
            "header and checkpoint slots {JOURNAL_OFFSET} + journal {} + data",
            h.journal_len
        )
    };
    outln!("backing       {backing_len} bytes ({layout})")?;
    if found.pending_batches > 0 {
        outln!(
            "replay        {} journal batches left by a crash; the next writable open replays them",
            found.pending_batches
        )?;
    }
    Ok(())
}

/// Header and geometry; with `load`, also opens the volume and warms it, showing progress.
pub fn info(path: &Path, json_out: bool, load: bool) -> Result<()> {
    let found = Volume::inspect(path)?;
    let mut out = header_json(path, &found);
    if !json_out {
        print_header(path, &found)?;
    }
    if load {
        let t0 = Instant::now();
        let vol = Volume::open(
            path,
            &OpenOptions {
                read_only: true,
                ..OpenOptions::default()
            },
        )?;
        let open_ms = t0.elapsed().as_secs_f64() * 1e3;
        let progress = watch_warmup(&vol, !json_out && std::io::stderr().is_terminal())?;
        let secs = t0.elapsed().as_secs_f64();
        let mbps = progress.loaded_bytes as f64 / 1e6 / secs;
        out["load"] = json!({
            "open_ms": open_ms,
            "warm_s": secs,
            "warm_mbps": mbps,
            "direct_io": vol.backend_is_direct(),
            "loaded_chunks": progress.loaded_chunks,
        });
        if !json_out {
            outln!(
                "warm-up       {} in {:.2} s ({:.0} MB/s; open took {:.2} ms; O_DIRECT {})",
                human_bytes(progress.loaded_bytes),
                secs,
                mbps,
                open_ms,
                if vol.backend_is_direct() { "on" } else { "off" }
            )?;
        }
    }
    if json_out {
        outln!("{}", serde_json::to_string_pretty(&out)?)?;
    }
    Ok(())
}

/// Validates header and geometry; any problem is an error (non-zero exit).
pub fn check(path: &Path, json_out: bool) -> Result<()> {
    let found =
        Volume::inspect(path).with_context(|| format!("check of {} failed", path.display()))?;
    let (header, pending) = (&found.header, found.pending_batches);
    if json_out {
        let out = header_json(path, &found);
        outln!("{}", serde_json::to_string_pretty(&out)?)?;
    } else {
        outln!(
            "{}: ok (hscm volume v{}, {} in {} chunks, header checksum valid, backing size matches, journal {}{})",
            path.display(),
            header.version,
            human_bytes(header.volume_size),
            header.chunk_count(),
            journal_text(header),
            if pending > 0 {
                format!(" with {pending} batches to replay")
            } else {
                String::new()
            }
        )?;
    }
    Ok(())
}

//! `hscm volume …`: create, inspect, check and warm volumes.

use std::io::IsTerminal;
use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use anyhow::{Context, Result};
use hscm_volume::{
    CreateOptions, Durability, Header, Inspection, OpenOptions, Volume, HEADER_LEN, JOURNAL_OFFSET,
};
use serde_json::json;

use hscm_lab::units::human_bytes;
use hscm_lab::volume::watch_warmup;

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

//! The FLUSH row of `hscm bench nbd`: a write-back volume holding N dirty MiB, and the
//! time its flush takes (every dirty sector home in sorted runs, then one sync), beside
//! the bound measured in the same run on the same disk: the device's sequential write
//! of N MiB through the volume's own backend (O_DIRECT), plus one sync.
//!
//! The flush is timed on the volume in this process: an NBD FLUSH is one call of it,
//! and its transport costs microseconds against the milliseconds measured here.

use std::path::Path;
use std::time::Instant;

use anyhow::{Context, Result};
use hscm_volume::{
    AlignedBuf, Backend, CreateOptions, Durability, FileBackend, OpenOptions, Volume,
};
use rand::seq::SliceRandom;
use rand::SeedableRng;
use serde::Serialize;

use super::NbdBenchArgs;

/// Field names are the `--json` contract.
#[derive(Debug, Clone, Serialize)]
pub struct FlushRow {
    /// How the dirty bytes were written: `sequential-1m` (1 MiB writes in order) or
    /// `random-4k` (distinct 4 KiB blocks in random order).
    pub pattern: String,
    pub dirty_bytes: u64,
    /// The flush, median of the repetitions.
    pub flush_ms: f64,
    /// The device writing `dirty_bytes` sequentially in 8 MiB requests, and the sync
    /// after it (medians).
    pub device_write_ms: f64,
    pub device_sync_ms: f64,
    /// flush_ms / (device_write_ms + device_sync_ms).
    pub flush_vs_device: f64,
    /// The device writing as many 4 KiB blocks at random places of an export-sized
    /// file, 32 at a time through the volume's backend (io_uring), then one sync: the
    /// bound for dirty data scattered in 4 KiB pieces (median).
    pub device_random_ms: f64,
    /// Device writes the flush made.
    pub home_runs: u64,
}

const REPETITIONS: usize = 3;

/// The dirty amount measured: 64 MiB, or a quarter of a smaller export.
fn dirty_bytes(size: u64) -> u64 {
    (size / 4).min(64 << 20) / 4096 * 4096
}

pub fn bench(dir: &Path, a: &NbdBenchArgs) -> Result<Vec<FlushRow>> {
    let n = dirty_bytes(a.size);
    let mut rows = Vec::new();
    for pattern in ["sequential-1m", "random-4k"] {
        note!(
            "[nbd] FLUSH after {} dirty, {pattern}",
            crate::units::human_bytes(n)
        );
        let (mut flush, mut write, mut sync) = (Vec::new(), Vec::new(), Vec::new());
        let mut random = Vec::new();
        let mut home_runs = 0;
        for rep in 0..REPETITIONS {
            let (f, runs) = timed_flush(dir, a.size, n, pattern, rep as u64)?;
            let (w, s) = device_write(dir, n)?;
            random.push(device_random_write(dir, a.size, n, rep as u64)?);
            flush.push(f);
            write.push(w);
            sync.push(s);
            home_runs = runs;
        }
        let (flush_ms, device_write_ms, device_sync_ms) =
            (median(&mut flush), median(&mut write), median(&mut sync));
        rows.push(FlushRow {
            pattern: pattern.into(),
            dirty_bytes: n,
            flush_ms,
            device_write_ms,
            device_sync_ms,
            flush_vs_device: flush_ms / (device_write_ms + device_sync_ms),
            device_random_ms: median(&mut random),
            home_runs,
        });
    }
    Ok(rows)
}

/// Milliseconds of one flush after `n` dirty bytes written in `pattern`, and the
/// device writes it made.
fn timed_flush(dir: &Path, size: u64, n: u64, pattern: &str, seed: u64) -> Result<(f64, u64)> {
    let path = dir.join("flush.hscm");
    Volume::create(
        &path,
        size,
        &CreateOptions {
            durability: Durability::WriteBack,
            overwrite: true,
            ..CreateOptions::default()
        },
    )?;
    // Room for all of it and more: no background pass starts before the flush.
    let v = Volume::open(
        &path,
        &OpenOptions {
            dirty_max: Some(4 * n),
            ..OpenOptions::default()
        },
    )?;
    v.wait_loaded(None)?;
    if pattern == "random-4k" {
        let mut blocks: Vec<u64> = (0..size / 4096).collect();
        blocks.shuffle(&mut rand::rngs::SmallRng::seed_from_u64(seed));
        let block = vec![0x5au8; 4096];
        for b in blocks.iter().take((n / 4096) as usize) {
            v.write_at(b * 4096, &block)?;
        }
    } else {
        let piece = vec![0xa5u8; 1 << 20];
        let mut at = 0;
        while at < n {
            let len = (n - at).min(piece.len() as u64) as usize;
            v.write_at(at, &piece[..len])?;
            at += len as u64;
        }
    }
    let before = v.writeback_stats().context("a write-back session")?;
    anyhow::ensure!(
        before.dirty_bytes == n && before.passes == 0,
        "the volume should hold {n} dirty bytes and no pass yet: {before:?}"
    );
    let t = Instant::now();
    v.flush()?;
    let ms = t.elapsed().as_secs_f64() * 1e3;
    let runs = v.writeback_stats().map_or(0, |s| s.home_runs);
    v.close()?;
    std::fs::remove_file(&path).with_context(|| format!("removing {}", path.display()))?;
    Ok((ms, runs))
}

/// Milliseconds the device takes to write `n` bytes sequentially (8 MiB requests,
/// O_DIRECT where the file system allows it) and then to sync them.
fn device_write(dir: &Path, n: u64) -> Result<(f64, f64)> {
    let path = dir.join("flush-bound.img");
    let dev = FileBackend::create(&path, n, true)?;
    let mut buf = AlignedBuf::zeroed(8 << 20);
    buf.fill(0x3c);
    let t = Instant::now();
    let mut at = 0;
    while at < n {
        let len = (n - at).min(buf.len() as u64) as usize;
        dev.write_at(at, &buf[..len])
            .with_context(|| format!("writing {}", path.display()))?;
        at += len as u64;
    }
    let write = t.elapsed().as_secs_f64() * 1e3;
    let t = Instant::now();
    dev.sync()
        .with_context(|| format!("syncing {}", path.display()))?;
    let sync = t.elapsed().as_secs_f64() * 1e3;
    drop(dev);
    std::fs::remove_file(&path).with_context(|| format!("removing {}", path.display()))?;
    Ok((write, sync))
}

/// Milliseconds the device takes to write `n` bytes as distinct 4 KiB blocks at random
/// places of a `size`-byte file, 32 at a time, and to sync them.
fn device_random_write(dir: &Path, size: u64, n: u64, seed: u64) -> Result<f64> {
    let path = dir.join("flush-bound-random.img");
    let dev = FileBackend::create(&path, size, true)?;
    let mut blocks: Vec<u64> = (0..size / 4096).collect();
    blocks.shuffle(&mut rand::rngs::SmallRng::seed_from_u64(seed + 100));
    let mut buf = AlignedBuf::zeroed(4096);
    buf.fill(0x6b);
    let writes: Vec<(u64, &[u8])> = blocks
        .iter()
        .take((n / 4096) as usize)
        .map(|b| (b * 4096, &buf[..]))
        .collect();
    let t = Instant::now();
    for batch in writes.chunks(32) {
        dev.write_many(batch)
            .with_context(|| format!("writing {}", path.display()))?;
    }
    dev.sync()
        .with_context(|| format!("syncing {}", path.display()))?;
    let ms = t.elapsed().as_secs_f64() * 1e3;
    drop(dev);
    std::fs::remove_file(&path).with_context(|| format!("removing {}", path.display()))?;
    Ok(ms)
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

pub fn print(rows: &[FlushRow]) -> Result<()> {
    outln!("FLUSH of a write-back volume, beside the device's sequential write of as many bytes plus one sync")?;
    outln!(
        "{:<14} {:>10} {:>10} {:>12} {:>9} {:>9} {:>10} {:>16}",
        "pattern",
        "dirty",
        "flush ms",
        "device ms",
        "sync ms",
        "runs",
        "ratio",
        "random 4K ms"
    )?;
    for r in rows {
        outln!(
            "{:<14} {:>10} {:>10.1} {:>12.1} {:>9.1} {:>9} {:>9.2}x {:>16.1}",
            r.pattern,
            crate::units::human_bytes(r.dirty_bytes),
            r.flush_ms,
            r.device_write_ms,
            r.device_sync_ms,
            r.home_runs,
            r.flush_vs_device,
            r.device_random_ms
        )?;
    }
    Ok(())
}

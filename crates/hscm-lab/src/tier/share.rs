//! The tiered volume at several DRAM shares beside the flat volume and the page cache.

use anyhow::Result;
use hscm_tier::TieredVolume;
use serde::Serialize;

/// One request of the comparison: block, whether to write, the thread's buffer.
type BlockOp<'a> = dyn Fn(u64, bool, &mut [u8]) -> Result<()> + Sync + 'a;

/// One configuration and workload of the DRAM-share comparison.
#[derive(Debug, Clone, Serialize)]
pub struct ShareRow {
    /// `tiered 50%`, `tiered 10%`, `tiered 1%`, `flat` or `pagecache`.
    pub config: String,
    /// `read` (all reads) or `mixed` (70% reads, 30% writes, each durable on return).
    pub workload: String,
    pub ops_per_s: f64,
    /// The tiered volume's DRAM hit ratio over the run (None for the others).
    pub dram_hit_ratio: Option<f64>,
}

/// Runs each configuration for `seconds` per workload, one thread, the same skewed
/// stream of 4 KiB requests (a block drawn as the cube of a uniform number times the
/// block count: a quarter of the requests go to the first 1.6% of the blocks).
pub(super) fn share_rows(dir: &std::path::Path, seconds: f64) -> Result<Vec<ShareRow>> {
    use hscm_tier::{Durability, TierConfig};
    use rand::{Rng, SeedableRng};
    use std::os::unix::fs::FileExt;
    const BLOCK: u64 = 4096;
    let working: u64 = 256 << 20;
    let blocks = working / BLOCK;
    let draws: Vec<(u64, bool)> = {
        let mut rng = rand::rngs::SmallRng::seed_from_u64(11);
        (0..1 << 20)
            .map(|_| {
                let b = (rng.gen::<f64>().powi(3) * blocks as f64) as u64;
                (b.min(blocks - 1), rng.gen_bool(0.3))
            })
            .collect()
    };
    // Runs `op(block, write, buffer)` over the draws for `seconds` on the one driver
    // (one thread; the caller warms up first); operations per second.
    let timed = |op: &BlockOp<'_>, mixed: bool| {
        let (measured, _) = crate::closed_loop(
            vec![(0usize, vec![0u8; BLOCK as usize])],
            1,
            &crate::Phase::timed(std::time::Duration::ZERO, seconds),
            |(at, buf), _| {
                let (b, w) = draws[*at % draws.len()];
                *at += 1;
                op(b, mixed && w, buf)?;
                Ok::<_, anyhow::Error>(crate::Step::Done(0))
            },
        )?;
        Ok::<_, anyhow::Error>(measured.ops_per_s())
    };
    let data = vec![0x5au8; BLOCK as usize];
    let mut rows = Vec::new();
    // The data every configuration starts from, written straight to its file (1 MiB
    // at a time, then synced), so misses read real blocks from the disk.
    let fill = |path: &std::path::Path, at: u64| -> Result<()> {
        let f = std::fs::OpenOptions::new().write(true).open(path)?;
        let chunk: Vec<u8> = (0..1 << 20).map(|i| (i % 251) as u8 | 1).collect();
        let mut off = 0;
        while off < working {
            f.write_all_at(&chunk, at + off)?;
            off += chunk.len() as u64;
        }
        f.sync_all()?;
        Ok(())
    };
    for (name, share) in [("tiered 50%", 2u64), ("tiered 10%", 10), ("tiered 1%", 100)] {
        let path = dir.join(format!("share-{share}.tier"));
        let mut cfg = TierConfig::new(working, blocks / share * BLOCK);
        cfg.durability = Durability::Immediate;
        TieredVolume::create(&path, &cfg, false)?;
        fill(&path, hscm_tier::HEADER_LEN)?;
        let vol = TieredVolume::open(&path)?;
        // Warm DRAM with the read stream first.
        timed(
            &|b, _, buf| {
                vol.read_at(b * BLOCK, buf)?;
                Ok(())
            },
            false,
        )?;
        for (workload, mixed) in [("read", false), ("mixed", true)] {
            let before = vol.stats().tiers[0].clone();
            let ops = timed(
                &|b, w, buf| {
                    if w {
                        vol.write_at(b * BLOCK, &data, hscm_block::WriteFlags::NONE)?;
                    } else {
                        vol.read_at(b * BLOCK, buf)?;
                    }
                    Ok(())
                },
                mixed,
            )?;
            rows.push(ShareRow {
                config: name.into(),
                workload: workload.into(),
                ops_per_s: ops,
                dram_hit_ratio: Some(vol.stats().tiers[0].since(&before).hit_ratio()),
            });
        }
        drop(vol);
        std::fs::remove_file(&path).ok();
    }
    {
        let path = dir.join("share-flat.hscm");
        hscm_volume::Volume::create(&path, working, &hscm_volume::CreateOptions::default())?;
        let vol = hscm_volume::Volume::open(&path, &hscm_volume::OpenOptions::default())?;
        crate::volume::watch_warmup(&vol, false)?;
        let chunk: Vec<u8> = (0..1 << 20).map(|i| (i % 251) as u8 | 1).collect();
        let mut off = 0;
        while off < working {
            vol.write_at_with(off, &chunk, hscm_volume::Durability::OnFlush)?;
            off += chunk.len() as u64;
        }
        vol.flush()?;
        for (workload, mixed) in [("read", false), ("mixed", true)] {
            let ops = timed(
                &|b, w, buf| {
                    if w {
                        vol.write_at(b * BLOCK, &data)?;
                    } else {
                        vol.read_at(b * BLOCK, buf)?;
                    }
                    Ok(())
                },
                mixed,
            )?;
            rows.push(ShareRow {
                config: "flat".into(),
                workload: workload.into(),
                ops_per_s: ops,
                dram_hit_ratio: None,
            });
        }
        vol.close()?;
        std::fs::remove_file(&path).ok();
    }
    {
        let path = dir.join("share-pagecache.bin");
        let f = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .open(&path)?;
        f.set_len(working)?;
        drop(f);
        fill(&path, 0)?;
        let f = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(&path)?;
        for (workload, mixed) in [("read", false), ("mixed", true)] {
            let ops = timed(
                &|b, w, buf| {
                    if w {
                        f.write_all_at(&data, b * BLOCK)?;
                        f.sync_data()?;
                    } else {
                        f.read_exact_at(buf, b * BLOCK)?;
                    }
                    Ok(())
                },
                mixed,
            )?;
            rows.push(ShareRow {
                config: "pagecache".into(),
                workload: workload.into(),
                ops_per_s: ops,
                dram_hit_ratio: None,
            });
        }
        drop(f);
        std::fs::remove_file(&path).ok();
    }
    Ok(rows)
}

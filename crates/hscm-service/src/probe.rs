//! Fills a [`Status`] from each engine: what the engines count, read at the moment of
//! a scrape or a `hscm status`. Engines keep only counters (no metrics backend); this
//! is where they meet the service's vocabulary.

use hscm_fs::FileSystem;
use hscm_tier::TieredVolume;
use hscm_volume::{LoadState, Volume};

use crate::status::{Device, FsSpace, Health, Journal, Load, Mirror, RemoteHome, Status, Tier};

fn load_state_name(s: &LoadState) -> &'static str {
    match s {
        LoadState::Running => "running",
        LoadState::Done => "done",
        LoadState::Failed(_) => "failed",
        LoadState::Stopped => "stopped",
    }
}

fn device(v: &Volume) -> Device {
    let d = v.device_stats();
    Device {
        reads: d.reads,
        read_bytes: d.read_bytes,
        writes: d.writes,
        written_bytes: d.written_bytes,
        syncs: d.syncs,
    }
}

/// Whatever the serving layer opened: the probe of its engine.
pub fn engine(status: &mut Status, engine: &hscm_serving::Engine) {
    match engine {
        hscm_serving::Engine::Flat(v) => flat(status, v),
        hscm_serving::Engine::Tiered(v) => tiered(status, v),
        hscm_serving::Engine::Files { fs: files, volume } => fs(status, files, volume),
    }
}

/// A flat volume served whole (NBD, shared memory).
pub fn flat(status: &mut Status, v: &Volume) {
    status.kind = "flat".into();
    status.size_bytes = v.size();
    status.durability = v.durability().name().into();
    let load = v.load_progress();
    status.load = Load {
        loaded_bytes: load.loaded_bytes,
        total_bytes: v.size(),
        state: load_state_name(&load.state).into(),
    };
    if let Some(wb) = v.writeback_stats() {
        status.dirty_bytes = wb.dirty_bytes;
        status.dirty_max_bytes = Some(wb.dirty_max);
    }
    if v.header().journal_len > 0 {
        let j = v.journal_stats();
        status.journal = Some(Journal {
            size_bytes: j.journal_len,
            in_use_bytes: j.in_use,
            batches: j.batches,
            records: j.records,
            checkpoints: j.checkpoints,
            replayed_batches: j.replayed_batches,
        });
    }
    status.device = device(v);
    status.health = Health::from_failure(v.failure().map(str::to_string).or_else(|| v.home_away()));
    status.home = v.home_health().map(|h| RemoteHome::from_health(&h));
    status.mirror = v.mirror_status().map(|m| Mirror::from_status(&m));
}

/// A tiered volume: DRAM over an optional fast tier over home.
pub fn tiered(status: &mut Status, v: &TieredVolume) {
    let cfg = v.config();
    status.kind = "tiered".into();
    status.size_bytes = v.size();
    status.durability = cfg.durability.name().into();
    let counters = v.stats();
    status.tiers = counters
        .tiers
        .iter()
        .map(|t| Tier {
            tier: t.tier.clone(),
            hits: t.hits,
            misses: t.misses,
            promotions: t.promotions,
            evictions: t.evictions,
            demotions: t.demotions,
            written_back: t.written_back,
            dirty_bytes: t.dirty_bytes,
            occupancy_bytes: t.occupancy_bytes,
            capacity_bytes: t.capacity_bytes,
        })
        .collect();
    status.dirty_bytes = counters.tiers.iter().map(|t| t.dirty_bytes).sum();
    // The tier counts device requests, not their bytes.
    status.device = Device {
        reads: counters.home_reads,
        writes: counters.home_writes,
        syncs: counters.syncs,
        ..Device::default()
    };
    // Nothing to load: DRAM fills as blocks are asked for.
    status.load = Load {
        loaded_bytes: 0,
        total_bytes: 0,
        state: "done".into(),
    };
    let failure = v.failure().map(|f| f.reason).or_else(|| {
        v.fast_failure()
            .map(|f| format!("fast tier out of service: {f}"))
    });
    status.health = Health::from_failure(failure);
    status.home = v.home_health().map(|h| RemoteHome::from_health(&h));
    status.mirror = v.mirror_status().map(|m| Mirror::from_status(&m));
}

/// A mounted file system on its volume (opened home-only: the file system keeps each
/// file's bytes in RAM itself).
pub fn fs(status: &mut Status, fs: &FileSystem, v: &Volume) {
    status.kind = "fs".into();
    let st = fs.statfs();
    let size = st.blocks * st.block_size;
    let free = st.free_blocks * st.block_size;
    status.size_bytes = size;
    status.used_bytes = Some(size.saturating_sub(free));
    status.durability = fs.durability().name().into();
    status.dirty_bytes = fs.waiting_write_back_bytes();
    status.dirty_max_bytes = fs.dirty_max();
    let ram = fs.ram_usage();
    status.fs = Some(FsSpace {
        size_bytes: size,
        free_bytes: free,
        files: st.files,
        free_files: st.free_files,
        ram_bytes: ram.resident_bytes,
        ram_budget_bytes: ram.budget,
    });
    status.load = Load {
        loaded_bytes: ram.resident_bytes,
        total_bytes: ram.resident_bytes,
        state: if ram.loaded_files < ram.resident_files {
            "running"
        } else {
            "done"
        }
        .into(),
    };
    status.device = device(v);
    // A mount read-only by request is healthy; one that failed a write is not.
    let failure = fs
        .failure()
        .or_else(|| v.failure().map(str::to_string))
        .or_else(|| v.home_away());
    status.health = Health::from_failure(failure);
    status.home = v.home_health().map(|h| RemoteHome::from_health(&h));
    status.mirror = v.mirror_status().map(|m| Mirror::from_status(&m));
}

/// A served target's requests, for a snapshot.
pub fn target_ops(status: &mut Status, ops: &[hscm_block::OpSnapshot]) {
    status.ops = ops.iter().map(crate::Op::from_snapshot).collect();
}

//! The fast tier's behaviour around the data path: what comes back after a clean
//! close and after a crash, what a failing fast device does in each write mode, and
//! how a volume is refused without its fast device.

use std::sync::Arc;

use hscm_tier::{Durability, FastConfig, TierConfig, TieredVolume, WriteMode};
use hscm_volume::testing::{stamped_block, stamped_version, FaultyBackend};
use hscm_volume::Backend;

const BLOCK: usize = 4096;
const BLOCKS: u64 = 64;

fn config(mode: WriteMode, fast_blocks: u64) -> TierConfig {
    let mut cfg = TierConfig::new(BLOCKS * BLOCK as u64, 4 * BLOCK as u64);
    cfg.sequential_cutoff = 0;
    let mut fast = FastConfig::new(fast_blocks * BLOCK as u64);
    fast.mode = mode;
    cfg.fast = Some(fast);
    cfg
}

fn devices(cfg: &TierConfig) -> (FaultyBackend, FaultyBackend) {
    let home = FaultyBackend::new(cfg.home_len() as usize, "home");
    let fast = FaultyBackend::new(cfg.fast.unwrap().device_len(cfg.block) as usize, "fast");
    TieredVolume::format_with(&home, Some(&fast), cfg, "fast").unwrap();
    (home, fast)
}

fn open(home: &FaultyBackend, fast: &FaultyBackend) -> TieredVolume {
    TieredVolume::open_with(Arc::new(home.clone()), Some(Arc::new(fast.clone()))).unwrap()
}

fn write(vol: &TieredVolume, b: u64, v: u64) {
    vol.write_at(
        b * BLOCK as u64,
        &stamped_block(b, v, BLOCK),
        hscm_block::WriteFlags::NONE,
    )
    .unwrap();
}

fn version(vol: &TieredVolume, b: u64) -> Option<u64> {
    let mut buf = vec![0u8; BLOCK];
    vol.read_at(b * BLOCK as u64, &mut buf).unwrap();
    stamped_version(b, &buf)
}

/// Blocks 0-19 at version 1, written back; then 0-4 at version 2, dirty.
fn twenty_clean_five_dirty(vol: &TieredVolume) {
    for b in 0..20 {
        write(vol, b, 1);
    }
    vol.write_back_all().unwrap();
    for b in 0..5 {
        write(vol, b, 2);
    }
}

/// What home alone holds for block `b` (past the 4 KiB header).
fn on_home(home: &FaultyBackend, b: u64) -> Option<u64> {
    let mut buf = vec![0u8; BLOCK];
    home.read_at(4096 + b * BLOCK as u64, &mut buf).unwrap();
    stamped_version(b, &buf)
}

#[test]
fn write_back_acknowledges_on_the_fast_tier_and_home_catches_up_in_block_order() {
    let cfg = config(WriteMode::WriteBack, 32);
    let (home, fast) = devices(&cfg);
    let vol = open(&home, &fast);
    for b in [9u64, 3, 4, 5, 20] {
        write(&vol, b, 1);
    }
    assert_eq!(vol.dirty_blocks(), 5);
    assert_eq!(on_home(&home, 3), None, "home has it before any write-back");
    assert_eq!(vol.write_back_all().unwrap(), 5);
    assert_eq!(vol.dirty_blocks(), 0);
    for b in [9u64, 3, 4, 5, 20] {
        assert_eq!(on_home(&home, b), Some(1));
    }
    let s = vol.stats().tiers[1].clone();
    assert_eq!(s.tier, "fast");
    assert_eq!(s.written_back, 5);
    // 3, 4, 5 in one run; 9 and 20 alone.
    assert_eq!(s.writeback_runs, 3);
}

#[test]
fn a_clean_close_brings_the_fast_tier_back_warm_with_its_dirty_blocks() {
    let cfg = config(WriteMode::WriteBack, 32);
    let (home, fast) = devices(&cfg);
    let vol = open(&home, &fast);
    twenty_clean_five_dirty(&vol);
    vol.close().unwrap();
    let vol = open(&home, &fast);
    let r = vol.recovery().unwrap().clone();
    assert!(r.clean_close);
    assert_eq!((r.restored, r.dirty), (20, 5), "{r:?}");
    for b in 0..20 {
        assert_eq!(version(&vol, b), Some(if b < 5 { 2 } else { 1 }));
    }
    let fast_stats = vol.stats().tiers[1].clone();
    // DRAM holds 4 blocks, so most reads went to the fast tier, and found them there.
    assert!(fast_stats.read_hits >= 16, "{fast_stats:?}");
    assert_eq!(fast_stats.read_misses, 0, "{fast_stats:?}");
}

#[test]
fn after_a_crash_only_dirty_blocks_come_back_and_every_acknowledged_write_is_there() {
    let mut cfg = config(WriteMode::WriteBack, 32);
    cfg.durability = Durability::Immediate;
    let (home, fast) = devices(&cfg);
    let vol = open(&home, &fast);
    twenty_clean_five_dirty(&vol);
    let (home, fast) = (home.power_cut(1), fast.power_cut(2));
    drop(vol);
    let vol = open(&home, &fast);
    let r = vol.recovery().unwrap().clone();
    assert!(!r.clean_close);
    assert_eq!((r.restored, r.dirty), (5, 5), "{r:?}");
    for b in 0..20 {
        assert_eq!(version(&vol, b), Some(if b < 5 { 2 } else { 1 }));
    }
}

#[test]
fn a_failing_fast_tier_in_write_through_mode_is_dropped_and_nothing_is_lost() {
    let cfg = config(WriteMode::WriteThrough, 16);
    let (home, fast) = devices(&cfg);
    let vol = open(&home, &fast);
    for b in 0..30 {
        write(&vol, b, 1);
        assert_eq!(version(&vol, b), Some(1));
    }
    fast.fail_write_after(0, libc_eio());
    for b in 0..30 {
        write(&vol, b, 2);
    }
    // Reads that miss DRAM would fill the fast tier: that write fails, and the volume
    // goes on without it.
    for b in 0..30 {
        assert_eq!(version(&vol, b), Some(2));
    }
    let why = vol.fast_failure().expect("the fast tier is out");
    assert!(why.contains("pass-through"), "{why}");
    assert!(vol.failure().is_none(), "writes go on");
    assert_eq!(vol.stats().tiers.len(), 1, "only DRAM serves");
    write(&vol, 7, 3);
    assert_eq!(version(&vol, 7), Some(3));
}

#[test]
fn a_failing_fast_tier_holding_dirty_blocks_makes_the_volume_refuse_writes_naming_them() {
    let cfg = config(WriteMode::WriteBack, 16);
    let (home, fast) = devices(&cfg);
    let vol = open(&home, &fast);
    for b in [11u64, 12] {
        write(&vol, b, 1);
    }
    fast.fail_write_after(0, libc_eio());
    let err = vol
        .write_at(
            40 * BLOCK as u64,
            &stamped_block(40, 1, BLOCK),
            hscm_block::WriteFlags::NONE,
        )
        .unwrap_err()
        .to_string();
    assert!(err.contains("fast"), "{err}");
    let failure = vol.failure().expect("refusing writes").reason;
    assert!(
        failure.contains("2 dirty block(s) (11, 12)") && failure.contains("read-only"),
        "{failure}"
    );
    assert!(vol
        .write_at(0, &stamped_block(0, 1, BLOCK), hscm_block::WriteFlags::NONE)
        .is_err());
    // What the fast tier still answers, and what home holds, reads on.
    assert_eq!(version(&vol, 11), Some(1));
    assert_eq!(version(&vol, 30), None);
}

#[test]
fn a_failing_fast_tier_with_nothing_dirty_in_write_back_mode_goes_pass_through() {
    let cfg = config(WriteMode::WriteBack, 16);
    let (home, fast) = devices(&cfg);
    let vol = open(&home, &fast);
    write(&vol, 5, 1);
    vol.write_back_all().unwrap();
    fast.fail_write_after(0, libc_eio());
    write(&vol, 6, 1);
    assert!(vol.failure().is_none());
    assert!(vol.fast_failure().is_some());
    assert_eq!(
        on_home(&home, 6),
        Some(1),
        "written through once the tier is out"
    );
    assert_eq!(version(&vol, 5), Some(1));
}

#[test]
fn a_write_back_volume_is_not_opened_without_its_fast_device() {
    let cfg = config(WriteMode::WriteBack, 16);
    let (home, _fast) = devices(&cfg);
    let err = TieredVolume::open_with(Arc::new(home.clone()), None)
        .err()
        .expect("refused")
        .to_string();
    assert!(err.contains("only copy"), "{err}");
    // A write-through one opens pass-through instead.
    let cfg = config(WriteMode::WriteThrough, 16);
    let (home, _fast) = devices(&cfg);
    let vol = TieredVolume::open_with(Arc::new(home), None).unwrap();
    write(&vol, 1, 1);
    assert_eq!(version(&vol, 1), Some(1));
}

#[test]
fn a_fast_device_of_another_volume_is_refused_by_name() {
    let cfg = config(WriteMode::WriteBack, 16);
    let (home, _) = devices(&cfg);
    let mut other_cfg = cfg;
    other_cfg.fast = Some(FastConfig {
        id: cfg.fast.unwrap().id ^ 1,
        ..cfg.fast.unwrap()
    });
    let (_, other_fast) = devices(&other_cfg);
    let err = TieredVolume::open_with(Arc::new(home), Some(Arc::new(other_fast)))
        .err()
        .expect("refused")
        .to_string();
    assert!(err.contains("another volume"), "{err}");
}

#[test]
fn files_on_disk_round_trip_through_create_with_fast_and_open() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("big.tier");
    let cfg = config(WriteMode::WriteBack, 16);
    TieredVolume::create_with_fast(&path, &cfg, std::path::Path::new("big.fast"), false).unwrap();
    assert!(
        dir.path().join("big.fast").exists(),
        "relative to home's directory"
    );
    let vol = TieredVolume::open(&path).unwrap();
    write(&vol, 3, 1);
    vol.close().unwrap();
    let vol = TieredVolume::open(&path).unwrap();
    assert_eq!(version(&vol, 3), Some(1));
    assert_eq!(vol.recovery().unwrap().dirty, 1);
    drop(vol);
    std::fs::remove_file(dir.path().join("big.fast")).unwrap();
    let err = TieredVolume::open(&path)
        .err()
        .expect("refused")
        .to_string();
    assert!(
        err.contains("big.fast") && err.contains("only copy"),
        "{err}"
    );
}

fn libc_eio() -> i32 {
    5
}

#[test]
fn each_tier_counts_requests_by_what_their_blocks_found_there() {
    let cfg = config(WriteMode::WriteBack, 32);
    let (home, fast) = devices(&cfg);
    let vol = open(&home, &fast);
    let read = |first: u64, blocks: usize| {
        let mut buf = vec![0u8; blocks * BLOCK];
        vol.read_at(first * BLOCK as u64, &mut buf).unwrap();
    };
    // Ten writes of new blocks: ten fast-tier request misses.
    for b in 0..10 {
        write(&vol, b, 1);
    }
    // Block 11 misses both tiers (and the fast tier admits it).
    read(11, 1);
    // 0-1 and 2-3 miss DRAM (4 blocks: it now holds 0-3) and hit the fast tier.
    read(0, 2);
    read(2, 2);
    // 10 misses both tiers; 11 misses DRAM and hits the fast tier: a partial hit.
    read(10, 2);
    let s = vol.stats();
    let (dram, fast) = (&s.tiers[0], &s.tiers[1]);
    assert_eq!(
        (
            dram.request_hits,
            dram.request_partial_hits,
            dram.request_misses
        ),
        (s.request_hits, s.request_partial_hits, s.request_misses),
        "DRAM's request counts are the volume's"
    );
    assert_eq!(
        (
            fast.request_hits,
            fast.request_partial_hits,
            fast.request_misses
        ),
        (2, 1, 11),
        "{fast:?}"
    );
}

/// After a flush moved the durable watermark, a write that no sync covered is still
/// checked at recovery: whichever parts of it the cut kept (its record without its
/// data, or the reverse), the block reads whole, in its flushed version or the new.
#[test]
fn a_write_after_a_flush_is_checked_at_recovery_whatever_the_cut_kept() {
    let mut cfg = config(WriteMode::WriteBack, 32);
    cfg.durability = Durability::OnFlush;
    let mut torn_seen = 0;
    for seed in 0..200u64 {
        let (home, fast) = devices(&cfg);
        let vol = open(&home, &fast);
        for b in 0..20 {
            write(&vol, b, 1);
        }
        vol.flush().unwrap();
        for b in 0..3 {
            write(&vol, b, 2);
        }
        let (home, fast) = (home.power_cut(seed), fast.power_cut(seed * 7 + 1));
        drop(vol);
        let vol = open(&home, &fast);
        torn_seen += vol.recovery().unwrap().torn;
        for b in 0..3 {
            let v = version(&vol, b);
            assert!(
                v == Some(1) || v == Some(2),
                "seed {seed}: block {b} reads {v:?}"
            );
        }
        for b in 3..20 {
            assert_eq!(version(&vol, b), Some(1), "seed {seed}: block {b}");
        }
    }
    assert!(torn_seen > 0, "no cut kept a record without its data");
}

#[test]
fn a_damaged_fast_tier_header_is_refused_by_name_and_nothing_is_lost() {
    let cfg = config(WriteMode::WriteBack, 16);
    let (home, fast) = devices(&cfg);
    let vol = open(&home, &fast);
    write(&vol, 7, 1);
    vol.close().unwrap();
    let mut header = vec![0u8; 4096];
    fast.read_at(0, &mut header).unwrap();
    let mut damaged = header.clone();
    damaged[20] ^= 0xff;
    fast.write_at(0, &damaged).unwrap();
    let err = TieredVolume::open_with(Arc::new(home.clone()), Some(Arc::new(fast.clone())))
        .err()
        .expect("refused")
        .to_string();
    assert!(
        err.contains("fast tier") && err.contains("checksum"),
        "{err}"
    );
    // Refusing wrote nothing: with the header mended, the dirty block is still there.
    fast.write_at(0, &header).unwrap();
    let vol = open(&home, &fast);
    assert_eq!(version(&vol, 7), Some(1));
}

/// The write-back copies blocks home without the volume's lock: while a pass waits on
/// a slow sync of home, a DRAM hit, a fast-tier hit, a write to a block the pass is
/// writing back and a write elsewhere all finish (with the default durability, so each
/// write syncs). The rewritten block stays dirty at its new version, home keeps the
/// version the pass copied, and after a power cut the new version is what reads see.
#[test]
fn requests_go_on_while_the_write_back_waits_on_home() {
    let cfg = config(WriteMode::WriteBack, 32);
    assert_eq!(cfg.durability, Durability::Immediate);
    let (home, fast) = devices(&cfg);
    let vol = Arc::new(open(&home, &fast));
    for b in 0..8 {
        write(&vol, b, 1);
    }
    // DRAM holds four blocks: the last ones written.
    let hot = *vol.hot_list().first().expect("DRAM holds blocks");
    let cold = (0..8).find(|b| !vol.hot_list().contains(b)).unwrap();
    let home_writes = home.write_count();
    home.set_sync_latency(std::time::Duration::from_millis(800));
    let pass = {
        let vol = vol.clone();
        std::thread::spawn(move || vol.write_back_all())
    };
    // The eight blocks go home in one run; then the pass syncs home.
    let waited = std::time::Instant::now();
    while home.write_count() == home_writes {
        assert!(waited.elapsed().as_secs() < 10, "the pass never wrote home");
        std::thread::yield_now();
    }
    assert_eq!(version(&vol, hot), Some(1), "a DRAM hit");
    assert_eq!(version(&vol, cold), Some(1), "a fast-tier hit");
    write(&vol, 3, 2);
    write(&vol, 20, 1);
    assert!(
        !pass.is_finished(),
        "the requests waited for the write-back's sync of home"
    );
    assert_eq!(
        pass.join().unwrap().unwrap(),
        7,
        "block 3 changed meanwhile"
    );
    home.set_sync_latency(std::time::Duration::ZERO);
    assert_eq!(vol.dirty_blocks(), 2);
    assert_eq!(on_home(&home, 3), Some(1));
    assert_eq!(on_home(&home, 5), Some(1));
    assert_eq!(version(&vol, 3), Some(2));
    let vol = Arc::into_inner(vol).unwrap();
    drop(vol);
    let (home, fast) = (home.power_cut(3), fast.power_cut(4));
    let vol = open(&home, &fast);
    for b in 0..8 {
        assert_eq!(
            version(&vol, b),
            Some(if b == 3 { 2 } else { 1 }),
            "block {b}"
        );
    }
    assert_eq!(version(&vol, 20), Some(1));
}

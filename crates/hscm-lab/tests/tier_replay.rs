//! A block trace replayed through a real tiered volume hits and misses in DRAM exactly
//! as `hscm sim cache` predicts for the same policy and DRAM size: one policy code, two
//! uses. Checked for every online policy the simulator offers and every admission filter,
//! with the defaults of both (the volume's sequential cutoff included), on the trace the
//! report uses.

use std::sync::Arc;

use hscm_lab::tier::{replay, replay_agreement, write_msr_trace};
use hscm_tier::{TierConfig, TieredVolume};
use hscm_trace::{RequestFormat, RequestReader};
use hscm_volume::testing::FaultyBackend;

const BLOCK: u64 = 4096;
const RAM_BLOCKS: u64 = 96;

#[test]
fn a_replay_hits_and_misses_exactly_as_the_simulator_predicts_for_every_policy() {
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("t.msr.csv");
    // The report's trace (`hscm reproduce`): its scan of new blocks is placed in one
    // run longer than the default 4 MiB cutoff.
    write_msr_trace(&trace, 40_000, 6_000, 7).unwrap();
    // An in-memory home: the counts do not depend on the device.
    let rows = replay_agreement(&trace, 400, 12_000, &mut |cfg| {
        let home = FaultyBackend::new(cfg.home_len() as usize, "home");
        TieredVolume::format(&home, cfg)?;
        Ok(TieredVolume::open_on(Arc::new(home))?)
    })
    .unwrap();
    assert_eq!(
        rows.len(),
        6 * 3 + 1,
        "every online policy behind every filter"
    );
    for r in &rows {
        assert!(r.equal, "{r:?}");
        assert!(
            r.replayed_hits > 0 && r.replayed_misses > 0,
            "{}: a trace that tells policies apart",
            r.policy
        );
    }
    assert!(
        rows.iter().all(|r| r.replayed_sequential_bypassed > 0),
        "the cutoff never applied: {rows:?}"
    );
    // The policies do differ on it.
    let hits: std::collections::HashSet<u64> = rows.iter().map(|r| r.replayed_hits).collect();
    assert!(hits.len() > 10, "{hits:?}");
}

#[test]
fn a_replay_leaves_the_volumes_data_as_it_was() {
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("t.msr.csv");
    write_msr_trace(&trace, 12_000, 1_500, 7).unwrap();
    let path = dir.path().join("v.tier");
    let mut cfg = TierConfig::new(2048 * BLOCK, RAM_BLOCKS * BLOCK);
    cfg.durability = hscm_tier::Durability::OnFlush;
    TieredVolume::create(&path, &cfg, false).unwrap();
    let vol = TieredVolume::open(&path).unwrap();
    let image: Vec<u8> = (0..cfg.size).map(|i| (i * 7 % 251) as u8).collect();
    vol.write_at(0, &image, hscm_block::WriteFlags::NONE)
        .unwrap();
    let reader = RequestReader::open(&trace, Some(RequestFormat::Msr), BLOCK as u32).unwrap();
    let r = replay(&vol, reader, &mut |_| {}).unwrap();
    assert!(r.writes > 0);
    let mut after = vec![0u8; cfg.size as usize];
    vol.read_at(0, &mut after).unwrap();
    assert!(after == image, "a replay changed the data");
    // A volume too small for the trace's blocks is refused with the reason.
    let small = dir.path().join("small.tier");
    TieredVolume::create(&small, &TierConfig::new(64 * BLOCK, 8 * BLOCK), false).unwrap();
    let vol = TieredVolume::open(&small).unwrap();
    let reader = RequestReader::open(&trace, Some(RequestFormat::Msr), BLOCK as u32).unwrap();
    let e = replay(&vol, reader, &mut |_| {}).unwrap_err().to_string();
    assert!(e.contains("more than the volume's 64 blocks"), "{e}");
}

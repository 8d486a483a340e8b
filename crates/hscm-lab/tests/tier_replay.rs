//! A block trace replayed through a real tiered volume hits and misses in DRAM exactly
//! as `hscm sim cache` predicts for the same policy and DRAM size: one policy code, two
//! uses. Checked for every online policy the simulator offers and every admission filter.

use std::io::Write;
use std::path::Path;
use std::sync::Arc;

use hscm_lab::tier::replay;
use hscm_policy::cache::AdmissionName;
use hscm_tier::{TierConfig, TieredVolume};
use hscm_trace::{RequestFormat, RequestReader};
use hscm_vmsim::cache::{run, CacheRun, PolicyName, StorageProfile};
use hscm_volume::testing::FaultyBackend;
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

const BLOCK: u64 = 4096;
const RAM_BLOCKS: u64 = 96;

/// An MSR Cambridge trace: skewed 4-32 KiB requests over 1,500 blocks, a third writes,
/// with a sequential scan in the middle.
fn write_trace(path: &Path) {
    let mut f = std::io::BufWriter::new(std::fs::File::create(path).unwrap());
    let mut rng = SmallRng::seed_from_u64(7);
    for i in 0..12_000u64 {
        let block = if (5000..5600).contains(&i) {
            (i - 5000) * 2
        } else {
            let r: f64 = rng.gen();
            (r.powi(3) * 1500.0) as u64
        };
        let blocks = if rng.gen_bool(0.8) {
            1
        } else {
            rng.gen_range(2..=8)
        };
        let kind = if rng.gen_bool(0.33) { "Write" } else { "Read" };
        writeln!(
            f,
            "{i},host,0,{kind},{},{},0",
            block * BLOCK,
            blocks * BLOCK
        )
        .unwrap();
    }
}

#[test]
fn a_replay_hits_and_misses_exactly_as_the_simulator_predicts_for_every_policy() {
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("t.msr.csv");
    write_trace(&trace);
    let reader = || RequestReader::open(&trace, Some(RequestFormat::Msr), BLOCK as u32).unwrap();
    let profiles = [StorageProfile::from_name("scm").unwrap()];
    let mut checked = 0;
    for policy in PolicyName::ALL {
        let Some(spec) = policy.spec(None) else {
            continue; // Belady needs the future: no volume can run it.
        };
        let admissions: &[Option<AdmissionName>] = if spec.admission.is_some() {
            &[None]
        } else {
            &[
                None,
                Some(AdmissionName::SecondMiss),
                Some(AdmissionName::SeenBefore),
            ]
        };
        for &admission in admissions {
            let predicted = run(
                &CacheRun {
                    trace: "t",
                    policy,
                    capacity: RAM_BLOCKS * BLOCK,
                    objects: false,
                    ghost_entries: None,
                    admission,
                    profiles: &profiles,
                },
                reader(),
                &mut |_| {},
            )
            .unwrap();

            let mut cfg = TierConfig::new(2048 * BLOCK, RAM_BLOCKS * BLOCK);
            cfg.eviction = spec.eviction;
            cfg.admission = admission.or(spec.admission);
            cfg.sequential_cutoff = 0;
            // Durability does not change what is cached; syncing every write would only
            // make the test slow.
            cfg.durability = hscm_tier::Durability::OnFlush;
            // An in-memory home: the counts do not depend on the device.
            let home = FaultyBackend::new(cfg.home_len() as usize, "home");
            TieredVolume::format(&home, &cfg).unwrap();
            let vol = TieredVolume::open_on(Arc::new(home)).unwrap();
            let replayed = replay(&vol, reader(), &mut |_| {}).unwrap();
            let dram = &replayed.tiers[0];
            let name = format!("{} + {admission:?}", policy.name());
            assert_eq!(replayed.requests, predicted.requests, "{name}");
            assert_eq!(replayed.size_mismatches, 0, "{name}");
            assert_eq!(dram.hits, predicted.hits, "{name}: hits");
            assert_eq!(
                dram.misses,
                predicted.requests - predicted.hits,
                "{name}: misses"
            );
            assert_eq!(dram.promotions, predicted.inserted, "{name}: admitted");
            assert!(
                dram.hits > 0 && dram.misses > 0,
                "{name}: a trace that tells policies apart"
            );
            checked += 1;
        }
    }
    assert_eq!(checked, 6 * 3 + 1);
}

#[test]
fn a_replay_leaves_the_volumes_data_as_it_was() {
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("t.msr.csv");
    write_trace(&trace);
    let path = dir.path().join("v.tier");
    let mut cfg = TierConfig::new(2048 * BLOCK, RAM_BLOCKS * BLOCK);
    cfg.durability = hscm_tier::Durability::OnFlush;
    TieredVolume::create(&path, &cfg, false).unwrap();
    let vol = TieredVolume::open(&path).unwrap();
    let image: Vec<u8> = (0..cfg.size).map(|i| (i * 7 % 251) as u8).collect();
    vol.write_at(0, &image, false).unwrap();
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

//! The tiered volume against a flat byte array: whatever the DRAM share (1:2 to 1:64
//! of the volume), the policy, the admission filter, the block size and the sequential
//! cutoff, every read returns what the array holds.

use std::sync::Arc;

use hscm_block::{conformance, BlockTarget, WriteFlags, ZeroFlags};
use hscm_policy::cache::{AdmissionName, EvictionName};
use hscm_tier::{Durability, FastConfig, TierConfig, TieredVolume, WriteMode};
use hscm_volume::testing::FaultyBackend;
use proptest::prelude::*;
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

const ADMISSIONS: [Option<AdmissionName>; 3] = [
    None,
    Some(AdmissionName::SecondMiss),
    Some(AdmissionName::SeenBefore),
];

/// A volume's devices, to open (and reopen) it.
struct Rig {
    home: FaultyBackend,
    fast: Option<FaultyBackend>,
}

impl Rig {
    fn new(cfg: &TierConfig) -> Rig {
        let home = FaultyBackend::new(cfg.home_len() as usize, "home");
        let fast = cfg
            .fast
            .map(|f| FaultyBackend::new(f.device_len(cfg.block) as usize, "fast tier"));
        TieredVolume::format_with(
            &home,
            fast.as_ref().map(|f| f as &dyn hscm_volume::Backend),
            cfg,
            "fast",
        )
        .unwrap();
        Rig { home, fast }
    }

    fn open(&self) -> TieredVolume {
        TieredVolume::open_with(
            Arc::new(self.home.clone()),
            self.fast
                .clone()
                .map(|f| Arc::new(f) as Arc<dyn hscm_volume::Backend>),
        )
        .unwrap()
    }
}

fn volume(cfg: &TierConfig) -> TieredVolume {
    Rig::new(cfg).open()
}

/// Runs `ops` random requests on a volume of `cfg` and on a flat array; the first
/// difference fails with the request that exposed it. With a fast tier, some flushes
/// are write-backs of everything dirty, or a clean close and reopen.
fn drive(cfg: &TierConfig, ops: usize, seed: u64) -> Result<(), String> {
    let rig = Rig::new(cfg);
    let mut vol = rig.open();
    let size = cfg.size as usize;
    let block = cfg.block as usize;
    let mut model = vec![0u8; size];
    let mut rng = SmallRng::seed_from_u64(seed);
    let hot = (size / 8).max(block);
    let mut buf = Vec::new();
    for i in 0..ops {
        // Most requests in a hot eighth, some anywhere, some sequential runs.
        let len = match rng.gen_range(0..10) {
            0..=5 => rng.gen_range(1..=block),
            6..=8 => block,
            _ => rng.gen_range(1..=3 * block),
        }
        .min(size);
        let span = if rng.gen_bool(0.7) {
            hot.max(len)
        } else {
            size
        };
        let mut offset = rng.gen_range(0..=span - len);
        if rng.gen_bool(0.5) {
            offset -= offset % block;
        }
        let flags = if rng.gen_bool(0.2) {
            WriteFlags::FUA
        } else {
            WriteFlags::NONE
        };
        let what = rng.gen_range(0..20);
        match what {
            0..=8 => {
                buf.resize(len, 0);
                vol.read_at(offset as u64, &mut buf)
                    .map_err(|e| format!("op {i}: read: {e}"))?;
                if buf[..] != model[offset..offset + len] {
                    let at = (0..len).find(|&j| buf[j] != model[offset + j]).unwrap();
                    return Err(format!(
                        "op {i}: read [{offset}, +{len}) differs at byte {}: {} against {}",
                        offset + at,
                        buf[at],
                        model[offset + at]
                    ));
                }
            }
            9..=16 => {
                let data: Vec<u8> = (0..len).map(|_| rng.gen()).collect();
                vol.write_at(offset as u64, &data, flags)
                    .map_err(|e| format!("op {i}: write: {e}"))?;
                model[offset..offset + len].copy_from_slice(&data);
            }
            17 => {
                BlockTarget::discard(&vol, offset as u64, len as u64, flags)
                    .map_err(|e| format!("op {i}: discard: {e}"))?;
                model[offset..offset + len].fill(0);
            }
            18 => {
                BlockTarget::write_zeroes(
                    &vol,
                    offset as u64,
                    len as u64,
                    ZeroFlags {
                        fua: flags.fua,
                        ..ZeroFlags::default()
                    },
                )
                .map_err(|e| format!("op {i}: zeroes: {e}"))?;
                model[offset..offset + len].fill(0);
            }
            _ if cfg.fast.is_some() && rng.gen_bool(0.3) => {
                vol.write_back_all()
                    .map_err(|e| format!("op {i}: write-back: {e}"))?;
            }
            _ if cfg.fast.is_some() && rng.gen_bool(0.1) => {
                vol.close().map_err(|e| format!("op {i}: close: {e}"))?;
                vol = rig.open();
            }
            _ => vol.flush().map_err(|e| format!("op {i}: flush: {e}"))?,
        }
    }
    // And the whole volume at the end, which also checks the blocks never read.
    let mut all = vec![0u8; size];
    vol.read_at(0, &mut all).map_err(|e| e.to_string())?;
    if all != model {
        return Err("the final image differs".into());
    }
    for tier in vol.stats().tiers {
        if tier.occupancy_bytes > tier.capacity_bytes {
            return Err(format!(
                "{} holds {} of {}",
                tier.tier, tier.occupancy_bytes, tier.capacity_bytes
            ));
        }
    }
    Ok(())
}

fn config(blocks: u64, block: u32, ratio: u64, eviction: EvictionName) -> TierConfig {
    let mut cfg = TierConfig::new(
        blocks * u64::from(block),
        (blocks / ratio) * u64::from(block),
    );
    cfg.block = block;
    cfg.eviction = eviction;
    cfg
}

/// A million requests in all: every eviction policy behind every admission filter,
/// at DRAM shares 1:2 to 1:64, with and without a sequential cutoff.
#[test]
fn a_million_random_requests_read_what_a_flat_array_holds_at_every_dram_share() {
    let ratios = [2u64, 4, 8, 16, 32, 64];
    let mut total = 0;
    let mut seed = 1;
    for eviction in EvictionName::ALL {
        for admission in ADMISSIONS {
            for ratio in ratios {
                let mut cfg = config(128, 4096, ratio, eviction);
                cfg.admission = admission;
                cfg.sequential_cutoff = if seed % 2 == 0 { 0 } else { 3 * 4096 };
                cfg.durability = if seed % 3 == 0 {
                    Durability::OnFlush
                } else {
                    Durability::Immediate
                };
                let ops = 9_300;
                drive(&cfg, ops, seed).unwrap_or_else(|e| {
                    panic!(
                        "{} + {:?}, DRAM 1:{ratio}, seed {seed}: {e}",
                        eviction.name(),
                        admission
                    )
                });
                total += ops;
                seed += 1;
            }
        }
    }
    assert!(total >= 1_000_000, "{total} requests");
}

/// A million requests with a fast tier between DRAM and home: both write modes, every
/// eviction policy for each tier, DRAM 1:2 to 1:64 of the volume and the fast tier
/// twice DRAM (or, at 1:2, the whole volume), with write-backs and clean restarts.
#[test]
fn a_million_random_requests_with_a_fast_tier_read_what_a_flat_array_holds() {
    let ratios = [2u64, 4, 8, 16, 32, 64];
    let mut total = 0;
    let mut seed = 1000;
    for mode in WriteMode::ALL {
        for eviction in EvictionName::ALL {
            for admission in [None, Some(AdmissionName::SecondMiss)] {
                for ratio in ratios {
                    let mut cfg = config(128, 4096, ratio, EvictionName::ALL[seed as usize % 6]);
                    let fast_blocks = (2 * 128 / ratio).min(128);
                    let mut fast = FastConfig::new(fast_blocks * 4096);
                    fast.mode = mode;
                    fast.eviction = eviction;
                    fast.admission = admission;
                    cfg.fast = Some(fast);
                    cfg.sequential_cutoff = if seed % 2 == 0 { 0 } else { 3 * 4096 };
                    cfg.durability = if seed % 3 == 0 {
                        Durability::OnFlush
                    } else {
                        Durability::Immediate
                    };
                    let ops = 7_000;
                    drive(&cfg, ops, seed).unwrap_or_else(|e| {
                        panic!(
                            "{}, fast {} + {:?}, DRAM 1:{ratio}, seed {seed}: {e}",
                            mode.name(),
                            eviction.name(),
                            admission
                        )
                    });
                    total += ops;
                    seed += 1;
                }
            }
        }
    }
    assert!(total >= 1_000_000, "{total} requests");
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(32))]
    #[test]
    fn any_geometry_reads_what_a_flat_array_holds(
        blocks in 2u64..200,
        block_shift in 12u32..15,
        ratio_shift in 1u32..7,
        eviction in 0usize..EvictionName::ALL.len(),
        admission in 0usize..3,
        cutoff in prop_oneof![Just(0u64), 1u64..100_000],
        seed in any::<u64>(),
    ) {
        let block = 1u32 << block_shift;
        let ram_blocks = (blocks >> ratio_shift).max(1);
        let mut cfg = TierConfig::new(blocks * u64::from(block), ram_blocks * u64::from(block));
        cfg.block = block;
        cfg.eviction = EvictionName::ALL[eviction];
        cfg.admission = ADMISSIONS[admission];
        cfg.sequential_cutoff = cutoff;
        prop_assert_eq!(drive(&cfg, 400, seed), Ok(()));
    }
}

#[test]
fn the_tiered_volume_keeps_the_block_target_contract() {
    for admission in ADMISSIONS {
        let mut cfg = config(64, 4096, 8, EvictionName::Lru);
        cfg.admission = admission;
        conformance::check_writable(&volume(&cfg));
    }
}

/// A client mapping the volume (NBD BLOCK_STATUS) reads nothing from home and
/// disturbs no tier: every range is reported as data.
#[test]
fn mapping_the_volume_reads_nothing() {
    let cfg = config(1024, 4096, 16, EvictionName::Lru);
    let vol = volume(&cfg);
    let before = vol.stats();
    let runs = BlockTarget::extents(&vol, 0, cfg.size, false).unwrap();
    assert_eq!(
        runs,
        vec![hscm_block::Extent {
            len: cfg.size,
            kind: hscm_block::ExtentKind::Data
        }]
    );
    let after = vol.stats();
    assert_eq!(after.home_reads, before.home_reads);
    assert_eq!(after.requests, before.requests);
}

/// A scan longer than the cutoff skips DRAM and reads home in runs of up to 1 MiB;
/// cached blocks in the middle of it still come from DRAM, in the right places.
#[test]
fn a_long_scan_past_the_cutoff_reads_what_was_written() {
    let mut cfg = config(1024, 4096, 16, EvictionName::Lru);
    cfg.sequential_cutoff = 64 << 10;
    let vol = volume(&cfg);
    let image: Vec<u8> = (0..cfg.size).map(|i| (i * 13 % 251) as u8).collect();
    vol.write_at(0, &image, hscm_block::WriteFlags::NONE)
        .unwrap();
    // Cache a few scattered blocks, then change them so DRAM and home must agree.
    for b in [3u64, 300, 301, 777] {
        let mut one = vec![0u8; 4096];
        vol.read_at(b * 4096, &mut one).unwrap();
    }
    let mut model = image.clone();
    for b in [300usize, 777] {
        model[b * 4096 + 10] ^= 0xff;
        vol.write_at(
            (b * 4096 + 10) as u64,
            &[model[b * 4096 + 10]],
            hscm_block::WriteFlags::NONE,
        )
        .unwrap();
    }
    for (offset, len) in [(0usize, 3 << 20), (4095, (3 << 20) + 2), (1 << 20, 1)] {
        let mut buf = vec![0u8; len];
        vol.read_at(offset as u64, &mut buf).unwrap();
        assert!(
            buf[..] == model[offset..offset + len],
            "scan at {offset}, {len} bytes"
        );
    }
    assert!(vol.stats().tiers[0].bypassed_sequential > 0);
}

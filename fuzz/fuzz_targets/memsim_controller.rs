//! Arbitrary request streams and controller settings through the memory simulator's
//! command scheduler: a configuration may be refused, but a valid one must serve every
//! request exactly once, without panicking or hanging.
//! Run: cargo +nightly fuzz run memsim_controller
#![no_main]

use hscm_memsim::{run, ControllerConfig, Placement, PolicyKind, ReadyOrder, SimConfig};
use hscm_model::MemPreset;
use hscm_trace::{Access, MemRef, Timing};
use libfuzzer_sys::fuzz_target;

const PRESETS: [MemPreset; 4] = [
    MemPreset::Ddr3_1600K,
    MemPreset::Ddr4_2400,
    MemPreset::PaperDram,
    MemPreset::PaperPcm,
];

fuzz_target!(|data: &[u8]| {
    let Some((head, body)) = data.split_first_chunk::<4>() else {
        return;
    };
    let device = PRESETS[usize::from(head[0]) % PRESETS.len()].profile();
    let mut cfg = SimConfig {
        dram: device,
        pcm: device,
        caches: None,
        placement: Placement::Identity,
        ..SimConfig::default()
    };
    cfg.geometry.banks = device.banks;
    cfg.geometry.row_bytes = device.row_bytes;
    cfg.geometry.channels = 1 + u32::from(head[1] & 1);
    cfg.dram_bytes = 4 * device.row_bytes * u64::from(device.banks * cfg.geometry.channels);
    cfg.pcm_bytes = 0;
    let queue = 1 + usize::from(head[2] % 16);
    cfg.controller = ControllerConfig {
        ready_order: if head[3] & 1 == 0 {
            ReadyOrder::Oldest
        } else {
            ReadyOrder::RowHitsFirst
        },
        ..ControllerConfig::with_queues(queue, queue.max(2))
    };
    if cfg.validate().is_err() {
        return;
    }
    let lines = cfg.dram_bytes / 64;
    let refs: Vec<MemRef> = body
        .chunks_exact(3)
        .map(|c| MemRef {
            addr: (u64::from(u16::from_le_bytes([c[0], c[1]])) % lines) * 64,
            kind: if c[2] & 1 == 0 { Access::Read } else { Access::Write },
            size: 64,
            delta: u64::from(c[2] >> 1),
        })
        .collect();
    let r = run(
        &cfg,
        PolicyKind::DramOnly,
        refs.iter().map(|r| Ok(*r)),
        Timing::Cycles,
        &mut |_| {},
    )
    .expect("a valid configuration runs");
    assert_eq!(r.memory_reads + r.memory_writes, refs.len() as u64);
});

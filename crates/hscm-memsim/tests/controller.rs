//! The command scheduler under arbitrary request streams: every device preset, queues
//! down to one entry, both orders among ready commands, bursts and pauses. Whatever
//! arrives is served exactly once, reads take at least CL plus a burst on average, the
//! run takes at least one burst per request on the one data bus, and the same input
//! gives the same schedule.

use hscm_memsim::{run, ControllerConfig, Placement, PolicyKind, ReadyOrder, RunResult, SimConfig};
use hscm_model::MemPreset;
use hscm_trace::{Access, MemRef, Timing};
use proptest::prelude::*;

const PRESETS: [MemPreset; 3] = [
    MemPreset::Ddr3_1600K,
    MemPreset::Ddr4_2400,
    MemPreset::PaperPcm,
];

fn config(preset: MemPreset, queue: usize, order: ReadyOrder) -> SimConfig {
    let device = preset.profile();
    let mut cfg = SimConfig {
        dram: device,
        pcm: device,
        dram_bytes: 0,
        pcm_bytes: 0,
        caches: None,
        placement: Placement::Identity,
        ..SimConfig::default()
    };
    cfg.geometry.banks = device.banks;
    cfg.geometry.row_bytes = device.row_bytes;
    // Two rows per bank: every access is a hit or a conflict, never a cold miss only.
    let bytes = 2 * device.row_bytes * u64::from(device.banks);
    cfg.dram_bytes = bytes;
    cfg.controller = ControllerConfig {
        ready_order: order,
        ..ControllerConfig::with_queues(queue, queue.max(2))
    };
    cfg
}

fn simulate(cfg: &SimConfig, refs: &[MemRef]) -> RunResult {
    run(
        cfg,
        PolicyKind::DramOnly,
        refs.iter().map(|r| Ok(*r)),
        Timing::Cycles,
        &mut |_| {},
    )
    .expect("a valid configuration runs")
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]
    #[test]
    fn every_request_is_served_once_no_faster_than_the_device_allows(
        preset in 0usize..PRESETS.len(),
        queue in 1usize..9,
        hits_first in any::<bool>(),
        ops in proptest::collection::vec((0u64..1 << 20, any::<bool>(), 0u64..40), 1..1500),
    ) {
        let order = if hits_first { ReadyOrder::RowHitsFirst } else { ReadyOrder::Oldest };
        let cfg = config(PRESETS[preset], queue, order);
        let span = cfg.dram_bytes / 64;
        let refs: Vec<MemRef> = ops
            .iter()
            .map(|&(line, write, gap)| MemRef {
                addr: (line % span) * 64,
                kind: if write { Access::Write } else { Access::Read },
                size: 64,
                // Mostly back to back, so the queues fill; sometimes a pause.
                delta: if gap < 30 { 0 } else { gap * 10 },
            })
            .collect();
        let r = simulate(&cfg, &refs);
        let reads = refs.iter().filter(|r| r.kind == Access::Read).count() as u64;
        prop_assert_eq!(r.memory_reads, reads);
        prop_assert_eq!(r.memory_writes, refs.len() as u64 - reads);

        let t = cfg.dram.timing;
        let burst_ns = f64::from(t.burst_ck) * t.t_ck;
        if reads > 0 {
            prop_assert!(
                r.read_latency_ns.mean + 1e-9 >= t.t_cl + burst_ns,
                "mean read latency {} below CL + burst {}",
                r.read_latency_ns.mean,
                t.t_cl + burst_ns
            );
        }
        // One channel, one data bus: every request holds it for a burst.
        prop_assert!(
            r.runtime_ns + 1e-9 >= refs.len() as f64 * burst_ns,
            "{} requests in {} ns",
            refs.len(),
            r.runtime_ns
        );
        prop_assert!(!r.row_hit_rate.is_empty());
        for rate in r.row_hit_rate.values() {
            prop_assert!((0.0..=1.0).contains(rate), "{:?}", r.row_hit_rate);
        }
        prop_assert!(r.energy_j["total"].is_finite() && r.energy_j["total"] > 0.0);

        let again = simulate(&cfg, &refs);
        prop_assert_eq!(again.runtime_ns, r.runtime_ns);
        prop_assert_eq!(again.read_latency_ns.mean, r.read_latency_ns.mean);
    }
}

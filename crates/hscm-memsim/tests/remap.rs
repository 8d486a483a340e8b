//! Migration under pressure: tiny DRAM (CLOCK victims, swaps) and tiny WARM / RaPP
//! budgets (remap-table resets). Debug builds check the remap invariants after every
//! exchange and that every queued request points at its frame's current slot.

use hscm_memsim::{run, PolicyKind, SimConfig};
use hscm_trace::{Access, MemRef, Timing};
use proptest::prelude::*;

fn tiny() -> SimConfig {
    let mut cfg = SimConfig {
        caches: None,
        dram_bytes: 64 << 10, // 16 rows
        pcm_bytes: 256 << 10, // 64 rows
        ..SimConfig::default()
    };
    cfg.warm.remap_bytes = 64; // 8 entries: frequent resets
    cfg.warm.counter_bytes = 32;
    cfg.rapp.threshold_queue = 1;
    cfg.rapp.lifetime = 50;
    cfg
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]
    #[test]
    fn migrations_keep_every_page_somewhere_and_alone(
        ops in proptest::collection::vec((0u64..60, 0u64..64, any::<bool>(), 0u64..50), 1..2500),
        warm in any::<bool>(),
    ) {
        let cfg = tiny();
        let refs: Vec<MemRef> = ops
            .iter()
            .map(|&(page, line, w, gap)| MemRef {
                addr: page * 4096 + line * 64,
                kind: if w { Access::Write } else { Access::Read },
                size: 64,
                delta: gap,
            })
            .collect();
        let policy = if warm { PolicyKind::Warm } else { PolicyKind::Rapp };
        let r = run(&cfg, policy, refs.iter().map(|r| Ok(*r)), Timing::Instructions, &mut |_| {}).unwrap();
        prop_assert_eq!(r.references, refs.len() as u64);
        let reads = refs.iter().filter(|r| r.kind == Access::Read).count() as u64;
        prop_assert_eq!(r.memory_reads, reads);
    }
}

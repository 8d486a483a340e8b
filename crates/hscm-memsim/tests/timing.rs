//! Timing checked against analysis, and the policies' behaviour on patterns whose
//! outcome is known.

use hscm_memsim::{run, Placement, PolicyKind, RunResult, SimConfig, SimError};
use hscm_model::MemPreset;
use hscm_trace::{Access, MemRef, SynthKind, SynthSpec, Synthesizer, Timing};

fn post_cache(mut cfg: SimConfig) -> SimConfig {
    cfg.caches = None;
    cfg.placement = Placement::Identity;
    cfg
}

fn no_refresh(mut cfg: SimConfig) -> SimConfig {
    cfg.dram.timing.t_rfc = 0.0;
    cfg
}

fn sim(cfg: &SimConfig, policy: PolicyKind, refs: &[MemRef], timing: Timing) -> RunResult {
    run(
        cfg,
        policy,
        refs.iter().map(|r| Ok(*r)),
        timing,
        &mut |_| {},
    )
    .unwrap()
}

fn rd(addr: u64, delta: u64) -> MemRef {
    MemRef {
        addr,
        kind: Access::Read,
        size: 64,
        delta,
    }
}

fn wr(addr: u64, delta: u64) -> MemRef {
    MemRef {
        addr,
        kind: Access::Write,
        size: 64,
        delta,
    }
}

/// Row 1 of bank 0 with the default mapping (8 banks, 4 KiB rows, one channel/rank).
const SAME_BANK_OTHER_ROW: u64 = 8 * 4096;
/// Requests this many instructions apart (10 µs at 1 GHz) never interact.
const APART: u64 = 10_000;

fn latencies(cfg: &SimConfig, policy: PolicyKind, refs: &[MemRef]) -> (f64, f64) {
    let r = sim(cfg, policy, refs, Timing::Instructions);
    (r.read_latency_ns.mean, r.read_latency_ns.max)
}

#[test]
fn dram_row_hit_miss_and_conflict_latencies_match_the_timing_parameters() {
    let cfg = no_refresh(post_cache(SimConfig::default()));
    let t = cfg.dram.timing; // paper DRAM: tCL = tRCD = tRP = 15 ns, burst 4 × 1.25 ns
    let burst = 4.0 * t.t_ck;
    // A closed bank: activate + read.
    let (mean, _) = latencies(&cfg, PolicyKind::DramOnly, &[rd(0, APART)]);
    assert!(
        (mean - (t.t_rcd + t.t_cl + burst)).abs() < 0.1,
        "closed: {mean}"
    );
    // Then the same row: a row-buffer hit costs tCL + burst.
    let (mean2, _) = latencies(&cfg, PolicyKind::DramOnly, &[rd(0, APART), rd(64, APART)]);
    let hit = 2.0 * mean2 - mean;
    assert!((hit - (t.t_cl + burst)).abs() < 0.1, "hit: {hit}");
    // Then another row in the same bank: precharge + activate + read.
    let (mean3, _) = latencies(
        &cfg,
        PolicyKind::DramOnly,
        &[rd(0, APART), rd(SAME_BANK_OTHER_ROW, APART)],
    );
    let conflict = 2.0 * mean3 - mean;
    assert!(
        (conflict - (t.t_rp + t.t_rcd + t.t_cl + burst)).abs() < 0.1,
        "conflict: {conflict}"
    );
}

#[test]
fn pcm_reads_are_non_destructive_and_a_dirty_row_pays_twr_on_the_way_out() {
    let cfg = post_cache(SimConfig::default());
    let t = cfg.pcm.timing; // tRCD 48 ns (39 cycles = 48.75 ns), tWR 300 ns
    let ck = t.t_ck;
    let rcd = (t.t_rcd / ck).ceil() * ck;
    let burst = 4.0 * ck;
    // Clean conflict: no precharge, just activate + read.
    let (m, _) = latencies(&cfg, PolicyKind::PcmOnly, &[rd(0, APART)]);
    assert!((m - (rcd + t.t_cl + burst)).abs() < 0.1, "closed: {m}");
    let (m2, _) = latencies(
        &cfg,
        PolicyKind::PcmOnly,
        &[rd(0, APART), rd(SAME_BANK_OTHER_ROW, APART)],
    );
    let clean = 2.0 * m2 - m;
    assert!(
        (clean - (rcd + t.t_cl + burst)).abs() < 0.1,
        "clean conflict: {clean}"
    );
    // Dirty conflict: the write-back (tWR) and tRP come first.
    let (dirty, _) = latencies(
        &cfg,
        PolicyKind::PcmOnly,
        &[wr(0, APART), rd(SAME_BANK_OTHER_ROW, APART)],
    );
    let want = t.t_wr + t.t_rp + rcd + t.t_cl + burst;
    assert!(
        (dirty - want).abs() < 0.1,
        "dirty conflict: {dirty}, want {want}"
    );
}

#[test]
fn a_write_heavy_pcm_trace_pays_twr_per_row_switch() {
    let cfg = post_cache(SimConfig::default());
    // Writes alternating between two rows of one bank, all issued at once.
    let n = 1000u64;
    let refs: Vec<MemRef> = (0..n)
        .map(|i| wr(if i % 2 == 0 { 0 } else { SAME_BANK_OTHER_ROW }, 0))
        .collect();
    let pcm = sim(&cfg, PolicyKind::PcmOnly, &refs, Timing::Cycles);
    let dram = sim(&cfg, PolicyKind::DramOnly, &refs, Timing::Cycles);
    // FR-FCFS batches the row hits among the queued writes, but every row switch
    // writes the dirty row into the array first: tWR each, serialised on one bank.
    let switches = 2 * pcm.pcm_max_row_writes - 1;
    assert!(switches >= 10, "{switches}");
    let t = cfg.pcm.timing;
    let burst = 4.0 * t.t_ck;
    // Per switch: write-back, precharge, activate, write latency; plus every burst.
    let expected = switches as f64 * (t.t_wr + t.t_rp + t.t_rcd + t.t_cwd) + n as f64 * burst;
    let ratio = pcm.runtime_ns / expected;
    assert!(
        (0.9..1.1).contains(&ratio),
        "{} ns for {switches} switches, expected ~{expected}",
        pcm.runtime_ns
    );
    assert!(
        pcm.runtime_ns > dram.runtime_ns,
        "pcm {} dram {}",
        pcm.runtime_ns,
        dram.runtime_ns
    );
    assert!(pcm.pcm_lines_written > 0 && pcm.energy_j["pcm.writeback"] > 0.0);
}

fn stream(lines: u64) -> Vec<MemRef> {
    (0..lines).map(|i| rd(i * 64, 0)).collect()
}

#[test]
fn a_stream_reaches_the_channel_peak_bandwidth_within_ten_percent() {
    let cfg = SimConfig {
        dram: MemPreset::Ddr3_1600K.profile(),
        ..post_cache(SimConfig::default())
    };
    let refs = stream(64 * 2000);
    let r = sim(&cfg, PolicyKind::DramOnly, &refs, Timing::Cycles);
    let peak_gbs = 64.0 / (4.0 * cfg.dram.timing.t_ck); // bytes per ns = GB/s
    let got = refs.len() as f64 * 64.0 / r.runtime_ns;
    assert!(
        got >= 0.9 * peak_gbs && got <= peak_gbs,
        "{got:.2} GB/s of {peak_gbs:.2}"
    );
}

#[test]
fn refresh_takes_its_share() {
    let base = SimConfig {
        dram: MemPreset::Ddr3_1600K.profile(),
        ..post_cache(SimConfig::default())
    };
    let refs = stream(64 * 4000);
    let with = sim(&base, PolicyKind::DramOnly, &refs, Timing::Cycles);
    let without = sim(
        &no_refresh(base.clone()),
        PolicyKind::DramOnly,
        &refs,
        Timing::Cycles,
    );
    let share = with.runtime_ns / without.runtime_ns - 1.0;
    let t = base.dram.timing;
    let expected = t.t_rfc / t.t_refi; // 260 / 7800 = 3.3%
    assert!(
        share > 0.5 * expected && share < 2.0 * expected,
        "refresh cost {share:.4}, expected ~{expected:.4}"
    );
    assert!(with.energy_j["dram.refresh"] > 0.0);
    assert!(
        !without.energy_j.contains_key("dram.refresh") || without.energy_j["dram.refresh"] == 0.0
    );
}

fn synth(kind: SynthKind, requests: u64, footprint: u64) -> Vec<MemRef> {
    Synthesizer::new(SynthSpec {
        kind,
        requests,
        footprint,
        write_share: 0.3,
        gap: 30,
        seed: 3,
    })
    .collect()
}

#[test]
fn warm_moves_concentrated_writes_to_dram_and_saves_energy_over_static() {
    let cfg = SimConfig {
        caches: None,
        ..SimConfig::default()
    };
    let refs = synth(
        SynthKind::HotWrites {
            hot_rows: 16,
            hot_share: 0.95,
        },
        100_000,
        32 << 20,
    );
    let stat = sim(&cfg, PolicyKind::Static, &refs, Timing::Instructions);
    let warm = sim(&cfg, PolicyKind::Warm, &refs, Timing::Instructions);
    assert!(warm.migrations > 0 && stat.migrations == 0);
    assert!(
        warm.energy_j["total"] < stat.energy_j["total"],
        "warm {:?} static {:?}",
        warm.energy_j,
        stat.energy_j
    );
    assert!(warm.runtime_ns < stat.runtime_ns);
    assert!(warm.pcm_lines_written < stat.pcm_lines_written);
    assert!(warm.energy_j["dram.migration"] + warm.energy_j["pcm.migration"] > 0.0);
}

#[test]
fn rapp_promotes_frequently_used_pages() {
    let cfg = SimConfig {
        caches: None,
        ..SimConfig::default()
    };
    let refs = synth(SynthKind::Zipf { s: 1.1 }, 100_000, 64 << 20);
    let r = sim(&cfg, PolicyKind::Rapp, &refs, Timing::Instructions);
    let s = sim(&cfg, PolicyKind::Static, &refs, Timing::Instructions);
    assert!(r.migrations > 0);
    assert!(
        r.runtime_ns < s.runtime_ns,
        "rapp {} static {}",
        r.runtime_ns,
        s.runtime_ns
    );
}

#[test]
fn energy_components_add_up_and_dram_only_has_no_pcm() {
    let cfg = SimConfig::default();
    let refs = synth(SynthKind::Mix { stream_share: 0.6 }, 20_000, 8 << 20);
    for p in PolicyKind::ALL {
        let r = sim(&cfg, p, &refs, Timing::Instructions);
        let sum: f64 = r
            .energy_j
            .iter()
            .filter(|(k, _)| *k != "total")
            .map(|(_, v)| v)
            .sum();
        assert!(
            (sum - r.energy_j["total"]).abs() < 1e-12 * r.energy_j["total"].max(1.0),
            "{p:?}"
        );
        let has_pcm = r.energy_j.keys().any(|k| k.starts_with("pcm."));
        let has_dram = r.energy_j.keys().any(|k| k.starts_with("dram."));
        assert_eq!(has_pcm, p != PolicyKind::DramOnly, "{p:?}");
        assert_eq!(has_dram, p != PolicyKind::PcmOnly, "{p:?}");
        assert_eq!(r.references, 20_000);
        assert!(r.ipc.unwrap() > 0.0 && r.ipc.unwrap() <= 1.0);
        assert!(r.edp > 0.0);
    }
}

#[test]
fn the_same_trace_gives_the_same_memory_traffic_under_every_policy() {
    let cfg = SimConfig::default();
    let refs = synth(SynthKind::Zipf { s: 0.9 }, 30_000, 4 << 20);
    let runs: Vec<RunResult> = PolicyKind::ALL
        .iter()
        .map(|&p| sim(&cfg, p, &refs, Timing::Instructions))
        .collect();
    for r in &runs {
        assert_eq!(
            (r.memory_reads, r.memory_writes),
            (runs[0].memory_reads, runs[0].memory_writes),
            "{}",
            r.policy
        );
    }
}

#[test]
fn a_trace_error_stops_the_run_with_that_error() {
    let cfg = SimConfig::default();
    let refs = vec![
        Ok(rd(0, 1)),
        Err(hscm_trace::TraceError::Parse {
            name: "t".into(),
            line: 2,
            message: "bad".into(),
        }),
    ];
    let err = run(
        &cfg,
        PolicyKind::Warm,
        refs.into_iter(),
        Timing::Instructions,
        &mut |_| {},
    )
    .unwrap_err();
    assert!(matches!(err, SimError::Trace(_)));
    assert_eq!(err.to_string(), "t:2: bad");
}

#[test]
fn bad_configurations_are_refused_with_a_reason() {
    let mut cfg = SimConfig::default();
    cfg.geometry.row_bytes = 3000;
    let e = run(
        &cfg,
        PolicyKind::Static,
        std::iter::empty(),
        Timing::None,
        &mut |_| {},
    )
    .unwrap_err();
    assert!(e.to_string().contains("power of two"), "{e}");
    let cfg = SimConfig {
        dram_bytes: 4096 * 3,
        ..SimConfig::default()
    };
    let e = run(
        &cfg,
        PolicyKind::Static,
        std::iter::empty(),
        Timing::None,
        &mut |_| {},
    )
    .unwrap_err();
    assert!(e.to_string().contains("whole number of rows"), "{e}");
    let cfg = SimConfig {
        dram_bytes: 0,
        ..SimConfig::default()
    };
    let e = run(
        &cfg,
        PolicyKind::Warm,
        std::iter::empty(),
        Timing::None,
        &mut |_| {},
    )
    .unwrap_err();
    assert!(e.to_string().contains("needs both DRAM and PCM"), "{e}");
    assert!(run(
        &cfg,
        PolicyKind::PcmOnly,
        std::iter::empty(),
        Timing::None,
        &mut |_| {}
    )
    .is_ok());
}

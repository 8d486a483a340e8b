//! The DRAM model stays beside Ramulator 2.0 and DRAMsim3 on the anchor traces, at a
//! reduced length (cycles and energy are compared per request).

use hscm_memsim::ReadyOrder;
use hscm_sweep::memsim_validation::{
    anchor_config, comparisons, run_anchor, run_anchor_with, Anchor, ANCHORS,
};

const REQUESTS: u64 = 200_000;

fn anchor(trace: &str) -> &'static Anchor {
    ANCHORS
        .iter()
        .find(|a| a.name == trace)
        .expect("known trace")
}

fn check(trace: &str, measure: &str, band: f64) {
    let anchor = anchor(trace);
    let (run, _) = run_anchor(anchor, REQUESTS).unwrap();
    let c = comparisons(anchor, &run)
        .into_iter()
        .find(|c| c.measure.starts_with(measure))
        .expect("compared");
    assert!(
        c.difference.abs() <= band,
        "{trace} {measure}: hscm {} against {} ({:+.3})",
        c.hscm,
        c.reference,
        c.difference
    );
}

#[test]
fn a_sequential_stream_drains_in_the_peers_cycles_with_their_row_hits_and_energy() {
    check("stream", "cycles", 0.05);
    check("stream", "row-buffer", 0.02);
    check("stream", "energy", 0.20);
}

#[test]
fn a_paced_mix_sees_dramsim3s_read_latency_and_energy() {
    check("mix5m_gap16", "mean read latency", 0.15);
    check("mix5m_gap16", "energy", 0.20);
}

/// Three streams take turns on one bank's rows while random requests keep the others
/// busy: how many hits a row serves before an older miss closes it decides both
/// figures.
#[test]
fn a_saturated_mix_drains_in_the_peers_cycles_with_their_row_hits_and_energy() {
    check("mix5m", "cycles", 0.05);
    check("mix5m", "row-buffer", 0.02);
    check("mix5m", "energy", 0.20);
}

/// Ranking row hits above older ready precharges and activates (a common reading of
/// FR-FCFS, and hscm's first controller) keeps the shared bank's rows open longer than
/// either peer does: the mix then drains well over 5% faster with far more hits. Both
/// peers rank ready commands by age alone, which is why that is the default.
#[test]
fn ranking_row_hits_above_older_ready_commands_leaves_the_peers_behind() {
    let anchor = anchor("mix5m");
    let (peers_order, _) = run_anchor(anchor, REQUESTS).unwrap();
    let mut cfg = anchor_config();
    cfg.controller.ready_order = ReadyOrder::RowHitsFirst;
    let (hits_first, _) = run_anchor_with(&cfg, anchor, REQUESTS).unwrap();
    let cycles = comparisons(anchor, &hits_first)
        .into_iter()
        .find(|c| c.measure.starts_with("cycles"))
        .unwrap();
    assert!(
        cycles.difference < -0.05,
        "row hits first: {:+.3} against the peers",
        cycles.difference
    );
    assert!(
        hits_first.row_hit_rate > peers_order.row_hit_rate + 0.02,
        "row hits first {} against oldest first {}",
        hits_first.row_hit_rate,
        peers_order.row_hit_rate
    );
}

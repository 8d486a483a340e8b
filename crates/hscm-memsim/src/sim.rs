//! The run loop: trace → caches → controller, and the results.

use std::collections::BTreeMap;

use hdrhistogram::Histogram;
use hscm_trace::{Access, MemRef, Timing, TraceError};
use serde::Serialize;

use crate::cache::Hierarchy;
use crate::config::{PolicyKind, SimConfig};
use crate::memory::Memory;
use crate::SimError;

#[derive(Debug, Clone, Serialize)]
pub struct Latency {
    pub mean: f64,
    pub p50: f64,
    pub p99: f64,
    pub max: f64,
    /// Mean time from arrival to the request's first command (waiting in the queue).
    pub queue_mean: f64,
    /// Mean time from the first command to the last data beat (the device).
    pub device_mean: f64,
    pub count: u64,
}

#[derive(Debug, Clone, Copy, Serialize, Default)]
pub struct Norm {
    /// Energy / DRAM-only energy.
    pub energy: f64,
    /// DRAM-only runtime / runtime: 1 = as fast, below 1 = slower.
    pub perf: f64,
    /// EDP / DRAM-only EDP.
    pub edp: f64,
}

/// One policy's run. Field names are a stable contract (`--json`).
#[derive(Debug, Clone, Serialize)]
pub struct RunResult {
    pub policy: String,
    /// Runtime in core cycles.
    pub cycles: u64,
    pub runtime_ns: f64,
    pub instructions: u64,
    /// None when the trace carries no instruction counts.
    pub ipc: Option<f64>,
    pub references: u64,
    pub memory_reads: u64,
    pub memory_writes: u64,
    pub read_latency_ns: Latency,
    /// Writes are posted: from arrival at the controller to the end of their burst.
    pub write_latency_ns: Latency,
    /// Joules: `total` and one entry per component (`dram.activate`, `pcm.static`, …).
    pub energy_j: BTreeMap<String, f64>,
    /// Joules by what spent them, both devices together: `background` (standby),
    /// `activation`, `read_write` (bursts), `array_write` (NVM write-backs),
    /// `refresh`, `migration` (all of its traffic), `link`.
    pub energy_breakdown_j: BTreeMap<String, f64>,
    /// Energy × runtime, in joule-seconds.
    pub edp: f64,
    pub migrations: u64,
    pub warm_resets: u64,
    /// Rows sent back home by remap-table resets.
    pub restores: u64,
    /// Row-buffer hit rate of demand accesses per device (`dram`, `pcm`).
    pub row_hit_rate: BTreeMap<String, f64>,
    pub cache_hit_rate: BTreeMap<String, f64>,
    /// Most array writes to any one PCM row, and lines written into PCM arrays.
    pub pcm_max_row_writes: u64,
    pub pcm_lines_written: u64,
    pub pages_touched: u64,
    /// Against the DRAM-only run of the same comparison; None without one.
    pub norm: Option<Norm>,
}

/// The keys of `RunResult::energy_breakdown_j`, in the order reports list them.
pub const ENERGY_PARTS: [&str; 7] = [
    "background",
    "activation",
    "read_write",
    "array_write",
    "refresh",
    "migration",
    "link",
];

/// Latency statistics in picoseconds, reported in nanoseconds.
struct LatencyAcc {
    hist: Histogram<u64>,
    /// Exact sum (the histogram keeps 3 significant digits, for percentiles).
    sum: u128,
    queue_sum: u128,
    device_sum: u128,
}

impl LatencyAcc {
    fn new() -> Self {
        Self {
            hist: Histogram::new_with_bounds(1, 1 << 40, 3).expect("valid bounds"),
            sum: 0,
            queue_sum: 0,
            device_sum: 0,
        }
    }

    fn record(&mut self, arrival: u64, first_cmd: u64, done: u64) {
        let _ = self.hist.record(done.saturating_sub(arrival).max(1));
        self.sum += u128::from(done.saturating_sub(arrival));
        self.queue_sum += u128::from(first_cmd.saturating_sub(arrival));
        self.device_sum += u128::from(done.saturating_sub(first_cmd.max(arrival)));
    }

    fn finish(&self) -> Latency {
        let n = self.hist.len();
        let ns = |v: u64| v as f64 / 1000.0;
        let per = |sum: u128| {
            if n > 0 {
                sum as f64 / n as f64 / 1000.0
            } else {
                0.0
            }
        };
        Latency {
            mean: per(self.sum),
            p50: ns(self.hist.value_at_quantile(0.5)),
            p99: ns(self.hist.value_at_quantile(0.99)),
            max: ns(self.hist.max()),
            queue_mean: per(self.queue_sum),
            device_mean: per(self.device_sum),
            count: n,
        }
    }
}

fn device_label(cfg_dram: bool) -> &'static str {
    if cfg_dram {
        "dram"
    } else {
        "pcm"
    }
}

/// Runs one policy over a trace. `progress` is called every 64 Ki references with the
/// number done so far.
pub fn run(
    cfg: &SimConfig,
    policy: PolicyKind,
    refs: impl Iterator<Item = Result<MemRef, TraceError>>,
    timing: Timing,
    progress: &mut dyn FnMut(u64),
) -> Result<RunResult, SimError> {
    cfg.validate()?;
    let hybrid = !matches!(policy, PolicyKind::DramOnly | PolicyKind::PcmOnly);
    if hybrid && (cfg.dram_bytes == 0 || cfg.pcm_bytes == 0) {
        return Err(SimError::Config(format!(
            "policy {} needs both DRAM and PCM (sizes {} and {} bytes)",
            policy.name(),
            cfg.dram_bytes,
            cfg.pcm_bytes
        )));
    }
    let mut mem = Memory::new(cfg, policy);
    let mut caches = cfg.caches.as_ref().map(Hierarchy::new);
    let line_bytes = cfg.caches.as_ref().map_or(64, |c| c.line);
    let period_ps = 1000.0 / cfg.core.freq_ghz;
    let ps_per_instruction = cfg.core.cpi * period_ps;
    let trace_ck_ps = (cfg.dram.timing.t_ck * 1000.0).round() as u64;
    let mut read_lat = LatencyAcc::new();
    let mut write_lat = LatencyAcc::new();
    let mut collect = |mem: &mut Memory| {
        for r in mem.done.drain(..) {
            if r.write {
                &mut write_lat
            } else {
                &mut read_lat
            }
            .record(r.arrival, r.first_cmd, r.done);
        }
    };
    let mut t: u64 = 0;
    let mut t_frac = 0.0f64;
    let mut instructions = 0u64;
    let mut trace_cycles = 0u64;
    let mut n = 0u64;
    let blocking_reads = timing != Timing::Cycles;
    for r in refs {
        let r = r?;
        n += 1;
        if n & 0xffff == 0 {
            progress(n);
            collect(&mut mem);
        }
        match timing {
            Timing::Instructions => {
                instructions += r.delta;
                t_frac += r.delta as f64 * ps_per_instruction;
                let whole = t_frac as u64;
                t += whole;
                t_frac -= whole as f64;
            }
            Timing::Cycles => {
                trace_cycles += r.delta;
                t = t.max(trace_cycles * trace_ck_ps);
            }
            Timing::None => {}
        }
        let write = r.kind == Access::Write;
        if let Some(h) = caches.as_mut() {
            let line = r.addr / line_bytes;
            let hr = h.access(line, write, r.kind == Access::Fetch);
            t += (f64::from(hr.cycles) * period_ps) as u64;
            for wb in hr.writebacks.into_iter().flatten() {
                t = mem.submit(t, wb * line_bytes, true).0;
            }
            if let Some(fill) = hr.fill {
                let (at, id) = mem.submit(t, fill * line_bytes, false);
                // Store misses fetch their line in the background (posted).
                t = if write || !blocking_reads {
                    at
                } else {
                    mem.wait(id)
                };
            }
        } else if write || !blocking_reads {
            t = mem.submit(t, r.addr, write).0;
        } else {
            let (_, id) = mem.submit(t, r.addr, false);
            t = mem.wait(id);
        }
    }
    progress(n);
    let runtime = t.max(mem.drain());
    collect(&mut mem);
    let standby: Vec<f64> = mem.devs.iter_mut().map(|d| d.finish(runtime)).collect();

    let mut energy = BTreeMap::new();
    let mut breakdown: BTreeMap<String, f64> = ENERGY_PARTS
        .into_iter()
        .map(|k| (k.to_string(), 0.0))
        .collect();
    let mut total_pj = 0.0;
    let mut row_hits = BTreeMap::new();
    let (mut reads, mut writes) = (0, 0);
    let mut pcm_max_row_writes = 0;
    let mut pcm_lines_written = 0;
    for (d, &standby) in mem.devs.iter().zip(&standby) {
        let dram = d.profile.kind == hscm_model::MemKind::Dram;
        let label = device_label(dram);
        let e = d.energy;
        let mut add = |k: &str, part: &str, pj: f64| {
            if pj == 0.0 && matches!(k, "link" | "writeback" | "refresh") {
                return;
            }
            *energy.entry(format!("{label}.{k}")).or_insert(0.0) += pj * 1e-12;
            *breakdown.get_mut(part).expect("listed above") += pj * 1e-12;
            total_pj += pj;
        };
        add("activate", "activation", e.activate);
        add("writeback", "array_write", e.writeback);
        add("rb_read", "read_write", e.rb_read);
        add("rb_write", "read_write", e.rb_write);
        add("migration", "migration", e.migration);
        add("link", "link", e.link);
        add("refresh", "refresh", e.refresh);
        add(
            if dram { "background" } else { "static" },
            "background",
            standby,
        );
        let c = d.counters;
        reads += c.reads;
        writes += c.writes;
        if c.reads + c.writes > 0 {
            row_hits.insert(
                label.to_string(),
                (c.read_row_hits + c.write_row_hits) as f64 / (c.reads + c.writes) as f64,
            );
        }
        if d.profile.kind == hscm_model::MemKind::Nvm {
            pcm_max_row_writes = d.row_writes.values().copied().max().unwrap_or(0).into();
            pcm_lines_written += c.lines_written_to_array;
        }
    }
    let total_j = total_pj * 1e-12;
    energy.insert("total".to_string(), total_j);
    let cycles = (runtime as f64 / period_ps).round() as u64;
    let mut cache_hit_rate = BTreeMap::new();
    if let Some(h) = &caches {
        for (k, c) in [("l1i", &h.l1i), ("l1d", &h.l1d), ("l2", &h.l2)] {
            if let Some(r) = c.hit_rate() {
                cache_hit_rate.insert(k.to_string(), r);
            }
        }
    }
    Ok(RunResult {
        policy: policy.name().to_string(),
        cycles,
        runtime_ns: runtime as f64 / 1000.0,
        instructions,
        ipc: (timing == Timing::Instructions && cycles > 0)
            .then(|| instructions as f64 / cycles as f64),
        references: n,
        memory_reads: reads,
        memory_writes: writes,
        read_latency_ns: read_lat.finish(),
        write_latency_ns: write_lat.finish(),
        energy_j: energy,
        energy_breakdown_j: breakdown,
        edp: total_j * runtime as f64 * 1e-12,
        migrations: mem.migrations,
        warm_resets: mem.warm_resets(),
        restores: mem.restores,
        row_hit_rate: row_hits,
        cache_hit_rate,
        pcm_max_row_writes,
        pcm_lines_written,
        pages_touched: mem.pages_touched(),
        norm: None,
    })
}

/// Fills every result's `norm` against the DRAM-only result, if present.
pub fn normalise(results: &mut [RunResult]) {
    let Some(base) = results
        .iter()
        .find(|r| r.policy == PolicyKind::DramOnly.name())
        .cloned()
    else {
        return;
    };
    let e0 = base.energy_j["total"];
    for r in results.iter_mut() {
        r.norm = Some(Norm {
            energy: r.energy_j["total"] / e0,
            perf: base.runtime_ns / r.runtime_ns,
            edp: r.edp / base.edp,
        });
    }
}

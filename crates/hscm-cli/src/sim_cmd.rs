//! `hscm sim …` and `hscm trace …`: the simulators and the traces they read.

use anyhow::Result;
use clap::Subcommand;

use hscm_sweep::experiment::run_and_print;
use hscm_sweep::{commands, memsim, vmsim};

#[derive(Subcommand)]
pub enum SimCmd {
    /// File cache over storage: hit ratios of LRU, AC-LRU (admit on second access),
    /// CLOCK, FIFO, ARC, S3-FIFO, SIEVE and Belady, and the access time with and without
    /// the cache on HDD, SSD, SCM or DRAM storage (Park & Bahn 2020, eq. 1-3).
    ///
    /// Example: hscm trace gen-requests --one-time 0.3 -o t.oracleGeneral.zst &&
    ///          hscm sim cache --trace t.oracleGeneral.zst --policy lru,ac-lru --size 1%,5%,10%
    Cache(vmsim::CacheArgs),
    /// Virtual-memory paging: TLB, second-chance replacement and eq. 4-6 for every page
    /// size and storage latency; prints the best page size per latency.
    ///
    /// Example: hscm sim paging --trace prog.lackey --memory 50%
    Paging(vmsim::PagingArgs),
    /// Hybrid DRAM + PCM main memory: caches, FR-FCFS controller, JEDEC timing,
    /// energy, and WARM / RaPP migration.
    #[command(subcommand)]
    Memory(MemoryCmd),
}

#[derive(Subcommand)]
pub enum MemoryCmd {
    /// Run every policy (dram-only, pcm-only, static, warm, rapp) on one trace and
    /// print energy, performance and energy-delay product normalised to DRAM-only, as
    /// Sun et al. 2020's Figures 8-10.
    ///
    /// Example: hscm sim memory compare --trace traces/cjpeg.hscm.zst
    ///
    /// Example: hscm trace gen --kind hot-writes -o hot.hscm.zst && hscm sim memory compare --trace hot.hscm.zst --json
    Compare(memsim::CompareArgs),
}

#[derive(Subcommand)]
pub enum TraceCmd {
    Convert(commands::ConvertArgs),
    /// Generate a synthetic object-request trace (Zipf, one-time objects, scans, loops)
    /// in libCacheSim's oracleGeneral format, for `hscm sim cache`.
    ///
    /// Example: hscm trace gen-requests --requests 10M --objects 1M --alpha 1.0 -o zipf.oracleGeneral.zst
    GenRequests(vmsim::GenRequestsArgs),
    /// Generate a synthetic post-cache trace.
    ///
    /// Example: hscm trace gen --kind mix --requests 5M -o mix.hscm.zst
    Gen(memsim::GenArgs),
    Anchor(commands::AnchorArgs),
}

/// Runs one simulator command.
pub fn run_sim(cmd: SimCmd) -> Result<()> {
    match cmd {
        SimCmd::Memory(MemoryCmd::Compare(a)) => run_and_print(&a),
        SimCmd::Cache(a) => run_and_print(&a),
        SimCmd::Paging(a) => run_and_print(&a),
    }
}

/// Runs one trace command.
pub fn run_trace(cmd: TraceCmd) -> Result<()> {
    match cmd {
        TraceCmd::Convert(a) => run_and_print(&a),
        TraceCmd::GenRequests(a) => run_and_print(&a),
        TraceCmd::Anchor(a) => run_and_print(&a),
        TraceCmd::Gen(a) => run_and_print(&a),
    }
}

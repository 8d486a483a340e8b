//! `hscm sim …` and `hscm trace …`: the simulators and the traces they read.

use std::path::PathBuf;

use anyhow::Result;
use clap::Subcommand;

use hscm_lab::out::emit;
use hscm_lab::{memsim, units, vmsim};

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
    /// Example: hscm trace gen --kind hot-writes -o hot.hscm.zst && hscm sim memory compare --trace hot.hscm.zst --json
    Compare(memsim::CompareArgs),
}

#[derive(Subcommand)]
pub enum TraceCmd {
    /// Convert a trace to hscm's compact binary format (zstd-compressed), optionally
    /// starting at an instruction address and filtering through the Table 1 caches.
    ///
    /// Example: valgrind --tool=lackey --trace-mem=yes --log-fd=9 ./prog 9>&1 >/dev/null |
    ///          hscm trace convert - --from lackey --start-pc 0x401136 --instructions 10M --post-cache -o prog.hscm.zst
    Convert {
        /// Input trace, or - for standard input.
        input: PathBuf,
        /// Input format: lackey, ramulator, dramsim3, nvmain, dramsys or hscm;
        /// detected from the content when omitted.
        #[arg(long, visible_alias = "format", value_parser = memsim::parse_format)]
        from: Option<hscm_trace::Format>,
        /// Output trace (hscm binary format, zstd-compressed).
        #[arg(short, long, alias = "out")]
        output: PathBuf,
        /// Skip everything before the first fetch of this instruction address (hex),
        /// e.g. main() or the hot function, past dynamic linking.
        #[arg(long, value_parser = parse_hex)]
        start_pc: Option<u64>,
        /// Keep this many instructions (e.g. 10M), then stop reading.
        #[arg(long, value_parser = units::parse_count)]
        instructions: Option<u64>,
        /// Filter through the default caches (L1I/L1D 32 KiB, L2 512 KiB) and keep only
        /// the memory requests: L2 misses and dirty evictions.
        #[arg(long)]
        post_cache: bool,
        /// Print JSON (a stable contract) instead of text; a failure prints {"ok": false, "error": ...}.
        #[arg(long)]
        json: bool,
    },
    /// Generate a synthetic object-request trace (Zipf, one-time objects, scans, loops)
    /// in libCacheSim's oracleGeneral format, for `hscm sim cache`.
    ///
    /// Example: hscm trace gen-requests --requests 10M --objects 1M --alpha 1.0 -o zipf.oracleGeneral.zst
    GenRequests(vmsim::GenRequestsArgs),
    /// Generate a synthetic post-cache trace.
    ///
    /// Example: hscm trace gen --kind mix --requests 5M -o mix.hscm.zst
    Gen(memsim::GenArgs),
    /// Write one of the anchor traces the DRAM model is validated on (mix5m, stream,
    /// mix5m_gap16): the same requests as the reference generator gen_trace.py, in
    /// DRAMsim3's text format (identical to its .ds3 file) or hscm's binary one, to
    /// run other simulators on or to check the generator.
    ///
    /// Example: hscm trace anchor mix5m --requests 1M --format dramsim3 -o mix5m.ds3
    Anchor {
        /// mix5m, stream or mix5m_gap16.
        name: String,
        /// Requests to write (the published runs have 5M).
        #[arg(long, default_value = "5M", value_parser = units::parse_count)]
        requests: u64,
        /// dramsim3 (text, as gen_trace.py's .ds3) or hscm (compact binary).
        #[arg(long, value_enum, default_value = "dramsim3")]
        format: hscm_lab::memsim_validation::AnchorFormat,
        /// Output file.
        #[arg(short, long, alias = "out")]
        output: PathBuf,
    },
}

/// Runs one simulator command.
pub fn run_sim(cmd: SimCmd) -> Result<()> {
    match cmd {
        SimCmd::Memory(MemoryCmd::Compare(a)) => {
            let out = memsim::compare(&a.trace, a.format, &a.config, &a.policies(), !a.json)?;
            emit(&out, a.json, memsim::print_compare)
        }
        SimCmd::Cache(a) => {
            let rows = vmsim::sim_cache(&a)?;
            if a.json {
                // The process's peak memory, beside each row: what the run needed.
                let peak = memsim::peak_rss_mb();
                let mut rows: Vec<serde_json::Value> = rows
                    .iter()
                    .map(serde_json::to_value)
                    .collect::<Result<_, _>>()?;
                for r in &mut rows {
                    r["peak_rss_mb"] = serde_json::json!(peak);
                }
                // Always an array of rows, one per policy and size, a single run too.
                hscm_lab::out::json(&rows)?;
            } else {
                vmsim::print_cache(&rows, a.csv)?;
            }
            Ok(())
        }
        SimCmd::Paging(a) => {
            let out = vmsim::sim_paging(&a, !a.json && !a.csv)?;
            if a.json {
                outln!("{}", serde_json::to_string_pretty(&out)?)?;
            } else {
                vmsim::print_paging(&out, a.csv)?;
            }
            Ok(())
        }
    }
}

/// Runs one trace command.
pub fn run_trace(cmd: TraceCmd) -> Result<()> {
    match cmd {
        TraceCmd::Convert {
            input,
            from,
            output,
            start_pc,
            instructions,
            post_cache,
            json,
        } => {
            let r = memsim::convert(&memsim::ConvertSpec {
                input: &input,
                from,
                output: &output,
                start_pc,
                instructions,
                post_cache,
                progress: !json,
            })?;
            if json {
                outln!("{}", serde_json::to_string_pretty(&r)?)?;
            } else {
                outln!(
                    "{}: {} references written ({} instructions kept; {} read, {} skipped before the start address)",
                    r.output, r.written, r.instructions, r.input_references, r.skipped_references
                )?;
            }
            Ok(())
        }
        TraceCmd::GenRequests(a) => {
            let n = vmsim::gen_requests(vmsim::request_spec(&a)?, &a.output)?;
            outln!("{}: {n} requests", a.output.display())?;
            Ok(())
        }
        TraceCmd::Anchor {
            name,
            requests,
            format,
            output,
        } => {
            use hscm_lab::memsim_validation as v;
            let n = v::write_anchor(v::anchor_named(&name)?, requests, &output, format)?;
            outln!("{}: {n} requests", output.display())?;
            Ok(())
        }
        TraceCmd::Gen(a) => {
            let n = memsim::generate(memsim::synth_spec(&a)?, &a.output)?;
            outln!("{}: {n} references", a.output.display())?;
            Ok(())
        }
    }
}

/// A hexadecimal address, with or without 0x.
fn parse_hex(s: &str) -> Result<u64, String> {
    let d = s.strip_prefix("0x").unwrap_or(s);
    u64::from_str_radix(d, 16).map_err(|_| format!("{s:?} is not a hex address"))
}

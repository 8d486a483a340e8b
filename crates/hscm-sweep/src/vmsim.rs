//! `hscm sim cache`, `hscm sim paging`, `hscm trace gen-requests`, `hscm bench cache`.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{bail, Context, Result};
use clap::Args;
use hscm_policy::cache::{AdmissionName, DEFAULT_SEQUENTIAL_CUTOFF};
use hscm_trace::{
    Format, MemRef, RequestFormat, RequestReader, RequestSynth, RequestSynthSpec, TraceError,
    TraceReader,
};
use hscm_vmsim::cache::{self, CacheResult, CacheRun, PolicyName, StorageProfile};
use hscm_vmsim::paging::{self, PagingConfig, PagingRow};
use serde::Serialize;

use crate::units;

/// A cache size: objects (a plain number), bytes (with a unit) or a share of the
/// trace's footprint (with %).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum SizeArg {
    Objects(u64),
    Bytes(u64),
    Percent(f64),
}

pub fn parse_cache_size(s: &str) -> Result<SizeArg, String> {
    let t = s.trim();
    if let Some(p) = t.strip_suffix('%') {
        let v: f64 = p
            .trim()
            .parse()
            .map_err(|_| format!("{s:?}: not a percentage"))?;
        if !(v > 0.0 && v <= 100.0) {
            return Err(format!("{s:?}: a percentage must be in (0, 100]"));
        }
        return Ok(SizeArg::Percent(v));
    }
    let size = if t.chars().all(|c| c.is_ascii_digit()) {
        t.parse()
            .map(SizeArg::Objects)
            .map_err(|_| format!("{s:?}: not a count"))?
    } else {
        units::parse_size(t).map(SizeArg::Bytes)?
    };
    if matches!(size, SizeArg::Objects(0) | SizeArg::Bytes(0)) {
        return Err(format!("{s:?}: a cache holds at least one object"));
    }
    Ok(size)
}

pub fn parse_request_format(s: &str) -> Result<RequestFormat, String> {
    RequestFormat::from_name(s).ok_or_else(|| {
        format!(
            "unknown format {s:?} (known: {})",
            RequestFormat::NAMES.join(", ")
        )
    })
}

pub fn parse_policy(s: &str) -> Result<PolicyName, String> {
    PolicyName::from_name(s).ok_or_else(|| {
        let names: Vec<_> = PolicyName::ALL.iter().map(|p| p.name()).collect();
        format!("unknown policy {s:?} (known: {})", names.join(", "))
    })
}

pub fn parse_admission(s: &str) -> Result<AdmissionName, String> {
    AdmissionName::from_name(s).ok_or_else(|| {
        let names: Vec<_> = AdmissionName::ALL.iter().map(|a| a.name()).collect();
        format!(
            "unknown admission filter {s:?} (known: {})",
            names.join(", ")
        )
    })
}

pub fn parse_profile(s: &str) -> Result<StorageProfile, String> {
    StorageProfile::from_name(s).ok_or_else(|| {
        format!(
            "unknown storage profile {s:?} (known: {})",
            StorageProfile::NAMES.join(", ")
        )
    })
}

#[derive(Args, Debug, Clone)]
pub struct CacheArgs {
    /// Request trace (plain or zstd): oracleGeneral, CSV (time,id,size), .lis, SPC,
    /// MSR Cambridge, or a valgrind lackey trace (each reference asks for its block).
    #[arg(long)]
    pub trace: PathBuf,
    /// oracle-general, csv, lis, spc, msr or lackey; detected when omitted.
    #[arg(long, value_parser = parse_request_format)]
    pub format: Option<RequestFormat>,
    /// Policies, comma-separated: lru, ac-lru, clock, fifo, arc, s3fifo, sieve, belady.
    #[arg(long, alias = "policies", value_delimiter = ',', value_parser = parse_policy, default_value = "lru")]
    pub policy: Vec<PolicyName>,
    /// Cache sizes, comma-separated: 10000 (objects), 64MiB (bytes), 10% (of the
    /// trace's footprint, in bytes; in objects with --objects).
    #[arg(long, value_delimiter = ',', value_parser = parse_cache_size, default_value = "10%")]
    pub size: Vec<SizeArg>,
    /// Count objects rather than bytes (every object weighs 1).
    #[arg(long)]
    pub objects: bool,
    /// Block size that offset/size traces (lis, spc, msr, lackey) are split into.
    #[arg(long, default_value = "4k", value_parser = units::parse_size, allow_hyphen_values = true)]
    pub block: u64,
    /// LRU only: every size from one pass over the trace (stack distances) instead of
    /// one pass per size. In bytes, every object must fit the smallest size.
    #[arg(long)]
    pub one_pass: bool,
    /// AC-LRU's ghost history in keys (default: unbounded); also the history of
    /// --admission second-miss.
    #[arg(long)]
    pub ghost: Option<usize>,
    /// Put an admission filter in front of every policy: second-miss (cache an object
    /// on its second miss within the history, forgetting it once admitted: AC-LRU's
    /// rule) or seen-before (on any miss after its first request, remembering every
    /// key: libCacheSim's bloom-filter admission, exactly). Not with ac-lru or belady.
    #[arg(long, value_parser = parse_admission)]
    pub admission: Option<AdmissionName>,
    /// The tiered volume's sequential cutoff, so the simulator predicts `hscm volume
    /// replay` with the volume's defaults: each key is placed as replay places it (the
    /// next free block on its first request), and a request in a sequential run longer
    /// than this is not admitted on a miss. 0 turns it off (as in libCacheSim).
    /// Online policies only: Belady and --one-pass ignore it.
    #[arg(long, value_parser = units::parse_size, default_value = units::size_arg(hscm_policy::cache::DEFAULT_SEQUENTIAL_CUTOFF))]
    pub sequential_cutoff: u64,
    /// Storage behind the cache for the headline access time: hdd, ssd, scm, dram
    /// (all four are in `access_times`).
    #[arg(long, value_parser = parse_profile, default_value = "scm")]
    pub profile: StorageProfile,
    /// JSON: an array with one object per policy and size, whatever their number
    /// (docs/vmsim.md lists the fields); a failure prints {"ok": false, "error": ...}.
    #[arg(long)]
    pub json: bool,
    /// CSV rows instead of the table.
    #[arg(long, conflicts_with = "json")]
    pub csv: bool,
}

fn open_requests(
    path: &Path,
    format: Option<RequestFormat>,
    block: u64,
) -> Result<RequestReader, TraceError> {
    RequestReader::open(path, format, u32::try_from(block).unwrap_or(u32::MAX))
}

/// `hscm sim cache`, with a progress line unless the output is JSON or CSV.
pub fn sim_cache(a: &CacheArgs) -> Result<Vec<CacheResult>> {
    run_cache(a, !a.json && !a.csv)
}

/// `hscm sim cache` without a progress line (for library callers).
pub fn sim_cache_quiet(a: &CacheArgs) -> Result<Vec<CacheResult>> {
    run_cache(a, false)
}

fn run_cache(a: &CacheArgs, progress: bool) -> Result<Vec<CacheResult>> {
    let probe = open_requests(&a.trace, a.format, a.block)?;
    let format = probe.format();
    drop(probe);
    let objects = a.objects || a.size.iter().any(|s| matches!(s, SizeArg::Objects(_)));
    if objects && a.size.iter().any(|s| matches!(s, SizeArg::Bytes(_))) {
        bail!("--size mixes object counts and byte sizes; use one kind (or --objects with counts)");
    }
    let footprint = if a.size.iter().any(|s| matches!(s, SizeArg::Percent(_))) {
        Some(cache::footprint(open_requests(
            &a.trace,
            Some(format),
            a.block,
        )?)?)
    } else {
        None
    };
    let capacities: Vec<u64> = a
        .size
        .iter()
        .map(|s| match *s {
            SizeArg::Objects(n) | SizeArg::Bytes(n) => n.max(1),
            SizeArg::Percent(p) => {
                let (n, bytes) = footprint.expect("computed above");
                (((if objects { n } else { bytes }) as f64) * p / 100.0)
                    .round()
                    .max(1.0) as u64
            }
        })
        .collect();
    let mut profiles = vec![a.profile];
    for n in StorageProfile::NAMES {
        if *n != a.profile.name {
            profiles.push(StorageProfile::from_name(n).expect("known"));
        }
    }
    if a.one_pass {
        if a.policy != [PolicyName::Lru] || a.admission.is_some() {
            bail!("--one-pass works for --policy lru only, without --admission");
        }
        let bar = progress.then(|| {
            crate::par::spinner(
                format!(
                    "{} (one pass, {} sizes)",
                    a.trace.display(),
                    capacities.len()
                ),
                "requests",
            )
        });
        let reqs = open_requests(&a.trace, Some(format), a.block)?;
        let trace = a.trace.display().to_string();
        let rows = cache::lru_one_pass(
            &trace,
            &capacities,
            objects,
            &profiles,
            reqs,
            &mut crate::par::ticker(bar.as_ref()),
        )?;
        if let Some(b) = bar {
            b.finish_and_clear();
        }
        return Ok(rows);
    }
    let jobs: Vec<(PolicyName, u64)> = a
        .policy
        .iter()
        .flat_map(|&p| capacities.iter().map(move |&c| (p, c)))
        .collect();
    let bar = progress.then(|| {
        crate::par::spinner(
            format!("{} × {} runs", a.trace.display(), jobs.len()),
            "requests",
        )
    });
    let trace = a.trace.display().to_string();
    let results = crate::par::map(&jobs, |&(policy, capacity)| -> Result<CacheResult> {
        let reqs = open_requests(&a.trace, Some(format), a.block)?;
        let spec = CacheRun {
            trace: &trace,
            policy,
            capacity,
            objects,
            ghost_entries: a.ghost,
            admission: a.admission,
            profiles: &profiles,
            sequential_cutoff: a.sequential_cutoff,
        };
        Ok(cache::run(
            &spec,
            reqs,
            &mut crate::par::ticker(bar.as_ref()),
        )?)
    });
    if let Some(b) = bar {
        b.finish_and_clear();
    }
    results
        .into_iter()
        .zip(&jobs)
        .map(|(r, (p, c))| r.with_context(|| format!("{} at size {c}", p.name())))
        .collect()
}

pub fn print_cache(rows: &[CacheResult], csv: bool) -> anyhow::Result<()> {
    if csv {
        outln!("trace,policy,cache_size,size_unit,requests,miss_ratio,byte_miss_ratio,inserted,bypassed,profile,with_cache_s,without_cache_s,requests_per_s")?;
        for r in rows {
            outln!(
                "{},{},{},{},{},{:.6},{:.6},{},{},{},{:.6},{:.6},{:.0}",
                r.trace,
                r.policy,
                r.cache_size,
                r.size_unit,
                r.requests,
                r.miss_ratio,
                r.byte_miss_ratio,
                r.inserted,
                r.bypassed,
                r.access_time.profile,
                r.access_time.with_cache_s,
                r.access_time.without_cache_s,
                r.requests_per_s
            )?;
        }
        return Ok(());
    }
    outln!(
        "{:<8} {:>14} {:>10} {:>10} {:>10} {:>10} {:>23} {:>10}",
        "policy",
        "size",
        "miss",
        "byte miss",
        "inserted",
        "bypassed",
        "time (s) with / without",
        "gain"
    )?;
    for r in rows {
        let size = if r.size_unit == "bytes" {
            units::human_bytes(r.cache_size)
        } else {
            format!("{} obj", r.cache_size)
        };
        outln!(
            "{:<8} {:>14} {:>10.6} {:>10.6} {:>10} {:>10} {:>11.4} / {:<9.4} {:>9.1}%",
            r.policy,
            size,
            r.miss_ratio,
            r.byte_miss_ratio,
            r.inserted,
            r.bypassed,
            r.access_time.with_cache_s,
            r.access_time.without_cache_s,
            r.access_time.gain * 100.0
        )?;
    }
    if let Some(r) = rows.first() {
        let p = StorageProfile::from_name(&r.access_time.profile).expect("known");
        outln!("access time on `{}` storage (t = {} µs per 4 KiB hit, T = {} µs, Tm = {} µs): caching pays for an item accessed more than {:.2} times (eq. 3).",
            p.name, p.hit_us, p.storage_us, p.storage_insert_us, p.break_even())?;
    }
    Ok(())
}

#[derive(Args, Debug, Clone)]
pub struct PagingArgs {
    /// Virtual-address trace: valgrind lackey (plain or zstd) or any memory trace
    /// hscm reads.
    #[arg(long)]
    pub trace: PathBuf,
    /// lackey, ramulator, dramsim3, nvmain, dramsys or hscm; detected when omitted.
    #[arg(long, value_parser = crate::memsim::parse_format)]
    pub format: Option<Format>,
    /// Page sizes, comma-separated.
    #[arg(long, value_delimiter = ',', value_parser = units::parse_size, default_value = "512,1k,2k,4k,8k,16k,32k,64k")]
    pub page_sizes: Vec<u64>,
    /// Storage latency as multiples of memory latency, comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "1,10,100,1000")]
    pub latency_x: Vec<f64>,
    /// Physical memory: a size (e.g. 4M) or a share of the trace's footprint (e.g. 50%).
    #[arg(long, default_value = "50%")]
    pub memory: String,
    /// TLB entries.
    #[arg(long, default_value_t = 64)]
    pub tlb: usize,
    /// TLB ways per set (0: fully associative).
    #[arg(long, default_value_t = 4)]
    pub tlb_ways: usize,
    /// t_e, one TLB access, in ns.
    #[arg(long, default_value_t = 1.0)]
    pub t_e_ns: f64,
    /// t_r, one memory access, in ns.
    #[arg(long, default_value_t = 100.0)]
    pub t_r_ns: f64,
    /// Added to every page fault (a disk's seek); 0 for SCM.
    #[arg(long, default_value_t = 0.0)]
    pub seek_ns: f64,
    /// Newly loaded pages start with the reference bit clear.
    #[arg(long)]
    pub no_ref_on_load: bool,
    /// TLB hits do not set the reference bit.
    #[arg(long)]
    pub tlb_hit_no_ref: bool,
    /// Keep TLB entries of evicted pages (they can never hit).
    #[arg(long)]
    pub keep_tlb_on_evict: bool,
    /// Count data references only (no instruction fetches).
    #[arg(long)]
    pub data_only: bool,
    /// Print JSON (a stable contract) instead of text; a failure prints {"ok": false, "error": ...}.
    #[arg(long)]
    pub json: bool,
    /// CSV rows instead of the table.
    #[arg(long, conflicts_with = "json")]
    pub csv: bool,
}

#[derive(Serialize)]
pub struct PagingOutput {
    pub trace: String,
    pub memory_bytes: u64,
    /// Measured only when --memory is a share of it.
    pub footprint_bytes: Option<u64>,
    pub config: PagingConfig,
    pub rows: Vec<PagingRow>,
    /// Best page size (lowest T_TOTAL) per storage latency.
    pub best: Vec<(f64, u64)>,
}

fn open_refs(path: &Path, format: Option<Format>) -> Result<TraceReader, hscm_vmsim::VmError> {
    Ok(TraceReader::open(path, format)?)
}

pub fn sim_paging(a: &PagingArgs, progress: bool) -> Result<PagingOutput> {
    // A memory size given as a share needs the footprint (in 4 KiB pages) first: an
    // extra pass over the trace, made only then.
    let footprint = || -> Result<u64> {
        let mut pages = rustc_hash::FxHashSet::default();
        for r in open_refs(&a.trace, a.format)? {
            let r: MemRef = r?;
            if !(a.data_only && r.kind == hscm_trace::Access::Fetch) {
                pages.insert(r.addr >> 12);
            }
        }
        Ok(pages.len() as u64 * 4096)
    };
    let (memory_bytes, footprint_bytes) = match a.memory.trim().strip_suffix('%') {
        Some(p) => {
            let v: f64 = p
                .trim()
                .parse()
                .map_err(|_| anyhow::anyhow!("--memory {:?}: not a percentage", a.memory))?;
            anyhow::ensure!(
                v > 0.0 && v <= 100.0,
                "--memory {:?}: a share of the footprint must be in (0, 100]%",
                a.memory
            );
            let f = footprint()?;
            (((f as f64 * v / 100.0) as u64).max(512), Some(f))
        }
        None => (
            units::parse_size(&a.memory).map_err(anyhow::Error::msg)?,
            None,
        ),
    };
    let smallest_page = a.page_sizes.iter().copied().min().unwrap_or(0);
    anyhow::ensure!(
        smallest_page > 0,
        "--page-sizes: every page size must be positive"
    );
    anyhow::ensure!(
        memory_bytes >= smallest_page,
        "--memory {}: physical memory must hold at least one page ({smallest_page} bytes)",
        a.memory
    );
    let cfg = PagingConfig {
        page_sizes: a.page_sizes.clone(),
        tlb_entries: a.tlb,
        tlb_ways: a.tlb_ways,
        memory_bytes,
        latency_x: a.latency_x.clone(),
        t_e_ns: a.t_e_ns,
        t_r_ns: a.t_r_ns,
        seek_ns: a.seek_ns,
        ref_on_load: !a.no_ref_on_load,
        tlb_hit_sets_ref: !a.tlb_hit_no_ref,
        evict_drops_tlb: !a.keep_tlb_on_evict,
        data_only: a.data_only,
    };
    let bar = progress.then(|| {
        crate::par::spinner(
            format!(
                "{} × {} page sizes",
                a.trace.display(),
                cfg.page_sizes.len()
            ),
            "references",
        )
    });
    let fmt = a.format;
    let path = a.trace.clone();
    let open = move || open_refs(&path, fmt);
    let tick = |n: u64| {
        if let Some(b) = &bar {
            b.inc(n);
        }
    };
    let rows = paging::sweep(&cfg, &open, &tick)?;
    if let Some(b) = bar {
        b.finish_and_clear();
    }
    let best = cfg
        .latency_x
        .iter()
        .map(|&x| {
            let b = rows
                .iter()
                .filter(|r| r.latency_x == x)
                .min_by(|p, q| p.t_total_ns.total_cmp(&q.t_total_ns))
                .map_or(0, |r| r.page_size);
            (x, b)
        })
        .collect();
    Ok(PagingOutput {
        trace: a.trace.display().to_string(),
        memory_bytes,
        footprint_bytes,
        config: cfg,
        rows,
        best,
    })
}

pub fn print_paging(o: &PagingOutput, csv: bool) -> anyhow::Result<()> {
    if csv {
        outln!("page_size,latency_x,tlb_hit_rate,fault_rate,t_addr_ns,t_data_ns,t_total_ns")?;
        for r in &o.rows {
            outln!(
                "{},{},{:.6},{:.6},{:.3},{:.3},{:.3}",
                r.page_size,
                r.latency_x,
                r.tlb_hit_rate,
                r.fault_rate,
                r.t_addr_ns,
                r.t_data_ns,
                r.t_total_ns
            )?;
        }
        return Ok(());
    }
    outln!(
        "trace {}: footprint {}, memory {}, TLB {} entries",
        o.trace,
        o.footprint_bytes
            .map_or("not measured".into(), units::human_bytes),
        units::human_bytes(o.memory_bytes),
        o.config.tlb_entries
    )?;
    outln!(
        "{:>9} {:>8} {:>9} {:>10} {:>10} {:>10} {:>12}",
        "page",
        "storage",
        "TLB hit",
        "faults",
        "T_ADDR ns",
        "T_DATA ns",
        "T_TOTAL ns"
    )?;
    for r in &o.rows {
        outln!(
            "{:>9} {:>7}x {:>8.4}% {:>9.5}% {:>10.2} {:>10.2} {:>12.2}",
            units::human_bytes(r.page_size),
            r.latency_x,
            r.tlb_hit_rate * 100.0,
            r.fault_rate * 100.0,
            r.t_addr_ns,
            r.t_data_ns,
            r.t_total_ns
        )?;
    }
    for (x, p) in &o.best {
        outln!("best page size at {x}x: {}", units::human_bytes(*p))?;
    }
    Ok(())
}

#[derive(Args)]
pub struct GenRequestsArgs {
    /// Requests to generate (e.g. 10M).
    #[arg(long, default_value = "10M", value_parser = units::parse_count)]
    pub requests: u64,
    /// Distinct objects the requests draw from (e.g. 1M).
    #[arg(long, default_value = "1M", value_parser = units::parse_count)]
    pub objects: u64,
    /// Zipf exponent (0: uniform).
    #[arg(long, default_value_t = 1.0)]
    pub alpha: f64,
    /// Share of requests for objects never requested again.
    #[arg(long, default_value_t = 0.0)]
    pub one_time: f64,
    /// Share of requests from a sequential scan.
    #[arg(long, default_value_t = 0.0)]
    pub scan: f64,
    /// Share of requests from a loop over --loop-len objects.
    #[arg(long = "loop", default_value_t = 0.0)]
    pub loop_share: f64,
    /// Objects in the loop (--loop).
    #[arg(long, default_value_t = 1000)]
    pub loop_len: u64,
    /// Size of every object (e.g. 4k).
    #[arg(long, default_value = "4k", value_parser = units::parse_size, allow_hyphen_values = true)]
    pub object_size: u64,
    /// Seed of the random draws.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Output (libCacheSim oracleGeneral; zstd-compressed when the name ends in .zst).
    #[arg(short, long, alias = "out")]
    pub output: PathBuf,
}

pub fn request_spec(a: &GenRequestsArgs) -> Result<RequestSynthSpec> {
    let shares = a.one_time + a.scan + a.loop_share;
    if [a.one_time, a.scan, a.loop_share]
        .iter()
        .any(|s| !(0.0..=1.0).contains(s))
        || shares > 1.0
    {
        bail!("--one-time, --scan and --loop are shares that add up to at most 1");
    }
    if a.objects == 0 {
        bail!("--objects must be at least 1");
    }
    Ok(RequestSynthSpec {
        requests: a.requests,
        objects: a.objects,
        alpha: a.alpha,
        one_time_share: a.one_time,
        scan_share: a.scan,
        loop_share: a.loop_share,
        loop_len: a.loop_len,
        size: u32::try_from(a.object_size).context("--object-size above 4 GiB")?,
        seed: a.seed,
    })
}

/// Writes a synthetic trace as oracleGeneral with next-access indices filled in.
pub fn gen_requests(spec: RequestSynthSpec, output: &Path) -> Result<u64> {
    // Every request and its next-use index are held until written (about 48 bytes).
    units::ensure_fits_in_memory(
        &format!("generating {} requests", spec.requests),
        u128::from(spec.requests) * 48,
    )?;
    let reqs: Vec<hscm_trace::Request> = RequestSynth::new(spec).collect();
    let next = cache::next_uses(&reqs);
    let out = crate::scratch::OutputFile::create(output)?;
    let what = || format!("cannot write {}", output.display());
    let file = std::io::BufWriter::new(out.file()?);
    if output.extension().is_some_and(|e| e == "zst") {
        let mut w = zstd::Encoder::new(file, 3).with_context(what)?;
        write_requests(&mut w, &reqs, &next).with_context(what)?;
        w.finish().with_context(what)?.flush().with_context(what)?;
    } else {
        let mut w = file;
        write_requests(&mut w, &reqs, &next).with_context(what)?;
        w.flush().with_context(what)?;
    }
    out.commit()?;
    Ok(reqs.len() as u64)
}

fn write_requests(
    w: &mut impl Write,
    reqs: &[hscm_trace::Request],
    next: &[u64],
) -> std::io::Result<()> {
    for (r, n) in reqs.iter().zip(next) {
        hscm_trace::write_oracle_general(w, r.time as u32, r.key, r.size, Some(*n))?;
    }
    Ok(())
}

#[derive(Serialize)]
pub struct CacheBench {
    pub requests: u64,
    pub objects: u64,
    pub cache_objects: u64,
    pub runs: Vec<CacheBenchRun>,
    pub lru_requests_per_cpu_s: f64,
    /// LRU as `hscm sim cache` runs it by default (the volume's sequential cutoff and
    /// replay's placement), and its speed over LRU without them (`--sequential-cutoff 0`).
    pub lru_volume_default_requests_per_cpu_s: f64,
    pub volume_default_vs_no_cutoff: f64,
    /// Peak resident memory of an LRU run in its own process.
    pub peak_rss_mb: f64,
}

#[derive(Serialize)]
pub struct CacheBenchRun {
    pub policy: String,
    pub cpu_s: f64,
    pub requests_per_cpu_s: f64,
    pub miss_ratio: f64,
    /// CPU time over LRU's.
    pub vs_lru: f64,
}

pub fn bench_cache(requests: u64, objects: u64, progress: bool) -> Result<CacheBench> {
    let dir = crate::scratch::Scratch::new("cache", None)?;
    let path = dir.path().join("zipf.oracleGeneral");
    if progress {
        note!("generating {requests} Zipf(1.0) requests over {objects} objects…");
    }
    gen_requests(RequestSynthSpec::zipf(requests, objects, 1.0), &path)?;
    // The same trace zstd-compressed, to show what decompression adds.
    let zst = dir.path().join("zipf.oracleGeneral.zst");
    {
        let mut input = std::fs::File::open(&path)?;
        let mut enc = zstd::Encoder::new(std::io::BufWriter::new(std::fs::File::create(&zst)?), 3)?;
        std::io::copy(&mut input, &mut enc)?;
        enc.finish()?.flush()?;
    }
    let cache_objects = (objects / 10).max(1);
    let profiles = vec![StorageProfile::from_name("scm").expect("known")];
    let mut runs: Vec<CacheBenchRun> = Vec::new();
    let plan = [
        // libCacheSim has no sequential cutoff: only the last run has one.
        (PolicyName::Lru, &path, 0),
        (PolicyName::AcLru, &path, 0),
        (PolicyName::Clock, &path, 0),
        (PolicyName::Sieve, &path, 0),
        (PolicyName::S3fifo, &path, 0),
        (PolicyName::Arc, &path, 0),
        (PolicyName::Fifo, &path, 0),
        (PolicyName::Lru, &zst, 0),
        (PolicyName::Lru, &path, DEFAULT_SEQUENTIAL_CUTOFF),
    ];
    for (policy, file, sequential_cutoff) in plan {
        let reqs = RequestReader::open(file, None, 4096)?;
        let spec = CacheRun {
            trace: "zipf",
            policy,
            capacity: cache_objects,
            objects: true,
            ghost_entries: None,
            admission: None,
            profiles: &profiles,
            sequential_cutoff,
        };
        let c0 = crate::memsim::cpu_seconds();
        let w0 = Instant::now();
        let r = cache::run(&spec, reqs, &mut |_| {})?;
        let cpu = (crate::memsim::cpu_seconds() - c0).max(1e-9);
        let label = if *file == zst {
            format!("{} (zstd input)", policy.name())
        } else if sequential_cutoff > 0 {
            format!("{} (volume default)", policy.name())
        } else {
            policy.name().to_string()
        };
        if progress {
            note!(
                "{label:<18} {:.1} M requests/CPU-s ({:.2} s wall)",
                requests as f64 / cpu / 1e6,
                w0.elapsed().as_secs_f64()
            );
        }
        let lru_cpu = runs.first().map_or(cpu, |l| l.cpu_s);
        runs.push(CacheBenchRun {
            policy: label,
            cpu_s: cpu,
            requests_per_cpu_s: requests as f64 / cpu,
            miss_ratio: r.miss_ratio,
            vs_lru: cpu / lru_cpu,
        });
    }
    // Memory is measured on LRU alone in a fresh process: this one has held the
    // generated trace and every other run.
    let child = std::process::Command::new(std::env::current_exe()?)
        .args([
            "sim",
            "cache",
            "--policy",
            "lru",
            "--objects",
            "--json",
            "--size",
        ])
        .arg(cache_objects.to_string())
        .arg("--trace")
        .arg(&path)
        .output()
        .context("running `hscm sim cache` to measure its memory")?;
    if !child.status.success() {
        bail!(
            "`hscm sim cache` failed: {}",
            String::from_utf8_lossy(&child.stderr)
        );
    }
    let v: serde_json::Value = serde_json::from_slice(&child.stdout)?;
    // One row: the one policy at the one size.
    let peak_rss_mb = v[0]["peak_rss_mb"]
        .as_f64()
        .context("peak_rss_mb in `hscm sim cache --json`")?;
    let volume_default = runs
        .last()
        .expect("the plan is not empty")
        .requests_per_cpu_s;
    Ok(CacheBench {
        requests,
        objects,
        cache_objects,
        lru_requests_per_cpu_s: runs[0].requests_per_cpu_s,
        lru_volume_default_requests_per_cpu_s: volume_default,
        volume_default_vs_no_cutoff: volume_default / runs[0].requests_per_cpu_s,
        runs,
        peak_rss_mb,
    })
}

/// Prints `hscm bench cache` as text: one line per policy, then the peak memory.
pub fn print_bench_cache(r: &CacheBench) -> Result<()> {
    for run in &r.runs {
        outln!(
            "{:<8} {:>7.1} M requests/CPU-s  miss ratio {:.4}  CPU {:.2}x LRU",
            run.policy,
            run.requests_per_cpu_s / 1e6,
            run.miss_ratio,
            run.vs_lru
        )?;
    }
    let with_defaults = r.volume_default_vs_no_cutoff;
    outln!("LRU with the volume's cutoff and placement: {with_defaults:.2}x its speed without")?;
    outln!("peak RSS {:.1} MB", r.peak_rss_mb)?;
    Ok(())
}

//! The `hscm` command. Thin: every capability lives in a library crate.

#[macro_use]
extern crate hscm_lab;

mod crash;
mod errors;
mod kv_check;
mod mount_cmd;
mod nbd_cmd;
mod serve_cmd;
mod service_cmd;
mod sweep_cmd;
mod tier_cmd;
mod volume_cmd;

use std::path::PathBuf;

use anyhow::{Context, Result};
use clap::builder::TypedValueParser as _;
use clap::{Args, CommandFactory, Parser, Subcommand};
use hscm_volume::Durability;

use hscm_lab::volume::{TargetKind, Workload};
use hscm_lab::{kv, memsim, report, ring, scratch, units, vmsim, volume as bench};

/// hscm: the DRAM + storage-class-memory + flash hierarchy, real and measurable.
///
/// Start with `hscm volume create`, then `hscm bench volume` to see what it does on
/// this machine, or `hscm reproduce` to run every experiment and write the report.
/// Set HSCM_LOG=info (or debug) for more detail on standard error.
#[derive(Parser)]
#[command(name = "hscm", version, propagate_version = true)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Create, inspect and check durable hybrid RAM volumes.
    #[command(subcommand)]
    Volume(VolumeCmd),
    /// Benchmarks: ours against baselines measured in the same run.
    #[command(subcommand)]
    Bench(BenchCmd),
    /// Serve a volume to local processes over shared-memory queues (submission and
    /// completion rings plus a data buffer per client; docs/ring.md). Rust clients use
    /// the hscm-ring crate, C programs include/hscm_ring.h.
    ///
    /// Example: hscm serve data.hscm --shm data   (clients connect to "data")
    Serve(serve_cmd::ServeArgs),
    /// Serve a volume as an NBD export (qemu, nbdinfo, nbdcopy, nbdfuse, fio's nbd
    /// engine, the kernel's nbd client). Prints the URI it serves on standard output;
    /// stops cleanly on SIGINT/SIGTERM. Started by libnbd tools through systemd socket
    /// activation too: `nbdinfo -- [ hscm nbd data.hscm ]`.
    ///
    /// Example: hscm nbd data.hscm --socket /run/data.sock   then   nbdinfo 'nbd+unix:///?socket=/run/data.sock'
    Nbd(nbd_cmd::NbdArgs),
    /// Mount a volume's file system (FUSE): a directory that reads at RAM speed and,
    /// in immediate mode, keeps every write, create and rename it acknowledged across
    /// a power cut. Serves from a background process unless --foreground; usable at
    /// once, while the volume warms. Make the volume with `hscm volume create --fs`.
    ///
    /// Example: hscm volume create logs.hscm --size 2G --fs && hscm mount logs.hscm /var/log/app
    Mount(mount_cmd::MountArgs),
    /// Unmount an `hscm mount` and wait until its process has committed and closed
    /// the volume.
    ///
    /// Example: hscm umount /var/log/app
    Umount(mount_cmd::UmountArgs),
    /// What every running `hscm nbd`, `mount` and `serve` of this user is doing: what
    /// it serves and where, size and use, load, durability, dirty and journal state,
    /// tier hit ratios, device writes, clients, and health (why it refuses writes).
    ///
    /// Example: hscm status /var/log --json
    Status(service_cmd::StatusArgs),
    /// Configuration files of the long-running commands (`--config FILE`).
    #[command(subcommand)]
    Config(service_cmd::ConfigCmd),
    /// Energy-aware key-value store over several devices (after the Sprint-AEP paper): Standard
    /// (every device active) against Sprint (a few primaries absorb the rest).
    #[command(subcommand)]
    Kv(KvCmd),
    /// Simulators for memory nobody can buy (`hscm sim memory compare --help`).
    #[command(subcommand)]
    Sim(SimCmd),
    /// Convert and generate traces (scripts/capture-traces.sh captures real programs with valgrind).
    #[command(subcommand)]
    Trace(TraceCmd),
    /// Run a parameter sweep over a simulator: a TOML spec (base parameters, grid or
    /// zipped axes, seeds) run on local processes, Dask or Ray into a Parquet table,
    /// resumed where a killed run stopped. Needs the hscm Python package
    /// (scripts/python-env.sh).
    ///
    /// Example: hscm sweep examples/warm_sweep.toml --executor local --out warm-sweep
    Sweep(sweep_cmd::SweepArgs),
    /// Run every implemented experiment and write a report (Markdown, JSON, SVG plots)
    /// with the published figure beside ours.
    Reproduce(ReproduceArgs),
    /// Print a shell completion script: `hscm completions bash > /etc/bash_completion.d/hscm`
    /// (bash, zsh, fish, elvish, powershell).
    Completions {
        /// The shell to complete in.
        shell: clap_complete::Shell,
    },
    /// Print the manual page (roff), or with --dir write one page per command there.
    ///
    /// Example: hscm man | man -l -     or     hscm man --dir /usr/local/share/man/man1
    Man {
        /// Write hscm.1 and hscm-COMMAND.1 for every command into this directory.
        #[arg(long)]
        dir: Option<PathBuf>,
    },
    /// Helpers for the test suite (not a stable interface).
    #[command(subcommand, hide = true)]
    Debug(DebugCmd),
}

#[derive(Subcommand)]
enum VolumeCmd {
    /// Create a volume: a 4 KiB header, two checkpoint slots, a write-ahead journal and
    /// the data area, in a new file (space is reserved up front) or on a block device.
    /// With --ram, a tiered volume instead: larger than RAM, every block on the file
    /// (its home), the hot ones also in that much DRAM, every write durable on home
    /// before it is acknowledged.
    ///
    /// Example: hscm volume create /var/lib/app.hscm --size 4G --chunk 1M
    /// Example: hscm volume create /srv/big.hscm --size 64G --ram 4G --policy s3fifo
    Create {
        /// File to create (or, with --force, a block device to format).
        path: PathBuf,
        /// Data area size (e.g. 512M, 4G); a multiple of 4 KiB.
        #[arg(long, value_parser = units::parse_size, allow_hyphen_values = true)]
        size: u64,
        /// Unit of warm-up and locking after a restart (e.g. 256k, 1M, 4M).
        #[arg(long, default_value = "1M", value_parser = units::parse_size, allow_hyphen_values = true)]
        chunk: u64,
        /// Default durability: `immediate` (a write returns once it survives power
        /// loss) or `on-flush` (block-device semantics: durable after a flush).
        #[arg(long, default_value = "immediate")]
        durability: Durability,
        /// Write-ahead journal size (0: none, every write goes straight home, as the
        /// paper's design). With a journal, concurrent writers share one sequential
        /// write and one sync per batch, and a background checkpoint writes changes
        /// home in large sequential spans. It pays off for random writes when it is
        /// about as large as the data they touch (the hot set); smaller, it costs more
        /// than it saves (docs/design.md). At least 256K. After a crash, opening
        /// replays at most one journal's worth.
        #[arg(long, default_value = "0", value_parser = units::parse_size, allow_hyphen_values = true)]
        journal: u64,
        /// Overwrite an existing file at PATH (never one another process has open).
        #[arg(long)]
        force: bool,
        /// Create it even though it is larger than this machine's memory and swap (for
        /// another machine: the whole volume lives in RAM, so it cannot open here).
        #[arg(long)]
        larger_than_ram: bool,
        /// Format it with hscm's file system, for `hscm mount` (root directory owned by
        /// the caller).
        #[arg(long)]
        fs: bool,
        /// Make it a tiered volume with this much DRAM for the hot blocks (e.g. 4G); the
        /// volume may then be far larger than RAM. With --fs: a file system that
        /// holds at most this much of its files' data in RAM (the hot files; the rest
        /// is read from the device), so it too may be larger than RAM; `hscm mount`
        /// takes the budget from the volume (its --ram overrides it).
        #[arg(long, value_parser = units::parse_size, allow_hyphen_values = true, conflicts_with_all = ["journal", "larger_than_ram"])]
        ram: Option<u64>,
        /// Tiered: the unit of caching, 4K to 1M [default: 4k].
        #[arg(long, value_parser = units::parse_size, allow_hyphen_values = true, requires = "ram")]
        block: Option<u64>,
        /// Tiered: which blocks stay in DRAM, as `hscm sim cache` names the policies
        /// (lru, ac-lru, clock, fifo, arc, s3fifo, sieve) [default: lru].
        #[arg(long, value_parser = vmsim::parse_policy, requires = "ram")]
        policy: Option<hscm_vmsim::cache::PolicyName>,
        /// Tiered: admission to DRAM: always (every missed block), second-miss or
        /// seen-before (on a repeated request: Park & Bahn's admission control) [default:
        /// always].
        #[arg(long, value_parser = parse_tier_admission, requires = "ram")]
        admission: Option<TierAdmission>,
        /// Tiered: a sequential run longer than this bypasses DRAM so a scan does not
        /// wash out the hot set (0: off) [default: 4M].
        #[arg(long, value_parser = units::parse_size, allow_hyphen_values = true, requires = "ram")]
        sequential_cutoff: Option<u64>,
        /// Tiered: a durable fast tier between DRAM and home, on this file (created) or
        /// device (standing for SCM, Optane or NVMe); needs --fast-size. A relative path
        /// is kept relative to the volume's directory.
        #[arg(long, requires_all = ["ram", "fast_size"])]
        fast_tier: Option<PathBuf>,
        /// Tiered: bytes of blocks the fast tier caches (e.g. 16G); the device also
        /// holds a reserve of 1/16 more slots and 32 bytes of record per slot.
        #[arg(long, value_parser = units::parse_size, allow_hyphen_values = true, requires = "fast_tier")]
        fast_size: Option<u64>,
        /// Tiered with a fast tier: where a write is durable before it is acknowledged.
        /// write-back: on the fast tier, copied home later in block order (a failed
        /// fast tier holding dirty blocks makes the volume read-only); write-through: on
        /// home, the fast tier keeps clean copies (a failed one is dropped, the volume
        /// goes on pass-through) [default: write-back].
        #[arg(long, value_parser = parse_write_mode, requires = "fast_tier")]
        write_mode: Option<hscm_tier::WriteMode>,
        /// Tiered with a fast tier: its eviction policy, named as --policy [default: lru].
        #[arg(long, value_parser = vmsim::parse_policy, requires = "fast_tier")]
        fast_policy: Option<hscm_vmsim::cache::PolicyName>,
        /// Tiered with a fast tier: its admission filter for read misses, named as
        /// --admission (writes in write-back mode are always admitted) [default: always].
        #[arg(long, value_parser = parse_tier_admission, requires = "fast_tier")]
        fast_admission: Option<TierAdmission>,
    },
    /// A tiered volume's counters, as it saved them: while a server runs it (every few
    /// seconds, `state: open`) and at every clean close (`closed`). Hits, partial hits
    /// and misses per tier and operation, bypasses by reason, promotions, evictions,
    /// occupancy, device reads, writes and syncs; this session's and the volume's
    /// lifetime. Reads the file without opening the volume, so it works while the volume
    /// is served.
    ///
    /// Example: hscm volume stats /srv/big.hscm --json
    Stats {
        /// The tiered volume's file or device.
        path: PathBuf,
        /// Print JSON (a stable contract) instead of text; a failure prints {"ok": false, "error": ...}.
        #[arg(long)]
        json: bool,
    },
    /// Replay a block trace through a tiered volume, reading and writing its blocks
    /// (each write rewrites the block's own bytes, so the data is unchanged), and count
    /// DRAM hits and misses: for the same policy and size they equal what `hscm sim
    /// cache --size RAM --block BLOCK` predicts (with the sequential cutoff off).
    ///
    /// Example: hscm volume replay /srv/big.hscm --trace web.msr.csv --json
    Replay {
        /// The tiered volume (not in use by another process).
        path: PathBuf,
        /// Block trace (plain or zstd), any format `hscm sim cache` reads.
        #[arg(long)]
        trace: PathBuf,
        /// oracle-general, csv, lis, spc, msr or lackey; detected when omitted.
        #[arg(long, value_parser = vmsim::parse_request_format)]
        format: Option<hscm_trace::RequestFormat>,
        /// One JSON object (a stable contract): {"requests", "tiers": [{"tier", "hits",
        /// "misses", …}], …}; a failure prints {"ok": false, "error": ...}.
        #[arg(long)]
        json: bool,
    },
    /// Show a volume's header and geometry; with --load, open it and time the warm-up.
    Info {
        /// The volume's file or block device.
        path: PathBuf,
        /// Open the volume read-only and warm it into RAM, with a progress bar.
        #[arg(long)]
        load: bool,
        /// Print JSON (a stable contract) instead of text; a failure prints {"ok": false, "error": ...}.
        #[arg(long)]
        json: bool,
    },
    /// Validate header (magic, version, checksum) and geometry against the backing
    /// store. Exits non-zero with the reason on any problem.
    Check {
        /// The volume's file or block device.
        path: PathBuf,
        /// Print JSON (a stable contract) instead of text; a failure prints {"ok": false, "error": ...}.
        #[arg(long)]
        json: bool,
    },
}

#[derive(Subcommand)]
enum KvCmd {
    /// Create an empty store in DIR: a manifest and one directory per device.
    ///
    /// Example: hscm kv create /srv/kv --devices 4
    Create {
        /// Directory of the new store (created if absent).
        dir: PathBuf,
        /// Devices: one directory each, holding that device's logs.
        #[arg(long, default_value_t = 4)]
        devices: usize,
    },
    /// Read every log of a store (home logs and buffer logs) without changing it;
    /// exits non-zero naming file and byte of any damaged record.
    Check {
        /// The store's directory.
        dir: PathBuf,
        /// Print JSON (a stable contract) instead of text; a failure prints {"ok": false, "error": ...}.
        #[arg(long)]
        json: bool,
    },
    /// Load a YCSB dataset on scratch devices, warm up, then measure one mode on one
    /// workload: throughput, read/write p99, modelled energy, EDP, idle-device reads.
    ///
    /// Example: hscm kv bench --mode sprint --workload a-t --json
    Bench(kv::KvBenchArgs),
    /// Every mode on every workload, equal-time energy over the slowest run, printed
    /// beside the paper's figures.
    ///
    /// Example: hscm kv compare --workloads a-t,a --records 10000 --ops 20000
    Compare(kv::KvCompareArgs),
}

#[derive(Subcommand)]
enum SimCmd {
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
enum MemoryCmd {
    /// Run every policy (dram-only, pcm-only, static, warm, rapp) on one trace and
    /// print energy, performance and energy-delay product normalised to DRAM-only, as
    /// Sun et al. 2020's Figures 8-10.
    ///
    /// Example: hscm sim memory compare --trace traces/cjpeg.hscm.zst
    /// Example: hscm trace gen --kind hot-writes -o hot.hscm.zst && hscm sim memory compare --trace hot.hscm.zst --json
    Compare(memsim::CompareArgs),
}

#[derive(Subcommand)]
enum TraceCmd {
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

#[derive(Subcommand)]
enum BenchCmd {
    /// The tiered volume: the cost of a DRAM hit against a read of the flat volume (4
    /// KiB, one thread, same run), the share of a hot set a 1 GiB sequential scan
    /// leaves in DRAM (with the default sequential cutoff and without), and a clean
    /// restart (hit ratio of the first 10,000 requests against the steady state before
    /// shutdown and a cold start; time to reopen and to refill DRAM).
    Tier {
        /// Directory for the scratch volumes (about 1.4 GB; default: the system
        /// temporary directory). They are removed afterwards.
        #[arg(long)]
        dir: Option<PathBuf>,
        /// Blocks (4 KiB) DRAM holds in the recovery measurement: a million takes 4 GiB
        /// of memory and of scratch space.
        #[arg(long, default_value = "1M", value_parser = units::parse_count)]
        recovery_blocks: u64,
        /// Seconds per configuration and workload in the DRAM-share comparison.
        #[arg(long, default_value_t = 2.0)]
        seconds: f64,
        /// Print JSON (a stable contract) instead of text; a failure prints {"ok": false, "error": ...}.
        #[arg(long)]
        json: bool,
    },
    /// The DRAM model beside Ramulator 2.0 and DRAMsim3: the shared anchor traces
    /// (a 60/40 stream/random mix saturating the controller, one sequential stream,
    /// and the mix paced at one request per 16 cycles), generated by hscm with the
    /// reference generator's pseudo-random sequence, run on DDR3-1600K x8 (one channel,
    /// one 4 GiB rank, eight banks, 8 KiB rows), printed beside the peers' published
    /// figures with the difference and the band each must stay within: cycles to
    /// drain (5% of the peers' mean), paced read latency (15% of DRAMsim3's), row-hit
    /// rate (0.02), energy (20% of DRAMsim3's IDD model, its cycle units turned into
    /// joules). Cycles and energy are scaled when --requests is not 5M.
    MemsimValidate {
        /// Requests per trace (the published runs have 5M).
        #[arg(long, default_value = "5M", value_parser = units::parse_count)]
        requests: u64,
        /// Print JSON (a stable contract) instead of text; a failure prints {"ok": false, "error": ...}.
        #[arg(long)]
        json: bool,
    },
    /// Simulator speed: a 5-million-request post-cache trace (60% streams, 40% random,
    /// 28% writes) through DRAM-only DDR3-1600 and through hybrid WARM, single thread,
    /// in requests per CPU-second, beside the cost of just decoding the trace.
    Memsim {
        /// Requests in the generated trace (e.g. 5M).
        #[arg(long, default_value = "5M", value_parser = units::parse_count)]
        requests: u64,
        /// Print JSON (a stable contract) instead of text; a failure prints {"ok": false, "error": ...}.
        #[arg(long)]
        json: bool,
    },
    /// Cache simulator speed: Zipf(1.0) requests over many objects from an
    /// oracleGeneral trace (plain, then LRU again from the zstd-compressed copy), a
    /// cache of 10% of the objects, every online policy, single thread.
    Cache {
        /// Requests in the generated trace (e.g. 10M).
        #[arg(long, default_value = "10M", value_parser = units::parse_count)]
        requests: u64,
        /// Distinct objects the requests draw from (e.g. 1M).
        #[arg(long, default_value = "1M", value_parser = units::parse_count)]
        objects: u64,
        /// Print JSON (a stable contract) instead of text; a failure prints {"ok": false, "error": ...}.
        #[arg(long)]
        json: bool,
    },
    /// Throughput and latency of a volume against plain files with O_DIRECT
    /// (`odirect`), buffered I/O (`pagecache`) and raw RAM copies (`memcpy`), all in
    /// the same run on the same disk.
    ///
    /// Example: hscm bench volume --workload randread --bs 4k --threads 1 --seconds 5
    Volume(VolumeBenchArgs),
    /// The shared-memory queue transport: random reads at each chunk size and queue
    /// depth, beside plain memcpy of the same sizes from the volume's RAM in this process
    /// (the interface bandwidth) and the same requests over a Unix socket, all in this
    /// run; then a data-buffer size sweep. Rows by completion mode copy each read out
    /// into a private buffer; `in-place` rows use the bytes where the server put them,
    /// in the client's data buffer (one copy). Each ring row and its memcpy run in
    /// alternating 100 ms slices, so both see the machine in the same state. Protocol
    /// overhead = 1 - ring MB/s / memcpy MB/s (the paper's definition). A bare
    /// core-to-core round trip, the floor under any QD1 protocol, is measured before
    /// and after the rows, and before each chunk size's. QD1 in-place rows also read
    /// and copy one cache-resident range: the difference splits their cost beyond the
    /// copy into round trip, protocol software and memory misses (printed below the
    /// table; docs/ring.md says how).
    ///
    /// Example: hscm bench ring --chunks 4k,512k --qd 1 --json
    Ring(ring::RingBenchArgs),
    /// The NBD export against nbdkit's memory plugin (volatile), its file plugin
    /// (durable through FLUSH) and that plugin with FUA forced, driven by fio's nbd
    /// engine over Unix sockets: 4 KiB random reads, writes and a 66:34 mix, QD1 with
    /// one job and QD16 with four, with nbdkit's null plugin as the transport's bound.
    /// Needs fio and nbdkit (scripts/setup.sh).
    ///
    /// Example: hscm bench nbd --seconds 3 --json
    Nbd(hscm_lab::nbd::NbdBenchArgs),
    /// What strangers cost an `hscm nbd` server, run as its own process: a
    /// well-behaved client's 4 KiB read latency at QD1 and the server's resident
    /// memory, unloaded, with a crowd of idle connections (--idle, default 1000), and
    /// with clients that send two 32 MiB READs and never read the replies
    /// (--stalled, default 64). Bounds: RSS under 64 MiB above unloaded, p50 within 2x.
    ///
    /// Example: hscm bench nbd-strangers --seconds 2 --json
    NbdStrangers(hscm_lab::nbd_strangers::StrangersArgs),
    /// The file system of `hscm mount` against tmpfs (volatile, the bound), ext4 and
    /// ext3 on loop files on the same disk, and bindfs over tmpfs (a plain FUSE
    /// passthrough: FUSE's own cost), driven by fio. hscm runs in on-flush mode with
    /// the kernel's writeback cache (durable at fsync, as buffered ext4 is):
    /// random reads and writes of 1-16 KiB with the page cache dropped before each
    /// point (Table 3 of Sun et al. 2020, tmpfs on hybrid memory against ext3); 4 KiB
    /// with libaio and with four jobs; a 66:34 mix; sequential 1 MiB; warm reads;
    /// create, stat and unlink of small files; a fileserver job file modelled on
    /// Filebench's (50 threads); the read-modify-rewrite of a video file (Baek and
    /// Park 2020, the durable hybrid RAM disk). Durable 4 KiB writes run in
    /// immediate mode against ext4 with an fsync after each and against a plain file
    /// on the same disk with an fdatasync after each (the disk's bound), the three
    /// taking turns for three rounds. Needs root, fio, bindfs and e2fsprogs
    /// (scripts/setup.sh).
    ///
    /// Example: hscm bench fs --seconds 3 --json
    Fs(hscm_lab::fs::FsBenchArgs),
    /// Time to open, to first read and to fully warm, for several sizes, beside the
    /// backend's raw sequential read speed.
    Restart {
        /// Largest size measured (smaller ones, 256M and 1G, run first).
        #[arg(long, default_value = "8G", value_parser = units::parse_size, allow_hyphen_values = true)]
        size: u64,
        /// Directory on the disk to measure (default: the system temporary directory,
        /// $TMPDIR or /tmp); a scratch directory under it is removed afterwards.
        #[arg(long = "dir", alias = "path")]
        path: Option<PathBuf>,
        /// Print JSON (a stable contract) instead of text; a failure prints {"ok": false, "error": ...}.
        #[arg(long)]
        json: bool,
    },
}

#[derive(Args)]
struct VolumeBenchArgs {
    /// What each client thread issues.
    #[arg(long, value_enum, default_value = "randread")]
    workload: Workload,
    /// Request size; any size works (1000 exercises unaligned I/O).
    #[arg(long, default_value = "4k", value_parser = units::parse_size, allow_hyphen_values = true)]
    bs: u64,
    /// Concurrent client threads, each issuing one request at a time (at most 1024).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u64).range(1..=1024).map(|n| n as usize))]
    threads: usize,
    /// Measured time per target (after setup and warm-up).
    #[arg(long, default_value_t = 5.0)]
    seconds: f64,
    /// `immediate` (the default, as for volumes): each write is durable when it
    /// returns (baselines add O_DSYNC / fdatasync); `on-flush`: writes reach the
    /// device, nobody syncs.
    #[arg(long, default_value = "immediate")]
    durability: Durability,
    /// Working-set size (volume and baseline files).
    #[arg(long, default_value = "1G", value_parser = units::parse_size, allow_hyphen_values = true)]
    size: u64,
    /// Our volume's journal size (0, the default: writes go straight home, as the
    /// paper's design; see `hscm volume create --help`).
    #[arg(long, default_value = "0", value_parser = units::parse_size, allow_hyphen_values = true)]
    journal: u64,
    /// Directory on the disk to measure (default: the system temporary directory,
    /// $TMPDIR or /tmp); a scratch directory under it is removed afterwards, also on
    /// error or Ctrl-C.
    #[arg(long = "dir", alias = "path")]
    path: Option<PathBuf>,
    /// Which targets to run, comma-separated (default: all four).
    #[arg(long, value_enum, value_delimiter = ',')]
    targets: Vec<TargetKind>,
    /// Print one JSON object (a stable contract) instead of the table.
    #[arg(long)]
    json: bool,
}

#[derive(Args)]
struct ReproduceArgs {
    /// Where the report goes.
    #[arg(short = 'o', long, alias = "output", default_value_os_t = report::ReproduceParams::default().out)]
    out: PathBuf,
    /// Seconds per benchmark point.
    #[arg(long, default_value_t = report::ReproduceParams::default().seconds)]
    seconds: f64,
    /// Largest volume in the restart experiment.
    #[arg(long, default_value = units::size_arg(report::ReproduceParams::default().restart_size),
          value_parser = units::parse_size, allow_hyphen_values = true)]
    restart_size: u64,
    /// Small sizes and short runs: a smoke test of the whole pipeline (about three
    /// minutes on a 2-core VM; the key-value and volume sections take most of it).
    #[arg(long)]
    quick: bool,
    /// Run only these sections, comma-separated (default: all): volume, memsim, vmsim, ring, kv, nbd, fs, tier.
    #[arg(long, value_enum, value_delimiter = ',')]
    only: Vec<report::SectionName>,
    /// Directory of the memory traces the memsim section runs (shipped in the repo).
    #[arg(long, default_value_os_t = report::ReproduceParams::default().traces)]
    traces: PathBuf,
    /// Directory of real YCSB 0.17 operation traces the key-value section replays
    /// (ycsb-{a,b,3}-{load,run}.txt, recorded by scripts/ycsb-traces.sh; the main job
    /// records them). Without them the section says how to make them.
    #[arg(long, default_value_os_t = report::ReproduceParams::default().ycsb_traces)]
    ycsb_traces: PathBuf,
    /// Print every target the report checks, with the paper and figure it comes from
    /// (or the project's reason), and run nothing.
    #[arg(long)]
    list_targets: bool,
    /// With --list-targets: JSON instead of a Markdown table.
    #[arg(long, requires = "list_targets")]
    json: bool,
}

// The variant names are the subcommand names the crash tests call.
#[allow(clippy::enum_variant_names)]
#[derive(Subcommand)]
enum DebugCmd {
    /// Write stamped blocks forever, printing "A <block> <version>" after each
    /// acknowledged write; the crash test kills it with SIGKILL.
    CrashWriter {
        path: PathBuf,
        #[arg(long)]
        seed: u64,
        #[arg(long, default_value_t = 1536)]
        block: usize,
        #[arg(long, default_value = "immediate")]
        durability: Durability,
    },
    /// Key-value puts and deletes in a mode, "A <key> <version>" after each ack.
    KvWriter {
        dir: PathBuf,
        #[arg(long)]
        seed: u64,
        #[arg(long, default_value = "sprint")]
        mode: String,
    },
    /// The same through a running `hscm serve` (FUA writes over the ring).
    RingWriter {
        socket: PathBuf,
        #[arg(long)]
        seed: u64,
        #[arg(long, default_value_t = 4096)]
        block: usize,
    },
}

/// The manual: one page to standard output, or every command's page into `dir`.
fn man_pages(dir: Option<&std::path::Path>) -> Result<()> {
    let cmd = Cli::command();
    let Some(dir) = dir else {
        let mut page = Vec::new();
        clap_mangen::Man::new(cmd).render(&mut page)?;
        out!("{}", String::from_utf8_lossy(&page))?;
        return Ok(());
    };
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    fn write_all(cmd: clap::Command, name: String, dir: &std::path::Path) -> Result<usize> {
        let mut page = Vec::new();
        clap_mangen::Man::new(cmd.clone().name(name.clone())).render(&mut page)?;
        scratch::write_output(&dir.join(format!("{name}.1")), &page)?;
        let mut n = 1;
        for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set()) {
            n += write_all(sub.clone(), format!("{name}-{}", sub.get_name()), dir)?;
        }
        Ok(n)
    }
    let n = write_all(cmd, "hscm".into(), dir)?;
    outln!("{n} manual pages in {}", dir.display())?;
    Ok(())
}

fn parse_hex(s: &str) -> Result<u64, String> {
    let d = s.strip_prefix("0x").unwrap_or(s);
    u64::from_str_radix(d, 16).map_err(|_| format!("{s:?} is not a hex address"))
}

fn main() -> std::process::ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(
            // fuser's own unmount at the end of a session is expected to find nothing
            // (hscm_fuse::mount), and says so at warn.
            tracing_subscriber::EnvFilter::try_from_env("HSCM_LOG")
                .unwrap_or_else(|_| "warn,fuser=error".into()),
        )
        .with_writer(std::io::stderr)
        // No colour codes in log files.
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .init();
    // Read before parsing: a command given --json answers in JSON even when it fails.
    let json_wanted = std::env::args_os().any(|a| a == "--json");
    // `--config FILE` of a long-running command supplies the flags the command line
    // leaves out.
    let argv = match hscm_service::config::merge(std::env::args_os().collect(), &Cli::command()) {
        Ok(argv) => argv,
        Err(e) => {
            let e = anyhow::Error::from(e);
            if json_wanted {
                let _ = hscm_lab::out::json(&errors::error_json(&e));
            }
            note!("hscm: error: {}", errors::render_error(&e));
            return std::process::ExitCode::FAILURE;
        }
    };
    let cli = match Cli::try_parse_from(argv) {
        Ok(cli) => cli,
        // Help and version are answers, not failures: clap prints them as asked.
        Err(e) if !e.use_stderr() || !json_wanted => e.exit(),
        Err(e) => {
            let _ = hscm_lab::out::json(&errors::usage_error_json(&e));
            e.exit()
        }
    };
    match run(cli) {
        Ok(()) => std::process::ExitCode::SUCCESS,
        // The reader went away (`hscm … | head -1`): what it wanted, it has.
        Err(e) if errors::is_closed_pipe(&e) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            if json_wanted {
                // Best effort: standard output may be what failed.
                let _ = hscm_lab::out::json(&errors::error_json(&e));
            }
            note!("hscm: error: {}", errors::render_error(&e));
            std::process::ExitCode::FAILURE
        }
    }
}

/// A tiered volume's admission to DRAM: None admits every missed block.
#[derive(Clone, Copy)]
struct TierAdmission(Option<hscm_policy::cache::AdmissionName>);

fn parse_write_mode(s: &str) -> Result<hscm_tier::WriteMode, String> {
    hscm_tier::WriteMode::from_name(s)
        .ok_or_else(|| format!("unknown write mode {s:?}: write-through or write-back"))
}

/// `always` (no filter) or an admission filter's name.
fn parse_tier_admission(s: &str) -> Result<TierAdmission, String> {
    if s == "always" {
        return Ok(TierAdmission(None));
    }
    vmsim::parse_admission(s)
        .map(|a| TierAdmission(Some(a)))
        .map_err(|e| format!("{e}, or always"))
}

fn run(cli: Cli) -> Result<()> {
    match cli.command {
        Command::Volume(VolumeCmd::Create {
            path,
            size,
            chunk,
            durability,
            journal,
            force,
            larger_than_ram,
            fs,
            ram,
            block,
            policy,
            admission,
            sequential_cutoff,
            fast_tier,
            fast_size,
            write_mode,
            fast_policy,
            fast_admission,
        }) => {
            if let (true, Some(budget)) = (fs, ram) {
                // A flat volume whose file system keeps only `budget` of file data in
                // RAM: it need not fit in memory.
                volume_cmd::create(&path, size, chunk, durability, journal, force)?;
                volume_cmd::format_fs(&path)?;
                return volume_cmd::set_fs_ram_budget(&path, budget);
            }
            if let Some(ram) = ram {
                let args = tier_cmd::TierArgs {
                    size,
                    ram,
                    block: block.unwrap_or(4096),
                    policy: policy.unwrap_or(hscm_vmsim::cache::PolicyName::Lru),
                    admission: admission.and_then(|a| a.0),
                    sequential_cutoff: sequential_cutoff
                        .unwrap_or(hscm_tier::DEFAULT_SEQUENTIAL_CUTOFF),
                    durability,
                    fast: fast_tier.map(|path| tier_cmd::FastArgs {
                        path,
                        size: fast_size.unwrap_or(0),
                        mode: write_mode.unwrap_or(hscm_tier::WriteMode::WriteBack),
                        policy: fast_policy.unwrap_or(hscm_vmsim::cache::PolicyName::Lru),
                        admission: fast_admission.and_then(|a| a.0),
                    }),
                };
                return tier_cmd::create(&path, &args, force);
            }
            // A file system keeps in RAM what its files hold (`hscm mount --ram`), not
            // the volume's size.
            if !larger_than_ram && !fs {
                hscm_volume::check_fits_in_memory(&path.display().to_string(), size)
                    .context("refusing to create a volume that cannot open on this machine (--larger-than-ram creates it anyway)")?;
            }
            volume_cmd::create(&path, size, chunk, durability, journal, force)?;
            if fs {
                volume_cmd::format_fs(&path)?;
            }
            Ok(())
        }
        Command::Volume(VolumeCmd::Info { path, load, json }) => {
            if tier_cmd::is_tiered(&path) {
                let cfg = hscm_tier::TieredVolume::inspect(&path)?;
                return tier_cmd::info(&path, &cfg, json);
            }
            volume_cmd::info(&path, json, load)
        }
        Command::Volume(VolumeCmd::Check { path, json }) => {
            if tier_cmd::is_tiered(&path) {
                return tier_cmd::check(&path, json);
            }
            volume_cmd::check(&path, json)
        }
        Command::Volume(VolumeCmd::Stats { path, json }) => tier_cmd::stats(&path, json),
        Command::Volume(VolumeCmd::Replay {
            path,
            trace,
            format,
            json,
        }) => tier_cmd::replay(&path, &trace, format, json),
        Command::Bench(BenchCmd::Volume(a)) => {
            let spec = bench::VolumeBenchSpec {
                workload: a.workload,
                bs: usize::try_from(a.bs)?,
                threads: a.threads,
                seconds: a.seconds,
                durability: a.durability,
                size: a.size,
                journal: a.journal,
                dir: a.path,
                targets: if a.targets.is_empty() {
                    TargetKind::ALL.to_vec()
                } else {
                    a.targets
                },
                progress: !a.json,
            };
            let r = bench::bench_volume(&spec)?;
            if a.json {
                outln!("{}", serde_json::to_string_pretty(&r)?)?;
            } else {
                bench::print_volume_result(&r)?;
            }
            Ok(())
        }
        Command::Bench(BenchCmd::Restart { size, path, json }) => {
            let r = bench::bench_restart(&bench::restart_sizes(size), path.as_deref(), !json)?;
            if json {
                outln!("{}", serde_json::to_string_pretty(&r)?)?;
            } else {
                bench::print_restart(&r)?;
            }
            Ok(())
        }
        Command::Sim(SimCmd::Memory(MemoryCmd::Compare(a))) => {
            let out = memsim::compare(&a.trace, a.format, &a.config, &a.policies(), !a.json)?;
            if a.json {
                outln!("{}", serde_json::to_string_pretty(&out)?)?;
            } else {
                memsim::print_compare(&out)?;
            }
            Ok(())
        }
        Command::Trace(TraceCmd::Convert {
            input,
            from,
            output,
            start_pc,
            instructions,
            post_cache,
            json,
        }) => {
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
        Command::Sim(SimCmd::Cache(a)) => {
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
        Command::Sim(SimCmd::Paging(a)) => {
            let out = vmsim::sim_paging(&a, !a.json && !a.csv)?;
            if a.json {
                outln!("{}", serde_json::to_string_pretty(&out)?)?;
            } else {
                vmsim::print_paging(&out, a.csv)?;
            }
            Ok(())
        }
        Command::Trace(TraceCmd::GenRequests(a)) => {
            let n = vmsim::gen_requests(vmsim::request_spec(&a)?, &a.output)?;
            outln!("{}: {n} requests", a.output.display())?;
            Ok(())
        }
        Command::Bench(BenchCmd::Cache {
            requests,
            objects,
            json,
        }) => {
            let r = vmsim::bench_cache(requests, objects, !json)?;
            if json {
                outln!("{}", serde_json::to_string_pretty(&r)?)?;
            } else {
                for run in &r.runs {
                    outln!(
                        "{:<8} {:>7.1} M requests/CPU-s  miss ratio {:.4}  CPU {:.2}x LRU",
                        run.policy,
                        run.requests_per_cpu_s / 1e6,
                        run.miss_ratio,
                        run.vs_lru
                    )?;
                }
                outln!("peak RSS {:.1} MB", r.peak_rss_mb)?;
            }
            Ok(())
        }
        Command::Trace(TraceCmd::Anchor {
            name,
            requests,
            format,
            output,
        }) => {
            use hscm_lab::memsim_validation as v;
            let n = v::write_anchor(v::anchor_named(&name)?, requests, &output, format)?;
            outln!("{}: {n} requests", output.display())?;
            Ok(())
        }
        Command::Trace(TraceCmd::Gen(a)) => {
            let n = memsim::generate(memsim::synth_spec(&a)?, &a.output)?;
            outln!("{}: {n} references", a.output.display())?;
            Ok(())
        }
        Command::Serve(a) => serve_cmd::serve(&a),
        Command::Nbd(a) => nbd_cmd::serve(&a),
        Command::Mount(a) => mount_cmd::mount(&a),
        Command::Umount(a) => mount_cmd::umount(&a),
        Command::Status(a) => service_cmd::status(&a),
        Command::Config(c) => service_cmd::config(&c, &Cli::command()),
        Command::Completions { shell } => {
            let mut buf = Vec::new();
            clap_complete::generate(shell, &mut Cli::command(), "hscm", &mut buf);
            out!("{}", String::from_utf8_lossy(&buf))?;
            Ok(())
        }
        Command::Man { dir } => man_pages(dir.as_deref()),
        Command::Kv(KvCmd::Create { dir, devices }) => {
            hscm_kv::KvStore::create(&dir, devices, None)?;
            outln!("created a {devices}-device store in {}", dir.display())?;
            Ok(())
        }
        Command::Kv(KvCmd::Check { dir, json }) => kv_check::check(&dir, json),
        Command::Kv(KvCmd::Bench(a)) => kv::bench(&a),
        Command::Kv(KvCmd::Compare(a)) => kv::compare(&a),
        Command::Bench(BenchCmd::Fs(a)) => {
            let r = hscm_lab::fs::bench(&a)?;
            if a.json {
                hscm_lab::out::json(&r)
            } else {
                hscm_lab::fs::print(&r)
            }
        }
        Command::Bench(BenchCmd::Nbd(a)) => {
            let r = hscm_lab::nbd::bench(&a)?;
            if a.json {
                hscm_lab::out::json(&r)
            } else {
                hscm_lab::nbd::print(&r)
            }
        }
        Command::Bench(BenchCmd::NbdStrangers(a)) => {
            let exe = std::env::current_exe().context("finding the hscm binary")?;
            let r = hscm_lab::nbd_strangers::bench(&a, &exe)?;
            if a.json {
                hscm_lab::out::json(&r)
            } else {
                hscm_lab::nbd_strangers::print(&r)
            }
        }
        Command::Bench(BenchCmd::Ring(a)) => {
            let r = ring::bench(&a)?;
            if a.json {
                outln!("{}", serde_json::to_string_pretty(&r)?)?;
            } else {
                ring::print(&r)?;
            }
            Ok(())
        }
        Command::Bench(BenchCmd::Tier {
            dir,
            recovery_blocks,
            seconds,
            json,
        }) => {
            let r = hscm_lab::tier::bench_tier(dir.as_deref(), recovery_blocks, seconds, !json)?;
            if json {
                outln!("{}", serde_json::to_string_pretty(&r)?)?;
                return Ok(());
            }
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
        Command::Bench(BenchCmd::MemsimValidate { requests, json }) => {
            let v = hscm_lab::memsim_validation::validate(requests, !json)?;
            if json {
                outln!("{}", serde_json::to_string_pretty(&v)?)?;
            } else {
                out!("{}", hscm_lab::memsim_validation::markdown(&v))?;
                outln!(
                    "\nspeed on the mixed trace: {:.2} M requests/CPU-s, {:.1}x DRAMsim3 and {:.1}x Ramulator 2.0 (their published CPU times); peak RSS {:.1} MB",
                    v.mix_requests_per_cpu_s / 1e6,
                    v.speedup_vs_dramsim3,
                    v.speedup_vs_ramulator,
                    v.peak_rss_mb
                )?;
            }
            Ok(())
        }
        Command::Bench(BenchCmd::Memsim { requests, json }) => {
            let r = memsim::bench_memsim(requests, !json)?;
            if json {
                outln!("{}", serde_json::to_string_pretty(&r)?)?;
            } else {
                for run in &r.runs {
                    outln!(
                        "{:<10} {:>8.2} M requests/CPU-s ({:.2} CPU-s for {} requests)",
                        run.policy,
                        run.requests_per_cpu_s / 1e6,
                        run.cpu_s,
                        r.requests
                    )?;
                }
                outln!(
                    "decode only {:.2} M/CPU-s; WARM/DRAM-only CPU ratio {:.2}; peak RSS {:.1} MB",
                    r.decode_only_per_cpu_s / 1e6,
                    r.warm_cpu_ratio,
                    r.peak_rss_mb
                )?;
            }
            Ok(())
        }
        Command::Sweep(a) => sweep_cmd::run(a),
        Command::Reproduce(a) if a.list_targets => {
            if a.json {
                hscm_lab::out::json(&report::targets_json())
            } else {
                out!("{}", report::targets_markdown())?;
                Ok(())
            }
        }
        Command::Reproduce(a) => report::reproduce(&report::ReproduceParams {
            out: a.out,
            seconds: a.seconds,
            restart_size: a.restart_size,
            quick: a.quick,
            only: a.only,
            traces: a.traces,
            ycsb_traces: a.ycsb_traces,
        }),
        Command::Debug(DebugCmd::CrashWriter {
            path,
            seed,
            block,
            durability,
        }) => crash::crash_writer(&path, seed, block, durability),
        Command::Debug(DebugCmd::KvWriter { dir, seed, mode }) => {
            crash::kv_writer(&dir, seed, &mode)
        }
        Command::Debug(DebugCmd::RingWriter {
            socket,
            seed,
            block,
        }) => crash::ring_writer(&socket, seed, block),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every flag and argument of every command, hidden ones aside, says what it is for.
    #[test]
    fn every_argument_has_help() {
        fn walk(cmd: &clap::Command, path: &str, missing: &mut Vec<String>) {
            for arg in cmd.get_arguments() {
                let id = arg.get_id().as_str();
                if arg.is_hide_set() || id == "help" || id == "version" {
                    continue;
                }
                if arg.get_help().is_none() && arg.get_long_help().is_none() {
                    missing.push(format!("{path} {id}"));
                }
            }
            for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set()) {
                if sub.get_about().is_none() && sub.get_name() != "help" {
                    missing.push(format!("{path} {} (the command)", sub.get_name()));
                }
                walk(sub, &format!("{path} {}", sub.get_name()), missing);
            }
        }
        let mut missing = Vec::new();
        walk(&Cli::command(), "hscm", &mut missing);
        assert!(missing.is_empty(), "no help text:\n{}", missing.join("\n"));
    }

    /// Help speaks of papers by name, not by our tracker's or seed files' numbers.
    #[test]
    fn help_names_papers_not_our_tracker() {
        fn walk(cmd: &mut clap::Command, bad: &mut Vec<String>) {
            let help = cmd.render_long_help().to_string();
            for word in [
                "seed 0",
                "seed paper",
                "issue tracker",
                "(issue ",
                "issue 1",
                "issue 2",
            ] {
                if help.contains(word) {
                    bad.push(format!("{}: {word:?}", cmd.get_name()));
                }
            }
            for sub in cmd.get_subcommands_mut() {
                walk(sub, bad);
            }
        }
        let mut bad = Vec::new();
        walk(&mut Cli::command(), &mut bad);
        assert!(bad.is_empty(), "{}", bad.join("\n"));
    }
}

//! Every target the report holds a measurement to, with its source: the published
//! figure it reproduces (seed, table or figure, what the paper reports) or the goal the
//! project set itself. One place, so that a reader can audit them and
//! `hscm reproduce --list-targets` can print them without running anything.

use super::check::{Bound, Paper, Source, Target};

/// `target!(NAME, "what", >= 20.0, "x", Paper, "Fig. 6a", "what the paper reports")`.
macro_rules! target {
    ($name:ident, $what:expr, >= $v:expr, $unit:expr, $paper:ident, $at:expr, $says:expr) => {
        target!(@ $name, $what, Bound::AtLeast($v), $unit, $paper, $at, $says);
    };
    ($name:ident, $what:expr, <= $v:expr, $unit:expr, $paper:ident, $at:expr, $says:expr) => {
        target!(@ $name, $what, Bound::AtMost($v), $unit, $paper, $at, $says);
    };
    (@ $name:ident, $what:expr, $bound:expr, $unit:expr, $paper:ident, $at:expr, $says:expr) => {
        pub static $name: Target = Target {
            what: $what,
            bound: $bound,
            unit: $unit,
            source: Source { paper: Paper::$paper, at: $at, says: $says },
        };
    };
}

// The durable hybrid RAM volume (Baek & Park 2020).
target!(VOLUME_RANDREAD_VS_ODIRECT, "ours / odirect (IOPS)", >= 20.0, "x",
    Dhrd, "Fig. 6a", "DBR DHRD 64x the SSD RAID-0 with direct I/O");
target!(VOLUME_RANDREAD_VS_PAGECACHE, "ours / pagecache (IOPS)", >= 1.5, "x",
    Dhrd, "Fig. 6a", "DBR DHRD 2.8x DHRD with direct I/O");
target!(VOLUME_RANDREAD_VS_MEMCPY, "ours / memcpy (IOPS)", >= 0.8, "x",
    ThisProject, "", "reads within 20% of a raw copy inside RAM, the physical limit");
target!(VOLUME_MIXED_VS_ODIRECT, "ours / odirect (IOPS)", >= 3.0, "x",
    Dhrd, "Fig. 8", "15x the SSD on a file-level 66:34 mix");
target!(VOLUME_RANDWRITE_VS_ODIRECT, "ours / odirect (IOPS), i.e. within 15%", >= 0.85, "x",
    Dhrd, "Fig. 6b", "writes within 3% of the SSD");
target!(VOLUME_RANDWRITE_8T_VS_ODIRECT, "ours / odirect at 8 threads (IOPS)", >= 1.5, "x",
    ThisProject, "", "group commit beats one sync per write (the paper's SSD scales ~5x from 1 to 32 processes, §4.2)");
target!(VOLUME_GROUP_COMMIT_SCALING, "ours 8 threads / ours 1 thread (group commit)", >= 4.0, "x",
    ThisProject, "", "concurrent writers share syncs");
target!(VOLUME_JOURNAL_VS_ODIRECT, "ours / odirect at 8 threads, journal = working set (IOPS)", >= 1.5, "x",
    ThisProject, "", "a journal as large as the hot set turns random writes sequential");
target!(RESTART_FIRST_READ, "open to first read", <= 20.0, " ms",
    ThisProject, "", "usable at once (the paper serves I/O while it initialises, §3.3, with no timing)");
target!(RESTART_WARMUP_SPEED, "warm-up speed / raw sequential read", >= 0.7, "x",
    ThisProject, "", "the warm-up runs near the disk's sequential speed");
target!(RESTART_RAM_OVERHEAD, "RAM beyond the volume's size", <= 1.0, " %",
    ThisProject, "", "the RAM copy costs little beyond its own size");

// Hybrid DRAM/PCM main memory (HSCM/WARM, Sun et al. 2020).
target!(MEMSIM_WARM_ENERGY_VS_RAPP, "WARM energy / RaPP energy", <= 1.0, "x",
    Hscm, "Fig. 8", "energy vs DRAM-only: WARM -46.2%, RaPP -40.1% on average");
target!(MEMSIM_WARM_EDP_VS_RAPP, "WARM EDP / RaPP EDP", <= 1.0, "x",
    Hscm, "Fig. 10", "EDP vs DRAM-only: WARM -39.5%, RaPP -31.9%");
target!(MEMSIM_SPEED, "DRAM-only requests per CPU-second", >= 3.0, " M",
    ThisProject, "", "faster than the cycle-level DRAM simulators it is compared with");
target!(MEMSIM_PEAK_MEMORY, "peak memory", <= 100.0, " MB",
    ThisProject, "", "runs beside other work on a small machine");
target!(MEMSIM_PEERS_CYCLES, "cycles to drain, |hscm / peers' mean − 1|", <= 5.0, " %",
    ThisProject, "", "within 5% of Ramulator 2.0 and DRAMsim3 (shared/validation, published runs)");
target!(MEMSIM_PEERS_LATENCY, "paced read latency, |hscm / DRAMsim3 − 1|", <= 15.0, " %",
    ThisProject, "", "within 15% of DRAMsim3 at one request per 16 cycles");
target!(MEMSIM_PEERS_ROW_HITS, "row-buffer hit rate, |hscm − peers' mean|", <= 0.02, "",
    ThisProject, "", "within 0.02 of the peers");
target!(MEMSIM_PEERS_ENERGY, "energy, |hscm / DRAMsim3 − 1|", <= 20.0, " %",
    ThisProject, "", "within 20% of DRAMsim3's IDD model");
target!(MEMSIM_PEERS_SPEED, "requests per CPU-second on the mixed anchor trace", >= 2.5, " M",
    ThisProject, "", "10x DRAMsim3 (20.3 CPU-s for 5 M requests, published)");
target!(MEMSIM_WARM_CPU_VS_DRAM, "WARM CPU time / DRAM-only CPU time", <= 1.5, "x",
    ThisProject, "", "migration costs little simulation time");

// File caching and paging under SCM (Park & Bahn 2020).
target!(CACHE_LRU_GAIN_SCM, "LRU gain on SCM, 10% cache (paper < 3%)", <= 5.0, " %",
    ScmCaching, "Fig. 4", "caching gains < 3% when storage is SCM");
target!(CACHE_ADMISSION_SAVING_LOW, "AC-LRU time saved over LRU on SCM, 10% cache (paper 20-40%)", >= 20.0, " %",
    ScmCaching, "Fig. 5", "admission control improves 20-40%");
target!(CACHE_ADMISSION_SAVING_HIGH, "AC-LRU time saved over LRU on SCM, 10% cache (paper 20-40%)", <= 40.0, " %",
    ScmCaching, "Fig. 5", "admission control improves 20-40%");
target!(CACHE_LRU_GAIN_HDD_LOW, "LRU gain on HDD, 10% cache (paper ~70%)", >= 60.0, " %",
    ScmCaching, "Fig. 3", "caching gains ~70% on a hard disk");
target!(CACHE_LRU_GAIN_HDD_HIGH, "LRU gain on HDD, 10% cache (paper ~70%)", <= 80.0, " %",
    ScmCaching, "Fig. 3", "caching gains ~70% on a hard disk");
target!(PAGING_BEST_SIZE_1X_LOW, "best page size at 1x (paper 4-8 KiB)", >= 4096.0, " B",
    ScmCaching, "Fig. 9", "best page size 4-8 KB when storage is as fast as DRAM");
target!(PAGING_BEST_SIZE_1X_HIGH, "best page size at 1x (paper 4-8 KiB)", <= 8192.0, " B",
    ScmCaching, "Fig. 9", "best page size 4-8 KB when storage is as fast as DRAM");
target!(PAGING_BEST_SIZE_10X, "best page size at 10x (paper 512 B)", <= 512.0, " B",
    ScmCaching, "Fig. 9", "best page size 512 B at 10x DRAM latency");
target!(PAGING_BEST_SIZE_100X, "best page size at 100x (paper 512 B)", <= 512.0, " B",
    ScmCaching, "Fig. 9", "best page size 512 B at 100x DRAM latency");
target!(PAGING_SWEEP_TIME, "full sweep time (8 sizes x 4 latencies)", <= 30.0, " s",
    ThisProject, "", "a whole paging figure in half a minute");
target!(CACHE_SPEED, "LRU requests per CPU-second", >= 20.0, " M",
    ThisProject, "", "millions of requests per second per core");
target!(CACHE_POLICY_CPU_VS_LRU, "CPU time / LRU's", <= 1.5, "x",
    ThisProject, "", "no policy much slower than LRU");
target!(CACHE_PEAK_MEMORY, "peak memory of an LRU run", <= 100.0, " MB",
    ThisProject, "", "runs beside other work on a small machine");
target!(CACHE_AGREES_WITH_LIBCACHESIM, "miss ratios equal to libCacheSim's where defined alike", >= 100.0, " %",
    ThisProject, "", "exact against libCacheSim, the field's reference simulator");
target!(CACHE_BELADY_NOT_WORSE, "Belady runs missing more than libCacheSim's Belady", <= 0.0, "",
    ThisProject, "", "the optimum is never beaten by a reference");
target!(CACHE_SPEED_VS_LIBCACHESIM, "LRU CPU speed vs libCacheSim, Zipf(1.0), worst size", >= 3.0, "x",
    ThisProject, "", "about 3x libCacheSim's speed");

// The shared-memory ring (Seo et al. 2016).
target!(RING_OVERHEAD_4K, "protocol overhead, 4 KiB, QD1, in-place", <= 25.0, "%",
    DramProtocol, "Fig. 6", "66.8% overhead at 4 KB, QD1");
target!(RING_OVERHEAD_512K, "protocol overhead, 512 KiB, QD1, in-place", <= 2.0, "%",
    DramProtocol, "Fig. 6", "3.8% overhead at 512 KB, QD1");
target!(RING_LATENCY_VS_SOCKET, "4 KiB read p50: socket / ring", >= 1.5, "x",
    ThisProject, "", "shared memory beats a Unix socket carrying the same requests");
target!(RING_QD4_VS_SOCKET, "4 KiB QD4 throughput, 4 threads: ring / socket", >= 2.0, "x",
    DramProtocol, "Fig. 10", "QD4 throughput of the protocol (against UFS there; a Unix socket here)");
target!(RING_QD4_ASYNC_VS_SOCKET, "4 KiB QD4 throughput, 1 thread with 4 in flight: ring / socket", >= 2.0, "x",
    DramProtocol, "Fig. 10", "QD4 throughput of the protocol (against UFS there; a Unix socket here)");

// The energy-aware key-value store (the Sprint-AEP paper).
target!(KV_LOW_DENSITY_ENERGY, "equal-time energy saved by sprint, worst of a-t/b-t/3-t", >= 20.0, "%",
    SprintAep, "Fig. 15", "~26% energy saved on low-density YCSB");
target!(KV_LOW_DENSITY_THROUGHPUT, "sprint throughput / standard, worst of a-t/b-t/3-t", >= 0.95, "x",
    SprintAep, "Fig. 16", "no performance loss on low-density YCSB");
target!(KV_IDLE_READS_NO_PREFETCH, "idle-device reads reduced, sprint-nopre, worst", >= 96.0, "%",
    SprintAep, "Fig. 13", ">= 96% fewer idle-device reads without prefetch");
target!(KV_IDLE_READS_PREFETCH, "idle-device reads reduced, sprint, worst", >= 99.9, "%",
    SprintAep, "Fig. 13", "~99.99% fewer idle-device reads with prefetch");
target!(KV_HIGH_DENSITY_ENERGY, "equal-time energy saved by sprint, worst of a/b/3", >= 0.0, "%",
    SprintAep, "Fig. 20", "7-17% energy saved on high-density YCSB");
target!(KV_PARALLEL_SYNC, "log sync MB/s, parallel / single-threaded - 1, mean of all workloads", >= 10.0, "%",
    SprintAep, "Fig. 24", "parallel sync and prefetch +30-68% write, +23.7-40% read throughput");
target!(KV_REPLAY_IDLE_READS, "idle-device reads reduced by sprint, worst trace", >= 96.0, "%",
    SprintAep, "Fig. 13", ">= 96% fewer idle-device reads");
target!(KV_REPLAY_NOT_FOUND, "reads of records the store does not hold, all replays", <= 0.0, "",
    ThisProject, "", "a replay reads only what it loaded (an honest replay)");

// The NBD export (the issue's own bars; the paper serves its disk as a kernel block device).
target!(NBD_READ_QD1_VS_MEMORY, "4 KiB random reads, QD1: hscm / nbdkit memory plugin (IOPS)", >= 1.5, "x",
    ThisProject, "", "a durable export faster than the volatile RAM export people use today");
target!(NBD_READ_QD16_VS_MEMORY, "4 KiB random reads, QD16 x 4 jobs: hscm / nbdkit memory plugin (IOPS)", >= 1.0, "x",
    ThisProject, "", "at depth, at least as fast as the volatile RAM export");
target!(NBD_ONFLUSH_WRITE_VS_MEMORY, "4 KiB random writes owed durability only at FLUSH (write-back): hscm / nbdkit memory plugin (IOPS)", >= 0.8, "x",
    ThisProject, "", "a server that owes durability only at FLUSH acknowledges at RAM speed, as a disk's write cache does");
target!(NBD_WRITEBACK_MIX_VS_MEMORY, "4 KiB 66:34 read/write mix, write-back: hscm / nbdkit memory plugin (IOPS)", >= 0.8, "x",
    ThisProject, "", "the mix at RAM speed too: reads never wait for write-back");
target!(NBD_ONFLUSH_WRITE_VS_ODIRECT, "4 KiB random writes, on-flush (each on the device before its reply): hscm / nbdkit-odirect (IOPS)", >= 0.8, "x",
    ThisProject, "", "write-through costs little more than the least any write-through server does");
target!(NBD_FLUSH_VS_DEVICE, "FLUSH after 64 MiB (less with --quick: a quarter of its volume) dirty in 1 MiB writes: flush time / (the device's sequential write of as much + one sync)", <= 1.0, "x",
    ThisProject, "", "a flush costs what the device needs to write the dirty bytes, no more");
target!(NBD_FLUSH_SCATTERED_VS_DEVICE, "FLUSH after 64 MiB (less with --quick: a quarter of its volume) dirty in random 4 KiB writes: flush time / the device writing them as random 4 KiB writes + one sync", <= 1.0, "x",
    ThisProject, "", "sorted, merged runs beat writing scattered blocks one by one");
target!(NBD_IMMEDIATE_WRITE_VS_FUA_FILE, "4 KiB random writes, immediate: hscm / nbdkit file plugin with FUA (IOPS)", >= 1.0, "x",
    ThisProject, "", "every write durable, no slower than a file export that syncs each write");
target!(NBD_METRICS_COST, "4 KiB, QD16 x 4 jobs, volume in RAM: IOPS with the service side on (every request counted and timed, hscm status, /metrics scraped every second) / a bare server, mean of 12 ABBA rounds", >= 0.98, "x",
    ThisProject, "", "turning metrics on costs at most 2% throughput");
target!(NBD_STRANGERS_RSS, "server RSS above unloaded, with idle connections or clients that never read (MiB)", <= 64.0, "MiB",
    ThisProject, "", "strangers cannot grow the server's memory past a bound");
target!(NBD_STRANGERS_LATENCY, "a well-behaved client's 4 KiB read p50 with strangers / unloaded", <= 2.0, "x",
    ThisProject, "", "strangers cannot slow a well-behaved client more than 2x");

// The file system of `hscm mount` (Sun et al. 2020's fast mode; the issue's own bars).
target!(FS_TABLE3_VS_EXT3, "hscm / ext3, mean IOPS ratio over 1-16 KiB random reads and writes, cold", >= 30.07, "x",
    Hscm, "Table 3", "fast mode (tmpfs on HSCM) 38.74 / 54.62 / 19.31 / 14.64 / 23.02x ext3 at 1-16 kB, 30.07x on average");
target!(FS_RANDREAD_VS_TMPFS, "4 KiB random reads, one job, cold: hscm / tmpfs (IOPS)", >= 0.8, "x",
    ThisProject, "", "durable files read at tmpfs speed, the kernel reading their RAM directly (FUSE passthrough)");
target!(FS_SEQREAD_VS_TMPFS, "1 MiB sequential reads, cold: hscm / tmpfs (MB/s)", >= 0.8, "x",
    ThisProject, "", "streams read at tmpfs speed");
target!(FS_TABLE3_VS_TMPFS_BOUND, "Table 3 mean hscm/ext3 over tmpfs/ext3, same run", >= 0.8, "x",
    ThisProject, "", "Table 3 within 20% of what any file system in RAM reaches on this disk");
target!(FS_ONFLUSH_WRITE_VS_TMPFS, "on-flush 4 KiB random writes, one job: hscm / tmpfs (IOPS)", >= 0.8, "x",
    ThisProject, "", "writes owed durability only at fsync run at RAM speed");
target!(FS_RAM_PER_DATA, "RAM used for a file (written, page cache dropped, read once) / its size", <= 1.1, "x",
    ThisProject, "", "one copy in RAM: no second one in the page cache, no RAM for what the files do not hold");
target!(FS_DURABLE_WRITE_VS_EXT4_FSYNC, "durable 4 KiB random writes: hscm immediate / ext4 with fsync after each (IOPS)", >= 1.5, "x",
    ThisProject, "", "every write durable, faster than a local file system that syncs each write");
target!(FS_WORK_ONFLUSH_VS_TMPFS, "real work, on-flush: the slowest of untar, find, du, grep warm, git commit, git status, rm -rf, hscm / tmpfs (seconds)", <= 2.0, "x",
    ThisProject, "", "the work people bring to a RAM file system at most twice tmpfs's time");
target!(FS_WORK_BUILD_VS_TMPFS, "real work, on-flush: make -j of a C program, hscm / tmpfs (seconds)", <= 1.1, "x",
    ThisProject, "", "a build in the mount runs at tmpfs's speed");
target!(FS_WORK_LS_VS_TMPFS, "ls -l of the largest directory, page cache dropped: hscm / tmpfs (seconds)", <= 2.0, "x",
    ThisProject, "", "listing a large directory at most twice tmpfs's time");
target!(FS_WORK_IMMEDIATE_VS_EXT4_SYNC, "real work, immediate: the slowest step, hscm / ext4 mounted sync,dirsync (seconds)", <= 1.0, "x",
    ThisProject, "", "every operation durable at return, no slower than ext4 with the same promise");

// Homes on the network (issue 52's own bars).
target!(REMOTE_READ_VS_LOCAL, "4 KiB random reads of a flat volume on an NBD home / on a local home (IOPS)", >= 0.9, "x",
    ThisProject, "", "reads of a volume whose home is on the network at RAM speed");
target!(REMOTE_DURABLE_WRITE_VS_DIRECT, "durable 4 KiB random writes QD16x4, volume on an NBD home / fio straight at the export (IOPS)", >= 0.8, "x",
    ThisProject, "", "durable writes through the volume near what the export itself takes");
target!(REMOTE_TIER_MISS_VS_RTT, "tier miss p50 / a direct read's p50 at QD1 with 1 ms added round trip", <= 1.2, "x",
    ThisProject, "", "a miss costs one round trip");
target!(REMOTE_TIER_HIT_VS_LOCAL, "tier DRAM hits on an NBD home / flat volume reads on a local home, 4 KiB QD16x4 (IOPS)", >= 0.9, "x",
    ThisProject, "", "hits do not notice the network");
// Mirrored homes (issue 53's own bars).
target!(MIRROR_QD1_VS_BOUND, "durable 4 KiB write p50 at QD1, volume on a mirror / (local durable write + the export's durable write, one round trip)", <= 1.2, "x",
    ThisProject, "", "protocol C costs one round trip and the remote's durable write, little more");
target!(MIRROR_QD16_VS_SLOWER, "durable 4 KiB writes at QD16, volume on a mirror / the slower member's own durable writes (IOPS)", >= 0.8, "x",
    ThisProject, "", "mirroring keeps most of the slower member's rate");

// The tiered volume (the project's own goals, set by its issue; Baek & Park 2020 §4 and
// Park & Bahn 2020 motivate it).
target!(TIER_REPLAY_DIFFERENCES, "policies whose replayed DRAM hits or misses differ from the simulator's", <= 0.0, "",
    ThisProject, "", "one policy code: the real volume caches exactly what the simulator predicts");
target!(TIER_HIT_VS_FLAT, "4 KiB DRAM hit / flat-volume read, one thread", <= 1.2, "x",
    ThisProject, "", "a hit in a volume larger than RAM costs little more than a read of one that fits");
target!(TIER_HIT_SCALING, "4 KiB DRAM hits, 4 threads / 1 thread, over min(3, the flat volume's scaling in the same run)", >= 0.9, "x",
    ThisProject, "", "hits scale 3x on four threads, or as far as this machine's CPUs let a read path with no shared state");
target!(TIER_HIT_DURING_WRITEBACK, "4 KiB DRAM hit rate while 256 MiB (32 MiB with --quick) go back to an emulated disk / idle", >= 80.0, "%",
    ThisProject, "", "the write-back runs outside the volume's lock: hits do not wait for the disk");
target!(TIER_SCAN_KEEPS_HOT_SET, "hot set still in DRAM after a 1 GiB sequential scan", >= 90.0, "%",
    ThisProject, "", "a scan does not wash out the hot set");
target!(TIER_RESTART_HIT_RATIO, "hit ratio of the first 10,000 requests after a clean restart / before shutdown", >= 95.0, "%",
    ThisProject, "", "the cache comes back warm");
target!(TIER_SCM_LRU_GAIN, "caching every missed block, home as fast as SCM: gain over no cache", <= 3.0, "%",
    ScmCaching, "§3, Fig. 3", "plain LRU gains under 3% when storage is SCM (about 70% on an HDD)");
target!(TIER_SCM_ADMISSION_GAIN, "admit on second miss, home as fast as SCM: gain over no cache", >= 20.0, "%",
    ScmCaching, "§3, Fig. 4", "admission control gains 20-40% on SCM");
target!(TIER_RECOVERY_PER_MILLION, "reopening time per million cached blocks", <= 1.0, "s",
    ThisProject, "", "recovery at most 1 s per million cached blocks");
target!(TIER_FAST_RECOVERY_PER_MILLION, "reopening a write-back fast tier after a crash, per million cached blocks", <= 1.0, "s",
    ThisProject, "", "recovery at most 1 s per million cached blocks");
target!(TIER_FIG11_SPEEDUP, "DRAM + SSD tier / SSD tier, in front of an emulated disk (ops/s)", >= 3.0, "x",
    Dhrd, "Fig. 11", "DHRD + HDD several times SSD + HDD (3-5x) at 70% and 80% cache-tier hit rates");

target!(PYTHON_THREADS_SPEEDUP, "two simulations in two Python threads / one after the other", >= 1.6, "x",
    ThisProject, "", "long calls release the GIL, so threads run simulations side by side on 2 cores");
target!(SWEEP_LOCAL_SPEEDUP, "sweep on the local executor, one process per core / one process (points >= 1 s)", >= 1.8, "x",
    ThisProject, "", "a sweep's points are independent: on 2 cores two run at once");

/// Every target, in report order.
pub static ALL: &[&Target] = &[
    &VOLUME_RANDREAD_VS_ODIRECT,
    &VOLUME_RANDREAD_VS_PAGECACHE,
    &VOLUME_RANDREAD_VS_MEMCPY,
    &VOLUME_MIXED_VS_ODIRECT,
    &VOLUME_RANDWRITE_VS_ODIRECT,
    &VOLUME_RANDWRITE_8T_VS_ODIRECT,
    &VOLUME_GROUP_COMMIT_SCALING,
    &VOLUME_JOURNAL_VS_ODIRECT,
    &RESTART_FIRST_READ,
    &RESTART_WARMUP_SPEED,
    &RESTART_RAM_OVERHEAD,
    &MEMSIM_WARM_ENERGY_VS_RAPP,
    &MEMSIM_WARM_EDP_VS_RAPP,
    &MEMSIM_SPEED,
    &MEMSIM_PEAK_MEMORY,
    &MEMSIM_WARM_CPU_VS_DRAM,
    &MEMSIM_PEERS_CYCLES,
    &MEMSIM_PEERS_LATENCY,
    &MEMSIM_PEERS_ROW_HITS,
    &MEMSIM_PEERS_ENERGY,
    &MEMSIM_PEERS_SPEED,
    &CACHE_LRU_GAIN_SCM,
    &CACHE_ADMISSION_SAVING_LOW,
    &CACHE_ADMISSION_SAVING_HIGH,
    &CACHE_LRU_GAIN_HDD_LOW,
    &CACHE_LRU_GAIN_HDD_HIGH,
    &PAGING_BEST_SIZE_1X_LOW,
    &PAGING_BEST_SIZE_1X_HIGH,
    &PAGING_BEST_SIZE_10X,
    &PAGING_BEST_SIZE_100X,
    &PAGING_SWEEP_TIME,
    &CACHE_SPEED,
    &CACHE_POLICY_CPU_VS_LRU,
    &CACHE_PEAK_MEMORY,
    &CACHE_AGREES_WITH_LIBCACHESIM,
    &CACHE_BELADY_NOT_WORSE,
    &CACHE_SPEED_VS_LIBCACHESIM,
    &RING_OVERHEAD_4K,
    &RING_OVERHEAD_512K,
    &RING_LATENCY_VS_SOCKET,
    &RING_QD4_VS_SOCKET,
    &RING_QD4_ASYNC_VS_SOCKET,
    &KV_LOW_DENSITY_ENERGY,
    &KV_LOW_DENSITY_THROUGHPUT,
    &KV_IDLE_READS_NO_PREFETCH,
    &KV_IDLE_READS_PREFETCH,
    &KV_HIGH_DENSITY_ENERGY,
    &KV_PARALLEL_SYNC,
    &KV_REPLAY_IDLE_READS,
    &KV_REPLAY_NOT_FOUND,
    &NBD_READ_QD1_VS_MEMORY,
    &NBD_READ_QD16_VS_MEMORY,
    &NBD_ONFLUSH_WRITE_VS_MEMORY,
    &NBD_WRITEBACK_MIX_VS_MEMORY,
    &NBD_ONFLUSH_WRITE_VS_ODIRECT,
    &NBD_FLUSH_VS_DEVICE,
    &NBD_FLUSH_SCATTERED_VS_DEVICE,
    &NBD_IMMEDIATE_WRITE_VS_FUA_FILE,
    &NBD_METRICS_COST,
    &NBD_STRANGERS_RSS,
    &NBD_STRANGERS_LATENCY,
    &FS_TABLE3_VS_EXT3,
    &FS_RANDREAD_VS_TMPFS,
    &FS_SEQREAD_VS_TMPFS,
    &FS_TABLE3_VS_TMPFS_BOUND,
    &FS_ONFLUSH_WRITE_VS_TMPFS,
    &FS_RAM_PER_DATA,
    &FS_DURABLE_WRITE_VS_EXT4_FSYNC,
    &FS_WORK_ONFLUSH_VS_TMPFS,
    &FS_WORK_BUILD_VS_TMPFS,
    &FS_WORK_LS_VS_TMPFS,
    &FS_WORK_IMMEDIATE_VS_EXT4_SYNC,
    &REMOTE_READ_VS_LOCAL,
    &REMOTE_DURABLE_WRITE_VS_DIRECT,
    &REMOTE_TIER_MISS_VS_RTT,
    &REMOTE_TIER_HIT_VS_LOCAL,
    &MIRROR_QD1_VS_BOUND,
    &MIRROR_QD16_VS_SLOWER,
    &TIER_REPLAY_DIFFERENCES,
    &TIER_HIT_VS_FLAT,
    &TIER_HIT_SCALING,
    &TIER_HIT_DURING_WRITEBACK,
    &TIER_SCAN_KEEPS_HOT_SET,
    &TIER_RESTART_HIT_RATIO,
    &TIER_SCM_LRU_GAIN,
    &TIER_SCM_ADMISSION_GAIN,
    &TIER_RECOVERY_PER_MILLION,
    &TIER_FAST_RECOVERY_PER_MILLION,
    &TIER_FIG11_SPEEDUP,
    &PYTHON_THREADS_SPEEDUP,
    &SWEEP_LOCAL_SPEEDUP,
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_paper_target_names_where_in_the_paper_it_comes_from() {
        for t in ALL {
            let s = &t.source;
            assert!(!s.says.is_empty(), "{}: no reason given", t.what);
            assert_eq!(
                s.paper == Paper::ThisProject,
                s.at.is_empty(),
                "{}: a paper's target names its figure, a project goal none",
                t.what
            );
        }
    }

    #[test]
    fn every_target_is_listed_once() {
        let mut seen = std::collections::HashSet::new();
        for t in ALL {
            assert!(seen.insert(*t as *const Target), "{} listed twice", t.what);
        }
    }
}

//! `hscm bench volume` and `hscm bench restart`: our volume against baselines measured
//! in the same run, on the same disk, with the same access pattern and the same timer.

mod load;
pub use load::{time_load, watch_warmup, LoadTiming};

use std::collections::BTreeMap;
use std::fs::{File, OpenOptions as FsOpenOptions};
use std::io::IsTerminal;
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::{closed_loop, Phase, Step};
use anyhow::{bail, Context, Result};
use hscm_volume::{AlignedBuf, CreateOptions, Durability, OpenOptions, Volume, IO_ALIGN};
use rand::Rng;
use serde::Serialize;

use crate::units::human_bytes;

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Workload {
    Randread,
    Randwrite,
    /// 66:34 read:write, random, as the paper's mixed file-level test.
    Mixed,
    Seqread,
    Seqwrite,
}

impl Workload {
    fn read_fraction(self) -> f64 {
        match self {
            Workload::Randread | Workload::Seqread => 1.0,
            Workload::Mixed => 0.66,
            Workload::Randwrite | Workload::Seqwrite => 0.0,
        }
    }
    fn sequential(self) -> bool {
        matches!(self, Workload::Seqread | Workload::Seqwrite)
    }
    pub fn name(self) -> &'static str {
        match self {
            Workload::Randread => "randread",
            Workload::Randwrite => "randwrite",
            Workload::Mixed => "mixed",
            Workload::Seqread => "seqread",
            Workload::Seqwrite => "seqwrite",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum TargetKind {
    Ours,
    Odirect,
    Pagecache,
    Memcpy,
}

impl TargetKind {
    pub const ALL: [TargetKind; 4] = [
        TargetKind::Ours,
        TargetKind::Odirect,
        TargetKind::Pagecache,
        TargetKind::Memcpy,
    ];
    fn name(self) -> &'static str {
        match self {
            TargetKind::Ours => "ours",
            TargetKind::Odirect => "odirect",
            TargetKind::Pagecache => "pagecache",
            TargetKind::Memcpy => "memcpy",
        }
    }
}

#[derive(Debug, Clone)]
pub struct VolumeBenchSpec {
    pub workload: Workload,
    pub bs: usize,
    pub threads: usize,
    pub seconds: f64,
    pub durability: Durability,
    pub size: u64,
    /// Our volume's journal in bytes (0: none).
    pub journal: u64,
    pub dir: Option<PathBuf>,
    pub targets: Vec<TargetKind>,
    pub progress: bool,
}

#[derive(Debug, Clone, Copy, Serialize)]
pub struct Stats {
    pub iops: f64,
    pub mbps: f64,
    pub p50_us: f64,
    pub p99_us: f64,
    pub ops: u64,
}

#[derive(Debug, Clone, Serialize)]
pub struct VolumeBenchResult {
    pub workload: Workload,
    pub bs: usize,
    pub threads: usize,
    pub durability: &'static str,
    pub seconds: f64,
    pub size: u64,
    /// False when the file system refused O_DIRECT and everything ran buffered.
    pub direct_io: bool,
    pub ours: Option<Stats>,
    pub baselines: BTreeMap<String, Stats>,
    /// Ours / baseline, in IOPS.
    pub ratios: BTreeMap<String, f64>,
    /// Our volume's journal during the measured run (absent without one).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub journal: Option<JournalFigures>,
}

/// What the journal did during a measured run: batching and checkpoint work.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct JournalFigures {
    pub journal_len: u64,
    pub batches: u64,
    pub records: u64,
    pub records_per_batch: f64,
    pub checkpoints: u64,
    pub home_writes: u64,
}

/// One thread's handle on a target.
trait Worker: Send {
    /// Bytes this worker addresses (ops fall in `[0, span)`).
    fn span(&self) -> u64;
    fn read(&mut self, offset: u64, buf: &mut [u8]) -> Result<()>;
    fn write(&mut self, offset: u64, data: &[u8]) -> Result<()>;
}

struct VolumeWorker<'a> {
    vol: &'a Volume,
    durability: Durability,
}

impl Worker for VolumeWorker<'_> {
    fn span(&self) -> u64 {
        self.vol.size()
    }
    fn read(&mut self, offset: u64, buf: &mut [u8]) -> Result<()> {
        Ok(self.vol.read_at(offset, buf)?)
    }
    fn write(&mut self, offset: u64, data: &[u8]) -> Result<()> {
        Ok(self.vol.write_at_with(offset, data, self.durability)?)
    }
}

/// A plain file. With O_DIRECT, unaligned requests are widened to whole sectors (and
/// writes read-modify-write them), as any O_DIRECT user must.
struct FileWorker<'a> {
    file: &'a File,
    size: u64,
    direct: bool,
    sync_each_write: bool,
    scratch: AlignedBuf,
}

impl Worker for FileWorker<'_> {
    fn span(&self) -> u64 {
        self.size
    }
    fn read(&mut self, offset: u64, buf: &mut [u8]) -> Result<()> {
        if !self.direct {
            return Ok(self.file.read_exact_at(buf, offset)?);
        }
        let start = offset - offset % IO_ALIGN;
        let end = (offset + buf.len() as u64).next_multiple_of(IO_ALIGN);
        let span = &mut self.scratch[..(end - start) as usize];
        self.file.read_exact_at(span, start)?;
        let skip = (offset - start) as usize;
        buf.copy_from_slice(&span[skip..skip + buf.len()]);
        Ok(())
    }
    fn write(&mut self, offset: u64, data: &[u8]) -> Result<()> {
        if !self.direct {
            self.file.write_all_at(data, offset)?;
        } else {
            let start = offset - offset % IO_ALIGN;
            let end = (offset + data.len() as u64).next_multiple_of(IO_ALIGN);
            let span = &mut self.scratch[..(end - start) as usize];
            if start != offset || end != offset + data.len() as u64 {
                self.file.read_exact_at(span, start)?;
            }
            let skip = (offset - start) as usize;
            span[skip..skip + data.len()].copy_from_slice(data);
            self.file.write_all_at(span, start)?;
        }
        if self.sync_each_write {
            self.file.sync_data()?;
        }
        Ok(())
    }
}

/// Raw copies within one RAM buffer: the physical limit of any RAM store. Writers get
/// disjoint slabs (safe Rust, no locks); read-only runs share the whole buffer.
enum MemWorker<'a> {
    Shared(&'a [u8]),
    Slab(&'a mut [u8]),
}

impl Worker for MemWorker<'_> {
    fn span(&self) -> u64 {
        match self {
            MemWorker::Shared(b) => b.len() as u64,
            MemWorker::Slab(b) => b.len() as u64,
        }
    }
    fn read(&mut self, offset: u64, buf: &mut [u8]) -> Result<()> {
        let o = offset as usize;
        let src = match self {
            MemWorker::Shared(b) => &b[o..o + buf.len()],
            MemWorker::Slab(b) => &b[o..o + buf.len()],
        };
        buf.copy_from_slice(src);
        Ok(())
    }
    fn write(&mut self, offset: u64, data: &[u8]) -> Result<()> {
        match self {
            MemWorker::Shared(_) => bail!("memcpy baseline: write in a read-only run"),
            MemWorker::Slab(b) => {
                b[offset as usize..offset as usize + data.len()].copy_from_slice(data)
            }
        }
        Ok(())
    }
}

/// 1 ns to 100 s at 3 significant digits; longer latencies saturate.
/// One benchmark thread: its worker, buffers, and where its sequential stream is.
struct Thread<W> {
    worker: W,
    buf: Vec<u8>,
    data: Vec<u8>,
    slots: u64,
    next_seq: u64,
}

/// Runs the workload on every worker (one thread each) until the time is up, on the
/// one closed-loop driver (crate::driver).
fn drive<W: Worker>(workers: Vec<W>, spec: &VolumeBenchSpec) -> Result<Stats> {
    let threads = workers.len() as u64;
    let bs = spec.bs;
    let read_fraction = spec.workload.read_fraction();
    let sequential = spec.workload.sequential();
    let mut states = Vec::new();
    for (t, worker) in workers.into_iter().enumerate() {
        let slots = worker.span() / bs as u64;
        if slots == 0 {
            bail!(
                "block size {bs} is larger than the {}-byte target",
                worker.span()
            );
        }
        states.push(Thread {
            worker,
            buf: vec![0u8; bs],
            data: (0..bs).map(|i| (i * 7 + t) as u8).collect(),
            // Sequential streams start spread out so threads do not share blocks.
            next_seq: slots * t as u64 / threads,
            slots,
        });
    }
    let phase = Phase::timed(Duration::ZERO, spec.seconds);
    let (m, states) = closed_loop(states, 1, &phase, |st, ctx| -> Result<Step> {
        let slot = if sequential {
            let s = st.next_seq;
            st.next_seq = (st.next_seq + 1) % st.slots;
            s
        } else {
            ctx.rng.gen_range(0..st.slots)
        };
        let is_read =
            read_fraction >= 1.0 || (read_fraction > 0.0 && ctx.rng.gen_bool(read_fraction));
        if is_read {
            st.worker.read(slot * bs as u64, &mut st.buf)?;
        } else {
            st.worker.write(slot * bs as u64, &st.data)?;
        }
        Ok(Step::Done(0))
    })?;
    std::hint::black_box(&states);
    let iops = m.ops_per_s();
    Ok(Stats {
        iops,
        mbps: iops * bs as f64 / 1e6,
        p50_us: m.quantile_us(0.5),
        p99_us: m.quantile_us(0.99),
        ops: m.ops,
    })
}

fn direct_flag() -> i32 {
    rustix::fs::OFlags::DIRECT.bits() as i32
}

/// Opens a file with O_DIRECT, or without it (and says so) where the file system refuses.
fn open_file(path: &Path, direct: bool, dsync: bool) -> Result<(File, bool)> {
    let mut flags = if dsync {
        rustix::fs::OFlags::DSYNC.bits() as i32
    } else {
        0
    };
    let mut o = FsOpenOptions::new();
    o.read(true).write(true);
    if direct {
        if let Ok(f) = o.clone().custom_flags(flags | direct_flag()).open(path) {
            let mut probe = AlignedBuf::zeroed(IO_ALIGN as usize);
            if f.read_exact_at(&mut probe, 0).is_ok() {
                return Ok((f, true));
            }
        }
        flags &= !direct_flag();
    }
    let f = o
        .custom_flags(flags)
        .open(path)
        .with_context(|| format!("cannot open {}", path.display()))?;
    Ok((f, false))
}

/// Fills `[offset, offset + len)` of a file with incompressible data, 8 MiB at a time,
/// bypassing the page cache where it can.
pub fn fill_file(path: &Path, offset: u64, len: u64, label: &str, progress: bool) -> Result<()> {
    let (file, _) = open_file(path, true, false)?;
    const STEP: u64 = 8 << 20;
    let mut buf = AlignedBuf::zeroed(STEP as usize);
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    for word in buf.chunks_exact_mut(8) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        word.copy_from_slice(&x.to_le_bytes());
    }
    let pb = progress_bar(progress, len, label);
    let mut done = 0;
    while done < len {
        let n = STEP.min(len - done);
        // Vary each block so no layer can deduplicate them.
        buf[..8].copy_from_slice(&done.to_le_bytes());
        file.write_all_at(&buf[..n as usize], offset + done)
            .with_context(|| format!("cannot fill {}", path.display()))?;
        done += n;
        if let Some(pb) = &pb {
            pb.set_position(done);
        }
    }
    file.sync_data()?;
    if let Some(pb) = pb {
        pb.finish_and_clear();
    }
    Ok(())
}

fn progress_bar(enabled: bool, len: u64, label: &str) -> Option<indicatif::ProgressBar> {
    (enabled && std::io::stderr().is_terminal()).then(|| {
        let pb = indicatif::ProgressBar::new(len);
        pb.set_style(
            indicatif::ProgressStyle::with_template(&format!(
                "{label:>10} {{bar:40}} {{decimal_bytes}}/{{decimal_total_bytes}} {{decimal_bytes_per_sec}}"
            ))
            .expect("valid template"),
        );
        pb
    })
}

/// A scratch directory on the disk under test (default: the system temporary
/// directory), removed afterwards, also on error and Ctrl-C.
pub fn scratch_dir(dir: Option<&Path>) -> Result<crate::scratch::Scratch> {
    crate::scratch::Scratch::new("bench", dir)
}

pub fn bench_volume(spec: &VolumeBenchSpec) -> Result<VolumeBenchResult> {
    if spec.bs == 0 || spec.threads == 0 || spec.seconds <= 0.0 {
        bail!("--bs, --threads and --seconds must be positive");
    }
    if spec.size % IO_ALIGN != 0 || spec.size < spec.bs as u64 * spec.threads as u64 {
        bail!(
            "--size {} must be a multiple of {IO_ALIGN} and hold at least one block per thread",
            spec.size
        );
    }
    let scratch = scratch_dir(spec.dir.as_deref())?;
    let mut result = VolumeBenchResult {
        workload: spec.workload,
        bs: spec.bs,
        threads: spec.threads,
        durability: spec.durability.name(),
        seconds: spec.seconds,
        size: spec.size,
        direct_io: true,
        ours: None,
        baselines: BTreeMap::new(),
        ratios: BTreeMap::new(),
        journal: None,
    };
    for &kind in &spec.targets {
        let stats = match kind {
            TargetKind::Ours => {
                let path = scratch.path().join("ours.hscm");
                let opts = CreateOptions {
                    durability: spec.durability,
                    journal_size: spec.journal,
                    ..CreateOptions::default()
                };
                let header = Volume::create(&path, spec.size, &opts)?;
                fill_file(
                    &path,
                    header.data_offset(),
                    spec.size,
                    "fill ours",
                    spec.progress,
                )?;
                let vol = Volume::open(&path, &OpenOptions::default())?;
                watch_warmup(&vol, spec.progress && std::io::stderr().is_terminal())?;
                result.direct_io &= vol.backend_is_direct();
                let workers = (0..spec.threads)
                    .map(|_| VolumeWorker {
                        vol: &vol,
                        durability: spec.durability,
                    })
                    .collect();
                let before = vol.journal_stats();
                let stats = drive(workers, spec)?;
                let after = vol.journal_stats();
                if after.journal_len > 0 {
                    let (batches, records) = (
                        after.batches - before.batches,
                        after.records - before.records,
                    );
                    result.journal = Some(JournalFigures {
                        journal_len: after.journal_len,
                        batches,
                        records,
                        records_per_batch: records as f64 / batches.max(1) as f64,
                        checkpoints: after.checkpoints - before.checkpoints,
                        home_writes: after.home_runs - before.home_runs,
                    });
                }
                vol.close()?;
                std::fs::remove_file(&path)?;
                stats
            }
            TargetKind::Odirect | TargetKind::Pagecache => {
                let path = scratch.path().join("baseline.dat");
                if !path.exists() {
                    File::create(&path)?.set_len(spec.size)?;
                    fill_file(&path, 0, spec.size, "fill base", spec.progress)?;
                }
                let immediate = spec.durability == Durability::Immediate;
                let direct = kind == TargetKind::Odirect;
                let (file, got_direct) = open_file(&path, direct, direct && immediate)?;
                if direct {
                    result.direct_io &= got_direct;
                } else {
                    // Page-cache reads are only a baseline once the cache holds the file.
                    let mut buf = vec![0u8; 8 << 20];
                    let mut at = 0;
                    while at < spec.size {
                        let n = (buf.len() as u64).min(spec.size - at) as usize;
                        file.read_exact_at(&mut buf[..n], at)?;
                        at += n as u64;
                    }
                }
                let workers = (0..spec.threads)
                    .map(|_| FileWorker {
                        file: &file,
                        size: spec.size,
                        direct: got_direct,
                        sync_each_write: immediate && (!direct || !got_direct),
                        scratch: AlignedBuf::zeroed(spec.bs + 2 * IO_ALIGN as usize),
                    })
                    .collect();
                drive(workers, spec)?
            }
            TargetKind::Memcpy => {
                // Same page size as our RAM image (huge pages where the kernel allows),
                // so the limit is not handicapped by TLB misses ours avoids.
                let mut ram = memmap2::MmapMut::map_anon(spec.size as usize)?;
                #[cfg(target_os = "linux")]
                let _ = ram.advise(memmap2::Advice::HugePage);
                ram.fill(1);
                let workers: Vec<MemWorker<'_>> = if spec.workload.read_fraction() >= 1.0 {
                    (0..spec.threads).map(|_| MemWorker::Shared(&ram)).collect()
                } else {
                    let slab = (spec.size as usize / spec.threads).max(spec.bs);
                    ram.chunks_mut(slab)
                        .take(spec.threads)
                        .map(MemWorker::Slab)
                        .collect()
                };
                drive(workers, spec)?
            }
        };
        match kind {
            TargetKind::Ours => result.ours = Some(stats),
            other => {
                result.baselines.insert(other.name().into(), stats);
            }
        }
    }
    if let Some(ours) = result.ours {
        for (name, base) in &result.baselines {
            if base.iops > 0.0 {
                result.ratios.insert(name.clone(), ours.iops / base.iops);
            }
        }
    }
    Ok(result)
}

pub fn print_volume_result(r: &VolumeBenchResult) -> anyhow::Result<()> {
    outln!(
        "{} bs={} threads={} durability={} ({:.1} s each, {} working set{})",
        r.workload.name(),
        r.bs,
        r.threads,
        r.durability,
        r.seconds,
        human_bytes(r.size),
        if r.direct_io {
            ""
        } else {
            "; O_DIRECT refused: baselines ran buffered"
        }
    )?;
    outln!(
        "  {:<10} {:>12} {:>10} {:>10} {:>10} {:>10}",
        "target",
        "IOPS",
        "MB/s",
        "p50 µs",
        "p99 µs",
        "ours/x"
    )?;
    let row = |name: &str, s: &Stats, ratio: Option<f64>| {
        outln!(
            "  {:<10} {:>12.0} {:>10.1} {:>10.2} {:>10.2} {:>10}",
            name,
            s.iops,
            s.mbps,
            s.p50_us,
            s.p99_us,
            ratio.map_or("-".into(), |x| format!("{x:.2}x"))
        )
    };
    if let Some(o) = &r.ours {
        row("ours", o, None)?;
    }
    for (name, s) in &r.baselines {
        row(name, s, r.ratios.get(name).copied())?;
    }
    Ok(())
}

#[derive(Debug, Clone, Serialize)]
pub struct RestartSize {
    pub bytes: u64,
    pub open_ms: f64,
    pub first_read_ms: f64,
    pub warm_s: f64,
    pub warm_mbps: f64,
    /// The backend's raw sequential read speed on this size's file, measured beside it.
    pub raw_mbps: f64,
    /// How fast this machine hands out fresh memory of this size (populating huge
    /// pages: the kernel zeroes them, and a hypervisor may back them on first touch):
    /// a second limit on any warm-up, beside the device.
    pub fresh_memory_mbps: f64,
    /// Resident memory added by the open volume beyond its own size, in percent of it.
    pub ram_overhead_pct: f64,
}

impl RestartSize {
    /// What both restart tables show (text and Markdown), formatted once: size, open
    /// ms, first read ms, fully warm s, warm MB/s, raw MB/s, warm / raw, fresh memory
    /// MB/s.
    pub fn cells(&self) -> [String; 8] {
        [
            human_bytes(self.bytes),
            format!("{:.2}", self.open_ms),
            format!("{:.2}", self.first_read_ms),
            format!("{:.2}", self.warm_s),
            format!("{:.0}", self.warm_mbps),
            format!("{:.0}", self.raw_mbps),
            format!("{:.0}%", self.warm_mbps / self.raw_mbps * 100.0),
            format!("{:.0}", self.fresh_memory_mbps),
        ]
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct RestartResult {
    pub sizes: Vec<RestartSize>,
    pub backend_seq_read_mbps: f64,
    pub direct_io: bool,
}

fn resident_bytes() -> Result<u64> {
    let statm =
        std::fs::read_to_string("/proc/self/statm").context("cannot read /proc/self/statm")?;
    let pages: u64 = statm
        .split_whitespace()
        .nth(1)
        .and_then(|x| x.parse().ok())
        .context("unexpected /proc/self/statm format")?;
    Ok(pages * rustix::param::page_size() as u64)
}

/// The backend's raw sequential read speed over `[offset, offset+len)`: 8 MiB O_DIRECT
/// reads with one and with two in flight (as many as our loaders keep), into huge-page
/// memory as our loaders read, the faster of the two.
fn seq_read_mbps(path: &Path, offset: u64, len: u64) -> Result<f64> {
    let (file, _) = open_file(path, true, false)?;
    const STEP: u64 = 8 << 20;
    let mut best: f64 = 0.0;
    for depth in [1u64, 2] {
        let t0 = Instant::now();
        std::thread::scope(|s| -> Result<()> {
            let streams: Vec<_> = (0..depth)
                .map(|k| {
                    let file = &file;
                    s.spawn(move || -> Result<()> {
                        // Huge pages, like our RAM image: fewer DMA segments per read.
                        let mut buf = memmap2::MmapMut::map_anon(STEP as usize)?;
                        #[cfg(target_os = "linux")]
                        let _ = buf.advise(memmap2::Advice::HugePage);
                        buf.fill(0);
                        let mut at = k * STEP;
                        while at < len {
                            let n = STEP.min(len - at) as usize;
                            file.read_exact_at(&mut buf[..n], offset + at)?;
                            at += depth * STEP;
                        }
                        Ok(())
                    })
                })
                .collect();
            for h in streams {
                h.join().expect("reader thread panicked")?;
            }
            Ok(())
        })?;
        best = best.max(len as f64 / 1e6 / t0.elapsed().as_secs_f64());
    }
    Ok(best)
}

/// Populates `len` bytes of fresh anonymous huge-page memory, as the volume's RAM copy
/// is populated, and returns the rate. Informational: under a hypervisor that takes
/// freed guest memory back (virtio-balloon free-page reporting) the rate depends on how
/// long ago the pages were freed, from well under 1 GB/s to over 10 GB/s.
fn fresh_memory_mbps(len: u64) -> Result<f64> {
    let map = memmap2::MmapMut::map_anon(len as usize)?;
    #[cfg(target_os = "linux")]
    let _ = map.advise(memmap2::Advice::HugePage);
    let t0 = Instant::now();
    #[cfg(target_os = "linux")]
    map.advise(memmap2::Advice::PopulateWrite)
        .context("cannot populate memory (MADV_POPULATE_WRITE needs Linux 5.14)")?;
    Ok(len as f64 / 1e6 / t0.elapsed().as_secs_f64())
}

pub fn restart_sizes(max: u64) -> Vec<u64> {
    let mut sizes: Vec<u64> = [256u64 << 20, 1 << 30]
        .into_iter()
        .filter(|&s| s < max)
        .collect();
    sizes.push(max);
    sizes
}

pub fn bench_restart(sizes: &[u64], dir: Option<&Path>, progress: bool) -> Result<RestartResult> {
    let scratch = scratch_dir(dir)?;
    let mut out = RestartResult {
        sizes: Vec::new(),
        backend_seq_read_mbps: 0.0,
        direct_io: true,
    };
    for &size in sizes {
        if size % IO_ALIGN != 0 {
            bail!("restart size {size} must be a multiple of {IO_ALIGN}");
        }
        let path = scratch.path().join(format!("restart-{size}.hscm"));
        let data_offset = Volume::create(&path, size, &CreateOptions::default())?.data_offset();
        fill_file(&path, data_offset, size, "fill", progress)?;
        // A raw pass first lets the device settle after the fill (a host may still be
        // writing it back); the better of the passes before and after the warm-up is
        // the baseline, which can only favour the baseline.
        let raw_before = seq_read_mbps(&path, data_offset, size)?;

        let rss0 = resident_bytes()?;
        let t0 = Instant::now();
        let vol = Volume::open(&path, &OpenOptions::default())?;
        let open_ms = t0.elapsed().as_secs_f64() * 1e3;
        let mut one = [0u8; 4096];
        vol.read_at(size / 2 + 12_345, &mut one)?;
        let first_read_ms = t0.elapsed().as_secs_f64() * 1e3;
        watch_warmup(&vol, progress && std::io::stderr().is_terminal())?;
        let warm_s = t0.elapsed().as_secs_f64();
        let rss1 = resident_bytes()?;
        out.direct_io &= vol.backend_is_direct();
        vol.close()?;

        let raw_mbps = raw_before.max(seq_read_mbps(&path, data_offset, size)?);
        let fresh_memory_mbps = fresh_memory_mbps(size)?;
        out.backend_seq_read_mbps = out.backend_seq_read_mbps.max(raw_mbps);
        out.sizes.push(RestartSize {
            bytes: size,
            open_ms,
            first_read_ms,
            warm_s,
            warm_mbps: size as f64 / 1e6 / warm_s,
            raw_mbps,
            fresh_memory_mbps,
            ram_overhead_pct: (rss1 as f64 - rss0 as f64 - size as f64) / size as f64 * 100.0,
        });
        std::fs::remove_file(&path)?;
    }
    Ok(out)
}

pub fn print_restart(r: &RestartResult) -> anyhow::Result<()> {
    outln!(
        "restart: backend sequential read {:.0} MB/s (O_DIRECT {})",
        r.backend_seq_read_mbps,
        if r.direct_io { "on" } else { "off" }
    )?;
    outln!(
        "  {:>10} {:>9} {:>14} {:>9} {:>10} {:>9} {:>7} {:>9} {:>12}",
        "size",
        "open ms",
        "first read ms",
        "warm s",
        "warm MB/s",
        "raw MB/s",
        "of raw",
        "mem MB/s",
        "RAM extra %"
    )?;
    for s in &r.sizes {
        let [size, open, first, warm_s, warm, raw, of_raw, mem] = s.cells();
        outln!(
            "  {size:>10} {open:>9} {first:>14} {warm_s:>9} {warm:>10} {raw:>9} {of_raw:>7} {mem:>9} {:>12.3}",
            s.ram_overhead_pct
        )?;
    }
    Ok(())
}

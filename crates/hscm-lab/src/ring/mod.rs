//! `hscm bench ring`: the shared-memory queue transport against plain memcpy and a
//! Unix-socket transport, measured in the same run. `mod.rs` holds the flags, the
//! figures and the run; `measure` the timed loops; `print` the text tables.

mod measure;
mod print;

use measure::*;
pub use print::print;

use crate::{closed_loop, paired, Phase, Step};
use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use hdrhistogram::Histogram;
use hscm_ring::uds::UdsClient;
use hscm_ring::{Client, ClientOptions, Op, Server, ServerOptions, WaitMode};
use hscm_volume::{AlignedBuf, CreateOptions, OpenOptions, Volume};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use serde::Serialize;

use crate::units::human_bytes;

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
#[derive(clap::Args, Clone)]
pub struct RingBenchArgs {
    /// Request sizes ("access chunk sizes"), comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "4k,16k,64k,128k,256k,512k", value_parser = crate::units::parse_size)]
    pub chunks: Vec<u64>,
    /// Queue depths (client threads, one request each, as the paper's QD).
    #[arg(long, value_delimiter = ',', default_value = "1,4")]
    pub qd: Vec<u32>,
    /// Completion modes to measure: adaptive, interrupt, poll.
    #[arg(long, value_delimiter = ',', default_value = "adaptive")]
    pub modes: Vec<String>,
    /// Split size: requests larger than this are pipelined as several commands.
    #[arg(long, default_value = "64k", value_parser = crate::units::parse_size)]
    pub split: u64,
    /// Data buffer per client.
    #[arg(long, default_value = "2M", value_parser = crate::units::parse_size)]
    pub db: u64,
    /// Volume size; random request offsets span all of it.
    #[arg(long, default_value = "256M", value_parser = crate::units::parse_size)]
    pub size: u64,
    /// Measured seconds per row.
    #[arg(long, default_value_t = 0.5)]
    pub seconds: f64,
    /// Skip the data-buffer size sweep (the paper's Figure 8).
    #[arg(long)]
    pub no_db_sweep: bool,
    /// Skip the `in-place` rows (one-copy reads used where the server put them, in the
    /// client's data buffer; the other modes copy each read out into a private buffer).
    #[arg(long)]
    pub no_in_place: bool,
    /// Directory for the volume file (default: a temporary directory).
    #[arg(long)]
    pub dir: Option<PathBuf>,
    /// Print JSON (a stable contract) instead of text; a failure prints {"ok": false, "error": ...}.
    #[arg(long)]
    pub json: bool,
}

#[derive(Serialize, Clone, Debug)]
pub struct RingRow {
    pub chunk: u64,
    pub qd: u32,
    pub mode: String,
    pub protocol_mbps: f64,
    pub interface_mbps: f64,
    pub overhead: f64,
    pub p50_us: f64,
    pub p99_us: f64,
    pub ops_per_s: f64,
    /// The bare core-to-core round trip (see [`RingReport::core_round_trip_ns`]),
    /// timed just before this chunk size and queue depth's rows.
    pub core_round_trip_ns: f64,
    /// QD1 in-place rows only: the same reads and copies of one fixed, cache-resident
    /// range (mean ns each, measured in alternating slices just after the row). Their
    /// difference is the protocol's own cost, round trip included, with no memory
    /// misses in it; see docs/ring.md.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cached_read_ns: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cached_copy_ns: Option<f64>,
}

#[derive(Serialize, Clone, Debug)]
pub struct UdsRow {
    pub chunk: u64,
    pub qd: u32,
    pub p50_us: f64,
    pub p99_us: f64,
    pub ops_per_s: f64,
    pub mbps: f64,
}

#[derive(Serialize, Clone, Debug)]
pub struct DbRow {
    pub chunk: u64,
    pub db: u64,
    pub qd: u32,
    pub protocol_mbps: f64,
}

#[derive(Serialize, Clone, Debug)]
pub struct RingReport {
    pub rows: Vec<RingRow>,
    pub uds: Vec<UdsRow>,
    pub db_sweep: Vec<DbRow>,
    pub split: u64,
    pub volume_size: u64,
    pub seconds_per_row: f64,
    pub interface: &'static str,
    /// Mean round trip of one cache line between two threads of this process, each
    /// polling for the other's store, in ns: measured before the rows and after them.
    /// A QD1 command cannot cost less than one (the client's store must reach the
    /// server's core and the completion come back); on this VM it moves between about
    /// 60 and 650 ns with where the host puts the two vCPUs.
    pub core_round_trip_ns: [f64; 2],
}

impl RingRow {
    /// What every table of rows starts with, formatted once: chunk, queue depth,
    /// completion mode, ring MB/s, interface MB/s, overhead.
    pub fn lead_cells(&self) -> [String; 6] {
        [
            human_bytes(self.chunk),
            self.qd.to_string(),
            self.mode.clone(),
            format!("{:.0}", self.protocol_mbps),
            format!("{:.0}", self.interface_mbps),
            format!("{:.1}%", self.overhead * 100.0),
        ]
    }
}

impl RingReport {
    /// The Unix-socket run with the same chunk and queue depth as `row`.
    pub fn uds_for(&self, row: &RingRow) -> Option<&UdsRow> {
        self.uds
            .iter()
            .find(|u| u.chunk == row.chunk && u.qd == row.qd)
    }

    /// The data-buffer sweep as a grid: buffer sizes (columns), then per chunk size its
    /// MB/s at each buffer size.
    pub fn db_grid(&self) -> (Vec<u64>, Vec<(u64, Vec<f64>)>) {
        let mut dbs: Vec<u64> = self.db_sweep.iter().map(|d| d.db).collect();
        dbs.sort();
        dbs.dedup();
        let mut chunks: Vec<u64> = self.db_sweep.iter().map(|d| d.chunk).collect();
        chunks.dedup();
        let grid = chunks
            .into_iter()
            .map(|c| {
                let at = |db: u64| {
                    self.db_sweep
                        .iter()
                        .find(|x| x.chunk == c && x.db == db)
                        .map_or(0.0, |x| x.protocol_mbps)
                };
                (c, dbs.iter().map(|&d| at(d)).collect())
            })
            .collect();
        (dbs, grid)
    }
}

/// What a QD1 read costs beyond its copy, taken apart with the same read and copy of a
/// cache-resident range (so neither waits for memory) and the bare round trip. All ns.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct OverheadParts {
    /// Random read minus random copy.
    pub over: f64,
    /// Cached read minus cached copy: the protocol's own cost.
    pub cached_over: f64,
    pub round_trip: f64,
}

impl OverheadParts {
    pub fn split(over: f64, cached_over: f64, round_trip: f64) -> OverheadParts {
        OverheadParts {
            over,
            cached_over,
            round_trip,
        }
    }

    /// The protocol's software on both sides, beyond the round trip.
    pub fn software(&self) -> f64 {
        self.cached_over - self.round_trip
    }

    /// Memory misses the server's lone copy waits out that a loop of copies hides
    /// behind the next copy.
    pub fn exposed_misses(&self) -> f64 {
        self.over - self.cached_over
    }

    /// Why this run's parts cannot be trusted, if they cannot: parts that do not add up
    /// mean the host moved or stopped a vCPU between the measurements. `read_ns` is the
    /// whole read the parts belong to.
    pub fn unmeasurable(&self, read_ns: f64) -> Option<String> {
        if self.round_trip > read_ns {
            Some(format!(
                "the bare round trip ({:.0} ns) took longer than the whole read ({read_ns:.0} ns)",
                self.round_trip
            ))
        } else if self.software() < 0.0 {
            Some(format!(
                "the cached read cost {:.0} ns beyond its copy, less than the bare round trip ({:.0} ns)",
                self.cached_over, self.round_trip
            ))
        } else {
            None
        }
    }
}

/// Why a bare round trip of `round_trip` ns is not a figure: no request can be faster
/// than the round trip under it, so one longer than the fastest whole request
/// (`fastest_read` ns) was timed while a vCPU was descheduled.
pub fn round_trip_unmeasurable(round_trip: f64, fastest_read: Option<f64>) -> Option<String> {
    let fastest = fastest_read?;
    (round_trip > fastest).then(|| {
        format!(
            "not measurable in this run ({round_trip:.0} ns, longer than the fastest whole request, {fastest:.0} ns: a vCPU was descheduled while it was timed)"
        )
    })
}

impl RingRow {
    /// Mean ns of one read and of one copy, from the row's bandwidths.
    pub fn read_and_copy_ns(&self) -> (f64, f64) {
        let ns = |mbps: f64| self.chunk as f64 / mbps * 1e3;
        (ns(self.protocol_mbps), ns(self.interface_mbps))
    }

    /// The overhead taken apart, for rows that measured a cached source.
    pub fn overhead_parts(&self) -> Option<OverheadParts> {
        let (read, copy) = self.read_and_copy_ns();
        Some(OverheadParts::split(
            read - copy,
            self.cached_read_ns? - self.cached_copy_ns?,
            self.core_round_trip_ns,
        ))
    }

    fn new(
        chunk: u64,
        qd: u32,
        mode: &str,
        ring: &Measured,
        interface_mbps: f64,
        core_round_trip_ns: f64,
    ) -> RingRow {
        RingRow {
            chunk,
            qd,
            mode: mode.to_string(),
            protocol_mbps: ring.mbps(),
            interface_mbps,
            overhead: 1.0 - ring.mbps() / interface_mbps,
            p50_us: ring.us(0.5),
            p99_us: ring.us(0.99),
            ops_per_s: ring.ops as f64 / ring.elapsed,
            core_round_trip_ns,
            cached_read_ns: None,
            cached_copy_ns: None,
        }
    }

    fn progress(&self) {
        note!(
            "ring {:>7} qd{} {:<9} {:>8.0} MB/s (memcpy {:>8.0}) overhead {:>5.1}%  p50 {:.2} µs",
            human_bytes(self.chunk),
            self.qd,
            self.mode,
            self.protocol_mbps,
            self.interface_mbps,
            self.overhead * 100.0,
            self.p50_us
        );
    }
}

pub fn bench(a: &RingBenchArgs) -> Result<RingReport> {
    let tmp;
    let dir: &Path = match &a.dir {
        Some(d) => d,
        None => {
            tmp = crate::scratch::Scratch::new("ring", None)?;
            tmp.path()
        }
    };
    let modes: Vec<WaitMode> = a
        .modes
        .iter()
        .map(|m| m.parse().map_err(anyhow::Error::msg))
        .collect::<Result<_>>()?;
    let max_chunk = a.chunks.iter().copied().max().unwrap_or(4096);
    anyhow::ensure!(
        a.size >= max_chunk * 4,
        "--size must hold at least four of the largest chunk"
    );
    let vol_path = dir.join("ring-bench.hscm");
    Volume::create(
        &vol_path,
        a.size,
        &CreateOptions {
            overwrite: true,
            ..Default::default()
        },
    )?;
    let volume = Arc::new(Volume::open(&vol_path, &OpenOptions::default())?);
    volume.wait_loaded(None)?;
    // Fill with non-zero bytes so copies move real data.
    let fill = vec![0x5au8; 1 << 20];
    for off in (0..a.size).step_by(1 << 20) {
        let n = (a.size - off).min(1 << 20) as usize;
        volume.write_at_with(off, &fill[..n], hscm_volume::Durability::OnFlush)?;
    }
    // Home locations written and synced now: otherwise the volume's checkpointer starts
    // a second after the last write and writes the fill out to disk while the first
    // rows are timed.
    volume.checkpoint()?;
    let sock = dir.join("ring-bench.sock");
    let server = Server::bind(
        &sock,
        volume.clone(),
        ServerOptions {
            max_db: 64 << 20,
            ..Default::default()
        },
    )?
    .spawn()?;
    let uds_sock = dir.join("ring-bench-uds.sock");
    hscm_ring::uds::spawn_server(&uds_sock, volume.clone())?;
    let progress = std::io::stderr().is_terminal() && !a.json;
    let size = a.size;
    let round_trip_before = core_round_trip_ns(0.2);

    let mut rows = Vec::new();
    let mut uds = Vec::new();
    for &chunk in &a.chunks {
        for &qd in &a.qd {
            // The floor under these rows, as the host places the vCPUs now.
            let floor = core_round_trip_ns(0.05);
            // Every ring row is measured in slices alternating with the interface's
            // copies (drive_paired); the async rows, one thread against `qd`, are set
            // against the interface pooled over the row's other pairs.
            let copy = |dst: &mut Destination, rng: &mut SmallRng| -> Result<()> {
                let off = random_offset(rng, size, chunk);
                let dst = dst.bytes();
                volume.read_at(off, dst)?;
                std::hint::black_box(&dst);
                Ok(())
            };
            let mut copies = Vec::new();
            let mut push_row = |row: RingRow| {
                if progress {
                    row.progress();
                }
                rows.push(row);
            };
            for &mode in &modes {
                let opts = ClientOptions {
                    queues: qd,
                    depth: 64,
                    db_len: a.db,
                    chunk: a.split,
                    wait: mode,
                };
                let client = Client::connect(&sock, &opts)?;
                let (iface, m) = drive_paired(
                    qd,
                    a.seconds,
                    chunk,
                    |_| {
                        Ok((
                            Destination::new(chunk),
                            (client.queue()?, Destination::new(chunk)),
                        ))
                    },
                    copy,
                    |(q, buf), rng| ring_read(q, buf.bytes(), rng, size),
                )?;
                push_row(RingRow::new(
                    chunk,
                    qd,
                    mode.name(),
                    &m,
                    iface.mbps(),
                    floor,
                ));
                copies.push(iface);
            }
            if !a.no_in_place && chunk <= a.db {
                // The one-copy read: the server's copy lands in the client's data
                // buffer and the caller uses it there, as the paper's host uses the
                // buffer its DMA filled. Like the memcpy baseline's destination, the
                // bytes are handed over, not inspected.
                let opts = ClientOptions {
                    queues: qd,
                    depth: 64,
                    db_len: a.db,
                    chunk: a.split,
                    wait: WaitMode::adaptive(),
                };
                let client = Client::connect(&sock, &opts)?;
                let (iface, m) = drive_paired(
                    qd,
                    a.seconds,
                    chunk,
                    |_| Ok((Destination::new(chunk), client.queue()?)),
                    copy,
                    |q, rng| {
                        let off = random_offset(rng, size, chunk);
                        q.read_in_place(off, chunk as usize, |bytes| {
                            std::hint::black_box(bytes);
                        })?;
                        Ok(())
                    },
                )?;
                let mut row = RingRow::new(chunk, qd, "in-place", &m, iface.mbps(), floor);
                copies.push(iface);
                if qd == 1 {
                    // Offset 0 every time: after the first read the source is in the
                    // server's cache and the copy's, so neither waits for memory.
                    let (copy, read) = drive_paired(
                        1,
                        a.seconds.min(CACHED_SECONDS),
                        chunk,
                        |_| Ok((Destination::new(chunk), client.queue()?)),
                        |dst, _| Ok(volume.read_at(0, dst.bytes())?),
                        |q, _| {
                            q.read_in_place(0, chunk as usize, |bytes| {
                                std::hint::black_box(bytes);
                            })?;
                            Ok(())
                        },
                    )?;
                    row.cached_copy_ns = Some(copy.mean_ns());
                    row.cached_read_ns = Some(read.mean_ns());
                }
                push_row(row);
            }
            if qd > 1 && chunk <= a.split {
                let opts = ClientOptions {
                    queues: 1,
                    depth: 64,
                    db_len: a.db,
                    chunk: a.split,
                    wait: WaitMode::adaptive(),
                };
                let client = Client::connect(&sock, &opts)?;
                let m = drive_async(&client, qd, a.seconds, chunk, size)?;
                let iface_mbps = if copies.is_empty() {
                    drive(qd, a.seconds, chunk, |_| Ok(Destination::new(chunk)), copy)?.mbps()
                } else {
                    Measured::pooled_mbps(&copies)
                };
                push_row(RingRow::new(chunk, qd, "async", &m, iface_mbps, floor));
            }
            let m = drive(
                qd,
                a.seconds,
                chunk,
                |_| Ok((UdsClient::connect(&uds_sock)?, Destination::new(chunk))),
                |(c, buf), rng| {
                    let off = random_offset(rng, size, chunk);
                    c.read(off / 512, buf.bytes())?;
                    Ok(())
                },
            )?;
            let row = UdsRow {
                chunk,
                qd,
                p50_us: m.us(0.5),
                p99_us: m.us(0.99),
                ops_per_s: m.ops as f64 / m.elapsed,
                mbps: m.mbps(),
            };
            if progress {
                note!(
                    "uds  {:>7} qd{} {:>8.0} MB/s p50 {:.2} µs",
                    human_bytes(chunk),
                    qd,
                    row.mbps,
                    row.p50_us
                );
            }
            uds.push(row);
        }
    }

    let mut db_sweep = Vec::new();
    if !a.no_db_sweep {
        for &chunk in &[4096u64, 64 * 1024, 256 * 1024] {
            for db in [
                64u64 << 10,
                128 << 10,
                256 << 10,
                512 << 10,
                1 << 20,
                2 << 20,
            ] {
                let opts = ClientOptions {
                    queues: 4,
                    depth: 64,
                    db_len: db,
                    chunk: a.split.min(db),
                    wait: WaitMode::adaptive(),
                };
                let client = Client::connect(&sock, &opts)?;
                let m = drive(
                    4,
                    a.seconds / 2.0,
                    chunk,
                    |_| Ok((client.queue()?, Destination::new(chunk))),
                    |(q, buf), rng| ring_read(q, buf.bytes(), rng, size),
                )?;
                if progress {
                    note!(
                        "db sweep {:>7} db {:>7}: {:>8.0} MB/s",
                        human_bytes(chunk),
                        human_bytes(db),
                        m.mbps()
                    );
                }
                db_sweep.push(DbRow {
                    chunk,
                    db,
                    qd: 4,
                    protocol_mbps: m.mbps(),
                });
            }
        }
    }
    server.shutdown();
    let round_trip_after = core_round_trip_ns(0.2);
    Ok(RingReport {
        rows,
        uds,
        db_sweep,
        split: a.split,
        volume_size: a.size,
        seconds_per_row: a.seconds,
        interface: "the same reads made in this process, copied from the volume's RAM into a private page-aligned buffer (the one copy an in-process reader makes), same threads, in 100 ms slices alternating with the ring row's",
        core_round_trip_ns: [round_trip_before, round_trip_after],
    })
}

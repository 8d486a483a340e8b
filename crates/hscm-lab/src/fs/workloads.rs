//! The points `hscm bench fs` measures on every file system, and how each runs.

use std::io::{Read, Write};
use std::time::Instant;

use anyhow::{Context, Result};

use super::mounts::{drop_caches, Mounted, Under};
use crate::fio::FioResult;

/// Table 3's request sizes.
pub const SIZES: [u64; 5] = [1024, 2048, 4096, 8192, 16384];

/// What a point does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// fio on one file (`workload` is its `--rw`).
    Io,
    /// fio's filecreate, filestat or filedelete engine over many small files.
    Metadata,
    /// The fileserver job file.
    Fileserver,
    /// Seed 001's video read-modify-rewrite.
    Video,
}

/// One measured point; its fields become the row's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Point {
    pub kind: Kind,
    pub workload: &'static str,
    pub bs: u64,
    /// fio's engine (psync, libaio, filecreate…), or "hscm-lab" for the video.
    pub engine: &'static str,
    pub jobs: u32,
    /// The file's pages were read into the page cache first (else it is dropped).
    pub warm: bool,
    /// Every acknowledged write durable (hscm immediate; an fsync after each write
    /// elsewhere).
    pub durable: bool,
}

impl Point {
    const fn io(workload: &'static str, bs: u64, engine: &'static str, jobs: u32) -> Point {
        Point {
            kind: Kind::Io,
            workload,
            bs,
            engine,
            jobs,
            warm: false,
            durable: false,
        }
    }

    /// The part of a ratio's key that tells this point from the others of its
    /// workload and size: "", " libaio", " 4jobs", " warm", " durable"…
    pub fn qualifiers(&self) -> String {
        let mut q = String::new();
        if self.kind == Kind::Io {
            if self.engine != "psync" {
                q += &format!(" {}", self.engine);
            }
            if self.jobs != 1 {
                q += &format!(" {}jobs", self.jobs);
            }
        }
        if self.warm {
            q += " warm";
        }
        if self.durable {
            q += " durable";
        }
        q
    }

    /// Ratios compare IOPS, but the fileserver's bytes moved: its jobs run side by
    /// side, so its operation count is mostly whichever kind is cheapest (stat).
    pub fn compares_bytes(&self) -> bool {
        self.kind == Kind::Fileserver
    }
}

/// The points every file system runs, hscm in on-flush mode (the paper's fast mode:
/// durable at fsync, as the buffered kernel file systems are).
fn common() -> Vec<Point> {
    let mut p = Vec::new();
    // Seed 000's Table 3: random reads and writes of 1-16 KiB, one job, cold.
    for rw in ["randread", "randwrite"] {
        for bs in SIZES {
            p.push(Point::io(rw, bs, "psync", 1));
        }
    }
    // 4 KiB with a queue (libaio, depth 16) and with four jobs.
    for rw in ["randread", "randwrite"] {
        for (engine, jobs) in [("libaio", 1), ("psync", 4), ("libaio", 4)] {
            p.push(Point::io(rw, 4096, engine, jobs));
        }
    }
    // Seed 001's file-level 66:34 mix, one job and four.
    for jobs in [1, 4] {
        p.push(Point::io("randrw", 4096, "psync", jobs));
    }
    // Sequential, 1 MiB requests.
    for rw in ["read", "write"] {
        p.push(Point::io(rw, 1 << 20, "psync", 1));
    }
    // Reads once the file is in the page cache.
    p.push(Point {
        warm: true,
        ..Point::io("randread", 4096, "psync", 1)
    });
    for (workload, engine) in [
        ("create", "filecreate"),
        ("stat", "filestat"),
        ("unlink", "filedelete"),
    ] {
        p.push(Point {
            kind: Kind::Metadata,
            ..Point::io(workload, 0, engine, 1)
        });
    }
    p.push(Point {
        kind: Kind::Fileserver,
        ..Point::io("fileserver", 0, "fio-jobfile", 50)
    });
    p.push(Point {
        kind: Kind::Video,
        ..Point::io("video", 1 << 20, "hscm-lab", 1)
    });
    p
}

/// The durable 4 KiB random write.
pub const DURABLE_WRITE: Point = Point {
    durable: true,
    ..Point::io("randwrite", 4096, "psync", 1)
};

/// The file systems the durable write compares, in the order each round runs them:
/// hscm in immediate mode, ext4 with an fsync after each write, and the plain file on
/// the same disk with an fdatasync after each (the disk's bound).
pub const DURABLE: [Under; 3] = [Under::HscmImmediate, Under::Ext4, Under::DiskFile];

/// Rounds of the durable write. The shared virtual disk's sync rate drifts by 2x
/// from one minute to the next, so the three take turns, round after round, and
/// each keeps its median round.
pub const DURABLE_ROUNDS: usize = 3;

/// What runs on `under` in the main pass (the durable write has its own, [`DURABLE`]).
pub fn points(under: Under) -> Vec<Point> {
    match under {
        Under::HscmImmediate | Under::DiskFile => Vec::new(),
        // Only fio's writers open read-write: the rest is hscm's own points.
        Under::HscmReadWritePassthrough => common()
            .into_iter()
            .filter(|p| {
                p.kind == Kind::Io && matches!(p.workload, "randwrite" | "randrw" | "write")
            })
            .collect(),
        _ => common(),
    }
}

/// The file the fio points work on.
pub fn data_file(m: &Mounted) -> std::path::PathBuf {
    m.at.join("fio.dat")
}

/// Writes the data file once, sequentially.
pub fn lay_out(m: &Mounted, size: u64) -> Result<()> {
    one_pass(m, size, "write")
}

/// Reads the data file once from start to end.
pub fn read_once(m: &Mounted, size: u64) -> Result<()> {
    one_pass(m, size, "read")
}

/// One sequential pass over the data file in 1 MiB requests: `write` lays it out,
/// `read` brings its pages into the page cache.
fn one_pass(m: &Mounted, size: u64, rw: &str) -> Result<()> {
    crate::fio::run(
        &[
            "--ioengine=psync".into(),
            format!("--filename={}", data_file(m).display()),
            format!("--size={size}"),
            format!("--rw={rw}"),
            "--bs=1M".into(),
        ],
        m.under.name(),
        None,
    )?;
    Ok(())
}

/// Runs `p` on `m` for about `seconds`; `size` is the data file's.
pub fn run(m: &Mounted, p: &Point, size: u64, seconds: f64) -> Result<FioResult> {
    match p.kind {
        Kind::Io => io(m, p, size, seconds),
        Kind::Metadata => metadata(m, p, size),
        Kind::Fileserver => fileserver(m, size, seconds),
        Kind::Video => video(m),
    }
}

fn io(m: &Mounted, p: &Point, size: u64, seconds: f64) -> Result<FioResult> {
    let mut args = vec![
        format!("--ioengine={}", p.engine),
        format!("--filename={}", data_file(m).display()),
        format!("--size={size}"),
        format!("--rw={}", p.workload),
        format!("--bs={}", p.bs),
        format!("--numjobs={}", p.jobs),
    ];
    if p.engine == "libaio" {
        args.push("--iodepth=16".into());
    }
    if p.workload == "randrw" {
        args.push("--rwmixread=66".into());
    }
    // hscm's writes are made durable by its mode; a file system's by an fsync each
    // (the baseline); the plain file's by an fdatasync each, as hscm's
    // volume syncs its own file: that is the disk's bound.
    if p.durable {
        match m.under {
            Under::HscmImmediate => {}
            Under::DiskFile => args.push("--fdatasync=1".into()),
            _ => args.push("--fsync=1".into()),
        }
    }
    if p.warm {
        rustix::fs::sync();
        one_pass(m, size, "read")?;
        // fio drops a file's cached pages before it starts, unless told not to.
        args.push("--invalidate=0".into());
    } else {
        drop_caches()?;
    }
    crate::fio::run(&args, m.under.name(), Some(seconds))
}

/// Files the metadata points create, stat and unlink: one per 64 KiB of the data
/// file's size, at least 200.
pub fn metadata_files(size: u64) -> u64 {
    (size / (64 << 10)).clamp(200, 20_000)
}

fn metadata(m: &Mounted, p: &Point, size: u64) -> Result<FioResult> {
    let dir = m.at.join("meta");
    std::fs::create_dir_all(&dir)?;
    drop_caches()?;
    // The three run in this order on the same names (fio names them after the job).
    crate::fio::run(
        &[
            format!("--ioengine={}", p.engine),
            format!("--directory={}", dir.display()),
            format!("--nrfiles={}", metadata_files(size)),
            "--filesize=4k".into(),
            "--openfiles=1".into(),
        ],
        m.under.name(),
        None,
    )
}

const FILESERVER_JOB: &str = include_str!("../../assets/fileserver.fio");

fn fileserver(m: &Mounted, size: u64, seconds: f64) -> Result<FioResult> {
    let dir = m.at.join("fileserver");
    std::fs::create_dir_all(&dir)?;
    let job = m.at.join("fileserver.fio");
    std::fs::write(&job, FILESERVER_JOB)?;
    // Files of 128 KiB on average holding half the data file's size, over 50
    // threads (with the data file, within the room each file system has).
    let per_thread = (size / 2 / (128 << 10) / 50).max(2);
    let r = crate::fio::run_job_file(
        &job,
        &[
            ("FS_DIR", dir.display().to_string()),
            ("FILES", per_thread.to_string()),
            (
                "RUNTIME",
                format!("{}ms", (seconds * 1000.0).max(100.0) as u64),
            ),
        ],
        m.under.name(),
    );
    let _ = std::fs::remove_dir_all(&dir);
    r
}

/// Seed 001's last experiment: a video file read, partly modified and saved as a
/// new file, three times (1.8 GB there; here the data file). Every 8th MiB is
/// changed; the save ends with an fsync, on every file system. From a cold cache.
fn video(m: &Mounted) -> Result<FioResult> {
    const CHUNK: usize = 1 << 20;
    const ROUNDS: u32 = 3;
    drop_caches()?;
    let mut chunk = vec![0u8; CHUNK];
    let mut latencies = Vec::new();
    let started = Instant::now();
    let mut moved = 0u64;
    for round in 0..ROUNDS {
        let mut src = std::fs::File::open(data_file(m)).context("opening the video")?;
        let out = m.at.join(format!("video-{round}.out"));
        let mut dst = std::fs::File::create(&out).context("creating the new video")?;
        let mut index = 0u64;
        loop {
            let t = Instant::now();
            let n = read_full(&mut src, &mut chunk)?;
            if n == 0 {
                break;
            }
            if index % 8 == 0 {
                chunk[..n.min(4096)].iter_mut().for_each(|b| *b = !*b);
            }
            dst.write_all(&chunk[..n])
                .context("writing the new video")?;
            latencies.push(t.elapsed().as_secs_f64() * 1e6);
            moved += 2 * n as u64;
            index += 1;
        }
        dst.sync_all().context("saving the new video")?;
        drop(dst);
        std::fs::remove_file(&out)?;
    }
    let elapsed = started.elapsed().as_secs_f64();
    latencies.sort_by(f64::total_cmp);
    let pct = |q: f64| {
        latencies
            .get(((latencies.len() as f64 - 1.0) * q).round() as usize)
            .copied()
            .unwrap_or(0.0)
    };
    Ok(FioResult {
        iops: latencies.len() as f64 / elapsed,
        mbps: moved as f64 / elapsed / 1e6,
        p50_us: pct(0.5),
        p99_us: pct(0.99),
    })
}

fn read_full(f: &mut std::fs::File, buf: &mut [u8]) -> Result<usize> {
    let mut n = 0;
    while n < buf.len() {
        match f.read(&mut buf[n..]).context("reading the video")? {
            0 => break,
            k => n += k,
        }
    }
    Ok(n)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_point_of_a_file_system_has_its_own_ratio_key() {
        for under in [Under::HscmOnFlush, Under::Ext4, Under::Passthrough] {
            let keys: Vec<String> = points(under)
                .iter()
                .map(|p| format!("{} bs{}{}", p.workload, p.bs, p.qualifiers()))
                .collect();
            let mut unique = keys.clone();
            unique.sort();
            unique.dedup();
            assert_eq!(unique.len(), keys.len(), "{keys:?}");
        }
    }

    #[test]
    fn table_3_points_keep_their_plain_keys() {
        let p = points(Under::Ext3);
        for rw in ["randread", "randwrite"] {
            for bs in SIZES {
                assert!(p
                    .iter()
                    .any(|x| x.workload == rw && x.bs == bs && x.qualifiers().is_empty()));
            }
        }
    }

    #[test]
    fn the_durable_write_runs_only_in_its_own_pass() {
        for under in [Under::HscmOnFlush, Under::Ext4, Under::Tmpfs] {
            assert!(!points(under).contains(&DURABLE_WRITE), "{under:?}");
        }
        assert!(points(Under::HscmImmediate).is_empty());
        assert!(points(Under::DiskFile).is_empty());
        assert!(DURABLE.contains(&Under::Ext4) && DURABLE.contains(&Under::DiskFile));
    }

    #[test]
    fn metadata_file_counts_follow_the_size_within_bounds() {
        assert_eq!(metadata_files(8 << 20), 200);
        assert_eq!(metadata_files(256 << 20), 4096);
        assert_eq!(metadata_files(1 << 40), 20_000);
    }
}

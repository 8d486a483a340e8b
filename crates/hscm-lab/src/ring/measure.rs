//! The timed loops of the ring benchmark: closed-loop and paired runs on the driver,
//! the queue-depth mode's own loop, and the core-to-core round trip that bounds QD1.

use super::*;

/// One blocking random read of `buf.len()` bytes through a queue.
pub(super) fn ring_read(
    q: &mut hscm_ring::Queue,
    buf: &mut [u8],
    rng: &mut SmallRng,
    size: u64,
) -> Result<()> {
    let chunk = buf.len() as u64;
    q.read(random_offset(rng, size, chunk) / 512, buf)?;
    Ok(())
}

pub(super) struct Measured {
    pub(super) bytes: u64,
    pub(super) ops: u64,
    pub(super) elapsed: f64,
    pub(super) hist: Histogram<u64>,
}

impl Measured {
    pub(super) fn mbps(&self) -> f64 {
        self.bytes as f64 / self.elapsed / 1e6
    }
    pub(super) fn us(&self, q: f64) -> f64 {
        self.hist.value_at_quantile(q) as f64 / 1000.0
    }

    /// Mean time per request, in ns, as the bandwidth figures count it (a single
    /// thread's requests back to back).
    pub(super) fn mean_ns(&self) -> f64 {
        self.elapsed / self.ops.max(1) as f64 * 1e9
    }

    /// The driver's measurement of `chunk`-byte requests.
    pub(super) fn of(m: crate::Measured, chunk: u64) -> Measured {
        Measured {
            bytes: m.ops * chunk,
            ops: m.ops,
            elapsed: m.elapsed_s,
            hist: m.all(),
        }
    }

    /// MB/s over several measurements of the same requests taken at different times.
    pub(super) fn pooled_mbps(all: &[Measured]) -> f64 {
        let bytes: u64 = all.iter().map(|m| m.bytes).sum();
        let elapsed: f64 = all.iter().map(|m| m.elapsed).sum();
        bytes as f64 / elapsed / 1e6
    }
}

/// Runs `threads` workers, each repeating `op(rng)` (one request of `chunk` bytes) for
/// `seconds` after a short warm-up, on the one closed-loop driver (crate::driver).
pub(super) fn drive<S: Send>(
    threads: u32,
    seconds: f64,
    chunk: u64,
    mut setup: impl FnMut(u32) -> Result<S>,
    op: impl Fn(&mut S, &mut SmallRng) -> Result<()> + Sync,
) -> Result<Measured> {
    let states: Vec<S> = (0..threads).map(&mut setup).collect::<Result<_>>()?;
    let phase = Phase::timed(WARM_UP, seconds);
    let (m, _) = closed_loop(states, 1, &phase, |st, ctx| {
        op(st, &mut ctx.rng).map(|()| Step::Done(0))
    })?;
    Ok(Measured::of(m, chunk))
}

pub(super) const WARM_UP: Duration = Duration::from_millis(50);

/// Seconds (at most) of the cached-source reads and copies after a QD1 in-place row.
pub(super) const CACHED_SECONDS: f64 = 0.2;

/// One slice of a paired measurement.
pub(super) const SLICE: Duration = Duration::from_millis(100);

/// Two workloads (`threads` workers each, requests of `chunk` bytes) measured in
/// alternating slices of [`SLICE`] (or `seconds`, if shorter), all workers switching
/// together, until each has run `seconds` (crate::driver::paired): both see the
/// same machine, whatever it does meanwhile. On this kind of shared VM memcpy
/// bandwidth alone moves by 10% and more from one second to the next, more than the
/// overheads being measured; one measurement after the other compared a ring row with
/// a memcpy taken up to seconds earlier.
pub(super) fn drive_paired<A: Send, B: Send>(
    threads: u32,
    seconds: f64,
    chunk: u64,
    mut setup: impl FnMut(u32) -> Result<(A, B)>,
    op_a: impl Fn(&mut A, &mut SmallRng) -> Result<()> + Sync,
    op_b: impl Fn(&mut B, &mut SmallRng) -> Result<()> + Sync,
) -> Result<(Measured, Measured)> {
    let states: Vec<(A, B)> = (0..threads).map(&mut setup).collect::<Result<_>>()?;
    let (a, b) = paired(
        states,
        &Phase::timed(WARM_UP, seconds),
        SLICE,
        |a, ctx| op_a(a, &mut ctx.rng).map(|()| Step::Done(0)),
        |b, ctx| op_b(b, &mut ctx.rng).map(|()| Step::Done(0)),
    )?;
    Ok((Measured::of(a, chunk), Measured::of(b, chunk)))
}

/// One thread keeping `qd` reads in flight with submit/complete (the storage sense of
/// queue depth, as fio's iodepth); latency is per command, submit to completion. Not a
/// closed loop per thread, so not on the driver; it records in the driver's histogram.
pub(super) fn drive_async(
    client: &Client,
    qd: u32,
    seconds: f64,
    chunk: u64,
    size: u64,
) -> Result<Measured> {
    let mut q = client.queue()?;
    let mut rng = SmallRng::seed_from_u64(7);
    let mut dst = Destination::new(chunk);
    let buf = dst.bytes();
    let mut hist = crate::latency_histogram();
    let mut started = vec![Instant::now(); 1 << 16];
    let submit =
        |q: &mut hscm_ring::Queue, rng: &mut SmallRng, started: &mut Vec<Instant>| -> Result<()> {
            let lease = q
                .client_lease(chunk)
                .context("data buffer too small for the queue depth")?;
            let sector = random_offset(rng, size, chunk) / 512;
            let id = q.submit(
                Op::Read {
                    sector,
                    count: (chunk / 512) as u32,
                },
                Some(lease),
            )?;
            started[(id & 0xffff) as usize] = Instant::now();
            Ok(())
        };
    for _ in 0..qd {
        submit(&mut q, &mut rng, &mut started)?;
    }
    let warm = Instant::now();
    let limit = Duration::from_secs_f64(seconds);
    let mut start = None;
    let mut ops = 0u64;
    loop {
        let c = q.complete()?;
        let now = Instant::now();
        if let Err(st) = c.result {
            anyhow::bail!("read failed: {}", st.describe());
        }
        if let Some(l) = &c.lease {
            l.read(0, buf);
        }
        drop(c.lease);
        match start {
            None if warm.elapsed() >= Duration::from_millis(50) => start = Some(now),
            None => {}
            Some(s) => {
                hist.saturating_record(
                    (now - started[(c.id & 0xffff) as usize]).as_nanos().max(1) as u64
                );
                ops += 1;
                if now - s >= limit {
                    while q.in_flight() > 0 {
                        q.complete()?;
                    }
                    return Ok(Measured {
                        bytes: ops * chunk,
                        ops,
                        elapsed: (now - s).as_secs_f64(),
                        hist,
                    });
                }
            }
        }
        submit(&mut q, &mut rng, &mut started)?;
    }
}

/// A page-aligned buffer of exactly `len` bytes, like the data buffer's leases: every
/// destination in this benchmark starts on a page, so no row gains or loses by where
/// the allocator happened to put its buffer (a string copy's speed depends on the
/// destination's alignment).
pub(super) struct Destination {
    buf: AlignedBuf,
    len: usize,
}

impl Destination {
    pub(super) fn new(len: u64) -> Destination {
        Destination {
            buf: AlignedBuf::zeroed(len as usize),
            len: len as usize,
        }
    }

    pub(super) fn bytes(&mut self) -> &mut [u8] {
        &mut self.buf[..self.len]
    }
}

/// The bare floor under a QD1 protocol: two threads pass one word back and forth, each
/// spinning on a cache line the other writes, for `seconds`; returns the mean round
/// trip in ns.
pub(super) fn core_round_trip_ns(seconds: f64) -> f64 {
    #[repr(align(128))]
    struct Line(AtomicU64);
    let (ping, pong) = (Line(AtomicU64::new(0)), Line(AtomicU64::new(0)));
    const STOP: u64 = u64::MAX;
    std::thread::scope(|s| {
        s.spawn(|| {
            let mut seen = 0;
            while seen != STOP {
                let v = ping.0.load(Ordering::Acquire);
                if v != seen {
                    seen = v;
                    pong.0.store(v, Ordering::Release);
                } else {
                    std::hint::spin_loop();
                }
            }
        });
        let limit = Duration::from_secs_f64(seconds);
        let start = Instant::now();
        let mut trips = 0u64;
        let elapsed = loop {
            // A batch between clock reads keeps the clock out of the figure.
            for _ in 0..1000 {
                trips += 1;
                ping.0.store(trips, Ordering::Release);
                while pong.0.load(Ordering::Acquire) != trips {
                    std::hint::spin_loop();
                }
            }
            let e = start.elapsed();
            if e >= limit {
                break e;
            }
        };
        ping.0.store(STOP, Ordering::Release);
        elapsed.as_nanos() as f64 / trips as f64
    })
}

pub(super) fn random_offset(rng: &mut SmallRng, size: u64, chunk: u64) -> u64 {
    rng.gen_range(0..size / chunk) * chunk
}

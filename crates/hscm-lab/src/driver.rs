//! The closed-loop benchmark driver: worker threads that each issue one request at a
//! time, a warm-up, a start barrier, a measured phase bounded by time or by the work
//! itself, optional pacing, and paired alternating slices against a baseline. One
//! latency-histogram policy for every benchmark: nanoseconds from 1 ns to 100 s, three
//! significant digits, values beyond the range counted at its edge.

use std::sync::Barrier;
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use rand::rngs::SmallRng;
use rand::SeedableRng;

/// The histogram every benchmark records latencies in (nanoseconds).
pub fn latency_histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, 100_000_000_000, 3).expect("static bounds are valid")
}

/// How a measurement runs.
#[derive(Debug, Clone, Copy)]
pub struct Phase {
    /// Requests issued and not counted before the start barrier (zero: none). After a
    /// warm-up, the first request of the measured phase is not counted either: it pays
    /// for the pause at the barrier (a server gone to sleep, lines evicted), not for
    /// itself.
    pub warm_up: Duration,
    /// How long each worker is measured; `Duration::MAX` runs until every worker's
    /// work is [`Step::Finished`].
    pub run: Duration,
    /// A pause after each request (a yielding wait: sleeping overshoots short gaps
    /// several times on a loaded machine), for open-system-like pacing.
    pub gap: Duration,
}

impl Phase {
    /// `seconds` of measurement after `warm_up`, no pacing.
    pub fn timed(warm_up: Duration, seconds: f64) -> Phase {
        Phase {
            warm_up,
            run: Duration::from_secs_f64(seconds),
            gap: Duration::ZERO,
        }
    }

    /// Until the work runs out, pausing `gap` after each request.
    pub fn until_finished(gap: Duration) -> Phase {
        Phase {
            warm_up: Duration::ZERO,
            run: Duration::MAX,
            gap,
        }
    }
}

/// What one call of a worker's request function did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    /// One request of latency class `0..classes` (reads and writes, say) was served.
    Done(usize),
    /// This worker has no more work (nothing was timed).
    Finished,
}

/// A worker's thread number and its own random numbers (seeded by the number, so a
/// run is repeatable).
pub struct Ctx {
    pub thread: usize,
    pub rng: SmallRng,
}

/// The requests of a measured phase: how many, over how long, and their latencies by
/// class.
#[derive(Debug, Clone)]
pub struct Measured {
    pub ops: u64,
    /// The longest worker's measured time: requests of workers run side by side add up
    /// over it.
    pub elapsed_s: f64,
    pub classes: Vec<Histogram<u64>>,
}

impl Measured {
    fn new(classes: usize) -> Measured {
        Measured {
            ops: 0,
            elapsed_s: 0.0,
            classes: (0..classes).map(|_| latency_histogram()).collect(),
        }
    }

    fn merge(&mut self, other: &Measured) {
        self.ops += other.ops;
        self.elapsed_s = self.elapsed_s.max(other.elapsed_s);
        for (a, b) in self.classes.iter_mut().zip(&other.classes) {
            a.add(b).expect("one histogram policy");
        }
    }

    pub fn ops_per_s(&self) -> f64 {
        self.ops as f64 / self.elapsed_s.max(1e-9)
    }

    /// Every class's latencies together.
    pub fn all(&self) -> Histogram<u64> {
        let mut h = latency_histogram();
        for c in &self.classes {
            h.add(c).expect("one histogram policy");
        }
        h
    }

    /// A quantile of every class together, in µs.
    pub fn quantile_us(&self, q: f64) -> f64 {
        self.all().value_at_quantile(q) as f64 / 1e3
    }

    /// A quantile of one class, in µs (0 for a class with no requests).
    pub fn class_quantile_us(&self, class: usize, q: f64) -> f64 {
        let h = &self.classes[class];
        if h.is_empty() {
            0.0
        } else {
            h.value_at_quantile(q) as f64 / 1e3
        }
    }

    /// The mean of one class, in µs (0 for a class with no requests).
    pub fn class_mean_us(&self, class: usize) -> f64 {
        let h = &self.classes[class];
        if h.is_empty() {
            0.0
        } else {
            h.mean() / 1e3
        }
    }

    pub fn class_ops(&self, class: usize) -> u64 {
        self.classes[class].len()
    }
}

/// Runs `op` for `limit` (or until the work is finished), recording each request's
/// latency in `into`; with `skip_first`, the first request is issued but not counted.
fn timed<S, E>(
    st: &mut S,
    ctx: &mut Ctx,
    limit: Duration,
    gap: Duration,
    skip_first: bool,
    into: &mut Measured,
    op: &impl Fn(&mut S, &mut Ctx) -> Result<Step, E>,
) -> Result<bool, E> {
    if skip_first && op(st, ctx)? == Step::Finished {
        return Ok(true);
    }
    let start = Instant::now();
    let mut finished = false;
    loop {
        let t0 = Instant::now();
        let step = op(st, ctx)?;
        let t1 = Instant::now();
        match step {
            Step::Done(class) => {
                into.classes[class].saturating_record((t1 - t0).as_nanos().max(1) as u64);
                into.ops += 1;
            }
            Step::Finished => finished = true,
        }
        if !gap.is_zero() && !finished {
            let until = Instant::now() + gap;
            while Instant::now() < until {
                std::thread::yield_now();
            }
        }
        if finished || t1 - start >= limit {
            into.elapsed_s += (Instant::now() - start).as_secs_f64();
            return Ok(finished);
        }
    }
}

/// Runs one worker thread per state: `op` issues one request and says its latency
/// class. Workers warm up for `phase.warm_up`, meet at a barrier, and are measured
/// together for `phase.run`. Returns the merged measurement and the states (which may
/// carry counts of their own). A worker that fails still meets the barrier; the first
/// error is returned.
pub fn closed_loop<S: Send, E: Send>(
    states: Vec<S>,
    classes: usize,
    phase: &Phase,
    op: impl Fn(&mut S, &mut Ctx) -> Result<Step, E> + Sync,
) -> Result<(Measured, Vec<S>), E> {
    let barrier = Barrier::new(states.len().max(1));
    let results = on_threads(states, |thread, mut st| {
        let mut ctx = Ctx {
            thread,
            rng: SmallRng::seed_from_u64(thread as u64 + 1),
        };
        let mut warm = Measured::new(classes);
        let warmed = if phase.warm_up.is_zero() {
            Ok(false)
        } else {
            timed(
                &mut st,
                &mut ctx,
                phase.warm_up,
                phase.gap,
                false,
                &mut warm,
                &op,
            )
        };
        barrier.wait();
        let mut m = Measured::new(classes);
        match warmed {
            Ok(true) => Ok((m, st)),
            Ok(false) => {
                let skip = !phase.warm_up.is_zero();
                timed(&mut st, &mut ctx, phase.run, phase.gap, skip, &mut m, &op)?;
                Ok((m, st))
            }
            Err(e) => Err(e),
        }
    });
    let mut all = Measured::new(classes);
    let mut states = Vec::new();
    for r in results {
        let (m, st) = r?;
        all.merge(&m);
        states.push(st);
    }
    Ok((all, states))
}

/// Two workloads on the same workers, measured in alternating slices of `slice` (or
/// `phase.run`, if shorter), every worker switching together, until each has run
/// `phase.run`: both see the same machine, whatever it does meanwhile (on a shared VM
/// memory bandwidth alone moves by 10% and more from one second to the next).
pub fn paired<A: Send, B: Send, E: Send>(
    states: Vec<(A, B)>,
    phase: &Phase,
    slice: Duration,
    op_a: impl Fn(&mut A, &mut Ctx) -> Result<Step, E> + Sync,
    op_b: impl Fn(&mut B, &mut Ctx) -> Result<Step, E> + Sync,
) -> Result<(Measured, Measured), E> {
    let slice = slice.min(phase.run);
    let slices = ((phase.run.as_secs_f64() / slice.as_secs_f64()).round() as u32).max(1);
    let barrier = Barrier::new(states.len().max(1));
    let results = on_threads(states, |thread, (mut a, mut b)| {
        let mut ctx = Ctx {
            thread,
            rng: SmallRng::seed_from_u64(thread as u64 + 1),
        };
        let (mut ma, mut mb) = (Measured::new(1), Measured::new(1));
        let mut warm = Measured::new(1);
        let half = phase.warm_up / 2;
        // A failed worker goes on meeting the barriers, or the others would wait for
        // ever; it reports its error at the end.
        let mut outcome = timed(&mut a, &mut ctx, half, phase.gap, false, &mut warm, &op_a)
            .and_then(|_| timed(&mut b, &mut ctx, half, phase.gap, false, &mut warm, &op_b))
            .map(|_| ());
        for _ in 0..slices {
            barrier.wait();
            if outcome.is_ok() {
                outcome =
                    timed(&mut a, &mut ctx, slice, phase.gap, true, &mut ma, &op_a).map(|_| ());
            }
            barrier.wait();
            if outcome.is_ok() {
                outcome =
                    timed(&mut b, &mut ctx, slice, phase.gap, true, &mut mb, &op_b).map(|_| ());
            }
        }
        outcome.map(|()| (ma, mb))
    });
    let (mut all_a, mut all_b) = (Measured::new(1), Measured::new(1));
    for r in results {
        let (a, b) = r?;
        all_a.merge(&a);
        all_b.merge(&b);
    }
    Ok((all_a, all_b))
}

/// Runs `work(index, state)` on one scoped thread per state, in order.
fn on_threads<S: Send, R: Send>(states: Vec<S>, work: impl Fn(usize, S) -> R + Sync) -> Vec<R> {
    std::thread::scope(|s| {
        let handles: Vec<_> = states
            .into_iter()
            .enumerate()
            .map(|(t, st)| {
                let work = &work;
                s.spawn(move || work(t, st))
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("a benchmark thread panicked"))
            .collect()
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicU64, Ordering};

    #[test]
    fn work_bounded_runs_do_every_request_once_and_count_classes() {
        let issued = AtomicU64::new(0);
        let states: Vec<u32> = vec![30, 50];
        let (m, left) = closed_loop(
            states,
            2,
            &Phase::until_finished(Duration::ZERO),
            |n, ctx| {
                if *n == 0 {
                    return Ok::<_, ()>(Step::Finished);
                }
                *n -= 1;
                issued.fetch_add(1, Ordering::Relaxed);
                Ok(Step::Done(ctx.thread))
            },
        )
        .unwrap();
        assert_eq!(m.ops, 80);
        assert_eq!(issued.load(Ordering::Relaxed), 80);
        assert_eq!((m.class_ops(0), m.class_ops(1)), (30, 50));
        assert_eq!(left, vec![0, 0]);
    }

    #[test]
    fn a_warm_up_is_not_counted_and_time_bounds_hold() {
        let (m, states) = closed_loop(
            vec![0u64; 2],
            1,
            &Phase::timed(Duration::from_millis(20), 0.05),
            |n, _| {
                *n += 1;
                std::thread::sleep(Duration::from_millis(1));
                Ok::<_, ()>(Step::Done(0))
            },
        )
        .unwrap();
        let issued: u64 = states.iter().sum();
        assert!(
            m.ops < issued,
            "warm-up requests are not counted ({} of {issued})",
            m.ops
        );
        assert!(m.elapsed_s >= 0.05, "{}", m.elapsed_s);
        assert!(
            m.quantile_us(0.5) >= 1000.0,
            "a 1 ms request takes at least 1 ms"
        );
    }

    #[test]
    fn an_error_in_one_worker_is_returned_and_nobody_hangs() {
        let r = closed_loop(
            vec![0, 1],
            1,
            &Phase::timed(Duration::from_millis(5), 0.02),
            |t: &mut i32, _| {
                if *t == 1 {
                    Err("worker 1 failed")
                } else {
                    Ok(Step::Done(0))
                }
            },
        );
        assert_eq!(r.err(), Some("worker 1 failed"));
        let r = paired(
            vec![((), ()); 2],
            &Phase::timed(Duration::ZERO, 0.02),
            Duration::from_millis(5),
            |_, ctx| {
                if ctx.thread == 0 {
                    Err("a failed")
                } else {
                    Ok(Step::Done(0))
                }
            },
            |_, _| Ok(Step::Done(0)),
        );
        assert_eq!(r.err(), Some("a failed"));
    }

    #[test]
    fn paired_slices_measure_both_sides_for_the_whole_run() {
        let (a, b) = paired(
            vec![((), ()); 2],
            &Phase::timed(Duration::from_millis(4), 0.04),
            Duration::from_millis(10),
            |_, _| {
                std::thread::sleep(Duration::from_micros(200));
                Ok::<_, ()>(Step::Done(0))
            },
            |_, _| {
                std::thread::sleep(Duration::from_micros(400));
                Ok(Step::Done(0))
            },
        )
        .unwrap();
        assert!(
            a.ops > b.ops,
            "the faster side does more requests in the same slices"
        );
        assert!(
            (a.elapsed_s - b.elapsed_s).abs() < 0.03,
            "{} vs {}",
            a.elapsed_s,
            b.elapsed_s
        );
    }
}

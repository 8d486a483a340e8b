//! A latency histogram cheap enough for every request of a served target: fixed
//! bucket bounds, one relaxed add per bucket and one for the sum. Front-ends export it
//! (Prometheus wants cumulative buckets over fixed bounds, which this keeps apart so
//! that the hot path adds to one bucket only).

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// Upper bounds of the buckets, in seconds: 10 µs (a RAM hit through a front-end) to
/// 2.5 s (a sync stuck behind a slow device). A last bucket takes everything above.
pub const LATENCY_BOUNDS_S: [f64; 17] = [
    10e-6, 25e-6, 50e-6, 100e-6, 250e-6, 500e-6, 1e-3, 2.5e-3, 5e-3, 10e-3, 25e-3, 50e-3, 100e-3,
    250e-3, 500e-3, 1.0, 2.5,
];

const BOUNDS_NS: [u64; 17] = [
    10_000,
    25_000,
    50_000,
    100_000,
    250_000,
    500_000,
    1_000_000,
    2_500_000,
    5_000_000,
    10_000_000,
    25_000_000,
    50_000_000,
    100_000_000,
    250_000_000,
    500_000_000,
    1_000_000_000,
    2_500_000_000,
];

/// Durations recorded into [`LATENCY_BOUNDS_S`]'s buckets.
#[derive(Debug, Default)]
pub struct Latency {
    /// Per bucket, not cumulative; the last one is above every bound.
    buckets: [AtomicU64; 18],
    sum_ns: AtomicU64,
}

/// What a [`Latency`] holds at one moment.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LatencySnapshot {
    /// Per bucket of [`LATENCY_BOUNDS_S`], not cumulative, plus one above them all.
    pub buckets: Vec<u64>,
    pub sum_ns: u64,
}

impl LatencySnapshot {
    pub fn count(&self) -> u64 {
        self.buckets.iter().sum()
    }

    /// Adds `other`'s durations to these.
    pub fn add(&mut self, other: &LatencySnapshot) {
        if self.buckets.len() < other.buckets.len() {
            self.buckets.resize(other.buckets.len(), 0);
        }
        for (mine, theirs) in self.buckets.iter_mut().zip(&other.buckets) {
            *mine += theirs;
        }
        self.sum_ns += other.sum_ns;
    }
}

impl Latency {
    pub fn record(&self, took: Duration) {
        let ns = u64::try_from(took.as_nanos()).unwrap_or(u64::MAX);
        let bucket = BOUNDS_NS
            .iter()
            .position(|&b| ns <= b)
            .unwrap_or(BOUNDS_NS.len());
        self.buckets[bucket].fetch_add(1, Ordering::Relaxed);
        self.sum_ns.fetch_add(ns, Ordering::Relaxed);
    }

    pub fn snapshot(&self) -> LatencySnapshot {
        LatencySnapshot {
            buckets: self
                .buckets
                .iter()
                .map(|b| b.load(Ordering::Relaxed))
                .collect(),
            sum_ns: self.sum_ns.load(Ordering::Relaxed),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_land_in_the_first_bucket_that_holds_them() {
        let l = Latency::default();
        l.record(Duration::from_micros(3));
        l.record(Duration::from_micros(10));
        l.record(Duration::from_micros(11));
        l.record(Duration::from_secs(9));
        let s = l.snapshot();
        assert_eq!(s.buckets[0], 2);
        assert_eq!(s.buckets[1], 1);
        assert_eq!(s.buckets[17], 1);
        assert_eq!(s.count(), 4);
        assert_eq!(s.sum_ns, 3_000 + 10_000 + 11_000 + 9_000_000_000);
        for (ns, s) in BOUNDS_NS.iter().zip(LATENCY_BOUNDS_S) {
            assert_eq!(*ns, (s * 1e9).round() as u64);
        }
    }
}

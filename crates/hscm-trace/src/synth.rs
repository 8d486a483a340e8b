//! Synthetic post-cache traces: one 64 B line per reference.

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

use crate::{Access, MemRef};

const LINE: u64 = 64;
const ROW: u64 = 4096;

/// Address patterns.
#[derive(Debug, Clone, PartialEq)]
pub enum SynthKind {
    /// `streams` interleaved sequential streams, each over its own slice.
    Stream { streams: u32 },
    /// A single stream with a fixed stride in bytes.
    Stride { stride: u64 },
    /// Rows drawn from a Zipf(s) distribution, a random line within the row.
    Zipf { s: f64 },
    /// Reads scan the footprint; writes concentrate on `hot_rows` rows (a share
    /// `hot_share` of them), the pattern of the seed paper's Figure 4c-d.
    HotWrites { hot_rows: u64, hot_share: f64 },
    /// A share `stream_share` of references from 4 streams, the rest uniform random.
    Mix { stream_share: f64 },
}

#[derive(Debug, Clone, PartialEq)]
pub struct SynthSpec {
    pub kind: SynthKind,
    pub requests: u64,
    /// Bytes the references spread over (rounded down to whole rows, at least one).
    pub footprint: u64,
    pub write_share: f64,
    /// Instructions between references.
    pub gap: u64,
    pub seed: u64,
}

impl SynthSpec {
    /// The speed benchmark mix: 60% streams, 40% random, 28% writes.
    pub fn benchmark_mix(requests: u64) -> Self {
        Self {
            kind: SynthKind::Mix { stream_share: 0.6 },
            requests,
            footprint: 256 << 20,
            write_share: 0.28,
            gap: 20,
            seed: 1,
        }
    }
}

pub struct Synthesizer {
    spec: SynthSpec,
    rng: SmallRng,
    emitted: u64,
    rows: u64,
    cursors: Vec<u64>,
    zipf_cdf: Vec<f64>,
    hot: Vec<u64>,
}

impl Synthesizer {
    pub fn new(spec: SynthSpec) -> Self {
        let rows = (spec.footprint / ROW).max(1);
        let mut rng = SmallRng::seed_from_u64(spec.seed);
        let lines = rows * (ROW / LINE);
        let cursors = match spec.kind {
            SynthKind::Stream { streams } => {
                let n = u64::from(streams.max(1));
                (0..n).map(|i| i * (lines / n)).collect()
            }
            SynthKind::Mix { .. } => (0..4).map(|i| i * (lines / 4)).collect(),
            _ => vec![0],
        };
        let zipf_cdf = match spec.kind {
            SynthKind::Zipf { s } => {
                let mut acc = 0.0;
                let mut cdf: Vec<f64> = (1..=rows)
                    .map(|k| {
                        acc += 1.0 / (k as f64).powf(s);
                        acc
                    })
                    .collect();
                for c in &mut cdf {
                    *c /= acc;
                }
                cdf
            }
            _ => Vec::new(),
        };
        let hot = match spec.kind {
            SynthKind::HotWrites { hot_rows, .. } => (0..hot_rows.max(1))
                .map(|_| rng.gen_range(0..rows))
                .collect(),
            _ => Vec::new(),
        };
        Self {
            spec,
            rng,
            emitted: 0,
            rows,
            cursors,
            zipf_cdf,
            hot,
        }
    }

    fn lines(&self) -> u64 {
        self.rows * (ROW / LINE)
    }

    fn next_stream_line(&mut self, stride_lines: u64) -> u64 {
        let i = (self.emitted % self.cursors.len() as u64) as usize;
        let line = self.cursors[i];
        self.cursors[i] = (line + stride_lines) % self.lines();
        line
    }
}

impl Iterator for Synthesizer {
    type Item = MemRef;

    fn next(&mut self) -> Option<MemRef> {
        if self.emitted >= self.spec.requests {
            return None;
        }
        let is_write = self.rng.gen_bool(self.spec.write_share.clamp(0.0, 1.0));
        let lines_per_row = ROW / LINE;
        let line = match self.spec.kind.clone() {
            SynthKind::Stream { .. } => self.next_stream_line(1),
            SynthKind::Stride { stride } => self.next_stream_line((stride / LINE).max(1)),
            SynthKind::Zipf { .. } => {
                let u: f64 = self.rng.gen();
                let row = self.zipf_cdf.partition_point(|&c| c < u) as u64;
                row.min(self.rows - 1) * lines_per_row + self.rng.gen_range(0..lines_per_row)
            }
            SynthKind::HotWrites { hot_share, .. } => {
                if is_write && self.rng.gen_bool(hot_share.clamp(0.0, 1.0)) {
                    let row = self.hot[self.rng.gen_range(0..self.hot.len())];
                    row * lines_per_row + self.rng.gen_range(0..lines_per_row)
                } else if is_write {
                    self.rng.gen_range(0..self.lines())
                } else {
                    self.next_stream_line(1)
                }
            }
            SynthKind::Mix { stream_share } => {
                if self.rng.gen_bool(stream_share.clamp(0.0, 1.0)) {
                    self.next_stream_line(1)
                } else {
                    self.rng.gen_range(0..self.lines())
                }
            }
        };
        self.emitted += 1;
        Some(MemRef {
            addr: line * LINE,
            kind: if is_write {
                Access::Write
            } else {
                Access::Read
            },
            size: 64,
            delta: self.spec.gap,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(kind: SynthKind) -> SynthSpec {
        SynthSpec {
            kind,
            requests: 20_000,
            footprint: 16 << 20,
            write_share: 0.28,
            gap: 5,
            seed: 7,
        }
    }

    #[test]
    fn every_kind_stays_in_its_footprint_and_hits_its_write_share() {
        for kind in [
            SynthKind::Stream { streams: 3 },
            SynthKind::Stride { stride: 4096 },
            SynthKind::Zipf { s: 1.0 },
            SynthKind::HotWrites {
                hot_rows: 8,
                hot_share: 0.9,
            },
            SynthKind::Mix { stream_share: 0.6 },
        ] {
            let refs: Vec<_> = Synthesizer::new(spec(kind.clone())).collect();
            assert_eq!(refs.len(), 20_000);
            assert!(refs
                .iter()
                .all(|r| r.addr < 16 << 20 && r.addr % 64 == 0 && r.delta == 5));
            let writes = refs.iter().filter(|r| r.kind == Access::Write).count() as f64 / 20_000.0;
            assert!((writes - 0.28).abs() < 0.02, "{kind:?}: {writes}");
        }
    }

    #[test]
    fn hot_writes_concentrate_and_zipf_skews() {
        let refs: Vec<_> = Synthesizer::new(spec(SynthKind::HotWrites {
            hot_rows: 4,
            hot_share: 0.9,
        }))
        .collect();
        let mut rows: Vec<u64> = refs
            .iter()
            .filter(|r| r.kind == Access::Write)
            .map(|r| r.addr / ROW)
            .collect();
        rows.sort();
        rows.dedup();
        // ~10% of ~5600 writes scatter; the rest land on 4 rows.
        assert!(rows.len() < 1000, "{}", rows.len());
        let z: Vec<_> = Synthesizer::new(spec(SynthKind::Zipf { s: 1.2 })).collect();
        let row0 = z.iter().filter(|r| r.addr / ROW == 0).count();
        assert!(row0 > 2000, "{row0}");
    }

    #[test]
    fn same_seed_same_trace() {
        let a: Vec<_> = Synthesizer::new(spec(SynthKind::Mix { stream_share: 0.6 })).collect();
        let b: Vec<_> = Synthesizer::new(spec(SynthKind::Mix { stream_share: 0.6 })).collect();
        assert_eq!(a, b);
    }
}

/// Synthetic object-request traces for cache simulation.
#[derive(Debug, Clone, PartialEq)]
pub struct RequestSynthSpec {
    pub requests: u64,
    pub objects: u64,
    /// Zipf exponent over the objects (0 = uniform).
    pub alpha: f64,
    /// Share of requests for objects that are never requested again.
    pub one_time_share: f64,
    /// Share of requests from a sequential scan over the objects.
    pub scan_share: f64,
    /// Share of requests from a loop over the first `loop_len` objects.
    pub loop_share: f64,
    pub loop_len: u64,
    pub size: u32,
    pub seed: u64,
}

impl RequestSynthSpec {
    pub fn zipf(requests: u64, objects: u64, alpha: f64) -> Self {
        Self {
            requests,
            objects,
            alpha,
            one_time_share: 0.0,
            scan_share: 0.0,
            loop_share: 0.0,
            loop_len: 0,
            size: 4096,
            seed: 1,
        }
    }
}

/// Yields [`crate::Request`]s for a [`RequestSynthSpec`].
pub struct RequestSynth {
    spec: RequestSynthSpec,
    rng: SmallRng,
    cdf: Vec<f64>,
    emitted: u64,
    scan_at: u64,
    loop_at: u64,
    one_time_next: u64,
}

impl RequestSynth {
    pub fn new(spec: RequestSynthSpec) -> Self {
        let n = spec.objects.max(1);
        let mut acc = 0.0;
        let mut cdf: Vec<f64> = (1..=n)
            .map(|k| {
                acc += 1.0 / (k as f64).powf(spec.alpha);
                acc
            })
            .collect();
        for c in &mut cdf {
            *c /= acc;
        }
        Self {
            rng: SmallRng::seed_from_u64(spec.seed),
            cdf,
            emitted: 0,
            scan_at: 0,
            loop_at: 0,
            one_time_next: 1 << 40,
            spec,
        }
    }
}

impl Iterator for RequestSynth {
    type Item = crate::Request;

    fn next(&mut self) -> Option<crate::Request> {
        if self.emitted >= self.spec.requests {
            return None;
        }
        let s = &self.spec;
        let u: f64 = self.rng.gen();
        let key = if u < s.one_time_share {
            self.one_time_next += 1;
            self.one_time_next
        } else if u < s.one_time_share + s.scan_share {
            self.scan_at = (self.scan_at + 1) % s.objects.max(1);
            self.scan_at
        } else if u < s.one_time_share + s.scan_share + s.loop_share {
            self.loop_at = (self.loop_at + 1) % s.loop_len.max(1);
            self.loop_at
        } else {
            let v: f64 = self.rng.gen();
            self.cdf.partition_point(|&c| c < v).min(self.cdf.len() - 1) as u64
        };
        self.emitted += 1;
        Some(crate::Request {
            key,
            size: s.size,
            write: false,
            time: self.emitted,
            next: None,
        })
    }
}

#[cfg(test)]
mod request_tests {
    use super::*;

    #[test]
    fn one_time_keys_never_repeat_and_zipf_is_skewed() {
        let spec = RequestSynthSpec {
            one_time_share: 0.3,
            ..RequestSynthSpec::zipf(50_000, 1000, 1.0)
        };
        let reqs: Vec<_> = RequestSynth::new(spec).collect();
        let one_time: Vec<u64> = reqs
            .iter()
            .map(|r| r.key)
            .filter(|&k| k > 1 << 40)
            .collect();
        let mut dedup = one_time.clone();
        dedup.sort_unstable();
        dedup.dedup();
        assert_eq!(dedup.len(), one_time.len());
        assert!((one_time.len() as f64 / 50_000.0 - 0.3).abs() < 0.02);
        let top = reqs.iter().filter(|r| r.key == 0).count() as f64 / 35_000.0;
        assert!(top > 0.1, "{top}");
    }
}

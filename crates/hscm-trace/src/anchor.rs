//! The shared anchor traces that memory simulators are validated on: the same
//! requests as the reference generator `gen_trace.py` (shipped beside the published
//! Ramulator 2.0 and DRAMsim3 figures) writes, drawn from the same pseudo-random
//! sequence. Python's `random` module is Mersenne Twister MT19937 (Matsumoto and
//! Nishimura, 1998) seeded through `init_by_array`; [`PyRandom`] reproduces the calls
//! the generator makes, bit for bit.

use crate::{Access, MemRef};

/// MT19937 with Python's seeding and derivations (`random`, `getrandbits`,
/// `randrange`, `sample`).
pub struct PyRandom {
    state: [u32; 624],
    index: usize,
}

impl PyRandom {
    /// `random.Random(seed)` for a non-negative integer seed below 2^64.
    pub fn new(seed: u64) -> Self {
        let mut key: Vec<u32> = vec![seed as u32];
        if seed >> 32 != 0 {
            key.push((seed >> 32) as u32);
        }
        let mut r = Self {
            state: [0; 624],
            index: 624,
        };
        r.init_genrand(19_650_218);
        let s = &mut r.state;
        let (mut i, mut j) = (1usize, 0usize);
        for _ in 0..624.max(key.len()) {
            s[i] = (s[i] ^ (s[i - 1] ^ (s[i - 1] >> 30)).wrapping_mul(1_664_525))
                .wrapping_add(key[j])
                .wrapping_add(j as u32);
            i += 1;
            j += 1;
            if i >= 624 {
                s[0] = s[623];
                i = 1;
            }
            if j >= key.len() {
                j = 0;
            }
        }
        for _ in 0..623 {
            s[i] = (s[i] ^ (s[i - 1] ^ (s[i - 1] >> 30)).wrapping_mul(1_566_083_941))
                .wrapping_sub(i as u32);
            i += 1;
            if i >= 624 {
                s[0] = s[623];
                i = 1;
            }
        }
        s[0] = 0x8000_0000;
        r
    }

    fn init_genrand(&mut self, seed: u32) {
        self.state[0] = seed;
        for i in 1..624 {
            let prev = self.state[i - 1];
            self.state[i] = 1_812_433_253u32
                .wrapping_mul(prev ^ (prev >> 30))
                .wrapping_add(i as u32);
        }
        self.index = 624;
    }

    fn next_u32(&mut self) -> u32 {
        if self.index >= 624 {
            let s = &mut self.state;
            for k in 0..624 {
                let y = (s[k] & 0x8000_0000) | (s[(k + 1) % 624] & 0x7fff_ffff);
                let mut v = s[(k + 397) % 624] ^ (y >> 1);
                if y & 1 != 0 {
                    v ^= 0x9908_b0df;
                }
                s[k] = v;
            }
            self.index = 0;
        }
        let mut y = self.state[self.index];
        self.index += 1;
        y ^= y >> 11;
        y ^= (y << 7) & 0x9d2c_5680;
        y ^= (y << 15) & 0xefc6_0000;
        y ^ (y >> 18)
    }

    /// `random()`: 53 random bits in [0, 1).
    pub fn random(&mut self) -> f64 {
        let a = self.next_u32() >> 5;
        let b = self.next_u32() >> 6;
        (f64::from(a) * 67_108_864.0 + f64::from(b)) * (1.0 / 9_007_199_254_740_992.0)
    }

    /// `getrandbits(k)` for 1 <= k <= 32.
    fn bits(&mut self, k: u32) -> u32 {
        self.next_u32() >> (32 - k)
    }

    /// `randrange(n)` (Python's `_randbelow`: rejection on `n.bit_length()` bits) for
    /// 1 <= n <= 2^32.
    pub fn below(&mut self, n: u64) -> u64 {
        let k = 64 - n.leading_zeros();
        loop {
            let r = if k <= 32 {
                u64::from(self.bits(k))
            } else {
                // Python fills wider requests 32 bits at a time, low word first.
                let lo = u64::from(self.next_u32());
                let hi = u64::from(self.bits(k - 32));
                lo | (hi << 32)
            };
            if r < n {
                return r;
            }
        }
    }

    /// `sample(range(n), k)` for k <= 5 and n > 21, where Python draws distinct
    /// indices by rejection (its other branch shuffles a pool).
    pub fn sample_indices(&mut self, n: u64, k: usize) -> Vec<u64> {
        assert!(
            k <= 5 && n > 21 && k as u64 <= n,
            "only the set-based branch"
        );
        let mut out: Vec<u64> = Vec::with_capacity(k);
        while out.len() < k {
            let j = self.below(n);
            if !out.contains(&j) {
                out.push(j);
            }
        }
        out
    }
}

/// The request patterns of the anchor traces.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AnchorPattern {
    /// Per request: with probability `stream_frac` the next line of one of three
    /// sequential streams taken in turn (two read, the third written, like a STREAM add
    /// kernel, each from a random 1 MiB-aligned base), else a uniformly random line,
    /// written with probability `rand_wr`.
    Mix,
    /// One sequential stream from address 0, each line written with probability
    /// `rand_wr`.
    Stream,
    /// Uniformly random lines, written with probability `rand_wr`.
    Random,
}

/// One anchor trace: `gen_trace.py`'s arguments, with its defaults.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct AnchorSpec {
    pub pattern: AnchorPattern,
    pub requests: u64,
    /// Addresses stay below this many bytes.
    pub span: u64,
    pub stream_frac: f64,
    pub rand_wr: f64,
    /// Memory cycles between consecutive requests (1: as fast as accepted).
    pub gap: u64,
    pub seed: u64,
}

impl Default for AnchorSpec {
    fn default() -> Self {
        Self {
            pattern: AnchorPattern::Mix,
            requests: 5_000_000,
            span: 1 << 30,
            stream_frac: 0.6,
            rand_wr: 0.2,
            gap: 1,
            seed: 42,
        }
    }
}

const LINE: u64 = 64;

/// The requests of an anchor trace, timed in memory cycles (`Timing::Cycles`).
pub struct AnchorTrace {
    spec: AnchorSpec,
    rng: PyRandom,
    span_lines: u64,
    bases: [u64; 3],
    offsets: [u64; 3],
    next_stream: usize,
    made: u64,
}

impl AnchorTrace {
    pub fn new(spec: AnchorSpec) -> Self {
        let mut rng = PyRandom::new(spec.seed);
        let span_lines = (spec.span / LINE).max(1);
        let step = (1 << 20) / LINE;
        // `sample(range(0, span_lines, step), 3)`: distinct 1 MiB-aligned bases.
        let slots = span_lines.div_ceil(step);
        let mut bases = [0; 3];
        if slots > 21 {
            for (b, i) in bases.iter_mut().zip(rng.sample_indices(slots, 3)) {
                *b = i * step;
            }
        }
        Self {
            spec,
            rng,
            span_lines,
            bases,
            offsets: [0; 3],
            next_stream: 0,
            made: 0,
        }
    }
}

impl Iterator for AnchorTrace {
    type Item = MemRef;

    fn next(&mut self) -> Option<MemRef> {
        if self.made >= self.spec.requests {
            return None;
        }
        let s = self.spec;
        let random = match s.pattern {
            AnchorPattern::Random => true,
            AnchorPattern::Mix => self.rng.random() >= s.stream_frac,
            AnchorPattern::Stream => false,
        };
        let (line, write) = if random {
            let line = self.rng.below(self.span_lines);
            (line, self.rng.random() < s.rand_wr)
        } else if s.pattern == AnchorPattern::Stream {
            let line = self.offsets[0] % self.span_lines;
            self.offsets[0] += 1;
            (line, self.rng.random() < s.rand_wr)
        } else {
            let k = self.next_stream;
            self.next_stream = (k + 1) % 3;
            let line = (self.bases[k] + self.offsets[k]) % self.span_lines;
            self.offsets[k] += 1;
            (line, k == 2)
        };
        let delta = if self.made == 0 { 0 } else { s.gap };
        self.made += 1;
        Some(MemRef {
            addr: line * LINE,
            kind: if write { Access::Write } else { Access::Read },
            size: LINE as u32,
            delta,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn canon(spec: AnchorSpec) -> Vec<String> {
        let mut ts = 0;
        AnchorTrace::new(spec)
            .map(|r| {
                ts += r.delta;
                let k = if r.kind == Access::Write { "W" } else { "R" };
                format!("{k} {:x} {ts}", r.addr)
            })
            .collect()
    }

    /// The first requests `gen_trace.py -n 12` writes to `m.canon` (default mix,
    /// seed 42), and `--pattern stream --rand-wr 0.3 --seed 7 -n 8`.
    #[test]
    fn the_anchor_traces_match_the_reference_generator() {
        let mix = canon(AnchorSpec {
            requests: 12,
            ..AnchorSpec::default()
        });
        let want = "R e400000 0|R 3300000 1|W 23300000 2|R b20cfc0 3|R e400040 4|R 3300040 5|\
            W 23300040 6|R 19738300 7|R 35b2d340 8|R e400080 9|R d4f380 10|R 3300080 11";
        assert_eq!(mix.join("|"), want);
        let stream = canon(AnchorSpec {
            pattern: AnchorPattern::Stream,
            requests: 8,
            rand_wr: 0.3,
            seed: 7,
            ..AnchorSpec::default()
        });
        assert_eq!(
            stream.join("|"),
            "R 0 0|W 40 1|R 80 2|R c0 3|W 100 4|R 140 5|W 180 6|R 1c0 7"
        );
    }

    #[test]
    fn python_mt19937_matches_known_values() {
        // `random.Random(42).random()` and `random.Random(0).getrandbits(32)`.
        assert_eq!(PyRandom::new(42).random(), 0.639_426_798_457_883_8);
        assert_eq!(PyRandom::new(0).next_u32(), 3_626_764_237);
    }
}

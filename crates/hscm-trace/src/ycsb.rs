//! YCSB-compatible key-value workloads, and replay of recorded operation traces.
//!
//! The generator follows YCSB's core workload: keys `user<N>` with `N` hashed from the
//! insertion index (its `insertorder=hashed`), request keys drawn from a scrambled
//! Zipfian (constant 0.99, Gray et al.'s method as YCSB uses it), fixed-length values.

use std::io::BufRead;
use std::path::Path;

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

use crate::TraceError;

/// One key-value operation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KvOp {
    Read(String),
    Update(String, usize),
    Insert(String, usize),
    Delete(String),
}

/// A workload's operation mix.
#[derive(Debug, Clone, PartialEq)]
pub struct YcsbSpec {
    pub name: String,
    pub read: f64,
    pub update: f64,
    pub records: u64,
    pub operations: u64,
    pub value_len: usize,
    /// Pause after each request, in microseconds (the paper's "-T" workloads: 50).
    pub gap_us: u64,
    pub zipf_theta: f64,
    pub seed: u64,
}

/// Workload names [`YcsbSpec::named`] accepts.
pub const YCSB_WORKLOADS: &[&str] = &["a", "b", "3", "a-t", "b-t", "3-t"];

impl YcsbSpec {
    /// The Sprint-AEP paper's workloads (its Table IV): A 50/50, B 95/5 read/update, "3"
    /// 33/67; a "-t" suffix adds a 50 us gap between requests.
    pub fn named(name: &str, records: u64, operations: u64) -> Option<YcsbSpec> {
        let (base, gap_us) = match name.strip_suffix("-t") {
            Some(b) => (b, 50),
            None => (name, 0),
        };
        let read = match base {
            "a" => 0.5,
            "b" => 0.95,
            "3" => 0.33,
            _ => return None,
        };
        Some(YcsbSpec {
            name: name.to_string(),
            read,
            update: 1.0 - read,
            records,
            operations,
            value_len: 1000,
            gap_us,
            zipf_theta: 0.99,
            seed: 1,
        })
    }
}

/// The key of the `index`-th inserted record.
pub fn ycsb_key(index: u64) -> String {
    // YCSB's CoreWorkload names a record "user" + Math.abs(fnvhash64(n)) of a signed
    // long (site.ycsb.Utils): the same names, so replays of real YCSB traces find the
    // records --records loaded. wrapping_abs keeps i64::MIN negative, as Java does.
    format!("user{}", (fnv1a(index) as i64).wrapping_abs())
}

fn fnv1a(v: u64) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in v.to_le_bytes() {
        h ^= b as u64;
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

/// Zipfian ranks over `0..n` (rank 0 most popular), Gray et al. 1994.
pub struct Zipfian {
    n: u64,
    theta: f64,
    alpha: f64,
    zeta_n: f64,
    eta: f64,
}

impl Zipfian {
    pub fn new(n: u64, theta: f64) -> Zipfian {
        let n = n.max(1);
        let zeta = |m: u64| (1..=m).map(|i| 1.0 / (i as f64).powf(theta)).sum::<f64>();
        let zeta_n = zeta(n);
        let zeta_2 = zeta(2.min(n));
        let eta = if n > 1 {
            (1.0 - (2.0 / n as f64).powf(1.0 - theta)) / (1.0 - zeta_2 / zeta_n)
        } else {
            1.0
        };
        Zipfian {
            n,
            theta,
            alpha: 1.0 / (1.0 - theta),
            zeta_n,
            eta,
        }
    }

    pub fn sample(&self, rng: &mut impl Rng) -> u64 {
        let u: f64 = rng.gen();
        let uz = u * self.zeta_n;
        if uz < 1.0 {
            return 0;
        }
        if uz < 1.0 + 0.5f64.powf(self.theta) {
            return 1.min(self.n - 1);
        }
        let r = (self.n as f64 * (self.eta * u - self.eta + 1.0).powf(self.alpha)) as u64;
        r.min(self.n - 1)
    }
}

/// Run-phase operations of a [`YcsbSpec`]; each generator thread takes its own seed.
pub struct YcsbGen {
    spec: YcsbSpec,
    zipf: Zipfian,
    rng: SmallRng,
    left: u64,
}

impl YcsbGen {
    pub fn new(spec: YcsbSpec, stream: u64) -> YcsbGen {
        YcsbGen {
            zipf: Zipfian::new(spec.records, spec.zipf_theta),
            rng: SmallRng::seed_from_u64(spec.seed ^ stream.wrapping_mul(0x9e37_79b9_7f4a_7c15)),
            left: spec.operations,
            spec,
        }
    }
}

impl Iterator for YcsbGen {
    type Item = KvOp;
    fn next(&mut self) -> Option<KvOp> {
        if self.left == 0 {
            return None;
        }
        self.left -= 1;
        // Scrambled: the popular ranks land on keys spread over the key space.
        let rank = self.zipf.sample(&mut self.rng);
        let key = ycsb_key(fnv1a(rank) % self.spec.records.max(1));
        Some(if self.rng.gen::<f64>() < self.spec.read {
            KvOp::Read(key)
        } else {
            KvOp::Update(key, self.spec.value_len)
        })
    }
}

/// At most 60 characters of a bad line, for a message ({:?} then escapes the rest).
fn excerpt(s: &str) -> String {
    match s.char_indices().nth(60) {
        Some((at, _)) => format!("{}…", &s[..at]),
        None => s.to_string(),
    }
}

/// The largest value an operation trace may ask for (NBYTES), 64 MiB: a bound, so a
/// typo cannot ask a replay to allocate gigabytes.
pub const MAX_OP_BYTES: usize = 64 << 20;

/// Reads a recorded operation trace: one `READ|UPDATE|INSERT|DELETE KEY [NBYTES]` per
/// line (case-insensitive verb; `#` comments and blank lines skipped). A YCSB basic
/// binding line such as `READ usertable user123 [ <all fields>]` also parses: a table
/// name before the key is skipped. `default_len` sizes writes without NBYTES.
pub fn read_op_trace(path: &Path, default_len: usize) -> Result<Vec<KvOp>, TraceError> {
    let name = path.display().to_string();
    let file = std::fs::File::open(path).map_err(|e| TraceError::Io {
        name: name.clone(),
        source: e,
    })?;
    parse_op_trace(&name, std::io::BufReader::new(file), default_len)
}

pub fn parse_op_trace(
    name: &str,
    reader: impl BufRead,
    default_len: usize,
) -> Result<Vec<KvOp>, TraceError> {
    let mut ops = Vec::new();
    for (i, line) in reader.split(b'\n').enumerate() {
        let line_no = i as u64 + 1;
        let line = line.map_err(|e| TraceError::Io {
            name: name.to_string(),
            source: e,
        })?;
        let err = |message: String| TraceError::Parse {
            name: name.to_string(),
            line: line_no,
            message,
        };
        let Ok(line) = String::from_utf8(line) else {
            return Err(err(
                "not text (invalid UTF-8): an operation trace has one `VERB KEY [NBYTES]` per line"
                    .into(),
            ));
        };
        let text = line.trim();
        if text.is_empty() || text.starts_with('#') {
            continue;
        }
        let mut words = text.split_whitespace();
        let verb = words.next().unwrap_or_default().to_ascii_uppercase();
        let rest: Vec<&str> = words.take_while(|w| !w.starts_with('[')).collect();
        // KEY [NBYTES] | TABLE KEY [NBYTES]
        let (key, len) = match rest.as_slice() {
            [key] => (*key, None),
            [a, b] if b.parse::<usize>().is_ok() => (*a, Some(*b)),
            [_, key] => (*key, None),
            [_, key, n] => (*key, Some(*n)),
            [] => return Err(err(format!("{:?}: missing key", excerpt(&verb)))),
            _ => {
                return Err(err(format!(
                    "expected `VERB KEY [NBYTES]`, got {:?}",
                    excerpt(text)
                )))
            }
        };
        let len = match len {
            Some(n) => n
                .parse::<usize>()
                .ok()
                .filter(|&n| n <= MAX_OP_BYTES)
                .ok_or_else(|| {
                    err(format!(
                        "NBYTES {n:?} is not a byte count from 0 to {MAX_OP_BYTES}"
                    ))
                })?,
            None => default_len,
        };
        let key = key.to_string();
        ops.push(match verb.as_str() {
            "READ" => KvOp::Read(key),
            "UPDATE" => KvOp::Update(key, len),
            "INSERT" => KvOp::Insert(key, len),
            "DELETE" => KvOp::Delete(key),
            "SCAN" => return Err(err("SCAN is not supported by the key-value store".into())),
            v => {
                return Err(err(format!(
                    "unknown operation {:?}: use READ, UPDATE, INSERT or DELETE",
                    excerpt(v)
                )))
            }
        });
    }
    Ok(ops)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mixes_match_the_spec() {
        for (name, read) in [("a", 0.5), ("b-t", 0.95), ("3", 0.33)] {
            let spec = YcsbSpec::named(name, 1000, 20_000).unwrap();
            let reads = YcsbGen::new(spec, 0)
                .filter(|op| matches!(op, KvOp::Read(_)))
                .count();
            let share = reads as f64 / 20_000.0;
            assert!((share - read).abs() < 0.02, "{name}: {share}");
        }
        assert_eq!(YcsbSpec::named("a-t", 1, 1).unwrap().gap_us, 50);
        assert!(YcsbSpec::named("c", 1, 1).is_none());
    }

    #[test]
    fn zipfian_is_skewed_like_ycsb() {
        let z = Zipfian::new(10_000, 0.99);
        let mut rng = SmallRng::seed_from_u64(3);
        let mut counts = vec![0u32; 10_000];
        for _ in 0..200_000 {
            counts[z.sample(&mut rng) as usize] += 1;
        }
        // P(rank 0) = 1 / zeta(10000, 0.99) ~ 0.10.
        let top = counts[0] as f64 / 200_000.0;
        assert!((0.08..0.12).contains(&top), "{top}");
        assert!(counts[0] > counts[1] && counts[1] > counts[10] && counts[10] > counts[1000]);
        // Request keys are keys the load phase inserted.
        let spec = YcsbSpec::named("a", 500, 1000).unwrap();
        let loaded: std::collections::HashSet<String> = (0..500).map(ycsb_key).collect();
        for op in YcsbGen::new(spec, 7) {
            let (KvOp::Read(k) | KvOp::Update(k, _)) = op else {
                panic!()
            };
            assert!(loaded.contains(&k));
        }
    }

    /// The first records YCSB 0.17's load phase inserts (`ycsb load basic`).
    #[test]
    fn keys_are_the_ones_ycsb_inserts() {
        assert_eq!(ycsb_key(0), "user6284781860667377211");
        assert!((0..1000).all(|i| !ycsb_key(i).contains('-')));
    }

    #[test]
    fn op_traces_parse_and_errors_name_the_line() {
        let text = "# recorded\nREAD user1\nupdate user2 512\nINSERT usertable user3 [ field0=x ]\n\nDELETE user4\nREAD usertable user5 [ <all fields>]\n";
        let ops = parse_op_trace("t", text.as_bytes(), 1000).unwrap();
        assert_eq!(
            ops,
            vec![
                KvOp::Read("user1".into()),
                KvOp::Update("user2".into(), 512),
                KvOp::Insert("user3".into(), 1000),
                KvOp::Delete("user4".into()),
                KvOp::Read("user5".into()),
            ]
        );
        let err = parse_op_trace("t", "READ a\nFROB b\n".as_bytes(), 1)
            .unwrap_err()
            .to_string();
        assert!(err.starts_with("t:2:") && err.contains("FROB"), "{err}");
        let err = parse_op_trace("t", "UPDATE usertable k lots\n".as_bytes(), 1)
            .unwrap_err()
            .to_string();
        assert!(err.contains("t:1:"), "{err}");
        let err = parse_op_trace("t", "READ a\nUPDATE user2 99999999999\n".as_bytes(), 1)
            .unwrap_err()
            .to_string();
        assert!(
            err.starts_with("t:2:") && err.contains("99999999999"),
            "{err}"
        );
        let err = parse_op_trace("t", "READ\n".as_bytes(), 1)
            .unwrap_err()
            .to_string();
        assert!(err.contains("missing key"), "{err}");
        let err = parse_op_trace("t", &b"READ a\n\xff\x1b[2J\n"[..], 1)
            .unwrap_err()
            .to_string();
        assert!(err.starts_with("t:2:") && err.contains("not text"), "{err}");
        let long = format!("FROB\u{1b}{}\n", "x".repeat(500));
        let err = parse_op_trace("t", long.as_bytes(), 1)
            .unwrap_err()
            .to_string();
        assert!(err.len() < 200 && !err.contains('\u{1b}'), "{err}");
    }
}

//! The sequential cutoff (after bcache's): a request that belongs to a sequential run
//! longer than the cutoff bypasses the cache on a miss, so one scan does not flush the
//! hot set. One implementation for the tiered volume and for `hscm sim cache`, so the
//! simulator predicts what the volume does with the same default.

/// bcache's default sequential cutoff.
pub const DEFAULT_SEQUENTIAL_CUTOFF: u64 = 4 << 20;

/// Runs the detector remembers (bcache keeps a few recent streams, too).
const STREAMS: usize = 16;

/// Recent sequential runs: a request that starts where a run ended extends it; one that
/// starts anywhere else replaces the least recently extended run.
///
/// The runs are kept as three arrays rather than an array of runs, so that finding the
/// run a request continues and the least recently used one each read 16 adjacent
/// words: this runs on every request of `hscm sim cache` with its defaults (7% fewer
/// instructions per request than the array of runs, by callgrind).
#[derive(Debug, Clone)]
pub struct SequentialCutoff {
    /// Bytes a run may reach before its requests bypass; 0 turns the cutoff off.
    cutoff: u64,
    /// Each run's next offset, its length in bytes and its last use.
    next: [u64; STREAMS],
    len: [u64; STREAMS],
    used: [u64; STREAMS],
    clock: u64,
}

impl SequentialCutoff {
    pub fn new(cutoff: u64) -> SequentialCutoff {
        SequentialCutoff {
            cutoff,
            next: [u64::MAX; STREAMS],
            len: [0; STREAMS],
            used: [0; STREAMS],
            clock: 0,
        }
    }

    pub fn cutoff(&self) -> u64 {
        self.cutoff
    }

    /// Records a request of `len` bytes at `offset`; true when its run is longer than
    /// the cutoff (the request should bypass the cache on a miss).
    #[inline]
    pub fn is_sequential(&mut self, offset: u64, len: u64) -> bool {
        let run = self.observe(offset, len);
        self.cutoff > 0 && run > self.cutoff
    }

    /// Records a request and returns the length of the run it belongs to.
    #[inline]
    fn observe(&mut self, offset: u64, len: u64) -> u64 {
        self.clock += 1;
        let end = offset.saturating_add(len);
        // The first run ending here, as a scan in order would find it.
        let continued = self.next.iter().position(|&n| n == offset);
        let i = match continued {
            Some(i) => {
                self.len[i] = self.len[i].saturating_add(len);
                i
            }
            None => {
                // The least recently extended (the first of equals, as a scan finds).
                let oldest = *self.used.iter().min().expect("STREAMS is not zero");
                let i = self
                    .used
                    .iter()
                    .position(|&u| u == oldest)
                    .expect("the minimum is there");
                self.len[i] = len;
                i
            }
        };
        self.next[i] = end;
        self.used[i] = self.clock;
        self.len[i]
    }
}

/// Replay's first-touch placement with the volume's sequential cutoff: each new key gets
/// the next free offset (after the bytes of the keys placed before it), and each
/// request is observed at its key's offset. What `hscm sim cache` runs so that it
/// predicts `hscm volume replay` with the volume's defaults.
///
/// The offsets live in an open-addressing table a caller prefetches a few requests
/// ahead ([`FirstTouch::prefetch`]), as the cache policies' tables are: a per-key map
/// that misses the processor's caches on every request is what made this default cost
/// most of the simulator's speed.
pub struct FirstTouch {
    cutoff: SequentialCutoff,
    offsets: crate::table::OffsetTable,
    next: u64,
}

impl FirstTouch {
    pub fn new(cutoff: u64) -> FirstTouch {
        FirstTouch {
            cutoff: SequentialCutoff::new(cutoff),
            offsets: crate::table::OffsetTable::new(),
            next: 0,
        }
    }

    /// Starts loading `key`'s slot: call a few requests before [`FirstTouch::is_sequential`].
    #[inline]
    pub fn prefetch(&self, key: u64) {
        if self.cutoff.cutoff() > 0 {
            self.offsets.prefetch(key);
        }
    }

    /// True when the request bypasses the cache on a miss.
    #[inline]
    pub fn is_sequential(&mut self, key: u64, size: u64) -> bool {
        if self.cutoff.cutoff() == 0 {
            return false;
        }
        let offset = match self.offsets.get(key) {
            Some(at) => at,
            None => {
                let at = self.next;
                self.next += size;
                self.offsets.insert_new(key, at);
                at
            }
        };
        self.cutoff.is_sequential(offset, size)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn first_touch_places_each_key_after_the_ones_before_and_keeps_it_there() {
        let mut p = FirstTouch::new(2 * 4096);
        // Keys 7, 8, 9 first seen in a row: placed one after another, a run.
        let first: Vec<bool> = [7, 8, 9]
            .iter()
            .map(|&k| p.is_sequential(k, 4096))
            .collect();
        assert_eq!(first, [false, false, true]);
        // Seen again in the same order they are the same run of offsets again.
        let mut again = FirstTouch::new(2 * 4096);
        for k in [7, 8, 9, 1000] {
            again.is_sequential(k, 4096);
        }
        let seen: Vec<bool> = [7, 8, 9]
            .iter()
            .map(|&k| again.is_sequential(k, 4096))
            .collect();
        assert_eq!(seen, [false, false, true]);
        // Off: nothing is placed or sequential.
        let mut off = FirstTouch::new(0);
        assert!((0..10).all(|k| !off.is_sequential(k, 4096)));
    }

    proptest::proptest! {
        /// The arrays give what the plain scan over (next, length, last use) runs gives,
        /// request by request, on requests that often continue a run, tie, or jump.
        #[test]
        fn the_arrays_find_what_a_scan_of_runs_finds(
            reqs in proptest::collection::vec((0u64..40, 1u64..4), 0..3000)
        ) {
            let mut fast = SequentialCutoff::new(0);
            let mut runs = [(u64::MAX, 0u64, 0u64); STREAMS];
            let mut clock = 0;
            for (block, blocks) in reqs {
                let (offset, len) = (block * 4096, blocks * 4096);
                clock += 1;
                let want = match runs.iter_mut().find(|r| r.0 == offset) {
                    Some(r) => {
                        *r = (offset + len, r.1 + len, clock);
                        r.1
                    }
                    None => {
                        let oldest = runs.iter_mut().min_by_key(|r| r.2).unwrap();
                        *oldest = (offset + len, len, clock);
                        len
                    }
                };
                proptest::prop_assert_eq!(fast.observe(offset, len), want);
            }
        }
    }

    #[test]
    fn a_run_counts_only_requests_that_continue_it() {
        let mut s = SequentialCutoff::new(0);
        assert_eq!(s.observe(0, 4096), 4096);
        assert_eq!(s.observe(4096, 4096), 8192);
        assert_eq!(s.observe(1 << 20, 4096), 4096);
        assert_eq!(s.observe(8192, 8192), 16384);
    }

    #[test]
    fn a_run_past_the_cutoff_bypasses_and_interleaved_streams_are_told_apart() {
        let mut c = SequentialCutoff::new(3 * 4096);
        let a: Vec<bool> = (0..5).map(|i| c.is_sequential(i * 4096, 4096)).collect();
        assert_eq!(a, [false, false, false, true, true]);
        // Two interleaved scans each build their own run.
        let mut c = SequentialCutoff::new(2 * 4096);
        let mut seen = Vec::new();
        for i in 0..3 {
            seen.push(c.is_sequential(i * 4096, 4096));
            seen.push(c.is_sequential((1 << 30) + i * 4096, 4096));
        }
        assert_eq!(seen, [false, false, false, false, true, true]);
        // Off: nothing is ever sequential.
        let mut off = SequentialCutoff::new(0);
        assert!((0..100).all(|i| !off.is_sequential(i * 4096, 4096)));
        // A jump starts a new run.
        let mut c = SequentialCutoff::new(4096);
        assert!(!c.is_sequential(0, 4096));
        assert!(c.is_sequential(4096, 4096));
        assert!(!c.is_sequential(1 << 20, 4096));
    }
}

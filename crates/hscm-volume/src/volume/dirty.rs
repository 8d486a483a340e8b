//! The dirty bitmap: one bit per sector of a loaded chunk changed since the last
//! checkpoint (set under the chunk's `ram` write lock, taken under its read lock).

use std::sync::atomic::{AtomicU64, Ordering};

/// Home runs separated by at most this many clean sectors are written as one.
const MERGE_GAP_SECTORS: u64 = 4;

/// A chunk with at least this many dirty sectors is written home as one span.
const DENSE_CHUNK_SECTORS: u64 = 8;

/// Sets the bits of sectors `[first, end)`; returns how many of them were clear.
pub(super) fn mark_dirty(bits: &[AtomicU64], first: u64, end: u64) -> u64 {
    let mut fresh = 0;
    for (word, mask) in word_masks(first, end) {
        let before = bits[word as usize].fetch_or(mask, Ordering::Relaxed);
        fresh += u64::from((mask & !before).count_ones());
    }
    fresh
}

/// How a chunk's dirty sectors become home writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum SpanRule {
    /// One span for a dense chunk, otherwise runs of nearby sectors: for checkpoints,
    /// which run beside journal syncs. On the devices measured here, scattered small
    /// writes slow every concurrent flush far more than sequential bytes do
    /// (docs/design.md).
    WholeDenseChunks,
    /// Runs of nearby sectors only: for write-back passes, whose time a flush waits
    /// out, so they write as few clean sectors as a separate write would cost.
    NearbyRuns,
}

/// Groups dirty sectors (ascending) into spans `(first, last)` to write home.
pub(super) fn dirty_spans(sectors: &[u64], rule: SpanRule) -> Vec<(u64, u64)> {
    let (Some(&lo), Some(&hi)) = (sectors.first(), sectors.last()) else {
        return Vec::new();
    };
    if rule == SpanRule::WholeDenseChunks && sectors.len() as u64 >= DENSE_CHUNK_SECTORS {
        return vec![(lo, hi)];
    }
    let mut spans: Vec<(u64, u64)> = Vec::new();
    for &s in sectors {
        match spans.last_mut() {
            Some((_, last)) if s - *last <= MERGE_GAP_SECTORS + 1 => *last = s,
            _ => spans.push((s, s)),
        }
    }
    spans
}

/// Clears the bits of sectors `[first, end)` and returns the sectors that were set.
pub(super) fn take_dirty(bits: &[AtomicU64], first: u64, end: u64) -> Vec<u64> {
    let mut out = Vec::new();
    for (word, mask) in word_masks(first, end) {
        let mut got = bits[word as usize].fetch_and(!mask, Ordering::Relaxed) & mask;
        while got != 0 {
            out.push(word * 64 + u64::from(got.trailing_zeros()));
            got &= got - 1;
        }
    }
    out
}

/// The bitmap words covering bits `[first, end)`, each with the mask of its bits in range.
fn word_masks(first: u64, end: u64) -> impl Iterator<Item = (u64, u64)> {
    let mut s = first;
    std::iter::from_fn(move || {
        (s < end).then(|| {
            let word = s / 64;
            let hi = end.min((word + 1) * 64);
            let (lo, top) = (s % 64, hi - word * 64);
            let upto = if top == 64 {
                u64::MAX
            } else {
                (1u64 << top) - 1
            };
            s = hi;
            (word, upto & !((1u64 << lo) - 1))
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::BTreeSet;

    const BITS: u64 = 300;

    #[derive(Debug, Clone)]
    enum Op {
        Mark(u64, u64),
        Take(u64, u64),
    }

    fn range() -> impl Strategy<Value = (u64, u64)> {
        (0..=BITS).prop_flat_map(|a| (Just(a), a..=BITS))
    }

    proptest! {
        /// Any sequence of marks and takes over word boundaries behaves as a set of
        /// sector numbers: a take returns exactly the marked sectors in its range, in
        /// ascending order, and clears only those.
        #[test]
        fn the_bitmap_behaves_as_a_set(ops in proptest::collection::vec(
            prop_oneof![
                range().prop_map(|(a, b)| Op::Mark(a, b)),
                range().prop_map(|(a, b)| Op::Take(a, b)),
            ],
            1..40,
        )) {
            let bits: Vec<AtomicU64> = (0..BITS.div_ceil(64)).map(|_| AtomicU64::new(0)).collect();
            let mut model = BTreeSet::new();
            for op in ops {
                match op {
                    Op::Mark(a, b) => {
                        let fresh = (a..b).filter(|s| !model.contains(s)).count() as u64;
                        prop_assert_eq!(mark_dirty(&bits, a, b), fresh);
                        model.extend(a..b);
                    }
                    Op::Take(a, b) => {
                        let got = take_dirty(&bits, a, b);
                        let want: Vec<u64> = model.range(a..b).copied().collect();
                        prop_assert_eq!(&got, &want);
                        for s in want {
                            model.remove(&s);
                        }
                    }
                }
            }
            prop_assert_eq!(take_dirty(&bits, 0, BITS), model.into_iter().collect::<Vec<_>>());
        }

        /// Spans cover every dirty sector and nothing outside the first..last range;
        /// sparse runs split only at gaps wider than the merge gap.
        #[test]
        fn spans_cover_the_dirty_sectors(mut sectors in proptest::collection::btree_set(0..500u64, 0..20)) {
            let sorted: Vec<u64> = std::mem::take(&mut sectors).into_iter().collect();
            for rule in [SpanRule::WholeDenseChunks, SpanRule::NearbyRuns] {
                let spans = dirty_spans(&sorted, rule);
                for s in &sorted {
                    prop_assert!(spans.iter().any(|&(lo, hi)| lo <= *s && *s <= hi), "{s} not covered");
                }
                for w in spans.windows(2) {
                    prop_assert!(w[1].0 > w[0].1 + MERGE_GAP_SECTORS + 1, "spans {w:?} should have merged");
                }
                if rule == SpanRule::WholeDenseChunks && sorted.len() as u64 >= DENSE_CHUNK_SECTORS {
                    prop_assert_eq!(spans.len(), 1);
                }
                if rule == SpanRule::NearbyRuns {
                    // Every span starts and ends on a dirty sector, and no clean gap
                    // inside one is wider than the merge gap.
                    for &(lo, hi) in &spans {
                        let inside: Vec<u64> = sorted.iter().copied().filter(|s| (lo..=hi).contains(s)).collect();
                        prop_assert_eq!(inside.first(), Some(&lo));
                        prop_assert_eq!(inside.last(), Some(&hi));
                        for w in inside.windows(2) {
                            prop_assert!(w[1] - w[0] <= MERGE_GAP_SECTORS + 1);
                        }
                    }
                }
            }
        }
    }
}

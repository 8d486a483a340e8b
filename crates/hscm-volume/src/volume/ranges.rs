//! Sector ranges being written in place, so that a write whose chunks are all Loaded
//! can leave its chunks' io locks free while its bytes travel to the home.
//!
//! Why: the io lock of a chunk (1 MiB by default) orders its writers, and used to be
//! held across the home write. On a network home that write is a round trip, so two
//! writers anywhere in the same chunk waited for each other's round trip: 64 random
//! 4 KiB writers on a 128 MiB volume reached about half of what the export itself takes
//! at 1 ms (`hscm bench remote`). Only writers of the same sectors need that order:
//! RAM and home must end with the same last write. A writer holds its sectors here for
//! its whole write, from before it takes its io locks until its bytes are in RAM, so
//! overlapping writers still go one after the other, in the same order at home and in
//! RAM, while the rest overlap their round trips.
//!
//! Lock order: a range here first, then io locks (ascending). Nothing waits for a range
//! while it holds an io lock. A started write (`started`) holds its range from before
//! its bytes go to RAM until the home acknowledged them, with no thread waiting.

use parking_lot::{Condvar, Mutex};

#[derive(Default)]
pub(super) struct WritingRanges {
    held: Mutex<Held>,
    /// Signalled when a range is released.
    released: Condvar,
}

#[derive(Default)]
struct Held {
    /// `[start, end)` of every write holding its range, in no order.
    ranges: Vec<(u64, u64)>,
    /// How many of them are started writes (`started`), which no thread waits on.
    started: usize,
}

impl Held {
    fn overlaps(&self, start: u64, end: u64) -> bool {
        self.ranges.iter().any(|&(s, e)| s < end && start < e)
    }

    fn remove(&mut self, range: (u64, u64)) {
        if let Some(i) = self.ranges.iter().position(|&r| r == range) {
            self.ranges.swap_remove(i);
        }
    }
}

/// Holds `[start, end)` until dropped.
pub(super) struct RangeGuard<'a> {
    ranges: &'a WritingRanges,
    range: (u64, u64),
}

impl WritingRanges {
    /// Waits until no held range overlaps `[start, end)`, then holds it.
    pub(super) fn hold(&self, start: u64, end: u64) -> RangeGuard<'_> {
        let mut held = self.held.lock();
        while held.overlaps(start, end) {
            self.released.wait(&mut held);
        }
        held.ranges.push((start, end));
        RangeGuard {
            ranges: self,
            range: (start, end),
        }
    }

    /// Holds `[start, end)` for a started write, if no held range overlaps it (false:
    /// nothing held). [`Self::release_started`] lets it go, from whichever thread
    /// completes the write.
    pub(super) fn try_hold_started(&self, start: u64, end: u64) -> bool {
        let mut held = self.held.lock();
        if held.overlaps(start, end) {
            return false;
        }
        held.ranges.push((start, end));
        held.started += 1;
        true
    }

    pub(super) fn release_started(&self, start: u64, end: u64) {
        let mut held = self.held.lock();
        held.remove((start, end));
        held.started -= 1;
        drop(held);
        self.released.notify_all();
    }

    /// Waits until no started write holds a range (they complete by their deadline).
    pub(super) fn wait_for_started(&self) {
        let mut held = self.held.lock();
        while held.started > 0 {
            self.released.wait(&mut held);
        }
    }
}

impl Drop for RangeGuard<'_> {
    fn drop(&mut self) {
        self.ranges.held.lock().remove(self.range);
        self.ranges.released.notify_all();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
    use std::sync::Arc;
    use std::time::Duration;

    /// Disjoint ranges are held at once; an overlapping one waits for its release.
    #[test]
    fn overlapping_ranges_wait_disjoint_ones_do_not() {
        let ranges = Arc::new(WritingRanges::default());
        let a = ranges.hold(0, 8192);
        let b = ranges.hold(8192, 16384); // touching, not overlapping: no wait
        let got = Arc::new(AtomicBool::new(false));
        let t = {
            let (ranges, got) = (ranges.clone(), got.clone());
            std::thread::spawn(move || {
                let _c = ranges.hold(4096, 12288);
                got.store(true, Ordering::SeqCst);
            })
        };
        std::thread::sleep(Duration::from_millis(50));
        assert!(
            !got.load(Ordering::SeqCst),
            "an overlapping range did not wait"
        );
        drop(a);
        std::thread::sleep(Duration::from_millis(50));
        assert!(
            !got.load(Ordering::SeqCst),
            "it must wait for every range it overlaps"
        );
        drop(b);
        t.join().unwrap();
        assert!(got.load(Ordering::SeqCst));
    }

    /// Many threads on a few ranges: never two holders of overlapping ranges at once.
    #[test]
    fn no_two_overlapping_holders() {
        let ranges = Arc::new(WritingRanges::default());
        let inside: Arc<[AtomicUsize; 4]> = Arc::new(Default::default());
        std::thread::scope(|s| {
            for t in 0..8u64 {
                let (ranges, inside) = (&ranges, &inside);
                s.spawn(move || {
                    for i in 0..500u64 {
                        let first = (t + i) % 3;
                        let _g = ranges.hold(first * 4096, (first + 2) * 4096);
                        for slot in first..first + 2 {
                            let was = inside[slot as usize].fetch_add(1, Ordering::SeqCst);
                            assert_eq!(was, 0, "two holders of sector {slot}");
                        }
                        std::hint::spin_loop();
                        for slot in first..first + 2 {
                            inside[slot as usize].fetch_sub(1, Ordering::SeqCst);
                        }
                    }
                });
            }
        });
    }
}

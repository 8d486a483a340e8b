//! Primary trials (the Sprint-AEP paper, §III-A): whether waking one more primary raises throughput
//! by at least alpha, asked of every round.

use super::*;

impl Inner {
    /// Primary trials (the Sprint-AEP paper, §III-A): measure with `k` primaries, then
    /// `trial_rounds` times with `k + 1` and with `k` again (k, k+1, k, k+1, k, …).
    /// Keep the new primary only if write gain + read gain of every `k + 1` window
    /// against each `k` window beside it reaches alpha; else stop trying. Bracketing
    /// cancels drift in the load, and asking every round to agree keeps one lucky
    /// window on a noisy machine from waking a device.
    pub(crate) fn trials(&self) {
        let window = self.opts.trial_window;
        let rounds = self.opts.trial_rounds.max(1);
        let sleep = |d: Duration| {
            let until = Instant::now() + d;
            while Instant::now() < until {
                if self.shutdown.load(Ordering::SeqCst) {
                    return false;
                }
                std::thread::sleep(Duration::from_millis(10).min(d));
            }
            true
        };
        let measure = || {
            let (r, w) = (
                self.reads.load(Ordering::Relaxed),
                self.writes.load(Ordering::Relaxed),
            );
            if !sleep(window) {
                return None;
            }
            Some((
                (self.reads.load(Ordering::Relaxed) - r) as f64,
                (self.writes.load(Ordering::Relaxed) - w) as f64,
            ))
        };
        let step = |to: usize| match self.relayout(to) {
            Ok(()) => true,
            Err(e) => {
                tracing::error!("changing to {to} primaries failed: {e}");
                false
            }
        };
        loop {
            let k = self.layout.read().primaries.len();
            if k >= self.devices.len() {
                return;
            }
            let Some(first) = measure() else { return };
            if first.0 + first.1 == 0.0 {
                continue; // no load to judge by
            }
            // windows[0], [2], [4], … with k primaries; [1], [3], … with k + 1.
            let mut windows = vec![first];
            for _ in 0..rounds {
                for to in [k + 1, k] {
                    if !step(to) {
                        return;
                    }
                    let Some(m) = measure() else { return };
                    windows.push(m);
                }
            }
            let verdict = trial_verdict(&windows, self.opts.alpha);
            self.trials.lock().push(Trial {
                from: k,
                to: k + 1,
                ..verdict
            });
            if !verdict.kept || !step(k + 1) {
                return;
            }
        }
    }
}

/// Judges a bracketed primary trial from (reads, writes) per window, alternating
/// k, k+1, k, …, k (odd length). Gains are against the mean of the `k` windows; the
/// trial keeps the new primary only if every `k + 1` window beats each neighbour by
/// `alpha` in write gain + read gain.
fn trial_verdict(windows: &[(f64, f64)], alpha: f64) -> Trial {
    let gain = |new: f64, old: f64| if old == 0.0 { 0.0 } else { new / old - 1.0 };
    let sum_gain = |new: (f64, f64), old: (f64, f64)| gain(new.0, old.0) + gain(new.1, old.1);
    let base: Vec<_> = windows.iter().step_by(2).copied().collect();
    let trial: Vec<_> = windows.iter().skip(1).step_by(2).copied().collect();
    let mean = |v: &[(f64, f64)], f: fn(&(f64, f64)) -> f64| {
        v.iter().map(f).sum::<f64>() / v.len().max(1) as f64
    };
    let well_formed = windows.len() >= 3 && windows.len() % 2 == 1;
    let worst = (1..windows.len().saturating_sub(1))
        .step_by(2)
        .flat_map(|i| {
            [
                sum_gain(windows[i], windows[i - 1]),
                sum_gain(windows[i], windows[i + 1]),
            ]
        })
        .fold(f64::INFINITY, f64::min);
    Trial {
        from: 0,
        to: 0,
        write_gain: gain(mean(&trial, |w| w.1), mean(&base, |w| w.1)),
        read_gain: gain(mean(&trial, |w| w.0), mean(&base, |w| w.0)),
        kept: well_formed && worst >= alpha,
    }
}

#[cfg(test)]
mod tests {
    use super::trial_verdict;

    #[test]
    fn a_trial_keeps_a_primary_only_if_every_round_gains() {
        // (reads, writes) per window: k, k+1, k, k+1, k.
        let steady = [
            (100.0, 100.0),
            (120.0, 100.0),
            (100.0, 100.0),
            (115.0, 100.0),
            (100.0, 100.0),
        ];
        let t = trial_verdict(&steady, 0.10);
        assert!(t.kept);
        assert!((t.read_gain - 0.175).abs() < 1e-9 && t.write_gain.abs() < 1e-9);

        // One lucky window (+40%) but a second round with no gain: not kept, though
        // the mean gain (+20% reads) is above alpha.
        let lucky = [
            (100.0, 100.0),
            (140.0, 100.0),
            (100.0, 100.0),
            (100.0, 100.0),
            (100.0, 100.0),
        ];
        let t = trial_verdict(&lucky, 0.10);
        assert!(!t.kept && t.read_gain > 0.10);

        // A slow k window on one side only must not count as a gain.
        let dip = [
            (80.0, 80.0),
            (100.0, 100.0),
            (100.0, 100.0),
            (100.0, 100.0),
            (100.0, 100.0),
        ];
        assert!(!trial_verdict(&dip, 0.10).kept);

        // A single bracket (the paper's one trial) still works.
        let single = [(100.0, 100.0), (110.0, 110.0), (100.0, 100.0)];
        assert!(trial_verdict(&single, 0.10).kept);
        // Malformed: no k+1 window, or no closing k window.
        assert!(!trial_verdict(&[(1.0, 1.0)], 0.1).kept);
        assert!(!trial_verdict(&[(1.0, 1.0), (9.0, 9.0)], 0.1).kept);
    }
}

//! Device power states and an energy meter that integrates them over a recorded
//! activity timeline.
//!
//! The model follows what the Sprint-AEP paper (§II-B/C) measured on Optane DC
//! persistent memory: a device draws its peak power while it serves requests back to
//! back, a lower "active" power while requests keep arriving with gaps (the paper's
//! 0.1-0.8 ms plateau in Fig. 2), and decays to its idle power once requests stop for
//! longer (1.96 W at a 1.6 ms gap, Fig. 2). We cannot meter device power on this
//! machine: every figure computed here is *modelled* from measured busy intervals.

use serde::{Deserialize, Serialize};

/// Power states of one device, and how long it lingers between them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PowerProfile {
    pub name: String,
    /// Where the numbers come from.
    pub source: String,
    /// Watts with nothing to do.
    pub idle_w: f64,
    /// Watts between requests that arrive with gaps (disperse access).
    pub active_w: f64,
    /// Watts while serving requests (compact access keeps a device here).
    pub peak_w: f64,
    /// After the last request the device stays at `active_w` this long (seconds)...
    pub hold_s: f64,
    /// ...then falls linearly to `idle_w` over this long (seconds).
    pub decay_s: f64,
}

/// Names accepted by [`PowerProfile::preset`].
pub const POWER_PRESETS: &[&str] = &["optane-aep", "nvme-apst", "cxl-mem"];

impl PowerProfile {
    /// A built-in profile by name (see [`POWER_PRESETS`]).
    pub fn preset(name: &str) -> Option<PowerProfile> {
        let p = match name {
            "optane-aep" => PowerProfile {
                name: name.into(),
                source:
                    "Sprint-AEP paper, Table II (idle 1.91 W, peak 3.64 W), §IV-B (2.8 W under \
                         50 us-gap requests), Fig. 2 (plateau to 0.8 ms, near idle by 1.6 ms)"
                        .into(),
                idle_w: 1.91,
                active_w: 2.8,
                peak_w: 3.64,
                hold_s: 0.8e-3,
                decay_s: 0.8e-3,
            },
            // Typical datasheet class for a consumer NVMe drive with autonomous power
            // state transitions; our own choice of representative values.
            "nvme-apst" => PowerProfile {
                name: name.into(),
                source: "our assumption: typical NVMe datasheet (PS0 ~6 W busy, ~3 W between \
                         requests, APST to a 0.05 W state after ~50 ms idle)"
                    .into(),
                idle_w: 0.05,
                active_w: 3.0,
                peak_w: 6.0,
                hold_s: 50e-3,
                decay_s: 50e-3,
            },
            "cxl-mem" => PowerProfile {
                name: name.into(),
                source: "our assumption: a CXL memory expander, ~4 W static, ~9 W streaming, \
                         no deep idle state"
                    .into(),
                idle_w: 4.0,
                active_w: 6.0,
                peak_w: 9.0,
                hold_s: 1e-3,
                decay_s: 1e-3,
            },
            _ => return None,
        };
        Some(p)
    }

    /// Parse a profile from JSON (the fields of this struct) and check it is sane.
    pub fn from_json(text: &str) -> Result<PowerProfile, PowerError> {
        let p: PowerProfile =
            serde_json::from_str(text).map_err(|e| PowerError(format!("power profile: {e}")))?;
        p.validate()?;
        Ok(p)
    }

    pub fn validate(&self) -> Result<(), PowerError> {
        let finite = [
            self.idle_w,
            self.active_w,
            self.peak_w,
            self.hold_s,
            self.decay_s,
        ]
        .iter()
        .all(|v| v.is_finite() && *v >= 0.0);
        if !finite {
            return Err(PowerError(format!(
                "power profile {}: every power and time must be a finite number >= 0",
                self.name
            )));
        }
        if !(self.idle_w <= self.active_w && self.active_w <= self.peak_w) {
            return Err(PowerError(format!(
                "power profile {}: needs idle_w <= active_w <= peak_w (got {} / {} / {})",
                self.name, self.idle_w, self.active_w, self.peak_w
            )));
        }
        Ok(())
    }

    /// Joules spent in a gap, from `from` to `to` seconds after the device last
    /// finished a request.
    fn gap_energy(&self, from: f64, to: f64) -> f64 {
        if to <= from {
            return 0.0;
        }
        let hold_end = self.hold_s;
        let decay_end = self.hold_s + self.decay_s;
        let mut joules = 0.0;
        // Plateau.
        let (a, b) = (from.min(hold_end), to.min(hold_end));
        joules += (b - a) * self.active_w;
        // Linear decay: power(s) = active - (active - idle) * (s - hold) / decay.
        let (a, b) = (
            from.clamp(hold_end, decay_end),
            to.clamp(hold_end, decay_end),
        );
        if b > a && self.decay_s > 0.0 {
            let slope = (self.active_w - self.idle_w) / self.decay_s;
            let at = |s: f64| self.active_w - slope * (s - hold_end);
            joules += (b - a) * (at(a) + at(b)) / 2.0;
        }
        // Idle.
        let (a, b) = (from.max(decay_end), to.max(decay_end));
        joules += (b - a) * self.idle_w;
        joules
    }

    /// Energy in joules over the window `[start, end)` (nanoseconds on the timeline's
    /// clock). Before its first recorded request a device is idle.
    pub fn energy(&self, timeline: &Timeline, start: u64, end: u64) -> f64 {
        if end <= start {
            return 0.0;
        }
        let s = |ns: u64| ns as f64 * 1e-9;
        let mut joules = 0.0;
        // The moment the device last finished a request, if it has.
        let mut last_end: Option<u64> = None;
        let mut cursor = start;
        for &(b, e) in timeline.intervals() {
            if e <= start {
                last_end = Some(e);
                continue;
            }
            if b >= end {
                break;
            }
            let b = b.max(start);
            joules += self.between(last_end, cursor, b);
            let e_clip = e.min(end);
            joules += s(e_clip - b) * self.peak_w;
            cursor = e_clip;
            last_end = Some(e);
        }
        joules += self.between(last_end, cursor, end);
        joules
    }

    /// Energy of the non-busy span `[from, to)` given when the device last finished.
    fn between(&self, last_end: Option<u64>, from: u64, to: u64) -> f64 {
        if to <= from {
            return 0.0;
        }
        let s = |ns: u64| ns as f64 * 1e-9;
        match last_end {
            None => s(to - from) * self.idle_w,
            Some(e) => self.gap_energy(s(from.saturating_sub(e)), s(to.saturating_sub(e))),
        }
    }
}

/// A bad power profile.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct PowerError(pub String);

/// A device's busy intervals `[begin, end)` in nanoseconds, sorted and merged.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Timeline {
    intervals: Vec<(u64, u64)>,
}

impl Timeline {
    /// Build from intervals in any order, possibly overlapping (concurrent requests).
    pub fn from_intervals(mut raw: Vec<(u64, u64)>) -> Timeline {
        raw.retain(|&(b, e)| e >= b);
        raw.sort_unstable();
        let mut intervals: Vec<(u64, u64)> = Vec::with_capacity(raw.len());
        for (b, e) in raw {
            match intervals.last_mut() {
                Some(last) if b <= last.1 => last.1 = last.1.max(e),
                _ => intervals.push((b, e)),
            }
        }
        Timeline { intervals }
    }

    pub fn intervals(&self) -> &[(u64, u64)] {
        &self.intervals
    }

    /// Nanoseconds busy within `[start, end)`.
    pub fn busy_ns(&self, start: u64, end: u64) -> u64 {
        self.intervals
            .iter()
            .map(|&(b, e)| e.min(end).saturating_sub(b.max(start)))
            .sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn aep() -> PowerProfile {
        PowerProfile::preset("optane-aep").unwrap()
    }

    const MS: u64 = 1_000_000;

    #[test]
    fn an_untouched_device_draws_idle_power() {
        let t = Timeline::default();
        let j = aep().energy(&t, 0, 1000 * MS);
        assert!((j - 1.91).abs() < 1e-9, "{j}");
    }

    #[test]
    fn compact_access_draws_peak_power() {
        let t = Timeline::from_intervals(vec![(0, 1000 * MS)]);
        assert!((aep().energy(&t, 0, 1000 * MS) - 3.64).abs() < 1e-9);
    }

    #[test]
    fn disperse_access_sits_on_the_active_plateau() {
        // 1 us of work every 50 us: almost all time on the 2.8 W plateau.
        let raw = (0..20_000u64)
            .map(|i| (i * 50_000, i * 50_000 + 1_000))
            .collect();
        let t = Timeline::from_intervals(raw);
        let j = aep().energy(&t, 0, 1000 * MS);
        let expected = 0.02 * 3.64 + 0.98 * 2.8;
        assert!((j - expected).abs() < 1e-3, "{j} vs {expected}");
    }

    #[test]
    fn a_long_gap_decays_to_idle() {
        let p = aep();
        let t = Timeline::from_intervals(vec![(0, MS)]);
        // 1 ms busy, 0.8 ms plateau, 0.8 ms ramp (average of 2.8 and 1.91), rest idle.
        let j = p.energy(&t, 0, 10 * MS);
        let expected =
            1e-3 * 3.64 + 0.8e-3 * 2.8 + 0.8e-3 * (2.8 + 1.91) / 2.0 + (10.0 - 2.6) * 1e-3 * 1.91;
        assert!((j - expected).abs() < 1e-9, "{j} vs {expected}");
    }

    #[test]
    fn energy_is_additive_over_adjacent_windows() {
        let raw = vec![
            (3 * MS, 4 * MS),
            (4 * MS + 100, 5 * MS),
            (9 * MS, 9 * MS + 7),
        ];
        let t = Timeline::from_intervals(raw);
        let p = aep();
        for cut in [0, MS, 4 * MS + 50, 5 * MS + 300_000, 9 * MS + 3, 12 * MS] {
            let whole = p.energy(&t, 0, 12 * MS);
            let split = p.energy(&t, 0, cut) + p.energy(&t, cut, 12 * MS);
            assert!(
                (whole - split).abs() < 1e-12,
                "cut {cut}: {whole} vs {split}"
            );
        }
    }

    #[test]
    fn overlapping_intervals_merge() {
        let t = Timeline::from_intervals(vec![(5, 10), (0, 6), (20, 30), (25, 26)]);
        assert_eq!(t.intervals(), &[(0, 10), (20, 30)]);
        assert_eq!(t.busy_ns(0, 100), 20);
        assert_eq!(t.busy_ns(8, 22), 4);
    }

    #[test]
    fn profiles_parse_and_reject_nonsense() {
        let p = aep();
        let text = serde_json::to_string(&p).unwrap();
        assert_eq!(PowerProfile::from_json(&text).unwrap(), p);
        let bad = text.replace("\"idle_w\":1.91", "\"idle_w\":9.0");
        let err = PowerProfile::from_json(&bad).unwrap_err().to_string();
        assert!(err.contains("idle_w <= active_w"), "{err}");
        assert!(PowerProfile::from_json("{\"name\":1}").is_err());
        for name in POWER_PRESETS {
            PowerProfile::preset(name).unwrap().validate().unwrap();
        }
    }
}

//! Migration traffic: a whole row moved over the bus, ahead of queued demand requests.

use super::{Bucket, Device, CLOSED};

impl Device {
    /// Opens `row` in bank `b` for a transfer starting no earlier than `at`; returns
    /// when its first column command may issue.
    fn open_for_transfer(&mut self, ch: usize, b: usize, row: u32, at: u64) -> u64 {
        let t = self.t;
        let bank = self.banks[b];
        if bank.open == row {
            return at.max(bank.col_ready);
        }
        let mut act_ready = at;
        if bank.open != CLOSED {
            if self.nvm && bank.dirty == 0 {
                act_ready = act_ready.max(bank.next_pre);
                self.close(b, act_ready, Bucket::Migration);
            } else {
                let pre = at.max(bank.next_pre);
                self.precharge(b, pre, Bucket::Migration);
            }
            self.forget_activations(ch, b);
        }
        let act = self.act_ready(b, act_ready);
        self.activate(b, row, act, Bucket::Migration);
        act + t.rcd
    }

    /// Queued requests that had activated bank `b`'s row lose it.
    fn forget_activations(&mut self, ch: usize, b: usize) {
        self.chans[ch].lose_activations(|r| r.bank as usize == b);
    }

    /// The earliest legal time for a column command on open bank `b` at or after `at`.
    fn column_ready(&self, ch: usize, b: usize, write: bool, at: u64) -> u64 {
        let t = self.t;
        let c = &self.chans[ch];
        let r = &self.ranks[b / self.geometry.banks as usize];
        let g = self.group(b);
        let at = at.max(self.banks[b].col_ready);
        if write {
            at.max(c.next_wr)
                .max(r.group_wr[g])
                .max(c.bus_free.saturating_sub(t.cwd))
        } else {
            at.max(c.next_rd)
                .max(r.group_rd[g])
                .max(c.bus_free.saturating_sub(t.cl))
        }
    }

    /// Moves a whole row over the bus (migration traffic): a precharge and activate if
    /// needed, then one column command per line, back to back. Returns when the last
    /// burst is done.
    pub(crate) fn row_transfer(&mut self, slot: u32, write: bool, at: u64) -> u64 {
        let (ch, _, b, row) = self.locate(slot);
        let ready = self.open_for_transfer(ch, b, row, at);
        let first = self.column_ready(ch, b, write, ready);
        // Every burst after the first follows max(tCCD_L, burst) later (same bank, so
        // same group); the state after the last one is what the whole sequence leaves,
        // as every constraint grows with time (the test compares with one at a time).
        let rest = u64::from(self.lines_per_row.saturating_sub(1));
        let last = first + rest * self.t.ccd_l.max(self.t.burst);
        let per_burst = if write {
            self.cost.write
        } else {
            self.cost.read
        } + self.cost.link_per_burst;
        self.energy.migration += rest as f64 * per_burst;
        self.counters.migration_bursts += rest;
        if write {
            let bits = self.lines_per_row.min(64);
            self.banks[b].dirty |= if bits == 64 {
                u64::MAX
            } else {
                (1u64 << bits) - 1
            };
        }
        let done = self.column(ch, b, write, 0, last, Bucket::Migration);
        self.banks[b].hits += self.lines_per_row;
        done + 2 * self.t.link
    }

    /// `row_transfer` one column command at a time: the reference the closed form is
    /// tested against.
    #[cfg(test)]
    fn row_transfer_stepwise(&mut self, slot: u32, write: bool, at: u64) -> u64 {
        let (ch, _, b, row) = self.locate(slot);
        let mut ready = self.open_for_transfer(ch, b, row, at);
        let mut done = 0;
        for line in 0..self.lines_per_row {
            let col = self.column_ready(ch, b, write, ready);
            done = self.column(ch, b, write, line, col, Bucket::Migration);
            ready = col;
        }
        self.banks[b].hits += self.lines_per_row;
        done + 2 * self.t.link
    }
}

#[cfg(test)]
mod tests {
    use super::super::Req;
    use super::*;
    use crate::config::{ControllerConfig, Geometry};
    use hscm_model::MemPreset;

    fn state(d: &Device) -> Vec<u64> {
        let mut v = Vec::new();
        for c in &d.chans {
            v.extend([c.bus_free, c.next_rd, c.next_wr]);
        }
        for r in &d.ranks {
            v.extend(r.group_rd.iter().chain(&r.group_wr));
            v.push(r.last_act.unwrap_or(0));
        }
        for b in &d.banks {
            v.extend([
                u64::from(b.open),
                b.dirty,
                b.next_act,
                b.next_pre,
                b.col_ready,
            ]);
        }
        v
    }

    #[test]
    fn closed_form_row_transfer_matches_the_stepwise_one() {
        for preset in [
            MemPreset::PaperDram,
            MemPreset::PaperPcm,
            MemPreset::Ddr4_2400,
            MemPreset::CxlLike,
        ] {
            for row_bytes in [1024u64, 4096, 8192] {
                let g = Geometry {
                    row_bytes,
                    banks: preset.profile().banks,
                    ..Geometry::default()
                };
                let ctrl = ControllerConfig::default();
                let mut a = Device::new(preset.profile(), 64 << 20, &g, &ctrl);
                let mut b = Device::new(preset.profile(), 64 << 20, &g, &ctrl);
                let mut at = 0;
                for (i, slot) in [3u32, 3, 11, 4, 3, 19, 11].into_iter().enumerate() {
                    let write = i % 3 != 1;
                    // Some demand traffic in between, identical on both.
                    for d in [&mut a, &mut b] {
                        d.enqueue(Req::new(i as u64, at, 0, slot + 1, 5, !write));
                        while !d.is_empty() {
                            d.step(u64::MAX);
                        }
                    }
                    let x = a.row_transfer(slot, write, at);
                    let y = b.row_transfer_stepwise(slot, write, at);
                    assert_eq!(x, y, "{preset:?} row {row_bytes} step {i}");
                    assert_eq!(state(&a), state(&b), "{preset:?} row {row_bytes} step {i}");
                    at = x / 2;
                }
            }
        }
    }
}

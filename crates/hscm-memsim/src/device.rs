//! One memory device (DRAM or NVM): channels, ranks, banks with open-page row buffers,
//! JEDEC command timing and per-command energy. Times are picoseconds.

use rustc_hash::FxHashMap as HashMap;

use hscm_model::{MemKind, MemProfile};
use serde::Serialize;

use crate::config::{Geometry, MapField};

const CLOSED: u32 = u32::MAX;

/// Constraints in picoseconds, each a whole number of device clocks.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Tps {
    pub ck: u64,
    pub cl: u64,
    pub cwd: u64,
    pub rcd: u64,
    pub rp: u64,
    pub ras: u64,
    pub wr: u64,
    pub rtp: u64,
    pub wtr: u64,
    pub rrd: u64,
    pub faw: u64,
    pub ccd: u64,
    pub burst: u64,
    pub rfc: u64,
    pub refi: u64,
    /// Read-to-write turnaround on the bus: tCL + burst + 2 clocks − tCWD.
    pub rtw: u64,
    pub link: u64,
}

impl Tps {
    pub(crate) fn of(p: &MemProfile) -> Self {
        let ck = (p.timing.t_ck * 1000.0).round() as u64;
        let c = |ns: f64| p.cycles(ns) * ck;
        let cl = c(p.timing.t_cl);
        let cwd = c(p.timing.t_cwd);
        let burst = u64::from(p.timing.burst_ck) * ck;
        Self {
            ck,
            cl,
            cwd,
            rcd: c(p.timing.t_rcd),
            rp: c(p.timing.t_rp),
            ras: c(p.timing.t_ras),
            wr: c(p.timing.t_wr),
            rtp: c(p.timing.t_rtp),
            wtr: c(p.timing.t_wtr),
            rrd: c(p.timing.t_rrd),
            faw: c(p.timing.t_faw),
            ccd: u64::from(p.timing.t_ccd_ck) * ck,
            burst,
            rfc: c(p.timing.t_rfc),
            refi: c(p.timing.t_refi),
            rtw: (cl + burst + 2 * ck).saturating_sub(cwd),
            link: (p.timing.link_ns * 1000.0).round() as u64,
        }
    }
}

#[derive(Clone, Copy)]
struct Bank {
    open: u32,
    dirty: u64,
    next_act: u64,
    next_pre: u64,
    col_ready: u64,
}

#[derive(Clone, Copy, Default)]
struct Rank {
    acts: [Option<u64>; 4],
    act_i: usize,
    last_act: Option<u64>,
    next_ref: u64,
    ref_until: u64,
}

#[derive(Clone, Copy, Default)]
struct Chan {
    bus_free: u64,
    next_rd: u64,
    next_wr: u64,
}

/// Where dynamic energy is booked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Bucket {
    Demand,
    Migration,
}

/// Dynamic energy in picojoules.
#[derive(Debug, Clone, Copy, Default, Serialize)]
pub struct DynamicEnergy {
    pub activate: f64,
    pub writeback: f64,
    pub rb_read: f64,
    pub rb_write: f64,
    pub link: f64,
    pub migration: f64,
}

/// Per-device counters.
#[derive(Debug, Clone, Copy, Default, Serialize)]
pub struct DeviceCounters {
    pub reads: u64,
    pub writes: u64,
    pub read_row_hits: u64,
    pub write_row_hits: u64,
    pub activates: u64,
    pub row_writebacks: u64,
    pub lines_written_to_array: u64,
    pub migration_bursts: u64,
}

pub(crate) struct Issued {
    pub first_cmd: u64,
    pub done: u64,
    pub row_hit: bool,
}

pub(crate) struct Device {
    pub profile: MemProfile,
    pub t: Tps,
    pub bytes: u64,
    geometry: Geometry,
    /// Divisors for slot → (channel, rank, bank) in LSB-first order.
    fields: Vec<(MapField, u32)>,
    banks: Vec<Bank>,
    ranks: Vec<Rank>,
    chans: Vec<Chan>,
    lines_per_row: u32,
    row_bits: f64,
    burst_bits: f64,
    pub energy: DynamicEnergy,
    pub counters: DeviceCounters,
    /// Array writes per row (slot), for endurance.
    pub row_writes: HashMap<u32, u32>,
}

impl Device {
    pub(crate) fn new(profile: MemProfile, bytes: u64, geometry: &Geometry) -> Self {
        let t = Tps::of(&profile);
        let n_ranks = (geometry.channels * geometry.ranks) as usize;
        let refreshes = profile.refreshes();
        let ranks = (0..n_ranks)
            .map(|i| Rank {
                // Stagger ranks so they do not all refresh at once.
                next_ref: if refreshes {
                    t.refi * (i as u64 + 1) / n_ranks as u64
                } else {
                    u64::MAX
                },
                ..Rank::default()
            })
            .collect();
        let fields = geometry
            .mapping
            .iter()
            .map(|&f| {
                let n = match f {
                    MapField::Channel => geometry.channels,
                    MapField::Rank => geometry.ranks,
                    MapField::Bank => geometry.banks,
                };
                (f, n)
            })
            .collect();
        let lines_per_row = (geometry.row_bytes / u64::from(profile.burst_bytes)) as u32;
        Self {
            t,
            bytes,
            geometry: geometry.clone(),
            fields,
            banks: vec![
                Bank {
                    open: CLOSED,
                    dirty: 0,
                    next_act: 0,
                    next_pre: 0,
                    col_ready: 0
                };
                n_ranks * geometry.banks as usize
            ],
            ranks,
            chans: vec![Chan::default(); geometry.channels as usize],
            lines_per_row,
            row_bits: geometry.row_bytes as f64 * 8.0,
            burst_bits: f64::from(profile.burst_bytes) * 8.0,
            profile,
            energy: DynamicEnergy::default(),
            counters: DeviceCounters::default(),
            row_writes: HashMap::default(),
        }
    }

    pub(crate) fn slots(&self) -> u64 {
        self.bytes / self.geometry.row_bytes
    }

    /// (channel, rank index, bank index, row) of a device-local slot.
    #[inline]
    fn locate(&self, slot: u32) -> (usize, usize, usize, u32) {
        let mut rest = slot;
        let (mut ch, mut ra, mut ba) = (0, 0, 0);
        for &(f, n) in &self.fields {
            let v = (rest % n) as usize;
            rest /= n;
            match f {
                MapField::Channel => ch = v,
                MapField::Rank => ra = v,
                MapField::Bank => ba = v,
            }
        }
        let rank = ch * self.geometry.ranks as usize + ra;
        (ch, rank, rank * self.geometry.banks as usize + ba, rest)
    }

    /// Whether an access to `slot` would hit its bank's open row now.
    #[inline]
    pub(crate) fn would_hit(&self, slot: u32) -> bool {
        let (_, _, bank, row) = self.locate(slot);
        self.banks[bank].open == row
    }

    /// Brings a rank's refresh schedule up to `t`: every refresh due by then happens
    /// (closing all its banks) before any command at `t`.
    fn catch_up_refresh(&mut self, rank: usize, t: u64) {
        let refi = self.t.refi;
        let r = &mut self.ranks[rank];
        if r.next_ref > t {
            return;
        }
        // Refreshes that ended long before `t` cannot delay anything: skip them.
        let behind = (t - r.next_ref) / refi;
        if behind > 1 {
            r.next_ref += (behind - 1) * refi;
        }
        let banks = self.geometry.banks as usize;
        let first = rank * banks;
        while self.ranks[rank].next_ref <= t {
            let mut start = self.ranks[rank].next_ref.max(self.ranks[rank].ref_until);
            let mut any_open = false;
            for b in first..first + banks {
                if self.banks[b].open != CLOSED {
                    any_open = true;
                    start = start.max(self.banks[b].next_pre);
                }
            }
            if any_open {
                for b in first..first + banks {
                    if self.banks[b].open != CLOSED {
                        self.close_energy(b, Bucket::Demand);
                        self.banks[b].open = CLOSED;
                        self.banks[b].dirty = 0;
                    }
                }
                start += self.t.rp;
            }
            let until = start + self.t.rfc;
            for b in first..first + banks {
                self.banks[b].next_act = self.banks[b].next_act.max(until);
            }
            let r = &mut self.ranks[rank];
            r.ref_until = until;
            r.next_ref += refi;
        }
    }

    fn book(&mut self, bucket: Bucket, pj: f64, f: fn(&mut DynamicEnergy) -> &mut f64) {
        match bucket {
            Bucket::Demand => *f(&mut self.energy) += pj,
            Bucket::Migration => self.energy.migration += pj,
        }
    }

    /// Energy (and endurance count) of writing a dirty row buffer back to the array.
    fn close_energy(&mut self, bank: usize, bucket: Bucket) {
        let b = self.banks[bank];
        if b.dirty == 0 {
            return;
        }
        let lines = if self.profile.writeback_dirty_lines_only {
            u64::from(b.dirty.count_ones()) * u64::from((self.lines_per_row / 64).max(1))
        } else {
            u64::from(self.lines_per_row)
        };
        let bits = lines as f64 * self.burst_bits;
        self.book(
            bucket,
            bits * self.profile.energy.array_write_pj_per_bit,
            |e| &mut e.writeback,
        );
        self.counters.row_writebacks += 1;
        self.counters.lines_written_to_array += lines;
        if self.profile.kind == MemKind::Nvm {
            *self.row_writes.entry(b.open).or_default() += 1;
        }
    }

    /// Issues one 64 B read or write of `line` in `slot` no earlier than `at`, with
    /// every command at its earliest legal time. Rows stay open (open-page policy).
    pub(crate) fn access(
        &mut self,
        slot: u32,
        line: u32,
        write: bool,
        at: u64,
        bucket: Bucket,
    ) -> Issued {
        let (ch, rank, bank, row) = self.locate(slot);
        if self.profile.refreshes() {
            self.catch_up_refresh(rank, at);
        }
        let t = self.t;
        let mut first_cmd = None;
        let b = self.banks[bank];
        let row_hit = b.open == row;
        let col_ready = if row_hit {
            at.max(b.col_ready)
        } else {
            let mut act_ready = at.max(self.ranks[rank].ref_until);
            if b.open != CLOSED {
                let nvm = self.profile.kind == MemKind::Nvm;
                if !nvm || b.dirty != 0 {
                    let pre = act_ready.max(b.next_pre);
                    first_cmd = Some(pre);
                    // A dirty NVM row is written into the array at precharge: tWR.
                    act_ready = pre + t.rp + if nvm { t.wr } else { 0 };
                } else {
                    act_ready = act_ready.max(b.next_pre);
                }
                self.close_energy(bank, bucket);
            }
            let r = &self.ranks[rank];
            let mut act = act_ready.max(b.next_act);
            if let Some(last) = r.last_act {
                act = act.max(last + t.rrd);
            }
            if let Some(oldest) = r.acts[r.act_i] {
                act = act.max(oldest + t.faw);
            }
            let r = &mut self.ranks[rank];
            r.acts[r.act_i] = Some(act);
            r.act_i = (r.act_i + 1) % 4;
            r.last_act = Some(act);
            first_cmd.get_or_insert(act);
            let bk = &mut self.banks[bank];
            bk.open = row;
            bk.dirty = 0;
            bk.next_pre = act + t.ras;
            bk.col_ready = act + t.rcd;
            self.counters.activates += 1;
            let pj = self.row_bits * self.profile.energy.array_read_pj_per_bit;
            self.book(bucket, pj, |e| &mut e.activate);
            act + t.rcd
        };
        let (col, done) = self.column(ch, bank, write, line, col_ready);
        let e = self.profile.energy;
        let demand = bucket == Bucket::Demand;
        if write {
            if demand {
                self.counters.writes += 1;
                self.counters.write_row_hits += u64::from(row_hit);
            }
            self.book(
                bucket,
                self.burst_bits * e.row_buffer_write_pj_per_bit,
                |e| &mut e.rb_write,
            );
        } else {
            if demand {
                self.counters.reads += 1;
                self.counters.read_row_hits += u64::from(row_hit);
            }
            self.book(
                bucket,
                self.burst_bits * e.row_buffer_read_pj_per_bit,
                |e| &mut e.rb_read,
            );
        }
        if e.link_pj_per_bit > 0.0 {
            self.book(bucket, self.burst_bits * e.link_pj_per_bit, |e| &mut e.link);
        }
        if !demand {
            self.counters.migration_bursts += 1;
        }
        Issued {
            first_cmd: first_cmd.unwrap_or(col),
            done: done + 2 * t.link,
            row_hit,
        }
    }

    /// The column command (and its data burst) of one access to an open row: the
    /// earliest time that respects tCCD, the bus, read/write turnarounds.
    #[inline]
    fn column(
        &mut self,
        ch: usize,
        bank: usize,
        write: bool,
        line: u32,
        col_ready: u64,
    ) -> (u64, u64) {
        let t = self.t;
        let c = &mut self.chans[ch];
        let bk = &mut self.banks[bank];
        if write {
            let mut cc = col_ready.max(c.next_wr);
            if cc + t.cwd < c.bus_free {
                cc = c.bus_free - t.cwd;
            }
            let done = cc + t.cwd + t.burst;
            c.bus_free = done;
            c.next_wr = c.next_wr.max(cc + t.ccd);
            c.next_rd = c.next_rd.max(done + t.wtr);
            // NVM writes reach the array when the row closes (costed at precharge).
            let recovery = if self.profile.kind == MemKind::Nvm {
                0
            } else {
                t.wr
            };
            bk.next_pre = bk.next_pre.max(done + recovery);
            let per_bit = (self.lines_per_row / 64).max(1);
            bk.dirty |= 1u64 << ((line / per_bit) % 64);
            (cc, done)
        } else {
            let mut cc = col_ready.max(c.next_rd);
            if cc + t.cl < c.bus_free {
                cc = c.bus_free - t.cl;
            }
            let done = cc + t.cl + t.burst;
            c.bus_free = done;
            c.next_rd = c.next_rd.max(cc + t.ccd);
            c.next_wr = c.next_wr.max(cc + t.rtw);
            bk.next_pre = bk.next_pre.max(cc + t.rtp);
            (cc, done)
        }
    }

    /// Moves a whole row over the bus (migration traffic): one activation if needed,
    /// then a column command per line. Returns when the last burst is done.
    pub(crate) fn row_transfer(&mut self, slot: u32, write: bool, at: u64) -> u64 {
        let first = self.access(slot, 0, write, at, Bucket::Migration);
        let rest = self.lines_per_row.saturating_sub(1);
        if rest == 0 {
            return first.done;
        }
        // The remaining bursts follow back to back on this channel, each a whole
        // max(tCCD, burst) after the previous: the state `column` would leave after
        // `rest` more calls, in closed form (tests compare the two).
        let (ch, _, bank, _) = self.locate(slot);
        let t = self.t;
        let lat = if write { t.cwd } else { t.cl };
        let col0 = first.done - 2 * t.link - t.burst - lat;
        let col = col0 + u64::from(rest) * t.ccd.max(t.burst);
        let done = col + lat + t.burst;
        let c = &mut self.chans[ch];
        let bk = &mut self.banks[bank];
        c.bus_free = done;
        if write {
            c.next_wr = c.next_wr.max(col + t.ccd);
            c.next_rd = c.next_rd.max(done + t.wtr);
            let recovery = if self.profile.kind == MemKind::Nvm {
                0
            } else {
                t.wr
            };
            bk.next_pre = bk.next_pre.max(done + recovery);
            let bits = self.lines_per_row.min(64);
            bk.dirty |= if bits == 64 {
                u64::MAX
            } else {
                (1u64 << bits) - 1
            };
        } else {
            c.next_rd = c.next_rd.max(col + t.ccd);
            c.next_wr = c.next_wr.max(col + t.rtw);
            bk.next_pre = bk.next_pre.max(col + t.rtp);
        }
        let e = self.profile.energy;
        let per_burst = if write {
            e.row_buffer_write_pj_per_bit
        } else {
            e.row_buffer_read_pj_per_bit
        } + e.link_pj_per_bit;
        self.energy.migration += f64::from(rest) * self.burst_bits * per_burst;
        self.counters.migration_bursts += u64::from(rest);
        done + 2 * t.link
    }

    /// `row_transfer` one column command at a time: the reference the closed form is
    /// tested against.
    #[cfg(test)]
    fn row_transfer_stepwise(&mut self, slot: u32, write: bool, at: u64) -> u64 {
        let first = self.access(slot, 0, write, at, Bucket::Migration);
        let (ch, _, bank, _) = self.locate(slot);
        let mut end = first.done;
        for line in 1..self.lines_per_row {
            let ready = at.max(self.banks[bank].col_ready);
            end = end.max(self.column(ch, bank, write, line, ready).1 + 2 * self.t.link);
        }
        end
    }

    /// Closes every open row at the end of a run, so dirty data is costed.
    pub(crate) fn close_all(&mut self) {
        for b in 0..self.banks.len() {
            if self.banks[b].open != CLOSED {
                self.close_energy(b, Bucket::Demand);
                self.banks[b].open = CLOSED;
                self.banks[b].dirty = 0;
            }
        }
    }

    /// Standing energy over `runtime` in picojoules: (background, refresh).
    pub(crate) fn standing_energy(&self, runtime_ps: u64) -> (f64, f64) {
        let gib = self.bytes as f64 / (1u64 << 30) as f64;
        let e = self.profile.energy;
        // mW × ps = 1e-3 J/s × 1e-12 s = 1e-15 J = 1e-3 pJ.
        let background = e.background_mw_per_gib * gib * runtime_ps as f64 * 1e-3;
        let refresh = if self.profile.refreshes() {
            (runtime_ps / self.t.refi) as f64 * e.refresh_nj_per_gib * gib * 1e3
        } else {
            0.0
        };
        (background, refresh)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hscm_model::MemPreset;

    fn state(d: &Device) -> Vec<u64> {
        let mut v = Vec::new();
        for c in &d.chans {
            v.extend([c.bus_free, c.next_rd, c.next_wr]);
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
                    ..Geometry::default()
                };
                let mut a = Device::new(preset.profile(), 64 << 20, &g);
                let mut b = Device::new(preset.profile(), 64 << 20, &g);
                let mut at = 0;
                for (i, slot) in [3u32, 3, 11, 4, 3, 19, 11].into_iter().enumerate() {
                    let write = i % 3 != 1;
                    // Some demand traffic in between, identical on both.
                    for d in [&mut a, &mut b] {
                        d.access(slot + 1, 5, !write, at, Bucket::Demand);
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

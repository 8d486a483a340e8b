//! The commands themselves: precharge, activate, the column read or write, refresh,
//! and closing a row, each booking its timing, energy and counters.

use super::*;

impl Device {
    /// Closes a bank's row now: booking the write-back of a dirty NVM row and the
    /// standby change. Timing is the caller's.
    pub(super) fn close(&mut self, b: usize, at: u64, bucket: Bucket) {
        let bank = self.banks[b];
        if bank.open == CLOSED {
            return;
        }
        if self.nvm && bank.dirty != 0 {
            let lines = if self.profile.writeback_dirty_lines_only {
                u64::from(bank.dirty.count_ones()) * u64::from((self.lines_per_row / 64).max(1))
            } else {
                u64::from(self.lines_per_row)
            };
            self.energy
                .book(bucket, lines as f64 * self.cost.writeback_line, |e| {
                    &mut e.writeback
                });
            self.counters.row_writebacks += 1;
            self.counters.lines_written_to_array += lines;
            let slot = self.slot_of(b, bank.open);
            *self.row_writes.entry(slot).or_default() += 1;
        }
        let rank = b / self.geometry.banks as usize;
        let r = &mut self.ranks[rank];
        r.open_banks -= 1;
        if r.open_banks == 0 {
            r.active_ps += at.saturating_sub(r.open_since);
        }
        let bank = &mut self.banks[b];
        bank.open = CLOSED;
        bank.dirty = 0;
    }

    /// The slot of `row` in global bank `b` (the inverse of `locate`).
    pub(super) fn slot_of(&self, b: usize, row: u32) -> u32 {
        let banks = self.geometry.banks as usize;
        let (rank, ba) = (b / banks, b % banks);
        let ranks = self.geometry.ranks as usize;
        let (ch, ra) = (rank / ranks, rank % ranks);
        let mut slot = row;
        for &(f, n) in self.fields.iter().rev() {
            let v = match f {
                MapField::Channel => ch,
                MapField::Rank => ra,
                MapField::Bank => ba,
            } as u32;
            slot = slot * n + v;
        }
        slot
    }

    pub(super) fn precharge(&mut self, b: usize, at: u64, bucket: Bucket) {
        let dirty = self.banks[b].dirty != 0;
        self.close(b, at, bucket);
        self.counters.precharges += 1;
        // A dirty NVM row is written into the array at precharge: tWR.
        let extra = if self.nvm && dirty { self.t.wr } else { 0 };
        let bank = &mut self.banks[b];
        bank.next_act = bank.next_act.max(at + self.t.rp + extra);
    }

    pub(super) fn activate(&mut self, b: usize, row: u32, at: u64, bucket: Bucket) {
        let t = self.t;
        let g = self.group(b);
        let rank = b / self.geometry.banks as usize;
        let r = &mut self.ranks[rank];
        r.acts[r.act_i] = Some(at);
        r.act_i = (r.act_i + 1) % 4;
        r.last_act = Some(at);
        r.group_act[g] = Some(at);
        if r.open_banks == 0 {
            r.open_since = at;
        }
        r.open_banks += 1;
        let bank = &mut self.banks[b];
        bank.open = row;
        bank.dirty = 0;
        bank.hits = 0;
        bank.next_pre = at + t.ras;
        bank.col_ready = at + t.rcd;
        self.counters.activates += 1;
        self.energy
            .book(bucket, self.cost.activate, |e| &mut e.activate);
    }

    /// Issues a read or write burst on an open row at `at` (already legal); returns
    /// when its data burst ends.
    pub(super) fn column(
        &mut self,
        ch: usize,
        b: usize,
        write: bool,
        line: u32,
        at: u64,
        bucket: Bucket,
    ) -> u64 {
        let t = self.t;
        let g = self.group(b);
        let rank = b / self.geometry.banks as usize;
        let done = if write { at + t.cwd } else { at + t.cl } + t.burst;
        let c = &mut self.chans[ch];
        c.bus_free = done;
        let r = &mut self.ranks[rank];
        let bank = &mut self.banks[b];
        if write {
            c.next_wr = c.next_wr.max(at + t.ccd_s);
            c.next_rd = c.next_rd.max(done + t.wtr_s);
            r.group_wr[g] = r.group_wr[g].max(at + t.ccd_l);
            r.group_rd[g] = r.group_rd[g].max(done + t.wtr_l);
            // NVM writes reach the array when the row closes (timed at precharge).
            let recovery = if self.nvm { 0 } else { t.wr };
            bank.next_pre = bank.next_pre.max(done + recovery);
            let per_bit = (self.lines_per_row / 64).max(1);
            bank.dirty |= 1u64 << ((line / per_bit) % 64);
            self.energy
                .book(bucket, self.cost.write, |e| &mut e.rb_write);
        } else {
            c.next_rd = c.next_rd.max(at + t.ccd_s);
            c.next_wr = c.next_wr.max(at + t.rtw);
            r.group_rd[g] = r.group_rd[g].max(at + t.ccd_l);
            bank.next_pre = bank.next_pre.max(at + t.rtp);
            self.energy.book(bucket, self.cost.read, |e| &mut e.rb_read);
        }
        if self.cost.link_per_burst > 0.0 {
            self.energy
                .book(bucket, self.cost.link_per_burst, |e| &mut e.link);
        }
        if bucket == Bucket::Migration {
            self.counters.migration_bursts += 1;
        }
        done
    }

    /// One all-bank refresh of `rank` (on channel `ch`): a precharge of every open bank
    /// once legal, then the refresh; nothing else issues on the channel meanwhile.
    /// Refreshes long past with the rank idle are booked without being timed.
    pub(super) fn refresh(&mut self, ch: usize, rank: usize, limit: u64) {
        let t = self.t;
        let banks = self.geometry.banks as usize;
        let first = rank * banks;
        let now = self.chans[ch].now;
        let due = self.ranks[rank].next_ref;
        let mut at = now.max(due).max(self.ranks[rank].ref_until);
        let any_open = (first..first + banks).any(|b| self.banks[b].open != CLOSED);
        if any_open {
            for b in first..first + banks {
                if self.banks[b].open != CLOSED {
                    at = at.max(self.banks[b].next_pre);
                }
            }
            for b in first..first + banks {
                if self.banks[b].open != CLOSED {
                    self.close(b, at, Bucket::Demand);
                }
            }
            self.counters.precharges += 1;
            at += t.rp;
        }
        for b in first..first + banks {
            at = at.max(self.banks[b].next_act);
        }
        let until = at + t.rfc;
        for b in first..first + banks {
            self.banks[b].next_act = self.banks[b].next_act.max(until);
        }
        // Requests whose row just closed need a new activate.
        let c = &mut self.chans[ch];
        c.lose_activations(|r| r.rank as usize == rank);
        c.now = c.now.max(at + t.ck);
        let r = &mut self.ranks[rank];
        r.ref_until = until;
        r.next_ref += t.refi;
        // A long idle stretch: refreshes that ended before `limit` delay nothing.
        if c.reads.is_empty() && c.writes.is_empty() && c.active.is_empty() && limit != u64::MAX {
            let behind = limit.saturating_sub(r.next_ref) / t.refi;
            if behind > 1 {
                r.next_ref += (behind - 1) * t.refi;
                self.counters.refreshes += behind - 1;
                self.energy.refresh += (behind - 1) as f64 * self.cost.refresh;
            }
        }
        self.counters.refreshes += 1;
        self.energy.refresh += self.cost.refresh;
    }
}

//! The scheduler: which command goes next on a channel (FR-FCFS over the commands
//! whose timing constraints are met, by `ReadyOrder`), the jump to its time, and its
//! issue.

use super::*;

impl Device {
    /// One scheduling step: issues the next command due before `limit` on the channel
    /// that is furthest behind, or reports that none is.
    pub(crate) fn step(&mut self, limit: u64) -> Step {
        if self.chans.len() == 1 {
            return if self.chans[0].now < limit {
                self.step_channel(0, limit).unwrap_or(Step::Idle)
            } else {
                Step::Idle
            };
        }
        let mut order: Vec<usize> = (0..self.chans.len()).collect();
        order.sort_by_key(|&c| self.chans[c].now);
        for ch in order {
            if self.chans[ch].now >= limit {
                continue;
            }
            if let Some(s) = self.step_channel(ch, limit) {
                return s;
            }
        }
        Step::Idle
    }

    fn step_channel(&mut self, ch: usize, limit: u64) -> Option<Step> {
        let c = &self.chans[ch];
        let busy = !(c.reads.is_empty() && c.writes.is_empty() && c.active.is_empty());
        // Refresh: the earliest due rank of the channel. With nothing queued and no
        // bound on time, refresh waits until there is work (`finish` books the rest).
        let ranks = self.geometry.ranks as usize;
        let (ref_rank, ref_due) = (ch * ranks..(ch + 1) * ranks)
            .map(|r| (r, self.ranks[r].next_ref))
            .min_by_key(|&(_, d)| d)
            .expect("at least one rank");
        let mut cand = if busy { self.best(ch, None) } else { None };
        if cand.is_none() && busy && limit == u64::MAX {
            // Writes held back while idle: nothing else will come, so serve them.
            let other = !self.chans[ch].write_mode;
            cand = self.best(ch, Some(other));
        }
        let cand_at = cand.map_or(u64::MAX, |(_, _, at)| at);
        let ref_at = ref_due.max(self.chans[ch].now);
        if self.refreshes && ref_at <= cand_at && ref_at < limit && (busy || limit != u64::MAX) {
            self.refresh(ch, ref_rank, limit);
            return Some(Step::Command);
        }
        let Some((qi, cmd, at)) = cand else {
            // Idle until the limit.
            if limit != u64::MAX {
                self.chans[ch].now = self.chans[ch].now.max(limit);
            }
            return None;
        };
        if at >= limit {
            self.chans[ch].now = self.chans[ch].now.max(limit);
            return None;
        }
        Some(self.issue(ch, qi, cmd, at))
    }

    /// The best command on channel `ch`: (which list and where, command, time). The
    /// lists are 0 waiting reads, 1 waiting writes, 2 active requests.
    fn best(&mut self, ch: usize, force_mode: Option<bool>) -> Option<(Pick, Cmd, u64)> {
        let c = &mut self.chans[ch];
        let (reads, writes) = (c.reads.len(), c.writes.len());
        if !c.write_mode {
            if writes >= self.ctrl.drain_high || reads == 0 {
                c.write_mode = true;
            }
        } else if writes <= self.ctrl.drain_low && reads > 0 {
            c.write_mode = false;
        }
        let write_mode = force_mode.unwrap_or(c.write_mode);
        let c = &self.chans[ch];
        let t = self.t;
        let now = c.now;
        let waiting = if write_mode { &c.writes } else { &c.reads };
        let list = u8::from(write_mode);
        let mut pinned = std::mem::take(&mut self.pinned);
        let rd_ready = now.max(c.next_rd).max(c.bus_free.saturating_sub(t.cl));
        let wr_ready = now.max(c.next_wr).max(c.bus_free.saturating_sub(t.cwd));
        // (time, class, age) → smaller is better. The class ranks commands ready at the
        // same clock: activated requests first, and with `RowHitsFirst` every column
        // command before any row command.
        let hits_first = self.ctrl.ready_order == ReadyOrder::RowHitsFirst;
        let mut best: Option<(u64, u8, u64, Pick, Cmd)> = None;
        let mut consider = |at: u64, age: u64, pick: Pick, cmd: Cmd| {
            let first = pick.0 == 2 || (hits_first && cmd == Cmd::Col);
            let class = u8::from(!first);
            if best.is_none_or(|(a, k, g, _, _)| (at, class, age) < (a, k, g)) {
                best = Some((at, class, age, pick, cmd));
            }
        };
        let col_ready = |r: &Req| {
            let b = r.bank as usize;
            let rank = &self.ranks[r.rank as usize];
            let g = self.group(b);
            if r.write {
                wr_ready.max(rank.group_wr[g])
            } else {
                rd_ready.max(rank.group_rd[g])
            }
            .max(self.banks[b].col_ready)
        };
        // Banks with an activated request may not close; their column commands first.
        for (i, r) in c.active.iter().enumerate() {
            pinned[r.bank as usize] = true;
            consider(col_ready(r), r.id, (2, 0, i), Cmd::Col);
        }
        // Per bank, the oldest waiting hit and the oldest waiting miss: every other
        // waiting request of the bank needs the same command at the same time, and is
        // younger.
        for (local, q) in waiting.banks().iter().enumerate() {
            if q.is_empty() {
                continue;
            }
            let b = c.first_bank + local;
            let bank = &self.banks[b];
            let (mut hit, mut miss) = (None, None);
            for (i, r) in q.iter().enumerate() {
                if r.row == bank.open {
                    hit.get_or_insert(i);
                } else {
                    miss.get_or_insert(i);
                }
                if hit.is_some() && miss.is_some() {
                    break;
                }
            }
            if let Some(i) = hit {
                consider(col_ready(&q[i]), q[i].id, (list, local, i), Cmd::Col);
            }
            let Some(i) = miss else { continue };
            let (age, pick) = (q[i].id, (list, local, i));
            if bank.open == CLOSED {
                consider(self.act_ready(b, now), age, pick, Cmd::Act);
            } else if pinned[b] || (hit.is_some() && bank.hits < self.ctrl.row_hit_cap) {
                // Not closing a row an activated request waits on, nor (up to the
                // cap, against starvation) one that waiting requests still hit.
            } else if self.nvm && bank.dirty == 0 {
                // A clean NVM row closes without a precharge.
                let at = self.act_ready(b, now).max(bank.next_pre);
                consider(at, age, pick, Cmd::Act);
            } else {
                consider(now.max(bank.next_pre), age, pick, Cmd::Pre);
            }
        }
        for r in &c.active {
            pinned[r.bank as usize] = false;
        }
        self.pinned = pinned;
        best.map(|(at, _, _, at_list, cmd)| (at_list, cmd, at))
    }

    /// The earliest legal activate in bank `b` at or after `now`.
    #[inline]
    pub(super) fn act_ready(&self, b: usize, now: u64) -> u64 {
        let t = self.t;
        let rank = &self.ranks[b / self.geometry.banks as usize];
        let g = self.group(b);
        let mut at = now.max(self.banks[b].next_act).max(rank.ref_until);
        if let Some(last) = rank.last_act {
            at = at.max(last + t.rrd_s);
        }
        if let Some(oldest) = rank.acts[rank.act_i] {
            at = at.max(oldest + t.faw);
        }
        if let Some(last) = rank.group_act[g] {
            at = at.max(last + t.rrd_l);
        }
        at
    }

    fn issue(&mut self, ch: usize, at_list: Pick, cmd: Cmd, at: u64) -> Step {
        self.chans[ch].now = at + self.t.ck;
        let c = &mut self.chans[ch];
        let (list, local, i) = at_list;
        let r = match list {
            2 => &mut c.active[i],
            l => c.queue(l == 1).get_mut(local, i),
        };
        r.first_cmd = r.first_cmd.min(at);
        let r = *r;
        let b = r.bank as usize;
        match cmd {
            Cmd::Pre => {
                self.precharge(b, at, Bucket::Demand);
                Step::Command
            }
            Cmd::Act => {
                if self.banks[b].open != CLOSED {
                    // A clean NVM row, closed by this activate.
                    self.close(b, at, Bucket::Demand);
                }
                self.activate(b, r.row, at, Bucket::Demand);
                let c = &mut self.chans[ch];
                let mut req = c.queue(r.write).remove(local, i);
                req.activated = true;
                c.active.push(req);
                Step::Command
            }
            Cmd::Col => {
                let c = &mut self.chans[ch];
                let req = if list == 2 {
                    c.active.swap_remove(i)
                } else {
                    c.queue(r.write).remove(local, i)
                };
                let row_hit = !req.activated;
                let done = self.column(ch, b, req.write, req.line, at, Bucket::Demand);
                if req.write {
                    self.counters.writes += 1;
                    self.counters.write_row_hits += u64::from(row_hit);
                } else {
                    self.counters.reads += 1;
                    self.counters.read_row_hits += u64::from(row_hit);
                }
                self.banks[b].hits += 1;
                Step::Done(Completion {
                    first_cmd: req.first_cmd.min(at),
                    req,
                    done: done + 2 * self.t.link,
                    row_hit,
                })
            }
        }
    }
}

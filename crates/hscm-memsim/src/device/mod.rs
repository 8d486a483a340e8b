//! One memory device (DRAM or NVM) and its controller: per channel a read and a write
//! queue, per bank a state machine (closed, or a row open), and a command scheduler
//! that issues one command per clock per channel, choosing among the commands whose
//! timing constraints are met across all banks. Times are picoseconds.
//!
//! The scheduler is event-driven: instead of visiting every clock it computes, for
//! every queued request, the earliest time its next command (precharge, activate, or
//! the read or write itself) becomes legal, and jumps to the earliest. Among the
//! commands ready then it picks FR-FCFS: by default (Ramulator 2.0's rule) the
//! requests whose own activate has issued, then the oldest request, whatever its
//! command (`ReadyOrder`). That is the same choice a per-clock scheduler would make, because
//! nothing changes between two issued commands except arrivals and refresh, and both
//! bound the jump.

mod energy;
mod queue;
mod timing;
mod transfer;

use rustc_hash::FxHashMap as HashMap;

use hscm_model::{MemKind, MemProfile};
use serde::Serialize;

use crate::config::{ControllerConfig, Geometry, MapField, ReadyOrder};
pub use energy::DynamicEnergy;
pub(crate) use energy::{Bucket, CommandEnergy};
use queue::BankQueues;
pub(crate) use timing::Tps;

const CLOSED: u32 = u32::MAX;

/// Per-device counters.
#[derive(Debug, Clone, Copy, Default, Serialize)]
pub struct DeviceCounters {
    pub reads: u64,
    pub writes: u64,
    pub read_row_hits: u64,
    pub write_row_hits: u64,
    pub activates: u64,
    pub precharges: u64,
    pub refreshes: u64,
    pub row_writebacks: u64,
    pub lines_written_to_array: u64,
    pub migration_bursts: u64,
}

/// A demand request in a controller queue.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Req {
    pub id: u64,
    pub arrival: u64,
    pub frame: u32,
    /// Device-local slot (row-sized unit) and the 64 B line within it.
    pub slot: u32,
    pub line: u32,
    pub write: bool,
    /// Decoded from `slot` (the channel picks the queue, so it is not kept).
    rank: u16,
    bank: u16,
    row: u32,
    /// This request's own activate has issued: its row is open for it.
    activated: bool,
    first_cmd: u64,
}

impl Req {
    pub(crate) fn new(
        id: u64,
        arrival: u64,
        frame: u32,
        slot: u32,
        line: u32,
        write: bool,
    ) -> Self {
        Self {
            id,
            arrival,
            frame,
            slot,
            line,
            write,
            rank: 0,
            bank: 0,
            row: 0,
            activated: false,
            first_cmd: u64::MAX,
        }
    }
}

/// A request whose data burst has been scheduled.
pub(crate) struct Completion {
    pub req: Req,
    pub first_cmd: u64,
    pub done: u64,
    pub row_hit: bool,
}

/// What one scheduling step did.
pub(crate) enum Step {
    /// Nothing can issue before the limit.
    Idle,
    /// A row command or a refresh.
    Command,
    Done(Completion),
}

#[derive(Clone, Copy)]
struct Bank {
    open: u32,
    dirty: u64,
    next_act: u64,
    next_pre: u64,
    col_ready: u64,
    /// Column commands served from the open row since it opened.
    hits: u32,
}

#[derive(Clone, Default)]
struct Rank {
    /// The last four activates (tFAW window), oldest at `act_i`; None before four.
    acts: [Option<u64>; 4],
    act_i: usize,
    last_act: Option<u64>,
    /// Per bank group: last activate, and the earliest read and write (long tCCD and
    /// tWTR within the group).
    group_act: Vec<Option<u64>>,
    group_rd: Vec<u64>,
    group_wr: Vec<u64>,
    next_ref: u64,
    ref_until: u64,
    /// Standby accounting: banks open now, since when one was, and the total.
    open_banks: u32,
    open_since: u64,
    active_ps: u64,
}

#[derive(Clone, Default)]
struct Chan {
    /// The next clock a command may issue on this channel's command bus.
    now: u64,
    bus_free: u64,
    next_rd: u64,
    next_wr: u64,
    /// Requests waiting for their row, per bank, oldest first: what counts against
    /// the queue sizes.
    reads: BankQueues,
    writes: BankQueues,
    /// The channel's first bank (device-wide index); queues index banks from it.
    first_bank: usize,
    /// Requests whose own activate has issued, waiting for their column command (at
    /// most one per bank), as Ramulator's active buffer.
    active: Vec<Req>,
    write_mode: bool,
}

impl Chan {
    fn queue(&mut self, write: bool) -> &mut BankQueues {
        if write {
            &mut self.writes
        } else {
            &mut self.reads
        }
    }

    /// Puts a request back among the waiting ones, in age order.
    fn requeue(&mut self, mut req: Req) {
        req.activated = false;
        let local = req.bank as usize - self.first_bank;
        self.queue(req.write).insert(local, req);
    }

    /// Activated requests matching `lost` need a new activate.
    fn lose_activations(&mut self, lost: impl Fn(&Req) -> bool) {
        let mut i = 0;
        while i < self.active.len() {
            if lost(&self.active[i]) {
                let r = self.active.swap_remove(i);
                self.requeue(r);
            } else {
                i += 1;
            }
        }
    }
}

/// Where a candidate request sits: (list, bank within the channel, position); lists
/// are 0 waiting reads, 1 waiting writes, 2 active requests (bank unused).
type Pick = (u8, usize, usize);

/// A candidate command found by the scheduler.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Cmd {
    Pre,
    Act,
    Col,
}

pub(crate) struct Device {
    pub profile: MemProfile,
    pub t: Tps,
    pub bytes: u64,
    geometry: Geometry,
    ctrl: ControllerConfig,
    /// Divisors for slot → (channel, rank, bank) in LSB-first order.
    fields: Vec<(MapField, u32)>,
    banks: Vec<Bank>,
    ranks: Vec<Rank>,
    chans: Vec<Chan>,
    bank_groups: u32,
    nvm: bool,
    refreshes: bool,
    lines_per_row: u32,
    pub cost: CommandEnergy,
    pub energy: DynamicEnergy,
    pub counters: DeviceCounters,
    /// Array writes per row (slot), for endurance.
    pub row_writes: HashMap<u32, u32>,
    /// Per-bank scratch of one scheduling decision: whether an activated request
    /// waits on the bank.
    pinned: Vec<bool>,
}

impl Device {
    pub(crate) fn new(
        profile: MemProfile,
        bytes: u64,
        geometry: &Geometry,
        ctrl: &ControllerConfig,
    ) -> Self {
        let t = Tps::of(&profile);
        let n_ranks = (geometry.channels * geometry.ranks) as usize;
        let refreshes = profile.refreshes();
        let bank_groups = if geometry.banks % profile.bank_groups == 0 {
            profile.bank_groups
        } else {
            1
        };
        let ranks = (0..n_ranks)
            .map(|i| Rank {
                // Stagger ranks so they do not all refresh at once.
                next_ref: if refreshes {
                    t.refi * (i as u64 + 1) / n_ranks as u64
                } else {
                    u64::MAX
                },
                group_act: vec![None; bank_groups as usize],
                group_rd: vec![0; bank_groups as usize],
                group_wr: vec![0; bank_groups as usize],
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
        let n_banks = n_ranks * geometry.banks as usize;
        Self {
            cost: CommandEnergy::of(&profile, &t, geometry.row_bytes, bytes, n_ranks as u64),
            t,
            bytes,
            geometry: geometry.clone(),
            ctrl: *ctrl,
            fields,
            banks: vec![
                Bank {
                    open: CLOSED,
                    dirty: 0,
                    next_act: 0,
                    next_pre: 0,
                    col_ready: 0,
                    hits: 0,
                };
                n_banks
            ],
            ranks,
            chans: (0..geometry.channels as usize)
                .map(|ch| {
                    let banks = (geometry.ranks * geometry.banks) as usize;
                    Chan {
                        reads: BankQueues::new(banks),
                        writes: BankQueues::new(banks),
                        first_bank: ch * banks,
                        ..Chan::default()
                    }
                })
                .collect(),
            bank_groups,
            nvm: profile.kind == MemKind::Nvm,
            refreshes,
            lines_per_row,
            profile,
            energy: DynamicEnergy::default(),
            counters: DeviceCounters::default(),
            row_writes: HashMap::default(),
            pinned: vec![false; n_banks],
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

    #[inline]
    fn group(&self, bank: usize) -> usize {
        bank % self.geometry.banks as usize % self.bank_groups as usize
    }

    /// The channel a slot's requests queue on.
    pub(crate) fn channel_of(&self, slot: u32) -> usize {
        self.locate(slot).0
    }

    /// Whether the channel's queue for this kind of request is full.
    pub(crate) fn full(&self, chan: usize, write: bool) -> bool {
        let c = &self.chans[chan];
        if write {
            c.writes.len() >= self.ctrl.write_queue
        } else {
            c.reads.len() >= self.ctrl.read_queue
        }
    }

    /// The channel's next command clock: a request refused for a full queue is
    /// accepted no earlier.
    pub(crate) fn chan_now(&self, chan: usize) -> u64 {
        self.chans[chan].now
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.chans
            .iter()
            .all(|c| c.reads.is_empty() && c.writes.is_empty() && c.active.is_empty())
    }

    pub(crate) fn holds(&self, id: u64) -> bool {
        self.chans
            .iter()
            .any(|c| c.reads.iter().chain(&c.active).any(|r| r.id == id))
    }

    /// Queues a request, in age order.
    pub(crate) fn enqueue(&mut self, mut req: Req) {
        let (ch, rank, bank, row) = self.locate(req.slot);
        (req.rank, req.bank, req.row) = (rank as u16, bank as u16, row);
        self.chans[ch].requeue(req);
    }

    /// Removes and returns the queued requests of `frames` (they moved elsewhere).
    pub(crate) fn take_frames(&mut self, frames: &[u32]) -> Vec<Req> {
        let mut out = Vec::new();
        let mut moved = |r: &Req| {
            if frames.contains(&r.frame) {
                out.push(*r);
                false
            } else {
                true
            }
        };
        for c in &mut self.chans {
            c.reads.retain(&mut moved);
            c.writes.retain(&mut moved);
            c.active.retain(&mut moved);
        }
        out
    }

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
    fn act_ready(&self, b: usize, now: u64) -> u64 {
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

    /// Closes a bank's row now: booking the write-back of a dirty NVM row and the
    /// standby change. Timing is the caller's.
    fn close(&mut self, b: usize, at: u64, bucket: Bucket) {
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
    fn slot_of(&self, b: usize, row: u32) -> u32 {
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

    fn precharge(&mut self, b: usize, at: u64, bucket: Bucket) {
        let dirty = self.banks[b].dirty != 0;
        self.close(b, at, bucket);
        self.counters.precharges += 1;
        // A dirty NVM row is written into the array at precharge: tWR.
        let extra = if self.nvm && dirty { self.t.wr } else { 0 };
        let bank = &mut self.banks[b];
        bank.next_act = bank.next_act.max(at + self.t.rp + extra);
    }

    fn activate(&mut self, b: usize, row: u32, at: u64, bucket: Bucket) {
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
    fn column(
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
    fn refresh(&mut self, ch: usize, rank: usize, limit: u64) {
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

    /// Ends the run at `end`: books the refreshes due until then, closes every row (so
    /// dirty NVM data is costed) and returns the standby energy in picojoules.
    pub(crate) fn finish(&mut self, end: u64) -> f64 {
        if self.refreshes {
            for r in &mut self.ranks {
                if r.next_ref < end {
                    let n = (end - r.next_ref) / self.t.refi + 1;
                    r.next_ref += n * self.t.refi;
                    self.counters.refreshes += n;
                    self.energy.refresh += n as f64 * self.cost.refresh;
                }
            }
        }
        for b in 0..self.banks.len() {
            let at = end.max(self.ranks[b / self.geometry.banks as usize].open_since);
            self.close(b, at, Bucket::Demand);
        }
        // mW × ps = 1e-3 J/s × 1e-12 s = 1e-3 pJ.
        self.ranks
            .iter()
            .map(|r| {
                let active = r.active_ps.min(end) as f64;
                let idle = end.saturating_sub(r.active_ps) as f64;
                (active * self.cost.active_standby_mw + idle * self.cost.precharge_standby_mw)
                    * 1e-3
            })
            .sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hscm_model::MemPreset;

    /// Five reads to five closed banks at once: activates tRRD apart, the fifth held
    /// until tFAW after the first (DDR3-1600K x8: tRRD 5, tFAW 24, tRCD = tCL = 11,
    /// burst 4 clocks).
    #[test]
    fn activates_keep_trrd_and_the_four_activate_window_from_the_first_one() {
        let mut p = MemPreset::Ddr3_1600K.profile();
        p.timing.t_rfc = 0.0;
        let g = Geometry {
            row_bytes: p.row_bytes,
            ..Geometry::default()
        };
        let mut d = Device::new(p, 1 << 30, &g, &ControllerConfig::default());
        for bank in 0..5u32 {
            d.enqueue(Req::new(u64::from(bank), 0, 0, bank, 0, false));
        }
        let mut done = Vec::new();
        while !d.is_empty() {
            if let Step::Done(c) = d.step(u64::MAX) {
                done.push((c.req.slot, c.done / d.t.ck));
            }
        }
        done.sort();
        let act_to_data = 11 + 11 + 4;
        let want: Vec<(u32, u64)> = [0, 5, 10, 15, 24]
            .iter()
            .enumerate()
            .map(|(b, act)| (b as u32, act + act_to_data))
            .collect();
        assert_eq!(done, want);
    }
}

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

mod commands;
mod energy;
mod queue;
mod schedule;
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

//! The hybrid memory controller: per-device read and write queues scheduled FR-FCFS
//! with write drain, first-touch page placement, the remap table, and migration
//! (WARM or RaPP) with its traffic simulated on both devices.

use rustc_hash::FxHashMap as HashMap;

use hscm_policy::{Clock, MemoryAccess, MigrationDecision, MigrationPolicy, Rapp, Warm};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

use crate::config::{Placement, PolicyKind, SimConfig};
use crate::device::{Completion, Device, Req, Step};

/// Marks a slot that holds no data in `frame_at`.
const EMPTY: u32 = u32::MAX;

/// Latency of one demand request, for the statistics.
pub(crate) struct Done {
    pub write: bool,
    pub arrival: u64,
    pub first_cmd: u64,
    pub done: u64,
}

pub(crate) struct Memory {
    pub devs: Vec<Device>,
    /// Slots of device 0; slots at or above it belong to device 1.
    dev0_slots: u32,
    total_slots: u32,
    hybrid: bool,
    row_bytes: u64,
    burst_bytes: u64,
    // Placement.
    placement: Placement,
    pages: HashMap<u64, u32>,
    /// Direct-mapped memo of recent page → frame lookups (a mapping never changes once
    /// made, so entries never go stale).
    page_memo: Vec<(u64, u32)>,
    allocated: Vec<u64>,
    next_frame: u32,
    rng: SmallRng,
    pub aliased_pages: u64,
    /// Pages placed by identity without the map (within capacity).
    identity_pages: u64,
    // Remap: only moved frames appear.
    slot_of: HashMap<u32, u32>,
    frame_at: HashMap<u32, u32>,
    /// The migration policy (WARM, RaPP), or none.
    policy: Option<Box<dyn MigrationPolicy<u32>>>,
    clock: Clock,
    free_cursor: u32,
    next_id: u64,
    waiting: Option<u64>,
    waited: Option<u64>,
    pub last_done: u64,
    pub migrations: u64,
    pub restores: u64,
    /// Completed demand requests not yet collected by the statistics.
    pub done: Vec<Done>,
}

fn bit(bits: &[u64], i: u32) -> bool {
    bits[(i / 64) as usize] & (1 << (i % 64)) != 0
}

fn holder(frame_at: &HashMap<u32, u32>, allocated: &[u64], slot: u32) -> Option<u32> {
    match frame_at.get(&slot) {
        Some(&EMPTY) => None,
        Some(&f) => Some(f),
        None => bit(allocated, slot).then_some(slot),
    }
}

impl Memory {
    pub(crate) fn new(cfg: &SimConfig, policy: PolicyKind) -> Self {
        let total = cfg.dram_bytes + cfg.pcm_bytes;
        let g = &cfg.geometry;
        let c = &cfg.controller;
        let devs = match policy {
            PolicyKind::DramOnly => vec![Device::new(cfg.dram, total, g, c)],
            PolicyKind::PcmOnly => vec![Device::new(cfg.pcm, total, g, c)],
            _ => vec![
                Device::new(cfg.dram, cfg.dram_bytes, g, c),
                Device::new(cfg.pcm, cfg.pcm_bytes, g, c),
            ],
        };
        let hybrid = devs.len() == 2;
        let dev0_slots = devs[0].slots() as u32;
        let total_slots = (total / g.row_bytes) as u32;
        let policy_state: Option<Box<dyn MigrationPolicy<u32>>> = match policy {
            PolicyKind::Warm => Some(Box::new(Warm::new(cfg.warm))),
            PolicyKind::Rapp => Some(Box::new(Rapp::new(cfg.rapp))),
            _ => None,
        };
        Self {
            dev0_slots,
            total_slots,
            hybrid,
            row_bytes: g.row_bytes,
            burst_bytes: u64::from(cfg.dram.burst_bytes),
            placement: cfg.placement,
            pages: HashMap::default(),
            page_memo: vec![(u64::MAX, 0); 256],
            allocated: vec![0; (total_slots as usize).div_ceil(64)],
            next_frame: 0,
            rng: SmallRng::seed_from_u64(cfg.seed),
            aliased_pages: 0,
            identity_pages: 0,
            slot_of: HashMap::default(),
            frame_at: HashMap::default(),
            policy: policy_state,
            clock: Clock::new(if hybrid { dev0_slots as usize } else { 0 }),
            free_cursor: 0,
            next_id: 0,
            waiting: None,
            waited: None,
            last_done: 0,
            migrations: 0,
            restores: 0,
            done: Vec::new(),
            devs,
        }
    }

    pub(crate) fn warm_resets(&self) -> u64 {
        self.policy.as_ref().map_or(0, |p| p.resets())
    }

    pub(crate) fn pages_touched(&self) -> u64 {
        self.pages.len() as u64 + self.identity_pages
    }

    /// Frame of a page, placing it on first touch.
    fn frame_of_page(&mut self, page: u64) -> u32 {
        if self.placement == Placement::Identity && page < u64::from(self.total_slots) {
            // Physical addresses within capacity: the frame is the page, no lookup.
            let f = page as u32;
            let (word, b) = ((f / 64) as usize, 1u64 << (f % 64));
            if self.allocated[word] & b == 0 {
                self.allocated[word] |= b;
                self.identity_pages += 1;
            }
            return f;
        }
        let memo = (page % self.page_memo.len() as u64) as usize;
        if self.page_memo[memo].0 == page {
            return self.page_memo[memo].1;
        }
        if let Some(&f) = self.pages.get(&page) {
            self.page_memo[memo] = (page, f);
            return f;
        }
        let n = self.total_slots;
        let f = match self.placement {
            Placement::Identity => (page % u64::from(n)) as u32,
            Placement::DramFirst | Placement::Random => {
                let start = if self.placement == Placement::Random {
                    self.rng.gen_range(0..n)
                } else {
                    self.next_frame
                };
                let mut f = start;
                loop {
                    // Free: never given to a page, and not holding a migrated frame.
                    if !bit(&self.allocated, f) && !self.frame_at.contains_key(&f) {
                        break;
                    }
                    f = if f + 1 == n { 0 } else { f + 1 };
                    if f == start {
                        // Footprint larger than memory: share frames.
                        self.aliased_pages += 1;
                        break;
                    }
                }
                self.next_frame = if f + 1 == n { 0 } else { f + 1 };
                f
            }
        };
        self.allocated[(f / 64) as usize] |= 1 << (f % 64);
        self.pages.insert(page, f);
        f
    }

    fn locate(&self, frame: u32) -> u32 {
        if self.slot_of.is_empty() {
            return frame;
        }
        self.slot_of.get(&frame).copied().unwrap_or(frame)
    }

    fn dev_of_slot(&self, slot: u32) -> (usize, u32) {
        if slot < self.dev0_slots {
            (0, slot)
        } else {
            (1, slot - self.dev0_slots)
        }
    }

    /// Queues a request at time `t`; returns the (possibly later) time at which the
    /// core could hand it over, and its id.
    pub(crate) fn submit(&mut self, t: u64, addr: u64, write: bool) -> (u64, u64) {
        let frame = self.frame_of_page(addr / self.row_bytes);
        let line = ((addr % self.row_bytes) / self.burst_bytes) as u32;
        let mut t = t;
        // Scheduling earlier requests can migrate this very frame: settle first, then
        // read where it lives.
        let (local, d) = loop {
            let (d, local) = self.dev_of_slot(self.locate(frame));
            self.advance(d, t);
            let ch = self.devs[d].channel_of(local);
            // A full queue waits for the controller to take a request out (if nothing
            // could ever issue, the request joins the queue over its size instead of
            // waiting for ever).
            if self.devs[d].full(ch, write) && self.step(d, u64::MAX) {
                t = t.max(self.devs[d].chan_now(ch));
                continue;
            }
            let (d2, local) = self.dev_of_slot(self.locate(frame));
            if d2 == d {
                break (local, d);
            }
        };
        let id = self.next_id;
        self.next_id += 1;
        self.devs[d].enqueue(Req::new(id, t, frame, local, line, write));
        (t, id)
    }

    /// Runs the controllers until read `id` completes; returns its completion time.
    pub(crate) fn wait(&mut self, id: u64) -> u64 {
        self.waiting = Some(id);
        self.waited = None;
        while self.waited.is_none() {
            let Some(d) = (0..self.devs.len()).find(|&d| self.devs[d].holds(id)) else {
                debug_assert!(false, "a read being waited for is queued somewhere");
                break;
            };
            if !self.step(d, u64::MAX) {
                debug_assert!(false, "a queued read can always be scheduled");
                break;
            }
        }
        self.waiting = None;
        self.waited.take().unwrap_or(self.last_done)
    }

    /// Issues everything device `d` can issue before `t`.
    fn advance(&mut self, d: usize, t: u64) {
        while self.step(d, t) {}
    }

    /// One command on device `d` before `limit`; false when none can issue.
    fn step(&mut self, d: usize, limit: u64) -> bool {
        match self.devs[d].step(limit) {
            Step::Idle => false,
            Step::Command => true,
            Step::Done(c) => {
                self.complete(d, c);
                true
            }
        }
    }

    /// Empties every queue; returns the last completion time.
    pub(crate) fn drain(&mut self) -> u64 {
        // A migration triggered while draining may re-queue requests on the other
        // device: go round until every device is empty.
        while let Some(d) = (0..self.devs.len()).find(|&d| !self.devs[d].is_empty()) {
            while self.step(d, u64::MAX) {}
        }
        self.last_done
    }

    /// A demand request's data burst is scheduled: statistics, the waiting core, and
    /// the policy.
    fn complete(&mut self, d: usize, c: Completion) {
        let req = c.req;
        debug_assert_eq!(
            self.dev_of_slot(self.locate(req.frame)),
            (d, req.slot),
            "requests are re-routed when their frame moves"
        );
        self.last_done = self.last_done.max(c.done);
        self.done.push(Done {
            write: req.write,
            arrival: req.arrival,
            first_cmd: c.first_cmd,
            done: c.done,
        });
        if !req.write && self.waiting == Some(req.id) {
            self.waited = Some(c.done);
        }
        self.after_access(d, req.slot, req.frame, req.write, c.row_hit, c.done);
    }

    /// Policy hooks: ranking, WARM counting, CLOCK reference bits, migrations.
    fn after_access(
        &mut self,
        d: usize,
        local: u32,
        frame: u32,
        write: bool,
        row_hit: bool,
        done: u64,
    ) {
        if !self.hybrid {
            return;
        }
        let in_slow = d == 1;
        if !in_slow {
            self.clock.touch(local as usize);
        }
        let Some(policy) = &mut self.policy else {
            return;
        };
        let access = MemoryAccess {
            unit: frame,
            in_slow,
            is_write: write,
            row_hit,
        };
        match policy.observe(access) {
            MigrationDecision::Stay => {}
            MigrationDecision::Migrate(f) => self.migrate(f, done),
            MigrationDecision::ResetThenMigrate { restore, migrate } => {
                let mut t = done;
                for f in restore {
                    t = self.restore_home(f, t);
                }
                self.migrate(migrate, t);
            }
        }
    }

    fn dram_victim(&mut self, promoting: u32) -> u32 {
        let n = self.dev0_slots;
        for _ in 0..64 {
            let s = self.free_cursor;
            self.free_cursor = if s + 1 == n { 0 } else { s + 1 };
            if holder(&self.frame_at, &self.allocated, s).is_none() {
                return s;
            }
        }
        let (frame_at, allocated) = (&self.frame_at, &self.allocated);
        self.clock
            .victim(|s| holder(frame_at, allocated, s as u32) != Some(promoting))
            .map(|s| s as u32)
            .unwrap_or(self.free_cursor)
    }

    /// Exchanges the contents of two slots, costing the traffic on both devices.
    /// Returns when the exchange completes.
    fn exchange(&mut self, a: u32, b: u32, at: u64) -> u64 {
        let fa = holder(&self.frame_at, &self.allocated, a);
        let fb = holder(&self.frame_at, &self.allocated, b);
        let (da, la) = self.dev_of_slot(a);
        let (db, lb) = self.dev_of_slot(b);
        let mut reads_done = at;
        if fa.is_some() {
            reads_done = reads_done.max(self.devs[da].row_transfer(la, false, at));
        }
        if fb.is_some() {
            reads_done = reads_done.max(self.devs[db].row_transfer(lb, false, at));
        }
        let mut end = reads_done;
        if fa.is_some() {
            end = end.max(self.devs[db].row_transfer(lb, true, reads_done));
        }
        if fb.is_some() {
            end = end.max(self.devs[da].row_transfer(la, true, reads_done));
        }
        for (slot, frame) in [(a, fb), (b, fa)] {
            match frame {
                Some(f) if f == slot => {
                    self.frame_at.remove(&slot);
                    self.slot_of.remove(&f);
                }
                Some(f) => {
                    self.frame_at.insert(slot, f);
                    self.slot_of.insert(f, slot);
                }
                // An unallocated slot without an entry is empty already; an allocated
                // one needs the marker (its own frame lives elsewhere).
                None if bit(&self.allocated, slot) => {
                    self.frame_at.insert(slot, EMPTY);
                }
                None => {
                    self.frame_at.remove(&slot);
                }
            }
        }
        #[cfg(debug_assertions)]
        self.check_remap();
        self.last_done = self.last_done.max(end);
        let moved: Vec<u32> = [fa, fb].into_iter().flatten().collect();
        self.reroute(&moved);
        end
    }

    /// The remap invariants: the two maps mirror each other and no slot holds two
    /// frames.
    #[cfg(debug_assertions)]
    pub(crate) fn check_remap(&self) {
        for (&f, &s) in &self.slot_of {
            assert_ne!(f, s, "a frame at home has no entry");
            assert_eq!(self.frame_at.get(&s), Some(&f), "slot_of[{f}] = {s}");
        }
        for (&s, &f) in &self.frame_at {
            if f == EMPTY {
                assert!(
                    bit(&self.allocated, s),
                    "empty marker on unallocated slot {s}"
                );
                assert!(
                    self.slot_of.contains_key(&s),
                    "slot {s} empty but its frame is home"
                );
            } else {
                assert_eq!(self.slot_of.get(&f), Some(&s), "frame_at[{s}] = {f}");
            }
            if bit(&self.allocated, s) && f != EMPTY {
                assert!(
                    self.slot_of.contains_key(&s),
                    "slot {s} holds {f} and its own frame"
                );
            }
        }
    }

    /// Moves `frame` (now in the slow device) into DRAM.
    fn migrate(&mut self, frame: u32, at: u64) {
        let from = self.locate(frame);
        if from < self.dev0_slots {
            return;
        }
        let victim = self.dram_victim(frame);
        let displaced = holder(&self.frame_at, &self.allocated, victim);
        self.exchange(from, victim, at);
        self.migrations += 1;
        if let (Some(x), Some(p)) = (displaced, &mut self.policy) {
            p.forget(&x);
        }
    }

    /// Sends a migrated frame back to its home slot (a WARM remap-table reset).
    fn restore_home(&mut self, frame: u32, at: u64) -> u64 {
        let slot = self.locate(frame);
        if slot == frame {
            return at;
        }
        self.restores += 1;
        self.exchange(slot, frame, at)
    }

    /// Moves queued requests of frames that moved to their new slots.
    fn reroute(&mut self, frames: &[u32]) {
        if frames.is_empty() {
            return;
        }
        for d in 0..self.devs.len() {
            for mut r in self.devs[d].take_frames(frames) {
                let (nd, local) = self.dev_of_slot(self.locate(r.frame));
                r.slot = local;
                self.devs[nd].enqueue(r);
            }
        }
    }
}

//! Virtual-memory paging: a TLB (set-associative, LRU), a page table, physical memory
//! with second-chance (CLOCK) replacement, and the seed paper's eq. 4-6:
//!
//! T_TOTAL = T_ADDR + T_DATA, T_ADDR = t_e + R_T·t_r, T_DATA = t_r + R_F·T_PF,
//!
//! with R_T the TLB miss rate, R_F the page-fault rate, t_e a TLB access, t_r a memory
//! access and T_PF a page fault: storage `latency_x` times slower than memory per 64 B
//! moved, so a fault's transfer grows with the page size (plus a seek for disks).

use hscm_trace::{Access, MemRef, TraceError};
use rustc_hash::FxHashMap;
use serde::Serialize;

use crate::VmError;

/// Semantics that change the counts are explicit options (defaults in `Default`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PagingConfig {
    pub page_sizes: Vec<u64>,
    pub tlb_entries: usize,
    /// Ways per TLB set; 0 = fully associative.
    pub tlb_ways: usize,
    pub memory_bytes: u64,
    pub latency_x: Vec<f64>,
    pub t_e_ns: f64,
    pub t_r_ns: f64,
    /// Added to every fault (a disk's seek and rotation); 0 for SCM.
    pub seek_ns: f64,
    /// A newly loaded page starts with its reference bit set.
    pub ref_on_load: bool,
    /// A TLB hit sets the page's reference bit (hardware does: the access happens).
    pub tlb_hit_sets_ref: bool,
    /// Evicting a page removes its TLB entry (a TLB shootdown).
    pub evict_drops_tlb: bool,
    /// Ignore instruction fetches.
    pub data_only: bool,
}

impl Default for PagingConfig {
    fn default() -> Self {
        Self {
            page_sizes: (9..=16).map(|s| 1u64 << s).collect(),
            tlb_entries: 64,
            tlb_ways: 4,
            memory_bytes: 4 << 20,
            latency_x: vec![1.0, 10.0, 100.0, 1000.0],
            t_e_ns: 1.0,
            t_r_ns: 100.0,
            seek_ns: 0.0,
            ref_on_load: true,
            tlb_hit_sets_ref: true,
            evict_drops_tlb: true,
            data_only: false,
        }
    }
}

impl PagingConfig {
    pub fn validate(&self) -> Result<(), VmError> {
        let err = |m: String| Err(VmError::Config(m));
        if self.page_sizes.is_empty()
            || self
                .page_sizes
                .iter()
                .any(|p| !p.is_power_of_two() || *p < 64)
        {
            return err("page sizes must be powers of two of at least 64 bytes".into());
        }
        if self.tlb_entries == 0 {
            return err("the TLB needs at least one entry".into());
        }
        if self.tlb_ways != 0 && self.tlb_entries % self.tlb_ways != 0 {
            return err(format!(
                "{} TLB entries do not split into {}-way sets",
                self.tlb_entries, self.tlb_ways
            ));
        }
        if self.latency_x.iter().any(|x| x.is_nan() || *x <= 0.0) {
            return err("storage latencies must be positive multiples of memory latency".into());
        }
        Ok(())
    }
}

/// Counts for one page size.
#[derive(Debug, Clone, Serialize)]
pub struct PageSizeCounts {
    pub page_size: u64,
    pub references: u64,
    pub tlb_hits: u64,
    pub faults: u64,
    pub frames: u64,
}

/// One (page size, storage latency) point. Field names are a stable contract.
#[derive(Debug, Clone, Serialize)]
pub struct PagingRow {
    pub page_size: u64,
    pub latency_x: f64,
    pub tlb_hit_rate: f64,
    pub fault_rate: f64,
    pub t_addr_ns: f64,
    pub t_data_ns: f64,
    pub t_total_ns: f64,
    pub references: u64,
    pub faults: u64,
}

const EMPTY: u64 = u64::MAX;

struct Sim<'a> {
    cfg: &'a PagingConfig,
    page_shift: u32,
    sets: usize,
    ways: usize,
    /// (vpn, frame, last use) per TLB slot, `ways` per set.
    tlb: Vec<(u64, u32, u64)>,
    clock_time: u64,
    frame_vpn: Vec<u64>,
    referenced: Vec<bool>,
    resident: FxHashMap<u64, u32>,
    used_frames: usize,
    hand: usize,
    counts: PageSizeCounts,
}

impl<'a> Sim<'a> {
    fn new(cfg: &'a PagingConfig, page_size: u64) -> Self {
        let ways = if cfg.tlb_ways == 0 {
            cfg.tlb_entries
        } else {
            cfg.tlb_ways
        };
        let frames = (cfg.memory_bytes / page_size).max(1) as usize;
        Self {
            cfg,
            page_shift: page_size.trailing_zeros(),
            sets: cfg.tlb_entries / ways,
            ways,
            tlb: vec![(EMPTY, 0, 0); cfg.tlb_entries],
            clock_time: 0,
            frame_vpn: vec![EMPTY; frames],
            referenced: vec![false; frames],
            resident: FxHashMap::default(),
            used_frames: 0,
            hand: 0,
            counts: PageSizeCounts {
                page_size,
                references: 0,
                tlb_hits: 0,
                faults: 0,
                frames: frames as u64,
            },
        }
    }

    fn drop_tlb(&mut self, vpn: u64) {
        let set = (vpn % self.sets as u64) as usize * self.ways;
        for e in &mut self.tlb[set..set + self.ways] {
            if e.0 == vpn {
                e.0 = EMPTY;
            }
        }
    }

    /// The frame for `vpn`, loading it (and evicting by second chance) on a fault.
    fn fault_in(&mut self, vpn: u64) -> u32 {
        self.counts.faults += 1;
        let frame = if self.used_frames < self.frame_vpn.len() {
            self.used_frames += 1;
            self.used_frames - 1
        } else {
            loop {
                let h = self.hand;
                self.hand = (self.hand + 1) % self.frame_vpn.len();
                if self.referenced[h] {
                    self.referenced[h] = false;
                } else {
                    let old = self.frame_vpn[h];
                    self.resident.remove(&old);
                    if self.cfg.evict_drops_tlb {
                        self.drop_tlb(old);
                    }
                    break h;
                }
            }
        };
        self.frame_vpn[frame] = vpn;
        self.referenced[frame] = self.cfg.ref_on_load;
        self.resident.insert(vpn, frame as u32);
        frame as u32
    }

    #[inline]
    fn access(&mut self, addr: u64) {
        self.counts.references += 1;
        self.clock_time += 1;
        let vpn = addr >> self.page_shift;
        let set = (vpn % self.sets as u64) as usize * self.ways;
        let now = self.clock_time;
        if let Some(e) = self.tlb[set..set + self.ways]
            .iter_mut()
            .find(|e| e.0 == vpn)
        {
            e.2 = now;
            let frame = e.1 as usize;
            // Without shootdowns a TLB entry can outlive its page.
            if self.frame_vpn[frame] == vpn {
                self.counts.tlb_hits += 1;
                if self.cfg.tlb_hit_sets_ref {
                    self.referenced[frame] = true;
                }
                return;
            }
        } else {
            // A TLB miss: walk the page table (a memory access, eq. 5).
        }
        let hit_tlb_stale = self.tlb[set..set + self.ways].iter().any(|e| e.0 == vpn);
        let frame = match self.resident.get(&vpn) {
            Some(&f) => {
                self.referenced[f as usize] = true;
                f
            }
            None => self.fault_in(vpn),
        };
        let slot = if hit_tlb_stale {
            self.tlb[set..set + self.ways]
                .iter()
                .position(|e| e.0 == vpn)
                .expect("present")
        } else {
            (0..self.ways)
                .min_by_key(|&i| {
                    if self.tlb[set + i].0 == EMPTY {
                        0
                    } else {
                        self.tlb[set + i].2
                    }
                })
                .expect("at least one way")
        };
        self.tlb[set + slot] = (vpn, frame, now);
    }
}

/// Simulates one page size over `refs`.
pub fn simulate(
    cfg: &PagingConfig,
    page_size: u64,
    refs: impl Iterator<Item = Result<MemRef, TraceError>>,
    progress: &mut dyn FnMut(u64),
) -> Result<PageSizeCounts, VmError> {
    cfg.validate()?;
    let mut sim = Sim::new(cfg, page_size);
    for r in refs {
        let r = r?;
        if cfg.data_only && r.kind == Access::Fetch {
            continue;
        }
        sim.access(r.addr);
        if sim.counts.references & 0xfffff == 0 {
            progress(sim.counts.references);
        }
    }
    Ok(sim.counts)
}

/// Eq. 4-6 for every storage latency.
pub fn rows(cfg: &PagingConfig, c: &PageSizeCounts) -> Vec<PagingRow> {
    let n = c.references.max(1) as f64;
    let r_t = 1.0 - c.tlb_hits as f64 / n;
    let r_f = c.faults as f64 / n;
    cfg.latency_x
        .iter()
        .map(|&x| {
            let t_pf = x * cfg.t_r_ns * (c.page_size as f64 / 64.0) + cfg.seek_ns;
            let t_addr = (1.0 - r_t) * cfg.t_e_ns + r_t * (cfg.t_e_ns + cfg.t_r_ns);
            let t_data = (1.0 - r_f) * cfg.t_r_ns + r_f * (cfg.t_r_ns + t_pf);
            PagingRow {
                page_size: c.page_size,
                latency_x: x,
                tlb_hit_rate: 1.0 - r_t,
                fault_rate: r_f,
                t_addr_ns: t_addr,
                t_data_ns: t_data,
                t_total_ns: t_addr + t_data,
                references: c.references,
                faults: c.faults,
            }
        })
        .collect()
}

/// Every page size, in parallel (one trace pass per size), then every latency.
pub fn sweep<I>(
    cfg: &PagingConfig,
    open: &(dyn Fn() -> Result<I, VmError> + Sync),
    progress: &(dyn Fn(u64) + Sync),
) -> Result<Vec<PagingRow>, VmError>
where
    I: Iterator<Item = Result<MemRef, TraceError>>,
{
    cfg.validate()?;
    let sizes = &cfg.page_sizes;
    let workers = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .min(sizes.len());
    let next = std::sync::atomic::AtomicUsize::new(0);
    let results: std::sync::Mutex<Vec<Option<Result<PageSizeCounts, VmError>>>> =
        std::sync::Mutex::new((0..sizes.len()).map(|_| None).collect());
    std::thread::scope(|s| {
        for _ in 0..workers {
            s.spawn(|| loop {
                let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                if i >= sizes.len() {
                    break;
                }
                let mut last = 0;
                let r = open().and_then(|it| {
                    simulate(cfg, sizes[i], it, &mut |n| {
                        progress(n - last);
                        last = n;
                    })
                });
                results.lock().expect("no panic while held")[i] = Some(r);
            });
        }
    });
    let mut out = Vec::new();
    for r in results.into_inner().expect("threads joined") {
        out.extend(rows(cfg, &r.expect("every size ran")?));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refs(addrs: &[u64]) -> Vec<Result<MemRef, TraceError>> {
        addrs
            .iter()
            .map(|&addr| {
                Ok(MemRef {
                    addr,
                    kind: Access::Read,
                    size: 8,
                    delta: 1,
                })
            })
            .collect()
    }

    #[test]
    fn counts_on_a_hand_checked_sequence() {
        // 2 frames of 4 KiB, a 2-entry fully associative TLB.
        let cfg = PagingConfig {
            tlb_entries: 2,
            tlb_ways: 0,
            memory_bytes: 8192,
            ..PagingConfig::default()
        };
        let a = 0u64;
        let b = 4096;
        let c = 8192;
        let c_ = simulate(
            &cfg,
            4096,
            refs(&[a, a + 8, b, a, c, b, a]).into_iter(),
            &mut |_| {},
        )
        .unwrap();
        // a: TLB miss, fault. a+8: TLB hit. b: miss, fault. a: hit. c: miss, fault — the
        // hand clears a and b, then evicts a (and its TLB entry). b: hit. a: miss, fault —
        // the hand clears b and c, then evicts b.
        assert_eq!(c_.references, 7);
        assert_eq!(c_.faults, 4);
        assert_eq!(c_.tlb_hits, 3);
    }

    #[test]
    fn equations_4_to_6() {
        let cfg = PagingConfig {
            latency_x: vec![10.0],
            ..PagingConfig::default()
        };
        let c = PageSizeCounts {
            page_size: 4096,
            references: 1000,
            tlb_hits: 900,
            faults: 10,
            frames: 1,
        };
        let r = &rows(&cfg, &c)[0];
        assert!((r.t_addr_ns - (1.0 + 0.1 * 100.0)).abs() < 1e-9);
        let t_pf = 10.0 * 100.0 * 64.0;
        assert!((r.t_data_ns - (100.0 + 0.01 * t_pf)).abs() < 1e-9);
        assert!((r.t_total_ns - r.t_addr_ns - r.t_data_ns).abs() < 1e-9);
    }

    #[test]
    fn bigger_pages_fault_less_on_a_scan_and_cost_more_per_fault() {
        let cfg = PagingConfig {
            memory_bytes: 64 << 10,
            ..PagingConfig::default()
        };
        let scan: Vec<u64> = (0..2).flat_map(|_| (0..(1u64 << 20)).step_by(64)).collect();
        let small = simulate(&cfg, 512, refs(&scan).into_iter(), &mut |_| {}).unwrap();
        let big = simulate(&cfg, 16384, refs(&scan).into_iter(), &mut |_| {}).unwrap();
        assert_eq!(small.faults, 2 * (1 << 20) / 512);
        assert_eq!(big.faults, 2 * (1 << 20) / 16384);
        assert!(big.tlb_hits > small.tlb_hits);
    }

    #[test]
    fn options_change_counts_as_documented() {
        let (a, b, c) = (0u64, 4096, 8192);
        let two_frames = PagingConfig {
            memory_bytes: 8192,
            tlb_entries: 1,
            tlb_ways: 0,
            ..PagingConfig::default()
        };
        let run = |cfg: &PagingConfig, t: &[u64]| {
            simulate(cfg, 4096, refs(t).into_iter(), &mut |_| {}).unwrap()
        };
        // Loaded pages referenced: the hand clears a and b, then evicts a, which faults
        // again. Loaded unreferenced: only a was used since loading, so b goes.
        assert_eq!(run(&two_frames, &[a, b, a, c, a]).faults, 4);
        assert_eq!(
            run(
                &PagingConfig {
                    ref_on_load: false,
                    ..two_frames.clone()
                },
                &[a, b, a, c, a]
            )
            .faults,
            3
        );
        // Whether a TLB hit sets the bit decides between evicting a and b.
        let big_tlb = PagingConfig {
            tlb_entries: 4,
            ref_on_load: false,
            ..two_frames.clone()
        };
        assert_eq!(run(&big_tlb, &[a, b, a, c, a]).faults, 3);
        assert_eq!(
            run(
                &PagingConfig {
                    tlb_hit_sets_ref: false,
                    ..big_tlb.clone()
                },
                &[a, b, a, c, a]
            )
            .faults,
            4
        );
        // Without shootdowns a stale TLB entry is never a hit.
        let stale = run(
            &PagingConfig {
                evict_drops_tlb: false,
                ..big_tlb
            },
            &[a, b, c, a],
        );
        assert_eq!((stale.faults, stale.tlb_hits), (4, 0));
        assert!(two_frames.validate().is_ok());
        assert!(PagingConfig {
            page_sizes: vec![1000],
            ..two_frames.clone()
        }
        .validate()
        .is_err());
        assert!(PagingConfig {
            tlb_entries: 6,
            tlb_ways: 4,
            ..two_frames
        }
        .validate()
        .is_err());
    }
}

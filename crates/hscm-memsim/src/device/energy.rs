//! Per-command energy of one device, from its profile: IDD currents for DRAM (the
//! method of DRAMPower and DRAMsim3), the seed paper's per-bit values for NVM.

use hscm_model::{MemEnergy, MemProfile};
use serde::Serialize;

use super::timing::Tps;

/// Dynamic energy in picojoules, by what spent it.
#[derive(Debug, Clone, Copy, Default, Serialize)]
pub struct DynamicEnergy {
    /// Activations (DRAM: the activate-precharge pair above standby; NVM: the array
    /// read of a whole row).
    pub activate: f64,
    /// NVM only: dirty lines written from the row buffer into the array.
    pub writeback: f64,
    /// Read and write bursts.
    pub rb_read: f64,
    pub rb_write: f64,
    /// Refresh commands above standby.
    pub refresh: f64,
    pub link: f64,
    /// Everything migration traffic spent (its activations, bursts, write-backs).
    pub migration: f64,
}

/// Where dynamic energy is booked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Bucket {
    Demand,
    Migration,
}

impl DynamicEnergy {
    pub(crate) fn book(&mut self, bucket: Bucket, pj: f64, f: fn(&mut Self) -> &mut f64) {
        match bucket {
            Bucket::Demand => *f(self) += pj,
            Bucket::Migration => self.migration += pj,
        }
    }
}

/// Energy of each command in picojoules, and standby power, precomputed.
#[derive(Debug, Clone, Copy)]
pub(crate) struct CommandEnergy {
    pub activate: f64,
    pub read: f64,
    pub write: f64,
    pub refresh: f64,
    /// NVM: per 64 B line written into the array.
    pub writeback_line: f64,
    pub link_per_burst: f64,
    /// Standby power of one rank, in milliwatts, with a bank of it open and with all
    /// its banks precharged (equal for NVM).
    pub active_standby_mw: f64,
    pub precharge_standby_mw: f64,
}

impl CommandEnergy {
    /// `ranks` simulated ranks share `bytes`; a rank smaller than the part's rank pays
    /// its share of standby and refresh power (its chips would be smaller), while
    /// every command still drives all the rank's chips.
    pub(crate) fn of(p: &MemProfile, t: &Tps, row_bytes: u64, bytes: u64, ranks: u64) -> Self {
        let ns = |ps: u64| ps as f64 / 1000.0;
        let burst_bits = f64::from(p.burst_bytes) * 8.0;
        let link_per_burst = burst_bits * p.link_pj_per_bit;
        match p.energy {
            MemEnergy::Currents(i) => {
                let chips = f64::from(i.chips_per_rank);
                let share = bytes as f64 / ranks as f64 / i.rank_bytes as f64;
                // V × mA × ns = pJ.
                let (ras, rp) = (ns(t.ras), ns(t.rp));
                Self {
                    activate: i.vdd
                        * (i.idd0 * (ras + rp) - (i.idd3n * ras + i.idd2n * rp))
                        * chips,
                    read: i.vdd * (i.idd4r - i.idd3n) * ns(t.burst) * chips,
                    write: i.vdd * (i.idd4w - i.idd3n) * ns(t.burst) * chips,
                    refresh: i.vdd * (i.idd5b - i.idd3n) * ns(t.rfc) * chips * share,
                    writeback_line: 0.0,
                    link_per_burst,
                    // V × mA = mW.
                    active_standby_mw: i.vdd * i.idd3n * chips * share,
                    precharge_standby_mw: i.vdd * i.idd2n * chips * share,
                }
            }
            MemEnergy::PerBit(e) => {
                let gib = bytes as f64 / (1u64 << 30) as f64;
                let standby = e.background_mw_per_gib * gib / ranks as f64;
                Self {
                    activate: row_bytes as f64 * 8.0 * e.array_read_pj_per_bit,
                    read: burst_bits * e.row_buffer_read_pj_per_bit,
                    write: burst_bits * e.row_buffer_write_pj_per_bit,
                    refresh: 0.0,
                    writeback_line: burst_bits * e.array_write_pj_per_bit,
                    link_per_burst,
                    active_standby_mw: standby,
                    precharge_standby_mw: standby,
                }
            }
        }
    }
}

//! Main-memory device profiles: JEDEC-style timing plus an energy model.

use serde::{Deserialize, Serialize};

/// What a device does that changes how it is timed and costed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum MemKind {
    /// Destructive reads (every precharge restores the row), periodic refresh.
    Dram,
    /// Non-volatile: non-destructive reads (a clean row closes for free), no refresh,
    /// an array write only when a dirty row leaves the row buffer.
    Nvm,
}

/// Timing, all in nanoseconds except where a field says clock cycles.
///
/// Names follow JEDEC: tCL read latency, tCWD (CWL) write latency, tRCD activate to
/// column command, tRP precharge, tRAS activate to precharge, tWR write recovery (end
/// of write burst to precharge), tRTP read to precharge, tWTR end of write burst to a
/// read, tRRD activate to activate (other bank), tFAW four-activate window, tCCD column
/// to column, tRFC refresh cycle, tREFI refresh interval. DDR4 splits tCCD, tRRD and
/// tWTR by bank group: the plain field is the short (other group) value and the `_l`
/// field the long (same group) one; without bank groups the two are equal.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct MemTiming {
    pub t_ck: f64,
    pub t_cl: f64,
    pub t_cwd: f64,
    pub t_rcd: f64,
    pub t_rp: f64,
    pub t_ras: f64,
    pub t_wr: f64,
    pub t_rtp: f64,
    pub t_wtr: f64,
    pub t_wtr_l: f64,
    pub t_rrd: f64,
    pub t_rrd_l: f64,
    pub t_faw: f64,
    /// Column-to-column, in clock cycles (other bank group, or any bank without groups).
    pub t_ccd_ck: u32,
    /// Column-to-column within one bank group, in clock cycles.
    pub t_ccd_l_ck: u32,
    /// Data burst on the bus, in clock cycles (BL8 on a DDR bus: 4).
    pub burst_ck: u32,
    /// Zero when the device does not refresh.
    pub t_rfc: f64,
    pub t_refi: f64,
    /// Fixed extra latency each way on top of the device (e.g. a CXL link); 0 for a
    /// DIMM on the memory bus.
    pub link_ns: f64,
}

/// Datasheet currents (mA, per chip) for the IDD energy model that DRAMPower and
/// DRAMsim3 use (after Micron TN-41-01): an activate-precharge pair costs IDD0 over
/// tRC less the standby current it displaces (IDD3N over tRAS, IDD2N over tRP); a read
/// or write burst costs IDD4R or IDD4W above IDD3N for the burst; a refresh IDD5B above
/// IDD3N for tRFC; and every clock pays IDD3N while a bank of the rank is open, IDD2N
/// while all are precharged.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct IddCurrents {
    pub vdd: f64,
    pub idd0: f64,
    pub idd2n: f64,
    pub idd3n: f64,
    pub idd4r: f64,
    pub idd4w: f64,
    pub idd5b: f64,
    /// Chips that answer every command of one rank (a 64-bit rank of x8 chips: 8).
    pub chips_per_rank: u32,
    /// Capacity of one rank; a device smaller than a rank pays that share of the
    /// rank's standby power (its chips would be smaller).
    pub rank_bytes: u64,
}

/// The seed paper's per-bit energy (its Table 2), used for NVM.
///
/// Array read is paid for every bit of a row on activation, array write for every bit
/// written back from the row buffer into the array, row-buffer read/write for every
/// bit moved over the bus.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct PerBitEnergy {
    pub array_read_pj_per_bit: f64,
    pub array_write_pj_per_bit: f64,
    pub row_buffer_read_pj_per_bit: f64,
    pub row_buffer_write_pj_per_bit: f64,
    /// Standby power per GiB of capacity, paid for the whole run (peripheral leakage).
    pub background_mw_per_gib: f64,
}

/// How a device's energy is computed.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum MemEnergy {
    /// DRAM: from datasheet currents.
    Currents(IddCurrents),
    /// NVM: the seed paper's per-bit values.
    PerBit(PerBitEnergy),
}

/// A complete device profile.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct MemProfile {
    pub name: &'static str,
    pub kind: MemKind,
    pub timing: MemTiming,
    pub energy: MemEnergy,
    /// Link energy per bit moved (CXL-like devices), else 0.
    pub link_pj_per_bit: f64,
    /// Bytes moved per burst (64-bit bus × BL8 = 64).
    pub burst_bytes: u32,
    /// The part's organisation: banks per rank, bank groups among them, and the row
    /// (page) of one rank in bytes (chips per rank × the chip's page).
    pub banks: u32,
    pub bank_groups: u32,
    pub row_bytes: u64,
    /// Whether a dirty row writes back only its dirty 64 B lines (PCM partial writes,
    /// Lee et al., ISCA 2009) or the whole row.
    pub writeback_dirty_lines_only: bool,
    /// Rated write endurance per cell (writes), for lifetime estimates.
    pub endurance_writes: f64,
}

/// A preset name that does not exist.
#[derive(Debug, thiserror::Error)]
#[error("unknown memory preset `{0}` (known: {known})", known = MemPreset::NAMES.join(", "))]
pub struct UnknownPreset(pub String);

/// The named profiles hscm ships.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum MemPreset {
    /// The seed paper's DRAM (Table 2), other timings from DDR3-1600.
    PaperDram,
    /// The seed paper's PCM (Table 2).
    PaperPcm,
    /// DDR3-1600K (11-11-11) built from x8 chips.
    Ddr3_1600K,
    /// DDR4-2400 (16-16-16) built from x8 chips, with bank groups.
    Ddr4_2400,
    OptaneLike,
    CxlLike,
}

/// DDR3 4 Gb x8 currents as DRAMsim3's `configs/DDR3_4Gb_x8_1600.ini` gives them
/// (a Micron 4 Gb part at 1.35 V); eight chips make a 4 GiB rank.
const DDR3_X8_CURRENTS: IddCurrents = IddCurrents {
    vdd: 1.35,
    idd0: 55.0,
    idd2n: 32.0,
    idd3n: 38.0,
    idd4r: 157.0,
    idd4w: 125.0,
    idd5b: 235.0,
    chips_per_rank: 8,
    rank_bytes: 4 << 30,
};
/// DDR4 8 Gb x8 currents from Micron's MT40A1G8-083E datasheet as DRAMsim3's
/// `configs/DDR4_8Gb_x8_2400.ini` carries them; eight chips make an 8 GiB rank.
const DDR4_X8_CURRENTS: IddCurrents = IddCurrents {
    vdd: 1.2,
    idd0: 48.0,
    idd2n: 34.0,
    idd3n: 43.0,
    idd4r: 135.0,
    idd4w: 123.0,
    idd5b: 250.0,
    chips_per_rank: 8,
    rank_bytes: 8 << 30,
};
/// PCM has no refresh and negligible cell leakage; its peripheral circuits still draw
/// standby power. No source gives a number for this configuration: we assume 12 mW per
/// GiB, about a tenth of DDR3's precharge standby power per GiB (8 × 32 mA × 1.35 V per
/// 4 GiB rank = 86 mW/GiB, rounded up), and say so in every report.
const NVM_BACKGROUND_MW_PER_GIB: f64 = 12.0;

/// The seed paper's Table 2 PCM energies (after Li et al. 2017 and Liu et al. 2017).
const PAPER_PCM_ENERGY: PerBitEnergy = PerBitEnergy {
    array_read_pj_per_bit: 2.47,
    array_write_pj_per_bit: 16.82,
    row_buffer_read_pj_per_bit: 0.93,
    row_buffer_write_pj_per_bit: 1.02,
    background_mw_per_gib: NVM_BACKGROUND_MW_PER_GIB,
};

/// DDR3-1600K (tCK 1.25 ns, CL-tRCD-tRP 11-11-11) for x8 chips (1 KiB page per chip):
/// JESD79-3F speed bin and its 1 KiB-page tRRD = max(4 nCK, 6 ns) = 5 and tFAW = 30 ns
/// = 24 clocks; tRFC 260 ns for 4 Gb chips; tREFI 7.8 µs.
const DDR3_1600_X8: MemTiming = MemTiming {
    t_ck: 1.25,
    t_cl: 13.75,
    t_cwd: 10.0,
    t_rcd: 13.75,
    t_rp: 13.75,
    t_ras: 35.0,
    t_wr: 15.0,
    t_rtp: 7.5,
    t_wtr: 7.5,
    t_wtr_l: 7.5,
    t_rrd: 6.0,
    t_rrd_l: 6.0,
    t_faw: 30.0,
    t_ccd_ck: 4,
    t_ccd_l_ck: 4,
    burst_ck: 4,
    t_rfc: 260.0,
    t_refi: 7800.0,
    link_ns: 0.0,
};

/// The paper's devices keep the x16 (2 KiB page) activation limits they were built
/// with: tRRD 7.5 ns, tFAW 40 ns (JESD79-3F, DDR3-1600 2 KiB page).
const DDR3_1600_X16_ACTIVATES: MemTiming = MemTiming {
    t_rrd: 7.5,
    t_rrd_l: 7.5,
    t_faw: 40.0,
    ..DDR3_1600_X8
};

impl MemPreset {
    pub const NAMES: &'static [&'static str] = &[
        "paper-dram",
        "paper-pcm",
        "ddr3-1600k",
        "ddr4-2400",
        "optane-like",
        "cxl-like",
    ];

    pub fn from_name(name: &str) -> Result<Self, UnknownPreset> {
        Ok(match name {
            "paper-dram" => Self::PaperDram,
            "paper-pcm" => Self::PaperPcm,
            "ddr3-1600k" => Self::Ddr3_1600K,
            "ddr4-2400" => Self::Ddr4_2400,
            "optane-like" => Self::OptaneLike,
            "cxl-like" => Self::CxlLike,
            _ => return Err(UnknownPreset(name.to_string())),
        })
    }

    pub fn profile(self) -> MemProfile {
        let ddr3_x8 = MemProfile {
            name: "ddr3-1600k",
            kind: MemKind::Dram,
            timing: DDR3_1600_X8,
            energy: MemEnergy::Currents(DDR3_X8_CURRENTS),
            link_pj_per_bit: 0.0,
            burst_bytes: 64,
            banks: 8,
            bank_groups: 1,
            // 8 chips × 1 KiB page.
            row_bytes: 8192,
            writeback_dirty_lines_only: false,
            endurance_writes: 1e15,
        };
        // The seed paper's memories: 8 banks and its 4 KiB rows.
        let paper = MemProfile {
            timing: DDR3_1600_X16_ACTIVATES,
            row_bytes: 4096,
            ..ddr3_x8
        };
        match self {
            Self::PaperDram => MemProfile {
                name: "paper-dram",
                // Table 2: tCL = tRCD = 15 ns, tCWD 13 ns, tWR 15 ns; tRP taken equal
                // to tRCD; the rest DDR3-1600. Energy from DDR3 currents (the paper's
                // per-bit DRAM values are not used: docs/memsim.md says why).
                timing: MemTiming {
                    t_cl: 15.0,
                    t_rcd: 15.0,
                    t_rp: 15.0,
                    t_cwd: 13.0,
                    t_wr: 15.0,
                    ..paper.timing
                },
                ..paper
            },
            Self::PaperPcm => MemProfile {
                name: "paper-pcm",
                kind: MemKind::Nvm,
                // Table 2: tCL 15, tRCD 48, tCWD 13, tWR 300 ns. A clean row closes
                // without a precharge; tRP (1 cycle) only separates a dirty write-back
                // from the next activate. No refresh, no restore (tRAS 0).
                timing: MemTiming {
                    t_cl: 15.0,
                    t_rcd: 48.0,
                    t_rp: 1.25,
                    t_cwd: 13.0,
                    t_wr: 300.0,
                    t_ras: 0.0,
                    t_rfc: 0.0,
                    ..paper.timing
                },
                energy: MemEnergy::PerBit(PAPER_PCM_ENERGY),
                writeback_dirty_lines_only: true,
                endurance_writes: 1e8,
                ..paper
            },
            Self::Ddr3_1600K => ddr3_x8,
            Self::Ddr4_2400 => MemProfile {
                name: "ddr4-2400",
                kind: MemKind::Dram,
                // Micron MT40A1G8-083E (8 Gb x8, DDR4-2400 16-16-16), as DRAMsim3's
                // DDR4_8Gb_x8_2400.ini lists it in clocks of 0.833 ns: CL 16, CWL 16,
                // tRCD 16, tRP 16, tRAS 39, tWR 19, tRTP 9 (7.5 ns), tRRD_S/L 4/6,
                // tWTR_S/L 3/9, tCCD_S/L 4/6, tFAW 26, tRFC 420 (350 ns), tREFI 7.8 µs;
                // 4 bank groups of 4 banks; 1 KiB page per chip.
                timing: MemTiming {
                    t_ck: 0.833,
                    t_cl: 16.0 * 0.833,
                    t_cwd: 16.0 * 0.833,
                    t_rcd: 16.0 * 0.833,
                    t_rp: 16.0 * 0.833,
                    t_ras: 39.0 * 0.833,
                    t_wr: 19.0 * 0.833,
                    t_rtp: 9.0 * 0.833,
                    t_wtr: 3.0 * 0.833,
                    t_wtr_l: 9.0 * 0.833,
                    t_rrd: 4.0 * 0.833,
                    t_rrd_l: 6.0 * 0.833,
                    t_faw: 26.0 * 0.833,
                    t_ccd_ck: 4,
                    t_ccd_l_ck: 6,
                    burst_ck: 4,
                    // 350 ns in whole clocks of the exact 5/6 ns period.
                    t_rfc: 420.0 * 0.833,
                    t_refi: 7800.0,
                    link_ns: 0.0,
                },
                energy: MemEnergy::Currents(DDR4_X8_CURRENTS),
                link_pj_per_bit: 0.0,
                burst_bytes: 64,
                banks: 16,
                bank_groups: 4,
                row_bytes: 8192,
                writeback_dirty_lines_only: false,
                endurance_writes: 1e15,
            },
            Self::OptaneLike => MemProfile {
                name: "optane-like",
                // Order of magnitude only: Izraelevitz et al. (2019) measured ~305 ns
                // random and ~169 ns sequential read latency on Optane DC PMM; we put
                // the difference in tRCD. Writes land in the module's power-protected
                // buffer, so write recovery is shorter than PCM's raw tWR.
                timing: MemTiming {
                    t_rcd: 250.0,
                    t_wr: 100.0,
                    ..Self::PaperPcm.profile().timing
                },
                endurance_writes: 1e7,
                ..Self::PaperPcm.profile()
            },
            Self::CxlLike => {
                let ddr4 = Self::Ddr4_2400.profile();
                MemProfile {
                    name: "cxl-like",
                    // DDR4 behind a CXL link: about 70 ns more each way than a local
                    // DIMM (our round figure for the ~140 ns extra load-to-use latency
                    // reported for CXL memory expanders, Sun et al., MICRO 2023), and
                    // 5 pJ/bit for the link (assumption).
                    timing: MemTiming {
                        link_ns: 70.0,
                        ..ddr4.timing
                    },
                    link_pj_per_bit: 5.0,
                    ..ddr4
                }
            }
        }
    }
}

impl MemProfile {
    /// Nanoseconds to whole device clock cycles, rounding up (a constraint is never
    /// shortened by conversion).
    pub fn cycles(&self, ns: f64) -> u64 {
        if ns <= 0.0 {
            0
        } else {
            (ns / self.timing.t_ck - 1e-9).ceil() as u64
        }
    }

    pub fn refreshes(&self) -> bool {
        self.kind == MemKind::Dram && self.timing.t_rfc > 0.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_preset_resolves_by_name_and_is_sane() {
        for name in MemPreset::NAMES {
            let p = MemPreset::from_name(name).unwrap().profile();
            assert_eq!(p.name, *name);
            assert!(p.timing.t_ck > 0.0 && p.timing.t_cl > 0.0 && p.timing.t_rcd > 0.0);
            assert_eq!(p.refreshes(), p.kind == MemKind::Dram);
            // DRAM is costed from currents, NVM per bit.
            assert_eq!(
                matches!(p.energy, MemEnergy::Currents(_)),
                p.kind == MemKind::Dram
            );
            assert!(p.banks % p.bank_groups == 0 && p.row_bytes.is_power_of_two());
        }
        assert!(MemPreset::from_name("ddr9").is_err());
    }

    #[test]
    fn cycles_round_up_and_keep_exact_multiples() {
        let p = MemPreset::Ddr3_1600K.profile();
        assert_eq!(p.cycles(13.75), 11);
        assert_eq!(p.cycles(15.0), 12);
        assert_eq!(p.cycles(0.0), 0);
        let pcm = MemPreset::PaperPcm.profile();
        assert_eq!(pcm.cycles(300.0), 240);
        assert_eq!(pcm.cycles(48.0), 39);
    }

    #[test]
    fn paper_table2_values_are_carried_over() {
        let d = MemPreset::PaperDram.profile();
        let p = MemPreset::PaperPcm.profile();
        assert_eq!((d.timing.t_rcd, d.timing.t_wr), (15.0, 15.0));
        assert_eq!((p.timing.t_rcd, p.timing.t_wr), (48.0, 300.0));
        let MemEnergy::PerBit(e) = p.energy else {
            panic!("PCM is costed per bit")
        };
        assert_eq!(e.array_write_pj_per_bit, 16.82);
        assert_eq!(d.row_bytes, 4096);
    }

    #[test]
    fn x8_presets_carry_the_parts_own_limits_in_clocks() {
        let d3 = MemPreset::Ddr3_1600K.profile();
        let t = d3.timing;
        let ck = |ns| d3.cycles(ns);
        assert_eq!((ck(t.t_cl), ck(t.t_rcd), ck(t.t_rp)), (11, 11, 11));
        assert_eq!((ck(t.t_rrd), ck(t.t_faw), ck(t.t_ras)), (5, 24, 28));
        assert_eq!((ck(t.t_rfc), ck(t.t_refi)), (208, 6240));
        assert_eq!((d3.row_bytes, d3.banks, d3.bank_groups), (8192, 8, 1));
        let d4 = MemPreset::Ddr4_2400.profile();
        let t = d4.timing;
        let ck = |ns| d4.cycles(ns);
        assert_eq!(
            (ck(t.t_cl), ck(t.t_cwd), ck(t.t_rcd), ck(t.t_rp)),
            (16, 16, 16, 16)
        );
        assert_eq!(
            (ck(t.t_rrd), ck(t.t_rrd_l), ck(t.t_wtr), ck(t.t_wtr_l)),
            (4, 6, 3, 9)
        );
        assert_eq!(
            (t.t_ccd_ck, t.t_ccd_l_ck, ck(t.t_faw), ck(t.t_rtp)),
            (4, 6, 26, 9)
        );
        assert_eq!(
            (ck(t.t_ras), ck(t.t_wr), ck(t.t_rfc), ck(t.t_refi)),
            (39, 19, 420, 9364)
        );
        assert_eq!((d4.banks, d4.bank_groups), (16, 4));
    }
}

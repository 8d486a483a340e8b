//! A profile's timing constraints as whole device clocks, in picoseconds.

use hscm_model::MemProfile;

/// Constraints in picoseconds, each a whole number of device clocks. `_s` is the
/// short (other bank group) value and `_l` the long (same group) one; they are equal
/// on parts without bank groups.
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
    pub wtr_s: u64,
    pub wtr_l: u64,
    pub rrd_s: u64,
    pub rrd_l: u64,
    pub faw: u64,
    pub ccd_s: u64,
    pub ccd_l: u64,
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
        let ccd_s = u64::from(p.timing.t_ccd_ck) * ck;
        Self {
            ck,
            cl,
            cwd,
            rcd: c(p.timing.t_rcd),
            rp: c(p.timing.t_rp),
            ras: c(p.timing.t_ras),
            wr: c(p.timing.t_wr),
            rtp: c(p.timing.t_rtp),
            wtr_s: c(p.timing.t_wtr),
            wtr_l: c(p.timing.t_wtr_l).max(c(p.timing.t_wtr)),
            rrd_s: c(p.timing.t_rrd),
            rrd_l: c(p.timing.t_rrd_l).max(c(p.timing.t_rrd)),
            faw: c(p.timing.t_faw),
            ccd_s,
            ccd_l: (u64::from(p.timing.t_ccd_l_ck) * ck).max(ccd_s),
            burst,
            rfc: c(p.timing.t_rfc),
            refi: c(p.timing.t_refi),
            rtw: (cl + burst + 2 * ck).saturating_sub(cwd),
            link: (p.timing.link_ns * 1000.0).round() as u64,
        }
    }
}

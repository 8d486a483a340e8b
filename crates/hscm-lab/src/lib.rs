//! hscm-lab: the benchmarks. Every benchmark the `hscm` binary offers lives here, so
//! that the binary only parses flags and picks what to print:
//!
//! - [`driver`]: the one closed-loop benchmark driver (threads, warm-up, start barrier,
//!   a phase bounded by time or work, paired slices against a baseline, one
//!   latency-histogram policy) that the volume, ring and key-value benchmarks run on;
//! - experiments: [`volume`] (the volume against O_DIRECT, the page cache and memcpy;
//!   restart), [`ring`] (the shared-memory transport), [`kv`] (Standard against Sprint),
//!   [`nbd`] (the NBD export against nbdkit), [`fs`] (the mount), [`tier`] (the tiered
//!   volume);
//! - the simulator experiments, parameters and sweeps live in hscm-sweep (what Python
//!   links) and are re-exported here under their old paths;
//! - the report (`hscm reproduce`, the published figures as data, the renderers and
//!   plots) lives in hscm-report, which reads these experiments' results.
//!
//! Errors here are `anyhow` chains: an experiment's failure is read by a person running
//! it and matched by nobody, while the engines it drives keep their typed errors (a
//! caller can still downcast to `hscm_volume::Error` or `hscm_kv::Error`).

#[macro_use]
extern crate hscm_sweep;

pub use hscm_sweep::{
    flag_defaults, memsim, memsim_validation, out, par, params, scratch, sweep, units, vmsim,
};

pub mod crash_writers;
pub mod delay_relay;
pub mod driver;
pub mod experiments;
pub mod fio;
pub mod fs;
pub mod kv;
pub mod mirror;
pub mod nbd;
pub mod nbd_strangers;
pub mod placement;
pub mod remote;
pub mod ring;
pub mod tier;
pub mod volume;

pub use driver::{closed_loop, latency_histogram, paired, Ctx, Measured, Phase, Step};

/// Whether a program is on PATH (the experiments that drive outside tools, such as
/// fio and nbdkit, say how to install them when it is not).
pub fn installed(program: &str) -> bool {
    std::env::var_os("PATH").is_some_and(|path| {
        std::env::split_paths(&path).any(|dir| {
            std::fs::metadata(dir.join(program)).is_ok_and(|m| {
                use std::os::unix::fs::PermissionsExt;
                m.is_file() && m.permissions().mode() & 0o111 != 0
            })
        })
    })
}

#[cfg(test)]
mod tests {
    #[test]
    fn installed_finds_programs_on_path_only() {
        assert!(super::installed("sh"));
        assert!(!super::installed("hscm-no-such-program"));
    }
}

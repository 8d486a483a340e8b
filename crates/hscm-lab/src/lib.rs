//! hscm-lab: the experiment library. Every benchmark and simulation the `hscm` binary
//! offers lives here, so that the binary only parses flags and picks what to print:
//!
//! - [`driver`]: the one closed-loop benchmark driver (threads, warm-up, start barrier,
//!   a phase bounded by time or work, paired slices against a baseline, one
//!   latency-histogram policy) that the volume, ring and key-value benchmarks run on;
//! - experiments: [`volume`] (the volume against O_DIRECT, the page cache and memcpy;
//!   restart), [`ring`] (the shared-memory transport), [`kv`] (Standard against Sprint), [`nbd`] (the NBD export against nbdkit),
//!   [`vmsim`] (file caching and paging under SCM), [`memsim`] (hybrid DRAM/PCM memory);
//! - [`report`]: `hscm reproduce`, every experiment on its defaults, with the published
//!   figures as data ([`report::check`]) and renderers for Markdown, JSON and SVG;
//! - what they share: [`out`] (printing that never panics), [`units`], [`scratch`]
//!   (temporary data removed on exit and on signals), [`par`] (parallel runs, progress).
//!
//! Errors here are `anyhow` chains: an experiment's failure is read by a person running
//! it and matched by nobody, while the engines it drives keep their typed errors (a
//! caller can still downcast to `hscm_volume::Error` or `hscm_kv::Error`).

#[macro_use]
pub mod out;

pub mod driver;
pub mod fio;
pub mod fs;
pub mod kv;
pub mod memsim;
pub mod memsim_validation;
pub mod nbd;
pub mod nbd_flush;
pub mod nbd_metrics;
pub mod nbd_strangers;
pub mod par;
pub mod params;
pub mod report;
pub mod ring;
pub mod scratch;
pub mod sweep;
pub mod tier;
pub mod units;
pub mod vmsim;
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

/// A flag group's values when no flag is given: the defaults `--help` shows, as a value.
/// Experiments that change a few of them write `Args { x, ..flag_defaults() }`, so a
/// default is written once, on its flag (which reads it from the engine's own `Default`
/// where the engine has one).
pub fn flag_defaults<T: clap::Args + clap::FromArgMatches>() -> T {
    let cmd = T::augment_args(clap::Command::new("defaults"));
    T::from_arg_matches(&cmd.get_matches_from(["defaults"]))
        .expect("a flag group's own defaults parse")
}

#[cfg(test)]
mod tests {
    #[test]
    fn installed_finds_programs_on_path_only() {
        assert!(super::installed("sh"));
        assert!(!super::installed("hscm-no-such-program"));
    }
}

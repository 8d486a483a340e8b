//! hscm-sweep: parameters and sweeps. The simulator experiments and everything a sweep
//! or Python needs to run them, apart from the benchmarks and the report (hscm-lab),
//! which drive servers, FUSE mounts and plots:
//!
//! - experiments: [`memsim`] (hybrid DRAM/PCM main memory), [`memsim_validation`] (the
//!   DRAM model beside Ramulator 2.0 and DRAMsim3), [`vmsim`] (file caching and paging
//!   under SCM), each a flag group (`clap::Args`) and a function returning data;
//! - [`replay`]: a block trace through a real tiered volume, counted per tier;
//! - [`params`]: a flag group's values from JSON (Python's keyword arguments, a sweep
//!   point), checked by the flags' own parsers; [`sweep`]: sweep specs, expanded and
//!   hashed into points, and one point run;
//! - [`experiment`]: the one shape of every experiment the binary runs (flags, a run
//!   returning data, a text renderer);
//! - what they share: [`out`] (printing that never panics), [`units`], [`scratch`]
//!   (temporary data removed on exit and on signals), [`par`] (parallel runs, progress).

#[macro_use]
pub mod out;

pub mod commands;
pub mod experiment;
pub mod memsim;
pub mod memsim_validation;
pub mod par;
pub mod params;
pub mod replay;
pub mod scratch;
pub mod sweep;
pub mod tier_flags;
pub mod units;
pub mod vmsim;

/// A flag group's values when no flag is given: the defaults `--help` shows, as a value.
/// Experiments that change a few of them write `Args { x, ..flag_defaults() }`, so a
/// default is written once, on its flag (which reads it from the engine's own `Default`
/// where the engine has one).
pub fn flag_defaults<T: clap::Args + clap::FromArgMatches>() -> T {
    let cmd = T::augment_args(clap::Command::new("defaults"));
    T::from_arg_matches(&cmd.get_matches_from(["defaults"]))
        .expect("a flag group's own defaults parse")
}

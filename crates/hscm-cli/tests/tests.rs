//! The `hscm` binary's tests in one test binary (as ripgrep's `tests/tests.rs`): one
//! link instead of one per file, and tests of different command groups run side by
//! side. Each module tests one command group as a user meets it, through the binary
//! alone (`util` runs it); engine behaviour is tested in the engine's own crate.

mod util;

mod careful;
mod cli;
mod contract;
mod crash;
mod kv_cli;
mod kv_crash;
mod memsim_cli;
mod mirror;
mod mount;
mod mount_passthrough;
mod mount_rings;
mod mount_safety;
mod mount_suites;
mod mount_truth;
mod mount_user;
mod mount_work;
mod nbd;
mod nbd_tls;
mod readme;
mod remote_home;
mod ring_process;
mod status_trust;
mod tier_cli;
mod units;

//! hscm-lab: the experiment library. Every benchmark and simulation the `hscm` binary
//! offers lives here, so that the binary only parses flags and picks what to print:
//!
//! - [`driver`]: the one closed-loop benchmark driver (threads, warm-up, start barrier,
//!   a phase bounded by time or work, paired slices against a baseline, one
//!   latency-histogram policy) that the volume, ring and key-value benchmarks run on;
//! - experiments: [`volume`] (the volume against O_DIRECT, the page cache and memcpy;
//!   restart), [`ring`] (the shared-memory transport), [`kv`] (Standard against Sprint),
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
pub mod kv;
pub mod memsim;
pub mod par;
pub mod report;
pub mod ring;
pub mod scratch;
pub mod units;
pub mod vmsim;
pub mod volume;

pub use driver::{closed_loop, latency_histogram, paired, Ctx, Measured, Phase, Step};

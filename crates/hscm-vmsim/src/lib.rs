//! SCM-aware file-cache and virtual-memory paging simulators (after Park & Bahn,
//! "Issues in File Caching and Virtual Memory Paging with Fast SCM Storage", 2020 —
//! the seed paper 004).
//!
//! * [`cache`]: requests through a byte-sized cache under any `hscm-policy` cache
//!   policy or Belady's offline optimum, with the paper's access-time model per storage
//!   profile (eq. 1-3).
//! * [`paging`]: virtual references through a TLB and second-chance (CLOCK) physical
//!   memory, for several page sizes, with the paper's eq. 4-6 per storage latency.

pub mod cache;
pub mod mrc;
pub mod paging;

/// Errors of the simulators.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum VmError {
    #[error("configuration: {0}")]
    Config(String),
    #[error(transparent)]
    Trace(#[from] hscm_trace::TraceError),
}

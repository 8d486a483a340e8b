//! hscm's main-memory simulator: a hybrid DRAM + PCM (or any two devices from
//! `hscm-model`) memory system behind optional caches and a simple in-order core,
//! with WARM and RaPP migration from `hscm-policy`, timing from JEDEC-style command
//! constraints and energy from the seed paper's per-bit model plus standing power.
//!
//! Model summary (docs/memsim.md has the full statement):
//! * core: `delta` instructions at `cpi` cycles each, loads that miss the last cache
//!   level block until data returns, stores and write-backs are posted;
//! * controller: per device read and write queues, FR-FCFS (oldest row hit first,
//!   else oldest), writes drained between watermarks or when no read waits;
//! * devices: open-page row buffers, every command at its earliest legal time.

mod cache;
mod config;
mod device;
mod memory;
mod sim;

pub use cache::{CacheConfig, CacheFilter, CacheLevel};
pub use config::{
    ControllerConfig, CoreConfig, Geometry, MapField, Placement, PolicyKind, SimConfig,
};
pub use device::{DeviceCounters, DynamicEnergy};
pub use sim::{normalise, run, Latency, Norm, RunResult};

/// Simulation errors.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SimError {
    #[error("configuration: {0}")]
    Config(String),
    #[error(transparent)]
    Trace(#[from] hscm_trace::TraceError),
}

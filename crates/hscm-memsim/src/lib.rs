//! hscm's main-memory simulator: a hybrid DRAM + PCM (or any two devices from
//! `hscm-model`) memory system behind optional caches and a simple in-order core,
//! with WARM and RaPP migration from `hscm-policy`, command-level timing and energy
//! from datasheet currents (DRAM) or the seed paper's per-bit model (PCM).
//!
//! Model summary (docs/memsim.md has the full statement):
//! * core: `delta` instructions at `cpi` cycles each, loads that miss the last cache
//!   level block until data returns, stores and write-backs are posted;
//! * controller: per channel read and write queues and the requests already
//!   activated for; each command chosen FR-FCFS among the commands whose timing is met
//!   across all banks (activated requests first, then the oldest), writes drained between
//!   watermarks, refresh; event-driven, so idle clocks cost nothing;
//! * devices: per-bank state machines with open-page row buffers, bank groups.

mod cache;
mod config;
mod device;
mod memory;
mod sim;

pub use cache::{CacheConfig, CacheFilter, CacheLevel};
pub use config::{
    ControllerConfig, CoreConfig, Geometry, MapField, Placement, PolicyKind, ReadyOrder, SimConfig,
};
pub use device::{DeviceCounters, DynamicEnergy};
pub use sim::{normalise, run, Latency, Norm, RunResult, ENERGY_PARTS};

/// Simulation errors.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SimError {
    #[error("configuration: {0}")]
    Config(String),
    #[error(transparent)]
    Trace(#[from] hscm_trace::TraceError),
}

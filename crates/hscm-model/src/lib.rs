//! Device profiles shared by hscm's simulators and engine.
//!
//! Main-memory devices (timing in nanoseconds, energy in picojoules), the parameters
//! a memory controller model needs to time and cost every command; and device power
//! states with an energy meter over recorded activity. Every preset names its source;
//! values we chose ourselves say so.

mod memory;
mod power;

pub use memory::{
    IddCurrents, MemEnergy, MemKind, MemPreset, MemProfile, MemTiming, PerBitEnergy, UnknownPreset,
};
pub use power::{PowerError, PowerProfile, Timeline, POWER_PRESETS};

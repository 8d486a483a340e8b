//! Device profiles shared by hscm's simulators and engine.
//!
//! Today: main-memory devices (timing in nanoseconds, energy in picojoules), the
//! parameters a memory controller model needs to time and cost every command.
//! Every preset names its source; values we chose ourselves say so.

mod memory;

pub use memory::{MemEnergy, MemKind, MemPreset, MemProfile, MemTiming, UnknownPreset};

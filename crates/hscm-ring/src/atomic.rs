//! The atomics the ring protocol is written against: std's in builds, loom's under
//! `--cfg loom` so the model checker explores every interleaving of the same code.

#[cfg(loom)]
pub(crate) use loom::sync::atomic::{AtomicU32, AtomicU64, Ordering};
#[cfg(not(loom))]
pub(crate) use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

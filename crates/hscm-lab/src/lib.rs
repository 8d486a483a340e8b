//! hscm-lab: the experiment library. Today it holds the one closed-loop benchmark
//! driver ([`driver`]) that every `hscm bench` runs on (the volume, the ring and the
//! key-value store); the experiments themselves and their renderers are to follow it
//! out of the binary (docs/design.md, "Architecture").

pub mod driver;

pub use driver::{closed_loop, latency_histogram, paired, Ctx, Measured, Phase, Step};

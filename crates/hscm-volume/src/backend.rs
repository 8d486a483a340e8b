//! The device layer the volume writes through lives in hscm-durable (shared with the
//! tiered volume); this module names it where the volume's code looks for it.

pub use hscm_durable::device::{AlignedBuf, Backend, FileBackend, WriteDone, IO_ALIGN};

//! hscm-serving: the one way every front-end (`hscm nbd`, `hscm serve`, `hscm mount`)
//! and Python open a volume.
//!
//! - [`detect`] recognises a volume's kind by its header: a flat volume, a tiered
//!   volume, or a flat volume holding hscm's file system ([`Kind`]);
//! - [`open_target`] opens any kind as a block target ([`Opened::target`]), the
//!   file-system volume as its blocks; [`open_files`] mounts the file system;
//!   [`open`] picks the kind's natural face (Python's `hscm.open`);
//! - one lifecycle ([`Opened`]): the engine's owner lock is held from open to close;
//!   a tiered volume's counters are saved every few seconds while it serves (for
//!   `hscm volume stats`); [`Opened::close`] flushes what is owed, stops the helpers and
//!   closes the engine, refusing while anything else still holds it;
//!   [`stop_on_signals`] is the flag SIGINT and SIGTERM set, installed before
//!   anything can connect.
//!
//! - [`create`] makes a volume of any kind ([`Layout`]), checked against this
//!   machine's memory; [`describe`] reads any kind's header without opening it
//!   (`hscm volume info` and `check`), [`saved_counters`] a tiered volume's counters.
//!
//! Errors name the path and what was wrong; they carry no command-line flag text (a
//! front-end adds its own hints).

mod create;
mod error;
mod inspect;
mod kind;
mod lifecycle;
mod open;

pub use create::{create, CreateSpec, Created, Layout, MirrorSpec};
pub use error::{Error, Result};
pub use inspect::{describe, saved_counters, Description};
pub use kind::{detect, Kind};
pub use lifecycle::stop_on_signals;
// The type of [`FilesOptions::ram_policy`], so callers name it where they set it.
pub use hscm_policy::cache::PolicySpec;
pub use open::{
    open, open_files, open_target, require_files, Engine, FilesOptions, Opened, TargetOptions,
    SERVED_STATS_EVERY,
};

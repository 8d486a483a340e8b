//! Everything hscm prints goes through here, so that no write can panic.
//!
//! `outln!`/`out!` write to standard output and return an error the caller passes on
//! with `?`: a closed pipe (`hscm … | head -1`) then ends the command quietly, a full
//! disk with a clear error ([`StdoutError`]). `note!` writes a line to standard error
//! and ignores a failure there (nowhere is left to report it).

use std::fmt;
use std::io::{self, Write};

/// Writes formatted text to standard output; `?` passes a failure on.
#[macro_export]
macro_rules! out {
    ($($arg:tt)*) => {
        $crate::out::write_stdout(format_args!($($arg)*), false)
    };
}

/// Writes a formatted line to standard output; `?` passes a failure on.
#[macro_export]
macro_rules! outln {
    () => {
        $crate::out::write_stdout(format_args!(""), true)
    };
    ($($arg:tt)*) => {
        $crate::out::write_stdout(format_args!($($arg)*), true)
    };
}

/// Writes a line to standard error, for progress and notes; never fails.
#[macro_export]
macro_rules! note {
    ($($arg:tt)*) => {
        $crate::out::write_stderr(format_args!($($arg)*))
    };
}

/// Standard output could not be written (closed, or its disk is full).
#[derive(Debug)]
pub struct StdoutError(pub io::Error);

impl fmt::Display for StdoutError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "cannot write to standard output: {}", self.0)
    }
}

impl std::error::Error for StdoutError {}

pub fn write_stdout(args: fmt::Arguments<'_>, newline: bool) -> Result<(), StdoutError> {
    let mut o = io::stdout().lock();
    o.write_fmt(args)
        .and_then(|()| if newline { o.write_all(b"\n") } else { Ok(()) })
        // Flushed per line, so a full disk or a closed pipe shows up at the line that
        // met it, not at exit (where Rust would swallow it).
        .and_then(|()| o.flush())
        .map_err(StdoutError)
}

pub fn write_stderr(args: fmt::Arguments<'_>) {
    let mut e = io::stderr().lock();
    let _ = e.write_fmt(args).and_then(|()| e.write_all(b"\n"));
}

/// Prints `value` as pretty JSON on standard output.
pub fn json(value: &impl serde::Serialize) -> anyhow::Result<()> {
    let text = serde_json::to_string_pretty(value)?;
    outln!("{text}")?;
    Ok(())
}

/// Prints a command's result: as pretty JSON (the stable contract) when `json`, else
/// through its text renderer. One rule for every command that has both.
pub fn emit<T: serde::Serialize>(
    value: &T,
    json: bool,
    text: impl FnOnce(&T) -> anyhow::Result<()>,
) -> anyhow::Result<()> {
    if json {
        self::json(value)
    } else {
        text(value)
    }
}

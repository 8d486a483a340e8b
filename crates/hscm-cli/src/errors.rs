//! How the binary reports a failure: `render_error` turns an error chain into one
//! message for people (with the hint a library error calls for, naming the flag the
//! library does not know), `error_json` into one object for scripts. What it prints
//! goes through hscm-lab's `outln!`/`note!` (crate `hscm_lab::out`).

use std::io;

use hscm_lab::out::StdoutError;

/// True when the command failed only because its reader went away: it ends quietly.
pub fn is_closed_pipe(e: &anyhow::Error) -> bool {
    e.chain().any(|c| {
        c.downcast_ref::<StdoutError>()
            .is_some_and(|s| s.0.kind() == io::ErrorKind::BrokenPipe)
    })
}

/// One line for people: each cause once (a library error that already prints its
/// source is not followed by that source again), then the hint a cause calls for.
pub fn render_error(e: &anyhow::Error) -> String {
    let mut text = String::new();
    for cause in e.chain() {
        let part = escape_for_terminal(&cause.to_string(), 500);
        if text.contains(&part) {
            continue;
        }
        if !text.is_empty() {
            text.push_str(": ");
        }
        text.push_str(&part);
    }
    if let Some(h) = hint(e) {
        text.push_str(&format!(" ({h})"));
    }
    text
}

/// What a device-owning error means for the user, wherever it was met: the flat
/// volume's or the device layer's, alone or as the source of the tiered volume's or
/// the serving layer's (each cause is on the chain).
enum Refusal {
    Exists,
    InUse,
}

fn refusal(c: &(dyn std::error::Error + 'static)) -> Option<Refusal> {
    use hscm_durable::device::DeviceError;
    if let Some(e) = c.downcast_ref::<hscm_volume::Error>() {
        return match e {
            hscm_volume::Error::AlreadyExists { .. } => Some(Refusal::Exists),
            hscm_volume::Error::Locked { .. } => Some(Refusal::InUse),
            _ => None,
        };
    }
    match c.downcast_ref::<DeviceError>()? {
        DeviceError::AlreadyExists { .. } => Some(Refusal::Exists),
        DeviceError::Lock(hscm_durable::LockError::Locked { .. }) => Some(Refusal::InUse),
        _ => None,
    }
}

/// What the user can do about an error the libraries describe without naming flags.
fn hint(e: &anyhow::Error) -> Option<&'static str> {
    e.chain().find_map(|c| {
        if let Some(r) = refusal(c) {
            return Some(match r {
                Refusal::Exists => "use --force to overwrite it",
                Refusal::InUse => {
                    "stop the process that has it open, or wait for it to close the volume"
                }
            });
        }
        match c.downcast_ref::<hscm_serving::Error>() {
            Some(hscm_serving::Error::WouldNotOpenHere { .. }) => {
                return Some("--larger-than-ram creates a flat volume anyway; a tiered volume's --ram must fit")
            }
            Some(hscm_serving::Error::Unsupported { .. }) => {
                return Some("a tiered volume is served read-write with the durability it was created with: leave out --read-only and --durability")
            }
            _ => {}
        }
        use hscm_fuse::mounts::{HscmUnmountError, MountPointError, UnmountError};
        match c.downcast_ref() {
            Some(MountPointError::NotEmpty(_)) => return Some("pass --nonempty to mount over it anyway"),
            Some(MountPointError::AlreadyHscm { .. }) => return Some("unmount it first with `hscm umount`"),
            _ => {}
        }
        if let Some(HscmUnmountError::Unmount { source: UnmountError::Busy, .. }) = c.downcast_ref() {
            return Some("is a process using it? `fuser -vm MOUNTPOINT` lists them");
        }
        match c.downcast_ref::<hscm_kv::Error>()? {
            hscm_kv::Error::ValueTooLarge { .. } => Some("see --max-value"),
            hscm_kv::Error::Locked { .. } => {
                Some("stop the process that has the store open, or wait for it to close it")
            }
            _ => None,
        }
    })
}

/// The error as one JSON object, for commands run with `--json`.
pub fn error_json(e: &anyhow::Error) -> serde_json::Value {
    serde_json::json!({ "ok": false, "error": render_error(e) })
}

/// A command line clap refused, as one JSON object for a command run with `--json`:
/// the same `ok` and `error` as any failure, and `usage: true` (exit status 2).
pub fn usage_error_json(e: &clap::Error) -> serde_json::Value {
    let text = e.to_string();
    let first = text
        .lines()
        .find(|l| !l.trim().is_empty())
        .unwrap_or("")
        .trim_start_matches("error: ");
    serde_json::json!({ "ok": false, "error": escape_for_terminal(first, 500), "usage": true })
}

/// Makes text from untrusted input safe to print: control characters and invalid UTF-8
/// shown escaped (`\x1b`, `\u{fffd}`), and at most `max` characters kept.
pub fn escape_for_terminal(s: &str, max: usize) -> String {
    let mut out = String::new();
    for (i, c) in s.chars().enumerate() {
        if i >= max {
            out.push('…');
            break;
        }
        if c.is_control() && c != '\n' && c != '\t' {
            out.extend(c.escape_default());
        } else {
            out.push(c);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_cause_is_printed_once() {
        let os = io::Error::from_raw_os_error(2);
        let lib = hscm_volume::Error::Io {
            what: "cannot open v.hscm".into(),
            source: os,
        };
        let e = anyhow::Error::new(lib).context("check of v.hscm failed");
        let text = render_error(&e);
        assert_eq!(text.matches("os error 2").count(), 1, "{text}");
        assert!(text.starts_with("check of v.hscm failed: cannot open v.hscm"));
    }

    #[test]
    fn control_bytes_are_escaped_and_long_text_cut() {
        assert_eq!(escape_for_terminal("a\u{1b}[2Jb", 100), "a\\u{1b}[2Jb");
        assert_eq!(escape_for_terminal("abcdef", 3), "abc…");
    }

    #[test]
    fn hints_name_the_flag_the_library_does_not() {
        let e = anyhow::Error::new(hscm_volume::Error::AlreadyExists {
            path: "v".into(),
            kind: "a file",
        });
        assert!(render_error(&e).ends_with("(use --force to overwrite it)"));
        assert_eq!(error_json(&e)["ok"], false);
        // The same error met through the serving layer keeps its hint.
        let e = anyhow::Error::new(hscm_serving::Error::Volume(
            hscm_volume::Error::AlreadyExists {
                path: "v".into(),
                kind: "a file",
            },
        ));
        assert!(render_error(&e).ends_with("(use --force to overwrite it)"));
        // And a tiered volume's device refusal, through the serving layer.
        let e = anyhow::Error::new(hscm_serving::Error::Tier(hscm_tier::Error::Device(
            hscm_durable::device::DeviceError::AlreadyExists {
                path: "t".into(),
                kind: "a file",
            },
        )));
        assert!(render_error(&e).ends_with("(use --force to overwrite it)"));
    }
}

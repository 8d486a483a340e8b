//! `hscm status` as text: one instance per block, the same snapshot `--json` prints.

use std::fmt;
use std::path::Path;

use hscm_durable::units::human_bytes;

use crate::Status;

impl Status {
    /// Whether this instance serves `target`: its volume, its mount point, or its
    /// socket.
    pub fn serves(&self, target: &Path) -> bool {
        let canonical = std::fs::canonicalize(target).unwrap_or_else(|_| target.to_path_buf());
        let c = canonical.to_string_lossy();
        let t = target.to_string_lossy();
        self.volume == c || self.address == c || self.address == t || self.address.contains(&*c)
    }
}

/// `text` with every control character but the line break shown escaped
/// (`\u{1b}`), so that what an instance reports (its paths, its health's reason)
/// cannot move a terminal's cursor, retitle it or hide lines.
pub fn harmless(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if c.is_control() && c != '\n' {
            out.extend(c.escape_default());
        } else {
            out.push(c);
        }
    }
    out
}

impl fmt::Display for Status {
    /// The text, made [`harmless`]: every field may come from another user's
    /// process.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut text = String::new();
        self.write_text(&mut text)?;
        f.write_str(&harmless(&text))
    }
}

impl Status {
    fn write_text(&self, f: &mut impl fmt::Write) -> fmt::Result {
        let s = self;
        writeln!(
            f,
            "{} {} (pid {}): {} volume {}",
            s.frontend, s.address, s.pid, s.kind, s.volume
        )?;
        let used = s
            .used_bytes
            .map_or(String::new(), |u| format!(", {} used", human_bytes(u)));
        writeln!(
            f,
            "  size {}{used}; {}; up {:.0} s",
            human_bytes(s.size_bytes),
            s.durability,
            s.uptime_s
        )?;
        if s.load.total_bytes > 0 {
            writeln!(
                f,
                "  loaded {} of {} ({})",
                human_bytes(s.load.loaded_bytes),
                human_bytes(s.load.total_bytes),
                s.load.state
            )?;
        }
        match s.dirty_max_bytes {
            Some(max) => writeln!(
                f,
                "  dirty {} of at most {}",
                human_bytes(s.dirty_bytes),
                human_bytes(max)
            )?,
            None if s.dirty_bytes > 0 => writeln!(f, "  dirty {}", human_bytes(s.dirty_bytes))?,
            None => {}
        }
        if let Some(j) = &s.journal {
            writeln!(
                f,
                "  journal {} of {} in use, {} checkpoints",
                human_bytes(j.in_use_bytes),
                human_bytes(j.size_bytes),
                j.checkpoints
            )?;
        }
        // A tiered volume counts its device requests, not their bytes.
        let written = if s.device.written_bytes == 0 && s.device.writes > 0 {
            String::new()
        } else {
            format!(" ({})", human_bytes(s.device.written_bytes))
        };
        writeln!(
            f,
            "  device: {} writes{written}, {} syncs, {} reads",
            s.device.writes, s.device.syncs, s.device.reads
        )?;
        for t in &s.tiers {
            writeln!(
                f,
                "  tier {}: {} hit ratio, {} of {} held, {} dirty",
                t.tier,
                t.hit_ratio()
                    .map_or("no lookups yet".into(), |r| format!("{:.1}%", r * 100.0)),
                human_bytes(t.occupancy_bytes),
                human_bytes(t.capacity_bytes),
                human_bytes(t.dirty_bytes)
            )?;
        }
        if let Some(fs) = &s.fs {
            writeln!(
                f,
                "  file system: {} free of {}, {} of {} inodes free, {} of file data in RAM",
                human_bytes(fs.free_bytes),
                human_bytes(fs.size_bytes),
                fs.free_files,
                fs.files,
                human_bytes(fs.ram_bytes)
            )?;
        }
        if s.frontend != "mount" {
            writeln!(
                f,
                "  clients: {} connected, {} since start",
                s.clients.connected, s.clients.total
            )?;
        }
        let requests: u64 = s.ops.iter().map(|o| o.count).sum();
        let errors: u64 = s.errors.values().sum();
        writeln!(f, "  requests: {requests} served, {errors} errors")?;
        if let Some(fuse) = &s.fuse {
            writeln!(
                f,
                "  transport: {} ({} requests by the rings)",
                fuse.kind, fuse.ring_requests
            )?;
        }
        match (&s.health.ok, &s.health.reason) {
            (true, _) => write!(f, "  health: ok")?,
            (false, Some(why)) => write!(f, "  health: FAILED, refusing writes: {why}")?,
            (false, None) => write!(f, "  health: FAILED")?,
        }
        if let Some(h) = &s.home {
            write!(
                f,
                "\n  home: {}, {} reconnections, {} failed requests",
                if h.reachable {
                    "reachable"
                } else {
                    "NOT ANSWERING"
                },
                h.reconnects,
                h.failed_requests
            )?;
            if let Some(e) = &h.last_error {
                write!(f, "; last: {e}")?;
            }
        }
        if let Some(m) = &s.mirror {
            write!(
                f,
                "\n  mirror: generation {}, {} of {} members in sync, {} needed (on-no-quorum {})",
                m.generation,
                m.in_sync,
                m.members.len(),
                m.quorum,
                m.on_no_quorum
            )?;
            if m.crash_copy_bytes > 0 {
                write!(
                    f,
                    "; a crash now would copy at most {} to each member",
                    hscm_durable::units::human_bytes(m.crash_copy_bytes)
                )?;
            }
            if let Some(why) = &m.fenced {
                write!(f, "\n    FENCED: {why}")?;
            }
            for x in &m.members {
                write!(f, "\n    {}: {}", x.name, x.state)?;
                if x.to_copy_bytes > 0 {
                    write!(
                        f,
                        ", {} to copy ({} copied)",
                        hscm_durable::units::human_bytes(x.to_copy_bytes),
                        hscm_durable::units::human_bytes(x.copied_bytes)
                    )?;
                }
                if let Some(why) = &x.absent {
                    write!(f, ", absent: {why}")?;
                }
            }
        }
        if let Some(m) = &s.metrics_address {
            write!(f, "\n  metrics: {m}")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escape_sequences_in_a_status_print_harmless() {
        let s = Status {
            volume: "/v\u{1b}]0;owned\u{7}\u{1b}[2J".into(),
            health: crate::Health {
                ok: false,
                reason: Some("bad\r\u{1b}[31mred".into()),
            },
            ..Default::default()
        };
        let text = s.to_string();
        assert!(
            !text.contains('\u{1b}') && !text.contains('\u{7}') && !text.contains('\r'),
            "{text:?}"
        );
        assert!(text.contains("\\u{1b}]0;owned"), "{text}");
        assert!(text.lines().count() > 3, "line breaks kept");
    }
}

//! The systemd units the package ships are sandboxed: `systemd-analyze security`
//! rates each "OK" or better (exposure under 5; the mount unit cannot have a mount
//! namespace of its own, so it keeps more). Where systemd-analyze is missing, the
//! test says so and passes.

use std::path::Path;
use std::process::Command;

/// The overall exposure `systemd-analyze security --offline` gives `unit`.
fn exposure(unit: &Path) -> Option<f64> {
    let o = Command::new("systemd-analyze")
        .args(["security", "--offline=true", "--no-pager"])
        .arg(unit)
        .output()
        .ok()?;
    let text = String::from_utf8_lossy(&o.stdout).to_string() + &String::from_utf8_lossy(&o.stderr);
    let line = text
        .lines()
        .find(|l| l.contains("Overall exposure level"))?;
    line.split(": ")
        .nth(1)?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

#[test]
fn every_unit_is_sandboxed() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../dist/systemd");
    if exposure(&dir.join("hscm-nbd@.service")).is_none() {
        eprintln!("skipped: no systemd-analyze security here");
        return;
    }
    for (unit, at_most) in [
        ("hscm-nbd@.service", 2.5),
        ("hscm-serve@.service", 2.5),
        ("hscm-mount@.service", 5.0),
    ] {
        let got = exposure(&dir.join(unit)).unwrap();
        assert!(got <= at_most, "{unit}: exposure {got}, at most {at_most}");
    }
}

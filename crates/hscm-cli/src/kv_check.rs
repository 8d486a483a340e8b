//! `hscm kv check`: a store's logs, record by record.

use std::path::Path;

use anyhow::{bail, Result};

/// `hscm kv check DIR`.
pub fn check(dir: &Path, json: bool) -> Result<()> {
    let report = hscm_kv::check(dir)?;
    if json {
        outln!("{}", serde_json::to_string_pretty(&report)?)?;
    } else {
        for f in &report.files {
            outln!(
                "{}: {} records, {} bytes valid{}",
                f.path,
                f.records,
                f.valid_bytes,
                if f.torn_bytes > 0 {
                    format!(
                        ", torn tail of {} bytes (an unacknowledged write; cut on open)",
                        f.torn_bytes
                    )
                } else {
                    String::new()
                }
            )?;
        }
    }
    if let Some(e) = report.errors.first() {
        bail!("{} problem(s); first: {e}", report.errors.len());
    }
    Ok(())
}

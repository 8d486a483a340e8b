//! `check`: reads every log of a store without changing anything.

use super::*;
use crate::recovery::parse_buffer_name;

/// One log file as `check` found it.
#[derive(Debug, Clone, serde::Serialize)]
pub struct CheckedFile {
    pub path: String,
    pub records: u64,
    pub valid_bytes: u64,
    pub torn_bytes: u64,
}

/// What [`check`] found; `errors` is empty for a healthy store.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct CheckReport {
    pub files: Vec<CheckedFile>,
    pub errors: Vec<String>,
}

/// `hscm kv check`'s text: one line per log file.
impl std::fmt::Display for CheckReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        for (i, file) in self.files.iter().enumerate() {
            if i > 0 {
                writeln!(f)?;
            }
            write!(
                f,
                "{}: {} records, {} bytes valid",
                file.path, file.records, file.valid_bytes
            )?;
            if file.torn_bytes > 0 {
                write!(
                    f,
                    ", torn tail of {} bytes (an unacknowledged write; cut on open)",
                    file.torn_bytes
                )?;
            }
        }
        Ok(())
    }
}

/// Reads every log of a store without changing anything: the manifest, each device's
/// home log and any buffer logs. Damage is listed, not fatal.
pub fn check(dir: &Path) -> Result<CheckReport> {
    let manifest = Manifest::read(dir)?;
    let mut report = CheckReport::default();
    for p in &manifest.devices {
        let media = DirMedia::new(dir.join(p));
        if !media.exists(DATA_LOG) {
            report.errors.push(
                Error::MissingDevice {
                    path: media.describe(),
                    reason: format!("{DATA_LOG} is missing"),
                }
                .to_string(),
            );
            continue;
        }
        let mut logs = vec![DATA_LOG.to_string()];
        if let Ok(names) = media.list() {
            let mut buffers: Vec<String> = names
                .into_iter()
                .filter(|n| parse_buffer_name(n).is_some())
                .collect();
            buffers.sort();
            logs.extend(buffers);
        }
        for log in logs {
            let name = format!("{}/{log}", media.describe());
            let image = media
                .read(&log)
                .map_err(|e| Error::io(format!("reading {name}"), e))?;
            let mut records = 0;
            let s = record::scan(&image, |_, _| records += 1);
            if let Some(e) = s.bad_record_error(&name) {
                report.errors.push(e.to_string());
            }
            report.files.push(CheckedFile {
                path: name,
                records,
                valid_bytes: s.valid_len,
                torn_bytes: s.torn_bytes,
            });
        }
    }
    Ok(report)
}

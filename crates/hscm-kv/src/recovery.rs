//! What opening and creating a store do to its devices: the empty home log, and the
//! replay of buffer logs a crash left.

use super::*;

/// Creates a device's empty home log, durably (its name too).
pub(crate) fn create_device(media: &dyn Media) -> Result<()> {
    let what = || format!("creating {}/{DATA_LOG}", media.describe());
    media
        .open(DATA_LOG, true)
        .and_then(|f| f.sync_data())
        .and_then(|()| media.sync_dir())
        .map_err(|e| Error::io(what(), e))
}

/// A buffer log's name parsed: (idle device, segment), or None if it is not one.
pub(crate) fn parse_buffer_name(name: &str) -> Option<Option<(usize, u64)>> {
    let rest = name.strip_prefix("buffer-")?.strip_suffix(".log")?;
    Some(
        rest.split_once('-')
            .and_then(|(i, s)| Some((i.parse::<usize>().ok()?, s.parse::<u64>().ok()?))),
    )
}

/// Replays buffer logs left by a crash (or by an older layout) home, oldest first.
pub(crate) fn replay_buffers(devices: &[Device], piece: u64) -> Result<(u64, u64)> {
    let mut logs = Vec::new();
    for d in devices {
        let names = d
            .disk
            .media
            .list()
            .map_err(|e| Error::io(format!("listing {}", d.disk.media.describe()), e))?;
        for name in names {
            if name.starts_with("cache-") {
                let _ = d.disk.remove(&name);
            } else if let Some(parsed) = parse_buffer_name(&name) {
                match parsed {
                    Some((idle, seg)) if idle < devices.len() => logs.push((seg, idle, d.id, name)),
                    _ => {
                        return Err(Error::InvalidArgument(format!(
                            "{}: unexpected buffer log name (buffer-IDLE-SEGMENT.log)",
                            d.disk.path(&name)
                        )))
                    }
                }
            }
        }
    }
    logs.sort();
    let (mut replayed, mut max_seq) = (0, 0);
    for (_, idle, on, name) in &logs {
        let disk = &devices[*on].disk;
        let image = disk.read(name)?;
        let mut n = 0;
        let scanned = record::scan(&image, |_, rec| {
            n += 1;
            max_seq = max_seq.max(rec.seq);
        });
        device::warn_cut(&disk.path(name), &scanned);
        devices[*idle].append_records(&image[..scanned.valid_len as usize], piece)?;
        replayed += n;
    }
    for (_, _, on, name) in &logs {
        devices[*on].disk.remove(name)?;
    }
    // The next buffer logs reuse these names: the removals must be durable first, or a
    // power cut could bring an old log back beside a new one of the same name.
    let mut synced = std::collections::BTreeSet::new();
    for (_, _, on, _) in &logs {
        if synced.insert(*on) {
            devices[*on].disk.sync_names()?;
        }
    }
    Ok((replayed, max_seq))
}

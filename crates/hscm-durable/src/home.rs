//! Where a store lives, named as users name it: a path (a file or a block device) or
//! an NBD URI (`nbd://host/export`, `nbds://…`, `nbd+unix:///export?socket=PATH`).
//! Engines open and create their homes here, so none of them assumes a local file.

use std::path::Path;

use crate::device::{Backend, DeviceError, FileBackend, IO_ALIGN};
use crate::mirror::{is_mirror, MirrorBackend};
use crate::nbd::{is_nbd_uri, NbdBackend, NbdUri};

/// True when `name` is an NBD URI, not a path.
pub fn is_remote(name: &Path) -> bool {
    name.to_str().is_some_and(is_nbd_uri)
}

fn uri(name: &Path) -> Result<Option<NbdUri>, DeviceError> {
    match name.to_str() {
        Some(s) if is_nbd_uri(s) => NbdUri::parse(s).map(Some).map_err(DeviceError::Invalid),
        _ => Ok(None),
    }
}

/// Opens an existing home: a file or device locked against other openers, a mirror
/// whose local member is that file (`crate::mirror`), or an NBD export (writable when
/// asked).
pub fn open(name: &Path, writable: bool) -> Result<Box<dyn Backend>, DeviceError> {
    Ok(match uri(name)? {
        Some(u) => Box::new(NbdBackend::open(&u, writable)?),
        None if is_mirror(name) => Box::new(MirrorBackend::open(name, writable)?),
        None => Box::new(FileBackend::open(name, writable)?),
    })
}

/// Opens a home to read its header while another process may own it (no lock; an
/// NBD export read-only).
pub fn open_for_inspection(name: &Path) -> Result<Box<dyn Backend>, DeviceError> {
    Ok(match uri(name)? {
        Some(u) => Box::new(NbdBackend::open(&u, false)?),
        None if is_mirror(name) => Box::new(MirrorBackend::open_for_inspection(name)?),
        None => Box::new(FileBackend::open_for_inspection(name)?),
    })
}

/// Makes a home of at least `len` bytes: a new file (or, with `overwrite`, an existing
/// file or device), or an NBD export that is large enough and, unless `overwrite`,
/// whose first block is all zero (an export that holds anything is not taken).
pub fn create(name: &Path, len: u64, overwrite: bool) -> Result<Box<dyn Backend>, DeviceError> {
    let Some(u) = uri(name)? else {
        return Ok(Box::new(FileBackend::create(name, len, overwrite)?));
    };
    let home = NbdBackend::open(&u, true)?;
    if home.len() < len {
        return Err(DeviceError::Invalid(format!(
            "{u}: the export holds {} bytes; this volume needs {len}",
            home.len()
        )));
    }
    if !overwrite {
        let mut first = vec![0u8; IO_ALIGN.min(home.len()) as usize];
        home.read_at(0, &mut first).map_err(|e| DeviceError::Io {
            what: format!("cannot read the first block of {u}"),
            source: e,
        })?;
        if first.iter().any(|&b| b != 0) {
            return Err(DeviceError::AlreadyExists {
                path: u.to_string(),
                kind: "an NBD export whose first block holds data",
            });
        }
    }
    Ok(Box::new(home))
}

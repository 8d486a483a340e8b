//! Which kind of volume a file or device holds, read from its header without opening
//! it (no lock is taken, nothing is written).

use std::fmt;
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::Path;

use crate::{Error, Result};

/// A volume's kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// The durable hybrid RAM volume: all of it in RAM, every write durable on home.
    Flat,
    /// Larger than RAM: every block on home, the hot ones in DRAM (and a fast tier).
    Tiered,
    /// A flat volume formatted with hscm's file system (`hscm volume create --fs`).
    FileSystem,
}

impl Kind {
    /// The name `hscm status` and Python report (`flat`, `tiered`, `fs`).
    pub fn name(self) -> &'static str {
        match self {
            Kind::Flat => "flat",
            Kind::Tiered => "tiered",
            Kind::FileSystem => "fs",
        }
    }
}

impl fmt::Display for Kind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Kind::Flat => "flat volume",
            Kind::Tiered => "tiered volume",
            Kind::FileSystem => "volume with a file system",
        })
    }
}

/// The kind of volume at `path`: the tiered or the flat volume's magic, and for a flat
/// volume whether either superblock copy of a file system starts its data area.
pub fn detect(path: &Path) -> Result<Kind> {
    let io = |source| Error::Io {
        path: path.to_path_buf(),
        source,
    };
    let store = Store::open(path)?;
    let mut header = vec![0u8; hscm_volume::HEADER_LEN as usize];
    let got = store.read_up_to(&mut header, 0).map_err(io)?;
    let header = &header[..got];
    if header.starts_with(hscm_tier::MAGIC) {
        return Ok(Kind::Tiered);
    }
    if !header.starts_with(&hscm_volume::MAGIC) {
        return Err(Error::NotAVolume {
            path: path.to_path_buf(),
            why: if got < 8 {
                "shorter than a volume header"
            } else {
                "no hscm magic at its start"
            },
        });
    }
    let header = hscm_volume::Header::decode(header, &path.display().to_string())?;
    let mut superblocks = vec![0u8; 2 * hscm_fs::BLOCK as usize];
    let got = store
        .read_up_to(&mut superblocks, header.data_offset())
        .map_err(io)?;
    let formatted = superblocks[..got]
        .chunks(hscm_fs::BLOCK as usize)
        .any(hscm_fs::looks_formatted);
    Ok(if formatted {
        Kind::FileSystem
    } else {
        Kind::Flat
    })
}

/// What a volume's header is read from: a local file or device, or a home on an NBD
/// export (read-only, no lock taken either way).
enum Store {
    Local(File),
    Remote(Box<dyn hscm_durable::device::Backend>),
}

impl Store {
    fn open(path: &Path) -> Result<Store> {
        // A mirror's local member holds the volume past the mirror's own metadata.
        if hscm_durable::home::is_remote(path) || hscm_durable::mirror::is_mirror(path) {
            let home =
                hscm_durable::home::open_for_inspection(path).map_err(|e| Error::Invalid {
                    path: path.to_path_buf(),
                    why: e.to_string(),
                })?;
            return Ok(Store::Remote(home));
        }
        File::open(path)
            .map(Store::Local)
            .map_err(|source| Error::Io {
                path: path.to_path_buf(),
                source,
            })
    }

    /// Reads into `buf` from `offset` until it is full or the store ends; the bytes read.
    fn read_up_to(&self, buf: &mut [u8], offset: u64) -> std::io::Result<usize> {
        match self {
            Store::Local(file) => read_up_to(file, buf, offset),
            Store::Remote(home) => {
                let n = home.len().saturating_sub(offset).min(buf.len() as u64) as usize;
                home.read_at(offset, &mut buf[..n])?;
                Ok(n)
            }
        }
    }
}

/// Reads into `buf` from `offset` until it is full or the file ends; the bytes read.
fn read_up_to(file: &File, buf: &mut [u8], offset: u64) -> std::io::Result<usize> {
    let mut got = 0;
    while got < buf.len() {
        match file.read_at(&mut buf[got..], offset + got as u64) {
            Ok(0) => break,
            Ok(n) => got += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(got)
}

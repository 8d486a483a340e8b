//! `hscm.open`: any volume through the serving layer (hscm-serving), as the Python
//! object for its kind: `Volume` (flat), `TieredVolume`, or `FileSystem` (a volume
//! made with `--fs`, reached by path).

use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use hscm_fs::{FileSystem as Fs, Kind, Owner, ROOT};
use hscm_serving::Engine;
use hscm_tier::TieredVolume as Tiered;
use hscm_volume::Volume as Vol;
use pyo3::exceptions::{PyFileNotFoundError, PyOSError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict};

use crate::engine::{byte_buffer, read_range, Handle, Volume};
use crate::{serving_err, HscmError};

fn tier_err(e: hscm_tier::Error) -> PyErr {
    HscmError::new_err(e.to_string())
}

/// A file-system error as OSError with the errno a file system call would return.
fn fs_err(path: &str, e: hscm_fs::Error) -> PyErr {
    match e.errno() {
        2 => PyFileNotFoundError::new_err(format!("{path}: {e}")),
        errno => PyOSError::new_err((errno, format!("{path}: {e}"))),
    }
}

/// Python's value of a JSON-serialisable figure (through the json module, so the
/// shapes are exactly what `hscm … --json` prints).
fn to_python<'py>(py: Python<'py>, value: &impl serde::Serialize) -> PyResult<Bound<'py, PyAny>> {
    let text = serde_json::to_string(value).map_err(|e| HscmError::new_err(e.to_string()))?;
    py.import("json")?.call_method1("loads", (text,))
}

/// Opens the volume at `path` by its kind (flat, tiered, or with a file system).
#[pyfunction]
#[pyo3(signature = (path, read_only=false))]
fn open(py: Python<'_>, path: PathBuf, read_only: bool) -> PyResult<Py<PyAny>> {
    let opened = py
        .detach(|| hscm_serving::open(&path, read_only))
        .map_err(serving_err)?;
    Ok(match opened.into_engine() {
        Engine::Flat(v) => Py::new(py, Volume::from_engine(v, &path))?.into_any(),
        Engine::Tiered(t) => Py::new(
            py,
            TieredVolume {
                handle: Handle::from_arc(t, &path),
            },
        )?
        .into_any(),
        Engine::Files { fs, volume } => Py::new(
            py,
            FileSystem {
                handle: Handle::from_arc(fs, &path),
                volume: Mutex::new(Some(volume)),
            },
        )?
        .into_any(),
    })
}

/// The kind of volume at `path` ("flat", "tiered" or "fs"), read from its header.
#[pyfunction]
fn volume_kind(py: Python<'_>, path: PathBuf) -> PyResult<&'static str> {
    py.detach(|| hscm_serving::detect(&path))
        .map(hscm_serving::Kind::name)
        .map_err(serving_err)
}

/// A tiered volume: larger than RAM, every block on its home device, the hot ones in
/// DRAM (and a fast tier), every write durable with the volume's durability.
#[pyclass(frozen, module = "hscm._native")]
pub struct TieredVolume {
    handle: Handle<Tiered>,
}

#[pymethods]
impl TieredVolume {
    /// Creates a tiered volume of `size` bytes at `path` with `ram` bytes of DRAM for
    /// the hot blocks (sizes as ints or strings such as "64M"); `block` is the unit of
    /// caching, `policy` the DRAM tier's eviction policy (lru, fifo, clock, sieve,
    /// s3fifo, arc). Open it with `hscm.open`.
    #[staticmethod]
    #[pyo3(signature = (path, size, ram, block=None, policy=None, durability="immediate", overwrite=false))]
    #[allow(clippy::too_many_arguments)]
    fn create(
        py: Python<'_>,
        path: PathBuf,
        size: &Bound<'_, PyAny>,
        ram: &Bound<'_, PyAny>,
        block: Option<&Bound<'_, PyAny>>,
        policy: Option<&str>,
        durability: &str,
        overwrite: bool,
    ) -> PyResult<()> {
        let mut cfg = hscm_tier::TierConfig::new(
            crate::size_arg("size", size)?,
            crate::size_arg("ram", ram)?,
        );
        if let Some(block) = block {
            cfg.block = u32::try_from(crate::size_arg("block", block)?)
                .map_err(|_| PyValueError::new_err("block: at most 1M"))?;
        }
        if let Some(name) = policy {
            cfg.eviction = hscm_policy::cache::EvictionName::from_name(name).ok_or_else(|| {
                let known: Vec<_> = hscm_policy::cache::EvictionName::ALL
                    .iter()
                    .map(|e| e.name())
                    .collect();
                PyValueError::new_err(format!(
                    "unknown policy {name:?} (known: {})",
                    known.join(", ")
                ))
            })?;
        }
        let spec = hscm_serving::CreateSpec {
            size: cfg.size,
            durability: crate::engine::durability(Some(durability))?.expect("given"),
            layout: hscm_serving::Layout::Tiered {
                config: cfg,
                fast_path: None,
            },
            overwrite,
            larger_than_ram: false,
            mirror: None,
        };
        py.detach(|| hscm_serving::create(&path, &spec))
            .map(drop)
            .map_err(crate::serving_err)
    }

    /// Bytes the volume holds.
    #[getter]
    fn size(&self) -> PyResult<u64> {
        self.handle.with(|v| Ok(v.size()))
    }

    /// Its configuration: size, block, ram, eviction, admission, sequential_cutoff,
    /// durability and the fast tier (as `hscm volume info --json` prints it).
    fn config<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let cfg = self.handle.with(|v| Ok(*v.config()))?;
        to_python(py, &cfg)
    }

    /// The counters: hits, partial hits and misses per tier and operation, bypasses,
    /// promotions, evictions, occupancy, device I/O (as `hscm volume stats --json`).
    fn stats<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let counters = self.handle.with(|v| Ok(v.stats()))?;
        to_python(py, &counters)
    }

    /// `length` bytes at `offset`.
    fn read<'py>(
        &self,
        py: Python<'py>,
        offset: u64,
        length: usize,
    ) -> PyResult<Bound<'py, PyBytes>> {
        read_range(py, &self.handle, offset, length)
    }

    /// Writes `data` (bytes or any contiguous buffer) at `offset`; durable when this
    /// returns if the volume's durability is immediate, else at the next flush.
    fn write(&self, py: Python<'_>, offset: u64, data: &Bound<'_, PyAny>) -> PyResult<usize> {
        let bytes = byte_buffer(data)?.to_vec(py)?;
        self.handle.with(|v| {
            py.detach(|| v.write_at(offset, &bytes, hscm_block::WriteFlags::NONE))
                .map_err(tier_err)
        })?;
        Ok(bytes.len())
    }

    /// Makes every completed write durable.
    fn flush(&self, py: Python<'_>) -> PyResult<()> {
        self.handle
            .with(|v| py.detach(|| v.flush()).map_err(tier_err))
    }

    /// Replays a block trace (any format `hscm.sim.cache` reads, detected when
    /// `format` is None) through this volume: each distinct key gets its own block, a
    /// read reads it, a write rewrites its own bytes (the data is unchanged). Returns
    /// the per-tier hits and misses of this replay, as `hscm volume replay --json`
    /// prints them; for the same policy and size they equal `hscm.sim.cache`'s.
    #[pyo3(signature = (trace, format=None))]
    fn replay<'py>(
        &self,
        py: Python<'py>,
        trace: PathBuf,
        format: Option<&str>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let format = format
            .map(hscm_sweep::vmsim::parse_request_format)
            .transpose()
            .map_err(PyValueError::new_err)?;
        let replayed = self.handle.with(|v| {
            py.detach(|| {
                let reader = hscm_trace::RequestReader::open(&trace, format, v.config().block)
                    .map_err(|e| anyhow::anyhow!("reading {}: {e}", trace.display()))?;
                hscm_sweep::replay::replay(v, reader, &mut |_| {})
            })
            .map_err(crate::py_err)
        })?;
        to_python(py, &replayed)
    }

    /// Writes dirty blocks home, saves the counters and closes; later calls raise.
    fn close(&self, py: Python<'_>) -> PyResult<()> {
        match self.handle.take(py)? {
            Some(v) => py.detach(|| v.close()).map_err(tier_err),
            None => Ok(()),
        }
    }
}

crate::closable!(TieredVolume);

/// The file system of a volume made with `--fs`, reached by path ("/dir/file") without
/// mounting it: for scripts that fill, inspect or copy out a volume.
#[pyclass(frozen, module = "hscm._native")]
pub struct FileSystem {
    handle: Handle<Fs>,
    /// The volume under the file system, closed after it.
    volume: Mutex<Option<Arc<Vol>>>,
}

/// The inode at `path`, walked from the root.
fn resolve(fs: &Fs, path: &str) -> hscm_fs::Result<u64> {
    let mut ino = ROOT;
    for part in path.split('/').filter(|p| !p.is_empty() && *p != ".") {
        ino = fs.lookup(ino, part.as_bytes())?.ino;
    }
    Ok(ino)
}

/// The directory holding `path` and the last name in it.
fn split(path: &str) -> PyResult<(&str, &str)> {
    let trimmed = path.trim_end_matches('/');
    let (dir, name) = trimmed.rsplit_once('/').unwrap_or(("", trimmed));
    if name.is_empty() || name == "." || name == ".." {
        return Err(PyValueError::new_err(format!("{path:?} names no file")));
    }
    Ok((dir, name))
}

fn kind_name(kind: Kind) -> &'static str {
    match kind {
        Kind::File => "file",
        Kind::Dir => "dir",
        Kind::Symlink => "symlink",
        Kind::Fifo => "fifo",
        Kind::Socket => "socket",
        Kind::CharDevice => "char-device",
        Kind::BlockDevice => "block-device",
    }
}

fn caller() -> Owner {
    Owner {
        uid: rustix::process::getuid().as_raw(),
        gid: rustix::process::getgid().as_raw(),
    }
}

#[pymethods]
impl FileSystem {
    /// The names in the directory at `path`, sorted.
    #[pyo3(signature = (path="/"))]
    fn listdir(&self, py: Python<'_>, path: &str) -> PyResult<Vec<String>> {
        self.handle.with(|fs| {
            py.detach(|| {
                let ino = resolve(fs, path)?;
                fs.readdir(ino)
            })
            .map(|entries| {
                let mut names: Vec<String> = entries
                    .into_iter()
                    .map(|(name, _, _)| String::from_utf8_lossy(&name).into_owned())
                    .filter(|n| n != "." && n != "..")
                    .collect();
                names.sort();
                names
            })
            .map_err(|e| fs_err(path, e))
        })
    }

    /// {"size", "kind", "mode", "uid", "gid", "nlink", "mtime"} of the file at `path`.
    fn stat<'py>(&self, py: Python<'py>, path: &str) -> PyResult<Bound<'py, PyDict>> {
        let a = self.handle.with(|fs| {
            py.detach(|| fs.getattr(resolve(fs, path)?))
                .map_err(|e| fs_err(path, e))
        })?;
        let d = PyDict::new(py);
        d.set_item("size", a.size)?;
        d.set_item("kind", kind_name(a.kind))?;
        d.set_item("mode", a.perm)?;
        d.set_item("uid", a.uid)?;
        d.set_item("gid", a.gid)?;
        d.set_item("nlink", a.nlink)?;
        d.set_item(
            "mtime",
            a.mtime.secs as f64 + f64::from(a.mtime.nanos) * 1e-9,
        )?;
        Ok(d)
    }

    /// The whole content of the file at `path`.
    fn read<'py>(&self, py: Python<'py>, path: &str) -> PyResult<Bound<'py, PyBytes>> {
        let data = self.handle.with(|fs| {
            py.detach(|| {
                let ino = resolve(fs, path)?;
                let size = fs.getattr(ino)?.size;
                let mut out = Vec::with_capacity(usize::try_from(size).unwrap_or(0));
                while (out.len() as u64) < size {
                    let want = (size - out.len() as u64).min(1 << 20) as u32;
                    let piece = fs.read(ino, out.len() as u64, want)?;
                    if piece.is_empty() {
                        break;
                    }
                    out.extend_from_slice(&piece);
                }
                Ok(out)
            })
            .map_err(|e| fs_err(path, e))
        })?;
        Ok(PyBytes::new(py, &data))
    }

    /// Creates or replaces the file at `path` with `data` (mode 0644, owned by the
    /// caller); durable when this returns if the file system's durability is
    /// immediate, else at the next `sync`.
    fn write(&self, py: Python<'_>, path: &str, data: &Bound<'_, PyAny>) -> PyResult<usize> {
        let bytes = byte_buffer(data)?.to_vec(py)?;
        let (dir, name) = split(path)?;
        self.handle.with(|fs| {
            py.detach(|| {
                let parent = resolve(fs, dir)?;
                let ino = match fs.lookup(parent, name.as_bytes()) {
                    Ok(a) => {
                        fs.truncate(a.ino, 0)?;
                        a.ino
                    }
                    Err(hscm_fs::Error::NotFound) => {
                        fs.mknod(parent, name.as_bytes(), Kind::File, 0o644, 0, caller())?
                            .ino
                    }
                    Err(e) => return Err(e),
                };
                fs.write_whole(ino, 0, &bytes)
            })
            .map_err(|e| fs_err(path, e))
        })?;
        Ok(bytes.len())
    }

    /// Creates the directory at `path` (mode 0755).
    fn mkdir(&self, py: Python<'_>, path: &str) -> PyResult<()> {
        let (dir, name) = split(path)?;
        self.handle.with(|fs| {
            py.detach(|| fs.mkdir(resolve(fs, dir)?, name.as_bytes(), 0o755, caller()))
                .map(drop)
                .map_err(|e| fs_err(path, e))
        })
    }

    /// Removes the file (or, with a directory's path, the empty directory) at `path`.
    fn remove(&self, py: Python<'_>, path: &str) -> PyResult<()> {
        let (dir, name) = split(path)?;
        self.handle.with(|fs| {
            py.detach(|| {
                let parent = resolve(fs, dir)?;
                match fs.lookup(parent, name.as_bytes())?.kind {
                    Kind::Dir => fs.rmdir(parent, name.as_bytes()),
                    _ => fs.unlink(parent, name.as_bytes()),
                }
            })
            .map_err(|e| fs_err(path, e))
        })
    }

    /// {"block_size", "blocks", "free_blocks", "files", "free_files"}.
    fn statfs<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let s = self.handle.with(|fs| Ok(fs.statfs()))?;
        let d = PyDict::new(py);
        d.set_item("block_size", s.block_size)?;
        d.set_item("blocks", s.blocks)?;
        d.set_item("free_blocks", s.free_blocks)?;
        d.set_item("files", s.files)?;
        d.set_item("free_files", s.free_files)?;
        Ok(d)
    }

    /// Makes every change so far durable.
    fn sync(&self, py: Python<'_>) -> PyResult<()> {
        self.handle.with(|fs| {
            py.detach(|| fs.sync_all())
                .map_err(|e| fs_err(&self.handle.path, e))
        })
    }

    /// Commits, then closes the file system and the volume; later calls raise.
    fn close(&self, py: Python<'_>) -> PyResult<()> {
        if let Some(fs) = self.handle.take(py)? {
            py.detach(|| fs.sync_all())
                .map_err(|e| fs_err(&self.handle.path, e))?;
        }
        let volume = self
            .volume
            .lock()
            .map_err(|_| HscmError::new_err("lock poisoned"))?
            .take();
        if let Some(volume) = volume {
            let volume = Arc::try_unwrap(volume)
                .map_err(|_| HscmError::new_err(format!("{} is still in use", self.handle.path)))?;
            py.detach(|| volume.close())
                .map_err(|e| HscmError::new_err(e.to_string()))?;
        }
        Ok(())
    }
}

crate::closable!(FileSystem);

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(open, m)?)?;
    m.add_function(wrap_pyfunction!(volume_kind, m)?)?;
    m.add_class::<TieredVolume>()?;
    m.add_class::<FileSystem>()?;
    Ok(())
}

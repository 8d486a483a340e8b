//! The engines for Python: the durable RAM volume and the key-value store. Every call
//! that may wait for a device releases the GIL.

use std::path::PathBuf;
use std::time::Duration;

use hscm_kv::{KvOptions, KvStore, Mode};
use hscm_volume::{CreateOptions, Durability, LoadState, Volume as Vol};
use pyo3::buffer::PyBuffer;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict};
use std::sync::{Arc, RwLock};

use crate::HscmError;

fn vol_err(e: hscm_volume::Error) -> PyErr {
    HscmError::new_err(e.to_string())
}

fn kv_err(e: hscm_kv::Error) -> PyErr {
    HscmError::new_err(e.to_string())
}

/// Any contiguous buffer (bytes, bytearray, memoryview, a numpy array of any dtype)
/// as bytes: buffers of other item types are viewed through `memoryview.cast("B")`.
pub(crate) fn byte_buffer(obj: &Bound<'_, PyAny>) -> PyResult<PyBuffer<u8>> {
    match PyBuffer::<u8>::get(obj) {
        Ok(b) => Ok(b),
        Err(_) => {
            let view = obj
                .py()
                .import("builtins")?
                .getattr("memoryview")?
                .call1((obj,))?
                .call_method1("cast", ("B",))?;
            PyBuffer::<u8>::get(&view)
        }
    }
}

pub(crate) fn durability(name: Option<&str>) -> PyResult<Option<Durability>> {
    name.map(|n| n.parse::<Durability>())
        .transpose()
        .map_err(|e| PyValueError::new_err(e.to_string()))
}

/// An engine a Python object owns until `close`: calls share it, `close` takes it,
/// and every call after that raises.
///
/// The lock guards only the slot, for the moment it takes to clone or take the
/// `Arc`: no call holds it while the GIL is released, so a `close` on one thread
/// cannot deadlock with a call on another (the call would hold the lock waiting for
/// the GIL, `close` the GIL waiting for the lock). `close` waits, without the GIL,
/// for the calls in flight to let go of the engine.
pub(crate) struct Handle<T> {
    inner: RwLock<Option<Arc<T>>>,
    pub(crate) path: String,
}

impl<T: Send + Sync> Handle<T> {
    fn new(engine: T, path: &std::path::Path) -> Self {
        Self::from_arc(Arc::new(engine), path)
    }

    /// An engine the serving layer opened (this handle must be its only holder).
    pub(crate) fn from_arc(engine: Arc<T>, path: &std::path::Path) -> Self {
        Handle {
            inner: RwLock::new(Some(engine)),
            path: path.display().to_string(),
        }
    }

    fn poisoned(&self) -> PyErr {
        HscmError::new_err(format!("{}: lock poisoned", self.path))
    }

    pub(crate) fn with<R>(&self, f: impl FnOnce(&T) -> PyResult<R>) -> PyResult<R> {
        let engine = self
            .inner
            .read()
            .map_err(|_| self.poisoned())?
            .clone()
            .ok_or_else(|| HscmError::new_err(format!("{} is closed", self.path)))?;
        f(&engine)
    }

    /// The engine, once, after every call in flight has returned (waited for
    /// without the GIL); None when already closed.
    pub(crate) fn take(&self, py: Python<'_>) -> PyResult<Option<T>> {
        let Some(mut engine) = self.inner.write().map_err(|_| self.poisoned())?.take() else {
            return Ok(None);
        };
        Ok(Some(py.detach(|| loop {
            match Arc::try_unwrap(engine) {
                Ok(e) => break e,
                Err(shared) => {
                    engine = shared;
                    std::thread::sleep(Duration::from_millis(1));
                }
            }
        })))
    }

    pub(crate) fn is_closed(&self) -> bool {
        self.inner.read().map_or(true, |g| g.is_none())
    }
}

/// `length` bytes at `offset` of any block target a Python object owns: refused before
/// allocating when the range ends past the end, so an absurd length is an error, not
/// an abort.
pub(crate) fn read_range<'py, T: hscm_block::BlockTarget + Send + Sync>(
    py: Python<'py>,
    handle: &Handle<T>,
    offset: u64,
    length: usize,
) -> PyResult<Bound<'py, PyBytes>> {
    let data = handle.with(|t| {
        let size = t.size();
        if offset.checked_add(length as u64).is_none_or(|end| end > size) {
            return Err(HscmError::new_err(format!(
                "a read of {length} bytes at offset {offset} ends past the end of {} ({size} bytes)",
                handle.path
            )));
        }
        let mut buf = vec![0u8; length];
        py.detach(|| t.read_at(offset, &mut buf))
            .map_err(|e| HscmError::new_err(e.to_string()))?;
        Ok(buf)
    })?;
    Ok(PyBytes::new(py, &data))
}

/// A durable RAM volume: reads from RAM, every write durable before it returns
/// (immediate), on the device and durable at the next flush (on-flush), or in RAM and
/// durable at the next flush (write-back).
#[pyclass(frozen, module = "hscm._native")]
pub struct Volume {
    handle: Handle<Vol>,
}

impl Volume {
    fn with<R>(&self, f: impl FnOnce(&Vol) -> PyResult<R>) -> PyResult<R> {
        self.handle.with(f)
    }

    /// The Python object of a flat volume the serving layer opened.
    pub(crate) fn from_engine(volume: Arc<Vol>, path: &std::path::Path) -> Volume {
        Volume {
            handle: Handle::from_arc(volume, path),
        }
    }
}

#[pymethods]
impl Volume {
    /// Creates a volume of `size` bytes at `path` (a file, or a block device).
    #[staticmethod]
    /// Sizes are ints (bytes) or strings such as "64M", as the simulators take them.
    #[pyo3(signature = (path, size, durability="immediate", journal_size=None, overwrite=false))]
    fn create(
        py: Python<'_>,
        path: PathBuf,
        size: &Bound<'_, PyAny>,
        durability: &str,
        journal_size: Option<&Bound<'_, PyAny>>,
        overwrite: bool,
    ) -> PyResult<()> {
        // The one creation path, as `hscm volume create`'s; a flat volume that this
        // machine's memory could not hold is made anyway (it may be for another).
        let spec = hscm_serving::CreateSpec {
            size: crate::size_arg("size", size)?,
            durability: self::durability(Some(durability))?.expect("given"),
            layout: hscm_serving::Layout::Flat {
                chunk_size: CreateOptions::default().chunk_size,
                journal_size: journal_size
                    .map(|j| crate::size_arg("journal_size", j))
                    .transpose()?
                    .unwrap_or(0),
            },
            overwrite,
            larger_than_ram: true,
            mirror: None,
        };
        py.detach(|| hscm_serving::create(&path, &spec))
            .map(drop)
            .map_err(crate::serving_err)
    }

    /// Opens the volume at `path`; it is usable at once and warms in the background.
    /// `durability` overrides the volume's own for this session; with "write-back",
    /// `dirty_max` bounds the bytes written and not yet home (256 MiB by default).
    #[new]
    #[pyo3(signature = (path, read_only=false, durability=None, dirty_max=None))]
    fn open(
        py: Python<'_>,
        path: PathBuf,
        read_only: bool,
        durability: Option<&str>,
        dirty_max: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Self> {
        let dirty_max = dirty_max
            .map(|d| crate::size_arg("dirty_max", d))
            .transpose()?;
        let opts = hscm_serving::TargetOptions {
            durability: self::durability(durability)?,
            read_only,
            dirty_max,
            ..Default::default()
        };
        let opened = py
            .detach(|| hscm_serving::open_target(&path, &opts))
            .map_err(crate::serving_err)?;
        match opened.into_engine() {
            hscm_serving::Engine::Flat(v) => Ok(Volume::from_engine(v, &path)),
            _ => Err(HscmError::new_err(format!(
                "{} is a tiered volume: open it with hscm.open, which returns an hscm.TieredVolume",
                path.display()
            ))),
        }
    }

    /// Bytes the volume holds.
    #[getter]
    fn size(&self) -> PyResult<u64> {
        self.with(|v| Ok(v.size()))
    }

    /// The durability writes get unless a write says otherwise.
    #[getter]
    fn durability(&self) -> PyResult<&'static str> {
        self.with(|v| Ok(v.durability().name()))
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

    /// Fills `buffer` (any writable, contiguous buffer: bytearray, memoryview, numpy
    /// array) with the bytes at `offset`; returns how many.
    fn read_into(&self, py: Python<'_>, offset: u64, buffer: &Bound<'_, PyAny>) -> PyResult<usize> {
        let buffer = byte_buffer(buffer)?;
        if buffer.readonly() {
            return Err(PyValueError::new_err("read_into needs a writable buffer"));
        }
        if !buffer.is_c_contiguous() {
            return Err(PyValueError::new_err("read_into needs a contiguous buffer"));
        }
        let len = buffer.item_count();
        let data = self.with(|v| {
            let mut buf = vec![0u8; len];
            py.detach(|| v.read_at(offset, &mut buf)).map_err(vol_err)?;
            Ok(buf)
        })?;
        buffer.copy_from_slice(py, &data)?;
        Ok(len)
    }

    /// Writes `data` (bytes or any contiguous buffer) at `offset`, with the volume's
    /// durability or the one given ("immediate": durable when this returns, and in a
    /// write-back session everything before it too; "on-flush" or "write-back":
    /// durable at the next flush).
    #[pyo3(signature = (offset, data, durability=None))]
    fn write(
        &self,
        py: Python<'_>,
        offset: u64,
        data: &Bound<'_, PyAny>,
        durability: Option<&str>,
    ) -> PyResult<usize> {
        let durability = self::durability(durability)?;
        let bytes = byte_buffer(data)?.to_vec(py)?;
        self.with(|v| {
            py.detach(|| match durability {
                Some(d) => v.write_at_with(offset, &bytes, d),
                None => v.write_at(offset, &bytes),
            })
            .map_err(vol_err)
        })?;
        Ok(bytes.len())
    }

    /// Makes every completed write durable.
    fn flush(&self, py: Python<'_>) -> PyResult<()> {
        self.with(|v| py.detach(|| v.flush()).map_err(vol_err))
    }

    /// Warm-up: {"loaded_bytes", "loaded_chunks", "total_chunks", "fraction", "state"}.
    fn load_progress<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let p = self.with(|v| Ok(v.load_progress()))?;
        progress_dict(py, &p)
    }

    /// Waits for warm-up to end (or `timeout` seconds); returns the progress.
    #[pyo3(signature = (timeout=None))]
    fn wait_loaded<'py>(
        &self,
        py: Python<'py>,
        timeout: Option<f64>,
    ) -> PyResult<Bound<'py, PyDict>> {
        let timeout = timeout
            .map(|t| {
                Duration::try_from_secs_f64(t)
                    .map_err(|_| PyValueError::new_err(format!("timeout {t}: not a duration")))
            })
            .transpose()?;
        let p = self.with(|v| py.detach(|| v.wait_loaded(timeout)).map_err(vol_err))?;
        progress_dict(py, &p)
    }

    /// Flushes, checkpoints and closes; later calls raise. Closing twice is harmless.
    fn close(&self, py: Python<'_>) -> PyResult<()> {
        match self.handle.take(py)? {
            Some(v) => py.detach(|| v.close()).map_err(vol_err),
            None => Ok(()),
        }
    }
}

crate::closable!(Volume);

fn progress_dict<'py>(
    py: Python<'py>,
    p: &hscm_volume::LoadProgress,
) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("loaded_bytes", p.loaded_bytes)?;
    d.set_item("loaded_chunks", p.loaded_chunks)?;
    d.set_item("total_chunks", p.total_chunks)?;
    d.set_item(
        "fraction",
        if p.total_chunks == 0 {
            1.0
        } else {
            p.loaded_chunks as f64 / p.total_chunks as f64
        },
    )?;
    let state = match &p.state {
        LoadState::Running => "running".to_string(),
        LoadState::Done => "done".to_string(),
        LoadState::Stopped => "stopped".to_string(),
        LoadState::Failed(why) => format!("failed: {why}"),
    };
    d.set_item("state", state)?;
    Ok(d)
}

/// The key-value store: a log-structured store over one or more device directories,
/// every put durable when it returns, with Sprint's energy scheduling as a mode.
#[pyclass(frozen, module = "hscm._native")]
pub struct KeyValueStore {
    handle: Handle<KvStore>,
}

impl KeyValueStore {
    fn with<R>(&self, f: impl FnOnce(&KvStore) -> PyResult<R>) -> PyResult<R> {
        self.handle.with(f)
    }
}

#[pymethods]
impl KeyValueStore {
    /// Creates an empty store in directory `path` over `devices` device directories.
    #[staticmethod]
    #[pyo3(signature = (path, devices=1))]
    fn create(py: Python<'_>, path: PathBuf, devices: usize) -> PyResult<()> {
        py.detach(|| KvStore::create(&path, devices, None))
            .map_err(kv_err)
    }

    /// Opens the store in `path`; `mode` is standard, sprint, sprint-nopre or
    /// sprint-noparallel.
    #[new]
    #[pyo3(signature = (path, mode="standard"))]
    fn open(py: Python<'_>, path: PathBuf, mode: &str) -> PyResult<Self> {
        let mode = Mode::from_name(mode).ok_or_else(|| {
            let names: Vec<_> = Mode::ALL.iter().map(|m| m.name()).collect();
            PyValueError::new_err(format!(
                "unknown mode {mode:?} (known: {})",
                names.join(", ")
            ))
        })?;
        let opts = KvOptions {
            mode,
            ..KvOptions::default()
        };
        let s = py.detach(|| KvStore::open(&path, opts)).map_err(kv_err)?;
        Ok(KeyValueStore {
            handle: Handle::new(s, &path),
        })
    }

    /// Stores `value` under `key`; durable when this returns.
    fn put(
        &self,
        py: Python<'_>,
        key: &Bound<'_, PyAny>,
        value: &Bound<'_, PyAny>,
    ) -> PyResult<()> {
        let (k, v) = (
            byte_buffer(key)?.to_vec(py)?,
            byte_buffer(value)?.to_vec(py)?,
        );
        self.with(|s| py.detach(|| s.put(&k, &v)).map_err(kv_err))
    }

    /// The value under `key`, or None.
    fn get<'py>(
        &self,
        py: Python<'py>,
        key: &Bound<'_, PyAny>,
    ) -> PyResult<Option<Bound<'py, PyBytes>>> {
        let k = byte_buffer(key)?.to_vec(py)?;
        let v = self.with(|s| py.detach(|| s.get(&k)).map_err(kv_err))?;
        Ok(v.map(|v| PyBytes::new(py, &v)))
    }

    /// Removes `key` (durably); removing an absent key is harmless.
    fn delete(&self, py: Python<'_>, key: &Bound<'_, PyAny>) -> PyResult<()> {
        let k = byte_buffer(key)?.to_vec(py)?;
        self.with(|s| py.detach(|| s.delete(&k)).map_err(kv_err))
    }

    /// Closes the store; later calls raise. Closing twice is harmless.
    fn close(&self, py: Python<'_>) -> PyResult<()> {
        match self.handle.take(py)? {
            Some(s) => py.detach(|| s.close()).map_err(kv_err),
            None => Ok(()),
        }
    }
}

crate::closable!(KeyValueStore);

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<Volume>()?;
    m.add_class::<KeyValueStore>()?;
    Ok(())
}

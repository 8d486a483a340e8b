//! Traces for Python: readers that hand out columns a chunk at a time (as little-endian
//! bytes the Python side views as numpy arrays without a copy), and the generators and
//! converter of `hscm trace`.

use std::path::PathBuf;

use hscm_trace::{Access, Format, RequestFormat, RequestReader, TraceReader};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict};

use crate::{params_from_json, py_err, HscmError};

fn trace_err(e: hscm_trace::TraceError) -> PyErr {
    HscmError::new_err(e.to_string())
}

fn le_bytes<'py, T: Copy, const N: usize>(
    py: Python<'py>,
    values: &[T],
    to: impl Fn(T) -> [u8; N],
) -> Bound<'py, PyBytes> {
    let mut out = Vec::with_capacity(values.len() * N);
    for &v in values {
        out.extend_from_slice(&to(v));
    }
    PyBytes::new(py, &out)
}

/// A memory trace (lackey, ramulator, dramsim3, nvmain, dramsys or hscm), read a chunk
/// of references at a time.
#[pyclass(unsendable)]
pub struct MemoryTraceReader {
    reader: TraceReader,
    done: bool,
}

#[pymethods]
impl MemoryTraceReader {
    #[new]
    #[pyo3(signature = (path, format=None))]
    fn new(path: PathBuf, format: Option<&str>) -> PyResult<Self> {
        let format = format
            .map(|f| {
                Format::from_name(f).ok_or_else(|| {
                    PyValueError::new_err(format!(
                        "unknown format {f:?} (known: {})",
                        Format::NAMES.join(", ")
                    ))
                })
            })
            .transpose()?;
        Ok(MemoryTraceReader {
            reader: TraceReader::open(&path, format).map_err(trace_err)?,
            done: false,
        })
    }

    /// The format read (detected when not given).
    #[getter]
    fn format(&self) -> &'static str {
        self.reader.format().name()
    }

    /// Whether the trace holds memory requests only (below the caches).
    #[getter]
    fn post_cache(&self) -> bool {
        self.reader.post_cache()
    }

    /// Up to `n` references as a dict of little-endian column bytes: addr (u64), kind
    /// (u8: 0 read, 1 write, 2 fetch), size (u32), delta (u64); None at the end.
    fn next_chunk<'py>(
        &mut self,
        py: Python<'py>,
        n: usize,
    ) -> PyResult<Option<Bound<'py, PyDict>>> {
        if self.done {
            return Ok(None);
        }
        // Reserved up to a bound: a chunk size is a request, not a promise of data.
        let reserve = n.min(1 << 20);
        let (mut addr, mut kind, mut size, mut delta) = (
            Vec::with_capacity(reserve),
            Vec::with_capacity(reserve),
            Vec::with_capacity(reserve),
            Vec::with_capacity(reserve),
        );
        for r in self.reader.by_ref().take(n.max(1)) {
            let r = r.map_err(trace_err)?;
            addr.push(r.addr);
            kind.push(match r.kind {
                Access::Read => 0u8,
                Access::Write => 1,
                Access::Fetch => 2,
            });
            size.push(r.size);
            delta.push(r.delta);
        }
        if addr.is_empty() {
            self.done = true;
            return Ok(None);
        }
        let d = PyDict::new(py);
        d.set_item("addr", le_bytes(py, &addr, u64::to_le_bytes))?;
        d.set_item("kind", PyBytes::new(py, &kind))?;
        d.set_item("size", le_bytes(py, &size, u32::to_le_bytes))?;
        d.set_item("delta", le_bytes(py, &delta, u64::to_le_bytes))?;
        Ok(Some(d))
    }
}

/// An object-request trace (oracleGeneral, csv, lis, spc, msr or lackey), read a chunk
/// of requests at a time.
#[pyclass(unsendable)]
pub struct RequestTraceReader {
    reader: RequestReader,
    done: bool,
}

#[pymethods]
impl RequestTraceReader {
    #[new]
    #[pyo3(signature = (path, format=None, block=4096))]
    fn new(path: PathBuf, format: Option<&str>, block: u32) -> PyResult<Self> {
        let format = format
            .map(|f| {
                RequestFormat::from_name(f).ok_or_else(|| {
                    PyValueError::new_err(format!(
                        "unknown format {f:?} (known: {})",
                        RequestFormat::NAMES.join(", ")
                    ))
                })
            })
            .transpose()?;
        Ok(RequestTraceReader {
            reader: RequestReader::open(&path, format, block).map_err(trace_err)?,
            done: false,
        })
    }

    #[getter]
    fn format(&self) -> &'static str {
        self.reader.format().name()
    }

    /// Up to `n` requests as a dict of little-endian column bytes: time (u64), key
    /// (u64), size (u32), write (u8), next (i64: the index of the key's next request,
    /// -1 if never, -2 if the format does not say); None at the end.
    fn next_chunk<'py>(
        &mut self,
        py: Python<'py>,
        n: usize,
    ) -> PyResult<Option<Bound<'py, PyDict>>> {
        if self.done {
            return Ok(None);
        }
        let (mut time, mut key, mut size, mut write, mut next) =
            (Vec::new(), Vec::new(), Vec::new(), Vec::new(), Vec::new());
        for r in self.reader.by_ref().take(n.max(1)) {
            let r = r.map_err(trace_err)?;
            time.push(r.time);
            key.push(r.key);
            size.push(r.size);
            write.push(u8::from(r.write));
            next.push(match r.next {
                None => -2i64,
                Some(u64::MAX) => -1,
                Some(i) => i64::try_from(i).unwrap_or(i64::MAX),
            });
        }
        if key.is_empty() {
            self.done = true;
            return Ok(None);
        }
        let d = PyDict::new(py);
        d.set_item("time", le_bytes(py, &time, u64::to_le_bytes))?;
        d.set_item("key", le_bytes(py, &key, u64::to_le_bytes))?;
        d.set_item("size", le_bytes(py, &size, u32::to_le_bytes))?;
        d.set_item("write", PyBytes::new(py, &write))?;
        d.set_item("next", le_bytes(py, &next, i64::to_le_bytes))?;
        Ok(Some(d))
    }
}

/// `hscm trace gen` (memory references) with keyword parameters as JSON; returns how
/// many references were written.
#[pyfunction]
fn generate_memory(py: Python<'_>, params_json: &str) -> PyResult<u64> {
    use hscm_sweep::memsim;
    let params = params_from_json(params_json)?;
    py.detach(move || -> anyhow::Result<u64> {
        let a: memsim::GenArgs = hscm_sweep::params::parse(&params, &[])?;
        memsim::generate(memsim::synth_spec(&a)?, &a.output)
    })
    .map_err(py_err)
}

/// `hscm trace gen-requests` with keyword parameters as JSON; returns how many
/// requests were written.
#[pyfunction]
fn generate_requests(py: Python<'_>, params_json: &str) -> PyResult<u64> {
    use hscm_sweep::vmsim;
    let params = params_from_json(params_json)?;
    py.detach(move || -> anyhow::Result<u64> {
        let a: vmsim::GenRequestsArgs = hscm_sweep::params::parse(&params, &[])?;
        vmsim::gen_requests(vmsim::request_spec(&a)?, &a.output)
    })
    .map_err(py_err)
}

/// `hscm trace convert`; returns its report as JSON text.
#[pyfunction]
#[pyo3(signature = (input, output, from_format=None, start_pc=None, instructions=None, post_cache=false))]
fn convert(
    py: Python<'_>,
    input: PathBuf,
    output: PathBuf,
    from_format: Option<&str>,
    start_pc: Option<u64>,
    instructions: Option<u64>,
    post_cache: bool,
) -> PyResult<String> {
    use hscm_sweep::memsim;
    let from = from_format
        .map(memsim::parse_format)
        .transpose()
        .map_err(PyValueError::new_err)?;
    let report = py
        .detach(|| {
            memsim::convert(&memsim::ConvertSpec {
                input: &input,
                from,
                output: &output,
                start_pc,
                instructions,
                post_cache,
                progress: false,
            })
        })
        .map_err(py_err)?;
    serde_json::to_string(&report).map_err(|e| HscmError::new_err(e.to_string()))
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<MemoryTraceReader>()?;
    m.add_class::<RequestTraceReader>()?;
    m.add_function(wrap_pyfunction!(generate_memory, m)?)?;
    m.add_function(wrap_pyfunction!(generate_requests, m)?)?;
    m.add_function(wrap_pyfunction!(convert, m)?)?;
    Ok(())
}

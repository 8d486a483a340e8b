//! `hscm._native`: the Python package's native module. Thin: every capability is a
//! library crate's; this maps Python values in and out, releases the GIL around
//! anything long, and turns errors into Python exceptions carrying the library's
//! message. The Python side (crates/hscm-py/python/hscm) shapes results into pandas
//! and numpy.

/// The lifecycle every engine object shares, beside the class's own methods (a second
/// `#[pymethods]` block, PyO3's `multiple-pymethods`): `closed`, the context manager
/// (its exit closes and never swallows the exception) and the repr. The class has a
/// `handle` (`engine::Handle`) and its own `close`.
macro_rules! closable {
    ($class:ident) => {
        #[pyo3::pymethods]
        impl $class {
            #[getter]
            fn closed(&self) -> bool {
                self.handle.is_closed()
            }

            fn __enter__(slf: pyo3::Py<Self>) -> pyo3::Py<Self> {
                slf
            }

            #[pyo3(signature = (*_exc))]
            fn __exit__(
                &self,
                py: pyo3::Python<'_>,
                _exc: &pyo3::Bound<'_, pyo3::types::PyTuple>,
            ) -> pyo3::PyResult<bool> {
                self.close(py)?;
                Ok(false)
            }

            fn __repr__(&self) -> String {
                format!(concat!(stringify!($class), "({:?})"), self.handle.path)
            }
        }
    };
}
pub(crate) use closable;

mod engine;
mod opened;
mod trace;

use pyo3::create_exception;
use pyo3::exceptions::{PyException, PyValueError};
use pyo3::prelude::*;
use serde_json::Value;

create_exception!(
    _native,
    HscmError,
    PyException,
    "An hscm library call failed; the message is the library's."
);

/// A library error as a Python exception, with its whole chain of causes.
pub(crate) fn py_err(e: anyhow::Error) -> PyErr {
    if let Some(p) = e.downcast_ref::<hscm_sweep::params::ParamError>() {
        return PyValueError::new_err(p.to_string());
    }
    // The chain of causes, each said once (a cause often repeats in its context).
    let mut text = String::new();
    for cause in e.chain() {
        let c = cause.to_string();
        if !text.contains(&c) {
            if !text.is_empty() {
                text.push_str(": ");
            }
            text.push_str(&c);
        }
    }
    HscmError::new_err(text)
}

/// A serving-layer error (opening a volume) as HscmError, as every volume error has
/// been, with the path and what was wrong in its message.
pub(crate) fn serving_err(e: hscm_serving::Error) -> PyErr {
    HscmError::new_err(e.to_string())
}

/// A size given as an int (bytes) or a string with a unit ("64M", "4G"), as the
/// simulators take them.
pub(crate) fn size_arg(what: &str, value: &Bound<'_, PyAny>) -> PyResult<u64> {
    if let Ok(n) = value.extract::<u64>() {
        return Ok(n);
    }
    let text: String = value.extract().map_err(|_| {
        PyValueError::new_err(format!(
            "{what}: a size in bytes or a string such as \"64M\""
        ))
    })?;
    hscm_sweep::units::parse_size(&text).map_err(|e| PyValueError::new_err(format!("{what}: {e}")))
}

/// Keyword parameters (a JSON object, as the Python side encodes them) in call order.
pub(crate) fn params_from_json(json: &str) -> PyResult<Vec<(String, Value)>> {
    let v: serde_json::Map<String, Value> = serde_json::from_str(json)
        .map_err(|e| PyValueError::new_err(format!("parameters are not a JSON object: {e}")))?;
    Ok(v.into_iter().collect())
}

/// The hscm version this module was built from.
#[pyfunction]
fn version() -> &'static str {
    env!("CARGO_PKG_VERSION")
}

/// The git revision this module was built from ("unknown" outside a checkout).
#[pyfunction]
fn git_revision() -> &'static str {
    env!("HSCM_GIT_REVISION")
}

/// The parameter names `simulator` ("memory", "cache" or "paging") accepts.
#[pyfunction]
fn param_names(simulator: &str) -> PyResult<Vec<String>> {
    use hscm_sweep::{memsim, params, vmsim};
    let out = ["json", "csv"];
    Ok(match simulator {
        "memory" => params::names::<memsim::CompareArgs>(&out),
        "cache" => params::names::<vmsim::CacheArgs>(&out),
        "paging" => params::names::<vmsim::PagingArgs>(&out),
        other => {
            return Err(PyValueError::new_err(format!(
                "unknown simulator {other:?} (known: memory, cache, paging)"
            )))
        }
    })
}

/// Runs one simulation; returns what `hscm sim … --json` prints, as JSON text.
#[pyfunction]
fn sim_run(py: Python<'_>, simulator: &str, params_json: &str) -> PyResult<String> {
    let params = params_from_json(params_json)?;
    let simulator = simulator.to_string();
    let v = py
        .detach(move || hscm_sweep::sweep::run_raw(&simulator, &params))
        .map_err(py_err)?;
    Ok(v.to_string())
}

/// Runs one simulation; returns its result rows, flattened, as JSON text (a sweep's
/// point).
#[pyfunction]
fn sim_rows(py: Python<'_>, simulator: &str, params_json: &str) -> PyResult<String> {
    let params = params_from_json(params_json)?;
    let simulator = simulator.to_string();
    let rows = py
        .detach(move || hscm_sweep::sweep::run_point(&simulator, &params))
        .map_err(py_err)?;
    Ok(Value::Array(rows.into_iter().map(Value::Object).collect()).to_string())
}

/// Reads, expands and checks a sweep spec; returns the sweep as JSON text. A bad spec
/// raises ValueError naming the file and line.
#[pyfunction]
fn sweep_load(py: Python<'_>, path: std::path::PathBuf) -> PyResult<String> {
    let sweep = py
        .detach(|| hscm_sweep::sweep::load(&path))
        .map_err(|e| PyValueError::new_err(e.to_string()))?;
    serde_json::to_string(&sweep).map_err(|e| HscmError::new_err(e.to_string()))
}

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("HscmError", m.py().get_type::<HscmError>())?;
    m.add_function(wrap_pyfunction!(version, m)?)?;
    m.add_function(wrap_pyfunction!(git_revision, m)?)?;
    m.add_function(wrap_pyfunction!(param_names, m)?)?;
    m.add_function(wrap_pyfunction!(sim_run, m)?)?;
    m.add_function(wrap_pyfunction!(sim_rows, m)?)?;
    m.add_function(wrap_pyfunction!(sweep_load, m)?)?;
    trace::register(m)?;
    engine::register(m)?;
    opened::register(m)?;
    Ok(())
}

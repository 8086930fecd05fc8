//! Python exceptions for melread's errors: a base `melctl.Error` and one subclass per
//! kind of `melkit::core::Error`, each carrying the error's one-line message.

use pyo3::exceptions::PyException;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyTuple, PyType};

pyo3::create_exception!(
    melctl,
    Error,
    PyException,
    "Every error melctl raises for a file or a setting it refuses."
);
/// melctl's exception classes, one per kind of error, as (name, the standard exception it
/// also is, what it means): the one home of their names. The module makes the classes
/// from it at import ([`register`]), [`raise`] raises them by it, and the package exports
/// them from the module's `__errors__` (the stubs are checked against the module in CI).
/// A class that also is a standard exception is caught by code that knows nothing of
/// melctl (`except OSError`, `except ValueError`), as numpy's `AxisError` is both a
/// `ValueError` and an `IndexError`.
pub const KINDS: [(&str, Option<&str>, &str); 13] = [
    (
        "ConfigError",
        Some("ValueError"),
        "A configuration value is out of range (names the field and the limit).",
    ),
    (
        "ConfigParseError",
        Some("ValueError"),
        "A configuration file or string could not be parsed.",
    ),
    (
        "UnknownPresetError",
        Some("ValueError"),
        "An unknown preset name.",
    ),
    (
        "IoError",
        Some("OSError"),
        "The operating system refused an I/O operation on a path.",
    ),
    (
        "DecodeError",
        None,
        "An input file's content is not valid audio.",
    ),
    (
        "UnsupportedError",
        None,
        "Valid input melctl does not handle.",
    ),
    (
        "LimitError",
        None,
        "A bound that keeps memory, time or values finite would be exceeded.",
    ),
    (
        "DatasetError",
        None,
        "A dataset file is not what melctl writes (tampered, truncated, foreign).",
    ),
    (
        "DeviceError",
        None,
        "A compute device is missing, refused a configuration, or failed.",
    ),
    (
        "OutputError",
        Some("OSError"),
        "An output could not be written or committed.",
    ),
    (
        "ShapeError",
        Some("ValueError"),
        "A buffer or shape did not match the plan.",
    ),
    (
        "InternalError",
        None,
        "A worker thread failed outside any input.",
    ),
    ("CancelledError", None, "The run was cancelled."),
];

/// The classes made from [`KINDS`], in its order, once the module is imported.
static CLASSES: std::sync::OnceLock<Vec<Py<PyType>>> = std::sync::OnceLock::new();

/// The exception of kind `name` (one of [`KINDS`]) with `message`.
pub fn raise(name: &str, message: impl Into<String>) -> PyErr {
    // One line, and nothing in it that steers a terminal: a file's name is shown, never
    // obeyed (as the CLI shows it).
    let message = melkit::core::error::visible(&message.into(), false).into_owned();
    let at = KINDS.iter().position(|(n, _, _)| *n == name);
    match (at, CLASSES.get()) {
        (Some(i), Some(classes)) => {
            Python::attach(|py| PyErr::from_type(classes[i].bind(py).clone(), message))
        }
        // Unreachable once the module is imported; the base class says it all the same.
        _ => Error::new_err(format!("{name}: {message}")),
    }
}

/// The Python exception for a melread error: its kind's class, its one-line message.
pub fn to_py(e: melkit::read::Error) -> PyErr {
    use melkit::read::Error as E;
    let message = e.to_string();
    match e {
        E::Config { .. } => raise("ConfigError", message),
        E::ConfigParse { .. } => raise("ConfigParseError", message),
        E::UnknownPreset { .. } => raise("UnknownPresetError", message),
        E::Io { .. } => raise("IoError", message),
        E::Decode { .. } => raise("DecodeError", message),
        E::Unsupported { .. } => raise("UnsupportedError", message),
        E::Limit { .. } => raise("LimitError", message),
        E::Dataset { .. } => raise("DatasetError", message),
        E::Device { .. } => raise("DeviceError", message),
        E::Output { .. } => raise("OutputError", message),
        E::Shape(_) => raise("ShapeError", message),
        E::Internal(_) => raise("InternalError", message),
        E::Cancelled => raise("CancelledError", message),
    }
}

/// The Python exception for a build's failure: a lower layer's error by its kind; a
/// build stopped at a bad file a DecodeError; an interrupted one a CancelledError; a
/// kept split that does not fit a DatasetError; a refused split a ConfigError.
pub fn build_to_py(e: melkit::dataset::Error) -> PyErr {
    use melkit::dataset::Error as E;
    let message = e.to_string();
    match e {
        E::Core(e) => to_py(e),
        E::Stopped { .. } => raise("DecodeError", message),
        E::Interrupted { .. } => raise("CancelledError", message),
        E::KeptIncomplete { .. } | E::KeptMismatch { .. } | E::NothingLeft { .. } => {
            raise("DatasetError", message)
        }
        E::Split { .. } | E::ShardOfSomeSplits { .. } => raise("ConfigError", message),
    }
}

/// Adds the exception classes to the module: `Error`, and one class per [`KINDS`] entry,
/// made here (a subclass of `Error` and of its standard exception), with `__errors__`
/// naming them.
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    let base = py.get_type::<Error>();
    m.add("Error", &base)?;
    let builtins = py.import("builtins")?;
    let make = builtins.getattr("type")?;
    let mut classes = Vec::with_capacity(KINDS.len());
    for (name, also, doc) in KINDS {
        let bases = match also {
            Some(b) => PyTuple::new(py, [base.clone().into_any(), builtins.getattr(b)?])?,
            None => PyTuple::new(py, [base.clone().into_any()])?,
        };
        let body = PyDict::new(py);
        body.set_item("__doc__", doc)?;
        body.set_item("__module__", "melctl")?;
        let class = make.call1((name, bases, body))?.cast_into::<PyType>()?;
        m.add(name, &class)?;
        classes.push(class.unbind());
    }
    // A second import (another interpreter of the process) keeps the first classes.
    let _ = CLASSES.set(classes);
    let names: Vec<&str> = KINDS.iter().map(|(n, _, _)| *n).collect();
    m.add("__errors__", PyTuple::new(py, names)?)?;
    Ok(())
}

/// Issues a `UserWarning` of `message`, escaped as exceptions are ([`raise`]).
pub fn warn(py: Python<'_>, message: &str) -> PyResult<()> {
    let message = melkit::core::error::visible(message, false);
    PyErr::warn(
        py,
        &py.get_type::<pyo3::exceptions::PyUserWarning>(),
        &std::ffi::CString::new(message.as_bytes()).unwrap_or_default(),
        1,
    )
}

//! Python exceptions for melread's errors: a base `melctl.Error` and one subclass per
//! kind of `mel_core::Error`, each carrying the error's one-line message.

use pyo3::exceptions::PyException;
use pyo3::prelude::*;

pyo3::create_exception!(
    melctl,
    Error,
    PyException,
    "Every error melctl raises for a file or a setting it refuses."
);
pyo3::create_exception!(
    melctl,
    ConfigError,
    Error,
    "A configuration value is out of range (names the field and the limit)."
);
pyo3::create_exception!(
    melctl,
    ConfigParseError,
    Error,
    "A configuration file or string could not be parsed."
);
pyo3::create_exception!(melctl, UnknownPresetError, Error, "An unknown preset name.");
pyo3::create_exception!(
    melctl,
    IoError,
    Error,
    "The operating system refused an I/O operation on a path."
);
pyo3::create_exception!(
    melctl,
    DecodeError,
    Error,
    "An input file's content is not valid audio."
);
pyo3::create_exception!(
    melctl,
    UnsupportedError,
    Error,
    "Valid input melctl does not handle."
);
pyo3::create_exception!(
    melctl,
    LimitError,
    Error,
    "A bound that keeps memory, time or values finite would be exceeded."
);
pyo3::create_exception!(
    melctl,
    DatasetError,
    Error,
    "A dataset file is not what melctl writes (tampered, truncated, foreign)."
);
pyo3::create_exception!(
    melctl,
    DeviceError,
    Error,
    "A compute device is missing, refused a configuration, or failed."
);
pyo3::create_exception!(
    melctl,
    OutputError,
    Error,
    "An output could not be written or committed."
);
pyo3::create_exception!(
    melctl,
    ShapeError,
    Error,
    "A buffer or shape did not match the plan."
);
pyo3::create_exception!(
    melctl,
    InternalError,
    Error,
    "A worker thread failed outside any input."
);
pyo3::create_exception!(melctl, CancelledError, Error, "The run was cancelled.");

/// The Python exception for a melread error: its kind's class, its one-line message.
pub fn to_py(e: melread::Error) -> PyErr {
    use melread::Error as E;
    let message = e.to_string();
    match e {
        E::Config { .. } => ConfigError::new_err(message),
        E::ConfigParse { .. } => ConfigParseError::new_err(message),
        E::UnknownPreset { .. } => UnknownPresetError::new_err(message),
        E::Io { .. } => IoError::new_err(message),
        E::Decode { .. } => DecodeError::new_err(message),
        E::Unsupported { .. } => UnsupportedError::new_err(message),
        E::Limit { .. } => LimitError::new_err(message),
        E::Dataset { .. } => DatasetError::new_err(message),
        E::Device { .. } => DeviceError::new_err(message),
        E::Output { .. } => OutputError::new_err(message),
        E::Shape(_) => ShapeError::new_err(message),
        E::Internal(_) => InternalError::new_err(message),
        E::Cancelled => CancelledError::new_err(message),
    }
}

/// The Python exception for a build's failure: a lower layer's error by its kind; a
/// build stopped at a bad file a DecodeError; an interrupted one a CancelledError; a
/// kept split that does not fit a DatasetError; a refused split a ConfigError.
pub fn build_to_py(e: melkit::build::Error) -> PyErr {
    use melkit::build::Error as E;
    let message = e.to_string();
    match e {
        E::Core(e) => to_py(e),
        E::Stopped { .. } => DecodeError::new_err(message),
        E::Interrupted { .. } => CancelledError::new_err(message),
        E::KeptIncomplete { .. } | E::KeptMismatch { .. } => DatasetError::new_err(message),
        E::Split { .. } => ConfigError::new_err(message),
    }
}

/// Adds the exception classes to the module.
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    m.add("Error", py.get_type::<Error>())?;
    m.add("ConfigError", py.get_type::<ConfigError>())?;
    m.add("ConfigParseError", py.get_type::<ConfigParseError>())?;
    m.add("UnknownPresetError", py.get_type::<UnknownPresetError>())?;
    m.add("IoError", py.get_type::<IoError>())?;
    m.add("DecodeError", py.get_type::<DecodeError>())?;
    m.add("UnsupportedError", py.get_type::<UnsupportedError>())?;
    m.add("LimitError", py.get_type::<LimitError>())?;
    m.add("DatasetError", py.get_type::<DatasetError>())?;
    m.add("DeviceError", py.get_type::<DeviceError>())?;
    m.add("OutputError", py.get_type::<OutputError>())?;
    m.add("ShapeError", py.get_type::<ShapeError>())?;
    m.add("InternalError", py.get_type::<InternalError>())?;
    m.add("CancelledError", py.get_type::<CancelledError>())?;
    Ok(())
}

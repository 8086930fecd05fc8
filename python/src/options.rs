//! `melctl.Loader`'s keyword arguments, read into melread's `LoaderOptions`.

use melkit::read::{Dtype, LoaderOptions, MelStats, Output, Shuffle, Split, Unit};
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyString;

use crate::dtype::ItemDtype;
use crate::errors::to_py;

/// A count given from Python (`field` names it): a negative int is a one-line
/// ConfigError naming it, never an OverflowError; the bounds above are melread's.
pub fn count(field: &str, value: i64) -> PyResult<usize> {
    usize::try_from(value).map_err(|_| {
        crate::errors::to_py(melkit::core::Error::config(
            field,
            format!("{value}: must be 0 or more"),
        ))
    })
}

/// A count that must be 1 or more (`batch_size`, `threads`): 0 or a negative int is a
/// one-line ConfigError naming the field, the same words either way.
pub fn positive(field: &str, value: i64) -> PyResult<usize> {
    match usize::try_from(value) {
        Ok(v) if v >= 1 => Ok(v),
        _ => Err(crate::errors::to_py(melkit::core::Error::config(
            field,
            format!("{value}: must be at least 1"),
        ))),
    }
}

/// A seed or an epoch given from Python (`field` names it), taken as any int: outside
/// `0..=2^64 − 1` it is a one-line ConfigError naming the field, never an OverflowError
/// that names nothing.
pub fn unsigned(field: &str, value: i128) -> PyResult<u64> {
    u64::try_from(value).map_err(|_| {
        crate::errors::to_py(melkit::core::Error::config(
            field,
            format!("{value}: must be an int from 0 to 2^64 − 1"),
        ))
    })
}

/// `unit="segment" | "clip"`.
pub fn unit(name: &str) -> PyResult<Unit> {
    match name {
        "segment" => Ok(Unit::Segment),
        "clip" => Ok(Unit::Clip),
        other => Err(PyValueError::new_err(format!(
            "unit {other:?} is not one of \"segment\", \"clip\""
        ))),
    }
}

/// `shuffle`: True or `"uniform"` (every item equally likely anywhere), False or
/// `"none"` (file order), `"buffered"` (clip order through a shuffle buffer, melread's default).
pub fn shuffle(value: &Bound<'_, PyAny>) -> PyResult<Shuffle> {
    if let Ok(s) = value.cast::<PyString>() {
        return match s.to_cow()?.as_ref() {
            "uniform" => Ok(Shuffle::Uniform),
            "none" => Ok(Shuffle::None),
            "buffered" => Ok(LoaderOptions::default().shuffle),
            other => Err(PyValueError::new_err(format!(
                "shuffle {other:?} is not one of True, False, \"uniform\", \"buffered\", \"none\""
            ))),
        };
    }
    match value.extract::<bool>() {
        Ok(true) => Ok(Shuffle::Uniform),
        Ok(false) => Ok(Shuffle::None),
        Err(_) => Err(PyTypeError::new_err(
            "shuffle must be a bool or one of \"uniform\", \"buffered\", \"none\"",
        )),
    }
}

/// The name `state_dict` records for a shuffle.
pub fn shuffle_name(shuffle: Shuffle) -> String {
    match shuffle {
        Shuffle::None => "none".into(),
        Shuffle::Uniform => "uniform".into(),
        Shuffle::Buffered { buffer } => format!("buffered:{buffer}"),
    }
}

/// `shard=(rank, world)`, or None for the whole epoch.
pub fn shard(value: Option<(usize, usize)>) -> (usize, usize) {
    value.unwrap_or((0, 1))
}

/// `dtype`: float32 batches (widened exactly, normalisable) or float16 as stored.
pub fn output(dtype: &Bound<'_, PyAny>, split: &Split) -> PyResult<Output> {
    match ItemDtype::parse(dtype)? {
        ItemDtype::F32 => Ok(Output::F32),
        ItemDtype::F16 if split.dtype() == Dtype::F16 => Ok(Output::Stored),
        ItemDtype::F16 => Err(to_py(melkit::read::Error::config(
            "dtype",
            format!(
                "float16 batches are offered for splits stored as f16; this one stores {:?}",
                split.dtype()
            ),
        ))),
        ItemDtype::F64 => Err(PyValueError::new_err(
            "float64 batches are not offered: ask float32 (or float16 for f16 splits)",
        )),
    }
}

/// `normalize`: False, True (the split's stored statistics, or computed once on
/// `threads` threads), or `(mean, std)` sequences of one figure per mel bin (a training
/// split's statistics for a validation split).
pub fn normalize(
    py: Python<'_>,
    value: &Bound<'_, PyAny>,
    split: &Split,
    threads: usize,
) -> PyResult<Option<MelStats>> {
    if let Ok(flag) = value.extract::<bool>() {
        if !flag {
            return Ok(None);
        }
        return py.detach(|| split.stats(threads)).map(Some).map_err(to_py);
    }
    let (mean, std): (Vec<f64>, Vec<f64>) = value.extract().map_err(|_| {
        PyTypeError::new_err("normalize must be a bool or a (mean, std) pair of sequences")
    })?;
    let stats = MelStats {
        mean,
        std,
        count: 0,
    };
    // The check the reader makes of stored statistics and the Loader of given ones, here
    // with the argument's name.
    if let Some(why) = stats.unusable() {
        return Err(PyValueError::new_err(format!("normalize: {why}")));
    }
    Ok(Some(stats))
}

//! The native module `melctl._melctl` of the melctl Python package: melread's splits
//! and loaders for numpy and PyTorch (`melctl/__init__.py` is its public face). It wraps
//! melread's public API only; every read runs with the GIL released.

use std::path::PathBuf;

use pyo3::prelude::*;

pub mod augment;
pub mod build;
pub mod config;
pub mod dtype;
pub mod errors;
pub mod eval;
pub mod extractor;
pub mod loader;
pub mod options;
pub mod split;

/// Threads when the caller names none: the machine's available parallelism.
pub fn default_threads() -> usize {
    std::thread::available_parallelism().map_or(2, |n| n.get())
}

/// Opens a split: a ``.h5`` file, an ``.npy.d`` folder, or an output folder with
/// ``split`` naming one of its splits (``melctl.open("out", "training")``).
///
/// ``split[i]`` returns clip ``i`` as ``dtype``: float32 (default; f16 and bf16 widened
/// exactly), float64, or float16 (f16 splits only: nothing is rounded). The file is
/// checked as melread checks it (the build record, the HDF5 structure, every size
/// against the file's length); a file it refuses raises a :class:`Error` subclass.
#[pyfunction]
#[pyo3(signature = (path, split=None, dtype=None))]
fn open(
    py: Python<'_>,
    path: PathBuf,
    split: Option<String>,
    dtype: Option<&Bound<'_, PyAny>>,
) -> PyResult<split::PySplit> {
    let dtype = match dtype {
        Some(d) => dtype::ItemDtype::parse(d)?,
        None => dtype::ItemDtype::F32,
    };
    split::PySplit::open(py, &path, split.as_deref(), dtype)
}

/// Checks that the output folder ``out`` is one whole set of splits, as ``melctl
/// verify`` does: each opens with every reader check, the build record names each one,
/// and they share labels and configuration. Returns the verdict as a dict (``whole``,
/// ``build``, ``splits``, ``problems``); raises DatasetError naming each problem (a split
/// left by an interrupted build, which h5py would read without a word) unless
/// ``strict=False``.
#[pyfunction]
#[pyo3(signature = (out, *, strict=true))]
fn verify<'py>(py: Python<'py>, out: PathBuf, strict: bool) -> PyResult<Bound<'py, PyAny>> {
    let check = py
        .detach(|| melkit::read::verify::verify_folder(&out))
        .map_err(errors::to_py)?;
    if strict && !check.is_whole() {
        return Err(errors::raise(
            "DatasetError",
            format!("{}: {}", out.display(), check.problems.join("; ")),
        ));
    }
    let text = check.to_json().to_string();
    py.import("json")?.call_method1("loads", (text,))
}

/// Runs the `melctl` command line (the CLI crate's own code, not a copy) on `argv`, the
/// program's name first, with the GIL released, and returns its exit status. The command
/// takes the process's SIGINT, SIGBUS and panic hook for itself: it is for `python -m
/// melctl` and the `melctl` console script, one command per process.
#[pyfunction]
fn _cli_main(py: Python<'_>, argv: Vec<std::ffi::OsString>) -> u8 {
    py.detach(|| melctl_cli::main_with_args(argv))
}

/// The module: `open`, `Split`, `Loader`, the exception classes and `__version__`.
#[pymodule]
fn _melctl(m: &Bound<'_, PyModule>) -> PyResult<()> {
    // A split truncated while it is mapped (another process rewriting it in place) raises
    // an error naming it, instead of killing the interpreter with "Bus error"; SIGBUS
    // outside melctl's own maps goes to the handler that was there before.
    melkit::read::sigbus::recover_mapped_faults();
    // A decoder's panic is that file's DecodeError, not text on the interpreter's stderr.
    melkit::audio::quiet_decoder_panics();
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    m.add_function(wrap_pyfunction!(open, m)?)?;
    m.add_function(wrap_pyfunction!(_cli_main, m)?)?;
    m.add_function(wrap_pyfunction!(verify, m)?)?;
    m.add_function(wrap_pyfunction!(build::build, m)?)?;
    m.add_function(wrap_pyfunction!(build::merge, m)?)?;
    m.add_function(wrap_pyfunction!(eval::evaluate_files, m)?)?;
    m.add_function(wrap_pyfunction!(extractor::_extractor_from_toml, m)?)?;
    m.add_class::<extractor::PyExtractor>()?;
    m.add_class::<eval::PyFileEvaluator>()?;
    m.add_function(wrap_pyfunction!(split::_reopen_split, m)?)?;
    m.add_class::<split::PySplit>()?;
    m.add_class::<loader::PyLoader>()?;
    m.add_class::<augment::PyAugment>()?;
    m.add_class::<loader::PyBatches>()?;
    errors::register(m)?;
    Ok(())
}

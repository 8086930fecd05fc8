//! `melctl.FileEvaluator` and `melctl.evaluate_files`: per-segment class probabilities
//! become one decision per file (mean probability, majority vote, or a threshold on a
//! positive class), with accuracy and a confusion matrix: melread's evaluation.

use std::sync::Mutex;

use melkit::read::eval::{Decision, FileEvaluator, FileReport};
use numpy::{PyArray1, PyArray2, PyArrayMethods, PyReadonlyArray1, PyUntypedArrayMethods};
use pyo3::exceptions::{PyRuntimeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyDict;

use crate::errors::to_py;
use crate::split::PySplit;

/// The decision rule: `"mean"` or `"vote"`; with `positive` (a class id) and
/// `threshold`, the binary rules (mean probability of `positive` at least `threshold`,
/// or at least half the segments voting so).
fn rule(name: &str, positive: Option<usize>, threshold: Option<f32>) -> PyResult<Decision> {
    match (name, positive, threshold) {
        ("mean", None, None) => Ok(Decision::MeanProbability),
        ("vote", None, None) => Ok(Decision::MajorityVote),
        ("mean", Some(positive), t) => Ok(Decision::MeanThreshold {
            positive,
            threshold: t.unwrap_or(0.5),
        }),
        ("vote", Some(positive), t) => Ok(Decision::VoteThreshold {
            positive,
            threshold: t.unwrap_or(0.5),
        }),
        (_, None, Some(_)) => Err(PyValueError::new_err(
            "threshold= needs positive= (the class id it decides)",
        )),
        (other, ..) => Err(PyValueError::new_err(format!(
            "rule {other:?} is not one of \"mean\", \"vote\""
        ))),
    }
}

/// The report as a dict: accuracy, files, correct, decisions (int64, -1 for a file with
/// no segment scored), truth, scores (float32), confusion (`[true, decided]`, int64).
fn report_dict<'py>(py: Python<'py>, r: &FileReport) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("accuracy", r.accuracy())?;
    d.set_item("files", r.files())?;
    d.set_item("correct", r.correct())?;
    let decisions: Vec<i64> = r
        .decisions
        .iter()
        .map(|x| x.map_or(-1, |c| c as i64))
        .collect();
    d.set_item("decisions", PyArray1::from_vec(py, decisions))?;
    let truth: Vec<i64> = r.truth.iter().map(|&t| t as i64).collect();
    d.set_item("truth", PyArray1::from_vec(py, truth))?;
    d.set_item("scores", PyArray1::from_slice(py, &r.scores))?;
    let confusion: Vec<Vec<i64>> = r
        .confusion
        .iter()
        .map(|row| row.iter().map(|&c| c as i64).collect())
        .collect();
    d.set_item("confusion", PyArray2::from_vec2(py, &confusion)?)?;
    Ok(d)
}

/// `obj` as a C-contiguous numpy array of `dtype`.
fn contiguous<'py>(
    numpy: &Bound<'py, PyModule>,
    obj: &Bound<'py, PyAny>,
    dtype: &str,
) -> PyResult<Bound<'py, PyAny>> {
    let kwargs = PyDict::new(numpy.py());
    kwargs.set_item("dtype", dtype)?;
    numpy
        .getattr("ascontiguousarray")?
        .call((obj,), Some(&kwargs))
}

/// An integer id array read as `T` (`dtype` its numpy name) into indices; an id that is
/// no index is refused, `why` saying how.
fn ids_as<T>(
    numpy: &Bound<'_, PyModule>,
    ids: &Bound<'_, PyAny>,
    dtype: &str,
    why: &str,
) -> PyResult<Vec<usize>>
where
    T: numpy::Element + Copy + std::fmt::Display,
    usize: TryFrom<T>,
{
    let a = contiguous(numpy, ids, dtype)?;
    let a: PyReadonlyArray1<T> = a.extract()?;
    a.as_slice()?
        .iter()
        .map(|&x| {
            usize::try_from(x).map_err(|_| PyValueError::new_err(format!("file id {x} {why}")))
        })
        .collect()
}

/// `probs` as `[segments, classes]` float32 rows and `files` as ids.
fn batch(
    py: Python<'_>,
    probs: &Bound<'_, PyAny>,
    files: &Bound<'_, PyAny>,
    classes: usize,
) -> PyResult<(Vec<f32>, Vec<usize>)> {
    let numpy = py.import("numpy")?;
    let p = contiguous(&numpy, probs, "float32")?;
    let p = p.cast::<numpy::PyArrayDyn<f32>>()?.readonly();
    if p.ndim() != 2 || p.shape()[1] != classes {
        return Err(PyValueError::new_err(format!(
            "probs must be [segments, {classes}]; got shape {:?}",
            p.shape()
        )));
    }
    let f = numpy.call_method1("asarray", (files,))?;
    let kind: String = f.getattr("dtype")?.getattr("kind")?.extract()?;
    let ndim: usize = f.getattr("ndim")?.extract()?;
    if !(kind == "i" || kind == "u") || ndim != 1 {
        return Err(PyValueError::new_err(format!(
            "files must be a 1-D array of integer file ids; got dtype {} with {ndim} dimension(s)",
            f.getattr("dtype")?.str()?
        )));
    }
    // Unsigned ids as u64 (2**64 - 1 is out of range, not -1), signed as i64.
    let files = if kind == "u" {
        ids_as::<u64>(&numpy, &f, "uint64", "is out of range")?
    } else {
        ids_as::<i64>(&numpy, &f, "int64", "is negative")?
    };
    Ok((p.as_slice()?.to_vec(), files))
}

/// Per-segment class probabilities of many files, added in batches of any size and
/// order, decided per file.
///
/// ``report()`` returns ``accuracy``, ``files``, ``correct``, ``decisions`` (int64, -1
/// for a file with no segment scored), ``truth``, ``scores`` and ``confusion``
/// (``[true, decided]``).
#[pyclass(name = "FileEvaluator", module = "melctl", frozen)]
pub struct PyFileEvaluator {
    inner: Mutex<FileEvaluator>,
    classes: usize,
}

#[pymethods]
impl PyFileEvaluator {
    /// An evaluator for files whose true classes are `truth` (a sequence of class ids;
    /// file `i` has class `truth[i]`), over `classes` classes (default: the largest id + 1).
    #[new]
    #[pyo3(signature = (truth, classes=None))]
    fn new(truth: Vec<i64>, classes: Option<usize>) -> PyResult<Self> {
        let truth: Vec<usize> = truth
            .iter()
            .map(|&t| {
                usize::try_from(t)
                    .map_err(|_| PyValueError::new_err(format!("class {t} is negative")))
            })
            .collect::<PyResult<_>>()?;
        let classes =
            classes.unwrap_or_else(|| truth.iter().max().map_or(0, |m| m.saturating_add(1)));
        let inner = FileEvaluator::new(truth, classes).map_err(to_py)?;
        Ok(PyFileEvaluator {
            inner: Mutex::new(inner),
            classes,
        })
    }

    /// An evaluator for the clips of `split` (its labels and classes), scored by a model
    /// trained on `trained_on` (default: `split` itself): refused unless the two share
    /// one label map and one mel configuration.
    #[staticmethod]
    #[pyo3(signature = (split, trained_on=None))]
    fn for_split(
        py: Python<'_>,
        split: &Bound<'_, PySplit>,
        trained_on: Option<&Bound<'_, PySplit>>,
    ) -> PyResult<Self> {
        let s = split.get().split(py)?;
        let t = match trained_on {
            Some(t) => t.get().split(py)?,
            None => s.clone(),
        };
        let inner = FileEvaluator::for_split(&s, &t).map_err(to_py)?;
        Ok(PyFileEvaluator {
            classes: inner.classes(),
            inner: Mutex::new(inner),
        })
    }

    /// Adds a batch: `probs` `[segments, classes]`, row `k` a segment of file `files[k]`
    /// (a Loader's `clip_index` with `with_index=True`).
    fn add(
        &self,
        py: Python<'_>,
        probs: &Bound<'_, PyAny>,
        files: &Bound<'_, PyAny>,
    ) -> PyResult<()> {
        let (p, f) = batch(py, probs, files, self.classes)?;
        if f.len() * self.classes != p.len() {
            return Err(PyValueError::new_err(format!(
                "{} rows of probabilities for {} file ids",
                p.len() / self.classes.max(1),
                f.len()
            )));
        }
        self.inner
            .lock()
            .map_err(|_| PyRuntimeError::new_err("a thread panicked in the evaluator"))?
            .add(&p, &f)
            .map_err(to_py)
    }

    /// Decides every file by `rule` ("mean" or "vote"; with `positive` and `threshold`
    /// the binary rules) and returns the figures as a dict.
    #[pyo3(signature = (rule="mean", positive=None, threshold=None))]
    fn report<'py>(
        &self,
        py: Python<'py>,
        rule: &str,
        positive: Option<usize>,
        threshold: Option<f32>,
    ) -> PyResult<Bound<'py, PyDict>> {
        let decision = self::rule(rule, positive, threshold)?;
        let inner = self
            .inner
            .lock()
            .map_err(|_| PyRuntimeError::new_err("a thread panicked in the evaluator"))?;
        inner.check_rule(&decision).map_err(to_py)?;
        let r = inner.report(&decision);
        report_dict(py, &r)
    }

    /// Classes scored.
    #[getter]
    fn classes(&self) -> usize {
        self.classes
    }
}

/// One call: the file-level report of one batch of per-segment probabilities.
///
/// ``probs`` is ``[segments, classes]`` (softmax outputs), ``files`` each segment's file
/// number (``0..len(truth)``), ``truth`` each file's class. ``rule`` is ``"mean"`` (the
/// class of the highest mean probability) or ``"vote"`` (the majority of segment
/// decisions); ``positive`` with ``threshold`` decides a binary task by the mean
/// probability of class ``positive``. Returns :class:`FileEvaluator`'s ``report()``.
#[pyfunction]
#[pyo3(signature = (probs, files, truth, classes=None, rule="mean", positive=None, threshold=None))]
#[allow(clippy::too_many_arguments)]
pub fn evaluate_files<'py>(
    py: Python<'py>,
    probs: &Bound<'py, PyAny>,
    files: &Bound<'py, PyAny>,
    truth: Vec<i64>,
    classes: Option<usize>,
    rule: &str,
    positive: Option<usize>,
    threshold: Option<f32>,
) -> PyResult<Bound<'py, PyDict>> {
    let classes = match classes {
        Some(c) => c,
        None => {
            let array = py.import("numpy")?.call_method1("asarray", (probs,))?;
            let shape: Vec<usize> = array.getattr("shape")?.extract()?;
            *shape
                .get(1)
                .ok_or_else(|| PyValueError::new_err("probs must be [segments, classes]"))?
        }
    };
    let ev = PyFileEvaluator::new(truth, Some(classes))?;
    ev.add(py, probs, files)?;
    ev.report(py, rule, positive, threshold)
}

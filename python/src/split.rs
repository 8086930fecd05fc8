//! `melctl.Split`: one split of a melctl output, a map-style dataset of clips. It pickles
//! by path and reopens lazily in the process that unpickles it, so torch's DataLoader
//! workers under fork, spawn or forkserver each read the file themselves.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use melkit::read::Split;
use numpy::PyArray1;
use pyo3::exceptions::{PyIndexError, PyRuntimeError};
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyDict, PyList, PyTuple};

use crate::dtype::{ItemDtype, read_item};
use crate::errors::to_py;

/// Per-mel-bin `(mean, std)` as numpy arrays.
type MeanStd<'py> = (Bound<'py, PyArray1<f64>>, Bound<'py, PyArray1<f64>>);

/// Where a split is and what it was when it was opened, so a reopened copy can be
/// checked to be the same split.
#[derive(Debug, Clone, PartialEq)]
struct Identity {
    /// The `.h5` file or `.npy.d` folder, absolute, or the output folder with `name`.
    path: PathBuf,
    /// The split's name when opened as `OUT` + name.
    name: Option<String>,
    /// `mel`'s shape when first opened (empty until known).
    shape: Vec<usize>,
    /// What the split held when first opened ([`melkit::read::Split::identity`]: its build id),
    /// so a copy unpickled after the split was built again is refused.
    build: Option<String>,
}

/// One split of a melctl output: a map-style dataset of clips.
///
/// ``len(split)`` clips; ``split[i]`` clip ``i`` as a numpy array of ``clip_shape``
/// (negative ``i`` counts from the end; IndexError past either end). A split of whole
/// clips (``audio.length = "whole"``, ``length == "whole"``) gives each clip at its own
/// length: ``split[i]`` is ``(n_mels, frames[i])``. Reads run in Rust
/// with the GIL released. A Split pickles by path and reopens lazily where it is
/// unpickled, so it serves torch's DataLoader workers under fork, spawn and forkserver;
/// ``melctl.torch.Dataset`` gives ``(x, y)`` tensors for supervised training.
#[pyclass(name = "Split", module = "melctl", frozen)]
pub struct PySplit {
    identity: Identity,
    dtype: ItemDtype,
    open: Mutex<Option<Arc<Split>>>,
    labels: PyOnceLock<Py<PyArray1<i64>>>,
}

/// Opens the split at `path` (or `path` + `name`) with the GIL released.
fn open_split(py: Python<'_>, path: &Path, name: Option<&str>) -> PyResult<Split> {
    py.detach(|| match name {
        Some(name) => Split::open_in(path, name),
        None => Split::open(path),
    })
    .map_err(to_py)
}

/// `index` (negative counts from the end) as a position in `0..len`, or IndexError.
pub fn position(index: isize, len: usize, what: &str) -> PyResult<usize> {
    wrapped(index, len)
        .ok_or_else(|| PyIndexError::new_err(format!("{what} {index} is out of range ({len})")))
}

/// `index` of `len` items as Python counts: from the end when negative; `None` beyond
/// either end.
fn wrapped(index: isize, len: usize) -> Option<usize> {
    if index < 0 {
        len.checked_sub(index.unsigned_abs())
    } else {
        Some(index as usize).filter(|&i| i < len)
    }
}

/// Clips in `split`: its rows, or its whole clips.
pub fn clip_count(split: &Split) -> usize {
    split.whole().map_or(split.clips(), |w| w.clips())
}

/// One value per clip of a per-row list: every row's, or each whole clip's first row's.
fn per_clip<T: Clone>(split: &Split, rows: &[T]) -> Vec<T> {
    match split.whole() {
        Some(w) => w.first_rows().iter().map(|&r| rows[r].clone()).collect(),
        None => rows.to_vec(),
    }
}

impl PySplit {
    /// Opens a split now (errors are raised here, not at the first read).
    pub fn open(
        py: Python<'_>,
        path: &Path,
        name: Option<&str>,
        dtype: ItemDtype,
    ) -> PyResult<Self> {
        let path =
            std::path::absolute(path).map_err(|e| to_py(melkit::read::Error::read(path, e)))?;
        let split = open_split(py, &path, name)?;
        dtype.check(&split).map_err(to_py)?;
        Ok(PySplit {
            identity: Identity {
                path,
                name: name.map(str::to_string),
                shape: split.shape().to_vec(),
                build: Some(split.identity()),
            },
            dtype,
            open: Mutex::new(Some(Arc::new(split))),
            labels: PyOnceLock::new(),
        })
    }

    /// The open split, opening it first if this copy was unpickled; a split whose
    /// shape changed since it was pickled is refused.
    pub fn split(&self, py: Python<'_>) -> PyResult<Arc<Split>> {
        if let Some(s) = self.lock()?.as_ref() {
            return Ok(Arc::clone(s));
        }
        let split = open_split(py, &self.identity.path, self.identity.name.as_deref())?;
        if !self.identity.shape.is_empty() && split.shape() != self.identity.shape.as_slice() {
            return Err(crate::errors::raise(
                "DatasetError",
                format!(
                    "{}: its shape is {:?}, but it was {:?} when this Split was pickled: the \
                 split was replaced",
                    split.path().display(),
                    split.shape(),
                    self.identity.shape
                ),
            ));
        }
        if let Some(was) = &self.identity.build
            && *was != split.identity()
        {
            return Err(crate::errors::raise(
                "DatasetError",
                format!(
                    "{}: it was built again since this Split was pickled (build {was}, now {}): a worker would read other clips than its parent",
                    split.path().display(),
                    split.identity()
                ),
            ));
        }
        let mut slot = self.lock()?;
        // Another thread may have opened it meanwhile: keep the first.
        Ok(Arc::clone(slot.get_or_insert_with(|| Arc::new(split))))
    }

    fn lock(&self) -> PyResult<std::sync::MutexGuard<'_, Option<Arc<Split>>>> {
        self.open
            .lock()
            .map_err(|_| PyRuntimeError::new_err("a thread panicked while opening this split"))
    }

    fn item(
        &self,
        py: Python<'_>,
        clip: isize,
        segment: Option<isize>,
        dtype: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Py<PyAny>> {
        let dtype = match dtype {
            Some(d) => ItemDtype::parse(d)?,
            None => self.dtype,
        };
        let split = self.split(py)?;
        let clip = position(clip, clip_count(&split), "clip")?;
        let segment = segment
            .map(|s| position(s, split.segments_per_clip(), "segment"))
            .transpose()?;
        let item = py
            .detach(|| read_item(&split, clip, segment, dtype))
            .map_err(to_py)?;
        Ok(item.into_numpy(py).unbind())
    }
}

#[pymethods]
impl PySplit {
    /// Clips in the split.
    fn __len__(&self, py: Python<'_>) -> PyResult<usize> {
        Ok(clip_count(&*self.split(py)?))
    }

    /// `"whole"` when each clip has its own number of frames (``audio.length = "whole"``;
    /// ``split[i]`` is ``(n_mels, frames[i])``), `"windows"` when each clip is a window of
    /// a longer file (``audio.windows``; see `files` and `starts`), else `"fixed"`.
    #[getter]
    fn length(&self, py: Python<'_>) -> PyResult<&'static str> {
        let split = self.split(py)?;
        Ok(match (split.whole(), split.windows()) {
            (Some(_), _) => "whole",
            (_, Some(_)) => "windows",
            _ => "fixed",
        })
    }

    /// Each clip's file, as an index into the split's files (int64): with windows, the
    /// windows of one file share it (`paths[i]` names it); otherwise clip i is file i.
    #[getter]
    fn files<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyArray1<i64>>> {
        let split = self.split(py)?;
        let files: Vec<i64> = match split.windows() {
            Some(w) => w.file_of().iter().map(|&f| f as i64).collect(),
            None => (0..clip_count(&split) as i64).collect(),
        };
        Ok(PyArray1::from_vec(py, files))
    }

    /// Where each clip starts in its file, in seconds (float64): a window's start; 0.0
    /// for clips that are whole files.
    #[getter]
    fn starts<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyArray1<f64>>> {
        let split = self.split(py)?;
        let starts: Vec<f64> = match split.windows() {
            Some(w) => (0..split.clips()).map(|r| w.start_seconds(r)).collect(),
            None => vec![0.0; clip_count(&split)],
        };
        Ok(PyArray1::from_vec(py, starts))
    }

    /// Every clip's number of frames (int64): its own for whole clips, else all the same.
    #[getter]
    fn frames<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyArray1<i64>>> {
        let split = self.split(py)?;
        let frames: Vec<i64> = match split.whole() {
            Some(w) => w.all_frames().iter().map(|&f| f as i64).collect(),
            None => vec![split.frames() as i64; split.clips()],
        };
        Ok(PyArray1::from_vec(py, frames))
    }

    /// Clip `index` (negative counts from the end) as a numpy array of `clip_shape`.
    fn __getitem__(&self, py: Python<'_>, index: isize) -> PyResult<Py<PyAny>> {
        self.item(py, index, None, None)
    }

    /// Clip `index` as a numpy array of `clip_shape`, in `dtype` (the split's by default).
    #[pyo3(signature = (index, dtype=None))]
    fn clip(
        &self,
        py: Python<'_>,
        index: isize,
        dtype: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Py<PyAny>> {
        self.item(py, index, None, dtype)
    }

    /// Segment `k` of clip `index` (`k` counts long-major: `long_index * short + short_index`)
    /// as a numpy array of `segment_shape`.
    #[pyo3(signature = (index, k, dtype=None))]
    fn segment(
        &self,
        py: Python<'_>,
        index: isize,
        k: isize,
        dtype: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Py<PyAny>> {
        self.item(py, index, Some(k), dtype)
    }

    /// The `.h5` file or `.npy.d` folder read.
    #[getter]
    fn path(&self, py: Python<'_>) -> PyResult<PathBuf> {
        Ok(self.split(py)?.path().to_path_buf())
    }

    /// The split's name (`training`, ...).
    #[getter]
    fn name(&self, py: Python<'_>) -> PyResult<String> {
        Ok(self.split(py)?.name().to_string())
    }

    /// The id of the build that wrote the split, or None for an output without one.
    #[getter]
    fn build_id(&self, py: Python<'_>) -> PyResult<Option<String>> {
        Ok(self.split(py)?.build_id().map(str::to_string))
    }

    /// The numpy element type of `split[i]`.
    #[getter]
    fn dtype(&self) -> &'static str {
        self.dtype.name()
    }

    /// The element type stored in the file: `"f32"`, `"f16"` or `"bf16"`.
    #[getter]
    fn stored_dtype(&self, py: Python<'_>) -> PyResult<&'static str> {
        Ok(match self.split(py)?.dtype() {
            melkit::read::Dtype::F32 => "f32",
            melkit::read::Dtype::F16 => "f16",
            melkit::read::Dtype::Bf16 => "bf16",
        })
    }

    /// Every clip's class id (int64, read-only).
    #[getter]
    fn labels<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyArray1<i64>>> {
        let labels = self.labels.get_or_try_init(py, || -> PyResult<_> {
            let split = self.split(py)?;
            let a = PyArray1::from_vec(py, per_clip(&split, split.labels()));
            a.call_method1("setflags", (false,))?;
            Ok(a.unbind())
        })?;
        Ok(labels.bind(py).clone())
    }

    /// Class id -> name, the same in every split of an output.
    #[getter]
    fn label_names<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        PyList::new(py, self.split(py)?.label_names())
    }

    /// Every clip's source path, relative to the dataset root.
    #[getter]
    fn paths<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        let split = self.split(py)?;
        PyList::new(py, per_clip(&split, split.paths()))
    }

    /// The metadata column names, in order (a manifest's columns beyond path, label and
    /// split; ``group`` from ``group_pattern``); empty for a split built without.
    #[getter]
    fn meta_columns<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        PyList::new(py, self.split(py)?.meta_columns())
    }

    /// Every clip's metadata as ``{column: [value per clip]}`` (strings), in column order.
    #[getter]
    fn metadata<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let split = self.split(py)?;
        let meta = split.metadata();
        let dict = PyDict::new(py);
        for c in meta.columns() {
            let values = meta.column(c).expect("a listed column has values");
            dict.set_item(c, PyList::new(py, per_clip(&split, values))?)?;
        }
        Ok(dict)
    }

    /// The stored per-mel-bin mean (float64), or None if the output has no statistics.
    #[getter]
    fn mean<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyArray1<f64>>>> {
        let split = self.split(py)?;
        Ok(split
            .stored_stats()
            .map(|s| PyArray1::from_slice(py, &s.mean)))
    }

    /// The stored per-mel-bin standard deviation (float64), or None.
    #[getter]
    fn std<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyArray1<f64>>>> {
        let split = self.split(py)?;
        Ok(split
            .stored_stats()
            .map(|s| PyArray1::from_slice(py, &s.std)))
    }

    /// One clip's shape: `(long?, short?, n_mels, frames)`; `(n_mels, None)` for whole
    /// clips, whose frames vary (see `frames`).
    #[getter]
    fn clip_shape<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        let split = self.split(py)?;
        if split.whole().is_some() {
            return PyTuple::new(py, [Some(split.n_mels()), None]);
        }
        PyTuple::new(py, split.clip_shape())
    }

    /// One segment's shape: `(n_mels, frames)`.
    #[getter]
    fn segment_shape<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        PyTuple::new(py, self.split(py)?.segment_shape())
    }

    /// Segments per clip (`long * short`; 1 without segmentation).
    #[getter]
    fn segments_per_clip(&self, py: Python<'_>) -> PyResult<usize> {
        Ok(self.split(py)?.segments_per_clip())
    }

    /// The configuration the output was built with (a dict), or None if unreadable.
    #[getter]
    fn config<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyAny>>> {
        let split = self.split(py)?;
        let Some(config) = split.config() else {
            return Ok(None);
        };
        let text = serde_json::to_string(config)
            .map_err(|e| PyRuntimeError::new_err(format!("configuration to JSON: {e}")))?;
        Ok(Some(py.import("json")?.call_method1("loads", (text,))?))
    }

    /// The statistics to normalise with: the stored ones, or (when the output has none)
    /// computed from every value on `threads` threads. Returns `(mean, std)`, float64.
    #[pyo3(signature = (threads=None))]
    fn stats<'py>(&self, py: Python<'py>, threads: Option<usize>) -> PyResult<MeanStd<'py>> {
        let split = self.split(py)?;
        let threads = threads.unwrap_or_else(crate::default_threads);
        let stats = py.detach(|| split.stats(threads)).map_err(to_py)?;
        Ok((
            PyArray1::from_vec(py, stats.mean),
            PyArray1::from_vec(py, stats.std),
        ))
    }

    /// Pickles by path: the copy reopens the file lazily where it is unpickled.
    fn __reduce__<'py>(
        &self,
        py: Python<'py>,
    ) -> PyResult<(Bound<'py, PyAny>, Bound<'py, PyTuple>)> {
        let reopen = py.import("melctl._melctl")?.getattr("_reopen_split")?;
        let args = (
            self.identity.path.clone(),
            self.identity.name.clone(),
            self.dtype.name(),
            self.identity.shape.clone(),
            self.identity.build.clone(),
        )
            .into_pyobject(py)?;
        Ok((reopen, args))
    }

    fn __repr__(&self) -> String {
        let name = self
            .identity
            .name
            .as_deref()
            .map(|n| format!(", split={n:?}"))
            .unwrap_or_default();
        format!(
            "melctl.Split({:?}{name}, shape={:?}, dtype={})",
            self.identity.path.display().to_string(),
            self.identity.shape,
            self.dtype.name()
        )
    }
}

/// The unpickling side of [`PySplit::__reduce__`]: a split that opens on first use.
#[pyfunction]
#[pyo3(signature = (path, name, dtype, shape, build=None))]
pub fn _reopen_split(
    path: PathBuf,
    name: Option<String>,
    dtype: &Bound<'_, PyAny>,
    shape: Vec<usize>,
    build: Option<String>,
) -> PyResult<PySplit> {
    Ok(PySplit {
        identity: Identity {
            path,
            name,
            shape,
            build,
        },
        dtype: ItemDtype::parse(dtype)?,
        open: Mutex::new(None),
        labels: PyOnceLock::new(),
    })
}

#[cfg(test)]
mod tests {
    use super::wrapped;

    #[test]
    fn indices_count_from_either_end_and_stop_at_both() {
        assert_eq!(wrapped(0, 3), Some(0));
        assert_eq!(wrapped(2, 3), Some(2));
        assert_eq!(wrapped(-1, 3), Some(2));
        assert_eq!(wrapped(-3, 3), Some(0));
        for bad in [3, -4, isize::MIN, isize::MAX] {
            assert_eq!(wrapped(bad, 3), None, "{bad}");
        }
        assert_eq!(wrapped(0, 0), None);
        assert_eq!(wrapped(-1, 0), None);
    }
}

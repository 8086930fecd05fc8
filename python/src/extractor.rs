//! `melctl.Extractor`: the spectrogram a build stores, computed in-process from a numpy
//! array or a file (melkit's Extractor: the same decoding, resampling, backend and
//! checks), so a model is served exactly the features it was trained on.

use std::path::PathBuf;
use std::sync::Mutex;

use melkit::core::{Config, Dtype, MelPlan, OutputBuf};
use melkit::{BackendRequest, Features};
use ndarray::ArrayD;
use numpy::{PyArray, PyArrayDyn, PyArrayMethods};
use pyo3::exceptions::{PyRuntimeError, PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyDict;

use crate::dtype::ItemDtype;
use crate::errors::to_py;

/// Computes, in-process, exactly the spectrogram a build stores for a clip: the same
/// decoding, resampling, padding, backend and checks. Serve a model the features it
/// was trained on.
///
/// ``Extractor(preset, config, backend, dtype, **overrides)`` resolves the configuration
/// as :func:`build` does. Results are ``dtype``: float32 (default; stored f16/bf16
/// widened exactly), float64, or float16 where the configuration stores f16. It pickles
/// by configuration.
///
/// With ``precision="fast"`` the values depend on the backend that computes them (the
/// CPU's float32 transform; GPUs run their exact kernels): extract with the backend the
/// build used (its report's ``backend``) to get the stored values bit for bit.
#[pyclass(name = "Extractor", module = "melctl", frozen)]
pub struct PyExtractor {
    extractor: Mutex<melkit::Extractor>,
    config: Config,
    dtype: ItemDtype,
}

/// Refuses float16 output unless the configuration stores f16 (it would round).
fn check_dtype(dtype: ItemDtype, stored: Dtype) -> PyResult<()> {
    if dtype == ItemDtype::F16 && stored != Dtype::F16 {
        return Err(PyValueError::new_err(format!(
            "dtype float16 is offered where the configuration stores f16; it stores {}",
            stored.name()
        )));
    }
    Ok(())
}

/// Whether `dtype` names a stored type (`"f32"`, `"f16"`, `"bf16"`) rather than a numpy one.
fn stored_name(dtype: &Bound<'_, PyAny>) -> bool {
    dtype
        .extract::<String>()
        .is_ok_and(|d| ["f32", "f16", "bf16"].contains(&d.as_str()))
}

/// A vector of `n` values made by `value(i)`, or a LimitError where memory for it cannot
/// be had (a Python caller gets an exception, never an abort of the interpreter).
fn try_vec<T>(n: usize, value: impl Fn(usize) -> T) -> PyResult<Vec<T>> {
    let mut v = Vec::new();
    v.try_reserve_exact(n).map_err(|_| {
        crate::errors::raise(
            "LimitError",
            format!(
                "the extracted features: {n} values of {} bytes cannot be allocated",
                std::mem::size_of::<T>()
            ),
        )
    })?;
    v.extend((0..n).map(value));
    Ok(v)
}

/// `features` as a numpy array of `dtype`, its leading clip axis dropped when `one`.
fn to_numpy<'py>(
    py: Python<'py>,
    features: Features,
    dtype: ItemDtype,
    one: bool,
) -> PyResult<Bound<'py, PyAny>> {
    let mut shape = features.shape().to_vec();
    if one {
        shape.remove(0);
    }
    let bad = |e: ndarray::ShapeError| PyRuntimeError::new_err(format!("features' shape: {e}"));
    Ok(match (dtype, features.values()) {
        (ItemDtype::F16, OutputBuf::F16(v)) => {
            let a = ArrayD::from_shape_vec(shape, try_vec(v.len(), |i| v[i])?).map_err(bad)?;
            PyArray::from_owned_array(py, a).into_any()
        }
        (ItemDtype::F64, values) => {
            let v = try_vec(values.len(), |i| values.get_f64(i))?;
            PyArray::from_owned_array(py, ArrayD::from_shape_vec(shape, v).map_err(bad)?).into_any()
        }
        (_, values) => {
            // f16 and bf16 widen to f32 exactly; f32 is copied as is.
            let v = try_vec(values.len(), |i| values.get_f64(i) as f32)?;
            PyArray::from_owned_array(py, ArrayD::from_shape_vec(shape, v).map_err(bad)?).into_any()
        }
    })
}

impl PyExtractor {
    fn start(py: Python<'_>, config: Config, dtype: ItemDtype) -> PyResult<Self> {
        check_dtype(dtype, config.output.dtype)?;
        let spec = config.spec();
        let request = BackendRequest {
            kind: config.run.backend,
            device: config.run.device.clone(),
            ..BackendRequest::auto()
        };
        let extractor = py
            .detach(|| melkit::Extractor::new(&spec, &request))
            .map_err(to_py)?;
        Ok(PyExtractor {
            extractor: Mutex::new(extractor),
            config,
            dtype,
        })
    }

    fn with<T: Send>(
        &self,
        py: Python<'_>,
        f: impl FnOnce(&mut melkit::Extractor) -> melkit::core::Result<T> + Send,
    ) -> PyResult<T> {
        py.detach(|| {
            let mut ex = self.extractor.lock().map_err(|_| {
                melkit::core::Error::Internal("a thread panicked in the extractor".into())
            })?;
            f(&mut ex)
        })
        .map_err(to_py)
    }

    fn plan(&self) -> PyResult<MelPlan> {
        MelPlan::from_config(&self.config).map_err(to_py)
    }

    /// Whether one clip's result drops its leading axis: not for windows, where a file
    /// gives several.
    fn drops_axis(&self) -> PyResult<bool> {
        Ok(self.plan()?.windows().is_none())
    }
}

#[pymethods]
impl PyExtractor {
    /// An extractor for `preset`, then `config` (a TOML file or a dict of sections), then
    /// the keyword overrides, as `melctl.build` resolves them; `backend` "auto" (CUDA,
    /// else a hardware GPU through wgpu, else the CPU), "cpu", "cuda" or "wgpu". Results
    /// are `dtype`: float32 (every stored type widened exactly), float64, or float16
    /// where the configuration stores f16.
    #[new]
    #[pyo3(signature = (preset="leak-4k", config=None, backend=None, dtype=None, **overrides))]
    fn new(
        py: Python<'_>,
        preset: &str,
        config: Option<&Bound<'_, PyAny>>,
        backend: Option<&str>,
        dtype: Option<&Bound<'_, PyAny>>,
        overrides: Option<&Bound<'_, PyDict>>,
    ) -> PyResult<Self> {
        // `dtype="f32" | "f16" | "bf16"` is the stored type (as for `melctl.build`); a
        // numpy dtype (`"float32"`, `np.float16`) is the results' type.
        let stored = dtype
            .filter(|d| stored_name(d))
            .and_then(|d| d.extract::<String>().ok());
        let overrides = match stored {
            Some(name) => {
                let all = PyDict::new(py);
                if let Some(o) = overrides {
                    all.update(o.as_mapping())?;
                }
                all.set_item("output__dtype", name)?;
                Some(all)
            }
            None => overrides.cloned(),
        };
        let named = [("run.backend", "backend", backend.map(str::to_string))];
        let config = crate::config::resolve(preset, config, &named, overrides.as_ref())?;
        let dtype = match dtype {
            Some(d) if !stored_name(d) => ItemDtype::parse(d)?,
            _ => ItemDtype::F32,
        };
        Self::start(py, config, dtype)
    }

    /// The spectrogram of `audio` at `sample_rate` Hz, brought to the clip as a decoded
    /// file is (resampled, padded or trimmed): a 1-D array is one clip (the clip shape
    /// back), a 2-D array one clip per row (`[rows, *clip_shape]` back). Samples are
    /// floats in [-1, 1]; integer PCM must be scaled first.
    fn __call__<'py>(
        &self,
        py: Python<'py>,
        audio: &Bound<'py, PyAny>,
        sample_rate: u32,
    ) -> PyResult<Bound<'py, PyAny>> {
        let numpy = py.import("numpy")?;
        let array = numpy.call_method1("asarray", (audio,))?;
        let kind: String = array.getattr("dtype")?.getattr("kind")?.extract()?;
        if kind != "f" {
            return Err(PyTypeError::new_err(format!(
                "audio must be floating point in [-1, 1]; got dtype {} (scale integer PCM first, e.g. x / 32768)",
                array.getattr("dtype")?.str()?
            )));
        }
        // Wider floats than float32 must fit in it: 1e300 would become infinity and be
        // reported as an infinite sample.
        if array
            .getattr("dtype")?
            .getattr("itemsize")?
            .extract::<usize>()?
            > 4
        {
            let finite = numpy.call_method1("isfinite", (&array,))?;
            let big = numpy
                .call_method1("abs", (&array,))?
                .call_method1("__gt__", (f32::MAX as f64,))?
                .call_method1("__and__", (finite,))?;
            if big.call_method0("any")?.extract::<bool>()? {
                return Err(PyValueError::new_err(
                    "audio holds finite samples beyond the float32 range (samples are floats in [-1, 1])",
                ));
            }
        }
        // The shape as given: numpy's ascontiguousarray makes a scalar a 1-sample array,
        // which was taken as a clip.
        let given: Vec<usize> = array.getattr("shape")?.extract()?;
        let (row_len, one) = match given.as_slice() {
            [n] => (*n, true),
            [rows, n] => {
                // soundfile.read gives (frames, channels): 19,584 frames of stereo were
                // taken as 19,584 clips of 2 samples.
                if *n < 64 && rows > n {
                    return Err(PyValueError::new_err(format!(
                        "audio of shape {given:?} looks like (frames, channels), as soundfile.read gives; a 2-D array is one clip per row: pass one channel (x[:, 0]) or their mean (x.mean(axis=1))"
                    )));
                }
                (*n, false)
            }
            _ => {
                return Err(PyValueError::new_err(format!(
                    "audio must be 1-D (one clip) or 2-D (a clip per row); got shape {given:?}"
                )));
            }
        };
        let kwargs = PyDict::new(py);
        kwargs.set_item("dtype", "float32")?;
        let array = numpy
            .getattr("ascontiguousarray")?
            .call((array,), Some(&kwargs))?;
        let array = array.cast::<PyArrayDyn<f32>>()?.readonly();
        let samples = array.as_slice()?;
        if samples.is_empty() {
            return Err(PyValueError::new_err("audio holds no samples"));
        }
        // Between parts of rows, Python's signal handlers run: Ctrl-C ends a long call.
        let mut raised: Option<PyErr> = None;
        let features = self.with(py, |ex| {
            ex.rows_until(samples, row_len, sample_rate, &mut || {
                Python::attach(|py| py.check_signals())
                    .map_err(|e| raised = Some(e))
                    .is_err()
            })
        });
        if let Some(e) = raised {
            return Err(e);
        }
        let one = one && self.drops_axis()?;
        to_numpy(py, features?, self.dtype, one)
    }

    /// The spectrogram of the audio file at `path`, decoded exactly as a build decodes
    /// it (the clip shape back).
    fn file<'py>(&self, py: Python<'py>, path: PathBuf) -> PyResult<Bound<'py, PyAny>> {
        let features = self.with(py, |ex| ex.file(&path))?;
        to_numpy(py, features, self.dtype, self.drops_axis()?)
    }

    /// An extractor with exactly the settings `split` was built with (its stored
    /// configuration, dtype included): ``split[i]`` and ``extractor.file(path)`` are the
    /// same values. Whole clips give each file's spectrogram at its own length; windows a
    /// ``[windows, ...]`` array per file. ``backend`` overrides the stored one (results
    /// then agree within the backends' conformance bound); ``dtype`` is the results'
    /// numpy type (float32 by default, as ``split[i]`` gives).
    #[staticmethod]
    #[pyo3(signature = (split, backend=None, dtype=None))]
    fn from_split(
        py: Python<'_>,
        split: &Bound<'_, crate::split::PySplit>,
        backend: Option<&str>,
        dtype: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Self> {
        let stored = split.get().split(py)?;
        let Some(json) = stored.config() else {
            return Err(crate::errors::raise(
                "DatasetError",
                format!(
                    "{}: holds no build configuration to extract with",
                    stored.path().display()
                ),
            ));
        };
        let mut config: Config = serde_json::from_value(json.clone()).map_err(|e| {
            crate::errors::raise(
                "DatasetError",
                format!(
                    "{}: its configuration does not read: {e}",
                    stored.path().display()
                ),
            )
        })?;
        if let Some(b) = backend {
            config.run.backend = b
                .parse()
                .map_err(|why: String| to_py(melkit::core::Error::config("backend", why)))?;
        }
        let dtype = match dtype {
            Some(d) => ItemDtype::parse(d)?,
            None => ItemDtype::F32,
        };
        Self::start(py, config, dtype)
    }

    /// The shape of one clip's spectrogram (`(79, 3, 32, 5)` for leak-4k).
    #[getter]
    fn clip_shape(&self) -> PyResult<Vec<usize>> {
        Ok(self.plan()?.clip_shape())
    }

    /// The sample rate clips are brought to.
    #[getter]
    fn sample_rate(&self) -> u32 {
        self.config.audio.sample_rate
    }

    /// Samples in one clip at `sample_rate`.
    #[getter]
    fn clip_samples(&self) -> PyResult<usize> {
        Ok(self.plan()?.clip_samples())
    }

    /// The backend computing: "cpu", "cuda" or "wgpu".
    #[getter]
    fn backend(&self) -> PyResult<String> {
        let ex = self
            .extractor
            .lock()
            .map_err(|_| PyRuntimeError::new_err("a thread panicked in the extractor"))?;
        Ok(ex.choice().kind.name().to_string())
    }

    /// The numpy dtype of the results.
    #[getter]
    fn dtype(&self) -> &'static str {
        self.dtype.name()
    }

    /// The resolved configuration as TOML.
    #[getter]
    fn config(&self) -> String {
        self.config.to_toml()
    }

    /// Pickles as its configuration and dtype; the backend starts again where unpickled.
    fn __reduce__<'py>(&self, py: Python<'py>) -> PyResult<(Bound<'py, PyAny>, (String, String))> {
        let f = py
            .import("melctl._melctl")?
            .getattr("_extractor_from_toml")?;
        Ok((f, (self.config.to_toml(), self.dtype.name().to_string())))
    }

    fn __repr__(&self) -> PyResult<String> {
        Ok(format!(
            "melctl.Extractor(backend={:?}, clip_shape={:?}, sample_rate={}, dtype={})",
            self.backend()?,
            self.clip_shape()?,
            self.sample_rate(),
            self.dtype.name()
        ))
    }
}

/// Unpickles an Extractor: its configuration as TOML, its dtype's name.
#[pyfunction]
pub fn _extractor_from_toml(py: Python<'_>, toml: &str, dtype: &str) -> PyResult<PyExtractor> {
    let config = Config::from_toml(toml).map_err(to_py)?;
    let dtype = ItemDtype::parse(&pyo3::types::PyString::new(py, dtype).into_any())?;
    PyExtractor::start(py, config, dtype)
}

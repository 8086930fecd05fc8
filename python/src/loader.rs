//! `melctl.Loader`: melread's batches as numpy arrays. Rust worker threads fill batches
//! with the GIL released; an f32 batch's buffer becomes its numpy array without a copy.
//! The loader keeps its place (epoch, next batch) as batches are handed out, so
//! `state_dict()` / `load_state_dict()` resume exactly mid-epoch.

use std::path::PathBuf;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use melkit::read::{Batch, Loader, LoaderOptions, Unit, Values, Waited};
use ndarray::ArrayD;
use numpy::{PyArray, PyArray1, PyArray2, PyArrayMethods};
use pyo3::exceptions::{PyKeyError, PyRuntimeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyTuple};

use crate::augment::PyAugment;
use crate::dtype::ItemDtype;
use crate::errors::to_py;
use crate::options;
use crate::split::PySplit;

/// How long a wait for a batch runs before Python's signal handlers get a turn.
const SIGNAL_POLL: std::time::Duration = std::time::Duration::from_millis(50);

/// Where the loader is: the epoch, and the batch after the last one handed out.
#[derive(Debug, Clone, Copy, Default)]
struct Position {
    epoch: u64,
    batch: usize,
    /// Set by `load_state_dict`: the next `iter()` continues from `batch` (once). Without
    /// it an `iter()` starts `epoch` from its first batch, as a `DataLoader` does.
    resume: bool,
    /// Bumped by every `iter()`, `set_epoch` and `load_state_dict`: only the latest
    /// iterator moves the position.
    generation: u64,
}

#[doc = include_str!("loader_doc.txt")]
#[pyclass(name = "Loader", module = "melctl", frozen)]
pub struct PyLoader {
    loader: Loader,
    split: Py<PySplit>,
    with_index: bool,
    /// Mixup is on: `y` is soft labels over this many classes.
    soft_labels: Option<usize>,
    position: Arc<Mutex<Position>>,
    /// The arguments it was made with, for pickling: `(path, batch_size)` and the rest.
    args: Py<PyTuple>,
    kwargs: Py<PyDict>,
}

fn locked<T>(m: &Mutex<T>) -> PyResult<MutexGuard<'_, T>> {
    m.lock()
        .map_err(|_| PyRuntimeError::new_err("a thread panicked holding the loader's state"))
}

/// The split a Loader reads: a `melctl.Split`, or a path (with `split` naming one of an
/// output folder's splits).
fn split_arg(py: Python<'_>, path: &Bound<'_, PyAny>, name: Option<&str>) -> PyResult<Py<PySplit>> {
    if let Ok(split) = path.cast::<PySplit>() {
        if name.is_some() {
            return Err(PyValueError::new_err(
                "split= names a split of an output folder; a Split was given",
            ));
        }
        return Ok(split.clone().unbind());
    }
    let path: PathBuf = path.extract()?;
    Py::new(py, PySplit::open(py, &path, name, ItemDtype::F32)?)
}

#[pymethods]
impl PyLoader {
    /// A loader over `path` (a split file or folder, an output folder with `split`, or a
    /// `melctl.Split`), checked by melread: batch size, threads and prefetch at least 1,
    /// rank below world, statistics matching the mel bins, a batch within 4 GiB.
    #[new]
    #[pyo3(signature = (
        path, batch_size, unit="segment", shuffle=None, seed=0, epoch=0, drop_last=false,
        shard=None, normalize=None, dtype=None, threads=None, prefetch=2, with_index=false,
        split=None, crop_frames=None, max_frames=None, augment=None,
    ))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        path: &Bound<'_, PyAny>,
        batch_size: i64,
        unit: &str,
        shuffle: Option<&Bound<'_, PyAny>>,
        seed: i128,
        epoch: i128,
        drop_last: bool,
        shard: Option<(i64, i64)>,
        normalize: Option<&Bound<'_, PyAny>>,
        dtype: Option<&Bound<'_, PyAny>>,
        threads: Option<i64>,
        prefetch: i64,
        with_index: bool,
        split: Option<&str>,
        crop_frames: Option<i64>,
        max_frames: Option<i64>,
        augment: Option<PyRef<'_, PyAugment>>,
    ) -> PyResult<Self> {
        let kwargs = PyDict::new(py);
        for (key, value) in [
            ("unit", unit.into_pyobject(py)?.into_any()),
            ("shuffle", shuffle.into_pyobject(py)?.into_any()),
            ("seed", seed.into_pyobject(py)?.into_any()),
            ("epoch", epoch.into_pyobject(py)?.into_any()),
            (
                "drop_last",
                drop_last.into_pyobject(py)?.to_owned().into_any(),
            ),
            ("shard", shard.into_pyobject(py)?.into_any()),
            ("normalize", normalize.into_pyobject(py)?.into_any()),
            ("dtype", dtype.into_pyobject(py)?.into_any()),
            ("threads", threads.into_pyobject(py)?.into_any()),
            ("prefetch", prefetch.into_pyobject(py)?.into_any()),
            (
                "with_index",
                with_index.into_pyobject(py)?.to_owned().into_any(),
            ),
            ("split", split.into_pyobject(py)?.into_any()),
            ("crop_frames", crop_frames.into_pyobject(py)?.into_any()),
            ("max_frames", max_frames.into_pyobject(py)?.into_any()),
        ] {
            kwargs.set_item(key, value)?;
        }
        let aug = augment
            .as_ref()
            .map(|a| a.inner.clone())
            .unwrap_or_default();
        kwargs.set_item("augment", augment)?;
        let args = PyTuple::new(py, [path.clone(), batch_size.into_pyobject(py)?.into_any()])?;
        let batch_size = options::positive("batch_size", batch_size)?;
        let (seed, epoch) = (
            options::unsigned("seed", seed)?,
            options::unsigned("epoch", epoch)?,
        );
        let shard = match shard {
            Some((r, w)) => Some((options::count("shard", r)?, options::count("shard", w)?)),
            None => None,
        };
        // melread calls them workers; the caller said threads.
        let threads = threads
            .map(|t| options::positive("threads", t))
            .transpose()?;
        let prefetch = options::count("prefetch", prefetch)?;
        let crop_frames = crop_frames
            .map(|c| options::count("crop_frames", c))
            .transpose()?;
        let max_frames = max_frames
            .map(|m| options::count("max_frames", m))
            .transpose()?;
        let py_split = split_arg(py, path, split)?;
        let split = py_split.get().split(py)?;
        let threads = threads.unwrap_or_else(crate::default_threads);
        let (rank, world) = options::shard(shard);
        let shuffle = match shuffle {
            Some(s) => options::shuffle(s)?,
            None => melkit::read::Shuffle::Uniform,
        };
        let output = match dtype {
            Some(d) => options::output(d, &split)?,
            None => melkit::read::Output::F32,
        };
        let normalize = match normalize {
            Some(n) => options::normalize(py, n, &split, threads)?,
            None => None,
        };
        let opts = LoaderOptions {
            unit: options::unit(unit)?,
            batch_size,
            shuffle,
            seed,
            drop_last,
            workers: threads,
            prefetch,
            rank,
            world,
            output,
            normalize,
            crop_frames,
            max_frames,
            augment: aug,
        };
        let loader = Loader::new(split, opts).map_err(to_py)?;
        let soft_labels = loader
            .options()
            .augment
            .mixup
            .map(|_| loader.split().label_names().len());
        Ok(PyLoader {
            loader,
            split: py_split,
            with_index,
            soft_labels,
            position: Arc::new(Mutex::new(Position {
                epoch,
                ..Position::default()
            })),
            args: args.unbind(),
            kwargs: kwargs.unbind(),
        })
    }

    /// Pickling (spawn and forkserver workers): made again from its arguments, its
    /// position carried as a `state_dict`.
    fn __getnewargs_ex__<'py>(&self, py: Python<'py>) -> (Bound<'py, PyTuple>, Bound<'py, PyDict>) {
        (self.args.bind(py).clone(), self.kwargs.bind(py).clone())
    }

    /// The position, as `state_dict` gives it.
    fn __getstate__<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let d = self.state_dict(py)?;
        d.set_item("resume", locked(&self.position)?.resume)?;
        Ok(d)
    }

    /// Restores a pickled position.
    fn __setstate__(&self, state: &Bound<'_, PyDict>) -> PyResult<()> {
        self.load_state_dict(state)?;
        let resume = state
            .get_item("resume")?
            .map(|r| r.extract::<bool>())
            .transpose()?
            .unwrap_or(true);
        locked(&self.position)?.resume = resume;
        Ok(())
    }

    /// Batches per epoch for this shard (with `max_frames`, of the epoch the next
    /// iteration reads: the count varies by epoch).
    fn __len__(&self) -> PyResult<usize> {
        Ok(self.loader.batches_in(locked(&self.position)?.epoch))
    }

    /// The share of padding in epoch `epoch`'s batches (the next iteration's by default):
    /// zeros after whole clips shorter than their batch (`max_frames`) or crop
    /// (`crop_frames`); 0.0 for fixed-length clips.
    #[pyo3(signature = (epoch=None))]
    fn padding_share(&self, epoch: Option<i128>) -> PyResult<f64> {
        let epoch = match epoch {
            Some(e) => options::unsigned("epoch", e)?,
            None => locked(&self.position)?.epoch,
        };
        Ok(self.loader.padding_share(epoch))
    }

    /// One epoch's batches, as a `DataLoader` gives them: the loader's epoch from its first
    /// batch (after `load_state_dict`, from the saved batch on, once). Once its last batch
    /// is handed out the loader is at the next epoch (another order); a pass left early
    /// leaves the epoch where it is, so peeking at a batch costs the epoch nothing.
    fn __iter__(&self) -> PyResult<PyBatches> {
        let mut pos = locked(&self.position)?;
        pos.generation += 1;
        if !pos.resume {
            pos.batch = 0;
        }
        pos.resume = false;
        Ok(PyBatches {
            state: Mutex::new(State::Ready(self.loader.resume(pos.epoch, pos.batch))),
            loader: self.loader.clone(),
            pid: AtomicU32::new(std::process::id()),
            position: Arc::clone(&self.position),
            generation: pos.generation,
            epoch: pos.epoch,
            batches: self.loader.batches_in(pos.epoch),
            with_index: self.with_index,
            lengths: self.loader.split().whole().is_some(),
            soft_labels: self.soft_labels,
        })
    }

    /// Starts epoch `epoch` from its first batch at the next iteration.
    fn set_epoch(&self, epoch: i128) -> PyResult<()> {
        let epoch = options::unsigned("epoch", epoch)?;
        let mut pos = locked(&self.position)?;
        *pos = Position {
            epoch,
            batch: 0,
            resume: false,
            generation: pos.generation + 1,
        };
        Ok(())
    }

    /// The epoch the next iteration reads.
    #[getter]
    fn epoch(&self) -> PyResult<u64> {
        Ok(locked(&self.position)?.epoch)
    }

    /// Items per batch.
    #[getter]
    fn batch_size(&self) -> usize {
        self.loader.options().batch_size
    }

    /// One item's shape (`(n_mels, frames)` for segments, the clip shape for clips).
    #[getter]
    fn item_shape<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        PyTuple::new(py, self.loader.item_shape())
    }

    /// Items this shard gets per epoch.
    #[getter]
    fn items_per_epoch(&self) -> usize {
        self.loader.items_per_epoch()
    }

    /// The most bytes the loader's batch buffers take (`prefetch + 2` batches, plus each
    /// thread's chunk cache or streaming scratch).
    #[getter]
    fn memory_bound(&self) -> usize {
        self.loader.memory_bound()
    }

    /// The split read.
    #[getter]
    fn split(&self, py: Python<'_>) -> Py<PySplit> {
        self.split.clone_ref(py)
    }

    /// Epoch `epoch`'s items in batch order, without reading anything: an int64 array
    /// of `(clip, segment)` rows (segment 0 for `unit="clip"`), what iterating that
    /// epoch delivers (e.g. for another reader to read the same items).
    fn plan<'py>(&self, py: Python<'py>, epoch: i128) -> PyResult<Bound<'py, PyArray2<i64>>> {
        let epoch = options::unsigned("epoch", epoch)?;
        let flat: Vec<i64> = self
            .loader
            .plan(epoch, 0)
            .flatten()
            .flat_map(|id| [id.clip as i64, id.segment as i64])
            .collect();
        let rows = flat.len() / 2;
        PyArray1::from_vec(py, flat).reshape([rows, 2])
    }

    /// Where the loader is, and the settings that fix its order: resume with
    /// `load_state_dict` on a loader made with the same settings.
    fn state_dict<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let pos = *locked(&self.position)?;
        let d = PyDict::new(py);
        d.set_item("epoch", pos.epoch)?;
        d.set_item("batch", pos.batch)?;
        for (key, value) in self.fingerprint() {
            value.set(&d, key)?;
        }
        Ok(d)
    }

    /// Resumes where `state` (from `state_dict`) was: the next iteration delivers the
    /// batches an uninterrupted run would have delivered from there. A state of a loader
    /// with another order (seed, batch size, unit, shuffle, shard, drop_last, items), or of
    /// another build of the split (`build`), is refused.
    fn load_state_dict(&self, state: &Bound<'_, PyDict>) -> PyResult<()> {
        let get = |key: &str| -> PyResult<Bound<'_, PyAny>> {
            state
                .get_item(key)?
                .ok_or_else(|| PyKeyError::new_err(format!("state_dict has no {key:?}")))
        };
        for (key, ours) in self.fingerprint() {
            let ours = ours.text();
            let theirs: String = match (key, state.get_item(key)?) {
                ("crop_frames" | "max_frames", None) => "0".into(),
                ("augment", None) => "off".into(),
                _ => get(key)?.str()?.extract()?,
            };
            if theirs != ours {
                return Err(PyValueError::new_err(format!(
                    "state_dict is for {key} = {theirs}; this loader has {key} = {ours}"
                )));
            }
        }
        let epoch: u64 = get("epoch")?.extract()?;
        let batch: usize = get("batch")?.extract()?;
        let batches = self.loader.batches_in(epoch);
        if batch > batches {
            return Err(PyValueError::new_err(format!(
                "state_dict's batch {batch} is beyond the epoch's {batches} batches"
            )));
        }
        let mut pos = locked(&self.position)?;
        *pos = Position {
            epoch,
            batch,
            resume: true,
            generation: pos.generation + 1,
        };
        Ok(())
    }

    fn __repr__(&self) -> String {
        let o = self.loader.options();
        format!(
            "melctl.Loader({:?}, batch_size={}, unit={}, shuffle={}, shard=({}, {}), {} batches per epoch)",
            self.loader.split().path().display().to_string(),
            o.batch_size,
            unit_name(o.unit),
            options::shuffle_name(o.shuffle),
            o.rank,
            o.world,
            self.loader.batches_per_epoch()
        )
    }
}

fn unit_name(unit: Unit) -> &'static str {
    match unit {
        Unit::Segment => "segment",
        Unit::Clip => "clip",
    }
}

impl PyLoader {
    /// The settings that fix the order of batches (what `state_dict` records).
    fn fingerprint(&self) -> Vec<(&'static str, Setting)> {
        let o = self.loader.options();
        vec![
            ("seed", Setting::Int(o.seed)),
            ("batch_size", Setting::Int(o.batch_size as u64)),
            ("unit", Setting::Text(unit_name(o.unit).to_string())),
            ("shuffle", Setting::Text(options::shuffle_name(o.shuffle))),
            ("rank", Setting::Int(o.rank as u64)),
            ("world", Setting::Int(o.world as u64)),
            ("drop_last", Setting::Bool(o.drop_last)),
            // 0: no crop (and what a state saved before crops existed means).
            (
                "crop_frames",
                Setting::Int(o.crop_frames.unwrap_or(0) as u64),
            ),
            // 0: no buckets (and what a state saved before buckets existed means).
            ("max_frames", Setting::Int(o.max_frames.unwrap_or(0) as u64)),
            // The augmentation draws: another one gives other batches ("off": none, and
            // what a state saved before augmentation existed means).
            (
                "augment",
                Setting::Text(if o.augment.is_off() {
                    "off".into()
                } else {
                    PyAugment {
                        inner: o.augment.clone(),
                    }
                    .text()
                }),
            ),
            ("items", Setting::Int(self.loader.items_per_epoch() as u64)),
            // The build the split comes from: a state saved before the split was built
            // again (as many clips, other ones or in another order) is refused.
            ("build", Setting::Text(self.loader.split().identity())),
        ]
    }
}

/// One recorded setting, as its Python value.
enum Setting {
    Int(u64),
    Bool(bool),
    Text(String),
}

impl Setting {
    /// The setting as Python writes it (`str(value)`), for comparing with a state's.
    fn text(&self) -> String {
        match self {
            Setting::Int(v) => v.to_string(),
            Setting::Bool(true) => "True".into(),
            Setting::Bool(false) => "False".into(),
            Setting::Text(t) => t.clone(),
        }
    }

    fn set(&self, d: &Bound<'_, PyDict>, key: &str) -> PyResult<()> {
        match self {
            Setting::Int(v) => d.set_item(key, v),
            Setting::Bool(v) => d.set_item(key, v),
            Setting::Text(v) => d.set_item(key, v),
        }
    }
}

/// An iterator's epoch: waiting to be read, being read by a thread, or over.
enum State {
    Ready(melkit::read::Epoch),
    Busy,
    Done,
}

/// One pass over a Loader's batches (from ``iter(loader)``): ``(x, y)``, for whole
/// clips ``(x, y, lengths)``, then ``clip_index`` with ``with_index``; read with the GIL released. A pass that crosses a
/// ``fork`` goes on in the child (its workers start again there).
#[pyclass(name = "Batches", module = "melctl", frozen)]
pub struct PyBatches {
    state: Mutex<State>,
    /// The loader, to start the pass's workers again in a forked child.
    loader: Loader,
    /// The process whose threads read this pass: a forked child has none of them.
    pid: AtomicU32,
    position: Arc<Mutex<Position>>,
    generation: u64,
    epoch: u64,
    batches: usize,
    with_index: bool,
    /// Whole clips: batches carry each item's frames (`(x, y, lengths)`).
    lengths: bool,
    /// Mixup: `y` is soft labels over this many classes.
    soft_labels: Option<usize>,
}

#[pymethods]
impl PyBatches {
    fn __iter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    /// The next batch, read with the GIL released.
    fn __next__<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyTuple>>> {
        // The lock is released before anything else takes it (or waits).
        let state = std::mem::replace(&mut *locked(&self.state)?, State::Busy);
        let state = self.in_this_process(state)?;
        let mut epoch = match state {
            State::Ready(e) => e,
            State::Busy => {
                return Err(PyRuntimeError::new_err(
                    "another thread is reading this iterator",
                ));
            }
            State::Done => {
                *locked(&self.state)? = State::Done;
                return Ok(None);
            }
        };
        // Waits in short steps with the GIL released, checking for Ctrl-C between them:
        // a KeyboardInterrupt leaves the iterator where it was.
        let next = loop {
            let (waited, back) = py.detach(move || (epoch.next_within(SIGNAL_POLL), epoch));
            epoch = back;
            match waited {
                Waited::Ready(next) => break next,
                Waited::Pending => {
                    if let Err(e) = py.check_signals() {
                        *locked(&self.state)? = State::Ready(epoch);
                        return Err(e);
                    }
                }
            }
        };
        match next {
            Some(Ok(batch)) => {
                *locked(&self.state)? = State::Ready(epoch);
                self.moved_past(batch.index())?;
                self.to_python(py, batch).map(Some)
            }
            Some(Err(e)) => {
                *locked(&self.state)? = State::Done;
                Err(to_py(e))
            }
            None => {
                *locked(&self.state)? = State::Done;
                if self.batches == 0 {
                    self.moved_past(0)?;
                }
                Ok(None)
            }
        }
    }

    /// Batches left in this pass.
    fn __length_hint__(&self) -> PyResult<usize> {
        Ok(match &*locked(&self.state)? {
            State::Ready(e) => self.batches.saturating_sub(e.next_index()),
            State::Busy | State::Done => 0,
        })
    }
}

impl PyBatches {
    /// `state` as this process can read it. In a child forked while the pass was under
    /// way, the workers filling its batches are the parent's threads, which the child
    /// lacks (waiting for them waited for ever): the pass's workers start again here,
    /// from the batch it was at, and the parent's are left alone (never joined).
    fn in_this_process(&self, state: State) -> PyResult<State> {
        let here = std::process::id();
        if self.pid.load(Ordering::SeqCst) == here {
            return Ok(state);
        }
        match state {
            State::Ready(parents) => {
                let at = parents.next_index();
                std::mem::forget(parents);
                self.pid.store(here, Ordering::SeqCst);
                Ok(State::Ready(self.loader.resume(self.epoch, at)))
            }
            State::Done => Ok(State::Done),
            State::Busy => Err(PyRuntimeError::new_err(
                "this iterator was being read by another thread when the process forked; start a new one with iter(loader)",
            )),
        }
    }

    /// Records that batch `index` was handed out (if this is the loader's latest pass):
    /// the position is the batch after it, or the next epoch after the last.
    fn moved_past(&self, index: usize) -> PyResult<()> {
        let mut pos = locked(&self.position)?;
        if pos.generation == self.generation {
            if index + 1 >= self.batches {
                pos.epoch = self.epoch.saturating_add(1);
                pos.batch = 0;
            } else {
                pos.epoch = self.epoch;
                pos.batch = index + 1;
            }
        }
        Ok(())
    }

    /// `(x, y)`, for whole clips `(x, y, lengths)`, then `clip_index` with
    /// `with_index`: an f32 batch's buffer is `x`'s memory without a
    /// copy, and returns to the loader when `x` is freed; f16 batches are copied once.
    fn to_python<'py>(&self, py: Python<'py>, batch: Batch) -> PyResult<Bound<'py, PyTuple>> {
        let shape = batch.shape().to_vec();
        let y = match (self.soft_labels, batch.mixed()) {
            (Some(classes), Some(m)) => {
                let soft = m.soft_labels(batch.labels(), classes);
                PyArray1::from_vec(py, soft)
                    .reshape([batch.len(), classes])?
                    .into_any()
            }
            _ => PyArray1::from_slice(py, batch.labels()).into_any(),
        };
        let clips: Vec<i64> = batch.ids().iter().map(|id| id.clip as i64).collect();
        let lengths: Vec<i64> = batch.lengths().iter().map(|&n| n as i64).collect();
        let x = if let Values::F16(v) = batch.values() {
            // f16 as stored: copied once into the array.
            PyArray::from_owned_array(py, shaped(shape, v.to_vec())?).into_any()
        } else {
            lent_f32(py, shape, batch)?
        };
        let mut items = vec![x, y];
        if self.lengths {
            items.push(PyArray1::from_vec(py, lengths).into_any());
        }
        if self.with_index {
            items.push(PyArray1::from_vec(py, clips).into_any());
        }
        PyTuple::new(py, items)
    }
}

impl Drop for PyBatches {
    /// In a forked child the pass's workers are the parent's threads: its epoch is not
    /// dropped (dropping joins them, which would wait for threads this process lacks).
    fn drop(&mut self) {
        if *self.pid.get_mut() != std::process::id()
            && let Ok(state) = self.state.get_mut()
            && let State::Ready(parents) = std::mem::replace(state, State::Done)
        {
            std::mem::forget(parents);
        }
    }
}

/// `values` as an array of `shape`.
/// Keeps a batch whose f32 values a numpy array shows: when the array is freed, so is the
/// batch, and its buffer goes back to the loader for a later batch (no new allocation to
/// zero and fault in: BENCHMARKS.md, 2026-11-28, crops). In a forked child the batch is
/// forgotten rather than given back: the parent's pool lock may have been held by a
/// thread the child does not have.
#[pyclass(module = "melctl._melctl")]
struct BatchMemory {
    batch: Option<Batch>,
    pid: u32,
}

impl Drop for BatchMemory {
    fn drop(&mut self) {
        if let Some(b) = self.batch.take()
            && self.pid != std::process::id()
        {
            std::mem::forget(b);
        }
    }
}

/// `batch`'s f32 values as a writable numpy array of `shape` whose memory is the batch's
/// buffer, kept by a [`BatchMemory`] as the array's base.
fn lent_f32<'py>(py: Python<'py>, shape: Vec<usize>, batch: Batch) -> PyResult<Bound<'py, PyAny>> {
    let Values::F32(v) = batch.values() else {
        return Err(PyRuntimeError::new_err(
            "a bf16 batch, which this loader never asks for",
        ));
    };
    let (ptr, len) = (v.as_ptr(), v.len());
    if shape.iter().product::<usize>() != len {
        return Err(PyRuntimeError::new_err(format!(
            "a batch's shape {shape:?} does not hold its {len} values"
        )));
    }
    let owner = Bound::new(
        py,
        BatchMemory {
            batch: Some(batch),
            pid: std::process::id(),
        },
    )?;
    // SAFETY: `ptr` points at `len` f32 values in the batch's heap buffer, which moving
    // the batch into `owner` did not move; `owner` becomes the array's base, so the
    // buffer lives as long as the array, and nothing else reads or writes it meanwhile
    // (the loader has it back only when the batch is dropped with `owner`).
    let view = unsafe { ndarray::ArrayViewD::from_shape_ptr(ndarray::IxDyn(&shape), ptr) };
    // SAFETY: `owner`, the array's base, keeps the memory `view` shows alive for the
    // array's whole life (see above).
    let x = unsafe { PyArray::borrow_from_array(&view, owner.into_any()) };
    Ok(x.into_any())
}

fn shaped<T>(shape: Vec<usize>, values: Vec<T>) -> PyResult<ArrayD<T>> {
    ArrayD::from_shape_vec(shape, values)
        .map_err(|e| PyRuntimeError::new_err(format!("a batch's shape: {e}")))
}

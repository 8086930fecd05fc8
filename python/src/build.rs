//! `melctl.build`: melkit's build, the same one `melctl build` runs (lock, resume,
//! all-or-nothing publish), from Python. The build runs on its own thread with the GIL
//! released; the calling thread waits in short steps, calling the progress callback and
//! letting Python's signal handlers run, so Ctrl-C stops the build cleanly (nothing
//! published) and raises KeyboardInterrupt.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

use melkit::audio::ManifestOptions;
use melkit::dataset::merge::MergeSettings;
use melkit::dataset::{
    BuildReport, BuildRequest, Host, Labels, Observer, OnError, PreparedBuild, Shard, ShardOutcome,
    Source, Splitting,
};
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyDict;

use crate::errors::{build_to_py, to_py};

/// How long the calling thread waits before it calls the progress callback and checks
/// for Ctrl-C again.
const POLL: Duration = Duration::from_millis(50);

/// What the build told its observer, kept until the calling thread takes it.
enum Event {
    Notice(String),
    Started(String, u64),
    Progress(u64),
    Finished,
}

/// The observer: events queued for the calling thread (the build's threads never touch
/// Python), and the gate before the publish, where the build waits for the calling thread
/// to decide whether to stop it (see [`polled`]).
#[derive(Default)]
struct Queue {
    events: Mutex<Vec<Event>>,
    gate: Mutex<Gate>,
    decided: Condvar,
}

/// Where the build is with respect to its publish.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
enum Gate {
    /// Still working.
    #[default]
    Working,
    /// Waiting at the publish for the calling thread's word.
    Asked,
    /// Told to go on: the cancel flag, as it is now, decides; nothing the calling thread
    /// does from now on stops the publish.
    Passed,
}

impl Queue {
    fn push(&self, e: Event) {
        if let Ok(mut q) = self.events.lock() {
            q.push(e);
        }
    }

    fn take(&self) -> Vec<Event> {
        self.events
            .lock()
            .map(|mut q| std::mem::take(&mut *q))
            .unwrap_or_default()
    }

    /// Whether the build waits at its publish.
    fn asked(&self) -> bool {
        self.gate.lock().is_ok_and(|g| *g == Gate::Asked)
    }

    /// Lets the build waiting at its publish go on.
    fn pass(&self) {
        if let Ok(mut g) = self.gate.lock() {
            *g = Gate::Passed;
        }
        self.decided.notify_all();
    }
}

impl Observer for Queue {
    fn notice(&self, line: &str) {
        self.push(Event::Notice(line.to_string()));
    }
    fn split_started(&self, split: &str, clips: u64) {
        self.push(Event::Started(split.to_string(), clips));
    }
    fn progress(&self, n: u64) {
        self.push(Event::Progress(n));
    }
    fn split_finished(&self, _split: &str) {
        self.push(Event::Finished);
    }
    fn before_publish(&self) {
        let Ok(mut g) = self.gate.lock() else {
            return;
        };
        *g = Gate::Asked;
        while *g == Gate::Asked {
            g = match self.decided.wait(g) {
                Ok(g) => g,
                Err(_) => return,
            };
        }
    }
}

/// Where the calling thread is in the build's progress, for the callback.
#[derive(Default)]
struct Progress {
    split: String,
    done: u64,
    total: u64,
    notices: Vec<String>,
    /// The last values the callback was called with.
    told: Option<(String, u64, u64)>,
}

impl Progress {
    /// Applies `events`, calling `callback(split, done, total)` once per change and
    /// logging each notice to the `melctl` logger.
    fn apply(
        &mut self,
        py: Python<'_>,
        events: Vec<Event>,
        callback: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<()> {
        let mut changed = false;
        for e in events {
            match e {
                Event::Notice(line) => {
                    py.import("logging")?
                        .call_method1("getLogger", ("melctl",))?
                        .call_method1("info", (line.as_str(),))?;
                    self.notices.push(line);
                }
                Event::Started(split, total) => {
                    self.flush(callback, &mut changed)?;
                    (self.split, self.done, self.total) = (split, 0, total);
                    // Each split's start is told as (split, 0, total).
                    changed = true;
                    self.flush(callback, &mut changed)?;
                }
                Event::Progress(n) => {
                    self.done = (self.done + n).min(self.total);
                    changed = true;
                }
                Event::Finished => {
                    self.done = self.total;
                    changed = true;
                }
            }
        }
        self.flush(callback, &mut changed)
    }

    fn flush(&mut self, callback: Option<&Bound<'_, PyAny>>, changed: &mut bool) -> PyResult<()> {
        let now = (self.split.clone(), self.done, self.total);
        if let Some(cb) = callback.filter(|_| *changed && self.told.as_ref() != Some(&now)) {
            cb.call1((now.0.as_str(), now.1, now.2))?;
            self.told = Some(now);
        }
        *changed = false;
        Ok(())
    }
}

/// What to build: a folder `ROOT/{split}/{class}/*` (or `ROOT/{class}/*`), or a manifest
/// (CSV or JSONL) file.
fn source(input: &Path) -> PyResult<Source> {
    let meta = std::fs::metadata(input).map_err(|e| to_py(melkit::core::Error::io(input, e)))?;
    Ok(if meta.is_dir() {
        Source::Folder(input.to_path_buf())
    } else {
        Source::Manifest(input.to_path_buf())
    })
}

/// `split_ratio=`: `{"training": 0.8, "testing": 0.2}` (in that order) or
/// `"training=0.8,testing=0.2"`.
fn split_ratios(value: Option<&Bound<'_, PyAny>>) -> PyResult<Option<Vec<(String, f64)>>> {
    let Some(v) = value else { return Ok(None) };
    if let Ok(text) = v.extract::<String>() {
        return ManifestOptions::parse_ratios(&text)
            .map(Some)
            .map_err(|why| PyValueError::new_err(format!("split_ratio: {why}")));
    }
    let d = v.cast::<PyDict>().map_err(|_| {
        PyTypeError::new_err(
            "split_ratio must be a dict of split name to ratio, or \"NAME=RATIO,...\"",
        )
    })?;
    d.iter()
        .map(|(k, r)| Ok((k.extract::<String>()?, r.extract::<f64>()?)))
        .collect::<PyResult<Vec<_>>>()
        .map(Some)
}

/// `labels=`: a list of class names, or a path to a label-map file.
fn labels_of(labels: Option<&Bound<'_, PyAny>>) -> PyResult<Option<Labels>> {
    let Some(l) = labels else { return Ok(None) };
    if let Ok(names) = l.extract::<Vec<String>>()
        && !l.is_instance_of::<pyo3::types::PyString>()
    {
        return Ok(Some(Labels::Names(names)));
    }
    let path: PathBuf = l.extract().map_err(|_| {
        PyTypeError::new_err("labels must be a list of class names or a label-map file")
    })?;
    Ok(Some(Labels::File(path)))
}

/// Builds ``input`` (a ``ROOT/{split}/{class}/`` folder, or a manifest CSV) into
/// ``output``, one file per split, exactly as ``melctl build`` does: the output folder
/// locked, every split written under a temporary name and published only when all have
/// succeeded, ``resume=True`` continuing an interrupted build.
///
/// The configuration is ``preset``, then ``config`` (a TOML file or a dict of
/// sections), then ``backend``, then ``overrides``: a key of one section by its name
/// (``n_mels=64``, ``dtype="f32"``, ``precision="fast"``, ``threads=4``,
/// ``loader="stream"``), or
/// ``section__key`` (``run__stream__readers=4``), or a whole section as a dict (but
/// ``output``, which is the output folder: write ``output__dtype="f32"``). Two keywords
/// naming one key are refused.
///
/// ``input`` is a folder or a manifest (CSV or JSONL). A manifest without a split
/// column is split by ``split_ratio`` (``{"training": 0.8, "testing": 0.2}`` or
/// ``"training=0.8,testing=0.2"``; 0.7/0.2/0.1 by default) from ``seed`` (0), as
/// ``--split-ratio`` and ``--seed`` do; so is a ``ROOT/{class}/`` folder given either.
/// A manifest's columns beyond path, label and split are kept per clip
/// (``Split.metadata``). ``group_by="speaker"`` (a manifest column) or
/// ``group_pattern=r"([^/]+)_nohash_"`` (the first capture in each path) keeps every
/// clip of a group in one split: drawn by a hash of the group, or, where the source
/// names the splits, refused if a group is found in two.
///
/// ``progress(split, done, total)`` is called from this thread as clips are computed;
/// an exception it raises before the outputs are published stops the build (nothing
/// published) and is raised; once the publish has begun it is not called again. Ctrl-C
/// does the same with KeyboardInterrupt. The build runs with the GIL released.
///
/// Returns the report (``melctl build --report``'s JSON as a dict, plus ``notices``).
/// Files left out (undecodable, with ``on_error="skip"``) are listed in it and named in
/// a UserWarning. Errors raise a :class:`Error` subclass.
///
/// ``shard=(k, n)`` (or ``"k/n"``, numbered from 0) builds shard ``k`` of ``n`` into
/// ``output/shards/k-of-n/``: each split's sorted file list cut into ``n`` contiguous
/// ranges, the whole tree's label map kept. A shard already complete and verified is
/// left as it is (the report's ``shard.built`` is False), so retries are safe.
/// :func:`merge` then writes what one build of the whole tree would.
#[pyfunction]
#[pyo3(signature = (
    input, output, preset="leak-4k", config=None, backend=None, *, splits=None,
    resume=false, on_error="skip", labels=None, cache_dir=None, progress=None, shard=None,
    split_ratio=None, seed=None, group_by=None, group_pattern=None, **overrides
))]
#[allow(clippy::too_many_arguments)]
pub fn build<'py>(
    py: Python<'py>,
    input: PathBuf,
    output: PathBuf,
    preset: &str,
    config: Option<&Bound<'py, PyAny>>,
    backend: Option<&str>,
    splits: Option<&Bound<'py, PyAny>>,
    resume: bool,
    on_error: &str,
    labels: Option<&Bound<'py, PyAny>>,
    cache_dir: Option<PathBuf>,
    progress: Option<&Bound<'py, PyAny>>,
    shard: Option<&Bound<'py, PyAny>>,
    split_ratio: Option<&Bound<'py, PyAny>>,
    seed: Option<u64>,
    group_by: Option<String>,
    group_pattern: Option<String>,
    overrides: Option<&Bound<'py, PyDict>>,
) -> PyResult<Bound<'py, PyAny>> {
    check_callable(progress)?;
    // An empty `cache_dir=""` is a mistake, not "the default" (which `run.cache_dir = ""`
    // means in a configuration file): refused, naming it.
    if cache_dir.as_ref().is_some_and(|d| d.as_os_str().is_empty()) {
        return Err(crate::errors::to_py(melkit::core::Error::config(
            "run.cache_dir (cache_dir)",
            "an empty path",
        )));
    }
    let cache_dir = cache_dir.map(|d| d.display().to_string());
    let named = [
        ("run.backend", "backend", backend.map(str::to_string)),
        ("run.cache_dir", "cache_dir", cache_dir),
    ];
    let resolved = crate::config::resolve(preset, config, &named, overrides)?;
    let mut request = BuildRequest::new(source(&input)?, output, resolved);
    request.splitting = Splitting {
        ratios: split_ratios(split_ratio)?,
        seed,
        group_by,
        group_pattern,
    };
    request.config_file = config.and_then(|c| c.extract::<PathBuf>().ok());
    request.labels = labels_of(labels)?;
    request.on_error = on_error_of(on_error)?;
    request.only = split_names(splits)?;
    request.resume = resume;
    request.shard = shard.map(parse_shard).transpose()?;
    request.host = Host::with_env(|name| std::env::var_os(name));
    let threads = match request.config.run.threads {
        0 => crate::default_threads(),
        n => n,
    };
    // The scan lists every file: no GIL needed.
    let prepared = py.detach(|| request.prepare()).map_err(build_to_py)?;
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .thread_name(|i| format!("melctl-worker-{i}"))
        .build()
        .map_err(|e| to_py(melkit::core::Error::config("run.threads", e.to_string())))?;
    let mut report = BuildReport::default();
    let (built, notices) = polled(py, progress, "build", Result::is_ok, |queue, cancel| {
        pool.install(|| prepared.run(queue, cancel, &mut report))
    })?;
    let outcome = built.map_err(build_to_py)?;
    let mut json = prepared.report_json(&report, Some(&outcome), None);
    json["notices"] = notices.into();
    warn_left_out(py, &prepared, &report, &outcome)?;
    let text = serde_json::to_string(&json)
        .map_err(|e| PyValueError::new_err(format!("the report: {e}")))?;
    py.import("json")?.call_method1("loads", (text,))
}

/// `on_error=`: `"skip"` or `"fail"` (melkit's one list of the names).
fn on_error_of(on_error: &str) -> PyResult<OnError> {
    use melkit::core::config::Named;
    OnError::parse_name(on_error).map_err(|why| PyValueError::new_err(format!("on_error: {why}")))
}

/// `splits=`: a list of split names (a string alone is refused: it is not a list).
fn split_names(splits: Option<&Bound<'_, PyAny>>) -> PyResult<Vec<String>> {
    match splits {
        None => Ok(Vec::new()),
        Some(s) if s.is_instance_of::<pyo3::types::PyString>() => Err(PyTypeError::new_err(
            "splits must be a list of split names, e.g. [\"training\"]",
        )),
        Some(s) => s
            .extract()
            .map_err(|_| PyTypeError::new_err("splits must be a list of split names")),
    }
}

/// Warns of the files the build left out (nothing is dropped without being named): those
/// of this build, or those a complete shard's earlier build left out.
fn warn_left_out(
    py: Python<'_>,
    prepared: &PreparedBuild,
    report: &BuildReport,
    outcome: &ShardOutcome,
) -> PyResult<()> {
    if let ShardOutcome::AlreadyComplete { skipped } = outcome
        && let Some(first) = skipped.first()
    {
        let shard = prepared.request().shard.map(|s| s.to_string());
        let message = format!(
            "melctl.build: shard {} was complete; its build left {} file(s) out, listed in the report's shard.skipped (first: {first})",
            shard.unwrap_or_default(),
            skipped.len(),
        );
        return crate::errors::warn(py, &message);
    }
    let left_out = report.left_out();
    if left_out == 0 {
        return Ok(());
    }
    let first: Vec<String> = report
        .splits
        .iter()
        .flat_map(|x| x.left_out_lines())
        .take(3)
        .collect();
    let message = format!(
        "melctl.build: {left_out} file(s) left out, listed in the report's \"skipped\" and \"unreadable\" entries (first: {})",
        first.join("; ")
    );
    crate::errors::warn(py, &message)
}

/// A shard as `(k, n)` or `"k/n"` (numbered from 0).
fn parse_shard(value: &Bound<'_, PyAny>) -> PyResult<Shard> {
    let int = |v: Bound<'_, PyAny>| -> Option<i128> {
        if v.is_instance_of::<pyo3::types::PyBool>() {
            None
        } else {
            v.extract().ok()
        }
    };
    let pair = value
        .extract::<(Bound<'_, PyAny>, Bound<'_, PyAny>)>()
        .ok()
        .and_then(|(k, n)| Some((int(k)?, int(n)?)));
    let shard = if let Ok(text) = value.extract::<String>() {
        Shard::parse(&text)
    } else if let Some((k, n)) = pair {
        match (usize::try_from(k), usize::try_from(n)) {
            (Ok(k), Ok(n)) => Shard::new(k, n),
            _ => {
                return Err(PyValueError::new_err(format!(
                    "shard ({k}, {n}): shard k of n, numbered from 0, both whole numbers from 0"
                )));
            }
        }
    } else {
        return Err(PyTypeError::new_err(
            "shard must be (k, n) or \"k/n\": shard k of n, numbered from 0",
        ));
    };
    // A shard melkit refuses (k >= n, n = 0) is a configuration error, as the CLI says it.
    shard.map_err(crate::errors::build_to_py)
}

/// Merges the shards under ``output/shards/k-of-n/`` into ``output/{split}.h5`` (or
/// ``.npy.d``), exactly as ``melctl merge`` does: the set checked first (every shard
/// present and complete, one configuration, label map and file set), then the datasets
/// one build of the whole tree writes, published atomically. ``shards`` picks the count
/// when shards of several counts are there. Ctrl-C stops it before the publish.
///
/// Returns the report: each split's clips, output and the files the shards left out.
#[pyfunction]
#[pyo3(signature = (output, *, shards=None, threads=None, progress=None))]
pub fn merge<'py>(
    py: Python<'py>,
    output: PathBuf,
    shards: Option<Bound<'py, PyAny>>,
    threads: Option<usize>,
    progress: Option<&Bound<'py, PyAny>>,
) -> PyResult<Bound<'py, PyAny>> {
    check_callable(progress)?;
    if let Some(n) = &shards
        && n.is_instance_of::<pyo3::types::PyBool>()
    {
        return Err(PyTypeError::new_err(
            "shards must be a whole number, the shard count",
        ));
    }
    let shards: Option<usize> = shards
        .map(|n| n.extract())
        .transpose()
        .map_err(|_| PyValueError::new_err("shards must be a whole number from 1"))?;
    let settings = MergeSettings {
        shards,
        threads: threads.unwrap_or_else(crate::default_threads),
        also_writes: Vec::new(),
    };
    let (merged, notices) = polled(py, progress, "merge", Result::is_ok, |queue, cancel| {
        melkit::dataset::merge(&output, &settings, queue, cancel)
    })?;
    let merged = merged.map_err(build_to_py)?;
    let mut json = merged.to_json();
    json["notices"] = notices.into();
    py.import("json")?
        .call_method1("loads", (json.to_string(),))
}

/// Refuses a progress callback that cannot be called.
fn check_callable(progress: Option<&Bound<'_, PyAny>>) -> PyResult<()> {
    match progress {
        Some(cb) if !cb.is_callable() => Err(PyTypeError::new_err(
            "progress must be a callable (split, done, total)",
        )),
        _ => Ok(()),
    }
}

/// Runs `work` on a thread of its own with the GIL released. The calling thread wakes
/// every [`POLL`] to call the progress callback with what the work's observer was told
/// and to run Python's signal handlers: Ctrl-C, or an exception from the callback, raises
/// the work's cancel flag and is raised. Returns the work's result and its notices.
///
/// An exception never comes after a publish it did not stop: the work waits at its
/// publish ([`Observer::before_publish`]) until this thread has told the callback
/// everything and run the signal handlers, so an exception raised then stops it; from
/// then on the callback is not called. A signal that still arrives during the publish is
/// raised after it, with a note saying the outputs were published (`succeeded` says
/// whether the work's result is a success).
fn polled<T: Send>(
    py: Python<'_>,
    progress: Option<&Bound<'_, PyAny>>,
    what: &str,
    succeeded: fn(&T) -> bool,
    work: impl FnOnce(&Queue, &Arc<AtomicBool>) -> T + Send,
) -> PyResult<(T, Vec<String>)> {
    let queue = Queue::default();
    let cancel = Arc::new(AtomicBool::new(false));
    let mut state = Progress::default();
    let mut raised: Option<PyErr> = None;
    let mut passed = false;
    let done = std::thread::scope(|s| {
        let worker = s.spawn(|| work(&queue, &cancel));
        loop {
            let finished = py.detach(|| {
                std::thread::sleep(POLL);
                worker.is_finished()
            });
            if passed {
                // The publish is under way: its notices are kept, nothing is raised.
                let _ = state.apply(py, queue.take(), None);
            } else {
                // Asked before the events are taken: every event the work sent before
                // it asked is told before the answer.
                let asked = queue.asked();
                if raised.is_none() {
                    let step = state
                        .apply(py, queue.take(), progress)
                        .and_then(|()| py.check_signals());
                    if let Err(e) = step {
                        cancel.store(true, Ordering::SeqCst);
                        raised = Some(e);
                    }
                }
                if asked {
                    queue.pass();
                    passed = true;
                }
            }
            if finished {
                break;
            }
        }
        worker.join()
    });
    let done = done.map_err(|p| {
        crate::errors::raise(
            "InternalError",
            format!(
                "the {what} panicked: {}",
                melkit::core::error::panic_message(p.as_ref())
            ),
        )
    })?;
    if let Some(e) = raised {
        return Err(e);
    }
    if passed {
        let _ = state.apply(py, queue.take(), None);
        if succeeded(&done)
            && let Err(e) = py.check_signals()
        {
            add_note(
                py,
                &e,
                &format!(
                    "melctl: this came while the {what} was publishing its outputs; the publish completed, and the outputs are the new ones, whole"
                ),
            );
            return Err(e);
        }
    } else {
        state.apply(py, queue.take(), progress)?;
    }
    Ok((done, state.notices))
}

/// Adds `note` to the exception `e` (PEP 678's `add_note`; on Pythons before 3.11, the
/// `__notes__` list it keeps).
fn add_note(py: Python<'_>, e: &PyErr, note: &str) {
    let value = e.value(py);
    if value.call_method1("add_note", (note,)).is_err() {
        let notes = value
            .getattr("__notes__")
            .ok()
            .filter(|n| n.is_instance_of::<pyo3::types::PyList>());
        let _ = match notes {
            Some(list) => list.call_method1("append", (note,)).map(drop),
            None => value.setattr("__notes__", vec![note]),
        };
    }
}

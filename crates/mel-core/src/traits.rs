//! The three pluggable stages: [`Loader`] → [`MelBackend`] → [`Sink`].

use std::path::PathBuf;
use std::sync::Arc;

use crate::atomic::Staged;
use crate::buffer::{OutputBuf, OutputSlice};
use crate::error::{Error, FailureKind, Result};
use crate::plan::MelPlan;

/// Something that holds f32 samples contiguously: a RAM arena, a memory map, a reader's buffer.
pub trait SampleStore: Send + Sync {
    /// All the samples held.
    fn as_f32(&self) -> &[f32];
}

impl SampleStore for Vec<f32> {
    fn as_f32(&self) -> &[f32] {
        self
    }
}

/// A run of clips `[clips, clip_samples]` in f32, borrowed from a shared store
/// (a preload arena, a memory map or a reader's own buffer).
#[derive(Clone)]
pub struct SampleBlock {
    data: Arc<dyn SampleStore>,
    start: usize,
    len: usize,
}

impl std::fmt::Debug for SampleBlock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "SampleBlock({}..{})", self.start, self.start + self.len)
    }
}

impl SampleBlock {
    /// A block viewing `data[start .. start + len]`.
    pub fn new(data: Arc<dyn SampleStore>, start: usize, len: usize) -> Self {
        assert!(
            start + len <= data.as_f32().len(),
            "sample block out of range"
        );
        SampleBlock { data, start, len }
    }

    /// A block owning `data` whole.
    pub fn owned(data: Vec<f32>) -> Self {
        let len = data.len();
        SampleBlock::new(Arc::new(data), 0, len)
    }

    /// The samples.
    pub fn samples(&self) -> &[f32] {
        &self.data.as_f32()[self.start..self.start + self.len]
    }
}

/// A file that could not become a clip, with the reason.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct ClipFailure {
    /// Index of the clip in the split's file list.
    pub index: usize,
    /// The file (serialised lossily when its name is not UTF-8, never failing).
    #[serde(serialize_with = "lossy_path")]
    pub path: PathBuf,
    /// What kind of failure.
    pub kind: FailureKind,
    /// Why, in words.
    pub reason: String,
}

impl ClipFailure {
    /// The failure of file `index` at `path` from the error its loading gave.
    pub fn from_error(index: usize, path: impl Into<PathBuf>, error: &Error) -> Self {
        ClipFailure {
            index,
            path: path.into(),
            kind: error.failure_kind(),
            reason: error.reason(),
        }
    }

    /// The failure as an error of the matching kind (for a run that stops at it).
    pub fn to_error(&self) -> Error {
        let path = self.path.clone();
        match self.kind {
            FailureKind::Io | FailureKind::Missing => {
                Error::io(path, std::io::Error::other(self.reason.clone()))
            }
            FailureKind::Unsupported => Error::unsupported(path, self.reason.clone()),
            FailureKind::Limit | FailureKind::NonFinite => {
                Error::limit(path.display().to_string(), self.reason.clone())
            }
            FailureKind::Cancelled => Error::Cancelled,
            FailureKind::Decode | FailureKind::Other => Error::decode(path, self.reason.clone()),
        }
    }
}

fn lossy_path<S: serde::Serializer>(
    p: &std::path::Path,
    s: S,
) -> std::result::Result<S::Ok, S::Error> {
    s.serialize_str(&p.to_string_lossy())
}

/// A batch of decoded clips with their indices in the split's file list.
#[derive(Debug, Clone)]
pub struct ClipBatch {
    /// Indices (into the split's file list) of the clips in `samples`, in order.
    pub indices: Vec<usize>,
    /// Each clip's source file, in the same order.
    pub sources: Vec<SourceInfo>,
    /// `indices.len() × clip_samples` samples.
    pub samples: SampleBlock,
}

/// How audio reaches memory: yields batches of fixed-length clips.
pub trait AudioLoader: Send {
    /// The loader's name, for reports.
    fn name(&self) -> &str;

    /// The next batch, `None` when every clip has been yielded.
    fn next_batch(&mut self) -> Option<Result<ClipBatch>>;

    /// Files that failed so far (they are never yielded).
    fn failures(&self) -> &[ClipFailure];

    /// What the loader's own workers did so far (read and decode time, bytes), for reports.
    fn stats(&self) -> LoaderStats {
        LoaderStats::default()
    }
}

/// Work done inside a loader, beyond what the pipeline sees of it.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize)]
pub struct LoaderStats {
    /// Threads reading or decoding.
    pub workers: usize,
    /// Seconds spent reading and decoding files, summed over workers.
    pub decode_seconds: f64,
    /// Bytes read from files.
    pub bytes_read: u64,
    /// Files read.
    pub files: u64,
    /// A line about the loader's state (e.g. a cache hit and why).
    pub note: String,
}

/// Turns batches of clips into spectrograms. Owns its state (plans, buffers, devices) across batches.
pub trait MelBackend: Send {
    /// The backend's name, for reports.
    fn name(&self) -> &str;

    /// The plan the backend executes.
    fn plan(&self) -> &MelPlan;

    /// Computes `clips.len() / clip_samples` clips into `out`, which holds
    /// `clips × values_per_clip` values of the plan's dtype, laid out `[clip][long][short][mel][frame]`.
    fn compute(&mut self, clips: &[f32], out: OutputSlice<'_>) -> Result<()>;

    /// Gives the backend the run's interrupt flag: a backend whose batch takes long (the
    /// CPU's, on a loaded machine) stops within it and returns
    /// [`Error::Cancelled`](crate::Error::Cancelled) once the flag is raised. By default
    /// ignored (a batch on a GPU is short).
    fn watch_cancel(&mut self, _cancel: std::sync::Arc<std::sync::atomic::AtomicBool>) {}

    /// For a device backend, the time its device spent copying in, computing and copying
    /// out so far (measured on the device, e.g. with CUDA events); `None` when the backend
    /// does not measure it (the CPU backend has nothing to split).
    fn device_times(&self) -> Option<DeviceTimes> {
        None
    }
}

/// Device time of a GPU backend, split by what the device was doing, so that a report
/// can tell a build bound by host↔device copies from one bound by the kernel.
#[derive(Debug, Clone, Copy, Default, PartialEq, serde::Serialize)]
pub struct DeviceTimes {
    /// Seconds of host→device copies.
    pub upload_seconds: f64,
    /// Seconds of kernels.
    pub kernel_seconds: f64,
    /// Seconds of device→host copies.
    pub download_seconds: f64,
}

/// Where a clip came from: its file's rate, channels and length before it was resampled,
/// downmixed, padded or trimmed to the clip.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct SourceInfo {
    /// The file's sample rate, Hz.
    pub rate: u32,
    /// The file's channel count.
    pub channels: u16,
    /// Frames in the file.
    pub frames: u64,
}

impl SourceInfo {
    /// Whether the clip was resampled (the file's rate is not `rate`).
    pub fn resampled(&self, rate: u32) -> bool {
        self.rate != rate
    }

    /// Whether several channels were mixed or one picked.
    pub fn downmixed(&self) -> bool {
        self.channels > 1
    }

    /// The file's length at `rate` Hz, in samples.
    fn length_at(&self, rate: u32) -> u64 {
        (self.frames as u128 * rate as u128).div_ceil(self.rate.max(1) as u128) as u64
    }

    /// Whether the clip holds zeros after (or around) the file's audio.
    pub fn padded(&self, rate: u32, clip_samples: usize) -> bool {
        self.length_at(rate) < clip_samples as u64
    }

    /// Whether part of the file was left out of the clip.
    pub fn trimmed(&self, rate: u32, clip_samples: usize) -> bool {
        self.length_at(rate) > clip_samples as u64
    }
}

/// Per-clip metadata a sink stores beside the spectrogram.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClipMeta {
    /// Index of the clip's file in the split's file list.
    pub index: usize,
    /// Class id.
    pub label: i64,
    /// Path relative to the dataset root, UTF-8.
    pub path: String,
    /// The clip's source file (rate, channels, length), when the loader knows it.
    pub source: SourceInfo,
    /// Its metadata values, one per [`SinkSpec::meta_columns`] (shared: every row of a
    /// file's windows, and every copy the pipeline makes, point at one list).
    pub meta: std::sync::Arc<[String]>,
}

/// What a sink is told before the first write.
#[derive(Debug, Clone)]
pub struct SinkSpec {
    /// Split name (the output file's stem).
    pub split: String,
    /// Rows the output may hold at most (files in the split); the final count is given to `commit`.
    pub rows: usize,
    /// The plan (shape, dtype, the spec behind it).
    pub plan: MelPlan,
    /// Class names, indexed by label.
    pub label_names: Vec<String>,
    /// Metadata columns, in order; each row's [`ClipMeta::meta`] holds one value per column.
    pub meta_columns: Vec<String>,
    /// What the output records as its provenance: the resolved configuration as JSON
    /// (stored as the `config` attribute or key).
    pub provenance: String,
}

/// Receives finished batches in any order and finishes the output under a temporary
/// name; it becomes visible only when the caller publishes it ([`Finished::publish`]),
/// so a build of several outputs can publish all of them or none.
pub trait Sink: Send {
    /// The sink's name, for reports.
    fn name(&self) -> &str;

    /// Writes `meta.len()` consecutive rows starting at `first_row`; `data` holds exactly those rows.
    fn write(&mut self, first_row: usize, meta: &[ClipMeta], data: &OutputBuf) -> Result<()>;

    /// Checks rows `0..rows` were each written exactly once and nothing beyond, shrinks
    /// the output to `rows`, closes and flushes it under its temporary name.
    fn finish(self: Box<Self>, rows: usize) -> Result<Finished>;
}

/// How many of an output's clips were resampled, downmixed, padded or trimmed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct AdjustmentCounts {
    /// Clips whose file was at another sample rate.
    pub resampled: usize,
    /// Clips whose file had several channels.
    pub downmixed: usize,
    /// Clips whose file was shorter than the clip.
    pub padded: usize,
    /// Clips whose file was longer than the clip.
    pub trimmed: usize,
}

impl AdjustmentCounts {
    /// The counts over `sources`, for clips of `clip_samples` samples at `rate` Hz.
    pub fn of<'a>(
        sources: impl IntoIterator<Item = &'a SourceInfo>,
        rate: u32,
        clip_samples: usize,
    ) -> Self {
        let mut p = AdjustmentCounts::default();
        for s in sources {
            p.resampled += usize::from(s.resampled(rate));
            p.downmixed += usize::from(s.downmixed());
            p.padded += usize::from(s.padded(rate, clip_samples));
            p.trimmed += usize::from(s.trimmed(rate, clip_samples));
        }
        p
    }
}

/// A complete output under its temporary name, waiting to be published at its final
/// path. Dropping it unpublished removes it.
#[derive(Debug)]
pub struct Finished {
    staged: Option<Staged>,
    final_path: PathBuf,
    durable: bool,
    bytes: u64,
    provenance: AdjustmentCounts,
}

impl Finished {
    /// `staged`, complete, `bytes` long; `durable`: flush on publishing.
    pub fn new(staged: Staged, durable: bool, bytes: u64) -> Self {
        Finished {
            final_path: staged.final_path().to_path_buf(),
            staged: Some(staged),
            durable,
            bytes,
            provenance: AdjustmentCounts::default(),
        }
    }

    /// The same output, with the counts of its clips' treatment.
    pub fn with_provenance(mut self, provenance: AdjustmentCounts) -> Self {
        self.provenance = provenance;
        self
    }

    /// How many of its clips were resampled, downmixed, padded or trimmed.
    pub fn provenance(&self) -> AdjustmentCounts {
        self.provenance
    }

    /// An output that is already where it belongs (publishing does nothing).
    pub fn in_place(path: PathBuf, bytes: u64) -> Self {
        Finished {
            staged: None,
            final_path: path,
            durable: false,
            bytes,
            provenance: AdjustmentCounts::default(),
        }
    }

    /// Where it will be published.
    pub fn final_path(&self) -> &std::path::Path {
        &self.final_path
    }

    /// Where it lies until then.
    pub fn temp_path(&self) -> &std::path::Path {
        self.staged
            .as_ref()
            .map_or(self.final_path.as_path(), |s| s.path())
    }

    /// Its size in bytes.
    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    /// Flushes its data to the disk now when it is to be durable, so that a publish of
    /// several outputs does all its slow work before the first rename
    /// ([`publish_flushed`](Self::publish_flushed)).
    pub fn flush(&self) -> Result<()> {
        match &self.staged {
            Some(s) if self.durable => s.flush(),
            _ => Ok(()),
        }
    }

    /// After [`flush`](Self::flush): moves it to its final path, a rename and nothing
    /// else; the caller flushes the folder (when durable) once every rename is done.
    pub fn publish_flushed(mut self) -> Result<PathBuf> {
        match self.staged.take() {
            Some(s) => s.commit_flushed(),
            None => Ok(self.final_path.clone()),
        }
    }

    /// Moves it to its final path (replacing what was there). Returns the path.
    pub fn publish(mut self) -> Result<PathBuf> {
        match self.staged.take() {
            Some(s) => s.commit(self.durable),
            None => Ok(self.final_path.clone()),
        }
    }
}

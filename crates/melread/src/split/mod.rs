//! One split of a melctl output, opened for reading: `OUT/{split}.h5` or
//! `OUT/{split}.npy.d/`, with its labels, paths, label names, provenance and statistics,
//! and random access to clips and segments.
//!
//! How `mel` is read is chosen when the split is opened ([`Access`]):
//! - contiguous HDF5 and npy: the dataset's bytes are **memory-mapped** (or read with
//!   positioned reads), bypassing the HDF5 library, which runs one call at a time behind
//!   a global lock. The dataset's offset and size are checked against the file's length
//!   first; a file too short for them is refused.
//! - chunked HDF5 whose filters are none, deflate, or shuffle + deflate (what melctl
//!   writes): each chunk's stored bytes are read with positioned reads and inflated and
//!   unshuffled here, on the calling thread, so worker threads decode in parallel.
//! - anything else (Fletcher-32 checksums, big-endian data, chunks holding parts of a
//!   clip): the HDF5 library reads each item.
//!
//! Nothing in a file is trusted: an HDF5 file's structure passes [`crate::h5file`]'s checks
//! (no links, external storage or virtual datasets; every element stored inside the file)
//! before anything is read, files are opened only if regular and without blocking, and
//! one clip may hold no more values than melctl writes
//! ([`MAX_VALUES_PER_CLIP`](crate::MAX_VALUES_PER_CLIP)).
//!
//! The parts: this file holds the split and its accessors; `open` finds a split's file
//! and passes every split through the build record's check and `checks`; `h5open` and
//! `npy` read each format's structure; `store` says where `mel`'s bytes are (a map,
//! positioned reads, the HDF5 library, or `chunks` decoded here); `reader` reads items,
//! keeping a cache of decoded chunks.

use std::path::{Path, PathBuf};

use mel_core::stats::{MelStats, StatsAccumulator};
use mel_core::{Dtype, Error, Result};
use ndarray::{Array2, ArrayD};

mod checks;
mod chunks;
mod h5open;
mod npy;
mod open;
mod reader;
mod store;
mod whole;

pub(crate) use reader::GroupMember;
pub use reader::Reader;
use store::Store;
pub(crate) use whole::GroupItem;
pub use whole::{WholeIndex, WindowIndex};

/// Decoded chunks of `mel` each [`Reader`] keeps by default (chunked layouts).
pub const DEFAULT_CHUNK_CACHE: usize = 4;

/// The two file formats melctl writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// `OUT/{split}.h5`.
    Hdf5,
    /// `OUT/{split}.npy.d/`.
    Npy,
}

/// How the caller wants `mel` read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ReadMode {
    /// Map contiguous data, decode standard chunks directly, the HDF5 library otherwise.
    #[default]
    Auto,
    /// Memory-map contiguous data (an error for chunked HDF5).
    Map,
    /// Positioned reads of contiguous data (an error for chunked HDF5).
    Pread,
    /// Every read through the HDF5 library (HDF5 only).
    Library,
}

/// How `mel` is actually read, chosen at open.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Access {
    /// A read-only memory map of the contiguous bytes.
    Map,
    /// Positioned reads of the contiguous bytes.
    Pread,
    /// Chunks read with positioned reads and decoded by this crate.
    Chunks {
        /// Clips per chunk.
        clips_per_chunk: usize,
        /// Whether chunks are deflated.
        deflate: bool,
        /// Whether chunks are byte-shuffled.
        shuffle: bool,
    },
    /// The HDF5 library reads every item; the reason it is needed.
    Library(String),
}

/// Options for [`Split::open_with`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OpenOptions {
    /// How `mel` is read.
    pub read: ReadMode,
    /// Decoded chunks each [`Reader`] keeps (chunked layouts; memory: this many chunks per reader).
    pub chunk_cache: usize,
}

impl Default for OpenOptions {
    fn default() -> Self {
        OpenOptions {
            read: ReadMode::Auto,
            chunk_cache: DEFAULT_CHUNK_CACHE,
        }
    }
}

/// Per-clip metadata: a manifest's columns beyond `path`, `label` and `split`, and the
/// `group` a `--group-pattern` found (none in outputs built without).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Metadata {
    columns: Vec<String>,
    /// One list per column, one value per clip.
    values: Vec<Vec<String>>,
}

impl Metadata {
    /// Checks column names a file gives: each a valid column name, each once, at most
    /// [`MAX_META_COLUMNS`](mel_core::format::MAX_META_COLUMNS).
    pub(crate) fn check_columns(path: &Path, columns: &[String]) -> Result<()> {
        use mel_core::format::{MAX_META_COLUMNS, check_column_name};
        if columns.len() > MAX_META_COLUMNS {
            return Err(crate::limits::bad(
                path,
                format!(
                    "{} metadata columns, more than the {MAX_META_COLUMNS} melctl writes",
                    columns.len()
                ),
            ));
        }
        for (i, c) in columns.iter().enumerate() {
            check_column_name(c)
                .map_err(|why| crate::limits::bad(path, format!("metadata column {why}")))?;
            if columns[..i].contains(c) {
                return Err(crate::limits::bad(
                    path,
                    format!("the metadata column {c:?} is named twice"),
                ));
            }
        }
        Ok(())
    }

    /// `columns` (passed through [`check_columns`](Self::check_columns) before any of
    /// their values was looked up by name) with their `values` (one list per column,
    /// checked to be as long as the split), each value within melctl's bound.
    pub(crate) fn new(path: &Path, columns: Vec<String>, values: Vec<Vec<String>>) -> Result<Self> {
        for (c, v) in columns.iter().zip(&values) {
            if let Some((i, why)) = v
                .iter()
                .enumerate()
                .find_map(|(i, x)| mel_core::format::check_meta_value(x).err().map(|w| (i, w)))
            {
                return Err(crate::limits::bad(
                    path,
                    format!("metadata {c:?} of clip {i}: {why}"),
                ));
            }
        }
        Ok(Metadata { columns, values })
    }

    /// The columns, in order.
    pub fn columns(&self) -> &[String] {
        &self.columns
    }

    /// Every clip's value in `column`, if the split has that column.
    pub fn column(&self, column: &str) -> Option<&[String]> {
        let i = self.columns.iter().position(|c| c == column)?;
        Some(&self.values[i])
    }

    /// Clip `clip`'s values, one per column.
    pub fn clip(&self, clip: usize) -> Vec<String> {
        self.values.iter().map(|v| v[clip].clone()).collect()
    }
}

/// Per-clip facts about each source file (optional in the format; absent in outputs
/// written before they existed).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Provenance {
    /// Sample rate of each source file in Hz.
    pub source_rate: Option<Vec<u32>>,
    /// Channels of each source file.
    pub source_channels: Option<Vec<u16>>,
    /// Frames in each source file before resampling, padding or trimming.
    pub source_frames: Option<Vec<u64>>,
}

/// One split of a melctl output, open for reading. Share it between threads (`Arc`);
/// each thread reads through its own [`Reader`].
pub struct Split {
    path: PathBuf,
    format: Format,
    name: String,
    shape: Vec<usize>,
    dims: Vec<String>,
    dtype: Dtype,
    label_names: Vec<String>,
    labels: Vec<i64>,
    paths: Vec<String>,
    meta: Metadata,
    config: Option<serde_json::Value>,
    version: Option<String>,
    build: Option<String>,
    stats: Option<MelStats>,
    provenance: Provenance,
    access: Access,
    store: Store,
    chunk_cache: usize,
    /// Whole clips: where each lies in `mel`'s rows (set at open from the stored plan).
    whole: Option<WholeIndex>,
    /// Windows: each row's file (set at open from the stored plan).
    windows: Option<WindowIndex>,
}

impl std::fmt::Debug for Split {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Split")
            .field("path", &self.path)
            .field("format", &self.format)
            .field("name", &self.name)
            .field("shape", &self.shape)
            .field("dtype", &self.dtype)
            .field("access", &self.access)
            .finish_non_exhaustive()
    }
}

impl Split {
    /// The `.h5` file or `.npy.d` folder.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// HDF5 or npy.
    pub fn format(&self) -> Format {
        self.format
    }

    /// The split's name (`training`, ...), from the file or its name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// `mel`'s shape: `[clips, long?, short?, n_mels, frames]`.
    pub fn shape(&self) -> &[usize] {
        &self.shape
    }

    /// One clip's shape (`shape()[1..]`).
    pub fn clip_shape(&self) -> &[usize] {
        &self.shape[1..]
    }

    /// The axis names (`clip,long,short,mel,frame`), one per axis of `mel`.
    pub fn dims(&self) -> &[String] {
        &self.dims
    }

    /// Clips in the split.
    pub fn clips(&self) -> usize {
        self.shape[0]
    }

    /// Mel bins per spectrogram.
    pub fn n_mels(&self) -> usize {
        self.shape[self.shape.len() - 2]
    }

    /// Frames per spectrogram.
    pub fn frames(&self) -> usize {
        self.shape[self.shape.len() - 1]
    }

    /// `[n_mels, frames]`: the shape of one segment.
    pub fn segment_shape(&self) -> [usize; 2] {
        [self.n_mels(), self.frames()]
    }

    /// Spectrograms per clip (`long × short`; 1 without segmentation).
    pub fn segments_per_clip(&self) -> usize {
        self.shape[1..self.shape.len() - 2].iter().product()
    }

    /// Spectrograms in the split.
    pub fn segments(&self) -> usize {
        self.clips() * self.segments_per_clip()
    }

    /// Values in one segment.
    pub fn values_per_segment(&self) -> usize {
        self.n_mels() * self.frames()
    }

    /// Values in one clip.
    pub fn values_per_clip(&self) -> usize {
        self.segments_per_clip() * self.values_per_segment()
    }

    /// The stored element type.
    pub fn dtype(&self) -> Dtype {
        self.dtype
    }

    /// Class id → name, the same in every split of an output.
    pub fn label_names(&self) -> &[String] {
        &self.label_names
    }

    /// Every clip's class id (checked to lie in `0..label_names().len()`).
    pub fn labels(&self) -> &[i64] {
        &self.labels
    }

    /// Every clip's source path, relative to the dataset root.
    pub fn paths(&self) -> &[String] {
        &self.paths
    }

    /// Per-clip metadata (manifest columns, groups); empty for a split built without.
    pub fn metadata(&self) -> &Metadata {
        &self.meta
    }

    /// The metadata columns, in order.
    pub fn meta_columns(&self) -> &[String] {
        self.meta.columns()
    }

    /// Clip `i`'s metadata values, one per column.
    pub fn clip_meta(&self, i: usize) -> Vec<String> {
        self.meta.clip(i)
    }

    /// The resolved configuration the output was built with (JSON), if readable.
    pub fn config(&self) -> Option<&serde_json::Value> {
        self.config.as_ref()
    }

    /// The id of the build that wrote the split (`build_id`); `None` for an output of a
    /// melctl from before build ids, or not written by melctl.
    pub fn build_id(&self) -> Option<&str> {
        self.build.as_deref()
    }

    /// What tells this split's contents from another's of the same size: its build id,
    /// or, for an output without one, `paths:` and a digest of its clips' paths and
    /// labels. A loader's saved position names it, so that it is never resumed on a split
    /// built again (the same count of clips, in another order or other clips).
    pub fn identity(&self) -> String {
        if let Some(id) = &self.build {
            return id.clone();
        }
        let mut h = xxhash_rust::xxh3::Xxh3::new();
        for (path, label) in self.paths.iter().zip(&self.labels) {
            h.update(&(path.len() as u64).to_le_bytes());
            h.update(path.as_bytes());
            h.update(&label.to_le_bytes());
        }
        format!("paths:{:016x}", h.digest())
    }

    /// The melctl version that wrote the output.
    pub fn melctl_version(&self) -> Option<&str> {
        self.version.as_deref()
    }

    /// Per-mel-bin statistics stored in the output (`mel_mean`, `mel_std`), if any were
    /// taken (a split with no clips has none).
    pub fn stored_stats(&self) -> Option<&MelStats> {
        self.stats.as_ref()
    }

    /// Per-clip provenance of the source files, where the output has it.
    pub fn provenance(&self) -> &Provenance {
        &self.provenance
    }

    /// How `mel` is read.
    pub fn access(&self) -> &Access {
        &self.access
    }

    /// Decoded chunks each reader keeps (chunked layouts).
    pub fn chunk_cache(&self) -> usize {
        self.chunk_cache.max(1)
    }

    /// A reader for this thread (scratch buffers and, for chunked layouts, a cache of
    /// decoded chunks).
    pub fn reader(&self) -> Reader<'_> {
        Reader::new(self)
    }

    /// Clip `clip` as f32, shaped [`clip_shape`](Self::clip_shape).
    pub fn clip(&self, clip: usize) -> Result<ArrayD<f32>> {
        let mut v = vec![0.0; self.values_per_clip()];
        self.reader().read_clip(clip, &mut v, None)?;
        Ok(ArrayD::from_shape_vec(self.clip_shape().to_vec(), v).expect("clip shape"))
    }

    /// Segment `segment` of clip `clip` as f32 `[n_mels, frames]`; segments count
    /// long-major (`long_index × short + short_index`).
    pub fn segment(&self, clip: usize, segment: usize) -> Result<Array2<f32>> {
        let mut v = vec![0.0; self.values_per_segment()];
        self.reader().read_segment(clip, segment, &mut v, None)?;
        Ok(Array2::from_shape_vec((self.n_mels(), self.frames()), v).expect("segment shape"))
    }

    /// The stored statistics, or (when the output has none) statistics computed from
    /// every value of `mel` in one pass on `threads` threads.
    pub fn stats(&self, threads: usize) -> Result<MelStats> {
        match &self.stats {
            Some(s) => Ok(s.clone()),
            None => self.compute_stats(threads),
        }
    }

    /// Computes per-mel-bin mean and standard deviation over every value of `mel` (one
    /// pass, f64 accumulation, `threads` threads each reading clips in order).
    pub fn compute_stats(&self, threads: usize) -> Result<MelStats> {
        let threads = threads.clamp(1, self.clips().max(1));
        let per_thread = self.clips().div_ceil(threads);
        let parts: Vec<Result<StatsAccumulator>> = std::thread::scope(|s| {
            let handles: Vec<_> = (0..threads)
                .map(|t| {
                    s.spawn(move || {
                        let mut acc = StatsAccumulator::new(self.n_mels(), self.frames());
                        let mut reader = self.reader();
                        let mut buf = vec![0.0f32; self.values_per_clip()];
                        let end = ((t + 1) * per_thread).min(self.clips());
                        for clip in (t * per_thread).min(end)..end {
                            reader.read_clip(clip, &mut buf, None)?;
                            acc.add_block(&buf);
                        }
                        Ok(acc)
                    })
                })
                .collect();
            handles
                .into_iter()
                .map(|h| {
                    h.join().unwrap_or_else(|_| {
                        Err(Error::Internal("a statistics thread panicked".into()))
                    })
                })
                .collect()
        });
        let mut total = StatsAccumulator::new(self.n_mels(), self.frames());
        for p in parts {
            total.merge(&p?);
        }
        Ok(total.finish())
    }

    /// Bytes per stored element.
    fn elem(&self) -> usize {
        self.dtype.size()
    }

    /// Checks `clip` and `segment` and returns the item's byte range within `mel`'s data.
    fn item_range(&self, clip: usize, segment: Option<usize>) -> Result<(usize, usize)> {
        if clip >= self.clips() {
            return Err(Error::Shape(format!(
                "clip {clip} is beyond the split's {} clips",
                self.clips()
            )));
        }
        let clip_bytes = self.values_per_clip() * self.elem();
        match segment {
            None => Ok((clip * clip_bytes, clip_bytes)),
            Some(s) if s < self.segments_per_clip() => {
                let seg_bytes = self.values_per_segment() * self.elem();
                Ok((clip * clip_bytes + s * seg_bytes, seg_bytes))
            }
            Some(s) => Err(Error::Shape(format!(
                "segment {s} is beyond the clip's {} segments",
                self.segments_per_clip()
            ))),
        }
    }
}

/// The axis names of `mel` when a file names none: `clip`, `segment0`, ..., `mel`, `frame`.
fn default_dims(n: usize) -> Vec<String> {
    let mut d = vec!["clip".to_string()];
    d.extend((0..n.saturating_sub(3)).map(|i| format!("segment{i}")));
    d.extend(["mel".to_string(), "frame".to_string()]);
    d
}

/// The file name of `path` without `suffix`: the split's name when the file states none.
fn stem(path: &Path, suffix: &str) -> String {
    let n = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    n.strip_suffix(suffix).map(str::to_string).unwrap_or(n)
}

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
//! one clip may hold no more values than melctl writes ([`MAX_VALUES_PER_CLIP`]).

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use mel_core::{Dtype, Error, Result};
use ndarray::{Array2, ArrayD};

use crate::convert::{self, Affine, OutSlice};
use crate::limits::{
    MAX_LABEL_NAME_BYTES, MAX_META_BYTES, MAX_PATH_BYTES, MAX_VALUES_PER_CLIP, bad,
};
use crate::npy::{self, NpyType};
use mel_core::stats::{MelStats, StatsAccumulator};

mod h5open;

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
    config: Option<serde_json::Value>,
    version: Option<String>,
    stats: Option<MelStats>,
    provenance: Provenance,
    access: Access,
    store: Store,
    chunk_cache: usize,
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

enum Store {
    /// `map[start..]` holds the data.
    Map { map: memmap2::Mmap, start: usize },
    /// The data starts at `base` in `file`.
    Pread { file: File, base: u64 },
    /// Chunked (every chunk present), decoded here.
    Chunks(ChunkStore),
    /// The HDF5 library.
    Library(Library),
}

/// Refuses paths and class names longer than melctl writes, and a class named twice: a
/// tampered 300 MB path took `show` half an hour to lay out as a title, and two classes
/// of one name cannot be told apart.
fn check_strings(split: &Split) -> Result<()> {
    if let Some(i) = split.paths.iter().position(|p| p.len() > MAX_PATH_BYTES) {
        return Err(bad(
            &split.path,
            format!(
                "path {i} is {} bytes long, more than the {MAX_PATH_BYTES} melctl writes",
                split.paths[i].len()
            ),
        ));
    }
    let names = &split.label_names;
    if let Some(i) = names.iter().position(|n| n.len() > MAX_LABEL_NAME_BYTES) {
        return Err(bad(
            &split.path,
            format!(
                "label name {i} is {} bytes long, more than the {MAX_LABEL_NAME_BYTES} melctl writes",
                names[i].len()
            ),
        ));
    }
    let mut first = std::collections::HashMap::new();
    for (i, n) in names.iter().enumerate() {
        if let Some(j) = first.insert(n.as_str(), i) {
            return Err(bad(
                &split.path,
                format!("label names {j} and {i} are both {n:?}: each class has one name"),
            ));
        }
    }
    Ok(())
}

/// `v` as a person reads it: plain, or in exponent form when very large or small.
fn shown(v: f64) -> String {
    if v == 0.0 || !v.is_finite() || (1e-4..1e6).contains(&v.abs()) {
        format!("{v}")
    } else {
        format!("{v:e}")
    }
}

/// Refuses stored statistics no normalisation can use: a mean that is not finite, or a
/// standard deviation that is not finite or is negative (melctl writes neither).
fn check_stats(split: &Split) -> Result<()> {
    let Some(stats) = &split.stats else {
        return Ok(());
    };
    let bad_bin = |name: &str, values: &[f64], ok: fn(f64) -> bool| -> Result<()> {
        match values.iter().position(|&v| !ok(v)) {
            Some(bin) => Err(bad(
                &split.path,
                format!(
                    "{name}[{bin}] is {}, which statistics cannot be",
                    shown(values[bin])
                ),
            )),
            None => Ok(()),
        }
    };
    // Normalising computes (x - mean) * (1 / std) in f32: both must be finite there.
    bad_bin("mel_mean", &stats.mean, |v| (v as f32).is_finite())?;
    bad_bin("mel_std", &stats.std, |v| {
        v.is_finite() && (v == 0.0 || (v > 0.0 && ((1.0 / v) as f32).is_finite()))
    })
}

fn h5err(path: &Path, what: &str) -> impl Fn(hdf5::Error) -> Error {
    let path = path.to_path_buf();
    let what = what.to_string();
    move |e| bad(&path, format!("{what}: {e}"))
}

impl Split {
    /// Opens the split `name` of the output folder `dir`: `dir/{name}.h5`, else
    /// `dir/{name}.npy.d/`.
    pub fn open_in(dir: impl AsRef<Path>, name: &str) -> Result<Split> {
        Self::open_in_with(dir, name, &OpenOptions::default())
    }

    /// [`open_in`](Self::open_in) with options.
    pub fn open_in_with(dir: impl AsRef<Path>, name: &str, opts: &OpenOptions) -> Result<Split> {
        let dir = dir.as_ref();
        let h5 = dir.join(mel_core::format::output_name(
            name,
            mel_core::format::HDF5_SUFFIX,
        ));
        let npy = dir.join(mel_core::format::output_name(
            name,
            mel_core::format::NPY_SUFFIX,
        ));
        // Whatever is at either name is opened, and refused if it is not a regular file
        // or a folder (a FIFO named `training.h5` is an error naming it, not a hang).
        if h5.exists() {
            Self::open_with(&h5, opts)
        } else if npy.exists() {
            Self::open_with(&npy, opts)
        } else {
            Err(bad(
                dir,
                format!(
                    "no split {name:?}: neither {} nor {} exists",
                    h5.display(),
                    npy.display()
                ),
            ))
        }
    }

    /// Opens a split from its `.h5` file or `.npy.d` folder.
    pub fn open(path: impl AsRef<Path>) -> Result<Split> {
        Self::open_with(path, &OpenOptions::default())
    }

    /// [`open`](Self::open) with options.
    pub fn open_with(path: impl AsRef<Path>, opts: &OpenOptions) -> Result<Split> {
        let path = path.as_ref();
        let meta = std::fs::metadata(path).map_err(|e| Error::read(path, e))?;
        crate::commit::check(path)?;
        let split = if meta.is_dir() {
            open_npy(path, opts)?
        } else {
            h5open::open_hdf5(path, opts)?
        };
        check_stats(&split)?;
        check_strings(&split)?;
        Ok(split)
    }

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

    /// The resolved configuration the output was built with (JSON), if readable.
    pub fn config(&self) -> Option<&serde_json::Value> {
        self.config.as_ref()
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
        Reader {
            split: self,
            scratch: Vec::new(),
            halves: Vec::new(),
            cache: Vec::new(),
            inflater: None,
            tick: 0,
        }
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

/// Reads items of one [`Split`] on one thread, reusing its buffers (and, for chunked
/// layouts, up to [`OpenOptions::chunk_cache`] decoded chunks).
pub struct Reader<'a> {
    split: &'a Split,
    scratch: Vec<u8>,
    halves: Vec<u16>,
    cache: Vec<CachedChunk>,
    inflater: Option<libdeflater::Decompressor>,
    tick: u64,
}

struct CachedChunk {
    index: usize,
    bytes: Vec<u8>,
    used: u64,
}

impl<'a> Reader<'a> {
    /// The split read.
    pub fn split(&self) -> &'a Split {
        self.split
    }

    /// Reads clip `clip` as f32 into `out` (`values_per_clip` values), normalised by
    /// `norm` if given.
    pub fn read_clip(&mut self, clip: usize, out: &mut [f32], norm: Option<&Affine>) -> Result<()> {
        self.read_into(clip, None, OutSlice::F32(out), norm)
    }

    /// Reads segment `segment` of clip `clip` as f32 into `out` (`values_per_segment`
    /// values), normalised by `norm` if given.
    pub fn read_segment(
        &mut self,
        clip: usize,
        segment: usize,
        out: &mut [f32],
        norm: Option<&Affine>,
    ) -> Result<()> {
        self.read_into(clip, Some(segment), OutSlice::F32(out), norm)
    }

    /// The stored little-endian bytes of clip `clip` (or one of its segments).
    pub fn raw(&mut self, clip: usize, segment: Option<usize>) -> Result<&[u8]> {
        self.item_bytes(clip, segment)
    }

    /// Reads an item (a clip, or one segment) into `out`: converted to f32 (and
    /// normalised) or copied as stored.
    pub(crate) fn read_into(
        &mut self,
        clip: usize,
        segment: Option<usize>,
        out: OutSlice<'_>,
        norm: Option<&Affine>,
    ) -> Result<()> {
        let dtype = self.split.dtype;
        let (_, len) = self.split.item_range(clip, segment)?;
        let want = len / dtype.size();
        if out.len() != want {
            return Err(Error::Shape(format!(
                "an output of {} values for an item of {want}",
                out.len()
            )));
        }
        let mut halves = std::mem::take(&mut self.halves);
        let r = self
            .item_bytes(clip, segment)
            .map(|bytes| convert::convert(bytes, dtype, out, norm, &mut halves));
        self.halves = halves;
        match r? {
            true => Ok(()),
            false => Err(bad(
                &self.split.path,
                format!(
                    "clip {clip}{} holds a value that is not finite (NaN or infinity){}, which \
                     melctl never stores",
                    segment.map(|s| format!(" segment {s}")).unwrap_or_default(),
                    if norm.is_some() {
                        ", stored or once normalised"
                    } else {
                        ""
                    }
                ),
            )),
        }
    }

    /// The stored bytes of an item, wherever they come from.
    fn item_bytes(&mut self, clip: usize, segment: Option<usize>) -> Result<&[u8]> {
        let split = self.split;
        let (offset, len) = split.item_range(clip, segment)?;
        match &split.store {
            Store::Map { map, start } => Ok(&map[start + offset..start + offset + len]),
            Store::Pread { file, base } => {
                self.scratch.resize(len, 0);
                file.read_exact_at(&mut self.scratch, base + offset as u64)
                    .map_err(|e| Error::read(&split.path, e))?;
                Ok(&self.scratch)
            }
            Store::Library(lib) => {
                lib.read(split, clip, segment, &mut self.scratch)?;
                Ok(&self.scratch)
            }
            Store::Chunks(chunks) => {
                let index = clip / chunks.clips_per_chunk;
                let slot = self.chunk(index)?;
                let clip_bytes = split.values_per_clip() * split.elem();
                let within = offset - index * chunks.clips_per_chunk * clip_bytes;
                Ok(&self.cache[slot].bytes[within..within + len])
            }
        }
    }

    /// The cache slot holding decoded chunk `index`, decoding it if needed.
    fn chunk(&mut self, index: usize) -> Result<usize> {
        self.tick += 1;
        if let Some(slot) = self.cache.iter().position(|c| c.index == index) {
            self.cache[slot].used = self.tick;
            return Ok(slot);
        }
        let Store::Chunks(chunks) = &self.split.store else {
            unreachable!("chunk() is only called for chunked stores")
        };
        let capacity = self.split.chunk_cache.max(1);
        let slot = if self.cache.len() < capacity {
            self.cache.push(CachedChunk {
                index,
                bytes: Vec::new(),
                used: self.tick,
            });
            self.cache.len() - 1
        } else {
            let lru = (0..self.cache.len())
                .min_by_key(|&i| self.cache[i].used)
                .expect("a non-empty cache");
            self.cache[lru].index = usize::MAX;
            lru
        };
        let inflater = self
            .inflater
            .get_or_insert_with(libdeflater::Decompressor::new);
        let mut bytes = std::mem::take(&mut self.cache[slot].bytes);
        chunks.decode(
            &self.split.path,
            index,
            &mut self.scratch,
            &mut bytes,
            inflater,
        )?;
        self.cache[slot] = CachedChunk {
            index,
            bytes,
            used: self.tick,
        };
        Ok(slot)
    }
}

/// Where each stored chunk of a chunked `mel` is, and how to decode it.
struct ChunkStore {
    /// The file's own descriptor (never reopened by name).
    file: File,
    clips_per_chunk: usize,
    /// Bytes of one decoded chunk.
    chunk_bytes: usize,
    /// (chunk index, file address, stored size, filter mask), sorted by index.
    index: Vec<(usize, u64, u64, u32)>,
    /// The filter pipeline in write order.
    filters: Vec<ChunkFilter>,
    elem: usize,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ChunkFilter {
    Shuffle,
    Deflate,
}

impl ChunkStore {
    fn find(&self, index: usize) -> Option<&(usize, u64, u64, u32)> {
        self.index
            .binary_search_by_key(&index, |e| e.0)
            .ok()
            .map(|i| &self.index[i])
    }

    /// Reads chunk `index`'s stored bytes and decodes them into `out` (`chunk_bytes`).
    fn decode(
        &self,
        path: &Path,
        index: usize,
        scratch: &mut Vec<u8>,
        out: &mut Vec<u8>,
        inflater: &mut libdeflater::Decompressor,
    ) -> Result<()> {
        let &(_, addr, size, mask) = self
            .find(index)
            .ok_or_else(|| bad(path, format!("chunk {index} of mel is not stored")))?;
        scratch.resize(size as usize, 0);
        self.file
            .read_exact_at(scratch, addr)
            .map_err(|e| Error::read(path, e))?;
        // Undo the filters in reverse order; a set mask bit means the filter was skipped.
        let mut have_in_scratch = true;
        for (pos, f) in self.filters.iter().enumerate().rev() {
            if mask & (1 << pos) != 0 {
                continue;
            }
            let (src, dst) = if have_in_scratch {
                (&*scratch, &mut *out)
            } else {
                (&*out, &mut *scratch)
            };
            match f {
                ChunkFilter::Deflate => {
                    dst.resize(self.chunk_bytes, 0);
                    let n = inflater.zlib_decompress(src, dst).map_err(|e| {
                        bad(path, format!("chunk {index} of mel does not inflate: {e}"))
                    })?;
                    if n != self.chunk_bytes {
                        return Err(bad(
                            path,
                            format!(
                                "chunk {index} of mel inflates to {n} bytes, {} expected",
                                self.chunk_bytes
                            ),
                        ));
                    }
                }
                ChunkFilter::Shuffle => {
                    if src.len() != self.chunk_bytes {
                        return Err(bad(
                            path,
                            format!(
                                "chunk {index} of mel holds {} bytes, {} expected",
                                src.len(),
                                self.chunk_bytes
                            ),
                        ));
                    }
                    dst.resize(self.chunk_bytes, 0);
                    unshuffle(src, dst, self.elem);
                }
            }
            have_in_scratch = !have_in_scratch;
        }
        if have_in_scratch {
            std::mem::swap(scratch, out);
        }
        if out.len() != self.chunk_bytes {
            return Err(bad(
                path,
                format!(
                    "chunk {index} of mel holds {} bytes, {} expected",
                    out.len(),
                    self.chunk_bytes
                ),
            ));
        }
        Ok(())
    }
}

/// Undoes HDF5's byte shuffle: byte `b` of element `i` was stored at `b * n + i`.
fn unshuffle(src: &[u8], dst: &mut [u8], elem: usize) {
    let n = src.len() / elem;
    for (b, plane) in src.chunks_exact(n).enumerate().take(elem) {
        for (i, &v) in plane.iter().enumerate() {
            dst[i * elem + b] = v;
        }
    }
    // HDF5 leaves bytes past the last whole element in place.
    let tail = n * elem;
    dst[tail..].copy_from_slice(&src[tail..]);
}

/// Reads items through the HDF5 library.
struct Library {
    mel: hdf5::Dataset,
}

impl Library {
    /// Reads an item into `out` as little-endian bytes of the stored dtype.
    fn read(
        &self,
        split: &Split,
        clip: usize,
        segment: Option<usize>,
        out: &mut Vec<u8>,
    ) -> Result<()> {
        use hdf5::{Hyperslab, SliceOrIndex};
        let mut sel = vec![SliceOrIndex::Index(clip)];
        let seg_dims = &split.shape[1..split.shape.len() - 2];
        match segment {
            Some(mut s) => {
                let mut idx = vec![0; seg_dims.len()];
                for (k, &d) in seg_dims.iter().enumerate().rev() {
                    idx[k] = s % d;
                    s /= d;
                }
                sel.extend(idx.into_iter().map(SliceOrIndex::Index));
            }
            None => sel.extend(seg_dims.iter().map(|_| SliceOrIndex::from(..))),
        }
        sel.push(SliceOrIndex::from(..));
        sel.push(SliceOrIndex::from(..));
        let slab = Hyperslab::from(sel);
        let err = h5err(&split.path, "reading mel through the HDF5 library");
        let reader = self.mel.as_reader();
        out.clear();
        match split.dtype {
            Dtype::F32 => {
                let a: ArrayD<f32> = reader.read_slice(slab).map_err(err)?;
                out.extend(a.iter().flat_map(|v| v.to_le_bytes()));
            }
            Dtype::F16 => {
                let a: ArrayD<half::f16> = reader.read_slice(slab).map_err(err)?;
                out.extend(a.iter().flat_map(|v| v.to_le_bytes()));
            }
            Dtype::Bf16 => {
                let a: ArrayD<u16> = reader.read_slice(slab).map_err(err)?;
                out.extend(a.iter().flat_map(|v| v.to_le_bytes()));
            }
        }
        Ok(())
    }
}

/// Checks `mel`'s shape: at least `[clips, n_mels, frames]`, every axis after the first
/// non-empty, clips of at most [`MAX_VALUES_PER_CLIP`] values (every per-item buffer is
/// sized from one), and a byte size that fits in memory arithmetic.
fn check_shape(path: &Path, shape: &[usize], elem: usize) -> Result<u64> {
    if shape.len() < 3 {
        return Err(bad(
            path,
            format!("mel has shape {shape:?}; at least [clips, n_mels, frames] is expected"),
        ));
    }
    if shape[1..].contains(&0) {
        return Err(bad(
            path,
            format!("mel has shape {shape:?}, with an empty axis"),
        ));
    }
    let per_clip = shape[1..]
        .iter()
        .try_fold(1u64, |a, &d| a.checked_mul(d as u64))
        .unwrap_or(u64::MAX);
    if per_clip > MAX_VALUES_PER_CLIP as u64 {
        return Err(bad(
            path,
            format!(
                "mel's shape {shape:?} gives clips of {per_clip} values, more than the {MAX_VALUES_PER_CLIP} melctl writes"
            ),
        ));
    }
    shape
        .iter()
        .try_fold(elem as u64, |a, &d| a.checked_mul(d as u64))
        .filter(|&b| b <= isize::MAX as u64)
        .ok_or_else(|| bad(path, format!("mel's shape {shape:?} overflows")))
}

fn check_labels(path: &Path, labels: &[i64], classes: usize) -> Result<()> {
    if let Some((i, &l)) = labels
        .iter()
        .enumerate()
        .find(|&(_, &l)| l < 0 || l as u64 >= classes as u64)
    {
        return Err(bad(
            path,
            format!("clip {i} has label {l}, outside the {classes} label names"),
        ));
    }
    Ok(())
}

fn default_dims(n: usize) -> Vec<String> {
    let mut d = vec!["clip".to_string()];
    d.extend((0..n.saturating_sub(3)).map(|i| format!("segment{i}")));
    d.extend(["mel".to_string(), "frame".to_string()]);
    d
}

fn stem(path: &Path, suffix: &str) -> String {
    let n = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    n.strip_suffix(suffix).map(str::to_string).unwrap_or(n)
}

/// Opens the contiguous bytes `[offset, offset + len)` of `file` (`path`, already checked
/// to hold them) for mapping or positioned reads.
fn contiguous(
    path: &Path,
    file: File,
    offset: u64,
    len: u64,
    mode: ReadMode,
) -> Result<(Access, Store)> {
    if mode == ReadMode::Pread || len == 0 {
        return Ok((Access::Pread, Store::Pread { file, base: offset }));
    }
    let page = page_size();
    let aligned = offset - offset % page;
    let start = (offset - aligned) as usize;
    let map_len = usize::try_from(len + start as u64).map_err(|_| {
        Error::limit(
            path.display().to_string(),
            "mel is larger than the address space",
        )
    })?;
    // SAFETY: a read-only, private map of bytes checked at open to lie inside the file.
    // Mapped memory can still change under us if another process writes to or truncates
    // the file (reads then see the new bytes, or the process gets SIGBUS). melctl never
    // writes to a published output: it writes a new file and renames it over the old
    // one, which leaves this mapping on the old, unchanged inode. Every access slices
    // `[start + offset, start + offset + len)` with an item range checked against the
    // dataset's shape, inside the mapped length.
    let map = unsafe {
        memmap2::MmapOptions::new()
            .offset(aligned)
            .len(map_len)
            .map(&file)
    }
    .map_err(|e| Error::read(path, e))?;
    Ok((Access::Map, Store::Map { map, start }))
}

fn page_size() -> u64 {
    // SAFETY: sysconf has no preconditions.
    let p = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    if p > 0 { p as u64 } else { 4096 }
}

// ---------------------------------------------------------------------------------------
// npy

fn open_npy(dir: &Path, opts: &OpenOptions) -> Result<Split> {
    if opts.read == ReadMode::Library {
        return Err(Error::unsupported(
            dir,
            "an npy folder has no HDF5 library path",
        ));
    }
    let meta_path = dir.join(mel_core::format::NPY_META);
    // A folder that is no npy split (an output folder given instead of one of its
    // splits): say so, rather than "meta.json: cannot read".
    if std::fs::symlink_metadata(&meta_path).is_err() {
        let mut splits: Vec<String> = std::fs::read_dir(dir)
            .map(|d| {
                d.flatten()
                    .filter_map(|e| e.file_name().to_str().map(str::to_string))
                    .filter(|n| mel_core::format::split_of_name(n).is_some())
                    .collect()
            })
            .unwrap_or_default();
        splits.sort();
        let hint = match splits.first() {
            Some(first) => format!(
                "; it holds the splits {}: give one of them, e.g. {}",
                splits.join(", "),
                dir.join(first).display()
            ),
            None => String::new(),
        };
        return Err(bad(
            dir,
            format!("a folder without meta.json is no npy split{hint}"),
        ));
    }
    // A regular file only, opened without blocking, read up to a bound on the bytes read.
    let meta_bytes = mel_core::input::read_bounded(&meta_path, MAX_META_BYTES)
        .map_err(|e| Error::read(&meta_path, e))?;
    let meta: serde_json::Value = serde_json::from_slice(&meta_bytes)
        .map_err(|e| bad(&meta_path, format!("not valid JSON: {e}")))?;
    let version = match &meta[mel_core::format::FORMAT_VERSION] {
        serde_json::Value::Null => None,
        v => Some(
            v.as_u64()
                .ok_or_else(|| bad(&meta_path, "format_version is not a whole number"))?,
        ),
    };
    mel_core::format::check_version(version).map_err(|why| bad(&meta_path, why))?;
    let mel_path = dir.join(mel_core::format::NPY_MEL);
    let (h, mel_file) = npy::open(&mel_path)?;
    let dtype = match h.ty {
        NpyType::F32 => Dtype::F32,
        NpyType::F16 => Dtype::F16,
        NpyType::U16 if meta["dtype"] == "bf16" => Dtype::Bf16,
        NpyType::U16 => {
            return Err(bad(
                &mel_path,
                "mel is <u2 but meta.json's dtype is not bf16",
            ));
        }
        NpyType::I64 => return Err(bad(&mel_path, "mel is int64")),
    };
    let shape = h.shape.clone();
    let data_bytes = check_shape(&mel_path, &shape, dtype.size())?;
    debug_assert_eq!(data_bytes, h.data_len);
    let rows = shape[0];
    let (access, store) = contiguous(&mel_path, mel_file, h.data_offset, h.data_len, opts.read)?;
    let labels = npy::read_i64_vector(&dir.join(mel_core::format::NPY_LABEL), rows)?;
    let strings = |key: &str| -> Result<Vec<String>> {
        meta[key]
            .as_array()
            .and_then(|a| a.iter().map(|v| v.as_str().map(str::to_string)).collect())
            .ok_or_else(|| bad(&meta_path, format!("{key} is not a list of strings")))
    };
    let paths = strings("paths")?;
    if paths.len() != rows {
        return Err(bad(
            &meta_path,
            format!("{} paths for {rows} rows of mel", paths.len()),
        ));
    }
    if let Some(r) = meta["rows"].as_u64()
        && r != rows as u64
    {
        return Err(bad(&meta_path, format!("rows is {r}; mel.npy has {rows}")));
    }
    let label_names = strings("label_names")?;
    check_labels(
        &dir.join(mel_core::format::NPY_LABEL),
        &labels,
        label_names.len(),
    )?;
    let dims = if meta["mel_dims"].is_null() {
        default_dims(shape.len())
    } else {
        strings("mel_dims")?
    };
    if dims.len() != shape.len() {
        return Err(bad(
            &meta_path,
            format!(
                "mel_dims names {} axes, mel has {}",
                dims.len(),
                shape.len()
            ),
        ));
    }
    let numbers = |key: &str, len: usize| -> Result<Option<Vec<f64>>> {
        match &meta[key] {
            serde_json::Value::Null => Ok(None),
            v => v
                .as_array()
                .filter(|a| a.len() == len)
                .and_then(|a| a.iter().map(|x| x.as_f64()).collect::<Option<Vec<_>>>())
                .map(Some)
                .ok_or_else(|| bad(&meta_path, format!("{key} is not a list of {len} numbers"))),
        }
    };
    let n_mels = shape[shape.len() - 2];
    let stats = match (numbers("mel_mean", n_mels)?, numbers("mel_std", n_mels)?) {
        (Some(mean), Some(std)) => Some(MelStats {
            mean,
            std,
            count: meta["stats_count"].as_u64().unwrap_or(0),
        }),
        _ => None,
    }
    .filter(|s| s.count > 0);
    let int_column = |key: &str, max: f64| -> Result<Option<Vec<f64>>> {
        let v = numbers(key, rows)?;
        if let Some(v) = &v
            && v.iter().any(|&x| x < 0.0 || x > max || x.fract() != 0.0)
        {
            return Err(bad(
                &meta_path,
                format!("{key} holds a value that is not a count"),
            ));
        }
        Ok(v)
    };
    let provenance = Provenance {
        source_rate: int_column("source_rate", u32::MAX as f64)?
            .map(|v| v.into_iter().map(|x| x as u32).collect()),
        source_channels: int_column("source_channels", u16::MAX as f64)?
            .map(|v| v.into_iter().map(|x| x as u16).collect()),
        source_frames: int_column("source_frames", u64::MAX as f64)?
            .map(|v| v.into_iter().map(|x| x as u64).collect()),
    };
    let name = meta["split"]
        .as_str()
        .map(str::to_string)
        .unwrap_or_else(|| stem(dir, mel_core::format::NPY_SUFFIX));
    Ok(Split {
        path: dir.to_path_buf(),
        format: Format::Npy,
        name,
        shape,
        dims,
        dtype,
        label_names,
        labels,
        paths,
        config: Some(meta["config"].clone()).filter(|c| !c.is_null()),
        version: meta["melctl_version"].as_str().map(str::to_string),
        stats,
        provenance,
        access,
        store,
        chunk_cache: opts.chunk_cache,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unshuffle_inverts_hdf5s_shuffle() {
        let elem = 2;
        let raw: Vec<u8> = (0..20u8).collect();
        let n = raw.len() / elem;
        let mut shuffled = vec![0; raw.len()];
        for i in 0..n {
            for b in 0..elem {
                shuffled[b * n + i] = raw[i * elem + b];
            }
        }
        let mut back = vec![0; raw.len()];
        unshuffle(&shuffled, &mut back, elem);
        assert_eq!(back, raw);
    }

    #[test]
    fn shapes_are_checked() {
        let p = Path::new("x.h5");
        assert!(check_shape(p, &[3, 32, 5], 2).is_ok());
        assert!(check_shape(p, &[3, 5], 2).is_err());
        assert!(check_shape(p, &[3, 0, 5], 2).is_err());
        assert!(check_shape(p, &[usize::MAX, 79, 3, 32, 5], 2).is_err());
        assert_eq!(check_shape(p, &[0, 79, 3, 32, 5], 2).unwrap(), 0);
        // A clip larger than melctl writes, even with one clip and a file that long.
        let e = check_shape(p, &[1, 1, 1, 32, 1_000_000_000], 4).unwrap_err();
        assert!(e.to_string().contains("32000000000 values"), "{e}");
        assert!(check_shape(p, &[1, 1, 1 << 28], 4).is_ok());
        assert!(check_shape(p, &[1, 1, (1 << 28) + 1], 4).is_err());
    }
}

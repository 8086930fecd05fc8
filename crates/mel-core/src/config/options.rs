//! The run options: which loader, backend and sink run, how wide, and the HDF5 sink's
//! storage options. None of them changes an output value (those are the
//! [spec](crate::spec)); each has a checked range.

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::spec::Dtype;

/// Worker threads a configuration may ask for.
pub const MAX_THREADS: usize = 1024;

/// Clips per batch a configuration may ask for.
pub const MAX_BATCH_CLIPS: usize = 1 << 20;

/// Batches a queue between stages may hold, at most.
pub const MAX_QUEUE_DEPTH: usize = 1024;

/// The stored output.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct OutputConfig {
    /// Element type of the stored spectrograms. Default `f16`.
    pub dtype: Dtype,
    /// Where spectrograms go: `hdf5` (one file per split) or `npy` (a folder of plain
    /// arrays per split). Default `hdf5`.
    pub sink: SinkKind,
    /// Flush each output to disk (fsync) before renaming it into place, so a finished
    /// build survives a power loss. Without it a killed build still never leaves a
    /// partial output at the final path. Default true.
    pub fsync: bool,
}

impl Default for OutputConfig {
    fn default() -> Self {
        OutputConfig {
            dtype: Dtype::F16,
            sink: SinkKind::Hdf5,
            fsync: true,
        }
    }
}

/// The sinks melctl knows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SinkKind {
    /// `OUT/{split}.h5`.
    Hdf5,
    /// `OUT/{split}.npy.d/{mel.npy, label.npy, meta.json}`.
    Npy,
}

/// Which implementation runs each stage, and how wide.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct RunConfig {
    /// Mel backend. Default `auto` (see [`BackendKind::Auto`]).
    pub backend: BackendKind,
    /// Audio loader. Default `auto` (see [`LoaderKind::Auto`]).
    pub loader: LoaderKind,
    /// Worker threads for decoding, the CPU backend and the output checks; 0 means all
    /// cores. Default 0.
    pub threads: usize,
    /// Clips per batch handed to the backend and the sink. Default 256.
    pub batch_clips: usize,
    /// Batches each queue between stages may hold (backpressure beyond). Default 4.
    pub queue_depth: usize,
    /// Folder of the memmap loader's cache files; empty means `$XDG_CACHE_HOME/melctl`
    /// (or `~/.cache/melctl`). Default empty.
    pub cache_dir: String,
    /// GPU device for GPU backends: an index (`melctl devices`), or for wgpu a part of
    /// the adapter's name. Default: CUDA device 0, the best wgpu adapter.
    pub device: Option<DeviceSelector>,
    /// Options of the streaming loader.
    pub stream: StreamConfig,
}

impl RunConfig {
    /// Checks every field's range; the error names the field (`run.…`) and the limit.
    pub fn check(&self) -> Result<()> {
        if self.threads > MAX_THREADS {
            return Err(Error::config(
                "run.threads",
                format!("= {} is above the limit of {MAX_THREADS}", self.threads),
            ));
        }
        for (field, value, lo, hi) in [
            ("run.batch_clips", self.batch_clips, 1, MAX_BATCH_CLIPS),
            ("run.queue_depth", self.queue_depth, 1, MAX_QUEUE_DEPTH),
            ("run.stream.readers", self.stream.readers, 0, MAX_THREADS),
            (
                "run.stream.files_per_task",
                self.stream.files_per_task,
                1,
                1 << 16,
            ),
            ("run.stream.in_flight", self.stream.in_flight, 0, 1 << 16),
            ("run.stream.read_size", self.stream.read_size, 4096, 1 << 30),
        ] {
            if !(lo..=hi).contains(&value) {
                return Err(Error::config(
                    field,
                    format!("= {value} must be {lo} to {hi}"),
                ));
            }
        }
        Ok(())
    }
}

impl Default for RunConfig {
    fn default() -> Self {
        RunConfig {
            backend: BackendKind::Auto,
            loader: LoaderKind::Auto,
            threads: 0,
            batch_clips: 256,
            queue_depth: 4,
            cache_dir: String::new(),
            device: None,
            stream: StreamConfig::default(),
        }
    }
}

/// Options of the streaming loader (a pool of reader threads with a bounded number of files in flight).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct StreamConfig {
    /// Reader threads (each reads and decodes whole tasks); 0 means one per worker thread. Default 0.
    pub readers: usize,
    /// Bytes asked of the kernel per `read` call. Default 1 MiB.
    pub read_size: usize,
    /// Consecutive files one reader takes per task. Default 16.
    pub files_per_task: usize,
    /// Tasks decoded but not yet consumed, at most (bounds memory); 0 means 2 per reader. Default 0.
    pub in_flight: usize,
    /// Open files with `O_NOATIME` (no access-time writes) where the OS allows. Default true.
    pub noatime: bool,
    /// Tell the kernel each file is read once, sequentially (`posix_fadvise`). Default true.
    pub fadvise: bool,
}

impl Default for StreamConfig {
    fn default() -> Self {
        StreamConfig {
            readers: 0,
            read_size: 1 << 20,
            files_per_task: 16,
            in_flight: 0,
            noatime: true,
            fadvise: true,
        }
    }
}

/// The mel backends melctl knows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum BackendKind {
    /// CUDA when a device works, else a hardware wgpu adapter, else the CPU; a backend
    /// that fails to start is skipped with a warning. The choice and reason are reported.
    Auto,
    /// rayon + realfft on the CPU.
    Cpu,
    /// One fused NVRTC kernel on an NVIDIA GPU (cudarc).
    Cuda,
    /// One fused WGSL compute shader on any GPU with Vulkan, Metal or DX12 (wgpu).
    Wgpu,
}

/// A GPU device: its index, or (wgpu) part of its adapter's name.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum DeviceSelector {
    /// Position in `melctl devices`' list for the backend.
    Index(usize),
    /// Case-insensitive part of a wgpu adapter's name.
    Name(String),
}

impl std::str::FromStr for DeviceSelector {
    type Err = std::convert::Infallible;

    /// A number is an index; anything else a name.
    fn from_str(s: &str) -> std::result::Result<Self, Self::Err> {
        Ok(match s.trim().parse() {
            Ok(i) => DeviceSelector::Index(i),
            Err(_) => DeviceSelector::Name(s.trim().to_string()),
        })
    }
}

/// The audio loaders melctl knows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LoaderKind {
    /// The memmap cache when a valid one exists, else streaming. The choice and reason are
    /// reported.
    Auto,
    /// Decode a whole split into one contiguous arena in RAM first.
    Preload,
    /// Decode once into a cache file, then map it on later runs.
    Memmap,
    /// Read and decode with a pool of reader threads, bounded memory.
    Stream,
}

/// Options of the HDF5 sink.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Hdf5Config {
    /// Clips per HDF5 chunk of the `mel` dataset; 0 means a contiguous dataset. Default 0:
    /// contiguous storage is written straight to its bytes, in parallel, and a trainer
    /// reading one random clip reads exactly that clip's bytes. Chunks are needed for
    /// gzip; a reader then inflates a whole chunk per clip, so keep them small (1–16).
    pub chunk_clips: usize,
    /// gzip (deflate) level 1-9 for `mel` chunks, after a byte shuffle, compressed on all
    /// cores; 0 for none. Default 0. Level 1 halves leak-4k's f16 output, which wins when
    /// the disk, not the CPU, is the limit.
    pub gzip: u8,
}

impl Hdf5Config {
    /// Checks the level and that compression has chunks to compress.
    pub fn check(&self) -> Result<()> {
        if self.gzip > 9 {
            return Err(Error::config(
                "hdf5.gzip",
                format!("= {} must be 0 (off) to 9", self.gzip),
            ));
        }
        if self.gzip > 0 && self.chunk_clips == 0 {
            return Err(Error::config(
                "hdf5.gzip",
                "compression needs a chunked dataset: set hdf5.chunk_clips to 1 or more",
            ));
        }
        Ok(())
    }
}

crate::named::named!(
    SinkKind,
    "sink",
    [
        (
            SinkKind::Hdf5,
            "hdf5",
            "OUT/{split}.h5 (h5py, candle via hdf5)"
        ),
        (
            SinkKind::Npy,
            "npy",
            "OUT/{split}.npy.d/{mel.npy, label.npy, meta.json}: plain arrays numpy can memory-map"
        ),
    ]
);

crate::named::named!(
    BackendKind,
    "backend",
    [
        (
            BackendKind::Auto,
            "auto",
            "CUDA if a device works, else a hardware wgpu adapter, else the CPU (says which and why)"
        ),
        (BackendKind::Cpu, "cpu", "rayon + realfft on all cores"),
        (
            BackendKind::Cuda,
            "cuda",
            "one fused kernel on an NVIDIA GPU"
        ),
        (
            BackendKind::Wgpu,
            "wgpu",
            "one fused compute shader on any GPU with Vulkan, Metal or DX12"
        ),
    ]
);

crate::named::named!(
    LoaderKind,
    "loader",
    [
        (
            LoaderKind::Auto,
            "auto",
            "a valid cache if there is one, else stream"
        ),
        (
            LoaderKind::Preload,
            "preload",
            "decode a whole split into RAM first"
        ),
        (
            LoaderKind::Memmap,
            "memmap",
            "decode once into a cache file; later runs map it and skip decoding"
        ),
        (
            LoaderKind::Stream,
            "stream",
            "reader threads with bounded memory, overlapped with the mel computation"
        ),
    ]
);

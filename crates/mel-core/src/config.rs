//! The configuration model: every knob of a build, with documented defaults,
//! TOML (de)serialisation, built-in presets and layered merging.
//!
//! Layering: a preset gives a complete configuration; a TOML file overrides the
//! keys it names; command-line flags override both. The default configuration is
//! the `leak-4k` preset.

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};

/// Worker threads a configuration may ask for.
pub const MAX_THREADS: usize = 1024;

/// Clips per batch a configuration may ask for.
pub const MAX_BATCH_CLIPS: usize = 1 << 20;

/// Batches a queue between stages may hold, at most.
pub const MAX_QUEUE_DEPTH: usize = 1024;

/// A complete build configuration.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Config {
    /// How audio is brought to a fixed-length mono clip.
    pub audio: AudioConfig,
    /// The two-stage segmentation of each clip.
    pub segment: SegmentConfig,
    /// The mel spectrogram of each segment (torchaudio `MelSpectrogram`).
    pub mel: MelConfig,
    /// The log compression applied after the mel filterbank.
    pub log: LogScale,
    /// The stored output.
    pub output: OutputConfig,
    /// Which loader, backend and parallelism to use.
    pub run: RunConfig,
    /// Options of the HDF5 sink.
    pub hdf5: Hdf5Config,
}

impl Default for Config {
    fn default() -> Self {
        Preset::Leak4k.config()
    }
}

/// Everything that determines the output values, and nothing else: the part of a
/// [`Config`] a [`MelPlan`](crate::plan::MelPlan) is made from. Two builds with equal specs
/// write equal spectrograms, whatever their loaders, backends, sinks or thread counts.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MelSpec {
    /// How audio is brought to a fixed-length mono clip.
    pub audio: AudioConfig,
    /// The two-stage segmentation of each clip.
    pub segment: SegmentConfig,
    /// The mel spectrogram of each segment.
    pub mel: MelConfig,
    /// The log compression.
    pub log: LogScale,
    /// The stored element type.
    pub dtype: Dtype,
}

impl Default for MelSpec {
    fn default() -> Self {
        Config::default().spec()
    }
}

impl MelSpec {
    /// The spec with every defaulted field made explicit (`win_length`, `hop_length`, `f_max`).
    pub fn resolved(&self) -> MelSpec {
        let mut r = self.clone();
        r.mel.win_length = Some(self.mel.win_length());
        r.mel.hop_length = Some(self.mel.hop_length());
        r.mel.f_max = Some(self.mel.f_max(self.audio.sample_rate));
        r
    }
}

/// Audio normalisation: rate, clip length, pad/trim and downmix.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct AudioConfig {
    /// Target sample rate in Hz. Default 4096.
    pub sample_rate: u32,
    /// Clip length in seconds; every clip is padded or trimmed to
    /// `round(sample_rate * clip_seconds)` samples. Default 10.0.
    pub clip_seconds: f64,
    /// Where zeros go when a clip is short. Default `end`.
    pub pad: PadPolicy,
    /// Which part of a long clip is kept. Default `start` (the first samples).
    pub trim: TrimPolicy,
    /// How multichannel audio becomes mono. Default `mean`.
    pub downmix: Downmix,
    /// Resampling of files at another rate (`mel_audio::resample`). Default `balanced`.
    pub resample_quality: ResampleQuality,
}

impl Default for AudioConfig {
    fn default() -> Self {
        AudioConfig {
            sample_rate: 4096,
            clip_seconds: 10.0,
            pad: PadPolicy::End,
            trim: TrimPolicy::Start,
            downmix: Downmix::Mean,
            resample_quality: ResampleQuality::Balanced,
        }
    }
}

impl AudioConfig {
    /// The clip length in samples, `round(sample_rate * clip_seconds)`.
    pub fn clip_samples(&self) -> usize {
        (self.sample_rate as f64 * self.clip_seconds)
            .round()
            .max(0.0) as usize
    }
}

/// Where padding zeros are placed when a clip is shorter than the clip length.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum PadPolicy {
    /// Zeros after the audio.
    End,
    /// Zeros split evenly before and after (the extra one after).
    Both,
}

/// Which part of a clip longer than the clip length is kept.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum TrimPolicy {
    /// Keep the first samples.
    Start,
    /// Keep the middle samples.
    Center,
}

/// How multichannel audio is turned into one channel.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Downmix {
    /// The mean of all channels.
    Mean,
    /// The first channel only.
    First,
    /// One channel by index from 0: `downmix = { channel = 1 }`. A file with fewer
    /// channels is an error naming both numbers.
    Channel(u16),
}

/// How files at another sample rate are resampled. Every quality meets one contract for
/// every pair of rates (flat within ±0.1 dB to 0.9 × the lower Nyquist, ≥ 80 dB down above
/// it); they differ in how much of the top of the band they keep and how deep the stop
/// band is. Measured in `mel_audio`'s `resample_grid` test and the README.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ResampleQuality {
    /// Pass band to 0.905 × Nyquist, 90 dB stop band: the shortest filter.
    Fast,
    /// Pass band to 0.93 × Nyquist, 110 dB stop band.
    Balanced,
    /// Pass band to 0.95 × Nyquist, 130 dB stop band: the longest filter.
    Best,
}

/// Two-stage segmentation: long windows over the clip, short windows over each
/// long window; each short window gets its own spectrogram. Either stage may be `"off"`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct SegmentConfig {
    /// Long windows over the clip, or `"off"`.
    pub long: StageSetting,
    /// Short windows over each long window (or over the clip if `long` is off), or `"off"`.
    pub short: StageSetting,
}

impl Default for SegmentConfig {
    fn default() -> Self {
        SegmentConfig {
            long: StageSetting::On(Stage {
                window: 1024,
                hop: 512,
            }),
            short: StageSetting::On(Stage {
                window: 512,
                hop: 256,
            }),
        }
    }
}

/// A segmentation stage in TOML: `{ window = N, hop = M }` or `"off"`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum StageSetting {
    /// The stage is disabled.
    Off(OffMarker),
    /// The stage cuts windows of `window` samples every `hop` samples.
    On(Stage),
}

impl StageSetting {
    /// The stage's window and hop, if enabled.
    pub fn get(&self) -> Option<Stage> {
        match self {
            StageSetting::Off(_) => None,
            StageSetting::On(s) => Some(*s),
        }
    }

    /// The disabled setting.
    pub const OFF: StageSetting = StageSetting::Off(OffMarker::Off);
}

/// The literal `"off"`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum OffMarker {
    /// `"off"`.
    Off,
}

/// One segmentation stage: windows of `window` samples every `hop` samples, no padding.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Stage {
    /// Window length in samples.
    pub window: usize,
    /// Hop between window starts in samples.
    pub hop: usize,
}

/// The mel spectrogram parameters, as in `torchaudio.transforms.MelSpectrogram`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct MelConfig {
    /// FFT size. Default 512.
    pub n_fft: usize,
    /// Window length; `"default"` (or absent) means `n_fft` (torchaudio's default).
    #[serde(with = "or_default")]
    pub win_length: Option<usize>,
    /// Hop between frames; `"default"` (or absent) means `win_length / 2` (torchaudio's).
    #[serde(with = "or_default")]
    pub hop_length: Option<usize>,
    /// The analysis window (periodic). Default `hann`.
    pub window: WindowKind,
    /// Pad `n_fft / 2` on each side so frame t is centred on sample `t * hop`. Default true.
    pub center: bool,
    /// How centre padding is filled. Default `reflect`.
    pub pad_mode: PadMode,
    /// Exponent of the magnitude: 2 (power) or 1 (magnitude). Default 2.
    pub power: f64,
    /// Number of mel bands. Default 32.
    pub n_mels: usize,
    /// Lowest filter edge in Hz. Default 0.
    pub f_min: f64,
    /// Highest filter edge in Hz; `"default"` (or absent) means `sample_rate / 2`.
    #[serde(with = "or_default")]
    pub f_max: Option<f64>,
    /// Mel scale formula. Default `htk`.
    pub mel_scale: MelScale,
    /// Filter normalisation. Default `none`.
    pub norm: MelNorm,
}

impl Default for MelConfig {
    fn default() -> Self {
        MelConfig {
            n_fft: 512,
            win_length: Some(512),
            hop_length: Some(128),
            window: WindowKind::Hann,
            center: true,
            pad_mode: PadMode::Reflect,
            power: 2.0,
            n_mels: 32,
            f_min: 0.0,
            f_max: Some(2048.0),
            mel_scale: MelScale::Htk,
            norm: MelNorm::None,
        }
    }
}

impl MelConfig {
    /// The window length, resolving the default.
    pub fn win_length(&self) -> usize {
        self.win_length.unwrap_or(self.n_fft)
    }

    /// The frame hop, resolving the default.
    pub fn hop_length(&self) -> usize {
        self.hop_length.unwrap_or(self.win_length() / 2)
    }

    /// The upper filter edge, resolving the default for `sample_rate`.
    pub fn f_max(&self, sample_rate: u32) -> f64 {
        self.f_max.unwrap_or(sample_rate as f64 / 2.0)
    }
}

/// A value or the word `"default"` (torchaudio's derived default) in TOML and JSON.
mod or_default {
    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Either<T> {
        Value(T),
        Word(String),
    }

    pub fn serialize<T: Serialize, S: Serializer>(v: &Option<T>, s: S) -> Result<S::Ok, S::Error> {
        match v {
            Some(x) => x.serialize(s),
            None => s.serialize_str("default"),
        }
    }

    pub fn deserialize<'de, T: Deserialize<'de>, D: Deserializer<'de>>(
        d: D,
    ) -> Result<Option<T>, D::Error> {
        match Either::<T>::deserialize(d)? {
            Either::Value(v) => Ok(Some(v)),
            Either::Word(w) if w == "default" => Ok(None),
            Either::Word(w) => Err(serde::de::Error::custom(format!(
                "expected a number or \"default\", found {w:?}"
            ))),
        }
    }
}

/// Analysis window shapes (all periodic, as torch's `*_window(periodic=True)`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum WindowKind {
    /// `0.5 - 0.5 cos(2πn/N)`.
    Hann,
    /// `0.54 - 0.46 cos(2πn/N)`.
    Hamming,
    /// All ones.
    Rectangular,
}

/// How `center` padding is filled.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum PadMode {
    /// Mirror without repeating the edge sample (numpy/torch `reflect`).
    Reflect,
    /// Zeros.
    Constant,
}

/// Mel scale formulas.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum MelScale {
    /// `2595 log10(1 + f/700)`.
    Htk,
    /// Slaney's Auditory Toolbox scale: linear below 1 kHz, logarithmic above.
    Slaney,
}

/// Mel filter normalisation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum MelNorm {
    /// Triangles of peak 1.
    None,
    /// Triangles divided by their width in Hz (constant energy per band).
    Slaney,
}

/// Log compression after the filterbank.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "lowercase", deny_unknown_fields)]
pub enum LogScale {
    /// Decibels as torchaudio's `AmplitudeToDB`: `k·log10(max(x, amin))` with
    /// k = 10 for power 2 (stype "power") and 20 for power 1 (stype "magnitude"),
    /// then, if `top_db` is set, values below each spectrogram's peak − top_db are raised to it.
    Db {
        /// Floor applied before the log. Default 1e-10.
        #[serde(default = "default_amin")]
        amin: f64,
        /// Dynamic range limit in dB per spectrogram, if any.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        top_db: Option<f64>,
    },
    /// Natural log: `ln(x + offset)`.
    Ln {
        /// Added before the log. Default 1e-6.
        #[serde(default = "default_ln_offset")]
        offset: f64,
    },
    /// No compression: the mel energies themselves.
    None,
}

fn default_amin() -> f64 {
    1e-10
}

fn default_ln_offset() -> f64 {
    1e-6
}

impl Default for LogScale {
    fn default() -> Self {
        LogScale::Db {
            amin: default_amin(),
            top_db: None,
        }
    }
}

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

impl SinkKind {
    /// The name used in flags, TOML and reports.
    pub fn name(self) -> &'static str {
        match self {
            SinkKind::Hdf5 => "hdf5",
            SinkKind::Npy => "npy",
        }
    }
}

/// Element type of stored spectrograms.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Dtype {
    /// IEEE binary32.
    F32,
    /// IEEE binary16.
    F16,
    /// bfloat16 (stored in HDF5 as uint16 bit patterns with a `dtype` attribute).
    Bf16,
}

impl Dtype {
    /// Bytes per element.
    pub fn size(self) -> usize {
        match self {
            Dtype::F32 => 4,
            Dtype::F16 | Dtype::Bf16 => 2,
        }
    }

    /// The largest finite value the type holds (f16: 65504).
    pub fn max_value(self) -> f64 {
        match self {
            Dtype::F32 => f32::MAX as f64,
            Dtype::F16 => half::f16::MAX.to_f64(),
            Dtype::Bf16 => half::bf16::MAX.to_f64(),
        }
    }

    /// The lowercase name used in configs and files.
    pub fn name(self) -> &'static str {
        match self {
            Dtype::F32 => "f32",
            Dtype::F16 => "f16",
            Dtype::Bf16 => "bf16",
        }
    }
}

/// Which implementation runs each stage, and how wide.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct RunConfig {
    /// Mel backend. Default `auto` (see [`BackendKind::Auto`]).
    pub backend: BackendKind,
    /// Audio loader. Default `auto` (see [`LoaderKind::Auto`]).
    pub loader: LoaderKind,
    /// Worker threads for decoding and the CPU backend; 0 means all cores. Default 0.
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

impl BackendKind {
    /// The name used in flags, TOML and reports.
    pub fn name(self) -> &'static str {
        match self {
            BackendKind::Auto => "auto",
            BackendKind::Cpu => "cpu",
            BackendKind::Cuda => "cuda",
            BackendKind::Wgpu => "wgpu",
        }
    }
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

impl LoaderKind {
    /// The name used in flags, TOML and reports.
    pub fn name(self) -> &'static str {
        match self {
            LoaderKind::Auto => "auto",
            LoaderKind::Preload => "preload",
            LoaderKind::Memmap => "memmap",
            LoaderKind::Stream => "stream",
        }
    }
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

/// The built-in presets.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Preset {
    /// 4096 Hz vibration clips of 10 s, two-stage segmentation, 32 mels (WORKLOAD.md).
    #[serde(rename = "leak-4k")]
    Leak4k,
    /// 16 kHz speech, 1 s clips, n_fft 400, hop 160, 80 mels, no segmentation.
    #[serde(rename = "speech-16k")]
    Speech16k,
}

impl Preset {
    /// Every preset, in documentation order.
    pub const ALL: [Preset; 2] = [Preset::Leak4k, Preset::Speech16k];

    /// The preset's name as used on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Preset::Leak4k => "leak-4k",
            Preset::Speech16k => "speech-16k",
        }
    }

    /// Looks a preset up by name.
    pub fn from_name(name: &str) -> Result<Preset> {
        Preset::ALL
            .into_iter()
            .find(|p| p.name() == name)
            .ok_or_else(|| Error::UnknownPreset {
                name: name.to_string(),
                known: Preset::ALL.map(Preset::name).join(", "),
            })
    }

    /// The preset's spec (what determines the output values).
    pub fn spec(self) -> MelSpec {
        self.config().spec()
    }

    /// The preset's complete configuration.
    pub fn config(self) -> Config {
        match self {
            Preset::Leak4k => Config {
                audio: AudioConfig::default(),
                segment: SegmentConfig::default(),
                mel: MelConfig::default(),
                log: LogScale::default(),
                output: OutputConfig::default(),
                run: RunConfig::default(),
                hdf5: Hdf5Config::default(),
            },
            Preset::Speech16k => Config {
                audio: AudioConfig {
                    sample_rate: 16000,
                    clip_seconds: 1.0,
                    ..AudioConfig::default()
                },
                segment: SegmentConfig {
                    long: StageSetting::OFF,
                    short: StageSetting::OFF,
                },
                mel: MelConfig {
                    n_fft: 400,
                    win_length: Some(400),
                    hop_length: Some(160),
                    n_mels: 80,
                    f_max: Some(8000.0),
                    ..MelConfig::default()
                },
                log: LogScale::default(),
                output: OutputConfig::default(),
                run: RunConfig::default(),
                hdf5: Hdf5Config::default(),
            },
        }
    }
}

impl Config {
    /// The part of the configuration that determines output values.
    pub fn spec(&self) -> MelSpec {
        MelSpec {
            audio: self.audio.clone(),
            segment: self.segment.clone(),
            mel: self.mel.clone(),
            log: self.log,
            dtype: self.output.dtype,
        }
    }

    /// Checks the options outside the spec (run, HDF5) and returns the first problem,
    /// naming the field and the limit. The spec itself is checked by `MelPlan::new`.
    pub fn check_options(&self) -> Result<()> {
        if self.run.threads > MAX_THREADS {
            return Err(Error::config(
                "run.threads",
                format!("= {} is above the limit of {MAX_THREADS}", self.run.threads),
            ));
        }
        for (field, value, lo, hi) in [
            ("run.batch_clips", self.run.batch_clips, 1, MAX_BATCH_CLIPS),
            ("run.queue_depth", self.run.queue_depth, 1, MAX_QUEUE_DEPTH),
            (
                "run.stream.readers",
                self.run.stream.readers,
                0,
                MAX_THREADS,
            ),
            (
                "run.stream.files_per_task",
                self.run.stream.files_per_task,
                1,
                1 << 16,
            ),
            (
                "run.stream.in_flight",
                self.run.stream.in_flight,
                0,
                1 << 16,
            ),
            (
                "run.stream.read_size",
                self.run.stream.read_size,
                4096,
                1 << 30,
            ),
        ] {
            if !(lo..=hi).contains(&value) {
                return Err(Error::config(
                    field,
                    format!("= {value} must be {lo} to {hi}"),
                ));
            }
        }
        if self.hdf5.gzip > 9 {
            return Err(Error::config(
                "hdf5.gzip",
                format!("= {} must be 0 (off) to 9", self.hdf5.gzip),
            ));
        }
        if self.hdf5.gzip > 0 && self.hdf5.chunk_clips == 0 {
            return Err(Error::config(
                "hdf5.gzip",
                "compression needs a chunked dataset: set hdf5.chunk_clips to 1 or more",
            ));
        }
        Ok(())
    }

    /// Parses a complete or partial TOML text on top of `base` (keys absent from the text keep `base`'s values).
    pub fn merge_toml(base: &Config, text: &str, source_name: Option<&str>) -> Result<Config> {
        let parse_err = |message: String| Error::ConfigParse {
            source_name: source_name.map(str::to_string),
            message,
        };
        let overlay: toml::Table = toml::from_str(text).map_err(|e| parse_err(e.to_string()))?;
        let mut merged = toml::Table::try_from(base).map_err(|e| parse_err(e.to_string()))?;
        merge_tables(&mut merged, overlay);
        toml::Value::Table(merged)
            .try_into()
            .map_err(|e: toml::de::Error| parse_err(e.to_string()))
    }

    /// Parses a TOML text on top of the default configuration.
    pub fn from_toml(text: &str) -> Result<Config> {
        Config::merge_toml(&Config::default(), text, None)
    }

    /// Serialises to TOML.
    pub fn to_toml(&self) -> String {
        toml::to_string_pretty(self).expect("a Config always serialises to TOML")
    }

    /// The configuration with every defaulted field made explicit, as JSON (stored in outputs).
    pub fn resolved_json(&self) -> String {
        let mut resolved = self.clone();
        resolved.mel = self.spec().resolved().mel;
        serde_json::to_string(&resolved).expect("a Config always serialises to JSON")
    }
}

/// Deep-merges `overlay` into `base`. A table that carries a `kind` tag different
/// from the base's replaces it whole (its other keys belong to the new kind).
fn merge_tables(base: &mut toml::Table, overlay: toml::Table) {
    for (key, value) in overlay {
        match (base.get_mut(&key), value) {
            (Some(toml::Value::Table(b)), toml::Value::Table(o))
                if b.get("kind").is_none()
                    || o.get("kind").is_none()
                    || b.get("kind") == o.get("kind") =>
            {
                merge_tables(b, o)
            }
            (_, v) => {
                base.insert(key, v);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_is_leak_4k_and_roundtrips_through_toml() {
        let c = Config::default();
        assert_eq!(c, Preset::Leak4k.config());
        assert_eq!(c.audio.clip_samples(), 40_960);
        let back = Config::from_toml(&c.to_toml()).unwrap();
        assert_eq!(back, c);
    }

    #[test]
    fn speech_preset_roundtrips_with_segmentation_off() {
        let c = Preset::Speech16k.config();
        let text = c.to_toml();
        assert!(text.contains("long = \"off\""), "{text}");
        let back = Config::merge_toml(&Config::default(), &text, None).unwrap();
        assert_eq!(back, c);
        assert_eq!(back.segment.long.get(), None);
    }

    #[test]
    fn partial_file_overrides_only_its_keys() {
        let c = Config::from_toml("[mel]\nn_mels = 64\n[output]\ndtype = \"bf16\"\n").unwrap();
        assert_eq!(c.mel.n_mels, 64);
        assert_eq!(c.output.dtype, Dtype::Bf16);
        assert_eq!(c.mel.n_fft, 512);
        assert_eq!(c.audio.sample_rate, 4096);
    }

    #[test]
    fn switching_log_kind_replaces_the_table() {
        let c = Config::from_toml("[log]\nkind = \"ln\"\n").unwrap();
        assert_eq!(c.log, LogScale::Ln { offset: 1e-6 });
        let c = Config::from_toml("[log]\ntop_db = 80.0\n").unwrap();
        assert_eq!(
            c.log,
            LogScale::Db {
                amin: 1e-10,
                top_db: Some(80.0)
            }
        );
    }

    #[test]
    fn unknown_keys_and_bad_values_are_rejected_with_location() {
        let e = Config::from_toml("[mel]\nn_mel = 64\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("n_mel"), "{e}");
        let e = Config::from_toml("[mel]\nwindow = \"blackman\"\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("blackman"), "{e}");
        let e = Preset::from_name("leak4k").unwrap_err().to_string();
        assert!(e.contains("leak-4k, speech-16k"), "{e}");
    }

    #[test]
    fn absurd_run_settings_and_memory_are_refused_with_field_figure_and_limit() {
        let mut c = Config::default();
        c.run.queue_depth = 1_000_000_000;
        let e = c.check_options().unwrap_err().to_string();
        assert!(e.contains("run.queue_depth") && e.contains("1024"), "{e}");
        let mut c = Config::default();
        c.run.threads = 5000;
        assert!(
            c.check_options()
                .unwrap_err()
                .to_string()
                .contains("run.threads")
        );
    }

    #[test]
    fn default_words_restore_torchaudio_derived_values() {
        let c = Config::from_toml(
            "[mel]\nn_fft = 1024\nwin_length = \"default\"\nhop_length = \"default\"\nf_max = \"default\"\n",
        )
        .unwrap();
        assert_eq!((c.mel.win_length(), c.mel.hop_length()), (1024, 512));
        assert_eq!(c.mel.f_max(c.audio.sample_rate), 2048.0);
        // "default" survives a round trip through TOML.
        assert_eq!(Config::from_toml(&c.to_toml()).unwrap(), c);
        assert!(Config::from_toml("[mel]\nwin_length = \"auto\"\n").is_err());
    }

    #[test]
    fn resolved_json_makes_defaults_explicit() {
        let c = Config::from_toml("[mel]\nn_fft = 1024\n").unwrap();
        let mut c2 = c.clone();
        c2.mel.win_length = None;
        c2.mel.hop_length = None;
        c2.mel.f_max = None;
        let v: serde_json::Value = serde_json::from_str(&c2.resolved_json()).unwrap();
        assert_eq!(v["mel"]["win_length"], 1024);
        assert_eq!(v["mel"]["hop_length"], 512);
        assert_eq!(v["mel"]["f_max"], 2048.0);
    }
}

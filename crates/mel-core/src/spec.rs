//! The spectrogram specification: every setting that determines the output values
//! (audio normalisation, segmentation, the mel transform, the log compression and the
//! stored element type), and nothing about how a build runs. [`MelSpec`] gathers them;
//! a [`MelPlan`](crate::plan::MelPlan) is made from it. The run options and the TOML
//! layering live in [`config`](crate::config).

use serde::{Deserialize, Serialize};

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
    /// `fixed` (every clip padded or trimmed to `clip_seconds`) or `whole` (each file one
    /// clip of its own length, stored as blocks of frames). Default `fixed`, which is not
    /// written out, so a fixed spec serialises as it did before the key existed.
    #[serde(skip_serializing_if = "ClipLength::is_fixed")]
    pub length: ClipLength,
    /// With `length = "whole"`, the longest file kept, in seconds: a longer one is a named
    /// failure. A memory bound (one file is held whole while it is cut into blocks).
    /// Default 600; not written out at the default.
    #[serde(skip_serializing_if = "is_default_max_seconds")]
    pub max_seconds: f64,
    /// Long recordings as windows: each file becomes clips of `seconds` every
    /// `hop_seconds` (the last, partial one placed per `pad`), each a row of its own with
    /// the file's label. `None` (the default, not written out): one clip per file.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub windows: Option<Windows>,
}

/// `audio.windows = { seconds = S, hop_seconds = H }`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Windows {
    /// Window length in seconds (the clip each window is; replaces `clip_seconds`).
    pub seconds: f64,
    /// Seconds between window starts.
    pub hop_seconds: f64,
}

/// The default longest whole clip, seconds.
pub const DEFAULT_MAX_SECONDS: f64 = 600.0;

fn is_default_max_seconds(s: &f64) -> bool {
    *s == DEFAULT_MAX_SECONDS
}

/// How long a clip is: one length for all, or each file's own.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ClipLength {
    /// Padded or trimmed to `clip_seconds` (the default).
    #[default]
    Fixed,
    /// Each file at its own length, no padding.
    Whole,
}

impl ClipLength {
    /// Whether this is the default, `fixed`.
    pub fn is_fixed(&self) -> bool {
        *self == ClipLength::Fixed
    }
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
            length: ClipLength::Fixed,
            max_seconds: DEFAULT_MAX_SECONDS,
            windows: None,
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
    /// How closely the transform follows the float64 definition. Default `exact`, which
    /// is not written out, so an exact spec serialises as it did before the key existed
    /// (journals, shard records and stored configurations of earlier builds still match).
    #[serde(skip_serializing_if = "Precision::is_exact")]
    pub precision: Precision,
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
            precision: Precision::Exact,
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

/// How closely a backend's transform must follow the float64 definition
/// (docs/numerics.md, "Precision modes").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Precision {
    /// Within 0.01 dB of the float64 definition on every bin within 100 dB of its
    /// spectrogram's peak (f64 lanes, or compensated f32 on GPUs). The default.
    #[default]
    Exact,
    /// Plain float32 transforms where a backend has them, bounded by torchaudio's own
    /// float32 CPU path on every golden fixture (no worse than it); a backend without
    /// a faster path runs its exact one.
    Fast,
}

impl Precision {
    /// Whether this is the default, `exact`.
    pub fn is_exact(&self) -> bool {
        *self == Precision::Exact
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
}

crate::named::named!(
    ClipLength,
    "audio.length",
    [
        (
            ClipLength::Fixed,
            "fixed",
            "every clip padded or trimmed to audio.clip_seconds"
        ),
        (
            ClipLength::Whole,
            "whole",
            "each file one clip of its own length, no padding"
        ),
    ]
);

crate::named::named!(
    Precision,
    "precision",
    [
        (
            Precision::Exact,
            "exact",
            "within 0.01 dB of the float64 definition (f64 lanes; compensated f32 on GPUs)"
        ),
        (
            Precision::Fast,
            "fast",
            "plain float32 where the backend has it, bounded by torchaudio's float32 path"
        ),
    ]
);

crate::named::named!(
    Dtype,
    "dtype",
    [
        (Dtype::F32, "f32", "32-bit float"),
        (Dtype::F16, "f16", "16-bit float (IEEE half)"),
        (
            Dtype::Bf16,
            "bf16",
            "bfloat16 (stored as uint16 bit patterns)"
        ),
    ]
);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exact_is_not_written_and_a_spec_without_the_key_reads_as_exact() {
        let exact = serde_json::to_value(MelConfig::default()).unwrap();
        assert!(exact.get("precision").is_none(), "{exact}");
        let back: MelConfig = serde_json::from_value(exact).unwrap();
        assert_eq!(back.precision, Precision::Exact);
        let fast = MelConfig {
            precision: Precision::Fast,
            ..MelConfig::default()
        };
        let v = serde_json::to_value(&fast).unwrap();
        assert_eq!(v["precision"], "fast");
        assert_eq!(serde_json::from_value::<MelConfig>(v).unwrap(), fast);
        let bad = serde_json::json!({ "precision": "fastest" });
        assert!(serde_json::from_value::<MelConfig>(bad).is_err());
    }
}

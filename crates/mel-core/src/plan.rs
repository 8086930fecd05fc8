//! The resolved, validated plan a backend executes: segmentation offsets,
//! window, filterbank, frame counts and output shape, derived once from a [`MelSpec`].

use crate::config::Config;
use crate::dsp::{SparseFilterbank, frame_count, melscale_fbanks, window};
use crate::error::{Error, Result};
use crate::spec::{AudioConfig, Dtype, LogScale, MelConfig, MelScale, MelSpec, PadMode, Stage};

mod range;
pub mod whole;

pub use whole::{BLOCK_FRAMES, Cutting, WholeClips, Windowing};

/// Longest clip melctl accepts, in samples (2^28, about 4.6 hours at 16 kHz):
/// a bound that keeps every allocation finite.
pub const MAX_CLIP_SAMPLES: usize = 1 << 28;

/// Highest `audio.sample_rate`, Hz.
pub const MAX_SAMPLE_RATE: u32 = 768_000;

/// Largest `mel.n_fft` (the window, its spectrum and the filterbank grow with it).
pub const MAX_N_FFT: usize = 1 << 14;

/// Most filterbank weights, `n_freqs × n_mels` (2^24: 128 MiB of f64).
pub const MAX_FILTERBANK: usize = 1 << 24;

/// Most segments (spectrograms) per clip.
pub const MAX_SEGMENTS: usize = 1 << 20;

/// Most output values per clip (2^28: 1 GiB of f32).
pub const MAX_VALUES_PER_CLIP: usize = 1 << 28;

/// Everything a backend needs, derived and validated once. Read-only: every value is
/// derived from the [`MelSpec`] by [`MelPlan::new`], so the fields cannot disagree.
#[derive(Debug, Clone)]
pub struct MelPlan {
    /// The spec this plan was made from.
    spec: MelSpec,
    /// Target sample rate in Hz.
    sample_rate: u32,
    /// Samples per clip after pad/trim.
    clip_samples: usize,
    /// Number of long windows, if that stage is on.
    long_count: Option<usize>,
    /// Number of short windows per long window, if that stage is on.
    short_count: Option<usize>,
    /// Samples in each segment (the signal given to the STFT).
    segment_len: usize,
    /// Start offsets (in the clip) of the distinct segments, ascending.
    distinct_offsets: Vec<usize>,
    /// For each output segment in `[long][short]` order, its index in `distinct_offsets`.
    segment_map: Vec<u32>,
    /// FFT size.
    n_fft: usize,
    /// Frame hop.
    hop_length: usize,
    /// Frequency bins, `n_fft / 2 + 1`.
    n_freqs: usize,
    /// STFT frames per segment.
    n_frames: usize,
    /// Mel bands.
    n_mels: usize,
    /// Whether frames are centred (padding `n_fft / 2` each side).
    center: bool,
    /// How centre padding is filled.
    pad_mode: PadMode,
    /// 1 (magnitude) or 2 (power).
    power: u8,
    /// The analysis window zero-padded to `n_fft`, in f64.
    window: Vec<f64>,
    /// The dense filterbank `[n_freqs][n_mels]` in f64.
    filterbank: Vec<f64>,
    /// The filterbank's non-zero spans in f32.
    sparse_filterbank: SparseFilterbank,
    /// Log compression.
    log: LogScale,
    /// Output element type.
    dtype: Dtype,
    /// The largest mel value (before the log) input with samples in [-1, 1] can give.
    full_scale_peak: f64,
    /// The largest sample magnitude the plan's f32 arithmetic takes without overflow.
    sample_limit: f32,
    /// With `audio.length = "whole"`: how a clip becomes blocks (the plan is one block's).
    whole: Option<WholeClips>,
    /// With `audio.windows`: how a file becomes windows (the plan is one window's).
    windows: Option<Windowing>,
}

impl MelPlan {
    /// Validates the DSP part of `config` and its options ([`Config::check_options`]),
    /// and derives the plan.
    pub fn from_config(config: &Config) -> Result<MelPlan> {
        config.check_options()?;
        let plan = MelPlan::new(&config.spec())?;
        let loader = config.run.loader;
        if plan.cutting().is_some()
            && matches!(
                loader,
                crate::config::LoaderKind::Preload | crate::config::LoaderKind::Memmap
            )
        {
            return Err(Error::config(
                "run.loader",
                format!(
                    "= \"{}\" holds one fixed-length clip per file; whole clips (audio.length = \"whole\") and windows (audio.windows) are read by their own loader: use \"auto\" or \"stream\"",
                    loader.name()
                ),
            ));
        }
        if config.output.sink == crate::config::SinkKind::Hdf5 {
            plan.check_chunk_clips(config.hdf5.chunk_clips)?;
        }
        Ok(plan)
    }

    /// Refuses HDF5 chunks of `chunk_clips` clips larger than
    /// [`MAX_CHUNK_BYTES`](crate::format::MAX_CHUNK_BYTES), which every reader refuses,
    /// naming the most clips a chunk may hold.
    pub fn check_chunk_clips(&self, chunk_clips: usize) -> Result<()> {
        use crate::format::MAX_CHUNK_BYTES;
        let per = self.bytes_per_clip().max(1);
        if chunk_clips.saturating_mul(per) > MAX_CHUNK_BYTES {
            return Err(Error::config(
                "hdf5.chunk_clips",
                format!(
                    "= {chunk_clips} gives chunks of {} MiB ({per} bytes a clip); readers take chunks of at most {} MiB, so at most {} clips",
                    (chunk_clips as u128 * per as u128) >> 20,
                    MAX_CHUNK_BYTES >> 20,
                    MAX_CHUNK_BYTES / per
                ),
            ));
        }
        Ok(())
    }

    /// Validates `spec` and derives the plan; every rejection names the field and the limit.
    /// The phases run in this order, so a spec wrong in several ways names its first fault.
    pub fn new(spec: &MelSpec) -> Result<MelPlan> {
        if let Some(windows) = Windowing::of(spec, MAX_CLIP_SAMPLES)? {
            // Windows: the plan computes one window; the spec stays the user's.
            let mut plan = MelPlan::fixed(&windows.window_spec(spec))?;
            plan.spec = spec.resolved();
            plan.windows = Some(windows);
            return Ok(plan);
        }
        let Some(whole) = WholeClips::of(spec, MAX_CLIP_SAMPLES)? else {
            return MelPlan::fixed(spec);
        };
        // Whole clips: the plan computes one block; the spec stays the user's.
        let mut plan = MelPlan::fixed(&whole.block_spec(spec))?;
        plan.spec = spec.resolved();
        plan.whole = Some(whole);
        Ok(plan)
    }

    /// With `audio.length = "whole"`, how a clip of any length becomes rows of
    /// [`BLOCK_FRAMES`] frames (the plan's clip is one block); `None` for fixed clips.
    pub fn whole(&self) -> Option<&WholeClips> {
        self.whole.as_ref()
    }

    /// With `audio.windows`, how a file becomes windows (the plan's clip is one window).
    pub fn windows(&self) -> Option<&Windowing> {
        self.windows.as_ref()
    }

    /// How a file read whole becomes rows: blocks of a whole clip or windows; `None`
    /// when each file is one fixed-length clip.
    pub fn cutting(&self) -> Option<Cutting> {
        match (&self.whole, &self.windows) {
            (Some(w), _) => Some(Cutting::Blocks(*w)),
            (_, Some(w)) => Some(Cutting::Windows(*w)),
            _ => None,
        }
    }

    /// The plan of fixed-length clips of `spec`.
    fn fixed(spec: &MelSpec) -> Result<MelPlan> {
        let a = &spec.audio;
        let m = &spec.mel;
        let clip_samples = check_clip(a)?;
        let segmentation = Segmentation::new(spec, clip_samples)?;
        let stft = Stft::new(m, &segmentation)?;
        let filters = Filters::new(a, m, stft.n_fft)?;
        check_log_positive(&spec.log)?;
        range::check_log(&spec.log)?;
        let window = window(m.window, stft.win_length, stft.n_fft);
        let range = range::derive(&range::Shape {
            window: &window,
            win_length: stft.win_length,
            filterbank: &filters.dense,
            n_mels: filters.n_mels,
            power: stft.power,
            log: spec.log,
            dtype: spec.dtype,
        })?;
        Ok(MelPlan {
            spec: spec.resolved(),
            sample_rate: a.sample_rate,
            clip_samples,
            long_count: segmentation.long_count,
            short_count: segmentation.short_count,
            segment_len: segmentation.segment.len,
            distinct_offsets: segmentation.distinct_offsets,
            segment_map: segmentation.segment_map,
            n_fft: stft.n_fft,
            hop_length: stft.hop_length,
            n_freqs: filters.n_freqs,
            n_frames: stft.n_frames,
            n_mels: filters.n_mels,
            center: m.center,
            pad_mode: m.pad_mode,
            power: stft.power,
            window,
            filterbank: filters.dense,
            sparse_filterbank: filters.sparse,
            log: spec.log,
            dtype: spec.dtype,
            full_scale_peak: range.full_scale_peak,
            sample_limit: range.sample_limit,
            whole: None,
            windows: None,
        })
    }

    /// The spec the plan was made from, with defaulted fields made explicit.
    pub fn spec(&self) -> &MelSpec {
        &self.spec
    }

    /// Target sample rate in Hz.
    pub fn sample_rate(&self) -> u32 {
        self.sample_rate
    }

    /// Samples per clip after pad/trim.
    pub fn clip_samples(&self) -> usize {
        self.clip_samples
    }

    /// Number of long windows, if that stage is on.
    pub fn long_count(&self) -> Option<usize> {
        self.long_count
    }

    /// Number of short windows per long window, if that stage is on.
    pub fn short_count(&self) -> Option<usize> {
        self.short_count
    }

    /// Samples in each segment (the signal given to the STFT).
    pub fn segment_len(&self) -> usize {
        self.segment_len
    }

    /// Start offsets (in the clip) of the distinct segments, ascending.
    pub fn distinct_offsets(&self) -> &[usize] {
        &self.distinct_offsets
    }

    /// For each output segment in `[long][short]` order, its index in `distinct_offsets`.
    pub fn segment_map(&self) -> &[u32] {
        &self.segment_map
    }

    /// FFT size.
    pub fn n_fft(&self) -> usize {
        self.n_fft
    }

    /// Frame hop.
    pub fn hop_length(&self) -> usize {
        self.hop_length
    }

    /// Frequency bins, `n_fft / 2 + 1`.
    pub fn n_freqs(&self) -> usize {
        self.n_freqs
    }

    /// STFT frames per segment.
    pub fn n_frames(&self) -> usize {
        self.n_frames
    }

    /// Mel bands.
    pub fn n_mels(&self) -> usize {
        self.n_mels
    }

    /// Whether frames are centred (padding `n_fft / 2` each side).
    pub fn center(&self) -> bool {
        self.center
    }

    /// How centre padding is filled.
    pub fn pad_mode(&self) -> PadMode {
        self.pad_mode
    }

    /// 1 (magnitude) or 2 (power).
    pub fn power(&self) -> u8 {
        self.power
    }

    /// The analysis window zero-padded to `n_fft`, in f64.
    pub fn window(&self) -> &[f64] {
        &self.window
    }

    /// The dense filterbank `[n_freqs][n_mels]` in f64.
    pub fn filterbank(&self) -> &[f64] {
        &self.filterbank
    }

    /// The filterbank's non-zero spans in f32.
    pub fn sparse_filterbank(&self) -> &SparseFilterbank {
        &self.sparse_filterbank
    }

    /// Log compression.
    pub fn log(&self) -> LogScale {
        self.log
    }

    /// Output element type.
    pub fn dtype(&self) -> Dtype {
        self.dtype
    }

    /// The plan for the same spec with another output dtype, validated again (the
    /// dtype must hold the values full-scale input gives).
    pub fn with_dtype(&self, dtype: Dtype) -> Result<MelPlan> {
        let mut spec = self.spec.clone();
        spec.dtype = dtype;
        MelPlan::new(&spec)
    }

    /// The largest mel value (before the log) that input with samples in [-1, 1] can
    /// give: a bound from the window and the filter weights. The output dtype holds the
    /// stored values of every such input.
    pub fn full_scale_peak(&self) -> f64 {
        self.full_scale_peak
    }

    /// The largest sample magnitude the plan's f32 arithmetic takes without overflowing
    /// (about 1.5e16 for leak-4k; full scale is 1). Larger samples, or ones that are not
    /// finite, make a clip a named failure in the pipeline.
    pub fn sample_limit(&self) -> f32 {
        self.sample_limit
    }

    /// Output dimensions of one clip: `[long?, short?, n_mels, frames]`.
    pub fn clip_shape(&self) -> Vec<usize> {
        self.long_count
            .into_iter()
            .chain(self.short_count)
            .chain([self.n_mels, self.n_frames])
            .collect()
    }

    /// Names of the output's axes, row first: `clip, long?, short?, mel, frame` (`block, mel, frame` for whole clips).
    pub fn dim_names(&self) -> Vec<&'static str> {
        [if self.whole.is_some() {
            "block"
        } else {
            "clip"
        }]
        .into_iter()
        .chain(self.long_count.map(|_| "long"))
        .chain(self.short_count.map(|_| "short"))
        .chain(["mel", "frame"])
        .collect()
    }

    /// Segments (spectrograms) per clip in the output.
    pub fn segments_per_clip(&self) -> usize {
        self.segment_map.len()
    }

    /// Values in one segment's spectrogram, `n_mels × n_frames`.
    pub fn values_per_segment(&self) -> usize {
        self.n_mels * self.n_frames
    }

    /// Values per clip in the output.
    pub fn values_per_clip(&self) -> usize {
        self.segments_per_clip() * self.values_per_segment()
    }

    /// Output bytes per clip in the configured dtype.
    pub fn bytes_per_clip(&self) -> usize {
        self.values_per_clip() * self.dtype.size()
    }

    /// The dB multiplier matching torchaudio's `AmplitudeToDB` stype: 10 for power, 20 for magnitude.
    pub fn db_multiplier(&self) -> f64 {
        if self.power == 2 { 10.0 } else { 20.0 }
    }
}

/// Checks the sample rate and clip length; returns the samples per clip.
fn check_clip(a: &AudioConfig) -> Result<usize> {
    if a.sample_rate == 0 || a.sample_rate > MAX_SAMPLE_RATE {
        return Err(Error::config(
            "audio.sample_rate",
            format!("= {} Hz must be 1 to {MAX_SAMPLE_RATE} Hz", a.sample_rate),
        ));
    }
    if !(a.clip_seconds.is_finite() && a.clip_seconds > 0.0) {
        return Err(Error::config(
            "audio.clip_seconds",
            format!("= {} must be a positive number of seconds", a.clip_seconds),
        ));
    }
    let clip_samples = a.clip_samples();
    if clip_samples == 0 || clip_samples > MAX_CLIP_SAMPLES {
        return Err(Error::config(
            "audio.clip_seconds",
            format!(
                "= {} s gives {clip_samples} samples at {} Hz; the limit is 1..={MAX_CLIP_SAMPLES}",
                a.clip_seconds, a.sample_rate
            ),
        ));
    }
    Ok(clip_samples)
}

/// A stretch of the clip each segmentation stage cuts into windows: its length, and
/// how messages name it.
struct Region {
    len: usize,
    name: String,
}

/// The clip cut by the long and short stages into segments, the signals the STFT sees.
struct Segmentation {
    /// Number of long windows, if that stage is on.
    long_count: Option<usize>,
    /// Number of short windows per long window, if that stage is on.
    short_count: Option<usize>,
    /// One segment: its length and name.
    segment: Region,
    /// Segments per clip.
    segments: usize,
    /// Start offsets (in the clip) of the distinct segments, ascending.
    distinct_offsets: Vec<usize>,
    /// For each segment in `[long][short]` order, its index in `distinct_offsets`.
    segment_map: Vec<u32>,
}

impl Segmentation {
    /// Checks the stages against the clip of `clip_samples` samples and lays out the segments.
    fn new(spec: &MelSpec, clip_samples: usize) -> Result<Segmentation> {
        let mut region = Region {
            len: clip_samples,
            name: format!(
                "the clip ({clip_samples} samples = audio.sample_rate × audio.clip_seconds)"
            ),
        };
        let long = spec.segment.long.get();
        let long_count = narrow(&mut region, "segment.long", long)?;
        let short = spec.segment.short.get();
        let short_count = narrow(&mut region, "segment.short", short)?;
        let segments = long_count
            .unwrap_or(1)
            .saturating_mul(short_count.unwrap_or(1));
        if segments > MAX_SEGMENTS {
            return Err(Error::config(
                "segment",
                format!(
                    "the windows and hops give {segments} segments per clip; the limit is {MAX_SEGMENTS} (use larger hops)"
                ),
            ));
        }
        let (distinct_offsets, segment_map) = segment_offsets(
            segments,
            (long_count.unwrap_or(1), long.map_or(0, |x| x.hop)),
            (short_count.unwrap_or(1), short.map_or(0, |x| x.hop)),
        );
        Ok(Segmentation {
            long_count,
            short_count,
            segment: region,
            segments,
            distinct_offsets,
            segment_map,
        })
    }
}

/// Checks one segmentation stage (`None` when off) against `region` and narrows the
/// region to the stage's window; returns the stage's window count.
fn narrow(region: &mut Region, field: &str, stage: Option<Stage>) -> Result<Option<usize>> {
    let Some(s) = stage else {
        return Ok(None);
    };
    check_stage(field, s.window, s.hop, region.len, &region.name)?;
    let n = 1 + (region.len - s.window) / s.hop;
    *region = Region {
        len: s.window,
        name: format!("{field}.window ({} samples)", s.window),
    };
    Ok(Some(n))
}

/// The start offsets of the `segments` segments, from the long and short stages'
/// (count, hop), as the distinct offsets (ascending) and each segment's index among them.
fn segment_offsets(
    segments: usize,
    (long_count, long_hop): (usize, usize),
    (short_count, short_hop): (usize, usize),
) -> (Vec<usize>, Vec<u32>) {
    let mut offsets = Vec::with_capacity(segments);
    for l in 0..long_count {
        for s in 0..short_count {
            offsets.push(l * long_hop + s * short_hop);
        }
    }
    let mut distinct_offsets = offsets.clone();
    distinct_offsets.sort_unstable();
    distinct_offsets.dedup();
    let segment_map = offsets
        .iter()
        .map(|o| {
            distinct_offsets
                .binary_search(o)
                .expect("offset is present") as u32
        })
        .collect();
    (distinct_offsets, segment_map)
}

/// The STFT of each segment: its sizes, checked against the segment, and its frames.
struct Stft {
    n_fft: usize,
    win_length: usize,
    hop_length: usize,
    /// STFT frames per segment.
    n_frames: usize,
    /// 1 (magnitude) or 2 (power).
    power: u8,
}

impl Stft {
    /// Checks the FFT, window and hop sizes, the padding, the values per clip and the power.
    fn new(m: &MelConfig, segmentation: &Segmentation) -> Result<Stft> {
        let n_fft = m.n_fft;
        if !(2..=MAX_N_FFT).contains(&n_fft) {
            return Err(Error::config(
                "mel.n_fft",
                format!("= {n_fft} must be 2 to {MAX_N_FFT}"),
            ));
        }
        let win_length = m.win_length();
        if win_length == 0 || win_length > n_fft {
            return Err(Error::config(
                "mel.win_length",
                format!("= {win_length} must be between 1 and mel.n_fft ({n_fft})"),
            ));
        }
        let hop_length = m.hop_length();
        if hop_length == 0 {
            return Err(Error::config("mel.hop_length", "must be at least 1 sample"));
        }
        check_padding(m, &segmentation.segment)?;
        let n_frames = frame_count(segmentation.segment.len, n_fft, hop_length, m.center);
        let segments = segmentation.segments;
        let values = (segments as u128) * (m.n_mels as u128) * (n_frames as u128);
        if values > MAX_VALUES_PER_CLIP as u128 {
            return Err(Error::config(
                "mel.n_mels",
                format!(
                    "{segments} segments × {} mels × {n_frames} frames = {values} values per clip; the limit is {MAX_VALUES_PER_CLIP} (fewer mels, larger hops or shorter clips)",
                    m.n_mels
                ),
            ));
        }
        Ok(Stft {
            n_fft,
            win_length,
            hop_length,
            n_frames,
            power: power_exponent(m.power)?,
        })
    }
}

/// Refuses an `n_fft` the segment cannot give frames for: reflect padding as long as the
/// segment, or (uncentred) a frame longer than it.
fn check_padding(m: &MelConfig, segment: &Region) -> Result<()> {
    let n_fft = m.n_fft;
    let region_name = &segment.name;
    if m.center {
        let pad = n_fft / 2;
        if m.pad_mode == PadMode::Reflect && pad >= segment.len {
            return Err(Error::config(
                "mel.n_fft",
                format!(
                    "= {n_fft} needs reflect padding of {pad} samples on each side, which must be shorter than \
                     each segment, {region_name}; use a smaller n_fft, a longer window or pad_mode = \"constant\""
                ),
            ));
        }
    } else if n_fft > segment.len {
        return Err(Error::config(
            "mel.n_fft",
            format!(
                "= {n_fft} is longer than each segment, {region_name}, and mel.center is false"
            ),
        ));
    }
    Ok(())
}

/// `mel.power` as the exponent the kernels take: 2 (power) or 1 (magnitude).
fn power_exponent(power: f64) -> Result<u8> {
    if power == 2.0 {
        Ok(2)
    } else if power == 1.0 {
        Ok(1)
    } else {
        Err(Error::config(
            "mel.power",
            format!("= {power} is not supported; use 2 (power) or 1 (magnitude)"),
        ))
    }
}

/// The mel filterbank, dense in f64 and sparse in f32, every filter covering an FFT bin.
struct Filters {
    /// Frequency bins, `n_fft / 2 + 1`.
    n_freqs: usize,
    n_mels: usize,
    /// `[n_freqs][n_mels]`.
    dense: Vec<f64>,
    /// The non-zero spans.
    sparse: SparseFilterbank,
}

impl Filters {
    /// Checks the band edges and the number of mels for an `n_fft` FFT, and builds the filters.
    fn new(a: &AudioConfig, m: &MelConfig, n_fft: usize) -> Result<Filters> {
        let f_max = check_band(a, m)?;
        let n_mels = m.n_mels;
        let n_freqs = n_fft / 2 + 1;
        if n_freqs.saturating_mul(n_mels) > MAX_FILTERBANK {
            return Err(Error::config(
                "mel.n_mels",
                format!(
                    "= {n_mels} with {n_freqs} FFT bins makes a filterbank of {} weights; the limit is {MAX_FILTERBANK}",
                    n_freqs * n_mels
                ),
            ));
        }
        if n_mels == 0 || n_mels > n_freqs {
            return Err(Error::config(
                "mel.n_mels",
                format!(
                    "= {n_mels} must be 1 to the number of FFT bins, {n_freqs} (mel.n_fft / 2 + 1)"
                ),
            ));
        }
        let dense = melscale_fbanks(
            n_freqs,
            m.f_min,
            f_max,
            n_mels,
            a.sample_rate,
            m.norm,
            m.mel_scale,
        );
        let sparse = SparseFilterbank::from_dense(&dense, n_freqs, n_mels);
        if let Some(empty) = range::empty_filter(&sparse) {
            let (lo, hi) = filter_edges(m.f_min, f_max, n_mels, m.mel_scale, empty);
            return Err(Error::config(
                "mel.n_mels",
                format!(
                    "= {n_mels} is too many: filter {empty} ({lo:.1}–{hi:.1} Hz) covers no FFT bin (bins are {:.2} Hz \
                     apart); use fewer mels, a larger mel.n_fft or a wider mel.f_min..mel.f_max",
                    (a.sample_rate / 2) as f64 / (n_freqs - 1) as f64
                ),
            ));
        }
        Ok(Filters {
            n_freqs,
            n_mels,
            dense,
            sparse,
        })
    }
}

/// Checks `mel.f_min` and `mel.f_max` against each other and the Nyquist frequency;
/// returns `f_max` with its default resolved.
fn check_band(a: &AudioConfig, m: &MelConfig) -> Result<f64> {
    let nyquist = a.sample_rate as f64 / 2.0;
    let f_max = m.f_max(a.sample_rate);
    if !(m.f_min.is_finite() && m.f_min >= 0.0) {
        return Err(Error::config(
            "mel.f_min",
            format!("= {} must be ≥ 0 Hz", m.f_min),
        ));
    }
    if !(f_max.is_finite() && f_max <= nyquist) {
        return Err(Error::config(
            "mel.f_max",
            format!(
                "= {f_max} Hz is above the Nyquist frequency {nyquist} Hz (audio.sample_rate / 2)"
            ),
        ));
    }
    if f_max <= m.f_min {
        return Err(Error::config(
            "mel.f_max",
            format!("= {f_max} Hz must be above mel.f_min ({} Hz)", m.f_min),
        ));
    }
    Ok(f_max)
}

/// Refuses log settings that are not positive (or, for `top_db`, non-negative) finite
/// numbers; [`range::check_log`] then checks them in f32.
fn check_log_positive(log: &LogScale) -> Result<()> {
    match *log {
        LogScale::Db { amin, top_db } => {
            if !(amin.is_finite() && amin > 0.0) {
                return Err(Error::config(
                    "log.amin",
                    format!("= {amin} must be a positive number"),
                ));
            }
            if let Some(t) = top_db
                && !(t.is_finite() && t >= 0.0)
            {
                return Err(Error::config("log.top_db", format!("= {t} must be ≥ 0 dB")));
            }
        }
        LogScale::Ln { offset } => {
            if !(offset.is_finite() && offset > 0.0) {
                return Err(Error::config(
                    "log.offset",
                    format!("= {offset} must be a positive number"),
                ));
            }
        }
        LogScale::None => {}
    }
    Ok(())
}

fn check_stage(
    field: &str,
    window: usize,
    hop: usize,
    region_len: usize,
    region_name: &str,
) -> Result<()> {
    if window == 0 {
        return Err(Error::config(
            format!("{field}.window"),
            "must be at least 1 sample",
        ));
    }
    if hop == 0 {
        return Err(Error::config(
            format!("{field}.hop"),
            "must be at least 1 sample",
        ));
    }
    if window > region_len {
        return Err(Error::config(
            format!("{field}.window"),
            format!("= {window} samples is longer than {region_name}"),
        ));
    }
    Ok(())
}

fn filter_edges(f_min: f64, f_max: f64, n_mels: usize, scale: MelScale, m: usize) -> (f64, f64) {
    use crate::dsp::{hz_to_mel, mel_to_hz};
    let lo = hz_to_mel(f_min, scale);
    let step = (hz_to_mel(f_max, scale) - lo) / (n_mels + 1) as f64;
    (
        mel_to_hz(lo + step * m as f64, scale),
        mel_to_hz(lo + step * (m + 2) as f64, scale),
    )
}

impl MelPlan {
    /// Checks the arguments of [`MelBackend::compute`](crate::MelBackend::compute): whole
    /// clips, and an output of the plan's dtype holding exactly their values. Returns the clip count.
    pub fn check_batch(&self, samples: usize, out: &crate::OutputSlice<'_>) -> Result<usize> {
        let n = self.clip_samples;
        if !samples.is_multiple_of(n) {
            return Err(Error::Shape(format!(
                "{samples} samples is not a whole number of {n}-sample clips"
            )));
        }
        let clips = samples / n;
        let expect = clips * self.values_per_clip();
        if out.len() != expect {
            return Err(Error::Shape(format!(
                "output holds {} values, {clips} clips need {expect}",
                out.len()
            )));
        }
        if out.dtype() != self.dtype {
            return Err(Error::Shape(format!(
                "output buffer is {}, the plan says {}",
                out.dtype().name(),
                self.dtype.name()
            )));
        }
        Ok(clips)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Preset;
    use crate::spec::StageSetting;

    fn err(cfg: &Config) -> String {
        MelPlan::from_config(cfg).unwrap_err().to_string()
    }

    #[test]
    fn leak_4k_plan_matches_workload() {
        let p = MelPlan::from_config(&Preset::Leak4k.config()).unwrap();
        assert_eq!(p.clip_shape(), vec![79, 3, 32, 5]);
        assert_eq!(p.values_per_clip(), 37_920);
        assert_eq!(p.bytes_per_clip(), 75_840);
        // 237 short windows, 159 distinct (DESIGN.md).
        assert_eq!(p.segments_per_clip(), 237);
        assert_eq!(p.distinct_offsets.len(), 159);
        // short window 2 of long window k is short window 0 of long window k+1
        assert_eq!(p.segment_map[2], p.segment_map[3]);
    }

    /// A large `hdf5.chunk_clips` wrote one 270 MB chunk, which melctl's own readers
    /// refuse: the configuration is refused instead, naming the most clips a chunk holds.
    #[test]
    fn chunks_larger_than_readers_take_are_refused_when_the_configuration_is_checked() {
        let mut c = Preset::Leak4k.config();
        let most = crate::format::MAX_CHUNK_BYTES / 75_840;
        c.hdf5.chunk_clips = most;
        MelPlan::from_config(&c).unwrap();
        c.hdf5.chunk_clips = most + 1;
        let e = MelPlan::from_config(&c).unwrap_err().to_string();
        assert!(
            e.contains("hdf5.chunk_clips") && e.contains(&format!("at most {most} clips")),
            "{e}"
        );
        c.hdf5.chunk_clips = usize::MAX;
        assert!(MelPlan::from_config(&c).is_err());
        // npy writes no chunks.
        c.output.sink = crate::config::SinkKind::Npy;
        MelPlan::from_config(&c).unwrap();
    }

    #[test]
    fn speech_plan_is_one_spectrogram_per_clip() {
        let p = MelPlan::from_config(&Preset::Speech16k.config()).unwrap();
        assert_eq!(p.clip_shape(), vec![80, 101]);
        assert_eq!(p.distinct_offsets, vec![0]);
    }

    #[test]
    fn rejections_name_field_and_limit() {
        let mut c = Config::default();
        c.mel.f_max = Some(3000.0);
        let e = err(&c);
        assert!(e.contains("mel.f_max") && e.contains("2048"), "{e}");

        let mut c = Config::default();
        c.mel.win_length = Some(1024);
        let e = err(&c);
        assert!(e.contains("mel.win_length") && e.contains("512"), "{e}");

        let mut c = Config::default();
        c.segment.long = StageSetting::On(crate::spec::Stage {
            window: 50_000,
            hop: 512,
        });
        let e = err(&c);
        assert!(
            e.contains("segment.long.window") && e.contains("40960"),
            "{e}"
        );

        let mut c = Config::default();
        c.mel.n_mels = 256;
        let e = err(&c);
        assert!(
            e.contains("mel.n_mels") && e.contains("covers no FFT bin"),
            "{e}"
        );

        let mut c = Config::default();
        c.mel.n_fft = 1024;
        c.mel.win_length = None;
        let e = err(&c);
        assert!(e.contains("mel.n_fft") && e.contains("reflect"), "{e}");

        let mut c = Config::default();
        c.mel.power = 1.5;
        assert!(err(&c).contains("mel.power"));

        let mut c = Config::default();
        c.audio.clip_seconds = 0.0;
        assert!(err(&c).contains("audio.clip_seconds"));

        let c = Config {
            log: LogScale::Db {
                amin: 0.0,
                top_db: None,
            },
            ..Config::default()
        };
        assert!(err(&c).contains("log.amin"));
    }

    #[test]
    fn plans_that_would_allocate_gigabytes_are_refused_before_allocating() {
        let mut c = Config::default();
        c.mel.n_mels = 100_000_000;
        assert!(err(&c).contains("mel.n_mels"), "{}", err(&c));
        let mut c = Config::default();
        c.segment.long = StageSetting::On(crate::spec::Stage {
            window: 1024,
            hop: 1,
        });
        c.segment.short = StageSetting::On(crate::spec::Stage {
            window: 512,
            hop: 1,
        });
        let e = err(&c);
        assert!(e.contains("segment") && e.contains("limit"), "{e}");
        // 65536 s at 4096 Hz is 2^28 samples, the longest clip: its 1.6 M segments are not.
        let mut c = Config::default();
        c.audio.clip_seconds = 65536.0;
        let e = err(&c);
        assert!(
            e.contains("segments per clip") && e.contains("limit"),
            "{e}"
        );
        c.audio.clip_seconds = 65537.0;
        assert!(err(&c).contains("audio.clip_seconds"));
        let mut c = Config::default();
        c.mel.n_fft = 1 << 24;
        c.mel.win_length = None;
        c.mel.pad_mode = PadMode::Constant;
        assert!(err(&c).contains("mel.n_fft"));
        let mut c = Config::default();
        c.audio.sample_rate = u32::MAX;
        assert!(err(&c).contains("audio.sample_rate"));
    }

    #[test]
    fn log_settings_are_checked_in_f32_the_type_the_kernels_use() {
        // Positive in f64, but 0 or subnormal in f32: silence would give -inf.
        for (amin, word) in [(1e-50, "is 0 in f32"), (1e-40, "is subnormal in f32")] {
            let c = Config {
                log: LogScale::Db { amin, top_db: None },
                ..Config::default()
            };
            let e = err(&c);
            assert!(
                e.contains("log.amin") && e.contains(word) && e.contains("1.1754944e-38"),
                "{e}"
            );
        }
        let c = Config {
            log: LogScale::Db {
                amin: 1e39,
                top_db: None,
            },
            ..Config::default()
        };
        assert!(err(&c).contains("log.amin") && err(&c).contains("overflows f32"));
        let c = Config {
            log: LogScale::Db {
                amin: 1e-10,
                top_db: Some(1e39),
            },
            ..Config::default()
        };
        assert!(err(&c).contains("log.top_db"), "{}", err(&c));
        let c = Config {
            log: LogScale::Ln { offset: 1e-50 },
            ..Config::default()
        };
        assert!(err(&c).contains("log.offset") && err(&c).contains("is 0 in f32"));
        // The smallest normal f32 is allowed.
        let c = Config {
            log: LogScale::Db {
                amin: f32::MIN_POSITIVE as f64,
                top_db: None,
            },
            ..Config::default()
        };
        MelPlan::from_config(&c).unwrap();
    }

    #[test]
    fn a_dtype_that_cannot_hold_full_scale_values_is_refused_with_the_figures() {
        // Mel energies without a log: a full-scale n_fft 1024 sine alone reaches
        // (1024 / 4)² = 65536 in one bin, over f16's 65504.
        let mut c = Config {
            log: LogScale::None,
            ..Config::default()
        };
        c.mel.n_fft = 1024;
        c.mel.win_length = None;
        c.mel.pad_mode = PadMode::Constant;
        let e = err(&c);
        assert!(
            e.contains("output.dtype = f16")
                && e.contains("65504")
                && e.contains("n_fft 1024")
                && e.contains("window sum 512")
                && e.contains("power 2"),
            "{e}"
        );
        for dtype in [Dtype::F32, Dtype::Bf16] {
            c.output.dtype = dtype;
            let p = MelPlan::from_config(&c).unwrap();
            assert!(p.full_scale_peak() >= 65536.0, "{}", p.full_scale_peak());
            // The same refusal through with_dtype.
            assert!(p.with_dtype(Dtype::F16).is_err());
        }
        // Decibels always fit f16: the floor is -379 dB at the smallest amin.
        let c = Config {
            log: LogScale::Db {
                amin: f32::MIN_POSITIVE as f64,
                top_db: None,
            },
            ..Config::default()
        };
        MelPlan::from_config(&c).unwrap();
    }

    #[test]
    fn the_full_scale_peak_bounds_every_full_scale_signal() {
        // DC, sines at and between bins, a square wave, a ±1 random sequence: the f64
        // reference's largest mel value stays under the bound, and not far under (the
        // bound is what the dtype check refuses on).
        for (preset, power) in [(Preset::Leak4k, 2.0), (Preset::Speech16k, 1.0)] {
            let mut c = preset.config();
            c.mel.power = power;
            c.log = LogScale::None;
            c.output.dtype = Dtype::F32;
            let p = MelPlan::from_config(&c).unwrap();
            let n = p.segment_len();
            let rate = p.sample_rate() as f64;
            let tone = |f: f64| -> Vec<f64> {
                (0..n)
                    .map(|i| (2.0 * std::f64::consts::PI * f * i as f64 / rate).sin())
                    .collect()
            };
            let mut state = 12345u64;
            let signals: Vec<Vec<f64>> = vec![
                vec![1.0; n],
                tone(0.37 * rate),
                tone(0.45 * rate),
                tone(rate / 8.0),
                (0..n)
                    .map(|i| if (i / 3) % 2 == 0 { 1.0 } else { -1.0 })
                    .collect(),
                (0..n)
                    .map(|_| {
                        state = state.wrapping_mul(6364136223846793005).wrapping_add(1);
                        if state >> 63 == 0 { 1.0 } else { -1.0 }
                    })
                    .collect(),
            ];
            let mut loudest = 0f64;
            for x in &signals {
                let v = crate::reference::segment_mel(&p, x);
                loudest = v.iter().fold(loudest, |a, &b| a.max(b));
            }
            assert!(
                loudest <= p.full_scale_peak() && loudest > p.full_scale_peak() / 32.0,
                "{preset:?}: loudest {loudest}, bound {}",
                p.full_scale_peak()
            );
            // Within the sample limit, the bound's headroom keeps f32 finite.
            let a = p.sample_limit() as f64;
            assert!(a > 1e6 && a.powf(power) * p.full_scale_peak() < f32::MAX as f64 / 8.0);
        }
    }

    #[test]
    fn a_window_that_is_zero_everywhere_is_refused() {
        let mut c = Config::default();
        c.mel.win_length = Some(1);
        let e = err(&c);
        assert!(
            e.contains("mel.win_length") && e.contains("zero everywhere"),
            "{e}"
        );
    }

    #[test]
    fn constant_padding_allows_n_fft_beyond_the_segment() {
        let mut c = Config::default();
        c.mel.n_fft = 1024;
        c.mel.win_length = Some(512);
        c.mel.pad_mode = PadMode::Constant;
        let p = MelPlan::from_config(&c).unwrap();
        assert_eq!(p.n_frames, 5);
    }
}

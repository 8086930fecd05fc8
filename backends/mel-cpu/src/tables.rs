//! Everything the kernels read, derived from the plan once in `CpuBackend::new`: the
//! only place the backend looks into the plan.

use mel_core::MelPlan;
use mel_core::dsp::WindowSpectrum;
use mel_core::dsp::tables::SegmentCsr;
use mel_core::spec::{LogScale, PadMode};

/// One mel filter's non-zero span.
#[derive(Debug, Clone)]
pub(crate) struct Span {
    /// First FFT bin.
    pub start: usize,
    /// f32 weights of bins `start ..`.
    pub weights: Vec<f32>,
}

/// Log compression with its constant split for one final rounding: the result is
/// `k_hi · e + (k · log2(m) + k_lo · e)` for `x = m · 2^e`, where `k_hi` has few enough
/// significant bits that `k_hi · e` is exact.
#[derive(Debug, Clone, Copy)]
pub(crate) struct LogConst {
    /// `k` with its low mantissa bits cleared.
    pub k_hi: f32,
    /// `k - k_hi`, rounded to f32.
    pub k_lo: f32,
    /// `k` rounded to f32.
    pub k: f32,
}

impl LogConst {
    /// The split of `k` (computed in f64).
    pub fn new(k: f64) -> LogConst {
        let k_hi = f32::from_bits((k as f32).to_bits() & !0xfff);
        LogConst {
            k_hi,
            k_lo: (k - k_hi as f64) as f32,
            k: k as f32,
        }
    }
}

/// The plan's log compression in f32 terms.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Log {
    /// `k · log2(max(x, amin))` (k = 10 or 20 · log10 2), then `top_db` below the segment's peak.
    Db {
        /// The multiplier of `log2`.
        k: LogConst,
        /// The floor before the log.
        amin: f32,
        /// Dynamic range kept below each segment's peak.
        top_db: Option<f32>,
    },
    /// `ln(x + offset)` as `ln 2 · log2(x + offset)`.
    Ln {
        /// `ln 2`.
        k: LogConst,
        /// Added before the log.
        offset: f32,
    },
    /// No compression.
    None,
}

/// The plan's tables in the form the kernels use.
#[derive(Debug, Clone)]
pub(crate) struct Tables {
    /// Samples per clip.
    pub clip_samples: usize,
    /// Samples per segment.
    pub seg_len: usize,
    /// Centre padding on each side (0 when not centred).
    pub pad: usize,
    /// How the padding is filled.
    pub pad_mode: PadMode,
    /// FFT size.
    pub n_fft: usize,
    /// Frame hop.
    pub hop: usize,
    /// Frames per segment.
    pub n_frames: usize,
    /// FFT bins, `n_fft / 2 + 1`.
    pub n_freqs: usize,
    /// 2 (power) or 1 (magnitude).
    pub power: u8,
    /// Start of each distinct segment in the clip.
    pub offsets: Vec<usize>,
    /// For each distinct segment, the output segment positions it fills (CSR).
    pub positions: SegmentCsr,
    /// Values per segment, `n_mels · n_frames`.
    pub vps: usize,
    /// Values per clip in the output.
    pub vpc: usize,
    /// The window (the plan's, f64).
    pub window: Vec<f64>,
    /// The window's spectrum `W[k]` for `k < dc_re.len()` (zeros where it vanishes), for
    /// the DC remedy: `X[k] = R[k] + c · W[k]` where `R` is the transform of the frame
    /// minus the constant `c`.
    pub dc_re: Vec<f32>,
    /// `Im W[k]`, as `dc_re`.
    pub dc_im: Vec<f32>,
    /// The mel filters' spans with the plan's f32 weights.
    pub filters: Vec<Span>,
    /// Log compression.
    pub log: Log,
}

impl Tables {
    /// Derives the tables of `plan`.
    pub fn new(plan: &MelPlan) -> Tables {
        let spectrum = WindowSpectrum::new(plan.window(), plan.n_fft(), plan.n_freqs());
        let dc_len = spectrum
            .bins
            .iter()
            .map(|&b| b as usize + 1)
            .max()
            .unwrap_or(0);
        let (mut dc_re, mut dc_im) = (vec![0f32; dc_len], vec![0f32; dc_len]);
        for ((&b, &re), &im) in spectrum.bins.iter().zip(&spectrum.re).zip(&spectrum.im) {
            dc_re[b as usize] = re;
            dc_im[b as usize] = im;
        }
        let log = match plan.log() {
            LogScale::Db { amin, top_db } => Log::Db {
                k: LogConst::new(plan.db_multiplier() * std::f64::consts::LOG10_2),
                amin: amin as f32,
                top_db: top_db.map(|t| t as f32),
            },
            LogScale::Ln { offset } => Log::Ln {
                k: LogConst::new(std::f64::consts::LN_2),
                offset: offset as f32,
            },
            LogScale::None => Log::None,
        };
        Tables {
            clip_samples: plan.clip_samples(),
            seg_len: plan.segment_len(),
            pad: if plan.center() { plan.n_fft() / 2 } else { 0 },
            pad_mode: plan.pad_mode(),
            n_fft: plan.n_fft(),
            hop: plan.hop_length(),
            n_frames: plan.n_frames(),
            n_freqs: plan.n_freqs(),
            power: plan.power(),
            offsets: plan.distinct_offsets().to_vec(),
            positions: SegmentCsr::new(plan.segment_map(), plan.distinct_offsets().len()),
            vps: plan.values_per_segment(),
            vpc: plan.values_per_clip(),
            window: plan.window().to_vec(),
            dc_re,
            dc_im,
            filters: plan
                .sparse_filterbank()
                .filters
                .iter()
                .map(|f| Span {
                    start: f.start,
                    weights: f.weights.clone(),
                })
                .collect(),
            log,
        }
    }

    /// Distinct segments per clip.
    pub fn distinct(&self) -> usize {
        self.offsets.len()
    }

    /// Samples in one padded segment.
    pub fn padded_len(&self) -> usize {
        self.seg_len + 2 * self.pad
    }
}

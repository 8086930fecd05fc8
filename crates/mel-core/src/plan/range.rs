//! What a plan's arithmetic and its output dtype can hold. Settings are checked in f32,
//! the type every kernel computes its log in (`log.amin` of 1e-50 is 0 there); the
//! largest mel value that full-scale input (samples in [-1, 1]) can give is bounded from
//! the window and the filter weights, and a dtype that cannot hold every value such input
//! gives is refused with the figures; the largest sample the f32 arithmetic takes without
//! overflowing anywhere is derived for the pipeline's per-clip check.

use crate::dsp::SparseFilterbank;
use crate::error::{Error, Result};
use crate::spec::{Dtype, LogScale};

/// Headroom kept below `f32::MAX` for the intermediates of a transform (partial sums,
/// the real-FFT split, compensated arithmetic's error terms): 2^4.
const HEADROOM: f64 = 16.0;

/// The value range of a plan.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) struct Range {
    /// The largest mel value (before the log) any input with samples in [-1, 1] can give.
    pub full_scale_peak: f64,
    /// The largest sample magnitude the f32 arithmetic takes without overflowing.
    pub sample_limit: f32,
}

/// `value` as the f32 the kernels use: refused unless it is a finite, normal f32 (a
/// subnormal is flushed to 0 by GPUs that flush denormals).
fn normal_f32(field: &str, value: f64) -> Result<()> {
    let v = value as f32;
    if !v.is_finite() {
        return Err(Error::config(
            field,
            format!(
                "= {value:e} overflows f32, the type the kernels compute in; the largest allowed is {:e}",
                f32::MAX
            ),
        ));
    }
    if v < f32::MIN_POSITIVE {
        let is = if v == 0.0 { "is 0" } else { "is subnormal" };
        return Err(Error::config(
            field,
            format!(
                "= {value:e} {is} in f32, the type the kernels compute in; the smallest allowed is {:e} \
                 (the smallest normal f32)",
                f32::MIN_POSITIVE
            ),
        ));
    }
    Ok(())
}

/// Checks the log settings (already known positive and finite in f64) in f32.
pub(super) fn check_log(log: &LogScale) -> Result<()> {
    match *log {
        LogScale::Db { amin, top_db } => {
            normal_f32("log.amin", amin)?;
            if let Some(t) = top_db
                && !(t as f32).is_finite()
            {
                return Err(Error::config(
                    "log.top_db",
                    format!(
                        "= {t:e} dB overflows f32, the type the kernels compute in; the largest allowed is {:e}",
                        f32::MAX
                    ),
                ));
            }
            Ok(())
        }
        LogScale::Ln { offset } => normal_f32("log.offset", offset),
        LogScale::None => Ok(()),
    }
}

/// The index of a filter none of whose weights is non-zero in f32, if any.
pub(super) fn empty_filter(filters: &SparseFilterbank) -> Option<usize> {
    filters
        .filters
        .iter()
        .position(|f| f.weights.iter().all(|&w| w == 0.0))
}

/// What the plan's arithmetic needs to know about its window, filters and output.
pub(super) struct Shape<'a> {
    /// The analysis window zero-padded to `n_fft`, f64.
    pub window: &'a [f64],
    /// Its length before the padding.
    pub win_length: usize,
    /// The dense filterbank `[n_freqs][n_mels]`, f64.
    pub filterbank: &'a [f64],
    /// Mel bands.
    pub n_mels: usize,
    /// 1 (magnitude) or 2 (power).
    pub power: u8,
    /// The log compression.
    pub log: LogScale,
    /// The stored element type.
    pub dtype: Dtype,
}

/// Derives the plan's range and refuses a window that is zero in f32 or a dtype that
/// cannot hold the values full-scale input gives.
///
/// The bound on mel band m for samples in [-1, 1]: each bin's magnitude is at most the
/// window's absolute sum `W1`, and by Parseval the bins' energies together are at most
/// `n_fft · W2` (`W2` the window's squared sum). So a power band is at most
/// `min(Σ_k f_k · W1², max_k f_k · n_fft · W2)` and a magnitude band at most
/// `min(Σ_k f_k · W1, ‖f‖₂ · √(n_fft · W2))` (Cauchy–Schwarz).
pub(super) fn derive(s: &Shape<'_>) -> Result<Range> {
    let w1: f64 = s.window.iter().map(|&w| (w as f32).abs() as f64).sum();
    let w2: f64 = s.window.iter().map(|&w| w * w).sum();
    if w1 == 0.0 {
        return Err(Error::config(
            "mel.win_length",
            format!(
                "= {} gives a window that is zero everywhere, so every spectrogram would be silence; use a longer window",
                s.win_length
            ),
        ));
    }
    let n = s.window.len() as f64;
    let n_freqs = s.filterbank.len() / s.n_mels;
    let mut peak = 0f64;
    let mut widest = 0f64;
    for m in 0..s.n_mels {
        let band = (0..n_freqs).map(|k| s.filterbank[k * s.n_mels + m]);
        let sum: f64 = band.clone().sum();
        let max = band.clone().fold(0f64, f64::max);
        let norm = band.map(|f| f * f).sum::<f64>().sqrt();
        let bound = if s.power == 2 {
            (sum * w1 * w1).min(max * n * w2)
        } else {
            (sum * w1).min(norm * (n * w2).sqrt())
        };
        peak = peak.max(bound);
        widest = widest.max(sum);
    }
    let limit = f32::MAX as f64 / HEADROOM;
    let p = f64::from(s.power);
    let sample_limit = (limit.sqrt() / w1).min((limit / peak).powf(1.0 / p));
    let (lo, hi) = stored_range(s.log, peak, s.power);
    let dtype_max = s.dtype.max_value();
    if lo.abs().max(hi.abs()) > dtype_max {
        let what = match s.log {
            LogScale::None => format!("mel energies up to {}", figure(hi)),
            _ => format!("values from {} to {}", figure(lo), figure(hi)),
        };
        return Err(Error::config(
            "output.dtype",
            format!(
                "= {} cannot hold this configuration's values: full-scale input (samples in [-1, 1]) can give \
                 {what} (n_fft {}, window sum {w1:.2}, power {}, filter weights summing to {widest:.4} in the \
                 widest band), above {}'s largest finite value, {}; use output.dtype = \"f32\"{}, or \
                 a log (log.kind = \"db\" or \"ln\")",
                s.dtype.name(),
                s.window.len(),
                s.power,
                s.dtype.name(),
                figure(dtype_max),
                if s.dtype == Dtype::Bf16 {
                    ""
                } else {
                    " or \"bf16\""
                },
            ),
        ));
    }
    Ok(Range {
        full_scale_peak: peak,
        sample_limit: sample_limit as f32,
    })
}

/// `x` in full below a million (65504), in scientific notation above.
fn figure(x: f64) -> String {
    if x.abs() < 1e6 {
        format!("{x:.0}")
    } else {
        format!("{x:.4e}")
    }
}

/// The lowest and highest value stored for mel values in `[0, peak]`.
fn stored_range(log: LogScale, peak: f64, power: u8) -> (f64, f64) {
    let k = if power == 2 { 10.0 } else { 20.0 };
    match log {
        LogScale::Db { amin, .. } => {
            let amin = amin as f32 as f64;
            (k * amin.log10(), k * peak.max(amin).log10())
        }
        LogScale::Ln { offset } => {
            let offset = offset as f32 as f64;
            (offset.ln(), (peak + offset).ln())
        }
        LogScale::None => (0.0, peak),
    }
}

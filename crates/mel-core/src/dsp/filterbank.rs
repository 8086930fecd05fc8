//! Mel filterbanks identical to `torchaudio.functional.melscale_fbanks`.

use crate::spec::{MelNorm, MelScale};

/// Hertz to mels on the given scale.
pub fn hz_to_mel(freq: f64, scale: MelScale) -> f64 {
    match scale {
        MelScale::Htk => 2595.0 * (1.0 + freq / 700.0).log10(),
        MelScale::Slaney => {
            let (f_sp, min_log_hz, min_log_mel) = slaney_constants();
            if freq >= min_log_hz {
                min_log_mel + (freq / min_log_hz).ln() / slaney_logstep()
            } else {
                freq / f_sp
            }
        }
    }
}

/// Mels to hertz on the given scale.
pub fn mel_to_hz(mel: f64, scale: MelScale) -> f64 {
    match scale {
        MelScale::Htk => 700.0 * (10f64.powf(mel / 2595.0) - 1.0),
        MelScale::Slaney => {
            let (f_sp, min_log_hz, min_log_mel) = slaney_constants();
            if mel >= min_log_mel {
                min_log_hz * (slaney_logstep() * (mel - min_log_mel)).exp()
            } else {
                f_sp * mel
            }
        }
    }
}

fn slaney_constants() -> (f64, f64, f64) {
    let f_sp = 200.0 / 3.0;
    let min_log_hz = 1000.0;
    (f_sp, min_log_hz, min_log_hz / f_sp)
}

fn slaney_logstep() -> f64 {
    6.4f64.ln() / 27.0
}

fn linspace(start: f64, end: f64, n: usize) -> Vec<f64> {
    match n {
        0 => vec![],
        1 => vec![start],
        _ => {
            let step = (end - start) / (n - 1) as f64;
            (0..n).map(|i| start + step * i as f64).collect()
        }
    }
}

/// The dense filterbank, row-major `[n_freqs][n_mels]`, exactly as
/// `torchaudio.functional.melscale_fbanks(n_freqs, f_min, f_max, n_mels, sample_rate, norm, mel_scale)`
/// (including its `sample_rate // 2` upper bin frequency), computed in f64.
pub fn melscale_fbanks(
    n_freqs: usize,
    f_min: f64,
    f_max: f64,
    n_mels: usize,
    sample_rate: u32,
    norm: MelNorm,
    scale: MelScale,
) -> Vec<f64> {
    let all_freqs = linspace(0.0, (sample_rate / 2) as f64, n_freqs);
    let m_pts = linspace(hz_to_mel(f_min, scale), hz_to_mel(f_max, scale), n_mels + 2);
    let f_pts: Vec<f64> = m_pts.iter().map(|&m| mel_to_hz(m, scale)).collect();
    let f_diff: Vec<f64> = f_pts.windows(2).map(|w| w[1] - w[0]).collect();
    let mut fb = vec![0.0; n_freqs * n_mels];
    for (f, &freq) in all_freqs.iter().enumerate() {
        for m in 0..n_mels {
            let down = -(f_pts[m] - freq) / f_diff[m];
            let up = (f_pts[m + 2] - freq) / f_diff[m + 1];
            let mut w = down.min(up).max(0.0);
            if norm == MelNorm::Slaney {
                w *= 2.0 / (f_pts[m + 2] - f_pts[m]);
            }
            fb[f * n_mels + m] = w;
        }
    }
    fb
}

/// One mel filter's non-zero span: weights for bins `start .. start + weights.len()`.
#[derive(Debug, Clone, PartialEq)]
pub struct MelFilter {
    /// First frequency bin with a non-zero weight.
    pub start: usize,
    /// The weights of the contiguous non-zero span.
    pub weights: Vec<f32>,
}

/// A filterbank stored as each filter's non-zero range (the triangles), in f32.
#[derive(Debug, Clone, PartialEq)]
pub struct SparseFilterbank {
    /// One entry per mel band.
    pub filters: Vec<MelFilter>,
    /// Number of FFT bins the filterbank spans.
    pub n_freqs: usize,
}

impl SparseFilterbank {
    /// Extracts each filter's non-zero span from a dense `[n_freqs][n_mels]` filterbank.
    /// A filter with no non-zero weight gets an empty span.
    pub fn from_dense(dense: &[f64], n_freqs: usize, n_mels: usize) -> Self {
        let filters = (0..n_mels)
            .map(|m| {
                let nz: Vec<usize> = (0..n_freqs)
                    .filter(|&f| dense[f * n_mels + m] != 0.0)
                    .collect();
                match (nz.first(), nz.last()) {
                    (Some(&lo), Some(&hi)) => MelFilter {
                        start: lo,
                        weights: (lo..=hi).map(|f| dense[f * n_mels + m] as f32).collect(),
                    },
                    _ => MelFilter {
                        start: 0,
                        weights: vec![],
                    },
                }
            })
            .collect();
        SparseFilterbank { filters, n_freqs }
    }

    /// Total multiply-adds per frame (the sum of the spans).
    pub fn nonzero_len(&self) -> usize {
        self.filters.iter().map(|f| f.weights.len()).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scales_invert() {
        for scale in [MelScale::Htk, MelScale::Slaney] {
            for f in [0.0, 100.0, 999.0, 1000.0, 2048.0, 8000.0] {
                let back = mel_to_hz(hz_to_mel(f, scale), scale);
                assert!((back - f).abs() < 1e-9, "{scale:?} {f} {back}");
            }
        }
        assert!((hz_to_mel(1000.0, MelScale::Slaney) - 15.0).abs() < 1e-12);
        assert!((hz_to_mel(700.0, MelScale::Htk) - 2595.0 * 2f64.log10()).abs() < 1e-9);
    }

    #[test]
    fn leak_4k_filterbank_shape_and_sparsity() {
        let fb = melscale_fbanks(257, 0.0, 2048.0, 32, 4096, MelNorm::None, MelScale::Htk);
        let sparse = SparseFilterbank::from_dense(&fb, 257, 32);
        assert_eq!(sparse.filters.len(), 32);
        assert!(sparse.filters.iter().all(|f| !f.weights.is_empty()));
        // DESIGN.md: the triangles cost about 514 multiply-adds a frame, not 8.2k.
        let nz = sparse.nonzero_len();
        assert!((400..700).contains(&nz), "{nz}");
        // Peaks of unnormalised triangles never exceed 1.
        assert!(fb.iter().all(|&w| (0.0..=1.0).contains(&w)));
    }

    #[test]
    fn slaney_norm_divides_by_band_width() {
        let plain = melscale_fbanks(201, 0.0, 8000.0, 40, 16000, MelNorm::None, MelScale::Slaney);
        let normed = melscale_fbanks(
            201,
            0.0,
            8000.0,
            40,
            16000,
            MelNorm::Slaney,
            MelScale::Slaney,
        );
        let m_lo = hz_to_mel(0.0, MelScale::Slaney);
        let m_hi = hz_to_mel(8000.0, MelScale::Slaney);
        let step = (m_hi - m_lo) / 41.0;
        let m = 10;
        let width = mel_to_hz(m_lo + step * (m + 2) as f64, MelScale::Slaney)
            - mel_to_hz(m_lo + step * m as f64, MelScale::Slaney);
        for f in 0..201 {
            let a = plain[f * 40 + m] * 2.0 / width;
            assert!((a - normed[f * 40 + m]).abs() < 1e-15);
        }
    }
}

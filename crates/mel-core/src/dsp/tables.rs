//! Flat tables a GPU kernel reads, derived from a plan once: which output segments each
//! distinct segment fills (CSR), and each mel filter's non-zero span with its weights.
//! The CUDA and wgpu backends both upload these.

use crate::plan::MelPlan;

/// For each distinct segment `d`, the output segment positions it fills:
/// `out[start[d]..start[d + 1]]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SegmentCsr {
    /// `distinct + 1` row starts into `out`.
    pub start: Vec<u32>,
    /// Output segment indices (`[long][short]` order), grouped by distinct segment.
    pub out: Vec<u32>,
}

impl SegmentCsr {
    /// The map of `plan`.
    pub fn new(plan: &MelPlan) -> Self {
        let mut start = vec![0u32];
        let mut out = Vec::with_capacity(plan.segment_map().len());
        for d in 0..plan.distinct_offsets().len() {
            out.extend(
                plan.segment_map()
                    .iter()
                    .enumerate()
                    .filter(|&(_, &m)| m as usize == d)
                    .map(|(i, _)| i as u32),
            );
            start.push(out.len() as u32);
        }
        SegmentCsr { start, out }
    }
}

/// The mel filters' non-zero spans, flattened: filter `m` covers bins
/// `first[m] .. first[m] + len[m]` with weights `weights[offset[m] ..][.. len[m]]`.
#[derive(Debug, Clone, PartialEq)]
pub struct FilterSpans {
    /// First bin of each filter.
    pub first: Vec<u32>,
    /// Bins in each filter.
    pub len: Vec<u32>,
    /// Offset of each filter's weights in `weights`.
    pub offset: Vec<u32>,
    /// The non-zero weights in f32 (mel sums run in f32, like the CPU backend's output).
    pub weights: Vec<f32>,
}

impl FilterSpans {
    /// The spans of `plan`'s filterbank, weights taken from the dense f64 matrix.
    pub fn new(plan: &MelPlan) -> Self {
        let mut s = FilterSpans {
            first: vec![],
            len: vec![],
            offset: vec![],
            weights: vec![],
        };
        for (m, f) in plan.sparse_filterbank().filters.iter().enumerate() {
            s.first.push(f.start as u32);
            s.len.push(f.weights.len() as u32);
            s.offset.push(s.weights.len() as u32);
            s.weights.extend(
                (f.start..f.start + f.weights.len())
                    .map(|b| plan.filterbank()[b * plan.n_mels() + m] as f32),
            );
        }
        s
    }
}

/// `exp(-2πik/n)` for k in `0..n` as interleaved (re, im), computed in f64.
pub fn dft_twiddles(n: usize) -> Vec<f64> {
    (0..n)
        .flat_map(|k| {
            let a = -2.0 * std::f64::consts::PI * k as f64 / n as f64;
            [a.cos(), a.sin()]
        })
        .collect()
}

/// `exp(-2πik/n)` for k in `0..n` as `[re, im]`, computed in f64 and rounded once to
/// f32: the twiddle table of every float32 transform. A stage of a size-`m` FFT uses
/// entries `k · n / m` of it; powers of a twiddle are looked up, never computed by
/// repeated f32 multiplication (which drifts).
pub fn twiddles_f32(n: usize) -> Vec<[f32; 2]> {
    (0..n)
        .map(|k| {
            let a = -2.0 * std::f64::consts::PI * k as f64 / n as f64;
            [a.cos() as f32, a.sin() as f32]
        })
        .collect()
}

/// The DFT of a plan's window at its non-zero bins, for the DC remedy of float32
/// transforms: a frame `x = c + r` (any constant `c`) transforms to `c·W[k] + R[k]`, so a
/// backend subtracts `c` (e.g. the frame's mean) before its f32 FFT and adds `c·W[k]`
/// back at these bins. The f32 FFT then rounds relative to what is left (the signal
/// without its DC), not to a large DC offset that would leak into bins 100 dB below it.
#[derive(Debug, Clone, PartialEq)]
pub struct WindowSpectrum {
    /// Bins `k < n_freqs` where `W[k]` is not zero (periodic Hann or Hamming spanning
    /// `n_fft`: bins 0 and 1; rectangular spanning `n_fft`: bin 0; a shorter window: all).
    pub bins: Vec<u32>,
    /// `Re W[k]` at those bins, computed in f64, rounded once.
    pub re: Vec<f32>,
    /// `Im W[k]` at those bins.
    pub im: Vec<f32>,
}

impl WindowSpectrum {
    /// The spectrum of `plan`'s window (zero-padded to `n_fft`), bins `0..n_freqs`.
    pub fn new(plan: &MelPlan) -> Self {
        let n = plan.n_fft();
        let w = plan.window();
        let dft = |k: usize| {
            let (mut re, mut im) = (0.0f64, 0.0f64);
            for (j, &x) in w.iter().enumerate() {
                let a = -2.0 * std::f64::consts::PI * ((j * k) % n) as f64 / n as f64;
                re += x * a.cos();
                im += x * a.sin();
            }
            (re, im)
        };
        let all: Vec<(f64, f64)> = (0..plan.n_freqs()).map(dft).collect();
        let scale = w
            .iter()
            .map(|x| x.abs())
            .sum::<f64>()
            .max(f64::MIN_POSITIVE);
        let mut s = WindowSpectrum {
            bins: vec![],
            re: vec![],
            im: vec![],
        };
        for (k, &(re, im)) in all.iter().enumerate() {
            // Exact zeros come out of f64 as ~1e-16 of the window's sum.
            if re.hypot(im) > 1e-12 * scale {
                s.bins.push(k as u32);
                s.re.push(re as f32);
                s.im.push(im as f32);
            }
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Config;

    #[test]
    fn leak_4k_segment_map_covers_every_output_segment_once() {
        let plan = MelPlan::from_config(&Config::default()).unwrap();
        let csr = SegmentCsr::new(&plan);
        assert_eq!(csr.start.len(), 160);
        assert_eq!(*csr.start.last().unwrap(), 237);
        let mut seen = csr.out.clone();
        seen.sort();
        assert_eq!(seen, (0..237).collect::<Vec<_>>());
        // Short window 2 of long window k is short window 0 of long window k + 1.
        assert_eq!(
            &csr.out[csr.start[2] as usize..csr.start[3] as usize],
            &[2, 3]
        );
    }

    #[test]
    fn filter_spans_match_the_dense_filterbank() {
        let plan = MelPlan::from_config(&Config::default()).unwrap();
        let s = FilterSpans::new(&plan);
        assert_eq!(s.first.len(), plan.n_mels());
        assert_eq!(s.weights.len(), s.len.iter().sum::<u32>() as usize);
        for m in 0..plan.n_mels() {
            for bin in 0..plan.n_freqs() {
                let dense = plan.filterbank()[bin * plan.n_mels() + m] as f32;
                let (a, l) = (s.first[m] as usize, s.len[m] as usize);
                let sparse = if (a..a + l).contains(&bin) {
                    s.weights[s.offset[m] as usize + bin - a]
                } else {
                    0.0
                };
                assert_eq!(sparse, dense, "filter {m} bin {bin}");
            }
        }
    }

    #[test]
    fn window_spectrum_of_a_full_hann_is_two_bins() {
        let plan = MelPlan::from_config(&Config::default()).unwrap();
        let w = WindowSpectrum::new(&plan);
        assert_eq!(w.bins, [0, 1]);
        assert_eq!((w.re[0], w.re[1]), (256.0, -128.0));
        assert!(w.im.iter().all(|x| x.abs() < 1e-6));
        // A window shorter than n_fft is not sparse.
        let mut c = Config::default();
        c.mel.win_length = Some(300);
        let w = WindowSpectrum::new(&MelPlan::from_config(&c).unwrap());
        assert!(w.bins.len() > 100, "{}", w.bins.len());
    }

    #[test]
    fn f32_twiddles_are_rounded_once_from_f64() {
        let t = twiddles_f32(512);
        let d = dft_twiddles(512);
        for k in 0..512 {
            assert_eq!(t[k], [d[2 * k] as f32, d[2 * k + 1] as f32]);
        }
    }

    #[test]
    fn twiddles_are_unit_roots() {
        let t = dft_twiddles(8);
        assert_eq!(t.len(), 16);
        assert!((t[4] - 0.0).abs() < 1e-15 && (t[5] + 1.0).abs() < 1e-15); // k = 2: -i
    }
}

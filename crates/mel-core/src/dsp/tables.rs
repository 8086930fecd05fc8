//! Flat tables a GPU kernel reads, derived from a plan once: which output segments each
//! distinct segment fills (CSR), each mel filter's non-zero span with its weights, and
//! the FFT's stage radices and twiddles (f64, rounded-once f32, double-word hi + lo).
//! The CUDA and wgpu backends both upload these; neither computes its own.

use crate::dsp::SparseFilterbank;

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
    /// The map of a plan's `segment_map` (each output segment's distinct segment) over
    /// its `distinct` distinct segments.
    pub fn new(segment_map: &[u32], distinct: usize) -> Self {
        let mut start = vec![0u32];
        let mut out = Vec::with_capacity(segment_map.len());
        for d in 0..distinct {
            out.extend(
                segment_map
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
    /// The spans of a plan's sparse filterbank (its f32 weights are the dense f64
    /// matrix's, rounded once).
    pub fn new(filterbank: &SparseFilterbank) -> Self {
        let mut s = FilterSpans {
            first: vec![],
            len: vec![],
            offset: vec![],
            weights: vec![],
        };
        for f in &filterbank.filters {
            s.first.push(f.start as u32);
            s.len.push(f.weights.len() as u32);
            s.offset.push(s.weights.len() as u32);
            s.weights.extend_from_slice(&f.weights);
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

/// A complex value as two f32 pairs whose sum is its f64 value to ~2⁻⁴⁸: `hi` is the f64
/// value rounded once to f32 (what [`twiddles_f32`] holds), `lo` the rest, rounded. The
/// tables of compensated (double-word) f32 transforms: with `lo`, a product by a twiddle
/// is accurate far beyond f32's own 2⁻²⁴.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ComplexDw {
    /// `[re, im]` rounded once from f64.
    pub hi: [f32; 2],
    /// `[re, im]` of the f64 value minus `hi`, rounded.
    pub lo: [f32; 2],
}

impl ComplexDw {
    /// `re + i·im` given in f64, as a double-word pair.
    pub fn new(re: f64, im: f64) -> Self {
        let hi = [re as f32, im as f32];
        ComplexDw {
            hi,
            lo: [(re - hi[0] as f64) as f32, (im - hi[1] as f64) as f32],
        }
    }
}

/// `v` as a double-word f32 pair `[hi, lo]`: `hi` rounded once from f64, `lo` the rest.
pub fn f32_dw(v: f64) -> [f32; 2] {
    let hi = v as f32;
    [hi, (v - hi as f64) as f32]
}

/// `exp(-2πik/n)` for k in `0..n` as double-word pairs (`hi` equal to [`twiddles_f32`]).
pub fn twiddles_dw(n: usize) -> Vec<ComplexDw> {
    (0..n)
        .map(|k| {
            let a = -2.0 * std::f64::consts::PI * k as f64 / n as f64;
            ComplexDw::new(a.cos(), a.sin())
        })
        .collect()
}

/// The radices of the Stockham stages of a power-of-two transform of `n` points, first to
/// last: radix 8 while it divides what is left, then one radix-4 or radix-2 stage. Both
/// GPU backends' FFTs run these stages (the CUDA kernels' `fft_from`, the WGSL stages
/// mel-wgpu generates) and lay their twiddle tables out by them.
pub fn stockham_radices(n: usize) -> Vec<usize> {
    let mut out = Vec::new();
    let mut ns = 1;
    while ns < n {
        let radix = if ns * 8 <= n {
            8
        } else if ns * 4 <= n {
            4
        } else {
            2
        };
        out.push(radix);
        ns *= radix;
    }
    out
}

/// [`stockham_twiddles_f32`]'s table in f64, as interleaved (re, im): stage by stage,
/// `exp(-2πi·q·k/(ns·r))` for `q` in `1..r`, `k` in `0..ns`, laid out `[q - 1][k]`,
/// `2 (n - 1)` values in all, each computed directly from its angle (the values of the
/// [`dft_twiddles`] entries they stand for, bit for bit). The f64 CUDA kernel's table.
pub fn stockham_twiddles(n: usize, radices: &[usize]) -> Vec<f64> {
    assert_eq!(
        radices.iter().product::<usize>(),
        n,
        "radices must multiply to n"
    );
    let mut out = Vec::with_capacity(2 * n.saturating_sub(1));
    let mut ns = 1;
    for &r in radices {
        for q in 1..r {
            for k in 0..ns {
                let a = -2.0 * std::f64::consts::PI * (q * k) as f64 / (ns * r) as f64;
                out.extend([a.cos(), a.sin()]);
            }
        }
        ns *= r;
    }
    out
}

/// [`stockham_twiddles_f32`] as double-word pairs (the same layout, gathered from
/// [`twiddles_dw`]).
pub fn stockham_twiddles_dw(n: usize, radices: &[usize]) -> Vec<ComplexDw> {
    assert_eq!(
        radices.iter().product::<usize>(),
        n,
        "radices must multiply to n"
    );
    let full = twiddles_dw(n);
    let mut out = Vec::with_capacity(n.saturating_sub(1));
    let mut ns = 1;
    for &r in radices {
        let stride = n / (ns * r);
        for q in 1..r {
            out.extend((0..ns).map(|k| full[q * k * stride]));
        }
        ns *= r;
    }
    out
}

/// The per-stage twiddle tables of a Stockham FFT of `n` points (a power of two) whose
/// stages have radices `radices` (first to last, product `n`), every entry gathered from
/// [`twiddles_f32`] (f64, rounded once): stage `s`, having done `ns` points so far with
/// radix `r`, contributes `exp(-2πi·q·k/(ns·r))` for `q` in `1..r` and `k` in `0..ns`,
/// laid out `[q - 1][k]` (consecutive `k` side by side, so butterflies with consecutive
/// `k` read consecutive entries), the stages one after another: `n - 1` entries in all.
pub fn stockham_twiddles_f32(n: usize, radices: &[usize]) -> Vec<[f32; 2]> {
    assert_eq!(
        radices.iter().product::<usize>(),
        n,
        "radices must multiply to n"
    );
    let full = twiddles_f32(n);
    let mut out = Vec::with_capacity(n.saturating_sub(1));
    let mut ns = 1;
    for &r in radices {
        let stride = n / (ns * r);
        for q in 1..r {
            out.extend((0..ns).map(|k| full[q * k * stride]));
        }
        ns *= r;
    }
    out
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
    /// The spectrum of a plan's `window` (zero-padded to `n_fft`), bins `0..n_freqs`.
    pub fn new(window: &[f64], n_fft: usize, n_freqs: usize) -> Self {
        let (n, w) = (n_fft, window);
        let dft = |k: usize| {
            let (mut re, mut im) = (0.0f64, 0.0f64);
            for (j, &x) in w.iter().enumerate() {
                let a = -2.0 * std::f64::consts::PI * ((j * k) % n) as f64 / n as f64;
                re += x * a.cos();
                im += x * a.sin();
            }
            (re, im)
        };
        let all: Vec<(f64, f64)> = (0..n_freqs).map(dft).collect();
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
    use crate::plan::MelPlan;

    #[test]
    fn leak_4k_segment_map_covers_every_output_segment_once() {
        let plan = MelPlan::from_config(&Config::default()).unwrap();
        let csr = SegmentCsr::new(plan.segment_map(), plan.distinct_offsets().len());
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
        let s = FilterSpans::new(plan.sparse_filterbank());
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
        let w = WindowSpectrum::new(plan.window(), plan.n_fft(), plan.n_freqs());
        assert_eq!(w.bins, [0, 1]);
        assert_eq!((w.re[0], w.re[1]), (256.0, -128.0));
        assert!(w.im.iter().all(|x| x.abs() < 1e-6));
        // A window shorter than n_fft is not sparse.
        let mut c = Config::default();
        c.mel.win_length = Some(300);
        let plan = MelPlan::from_config(&c).unwrap();
        let w = WindowSpectrum::new(plan.window(), plan.n_fft(), plan.n_freqs());
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
    fn stockham_tables_are_entries_of_the_rounded_once_table() {
        let full = twiddles_f32(512);
        let t = stockham_twiddles_f32(512, &[8, 8, 8]);
        assert_eq!(t.len(), 511);
        // Stage 2 (ns 8, after the 7 entries of stage 1), q = 3, k = 5:
        // exp(-2πi·15/64) = entry 15·8 of the 512-point table.
        assert_eq!(t[7 + 2 * 8 + 5], full[15 * 8]);
        // The last stage of 32 = 8·4: ns 8, radix 4, q = 2, k = 7: exp(-2πi·14/32).
        let t = stockham_twiddles_f32(32, &[8, 4]);
        assert_eq!(t.len(), 31);
        assert_eq!(t[7 + 8 + 7], twiddles_f32(32)[14]);
    }

    #[test]
    fn double_word_twiddles_carry_the_f64_value() {
        let t = twiddles_dw(512);
        let f = twiddles_f32(512);
        let d = dft_twiddles(512);
        for k in 0..512 {
            assert_eq!(t[k].hi, f[k]);
            for c in 0..2 {
                let sum = t[k].hi[c] as f64 + t[k].lo[c] as f64;
                assert!((sum - d[2 * k + c]).abs() <= 1e-14, "k {k}");
            }
        }
        let s = stockham_twiddles_dw(512, &[8, 8, 8]);
        assert_eq!(s[7 + 2 * 8 + 5], t[15 * 8]);
        let [hi, lo] = f32_dw(std::f64::consts::FRAC_1_SQRT_2);
        assert_eq!(hi, std::f32::consts::FRAC_1_SQRT_2);
        assert!(((hi as f64 + lo as f64) - std::f64::consts::FRAC_1_SQRT_2).abs() < 1e-15);
    }

    #[test]
    fn stockham_radices_cover_every_power_of_two() {
        assert_eq!(stockham_radices(4), [4]);
        assert_eq!(stockham_radices(8), [8]);
        assert_eq!(stockham_radices(16), [8, 2]);
        assert_eq!(stockham_radices(32), [8, 4]);
        assert_eq!(stockham_radices(512), [8, 8, 8]);
        assert_eq!(stockham_radices(2048), [8, 8, 8, 4]);
        for bits in 2..16 {
            assert_eq!(
                stockham_radices(1 << bits).iter().product::<usize>(),
                1 << bits
            );
        }
    }

    #[test]
    fn f64_stockham_tables_are_the_direct_tables_entries_bit_for_bit() {
        for bits in 1..16 {
            let n = 1usize << bits;
            let radices = stockham_radices(n);
            let t = stockham_twiddles(n, &radices);
            assert_eq!(t.len(), 2 * (n - 1));
            // Entry [q - 1][k] of the stage after ns points with radix r is entry
            // q·k·n/(ns·r) of the n-point table, and so is the double-word table's.
            let full = dft_twiddles(n);
            let dw = stockham_twiddles_dw(n, &radices);
            let (mut e, mut ns) = (0, 1);
            for &r in &radices {
                for q in 1..r {
                    for k in 0..ns {
                        let j = q * k * (n / (ns * r));
                        assert_eq!(t[2 * e].to_bits(), full[2 * j].to_bits(), "n {n}, {e}");
                        assert_eq!(t[2 * e + 1].to_bits(), full[2 * j + 1].to_bits());
                        assert_eq!(dw[e], ComplexDw::new(t[2 * e], t[2 * e + 1]));
                        e += 1;
                    }
                }
                ns *= r;
            }
        }
    }

    #[test]
    fn twiddles_are_unit_roots() {
        let t = dft_twiddles(8);
        assert_eq!(t.len(), 16);
        assert!((t[4] - 0.0).abs() < 1e-15 && (t[5] + 1.0).abs() < 1e-15); // k = 2: -i
    }
}

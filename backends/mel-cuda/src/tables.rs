//! The constant tables the kernels read, built once per plan and uploaded once: the
//! window and twiddles in each kernel's precision (from `mel_core::dsp::tables`, which
//! also gives mel-wgpu its tables: the stage radices and twiddle values have one home),
//! the segment map and the mel filters' non-zero spans.

use mel_core::MelPlan;
use mel_core::dsp::{
    ComplexDw, FilterSpans, SegmentCsr, dft_twiddles, f32_dw, stockham_radices, stockham_twiddles,
    stockham_twiddles_dw, twiddles_dw,
};

/// The constant tables the kernel reads, built once per plan.
#[derive(Debug, Clone, PartialEq)]
pub struct Tables {
    /// Analysis window, zero-padded to n_fft.
    pub window: Vec<f64>,
    /// Twiddles as interleaved (re, im), computed in f64, n_fft entries: for a power-of-two
    /// n_fft the Stockham stages' tables one after another ([`stockham_twiddles`]),
    /// zero-padded; otherwise exp(-2πik/n_fft) for k in 0..n_fft (the direct DFT's).
    pub twiddle: Vec<f64>,
    /// Start of each distinct segment in its clip.
    pub offsets: Vec<i32>,
    /// CSR: output segments of distinct segment d are `map_out[map_start[d]..map_start[d+1]]`.
    pub map_start: Vec<i32>,
    /// See `map_start`.
    pub map_out: Vec<i32>,
    /// First bin of each mel filter.
    pub f_start: Vec<i32>,
    /// Bins in each mel filter.
    pub f_len: Vec<i32>,
    /// Offset of each filter's weights in `f_w`.
    pub f_off: Vec<i32>,
    /// The filters' non-zero weights (f32: the mel sums run in f32, like the CPU backend's output).
    pub f_w: Vec<f32>,
    /// The f32 kernel's window: `[hi, lo]` per sample (hi rounded once from f64).
    pub window_dw: Vec<[f32; 2]>,
    /// The f32 kernel's twiddles, `[re.hi, im.hi, re.lo, im.lo]`, n_fft entries: for a
    /// power-of-two n_fft the Stockham stages' tables ([`stockham_twiddles_dw`]: every
    /// power of each stage's twiddle, laid out as [`stockham_twiddles`]), zero-padded;
    /// otherwise exp(-2πik/n_fft) for k in 0..n_fft.
    pub twiddle_dw: Vec<[f32; 4]>,
}

impl Tables {
    /// The tables for `plan`.
    pub fn new(plan: &MelPlan) -> Tables {
        let n = plan.n_fft();
        let mut twiddle: Vec<f64> = if n.is_power_of_two() {
            stockham_twiddles(n, &stockham_radices(n))
        } else {
            dft_twiddles(n)
        };
        twiddle.resize(2 * n, 0.0);
        let csr = SegmentCsr::new(plan.segment_map(), plan.distinct_offsets().len());
        let spans = FilterSpans::new(plan.sparse_filterbank());
        let ints = |v: Vec<u32>| v.into_iter().map(|x| x as i32).collect::<Vec<i32>>();
        let quad = |t: &ComplexDw| [t.hi[0], t.hi[1], t.lo[0], t.lo[1]];
        let mut twiddle_dw: Vec<[f32; 4]> = if n.is_power_of_two() {
            stockham_twiddles_dw(n, &stockham_radices(n))
        } else {
            twiddles_dw(n)
        }
        .iter()
        .map(quad)
        .collect();
        twiddle_dw.resize(n, [0.0; 4]);
        Tables {
            window: plan.window().to_vec(),
            twiddle,
            offsets: plan.distinct_offsets().iter().map(|&o| o as i32).collect(),
            map_start: ints(csr.start),
            map_out: ints(csr.out),
            f_start: ints(spans.first),
            f_len: ints(spans.len),
            f_off: ints(spans.offset),
            f_w: spans.weights,
            window_dw: plan.window().iter().map(|&w| f32_dw(w)).collect(),
            twiddle_dw,
        }
    }
}

/// Non-zero filterbank weights (the kernel keeps them in shared memory).
pub fn weight_count(plan: &MelPlan) -> usize {
    plan.sparse_filterbank()
        .filters
        .iter()
        .map(|f| f.weights.len())
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;
    use mel_core::Config;

    #[test]
    fn leak_4k_tables() {
        let plan = MelPlan::from_config(&Config::default()).unwrap();
        let t = Tables::new(&plan);
        assert_eq!(t.offsets.len(), 159);
        assert_eq!(t.map_start.len(), 160);
        assert_eq!(t.map_out.len(), 237);
        assert_eq!(*t.map_start.last().unwrap(), 237);
        let mut seen: Vec<i32> = t.map_out.clone();
        seen.sort();
        assert_eq!(seen, (0..237).collect::<Vec<_>>());
        assert_eq!(t.f_start.len(), 32);
        assert_eq!(t.f_w.len(), t.f_len.iter().sum::<i32>() as usize);
        assert_eq!(weight_count(&plan), t.f_w.len());
        // Stage tables: 7 (ns 1) + 56 (ns 8) + 448 (ns 64) entries, padded to 512.
        let stage_twiddles = |n: usize| stockham_twiddles(n, &stockham_radices(n));
        assert_eq!(stage_twiddles(512).len(), 2 * 511);
        assert_eq!(t.twiddle.len(), 2 * 512);
        // Stage 2 (ns 8, from entry 7): r = 2, k = 2 is exp(-2πi·4/64) = exp(-iπ/8).
        let e = 7 + 8 + 2;
        let a = -std::f64::consts::PI / 8.0;
        assert!((t.twiddle[2 * e] - a.cos()).abs() < 1e-15);
        assert!((t.twiddle[2 * e + 1] - a.sin()).abs() < 1e-15);
        assert_eq!(stage_twiddles(8).len(), 2 * 7);
        assert_eq!(stage_twiddles(32).len(), 2 * (7 + 3 * 8));
        // The f32 kernel's tables: the same values as hi + lo, every power stored.
        assert_eq!(t.twiddle_dw.len(), 512);
        let q = t.twiddle_dw[e];
        assert_eq!([q[0], q[1]], [a.cos() as f32, a.sin() as f32]);
        assert!((q[0] as f64 + q[2] as f64 - a.cos()).abs() < 1e-15);
        // The last stage (ns 64, from entry 63), r = 7, k = 5: exp(-2πi·35/512).
        let q = t.twiddle_dw[63 + 6 * 64 + 5];
        let b = -2.0 * std::f64::consts::PI * 35.0 / 512.0;
        assert_eq!([q[0], q[1]], [b.cos() as f32, b.sin() as f32]);
        // hi + lo is the f64 window (0.5 - 0.5·cos(π/2) is 0.5 - 5.6e-17 in f64).
        let [hi, lo] = t.window_dw[128];
        assert_eq!(hi, 0.5);
        assert_eq!(hi as f64 + lo as f64, plan.window()[128]);
    }

    #[test]
    fn the_stage_tables_are_mel_cores_for_every_power_of_two() {
        let mut ran = 0;
        for bits in 2..15 {
            let mut c = Config::default();
            c.audio.clip_seconds = 4.0;
            c.segment.long = mel_core::spec::StageSetting::OFF;
            c.segment.short = mel_core::spec::StageSetting::OFF;
            c.mel.n_fft = 1 << bits;
            c.mel.win_length = None;
            c.mel.hop_length = None;
            c.mel.n_mels = 1;
            c.mel.f_max = None;
            let plan = match MelPlan::from_config(&c) {
                Ok(plan) => plan,
                Err(e) => {
                    println!("n_fft {}: {e}", 1 << bits);
                    continue;
                }
            };
            let n = plan.n_fft();
            let t = Tables::new(&plan);
            let radices = stockham_radices(n);
            let f64s = stockham_twiddles(n, &radices);
            assert_eq!(t.twiddle[..f64s.len()], f64s[..], "n_fft {n}");
            let dw = stockham_twiddles_dw(n, &radices);
            for (q, d) in t.twiddle_dw.iter().zip(&dw) {
                assert_eq!(*q, [d.hi[0], d.hi[1], d.lo[0], d.lo[1]], "n_fft {n}");
            }
            ran += 1;
        }
        assert!(ran >= 12, "only {ran} sizes");
    }
}

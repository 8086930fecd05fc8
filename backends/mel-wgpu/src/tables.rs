//! The tables the shader reads, built once per plan and uploaded once: the segment map
//! and filter spans in one integer buffer, the filter weights, and the window and
//! twiddles as hi + lo f32 pairs with the 12-bit splits Dekker's products need (every
//! value from `mel_core::dsp::tables`, which also gives mel-cuda its tables: the stage
//! radices and twiddle values have one home).

use mel_core::MelPlan;
use mel_core::dsp::{
    ComplexDw, FilterSpans, SegmentCsr, f32_dw, stockham_radices, stockham_twiddles_dw, twiddles_dw,
};

use crate::layout::one_pass;

/// The tables the shader reads, concatenated into few buffers, with the section starts.
#[derive(Debug, Clone, PartialEq)]
pub struct Tables {
    /// offsets, map start, map out, filter first, filter len, filter offset.
    pub ints: Vec<u32>,
    /// Start of each section of `ints`, in the order above.
    pub sections: [usize; 6],
    /// The filters' non-zero weights.
    pub weights: Vec<f32>,
    /// The analysis window per sample: `[hi, lo, hi's 12-bit high part, the rest of hi]`
    /// (hi rounded once from f64, lo the rest).
    pub window: Vec<[f32; 4]>,
    /// Twiddles, two entries each: `[re.hi, im.hi, re.lo, im.lo]` and the split of the hi
    /// parts `[re.hi12, im.hi12, re.rest, im.rest]`, computed in f64. For a power-of-two
    /// `n_fft` the FFT's per-stage tables ([`stockham_twiddles_dw`]), else
    /// `exp(-2πik/n_fft)` for every `k` ([`twiddles_dw`]).
    pub twiddle: Vec<[f32; 4]>,
}

/// Veltkamp's split of `x` into a part of at most 12 significant bits and the rest
/// (both exact f32: `hi + lo == x`), as the shader's Dekker products need their factors.
pub fn split12(x: f32) -> [f32; 2] {
    let c = 4097.0 * x;
    let hi = c - (c - x);
    [hi, x - hi]
}

/// A twiddle's two table entries (see [`Tables::twiddle`]).
fn twiddle_entries(t: &ComplexDw) -> [[f32; 4]; 2] {
    let [re1, re2] = split12(t.hi[0]);
    let [im1, im2] = split12(t.hi[1]);
    [[t.hi[0], t.hi[1], t.lo[0], t.lo[1]], [re1, im1, re2, im2]]
}

impl Tables {
    /// The tables of `plan`.
    pub fn new(plan: &MelPlan) -> Tables {
        let csr = SegmentCsr::new(plan.segment_map(), plan.distinct_offsets().len());
        let spans = FilterSpans::new(plan.sparse_filterbank());
        let offsets: Vec<u32> = plan.distinct_offsets().iter().map(|&o| o as u32).collect();
        let parts = [
            offsets,
            csr.start,
            csr.out,
            spans.first,
            spans.len,
            spans.offset,
        ];
        let mut ints = Vec::new();
        let mut sections = [0; 6];
        for (s, p) in sections.iter_mut().zip(&parts) {
            *s = ints.len();
            ints.extend_from_slice(p);
        }
        let n = plan.n_fft();
        let twiddles = if one_pass(plan) {
            stockham_twiddles_dw(n, &stockham_radices(n))
        } else {
            twiddles_dw(n)
        };
        let twiddle = twiddles.iter().flat_map(twiddle_entries).collect();
        let window = plan
            .window()
            .iter()
            .map(|&w| {
                let [hi, lo] = f32_dw(w);
                let [h1, h2] = split12(hi);
                [hi, lo, h1, h2]
            })
            .collect();
        Tables {
            ints,
            sections,
            weights: spans.weights,
            window,
            twiddle,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use mel_core::Config;

    #[test]
    fn splits_are_exact_twelve_bit_halves() {
        for x in [
            1.0f32,
            std::f32::consts::FRAC_1_SQRT_2,
            -0.123_456_79,
            3.0e-5,
            8191.5,
        ] {
            let [hi, lo] = split12(x);
            assert_eq!(hi + lo, x);
            // Each half fits in 12 significant bits: its mantissa has 12 trailing zeros.
            for h in [hi, lo] {
                assert_eq!(h.to_bits() & 0xfff, 0, "{x}: {h}");
            }
        }
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
            let dw = stockham_twiddles_dw(n, &stockham_radices(n));
            let t = Tables::new(&plan);
            assert_eq!(t.twiddle.len(), 2 * dw.len());
            for (e, d) in t.twiddle.chunks(2).zip(&dw) {
                assert_eq!(e[0], [d.hi[0], d.hi[1], d.lo[0], d.lo[1]], "n_fft {n}");
            }
            ran += 1;
        }
        assert!(ran >= 12, "only {ran} sizes");
    }
}

//! realfft one frame at a time, for sizes the batched FFT does not cover (any `n_fft`
//! that is not a power of two, such as speech-16k's 400), in f64 (the default) or f32
//! (with the DC remedy).

use std::sync::Arc;

use realfft::num_complex::Complex;
use realfft::{FftNum, RealFftPlanner, RealToComplex};

use crate::simd::Elem;

/// A realfft plan and what it needs per frame.
#[derive(Clone)]
pub(crate) struct SingleFft<E: FftNum> {
    fft: Arc<dyn RealToComplex<E>>,
    window: Vec<E>,
    dc: Option<(Vec<E>, Vec<E>)>,
    magnitude: bool,
}

/// Per-thread buffers of a [`SingleFft`].
pub(crate) struct SingleScratch<E> {
    frame: Vec<E>,
    spectrum: Vec<Complex<E>>,
    scratch: Vec<Complex<E>>,
}

impl<E: FftNum + Elem + Into<f64>> SingleFft<E> {
    /// The plan for frames weighted by `window` (rounded to `E` once). `dc`: the window's
    /// spectrum `(re, im)` at its first bins, for the DC remedy (`None`: no remedy).
    pub fn new(window: &[f64], dc: Option<(&[f32], &[f32])>, magnitude: bool) -> Self {
        let conv = |v: &[f32]| v.iter().map(|&x| <E as Elem>::from_f32(x)).collect();
        SingleFft {
            fft: RealFftPlanner::<E>::new().plan_fft_forward(window.len()),
            window: window.iter().map(|&w| <E as Elem>::from_f64(w)).collect(),
            dc: dc.map(|(re, im)| (conv(re), conv(im))),
            magnitude,
        }
    }

    /// Buffers for one thread.
    pub fn scratch(&self) -> SingleScratch<E> {
        SingleScratch {
            frame: self.fft.make_input_vec(),
            spectrum: self.fft.make_output_vec(),
            scratch: self.fft.make_scratch_vec(),
        }
    }

    /// FFT size.
    pub fn n(&self) -> usize {
        self.window.len()
    }

    /// Transforms `frame` (`n` samples) and writes its power (or magnitude), rounded to
    /// f32, at bin `k` to `out[k * stride]`, `k ≤ n / 2`.
    pub fn run(&self, s: &mut SingleScratch<E>, frame: &[f32], out: &mut [f32], stride: usize) {
        let n = self.n();
        let c = match self.dc {
            Some(_) => {
                let mut sum = E::default();
                frame[..n]
                    .iter()
                    .for_each(|&x| sum += <E as Elem>::from_f32(x));
                sum / <E as Elem>::from_f64(n as f64)
            }
            None => E::default(),
        };
        for ((f, &x), &w) in s.frame.iter_mut().zip(frame).zip(&self.window) {
            *f = (<E as Elem>::from_f32(x) - c) * w;
        }
        self.fft
            .process_with_scratch(&mut s.frame, &mut s.spectrum, &mut s.scratch)
            .expect("buffer sizes come from the plan");
        if let Some((re, im)) = &self.dc {
            for ((z, &wr), &wi) in s.spectrum.iter_mut().zip(re).zip(im) {
                z.re += c * wr;
                z.im += c * wi;
            }
        }
        for (k, z) in s.spectrum.iter().enumerate() {
            let p: f64 = (z.re * z.re + z.im * z.im).into();
            out[k * stride] = if self.magnitude { p.sqrt() } else { p } as f32;
        }
    }
}

//! Sample-rate conversion of a whole mono clip: an FFT overlap-add resampler whose
//! anti-aliasing filter is a Kaiser-windowed sinc designed from the contract, for every
//! ratio alike.
//!
//! The contract, for any two rates: flat within ±0.1 dB up to 0.9 × the lower Nyquist,
//! at least 80 dB down from the lower Nyquist on, output aligned with the input (no
//! delay) and `ceil(len × to / from)` samples long. The filter's length is computed from
//! the required attenuation and transition band (Kaiser's formula) in samples of the
//! lower rate, so a ratio that reduces badly (48000:4096 = 375:32) gets the same filter
//! as one that reduces well; only the FFT block, a multiple of the reduced ratio long
//! enough to hold the filter, depends on the ratio. A ratio whose block would be too
//! large (48 kHz to 1 Hz) is done in two steps through a power-of-two multiple of the
//! lower rate, each step meeting the contract on its own.

use mel_core::spec::ResampleQuality;
use realfft::num_complex::Complex;
use realfft::{ComplexToReal, RealFftPlanner, RealToComplex};
use std::cell::RefCell;
use std::f64::consts::PI;
use std::rc::Rc;
use std::sync::Arc;

/// The highest sample rate melctl reads or resamples to (a header claiming more is refused).
pub const MAX_RATE: u32 = mel_core::plan::MAX_SAMPLE_RATE;

/// The most samples one file may decode or resample to (2^25, 128 MiB of f32): a bound on
/// what a file's header can make melctl allocate.
pub const MAX_FILE_SAMPLES: usize = 1 << 25;

/// The largest FFT block (input or output samples) of one step: 2^20 holds any reduced
/// ratio of two rates up to [`MAX_RATE`]; a ratio that needs more takes two steps.
const MAX_BLOCK: usize = 1 << 20;

/// Why a resampling could not be done (rates out of range, an output over the limit, a
/// non-finite input sample, or a signal too loud for f32 once filtered).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("resampling {from} Hz to {to} Hz: {message}")]
pub struct ResampleError {
    /// Source rate.
    pub from: u32,
    /// Target rate.
    pub to: u32,
    /// What is wrong.
    pub message: String,
}

/// The anti-aliasing filter a quality asks for, in fractions of the lower Nyquist.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct FilterSpec {
    /// Where the pass band ends (the gain there is within a few 1e-4 dB of 1).
    pub pass: f64,
    /// Where the stop band begins.
    pub stop: f64,
    /// The stop band's attenuation in dB.
    pub attenuation_db: f64,
}

/// The filter of each quality. All three meet the contract (flat to 0.9, 80 dB from 1.0);
/// a better one keeps more of the top of the band and attenuates more, with a longer
/// filter (a larger FFT block: more memory and a little more time per clip).
pub fn filter_spec(quality: ResampleQuality) -> FilterSpec {
    let (pass, attenuation_db) = match quality {
        ResampleQuality::Fast => (0.905, 90.0),
        ResampleQuality::Balanced => (0.93, 110.0),
        ResampleQuality::Best => (0.95, 130.0),
    };
    FilterSpec {
        pass,
        stop: 0.995,
        attenuation_db,
    }
}

/// How many source frames past a sample the resampler's filter reaches (when converting
/// `from` Hz to `to` Hz at `quality`), rounded up: a decoder that stops reading early must
/// read this far past the last frame it keeps for the kept part to come out as if the
/// whole file had been read.
pub fn reach(from: u32, to: u32, quality: ResampleQuality) -> usize {
    if from == to || from == 0 || to == 0 {
        return 0;
    }
    let spec = filter_spec(quality);
    steps(from, to, &spec)
        .iter()
        .map(|&(a, b)| {
            // A later step's reach, in its own input samples, scaled to the source's.
            design(a, b, &spec).map_or(0.0, |d| d.half * from as f64 / a as f64)
        })
        .sum::<f64>()
        .ceil() as usize
        + 1
}

/// `input` (mono, at `from` Hz) converted to `to` Hz. The output has
/// `ceil(len × to / from)` samples, aligned with the input (the filter's delay removed).
pub fn resample(
    input: &[f32],
    from: u32,
    to: u32,
    quality: ResampleQuality,
) -> Result<Vec<f32>, ResampleError> {
    let refuse = |message: String| ResampleError { from, to, message };
    if from == 0 || to == 0 || from > MAX_RATE || to > MAX_RATE {
        return Err(refuse(format!("rates must be 1 to {MAX_RATE} Hz")));
    }
    let out_len = (input.len() as u128 * to as u128).div_ceil(from as u128);
    if out_len > MAX_FILE_SAMPLES as u128 {
        return Err(refuse(format!(
            "the result would hold {out_len} samples, over the limit of {MAX_FILE_SAMPLES}"
        )));
    }
    if from == to || input.is_empty() {
        return Ok(input.to_vec());
    }
    // One NaN would spread over a whole FFT block and its neighbours: name it instead.
    if let Some(i) = input.iter().position(|v| !v.is_finite()) {
        return Err(refuse(format!("non-finite sample at {i}")));
    }
    let spec = filter_spec(quality);
    let mut signal = std::borrow::Cow::Borrowed(input);
    for (a, b) in steps(from, to, &spec) {
        // Unreachable: a step between rates within a factor of two always fits.
        let step = cached_step(a, b, quality, &spec).ok_or_else(|| {
            refuse(format!(
                "no FFT block of at most {MAX_BLOCK} samples fits {a}:{b}"
            ))
        })?;
        signal = std::borrow::Cow::Owned(step.run(&signal));
    }
    let mut out = signal.into_owned();
    // Two steps may round up twice; the contract's length is the direct one.
    out.truncate(out_len as usize);
    if out.iter().any(|v| !v.is_finite()) {
        let peak = input.iter().fold(0.0f32, |m, v| m.max(v.abs()));
        return Err(refuse(format!(
            "the filtered signal goes beyond f32 (input peak {peak:e})"
        )));
    }
    Ok(out)
}

/// The rates each step converts between: one step when its block fits, else a step
/// through the largest power-of-two multiple of the lower rate whose step fits, then
/// the rest the same way (a halving ratio each time, so few steps).
fn steps(from: u32, to: u32, spec: &FilterSpec) -> Vec<(u32, u32)> {
    if design(from, to, spec).is_some() {
        return vec![(from, to)];
    }
    let (low, high) = (from.min(to), from.max(to));
    if high / 2 <= low {
        return vec![(from, to)];
    }
    // A step between `low` and 2·low always fits; find the largest multiple that does.
    let mut mid = 2 * low;
    while mid.saturating_mul(2) < high {
        let pair = if from > to {
            (mid * 2, to)
        } else {
            (from, mid * 2)
        };
        if design(pair.0, pair.1, spec).is_none() {
            break;
        }
        mid *= 2;
    }
    if from > to {
        let mut s = steps(from, mid, spec);
        s.push((mid, to));
        s
    } else {
        let mut s = vec![(from, mid)];
        s.extend(steps(mid, to, spec));
        s
    }
}

/// One step's geometry and filter: blocks of `n` input samples become blocks of `m`
/// output samples (n : m is the reduced ratio times `k`).
#[derive(Debug, Clone, Copy)]
struct Design {
    n: usize,
    m: usize,
    /// Output samples the filter delays by (removed).
    delay: usize,
    /// The filter's centre in input samples: `delay × from / to`, not always whole.
    centre: f64,
    /// The filter's half-length in input samples.
    half: f64,
    /// The cutoff (−6 dB) in cycles per input sample.
    cutoff: f64,
    /// Kaiser's β.
    beta: f64,
}

fn gcd(a: u64, b: u64) -> u64 {
    if b == 0 { a } else { gcd(b, a % b) }
}

/// The design for `from` → `to`, or `None` when its block would exceed [`MAX_BLOCK`].
fn design(from: u32, to: u32, spec: &FilterSpec) -> Option<Design> {
    let g = gcd(from as u64, to as u64);
    let (a, b) = ((from as u64 / g) as usize, (to as u64 / g) as usize);
    let lower = from.min(to) as f64;
    // Kaiser: length and β from the attenuation and the transition width (rad/sample
    // of the lower rate; its Nyquist is π).
    let atten = spec.attenuation_db;
    let width = PI * (spec.stop - spec.pass);
    let taps = (atten - 7.95) / (2.285 * width);
    let half = taps / 2.0 * from as f64 / lower;
    let beta = 0.1102 * (atten - 8.7);
    let cutoff = (spec.pass + spec.stop) / 4.0 * lower / from as f64;
    // The smallest k whose block holds the whole filter on both sides of its centre,
    // among those with no prime factor above 5 (FFT sizes that factor well: 48000:4096
    // takes 1.3 ms instead of 1.9 ms per 10 s clip at `balanced`).
    let mut k = next_smooth(((2.0 * half / a as f64).ceil() as usize).max(1));
    loop {
        let (n, m) = (k.checked_mul(a)?, k.checked_mul(b)?);
        if n.max(m) > MAX_BLOCK {
            return None;
        }
        let delay = m / 2;
        let centre = delay as f64 * a as f64 / b as f64;
        if centre - half >= 0.0 && centre + half <= n as f64 {
            return Some(Design {
                n,
                m,
                delay,
                centre,
                half,
                cutoff,
                beta,
            });
        }
        k = next_smooth(k + 1);
    }
}

/// The smallest number from `k` on with no prime factor above 5.
fn next_smooth(mut k: usize) -> usize {
    loop {
        let mut r = k;
        for p in [2, 3, 5] {
            while r.is_multiple_of(p) {
                r /= p;
            }
        }
        if r == 1 {
            return k;
        }
        k += 1;
    }
}

/// The zeroth-order modified Bessel function of the first kind (its series).
fn bessel_i0(x: f64) -> f64 {
    let (mut sum, mut term, mut k) = (1.0, 1.0, 1.0);
    let q = x * x / 4.0;
    while term > sum * 1e-17 {
        term *= q / (k * k);
        sum += term;
        k += 1.0;
    }
    sum
}

/// A planned step: the filter's spectrum and the two FFTs.
struct Step {
    d: Design,
    /// The filter's spectrum over the 2n-point block, scaled for the round trip.
    filter: Vec<Complex<f32>>,
    fft: Arc<dyn RealToComplex<f32>>,
    ifft: Arc<dyn ComplexToReal<f32>>,
}

impl Step {
    fn new(d: Design) -> Step {
        let mut planner = RealFftPlanner::<f32>::new();
        let fft = planner.plan_fft_forward(2 * d.n);
        let ifft = planner.plan_fft_inverse(2 * d.m);
        // The windowed sinc around the (possibly fractional) centre, in f64, unit DC gain.
        let lo = (d.centre - d.half).ceil().max(0.0) as usize;
        let hi = ((d.centre + d.half).floor() as usize).min(d.n);
        let i0_beta = bessel_i0(d.beta);
        let mut taps = vec![0.0f64; 2 * d.n];
        let mut sum = 0.0;
        for (i, t) in taps.iter_mut().enumerate().take(hi + 1).skip(lo) {
            let x = i as f64 - d.centre;
            let r = (x / d.half).clamp(-1.0, 1.0);
            let window = bessel_i0(d.beta * (1.0 - r * r).sqrt()) / i0_beta;
            let arg = 2.0 * d.cutoff * x;
            let sinc = if arg == 0.0 {
                1.0
            } else {
                (PI * arg).sin() / (PI * arg)
            };
            *t = window * sinc;
            sum += *t;
        }
        // Unit gain at DC through FFT (unscaled), spectrum copy and inverse FFT (unscaled).
        let scale = 1.0 / (sum * 2.0 * d.n as f64);
        let mut t32: Vec<f32> = taps.iter().map(|t| (t * scale) as f32).collect();
        let mut filter = fft.make_output_vec();
        fft.process(&mut t32, &mut filter)
            .expect("the buffers are the plan's own");
        Step {
            d,
            filter,
            fft,
            ifft,
        }
    }

    /// `input` through this step: `ceil(len × m / n)` samples.
    fn run(&self, input: &[f32]) -> Vec<f32> {
        let Design { n, m, delay, .. } = self.d;
        let out_len = (input.len() * m).div_ceil(n);
        let blocks = input.len().div_ceil(n);
        // Everything the blocks add up to, from which the delay is then cut.
        let mut acc = vec![0.0f32; (blocks + 1) * m];
        let mut buf = self.fft.make_input_vec();
        let mut spectrum = self.fft.make_output_vec();
        let mut out_spectrum = self.ifft.make_input_vec();
        let mut out_buf = self.ifft.make_output_vec();
        let mut scratch_fw = self.fft.make_scratch_vec();
        let mut scratch_inv = self.ifft.make_scratch_vec();
        // Bins below the lower Nyquist are kept; from it on, the filter has removed all.
        let kept = n.min(m);
        for (j, chunk) in input.chunks(n).enumerate() {
            buf[..chunk.len()].copy_from_slice(chunk);
            buf[chunk.len()..].fill(0.0);
            self.fft
                .process_with_scratch(&mut buf, &mut spectrum, &mut scratch_fw)
                .expect("the buffers are the plan's own");
            for ((o, s), h) in out_spectrum[..kept]
                .iter_mut()
                .zip(&spectrum[..kept])
                .zip(&self.filter)
            {
                *o = s * h;
            }
            out_spectrum[kept..].fill(Complex::new(0.0, 0.0));
            out_spectrum[0].im = 0.0;
            self.ifft
                .process_with_scratch(&mut out_spectrum, &mut out_buf, &mut scratch_inv)
                .expect("the buffers are the plan's own");
            for (a, v) in acc[j * m..].iter_mut().zip(&out_buf) {
                *a += v;
            }
        }
        acc.drain(..delay.min(acc.len()));
        acc.truncate(out_len);
        acc
    }
}

/// A planned step and what it was planned for (from, to, quality).
type Cached = ((u32, u32, ResampleQuality), Rc<Step>);

thread_local! {
    /// The last few steps planned on this thread: a build converts clip after clip at the
    /// same rates.
    static STEPS: RefCell<Vec<Cached>> = const { RefCell::new(Vec::new()) };
}

/// The step `from` → `to`, planned once per thread.
fn cached_step(
    from: u32,
    to: u32,
    quality: ResampleQuality,
    spec: &FilterSpec,
) -> Option<Rc<Step>> {
    let key = (from, to, quality);
    STEPS.with(|cache| {
        let mut cache = cache.borrow_mut();
        if let Some(i) = cache.iter().position(|(k, _)| *k == key) {
            let hit = cache.remove(i);
            cache.push(hit.clone());
            return Some(hit.1);
        }
        let step = Rc::new(Step::new(design(from, to, spec)?));
        if cache.len() == 4 {
            cache.remove(0);
        }
        cache.push((key, step.clone()));
        Some(step)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tone(freq: f64, rate: u32, n: usize) -> Vec<f32> {
        (0..n)
            .map(|i| (0.5 * (2.0 * PI * freq * i as f64 / rate as f64).sin()) as f32)
            .collect()
    }

    #[test]
    fn absurd_rates_and_outputs_are_refused_before_allocating() {
        let x = vec![0.0f32; 1000];
        let q = ResampleQuality::Balanced;
        assert!(
            resample(&x, 4_294_967_295, 4096, q)
                .unwrap_err()
                .message
                .contains("rates")
        );
        assert!(resample(&x, 0, 4096, q).is_err());
        // 1 Hz to 768 kHz: 768 M samples out, refused.
        let e = resample(&x, 1, MAX_RATE, q).unwrap_err();
        assert!(e.message.contains("over the limit"), "{e}");
        assert_eq!(resample(&x, 4096, 8192, q).unwrap().len(), 2000);
    }

    #[test]
    fn non_finite_samples_and_overflow_are_refused_not_spread() {
        let q = ResampleQuality::Balanced;
        let mut x = tone(440.0, 48_000, 48_000);
        x[1_000] = f32::NAN;
        let e = match resample(&x, 48_000, 4_096, q) {
            Err(e) => e,
            Ok(y) => panic!(
                "one NaN in, {} of {} samples out are NaN, and no error",
                y.iter().filter(|v| v.is_nan()).count(),
                y.len()
            ),
        };
        assert!(e.message.contains("non-finite sample at 1000"), "{e}");
        x[1_000] = f32::INFINITY;
        assert!(resample(&x, 48_000, 4_096, q).is_err());
        // Finite but so loud that the filter's sums leave f32.
        let loud: Vec<f32> = tone(440.0, 48_000, 48_000)
            .iter()
            .map(|v| v * 3e38)
            .collect();
        let e = resample(&loud, 48_000, 4_096, q).unwrap_err();
        assert!(e.message.contains("beyond f32"), "{e}");
    }

    #[test]
    fn same_rate_is_a_copy() {
        let x = tone(100.0, 1000, 500);
        assert_eq!(resample(&x, 1000, 1000, ResampleQuality::Best).unwrap(), x);
    }
}

//! Sample-rate conversion of a whole mono clip with rubato's synchronous FFT resampler.

use mel_core::config::ResampleQuality;

/// The highest sample rate melctl reads or resamples to (a header claiming more is refused:
/// rubato's tables grow with the rates).
pub const MAX_RATE: u32 = mel_core::plan::MAX_SAMPLE_RATE;

/// The most samples one file may decode or resample to (2^25, 128 MiB of f32): a bound on
/// what a file's header can make melctl allocate.
pub const MAX_FILE_SAMPLES: usize = 1 << 25;

/// Why a resampling could not be done (rates out of range, an output over the limit, or
/// rubato refused the buffers).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("resampling {from} Hz to {to} Hz: {message}")]
pub struct ResampleError {
    /// Source rate.
    pub from: u32,
    /// Target rate.
    pub to: u32,
    /// rubato's message.
    pub message: String,
}

/// `input` (mono, at `from` Hz) converted to `to` Hz. The output has
/// `ceil(len × to / from)` samples, aligned with the input (rubato's delay removed).
pub fn resample(
    input: &[f32],
    from: u32,
    to: u32,
    quality: ResampleQuality,
) -> Result<Vec<f32>, ResampleError> {
    use rubato::audioadapter_buffers::direct::InterleavedSlice;
    use rubato::{Fft, FixedSync, Resampler, WindowFunction};
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
    let (chunk, sub_chunks) = match quality {
        ResampleQuality::Fast => (256, 1),
        ResampleQuality::Balanced => (1024, 4),
        ResampleQuality::Best => (8192, 1),
    };
    let fail = |e: &dyn std::fmt::Display| ResampleError {
        from,
        to,
        message: e.to_string(),
    };
    let mut r = Fft::<f32>::new_custom(
        from as usize,
        to as usize,
        chunk,
        sub_chunks,
        1,
        WindowFunction::BlackmanHarris2,
        FixedSync::Input,
    )
    .map_err(|e| fail(&e))?;
    let adapter = InterleavedSlice::new(input, 1, input.len()).map_err(|e| fail(&e))?;
    let out = r
        .process_all(&adapter, input.len(), None)
        .map_err(|e| fail(&e))?;
    Ok(out.take_data())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// SNR in dB of `got` against a pure sine of `freq` Hz at `rate`, fitted in amplitude
    /// and phase by least squares, over the middle of the signal (edges excluded).
    fn sine_fit(got: &[f32], freq: f64, rate: f64) -> (f64, f64) {
        let n = got.len();
        let (lo, hi) = (n / 8, n - n / 8);
        let (mut ss, mut sc, mut cc, mut ys, mut yc) = (0.0, 0.0, 0.0, 0.0, 0.0);
        for (i, &y) in got.iter().enumerate().take(hi).skip(lo) {
            let w = 2.0 * std::f64::consts::PI * freq * i as f64 / rate;
            let (s, c) = w.sin_cos();
            ss += s * s;
            sc += s * c;
            cc += c * c;
            ys += y as f64 * s;
            yc += y as f64 * c;
        }
        let det = ss * cc - sc * sc;
        let a = (ys * cc - yc * sc) / det;
        let b = (yc * ss - ys * sc) / det;
        let (mut sig, mut err) = (0.0, 0.0);
        for (i, &y) in got.iter().enumerate().take(hi).skip(lo) {
            let w = 2.0 * std::f64::consts::PI * freq * i as f64 / rate;
            let fit = a * w.sin() + b * w.cos();
            sig += fit * fit;
            err += (y as f64 - fit).powi(2);
        }
        (10.0 * (sig / err).log10(), (a * a + b * b).sqrt())
    }

    fn tone(freq: f64, rate: u32, n: usize) -> Vec<f32> {
        (0..n)
            .map(|i| {
                (0.5 * (2.0 * std::f64::consts::PI * freq * i as f64 / rate as f64).sin()) as f32
            })
            .collect()
    }

    #[test]
    fn resampled_sines_keep_their_amplitude_with_high_snr() {
        // 44.1 kHz -> 16 kHz and 8 kHz -> 4096 Hz, tones across the pass band.
        for (from, to) in [(44_100u32, 16_000u32), (8_000, 4_096), (4_000, 4_096)] {
            for quality in [
                ResampleQuality::Fast,
                ResampleQuality::Balanced,
                ResampleQuality::Best,
            ] {
                let mut worst_snr = f64::INFINITY;
                let mut ripple: f64 = 0.0;
                for frac in [0.0517, 0.2033, 0.3471] {
                    let freq = frac * to as f64;
                    let x = tone(freq, from, 4 * from as usize);
                    let y = resample(&x, from, to, quality).unwrap();
                    let expect = (x.len() as f64 * to as f64 / from as f64).ceil() as usize;
                    assert!(y.len().abs_diff(expect) <= 1, "{} vs {expect}", y.len());
                    let (snr, amp) = sine_fit(&y, freq, to as f64);
                    worst_snr = worst_snr.min(snr);
                    ripple = ripple.max((20.0 * (amp / 0.5).log10()).abs());
                }
                println!(
                    "{from} -> {to} {quality:?}: worst SNR {worst_snr:.1} dB, pass-band gain error {ripple:.4} dB"
                );
                assert!(
                    worst_snr > 100.0,
                    "{from}->{to} {quality:?}: SNR {worst_snr:.1} dB"
                );
                assert!(
                    ripple < 0.01,
                    "{from}->{to} {quality:?}: gain error {ripple:.4} dB"
                );
            }
        }
    }

    #[test]
    fn tones_above_the_new_nyquist_are_removed() {
        // 44.1 kHz -> 16 kHz: a 9.7 kHz tone (above 8 kHz) must not alias into the output.
        for quality in [
            ResampleQuality::Fast,
            ResampleQuality::Balanced,
            ResampleQuality::Best,
        ] {
            let x = tone(9_700.0, 44_100, 4 * 44_100);
            let y = resample(&x, 44_100, 16_000, quality).unwrap();
            let mid = &y[y.len() / 8..y.len() - y.len() / 8];
            let rms =
                (mid.iter().map(|v| (*v as f64).powi(2)).sum::<f64>() / mid.len() as f64).sqrt();
            let attenuation = 20.0 * (0.5 / 2f64.sqrt() / rms.max(1e-30)).log10();
            println!("{quality:?}: a 9.7 kHz tone is attenuated by {attenuation:.1} dB");
            assert!(attenuation > 60.0, "{quality:?}: only {attenuation:.1} dB");
        }
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
    fn same_rate_is_a_copy() {
        let x = tone(100.0, 1000, 500);
        assert_eq!(resample(&x, 1000, 1000, ResampleQuality::Best).unwrap(), x);
    }
}

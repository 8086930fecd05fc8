//! Decoding only the beginning of a long file (`trim = "start"`) must give the clip that
//! resampling the whole file gives: the decoder reads past the kept part as far as the
//! resampler's filter reaches, at every rate and quality.

use mel_audio::{decode_into, fit_clip};
use mel_core::spec::{AudioConfig, ResampleQuality, TrimPolicy};

/// Deterministic white noise in [-0.5, 0.5), as 16-bit samples.
fn noise(n: usize) -> Vec<i16> {
    let mut s = 0x9E37_79B9_7F4A_7C15u64;
    (0..n)
        .map(|_| {
            s = s
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            ((s >> 48) as i16) / 2
        })
        .collect()
}

#[test]
fn a_clip_cut_from_the_start_of_a_long_file_equals_the_whole_file_resampled() {
    let dir = tempfile::tempdir().unwrap();
    // The highest source rate melctl takes, to the lowest preset rate: the filter's reach
    // in source frames is longest there.
    for (from, to) in [(768_000u32, 4_096u32), (384_000, 4_096), (192_000, 8_000)] {
        let samples = noise(from as usize); // 1 s, four times the clip
        let path = dir.path().join(format!("{from}.wav"));
        let spec = hound::WavSpec {
            channels: 1,
            sample_rate: from,
            bits_per_sample: 16,
            sample_format: hound::SampleFormat::Int,
        };
        let mut w = hound::WavWriter::create(&path, spec).unwrap();
        for v in &samples {
            w.write_sample(*v).unwrap();
        }
        w.finalize().unwrap();
        let whole: Vec<f32> = samples.iter().map(|v| *v as f32 / 32768.0).collect();
        for quality in [
            ResampleQuality::Fast,
            ResampleQuality::Balanced,
            ResampleQuality::Best,
        ] {
            let audio = AudioConfig {
                sample_rate: to,
                clip_seconds: 0.25,
                trim: TrimPolicy::Start,
                resample_quality: quality,
                ..AudioConfig::default()
            };
            let n = audio.clip_samples();
            let (mut got, mut want) = (vec![0.0f32; n], vec![0.0f32; n]);
            decode_into(&path, &audio, &mut got).unwrap();
            fit_clip(&whole, from, &audio, &mut want).unwrap();
            let rms = (want.iter().map(|v| v * v).sum::<f32>() / n as f32).sqrt();
            let (at, worst) = got
                .iter()
                .zip(&want)
                .map(|(g, w)| (g - w).abs())
                .enumerate()
                .fold((0, 0.0f32), |m, (i, d)| if d > m.1 { (i, d) } else { m });
            let db = 20.0 * (worst / rms).max(1e-12).log10();
            println!(
                "{from} -> {to} {quality:?}: worst difference {db:.1} dB (sample {at} of {n})"
            );
            assert!(
                db < -100.0,
                "{from} Hz -> {to} Hz ({quality:?}): the clip cut from the start differs \
                 from the whole file resampled by {db:.1} dB at sample {at} of {n}"
            );
        }
    }
}

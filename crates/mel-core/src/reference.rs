//! A slow, plain f64 implementation of the whole transform (direct DFT), used as an
//! independent oracle in tests: it shares only the definitions, not the fast code.

use std::f64::consts::PI;

use crate::dsp::pad_segment;
use crate::plan::MelPlan;
use crate::spec::LogScale;

/// The spectrogram of one segment, `[n_mels][n_frames]`, before log compression, in f64.
pub fn segment_mel(plan: &MelPlan, segment: &[f64]) -> Vec<f64> {
    let n = plan.n_fft();
    let pad = if plan.center() { n / 2 } else { 0 };
    let mut padded = Vec::new();
    pad_segment(segment, pad, plan.pad_mode(), &mut padded);
    let cos: Vec<f64> = (0..n)
        .map(|i| (2.0 * PI * i as f64 / n as f64).cos())
        .collect();
    let sin: Vec<f64> = (0..n)
        .map(|i| (2.0 * PI * i as f64 / n as f64).sin())
        .collect();
    let mut out = vec![0.0; plan.n_mels() * plan.n_frames()];
    let mut spec = vec![0.0; plan.n_freqs()];
    for t in 0..plan.n_frames() {
        let frame = &padded[t * plan.hop_length()..t * plan.hop_length() + n];
        for (k, s) in spec.iter_mut().enumerate() {
            let (mut re, mut im) = (0.0, 0.0);
            for (j, (&x, &w)) in frame.iter().zip(plan.window()).enumerate() {
                let idx = (k * j) % n;
                re += x * w * cos[idx];
                im -= x * w * sin[idx];
            }
            let mag2 = re * re + im * im;
            *s = if plan.power() == 2 { mag2 } else { mag2.sqrt() };
        }
        for m in 0..plan.n_mels() {
            out[m * plan.n_frames() + t] = spec
                .iter()
                .enumerate()
                .map(|(f, &p)| p * plan.filterbank()[f * plan.n_mels() + m])
                .sum();
        }
    }
    out
}

/// Applies the plan's log compression to one segment's spectrogram in place
/// (top_db relative to this spectrogram's own peak).
pub fn apply_log(plan: &MelPlan, values: &mut [f64]) {
    match plan.log() {
        LogScale::Db { amin, top_db } => {
            let k = plan.db_multiplier();
            for v in values.iter_mut() {
                *v = k * v.max(amin).log10();
            }
            if let Some(top) = top_db {
                let floor = values.iter().cloned().fold(f64::NEG_INFINITY, f64::max) - top;
                for v in values.iter_mut() {
                    *v = v.max(floor);
                }
            }
        }
        LogScale::Ln { offset } => values.iter_mut().for_each(|v| *v = (*v + offset).ln()),
        LogScale::None => {}
    }
}

/// The whole output of one clip (already padded/trimmed to `plan.clip_samples`), in f64,
/// laid out `[long][short][n_mels][n_frames]`.
pub fn clip_mel(plan: &MelPlan, clip: &[f64]) -> Vec<f64> {
    assert_eq!(clip.len(), plan.clip_samples());
    let distinct: Vec<Vec<f64>> = plan
        .distinct_offsets()
        .iter()
        .map(|&o| {
            let mut v = segment_mel(plan, &clip[o..o + plan.segment_len()]);
            apply_log(plan, &mut v);
            v
        })
        .collect();
    plan.segment_map()
        .iter()
        .flat_map(|&d| distinct[d as usize].iter().copied())
        .collect()
}

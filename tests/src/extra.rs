//! Checks beyond the goldens that every GPU backend runs: odd configurations against the
//! direct-DFT reference, and a large random batch against the CPU backend.

use mel_core::reference;
use mel_core::spec::{PadMode, Stage, StageSetting, WindowKind};
use mel_core::{Config, Dtype, LogScale, MelBackend, MelPlan, OutputBuf};

use crate::compare;

/// Configurations beyond the goldens (odd n_fft → the direct-DFT path, hamming window
/// shorter than n_fft, constant padding, power 1, slaney, ln, top_db, center off, and an
/// odd number of values per segment).
pub fn odd_configs() -> Vec<Config> {
    let mut configs = Vec::new();
    let mut c = Config::default();
    c.audio.sample_rate = 8000;
    c.audio.clip_seconds = 0.1;
    c.segment.long = StageSetting::OFF;
    c.segment.short = StageSetting::On(Stage {
        window: 300,
        hop: 100,
    });
    c.mel.n_fft = 255;
    c.mel.win_length = Some(200);
    c.mel.hop_length = Some(50);
    c.mel.window = WindowKind::Hamming;
    c.mel.pad_mode = PadMode::Constant;
    c.mel.n_mels = 20;
    c.mel.f_min = 100.0;
    c.mel.f_max = Some(3900.0);
    configs.push(c.clone());
    c.mel.power = 1.0;
    c.mel.mel_scale = mel_core::spec::MelScale::Slaney;
    c.log = LogScale::Ln { offset: 1e-3 };
    configs.push(c.clone());
    c.mel.center = false;
    c.log = LogScale::Db {
        amin: 1e-10,
        top_db: Some(30.0),
    };
    configs.push(c.clone());
    c.mel.n_fft = 256; // power of two, no centre, top_db
    c.mel.win_length = Some(256);
    configs.push(c.clone());
    c.mel.center = true;
    c.mel.n_mels = 21; // 21 mels × 7 frames: an odd number of values per segment
    configs.push(c);
    configs
}

/// `clips` deterministic test clips for `plan` (tones times a sawtooth envelope,
/// quantised to 16 bits), in f64 for the reference and f32 for backends.
pub fn tone_clips(plan: &MelPlan, clips: usize) -> (Vec<f64>, Vec<f32>) {
    let mut exact = Vec::new();
    for c in 0..clips {
        exact.extend((0..plan.clip_samples()).map(|n| {
            let x = ((n as f64 * (0.37 + c as f64 * 0.1)).sin() * 0.4
                + (n as f64 * 0.011).cos() * 0.2)
                * ((n % 97) as f64 / 97.0);
            (x * 32768.0).round() / 32768.0
        }));
    }
    let input = exact.iter().map(|&x| x as f32).collect();
    (exact, input)
}

/// `clips` clips of 16-bit-quantised white noise, every third one 54 dB quieter.
pub fn noise_clips(plan: &MelPlan, clips: usize) -> Vec<f32> {
    (0..clips * plan.clip_samples())
        .map(|i| {
            let r = ((i as u64)
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407)
                >> 33) as f32;
            ((r / 2f32.powi(31)) * 2.0 - 1.0)
                * if (i / plan.clip_samples()).is_multiple_of(3) {
                    0.001
                } else {
                    0.5
                }
        })
        .map(|x| (x * 32768.0).round() / 32768.0)
        .collect()
}

/// Runs every odd configuration in `dtype` through `backend_for` and compares with the
/// direct-DFT f64 reference; returns one line per failure and prints the worst errors.
pub fn check_odd_configs(
    dtype: Dtype,
    mut backend_for: impl FnMut(MelPlan) -> Box<dyn MelBackend>,
) -> Vec<String> {
    let mut failures = Vec::new();
    for (i, mut config) in odd_configs().into_iter().enumerate() {
        config.output.dtype = dtype;
        let plan = MelPlan::from_config(&config).expect("odd configurations are valid");
        let clips = 3;
        let (exact, input) = tone_clips(&plan, clips);
        let expected: Vec<f64> = exact
            .chunks(plan.clip_samples())
            .flat_map(|c| reference::clip_mel(&plan, c))
            .collect();
        let mut out = OutputBuf::zeros(dtype, clips * plan.values_per_clip());
        let mut b = backend_for(plan.clone());
        if let Err(e) = b.compute(&input, out.as_mut_slice()) {
            failures.push(format!("odd config {i} {}: {e}", dtype.name()));
            continue;
        }
        let c = compare(&plan, &out, &expected);
        println!(
            "odd config {i} {}: worst {:.5} over {} bins",
            dtype.name(),
            c.worst_error,
            c.compared
        );
        if let Some(m) = c.first_mismatch {
            failures.push(format!("odd config {i} {}: {m}", dtype.name()));
        }
        if c.compared <= clips * plan.values_per_clip() / 2 {
            failures.push(format!(
                "odd config {i}: too few bins compared ({})",
                c.compared
            ));
        }
    }
    failures
}

/// Every power-of-two `n_fft` from 4 to 2048 on a whole 0.25 s clip at 16 kHz: each
/// stage sequence a GPU FFT generator can emit (radix 8s, then a 4 or a 2).
pub fn fft_size_configs() -> Vec<Config> {
    (2..=11)
        .map(|bits| {
            let n_fft = 1usize << bits;
            let mut c = Config::default();
            c.audio.sample_rate = 16000;
            c.audio.clip_seconds = 0.25;
            c.segment.long = StageSetting::OFF;
            c.segment.short = StageSetting::OFF;
            c.mel.n_fft = n_fft;
            c.mel.win_length = None;
            c.mel.hop_length = Some((n_fft / 2).max(100));
            c.mel.n_mels = (n_fft / 8).clamp(1, 24);
            c.mel.f_max = None;
            c.log = LogScale::Db {
                amin: 1e-10,
                top_db: Some(70.0),
            };
            c
        })
        .collect()
}

/// Runs every [`fft_size_configs`] plan in f32 through `backend_for` (`None`: the
/// backend refused the plan, having said why) and compares with the direct-DFT f64
/// reference. Returns the failures and the `n_fft`s that ran.
pub fn check_fft_sizes(
    mut backend_for: impl FnMut(MelPlan) -> Option<Box<dyn MelBackend>>,
) -> (Vec<String>, Vec<usize>) {
    let mut failures = Vec::new();
    let mut ran = Vec::new();
    for mut config in fft_size_configs() {
        config.output.dtype = Dtype::F32;
        let plan = MelPlan::from_config(&config).expect("fft size configurations are valid");
        let clips = 2;
        let (exact, input) = tone_clips(&plan, clips);
        let expected: Vec<f64> = exact
            .chunks(plan.clip_samples())
            .flat_map(|c| reference::clip_mel(&plan, c))
            .collect();
        let n = plan.n_fft();
        let Some(mut b) = backend_for(plan.clone()) else {
            continue;
        };
        let mut out = OutputBuf::zeros(Dtype::F32, clips * plan.values_per_clip());
        if let Err(e) = b.compute(&input, out.as_mut_slice()) {
            failures.push(format!("n_fft {n}: {e}"));
            continue;
        }
        ran.push(n);
        let c = compare(&plan, &out, &expected);
        println!(
            "n_fft {n}: worst {:.5} dB over {} bins",
            c.worst_error, c.compared
        );
        if let Some(m) = c.first_mismatch {
            failures.push(format!("n_fft {n}: {m}"));
        }
        if c.compared <= clips * plan.values_per_clip() / 2 {
            failures.push(format!("n_fft {n}: too few bins compared ({})", c.compared));
        }
    }
    (failures, ran)
}

/// The largest difference, in f16 units in the last place, between two f16 outputs, and
/// how many values differ.
pub fn f16_ulp_difference(a: &OutputBuf, b: &OutputBuf) -> (u32, usize) {
    let mut worst = 0u32;
    let mut differ = 0usize;
    for i in 0..a.len() {
        let (x, y) = (a.get_f64(i), b.get_f64(i));
        if x != y {
            differ += 1;
            let (hx, hy) = (
                half::f16::from_f64(x).to_bits(),
                half::f16::from_f64(y).to_bits(),
            );
            worst = worst.max((hx as i32 - hy as i32).unsigned_abs());
        }
    }
    (worst, differ)
}

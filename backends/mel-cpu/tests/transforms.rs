//! The transform alone (window, FFT, power) for every power-of-two size 4..=2048 and
//! 400, every instruction set this CPU has and both precisions, against a direct f64 DFT
//! of the same windowed frames.

use mel_core::{Config, MelPlan, Preset};
use mel_cpu::transforms::Transforms;
use mel_cpu::{CpuOptions, FloatWidth, Isa, Transform};

fn plan(n: usize) -> MelPlan {
    let mut c: Config = Preset::Speech16k.config();
    c.mel.n_fft = n;
    c.mel.win_length = Some(n);
    c.mel.n_mels = 1;
    MelPlan::from_config(&c).unwrap()
}

/// 16 frames: tones over noise, a DC offset of half full scale (the DC remedy's case),
/// a click and silence, quantised to 16 bits.
fn frames(n: usize) -> Vec<f32> {
    let mut state = 0x2545_f491u32;
    (0..16 * n)
        .map(|i| {
            state ^= state << 13;
            state ^= state >> 17;
            state ^= state << 5;
            let noise = state as f64 / u32::MAX as f64 - 0.5;
            let (f, t) = (i / n, (i % n) as f64);
            let x = match f % 4 {
                0 => 0.5 * (t * 0.3 + f as f64).sin() + 1e-4 * noise,
                1 => 0.5 + 3e-5 * noise,
                2 => {
                    if i % n == n / 3 {
                        1.0
                    } else {
                        0.0
                    }
                }
                _ => 0.2 * noise,
            };
            ((x * 32768.0).round() / 32768.0) as f32
        })
        .collect()
}

/// `|X[k]|²` of each frame, windowed, by a direct f64 DFT.
fn reference(p: &MelPlan, x: &[f32]) -> Vec<Vec<f64>> {
    let n = p.n_fft();
    x.chunks(n)
        .map(|f| {
            (0..p.n_freqs())
                .map(|k| {
                    let (mut re, mut im) = (0.0, 0.0);
                    for (j, (&v, &w)) in f.iter().zip(p.window()).enumerate() {
                        let a = -2.0 * std::f64::consts::PI * ((j * k) % n) as f64 / n as f64;
                        re += v as f64 * w * a.cos();
                        im += v as f64 * w * a.sin();
                    }
                    re * re + im * im
                })
                .collect()
        })
        .collect()
}

/// The worst power error of any bin relative to its frame's energy (Σ|X|²).
fn worst_relative_error(n: usize, options: CpuOptions) -> Option<f64> {
    let p = plan(n);
    let mut t = Transforms::new(&p, options).ok()?;
    let x = frames(n);
    let mut out = vec![0f32; 16 * p.n_freqs()];
    t.power(&x, &mut out);
    let reference = reference(&p, &x);
    let mut worst = 0f64;
    for (f, r) in reference.iter().enumerate() {
        let energy: f64 = r.iter().sum::<f64>().max(1e-30);
        for (k, &want) in r.iter().enumerate() {
            let got = out[((f / 8) * p.n_freqs() + k) * 8 + f % 8] as f64 / t.scale() as f64;
            worst = worst.max((got - want).abs() / energy);
        }
    }
    Some(worst)
}

fn isas() -> Vec<Isa> {
    [Isa::Portable, Isa::Avx2]
        .into_iter()
        .filter(|i| i.is_available())
        .collect()
}

#[test]
fn batched_transform_matches_a_direct_dft_for_every_size_isa_and_precision() {
    for isa in isas() {
        for precision in [FloatWidth::F64, FloatWidth::F32] {
            for bits in 2..=11 {
                let n = 1 << bits;
                let o = CpuOptions {
                    isa,
                    precision: Some(precision),
                    transform: Transform::Auto,
                };
                let t = Transforms::new(&plan(n), o).unwrap();
                assert!(t.batched(), "{n} should be batched");
                let worst = worst_relative_error(n, o).unwrap();
                // f64: the power's rounding to f32; f32: a few f32 roundings of the frame.
                let bound = if precision == FloatWidth::F64 {
                    1e-7
                } else {
                    5e-7
                };
                println!("{isa:?} {precision:?} n {n}: worst {worst:.2e} of the frame energy");
                assert!(worst < bound, "{isa:?} {precision:?} n {n}: {worst:e}");
            }
        }
    }
}

#[test]
fn realfft_path_matches_a_direct_dft_for_400_and_512() {
    for precision in [FloatWidth::F64, FloatWidth::F32] {
        for n in [400, 512] {
            let o = CpuOptions {
                isa: Isa::Portable,
                precision: Some(precision),
                transform: Transform::RealFft,
            };
            let worst = worst_relative_error(n, o).unwrap();
            let bound = if precision == FloatWidth::F64 {
                1e-7
            } else {
                5e-7
            };
            println!("realfft {precision:?} n {n}: worst {worst:.2e} of the frame energy");
            assert!(worst < bound, "realfft {precision:?} n {n}: {worst:e}");
        }
    }
}

#[test]
fn an_instruction_set_this_cpu_lacks_is_an_error_and_auto_is_never_reported() {
    let plan = plan(512);
    let b = mel_cpu::CpuBackend::new(plan.clone());
    assert_ne!(b.isa(), Isa::Auto);
    assert!(b.batched());
    for isa in [Isa::Portable, Isa::Avx2] {
        let r = mel_cpu::CpuBackend::with_options(
            plan.clone(),
            CpuOptions {
                isa,
                ..CpuOptions::default()
            },
        );
        assert_eq!(r.is_ok(), isa.is_available(), "{isa:?}");
    }
    let b = mel_cpu::CpuBackend::with_options(
        plan,
        CpuOptions {
            transform: Transform::RealFft,
            ..CpuOptions::default()
        },
    )
    .unwrap();
    assert!(!b.batched());
}

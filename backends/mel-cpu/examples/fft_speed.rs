//! Per-frame cost of every transform option, window and power included, on one thread:
//! realfft f64 / f32 (one frame at a time, the old path and the fallback) and the batched
//! FFT (8 frames per call) in f64 and f32, AVX2 and portable; plus bare realfft
//! `process` calls for reference. Sizes 512 and 400 (400 has no batched path).
//!
//! `taskset -c 1 cargo run --release -p mel-cpu --features fft-diagnostics --example fft_speed [rounds]`
use std::time::Instant;

use mel_core::{Config, MelPlan, Preset};
use mel_cpu::transforms::Transforms;
use mel_cpu::{CpuOptions, FloatWidth, Isa, Transform};
use realfft::RealFftPlanner;

fn plan(n: usize) -> MelPlan {
    let mut c: Config = Preset::Speech16k.config();
    c.mel.n_fft = n;
    c.mel.win_length = Some(n);
    MelPlan::from_config(&c).unwrap()
}

fn frames(n: usize, count: usize) -> Vec<f32> {
    let mut state = 0x9e37_79b9u32;
    (0..n * count)
        .map(|i| {
            state ^= state << 13;
            state ^= state >> 17;
            state ^= state << 5;
            0.1 * (state as f32 / u32::MAX as f32 - 0.5) + 0.3 * (i as f32 * 0.07).sin()
        })
        .collect()
}

/// ns per frame for `options`, over about 0.3 s.
fn time_options(n: usize, options: CpuOptions) -> Option<f64> {
    let p = plan(n);
    let mut t = Transforms::new(&p, options).ok()?;
    if options.transform == Transform::Auto && !t.batched() {
        return None;
    }
    let count = 64;
    let input = frames(n, count);
    let mut out = vec![0f32; count * p.n_freqs()];
    let reps = (300_000_000 / (n * count * 10)).max(1);
    t.power(&input, &mut out);
    let start = Instant::now();
    for _ in 0..reps {
        t.power(std::hint::black_box(&input), &mut out);
        std::hint::black_box(&out);
    }
    Some(start.elapsed().as_nanos() as f64 / (reps * count) as f64)
}

fn bare_realfft<T: realfft::FftNum + From<f32>>(n: usize) -> f64 {
    let f = RealFftPlanner::<T>::new().plan_fft_forward(n);
    let mut i = f.make_input_vec();
    let mut o = f.make_output_vec();
    let mut s = f.make_scratch_vec();
    for (k, x) in i.iter_mut().enumerate() {
        *x = T::from((k as f32 * 0.1).sin());
    }
    let reps = 300_000;
    let start = Instant::now();
    for _ in 0..reps {
        f.process_with_scratch(&mut i, &mut o, &mut s).unwrap();
        std::hint::black_box(&o);
    }
    start.elapsed().as_nanos() as f64 / reps as f64
}

fn main() {
    let rounds: usize = std::env::args().nth(1).map_or(3, |a| a.parse().unwrap());
    let options = [
        (
            "realfft f64 (per frame)",
            Isa::Portable,
            FloatWidth::F64,
            Transform::RealFft,
        ),
        (
            "realfft f32 + DC remedy",
            Isa::Portable,
            FloatWidth::F32,
            Transform::RealFft,
        ),
        (
            "batched f64, avx2 (4 lanes)",
            Isa::Avx2,
            FloatWidth::F64,
            Transform::Auto,
        ),
        (
            "batched f64, portable",
            Isa::Portable,
            FloatWidth::F64,
            Transform::Auto,
        ),
        (
            "batched f32, avx2 (8 lanes)",
            Isa::Avx2,
            FloatWidth::F32,
            Transform::Auto,
        ),
        (
            "batched f32, portable",
            Isa::Portable,
            FloatWidth::F32,
            Transform::Auto,
        ),
    ];
    for n in [512, 400] {
        let mut results: Vec<Vec<f64>> = vec![vec![]; options.len() + 2];
        for _ in 0..rounds {
            for (i, &(_, isa, precision, transform)) in options.iter().enumerate() {
                let o = CpuOptions {
                    isa,
                    precision: Some(precision),
                    transform,
                };
                if let Some(ns) = time_options(n, o) {
                    results[i].push(ns);
                }
            }
            results[options.len()].push(bare_realfft::<f64>(n));
            results[options.len() + 1].push(bare_realfft::<f32>(n));
        }
        println!("n = {n}: ns per frame, min / median of {rounds} rounds");
        let names = options
            .iter()
            .map(|o| o.0)
            .chain(["bare realfft f64 process", "bare realfft f32 process"]);
        for (name, mut r) in names.zip(results) {
            if r.is_empty() {
                println!("  {name:<30} (not available for this size)");
                continue;
            }
            r.sort_by(f64::total_cmp);
            println!("  {name:<30} {:>7.1} / {:>7.1}", r[0], r[r.len() / 2]);
        }
    }
}

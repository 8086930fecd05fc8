//! Whole-backend cost per leak-4k clip on one thread for every option, interleaved in
//! rounds so that a shared machine's drift hits all options alike; prints the minimum
//! and median per option. The old f64 realfft backend is not here: compare with
//! criterion's saved baseline or an old build.
//!
//! `taskset -c 1 cargo run --release -p mel-cpu --example clip_speed [rounds] [name filter]`
use std::time::Instant;

use mel_core::{Config, Dtype, MelBackend, MelPlan, OutputBuf};
use mel_cpu::{CpuBackend, CpuOptions, FloatWidth, Isa, Transform};

fn clips(n: usize) -> Vec<f32> {
    let len = 40_960;
    let mut state = 0x1234_5678u32;
    (0..n * len)
        .map(|i| {
            state ^= state << 13;
            state ^= state >> 17;
            state ^= state << 5;
            let noise = (state as f32 / u32::MAX as f32) * 2.0 - 1.0;
            0.1 * noise + 0.3 * ((i % len) as f32 * 0.07).sin()
        })
        .collect()
}

fn main() {
    let rounds: usize = std::env::args().nth(1).map_or(5, |a| a.parse().unwrap());
    // An optional second argument keeps only the options whose name contains it.
    let only = std::env::args().nth(2).unwrap_or_default();
    let n = 16;
    let input = clips(n);
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(1)
        .build()
        .unwrap();
    let mut variants: Vec<(String, CpuOptions, Dtype)> = vec![];
    for isa in [Isa::Avx2, Isa::Portable] {
        if !isa.is_available() {
            continue;
        }
        for precision in [FloatWidth::F64, FloatWidth::F32] {
            for transform in [Transform::Auto, Transform::RealFft] {
                let o = CpuOptions {
                    isa,
                    precision: Some(precision),
                    transform,
                };
                variants.push((
                    format!("{isa:?} {precision:?} {transform:?} f16"),
                    o,
                    Dtype::F16,
                ));
            }
        }
    }
    let best = CpuOptions::default();
    variants.push(("default, f32 output".into(), best, Dtype::F32));
    variants.retain(|v| v.0.contains(&only));
    let mut times: Vec<Vec<f64>> = vec![vec![]; variants.len()];
    for _ in 0..rounds {
        for (i, (_, options, dtype)) in variants.iter().enumerate() {
            let mut config = Config::default();
            config.output.dtype = *dtype;
            let plan = MelPlan::from_config(&config).unwrap();
            let mut b = CpuBackend::with_options(plan.clone(), *options).unwrap();
            let mut out = OutputBuf::zeros(*dtype, n * plan.values_per_clip());
            pool.install(|| b.compute(&input, out.as_mut_slice()).unwrap());
            let reps = 4;
            let start = Instant::now();
            for _ in 0..reps {
                pool.install(|| b.compute(&input, out.as_mut_slice()).unwrap());
            }
            times[i].push(start.elapsed().as_secs_f64() / (reps * n) as f64);
        }
    }
    println!(
        "µs per leak-4k clip, one thread: min / median of {rounds} rounds (clips/s at the min)"
    );
    for ((name, ..), mut t) in variants.iter().zip(times) {
        t.sort_by(f64::total_cmp);
        println!(
            "  {name:<34} {:>7.1} / {:>7.1}  ({:>5.0} clips/s)",
            t[0] * 1e6,
            t[t.len() / 2] * 1e6,
            1.0 / t[0]
        );
    }
}

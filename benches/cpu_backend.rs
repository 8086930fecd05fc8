//! CPU backend throughput on leak-4k batches, on one core and on all cores, with the
//! default options (f64 batched transform, the CPU's best instruction set) and, on one
//! core, every other transform option.
//! `cargo bench -p mel-benches` (for per-core figures: `taskset -c 1 cargo bench ...`)

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use mel_core::{Config, Dtype, MelBackend, MelPlan, OutputBuf};
use mel_cpu::{CpuBackend, CpuOptions, FloatWidth, Isa, Transform};

fn bench(c: &mut Criterion) {
    let clips = 64;
    let input = mel_benches::leak_clips(clips);
    let mut group = c.benchmark_group("cpu-leak-4k");
    group.throughput(Throughput::Elements(clips as u64));
    group.sample_size(10);
    let all = rayon::current_num_threads();
    let mut threads = vec![1, all];
    threads.dedup();
    let variants = [
        ("", CpuOptions::default()),
        (
            "-f32-transform",
            CpuOptions {
                precision: Some(FloatWidth::F32),
                ..CpuOptions::default()
            },
        ),
        (
            "-portable",
            CpuOptions {
                isa: Isa::Portable,
                ..CpuOptions::default()
            },
        ),
        (
            "-realfft-f64",
            CpuOptions {
                transform: Transform::RealFft,
                ..CpuOptions::default()
            },
        ),
    ];
    for dtype in [Dtype::F16, Dtype::F32] {
        let mut config = Config::default();
        config.output.dtype = dtype;
        let plan = MelPlan::from_config(&config).unwrap();
        let mut out = OutputBuf::zeros(dtype, clips * plan.values_per_clip());
        for &threads in &threads {
            // The other options only on one thread, f16.
            let n_variants = if threads == 1 && dtype == Dtype::F16 {
                variants.len()
            } else {
                1
            };
            let pool = rayon::ThreadPoolBuilder::new()
                .num_threads(threads)
                .build()
                .unwrap();
            for (suffix, options) in &variants[..n_variants] {
                let mut backend = CpuBackend::with_options(plan.clone(), *options).unwrap();
                group.bench_function(format!("{}-{threads}-threads{suffix}", dtype.name()), |b| {
                    b.iter(|| pool.install(|| backend.compute(&input, out.as_mut_slice()).unwrap()))
                });
            }
        }
    }
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);

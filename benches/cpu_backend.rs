//! CPU backend throughput on leak-4k batches, on one core and on all cores.
//! `cargo bench -p mel-benches`

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use mel_core::{Config, Dtype, MelBackend, MelPlan, OutputBuf};
use mel_cpu::CpuBackend;

fn bench(c: &mut Criterion) {
    let clips = 64;
    let input = mel_benches::leak_clips(clips);
    let mut group = c.benchmark_group("cpu-leak-4k");
    group.throughput(Throughput::Elements(clips as u64));
    group.sample_size(10);
    for dtype in [Dtype::F16, Dtype::F32] {
        let mut config = Config::default();
        config.output.dtype = dtype;
        let plan = MelPlan::from_config(&config).unwrap();
        let mut out = OutputBuf::zeros(dtype, clips * plan.values_per_clip());
        let all = rayon::current_num_threads();
        for threads in [1, all] {
            let pool = rayon::ThreadPoolBuilder::new()
                .num_threads(threads)
                .build()
                .unwrap();
            let mut backend = CpuBackend::new(plan.clone());
            group.bench_function(format!("{}-{threads}-threads", dtype.name()), |b| {
                b.iter(|| pool.install(|| backend.compute(&input, out.as_mut_slice()).unwrap()))
            });
        }
    }
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);

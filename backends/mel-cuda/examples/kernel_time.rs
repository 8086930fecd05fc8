//! Times the CUDA kernel alone on resident data (device events, median of many launches)
//! for the leak-4k preset, over a few launch shapes, and the backend end to end from
//! host memory (copies included). Prints one JSON line per measurement.
//!
//! `kernel_time [CLIPS] [REPS]` (defaults 8192 and 50).

use std::time::Instant;

use mel_core::{Config, Dtype, MelBackend, MelPlan, OutputBuf};
use mel_cuda::{CudaBackend, Shape};

fn median(mut v: Vec<f32>) -> f32 {
    v.sort_by(f32::total_cmp);
    v[v.len() / 2]
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<usize> = std::env::args()
        .skip(1)
        .filter_map(|a| a.parse().ok())
        .collect();
    let clips = args.first().copied().unwrap_or(8192);
    let reps = args.get(1).copied().unwrap_or(50);
    // A third argument `default`: the default shape in f16 only (for profilers).
    let only_default = std::env::args().nth(3).is_some_and(|a| a == "default");
    for dtype in [Dtype::F16, Dtype::F32] {
        let mut config = Config::default();
        config.output.dtype = dtype;
        let plan = MelPlan::from_config(&config)?;
        let mut shapes: Vec<Option<Shape>> = vec![None];
        if only_default && dtype != Dtype::F16 {
            continue;
        }
        if dtype == Dtype::F16 && !only_default {
            for (warps, segs, min_blocks) in [
                (4, 8, 4),
                (4, 8, 5),
                (2, 4, 8),
                (8, 16, 2),
                (8, 16, 0),
                (4, 16, 4),
                (2, 8, 0),
            ] {
                shapes.push(Some(Shape {
                    warps,
                    segs,
                    min_blocks,
                }));
            }
        }
        for shape in shapes {
            let mut b = match CudaBackend::with_shape(plan.clone(), 0, 256, shape) {
                Ok(b) => b,
                Err(e) => {
                    println!("{{\"shape\":\"{shape:?}\",\"error\":\"{e}\"}}");
                    continue;
                }
            };
            let t = b.time_kernel(clips, reps)?;
            let ms = median(t.clone());
            let min = t.iter().copied().fold(f32::INFINITY, f32::min);
            let s = b.shape();
            println!(
                "{{\"what\":\"kernel\",\"dtype\":\"{}\",\"device\":\"{}\",\"warps\":{},\"segs\":{},\"min_blocks\":{},\"clips\":{clips},\"reps\":{reps},\"median_ms\":{ms:.4},\"min_ms\":{min:.4},\"clips_per_s\":{:.0}}}",
                dtype.name(),
                b.device_name(),
                s.warps,
                s.segs,
                s.min_blocks,
                clips as f64 / (ms as f64 / 1e3)
            );
        }
        if only_default {
            continue;
        }
        // The backend from host memory: pinned staging, two streams, copies both ways.
        for (batch, chunk) in [(1024usize, 256usize), (4096, 1024)] {
            let mut b = CudaBackend::new(plan.clone(), 0, chunk)?;
            let input: Vec<f32> = (0..batch * plan.clip_samples())
                .map(|i| ((i % 1000) as f32 / 1000.0) - 0.5)
                .collect();
            let mut out = OutputBuf::zeros(dtype, batch * plan.values_per_clip());
            b.compute(&input, out.as_mut_slice())?;
            let mut times = Vec::new();
            for _ in 0..10 {
                let t = Instant::now();
                b.compute(&input, out.as_mut_slice())?;
                times.push(t.elapsed().as_secs_f32() * 1e3);
            }
            let ms = median(times);
            println!(
                "{{\"what\":\"backend_from_host\",\"dtype\":\"{}\",\"batch\":{batch},\"chunk\":{chunk},\"median_ms\":{ms:.3},\"clips_per_s\":{:.0}}}",
                dtype.name(),
                batch as f64 / (ms as f64 / 1e3)
            );
        }
    }
    Ok(())
}

//! Times the CUDA kernels alone on resident data (device events, median of many
//! launches) for the leak-4k preset, and the backend end to end from host memory (copies
//! included, with the device's upload / kernel / download split). Prints one JSON line
//! per measurement, each with the kernel, the launch shape and how it was chosen.
//!
//! `kernel_time [CLIPS] [REPS] [default|sweep] [--kernel f64|f32|both]` (defaults 8192,
//! 50, both kernels): with no mode, each kernel in the shape chosen for the device, f16
//! then f32 output, then the backend from host memory; `default`: the chosen shape in
//! f16 only (for profilers); `sweep`: the chosen shape and others, f16 only.
//! `MELCTL_CUDA_SHAPE=WARPS,SEGS[,MIN_BLOCKS]` replaces the chosen shape (for tuning).

use std::time::Instant;

use mel_core::{Config, Dtype, MelBackend, MelPlan, OutputBuf};
use mel_cuda::{CudaBackend, CudaKernel, CudaOptions, Shape};

fn median(mut v: Vec<f32>) -> f32 {
    v.sort_by(f32::total_cmp);
    v[v.len() / 2]
}

/// The shape `MELCTL_CUDA_SHAPE` names, if any.
fn env_shape() -> Result<Option<Shape>, String> {
    let Ok(s) = std::env::var("MELCTL_CUDA_SHAPE") else {
        return Ok(None);
    };
    let v: Vec<usize> = s.split(',').filter_map(|x| x.trim().parse().ok()).collect();
    match v.as_slice() {
        [w, g, rest @ ..] if *w > 0 && *g > 0 && rest.len() <= 1 => Ok(Some(Shape {
            warps: *w,
            segs: *g,
            min_blocks: rest.first().copied().unwrap_or(0),
        })),
        _ => Err(format!(
            "MELCTL_CUDA_SHAPE={s:?}: expected WARPS,SEGS[,MIN_BLOCKS]"
        )),
    }
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let numbers: Vec<usize> = args.iter().filter_map(|a| a.parse().ok()).collect();
    let clips = numbers.first().copied().unwrap_or(8192);
    let reps = numbers.get(1).copied().unwrap_or(50);
    let sweep = args.iter().any(|a| a == "sweep");
    let only_default = args.iter().any(|a| a == "default");
    let kernels: Vec<CudaKernel> = match args.iter().position(|a| a == "--kernel") {
        Some(i) => match args.get(i + 1).map(String::as_str) {
            Some("both") | None => CudaKernel::ALL.to_vec(),
            Some(k) => vec![k.parse::<CudaKernel>()?],
        },
        None => CudaKernel::ALL.to_vec(),
    };
    let forced = env_shape()?;
    for kernel in kernels {
        for dtype in [Dtype::F16, Dtype::F32] {
            if (sweep || only_default) && dtype != Dtype::F16 {
                continue;
            }
            let mut config = Config::default();
            config.output.dtype = dtype;
            let plan = MelPlan::from_config(&config)?;
            let mut shapes: Vec<Option<Shape>> = vec![forced];
            if sweep && dtype == Dtype::F16 {
                for (warps, segs, min_blocks) in [
                    (4, 8, 0),
                    (4, 4, 0),
                    (4, 8, 4),
                    (2, 8, 0),
                    (2, 4, 8),
                    (8, 16, 0),
                    (8, 8, 2),
                ] {
                    shapes.push(Some(Shape {
                        warps,
                        segs,
                        min_blocks,
                    }));
                }
            }
            for shape in shapes {
                let options = CudaOptions {
                    kernel: Some(kernel),
                    shape,
                };
                let mut b = match CudaBackend::with_options(plan.clone(), 0, 256, options) {
                    Ok(b) => b,
                    Err(e) => {
                        println!(
                            "{{\"kernel\":\"{}\",\"shape\":\"{shape:?}\",\"error\":\"{e}\"}}",
                            kernel.name()
                        );
                        continue;
                    }
                };
                let t = b.time_kernel(clips, reps)?;
                let ms = median(t.clone());
                let min = t.iter().copied().fold(f32::INFINITY, f32::min);
                let s = b.shape();
                let l = b.limits();
                let regs = b.registers().unwrap_or(0);
                println!(
                    "{{\"what\":\"kernel\",\"kernel\":\"{}\",\"dtype\":\"{}\",\"device\":\"{}\",\"shape_chosen\":{},\"warps\":{},\"segs\":{},\"min_blocks\":{},\"registers\":{regs},\"resident_warps_per_sm\":{},\"shared_bytes\":{},\"sms\":{},\"shared_per_block\":{},\"shared_per_sm\":{},\"clips\":{clips},\"reps\":{reps},\"median_ms\":{ms:.4},\"min_ms\":{min:.4},\"clips_per_s\":{:.0}}}",
                    kernel.name(),
                    dtype.name(),
                    b.device_name(),
                    shape.is_none(),
                    s.warps,
                    s.segs,
                    s.min_blocks,
                    l.resident_blocks(&s, &plan, regs) * s.warps,
                    s.shared_bytes(&plan),
                    l.sm_count,
                    l.shared_per_block,
                    l.shared_per_sm,
                    clips as f64 / (ms as f64 / 1e3)
                );
            }
            if sweep || only_default {
                continue;
            }
            // The backend from host memory: pinned staging, two streams, copies both ways.
            for (batch, chunk) in [(1024usize, 256usize), (4096, 1024)] {
                let options = CudaOptions {
                    kernel: Some(kernel),
                    shape: forced,
                };
                let mut b = CudaBackend::with_options(plan.clone(), 0, chunk, options)?;
                let input: Vec<f32> = (0..batch * plan.clip_samples())
                    .map(|i| ((i % 1000) as f32 / 1000.0) - 0.5)
                    .collect();
                let mut out = OutputBuf::zeros(dtype, batch * plan.values_per_clip());
                b.compute(&input, out.as_mut_slice())?;
                let before = b.device_times().unwrap_or_default();
                let mut times = Vec::new();
                for _ in 0..10 {
                    let t = Instant::now();
                    b.compute(&input, out.as_mut_slice())?;
                    times.push(t.elapsed().as_secs_f32() * 1e3);
                }
                let ms = median(times);
                // Device time of the 10 timed calls, per call.
                let after = b.device_times().unwrap_or_default();
                let per = |a: f64, b: f64| (a - b) / 10.0 * 1e3;
                println!(
                    "{{\"what\":\"backend_from_host\",\"kernel\":\"{}\",\"dtype\":\"{}\",\"batch\":{batch},\"chunk\":{chunk},\"median_ms\":{ms:.3},\"clips_per_s\":{:.0},\"device_ms_per_call\":{{\"upload\":{:.3},\"kernel\":{:.3},\"download\":{:.3}}}}}",
                    kernel.name(),
                    dtype.name(),
                    batch as f64 / (ms as f64 / 1e3),
                    per(after.upload_seconds, before.upload_seconds),
                    per(after.kernel_seconds, before.kernel_seconds),
                    per(after.download_seconds, before.download_seconds),
                );
            }
        }
    }
    Ok(())
}

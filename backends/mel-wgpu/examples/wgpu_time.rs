//! Times the wgpu shader alone on resident data (GPU timestamp queries, median of many
//! dispatches) for the leak-4k preset, and the backend end to end from host memory
//! (uploads, both passes, readback). Prints one JSON line per measurement, like the
//! CUDA backend's `kernel_time`.
//!
//! `wgpu_time [CLIPS] [REPS]` (defaults 4096 and 30); `MEL_WGPU_DEVICE` picks the adapter.

use std::time::Instant;

use mel_core::{Config, Dtype, MelBackend, MelPlan, OutputBuf};
use mel_wgpu::{AdapterChoice, WgpuBackend, WgpuOptions};

fn median(mut v: Vec<f32>) -> f32 {
    v.sort_by(f32::total_cmp);
    v[v.len() / 2]
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<usize> = std::env::args()
        .skip(1)
        .filter_map(|a| a.parse().ok())
        .collect();
    let clips = args.first().copied().unwrap_or(4096);
    let reps = args.get(1).copied().unwrap_or(30);
    // MEL_WGPU_DEVICE picks the adapter; MELCTL_WGPU_WORKGROUP bounds the workgroup.
    let device: Option<mel_core::config::DeviceSelector> = std::env::var("MEL_WGPU_DEVICE")
        .ok()
        .and_then(|v| v.parse().ok());
    let choice = AdapterChoice::from(device.as_ref());
    let options = WgpuOptions {
        max_workgroup: std::env::var("MELCTL_WGPU_WORKGROUP")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(WgpuOptions::default().max_workgroup),
    };
    for dtype in [Dtype::F16, Dtype::F32] {
        let mut config = Config::default();
        config.output.dtype = dtype;
        let plan = MelPlan::from_config(&config)?;
        let mut b = WgpuBackend::with_options(plan.clone(), &choice, clips, options)?;
        let n = clips.min(b.chunk_clips());
        let c = b.arithmetic();
        println!(
            "{{\"what\":\"wgpu_arithmetic_check\",\"adapter\":\"{}\",\"cases\":{},\"shielded_wrong\":{},\"unshielded_twosum_lost\":{}}}",
            b.adapter().name,
            c.cases,
            c.shielded_wrong,
            c.unshielded_wrong
        );
        let t = b.time_kernel(n, reps)?;
        let ms = median(t.clone());
        let min = t.iter().copied().fold(f32::INFINITY, f32::min);
        println!(
            "{{\"what\":\"wgpu_kernel\",\"dtype\":\"{}\",\"adapter\":\"{}\",\"clips\":{n},\"reps\":{reps},\"median_ms\":{ms:.4},\"min_ms\":{min:.4},\"clips_per_s\":{:.0},\"workgroup\":{},\"pairs_per_workgroup\":{},\"twiddles_in_workgroup\":{}}}",
            dtype.name(),
            b.adapter().name,
            n as f64 / (ms as f64 / 1e3),
            b.layout().workgroup,
            b.layout().fft.as_ref().map_or(0, |f| f.pairs),
            b.layout()
                .fft
                .as_ref()
                .is_some_and(|f| f.twiddles_in_workgroup),
        );
        // The backend from host memory: a batch of CLIPS in chunks of CLIPS/4 alternating
        // between the two buffer sets, uploads and readbacks overlapped with compute.
        let (batch, chunk) = (clips, (clips / 4).max(1));
        let mut b = WgpuBackend::new(plan.clone(), &choice, chunk)?;
        let input: Vec<f32> = (0..batch * plan.clip_samples())
            .map(|i| ((i % 1000) as f32 / 1000.0) - 0.5)
            .collect();
        let mut out = OutputBuf::zeros(dtype, batch * plan.values_per_clip());
        b.compute(&input, out.as_mut_slice())?;
        let mut times = Vec::new();
        for _ in 0..reps.clamp(1, 5) {
            let t = Instant::now();
            b.compute(&input, out.as_mut_slice())?;
            times.push(t.elapsed().as_secs_f32() * 1e3);
        }
        let ms = median(times);
        // Device time of every compute call above (timestamps inside encoders), if offered.
        let split = b.device_times().map_or("null".to_string(), |t| {
            format!(
                "{{\"upload_s\":{:.4},\"kernel_s\":{:.4},\"download_s\":{:.4}}}",
                t.upload_seconds, t.kernel_seconds, t.download_seconds
            )
        });
        println!(
            "{{\"what\":\"wgpu_backend_from_host\",\"dtype\":\"{}\",\"batch\":{batch},\"chunk\":{},\"median_ms\":{ms:.3},\"clips_per_s\":{:.0},\"device_times\":{split}}}",
            dtype.name(),
            b.chunk_clips(),
            batch as f64 / (ms as f64 / 1e3)
        );
    }
    Ok(())
}

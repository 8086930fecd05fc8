//! Timing the kernel alone, on resident data: what `kernel_time` (and the GPU check)
//! reports, apart from the per-chunk device times `compute` adds up.

use mel_core::Result;

use crate::{CudaBackend, err};

impl CudaBackend {
    /// Times the kernel alone on `clips` resident clips: `reps` launches, each timed with
    /// device events. Returns milliseconds per launch.
    pub fn time_kernel(&mut self, clips: usize, reps: usize) -> Result<Vec<f32>> {
        let stream = self.ctx.new_stream().map_err(err)?;
        let n = clips * self.plan.clip_samples();
        let host: Vec<f32> = (0..n)
            .map(|i| (((i as u64).wrapping_mul(2654435761) >> 7) % 65536) as f32 / 32768.0 - 1.0)
            .collect();
        let input = stream.clone_htod(&host).map_err(err)?;
        let mut output = stream
            .alloc_zeros::<u8>(clips * self.plan.bytes_per_clip())
            .map_err(err)?;
        let flags = Some(cudarc::driver::sys::CUevent_flags::CU_EVENT_DEFAULT);
        let mut times = Vec::with_capacity(reps);
        for _ in 0..reps.max(1) + 2 {
            let a = self.ctx.new_event(flags).map_err(err)?;
            let b = self.ctx.new_event(flags).map_err(err)?;
            a.record(&stream).map_err(err)?;
            self.kernel.launch(&stream, &input, clips, &mut output)?;
            b.record(&stream).map_err(err)?;
            b.synchronize().map_err(err)?;
            times.push(a.elapsed_ms(&b).map_err(err)?);
        }
        times.drain(..2); // warm-up
        Ok(times)
    }
}

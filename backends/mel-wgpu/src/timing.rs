//! Timing the shader alone, on resident data, with GPU timestamp queries: what
//! `wgpu_time` (and the GPU check) reports, apart from the per-chunk device times
//! `compute` adds up.

use std::sync::mpsc;

use mel_core::Result;

use crate::adapters::err;
use crate::{MAX_GROUPS_X, WgpuBackend};

impl WgpuBackend {
    /// Times the shader alone on `clips` resident clips (at most [`chunk_clips`](Self::chunk_clips)):
    /// `reps` dispatches (after 2 warm-up ones) in one submission, each timed with GPU
    /// timestamp queries around its passes. Returns milliseconds per dispatch.
    pub fn time_kernel(&mut self, clips: usize, reps: usize) -> Result<Vec<f32>> {
        if clips == 0 || clips > self.chunk_clips {
            return Err(err(format!(
                "time_kernel: 1..={} clips, not {clips}",
                self.chunk_clips
            )));
        }
        if !self
            .device
            .features()
            .contains(wgpu::Features::TIMESTAMP_QUERY)
        {
            return Err(err(format!(
                "{} offers no timestamp queries",
                self.adapter.name
            )));
        }
        let host: Vec<f32> = (0..clips * self.plan.clip_samples())
            .map(|i| (((i as u64).wrapping_mul(2654435761) >> 7) % 65536) as f32 / 32768.0 - 1.0)
            .collect();
        let slot = &self.slots[0];
        self.queue
            .write_buffer(&slot.input, 0, bytemuck::cast_slice(&host));
        self.queue.write_buffer(
            &slot.params,
            0,
            bytemuck::cast_slice(&[clips as u32, 0, 0, 0]),
        );
        let runs = reps.max(1) + 2;
        let queries = self.device.create_query_set(&wgpu::QuerySetDescriptor {
            label: Some("time_kernel"),
            ty: wgpu::QueryType::Timestamp,
            count: 2 * runs as u32,
        });
        let bytes = (16 * runs) as u64;
        let buffer = |usage| {
            self.device.create_buffer(&wgpu::BufferDescriptor {
                label: Some("timestamps"),
                size: bytes,
                usage,
                mapped_at_creation: false,
            })
        };
        use wgpu::BufferUsages as U;
        let resolved = buffer(U::QUERY_RESOLVE | U::COPY_SRC);
        let readback = buffer(U::MAP_READ | U::COPY_DST);
        let segments = clips * self.plan.distinct_offsets().len();
        let mut enc = self
            .device
            .create_command_encoder(&wgpu::CommandEncoderDescriptor { label: None });
        let last = self.pipelines.len() - 1;
        for r in 0..runs as u32 {
            for (p, (pipeline, per_segment)) in self.pipelines.iter().enumerate() {
                let groups = segments * per_segment;
                let gx = groups.min(MAX_GROUPS_X);
                let mut pass = enc.begin_compute_pass(&wgpu::ComputePassDescriptor {
                    label: None,
                    timestamp_writes: Some(wgpu::ComputePassTimestampWrites {
                        query_set: &queries,
                        beginning_of_pass_write_index: (p == 0).then_some(2 * r),
                        end_of_pass_write_index: (p == last).then_some(2 * r + 1),
                    }),
                });
                pass.set_pipeline(pipeline);
                pass.set_bind_group(0, &slot.bind_group, &[]);
                pass.dispatch_workgroups(gx as u32, groups.div_ceil(gx) as u32, 1);
            }
        }
        enc.resolve_query_set(&queries, 0..2 * runs as u32, &resolved, 0);
        enc.copy_buffer_to_buffer(&resolved, 0, &readback, 0, bytes);
        let index = self.queue.submit([enc.finish()]);
        let (tx, rx) = mpsc::channel();
        readback.slice(..).map_async(wgpu::MapMode::Read, move |r| {
            let _ = tx.send(r);
        });
        self.device
            .poll(wgpu::PollType::WaitForSubmissionIndex(index))
            .map_err(|e| err(format!("waiting for the GPU: {e}")))?;
        self.check_device()?;
        rx.recv()
            .map_err(|_| err("the readback was dropped"))?
            .map_err(|e| err(format!("reading timestamps: {e}")))?;
        let period_ns = self.queue.get_timestamp_period() as f64;
        let ticks: Vec<u64> = bytemuck::cast_slice(&readback.slice(..).get_mapped_range()).to_vec();
        readback.unmap();
        Ok(ticks
            .chunks(2)
            .skip(2) // warm-up
            .map(|t| (t[1].wrapping_sub(t[0]) as f64 * period_ns / 1e6) as f32)
            .collect())
    }
}

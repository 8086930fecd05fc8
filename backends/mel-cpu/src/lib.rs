//! The CPU mel backend: clips in parallel with rayon, one realfft plan shared by all
//! threads with per-thread scratch, each distinct segment computed once, the
//! filterbank applied through its non-zero spans, f32 arithmetic, output converted with `half`.
#![warn(missing_docs)]

mod kernel;

use std::sync::Arc;

use mel_core::{MelBackend, MelPlan, OutputSlice, Result};
use rayon::prelude::*;
use realfft::{RealFftPlanner, RealToComplex};

use kernel::{OutElem, Scratch};

/// The CPU backend. Runs in the calling thread's rayon pool (use `ThreadPool::install` to bound it).
pub struct CpuBackend {
    plan: MelPlan,
    fft: Arc<dyn RealToComplex<f64>>,
    /// Each mel filter's non-zero span: first bin and f64 weights.
    filters: Vec<(usize, Vec<f64>)>,
}

impl CpuBackend {
    /// Prepares the FFT plan and the filterbank's non-zero spans for `plan`.
    pub fn new(plan: MelPlan) -> Self {
        let fft = RealFftPlanner::<f64>::new().plan_fft_forward(plan.n_fft());
        let n_mels = plan.n_mels();
        let filters = plan
            .sparse_filterbank()
            .filters
            .iter()
            .enumerate()
            .map(|(m, f)| {
                let span = f.start..f.start + f.weights.len();
                (
                    f.start,
                    span.map(|bin| plan.filterbank()[bin * n_mels + m])
                        .collect(),
                )
            })
            .collect();
        CpuBackend { plan, fft, filters }
    }

    fn run<T: OutElem>(&self, clips: &[f32], out: &mut [T]) {
        let n = self.plan.clip_samples();
        let vpc = self.plan.values_per_clip();
        out.par_chunks_mut(vpc)
            .zip(clips.par_chunks(n))
            .for_each_init(
                || Scratch::new(&self.plan, self.fft.as_ref()),
                |scratch, (dst, clip)| {
                    kernel::clip_mel(
                        &self.plan,
                        self.fft.as_ref(),
                        &self.filters,
                        scratch,
                        clip,
                        dst,
                    )
                },
            );
    }
}

impl MelBackend for CpuBackend {
    fn name(&self) -> &str {
        "cpu"
    }

    fn plan(&self) -> &MelPlan {
        &self.plan
    }

    fn compute(&mut self, clips: &[f32], out: OutputSlice<'_>) -> Result<()> {
        self.plan.check_batch(clips.len(), &out)?;
        match out {
            OutputSlice::F32(o) => self.run(clips, o),
            OutputSlice::F16(o) => self.run(clips, o),
            OutputSlice::Bf16(o) => self.run(clips, o),
        }
        Ok(())
    }
}

//! The CPU mel backend: clips in parallel with rayon; within a clip, frames transformed
//! several at a time with one frame per SIMD lane (AVX2 + FMA when the CPU has it, chosen
//! at run time, else portable code), in f64 by default (f32 as an option), each distinct
//! segment computed once, the filterbank applied through its non-zero spans in f32, a
//! vectorised log, output converted with `half`. Sizes the batched FFT does not cover
//! run through realfft in the same precision.
//! Precision policy and design: docs/numerics.md and docs/backends.md, "The CPU backend".
#![warn(missing_docs)]

mod clip;
mod fft;
mod frames;
mod log;
mod mel;
mod output;
mod simd;
mod tables;

use mel_core::{MelBackend, MelPlan, OutputSlice, Result};
use rayon::prelude::*;

use clip::{Kernel, Scratch};
use output::OutElem;
pub use simd::Isa;
use simd::portable::{Portable, PortableF64};

/// Which transform the backend uses for power-of-two sizes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Transform {
    /// The batched SIMD FFT where the size allows, realfft otherwise.
    #[default]
    Auto,
    /// realfft (f32) one frame at a time for every size (for comparison and tests).
    RealFft,
}

/// The precision the transform (window, FFT, power) runs in; the filterbank, log and
/// output are f32 either way.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum FloatWidth {
    /// f64: within 1e-5 dB of the f64 reference on every golden (the default).
    #[default]
    F64,
    /// f32 with the DC remedy: about 1.5× the clips per second, within torchaudio's own
    /// float32 error on the golden fixtures where the batched FFT runs (0.012 dB on
    /// leak-4k), but up to 0.035 dB with realfft's f32 transform (speech-16k's n_fft
    /// 400), which is why the spec's `fast` uses it for batched sizes only
    /// (docs/numerics.md, "Precision modes").
    F32,
}

impl FloatWidth {
    /// The transform precision the spec's `precision` asks for at `n_fft` with
    /// `transform`: `fast` is the f32 transform where the batched FFT runs (asked for
    /// and covering the size), f64 elsewhere (realfft's f32 misses torchaudio's bound).
    pub fn for_spec(
        spec: mel_core::spec::Precision,
        n_fft: usize,
        transform: Transform,
    ) -> FloatWidth {
        let batched = transform == Transform::Auto && fft::batched::supports(n_fft);
        match spec {
            mel_core::spec::Precision::Fast if batched => FloatWidth::F32,
            _ => FloatWidth::F64,
        }
    }
}

/// Options of [`CpuBackend::with_options`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct CpuOptions {
    /// The instruction set (default: the best this CPU has).
    pub isa: Isa,
    /// The transform (default: batched where possible).
    pub transform: Transform,
    /// The transform's precision; `None` (the default) follows the plan's spec
    /// ([`FloatWidth::for_spec`]).
    pub precision: Option<FloatWidth>,
}

impl CpuOptions {
    /// The transform precision these options give for `plan`: the one asked for, else
    /// what the plan's spec asks for ([`FloatWidth::for_spec`]).
    pub fn precision_for(&self, plan: &MelPlan) -> FloatWidth {
        self.precision.unwrap_or_else(|| {
            FloatWidth::for_spec(plan.spec().mel.precision, plan.n_fft(), self.transform)
        })
    }
}

/// The CPU backend. Runs in the calling thread's rayon pool (use `ThreadPool::install` to bound it).
pub struct CpuBackend {
    plan: MelPlan,
    kernel: Kernel,
    isa: Isa,
    precision: FloatWidth,
    /// The run's interrupt flag: clips not yet started are skipped once it is raised.
    cancel: Option<std::sync::Arc<std::sync::atomic::AtomicBool>>,
}

impl CpuBackend {
    /// The backend for `plan` with the default options (the CPU's best instruction set).
    pub fn new(plan: MelPlan) -> Self {
        CpuBackend::with_options(plan, CpuOptions::default())
            .expect("the detected instruction set is available")
    }

    /// The backend for `plan` with `options`; an error if the instruction set asked for
    /// is not supported by this CPU.
    pub fn with_options(plan: MelPlan, options: CpuOptions) -> Result<Self> {
        let isa = options.isa.resolve()?;
        let precision = options.precision_for(&plan);
        let kernel = Kernel::new(
            tables::Tables::new(&plan),
            precision,
            options.transform == Transform::Auto,
        );
        Ok(CpuBackend {
            plan,
            kernel,
            isa,
            precision,
            cancel: None,
        })
    }

    /// The precision the transform runs in.
    pub fn precision(&self) -> FloatWidth {
        self.precision
    }

    /// The instruction set the kernels run with (never `Auto`).
    pub fn isa(&self) -> Isa {
        self.isa
    }

    /// Whether frames go through the batched SIMD FFT (else realfft, one at a time).
    pub fn batched(&self) -> bool {
        self.kernel.batched()
    }

    fn run<T: OutElem>(&self, clips: &[f32], out: &mut [T]) {
        let t = &self.kernel.t;
        let (n, vpc) = (t.clip_samples, t.vpc);
        let k = &self.kernel;
        // Clips not yet started are skipped once the run is interrupted (`compute` then
        // says so): a batch on a loaded machine would otherwise hold the stop for seconds.
        let go = || {
            self.cancel
                .as_ref()
                .is_none_or(|c| !c.load(std::sync::atomic::Ordering::Relaxed))
        };
        match self.isa {
            #[cfg(target_arch = "x86_64")]
            Isa::Avx2 => out
                .par_chunks_mut(vpc)
                .zip(clips.par_chunks(n))
                .filter(|_| go())
                .for_each_init(
                    || Scratch::new(k, 8),
                    // SAFETY: `isa` is Avx2 only when the CPU has AVX2 and FMA (resolve).
                    |sc, (dst, clip)| unsafe { clip_avx2(k, sc, clip, dst) },
                ),

            _ => out
                .par_chunks_mut(vpc)
                .zip(clips.par_chunks(n))
                .filter(|_| go())
                .for_each_init(
                    || Scratch::new(k, 8),
                    |sc, (dst, clip)| clip::clip_mel(Portable, PortableF64, k, sc, clip, dst),
                ),
        }
    }
}

/// The clip kernel compiled for AVX2 + FMA.
///
/// # Safety
/// The CPU must support AVX2 and FMA.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn clip_avx2<T: OutElem>(k: &Kernel, sc: &mut Scratch, clip: &[f32], dst: &mut [T]) {
    // SAFETY: this function runs only where AVX2 and FMA exist (its contract).
    let s = unsafe { simd::avx2::Avx2::new_unchecked() };
    clip::clip_mel(s, s.f64(), k, sc, clip, dst)
}

/// The transform alone (window, FFT, power), for the `fft_speed` example and the
/// transform tests; not a stable API.
#[doc(hidden)]
pub mod transforms {
    use super::*;
    use clip::Aligned;

    /// One transform configuration on frames of `plan.n_fft()` samples.
    pub struct Transforms {
        kernel: Kernel,
        isa: Isa,
        buf: Aligned,
    }

    impl Transforms {
        /// The transform `options` select for `plan`'s FFT size and window.
        pub fn new(plan: &MelPlan, options: CpuOptions) -> Result<Transforms> {
            let isa = options.isa.resolve()?;
            let precision = options.precision_for(plan);
            let kernel = Kernel::new(
                tables::Tables::new(plan),
                precision,
                options.transform == Transform::Auto,
            );
            let buf = Aligned::new(4 * plan.n_fft() * 8);
            Ok(Transforms { kernel, isa, buf })
        }

        /// Whether the batched FFT runs.
        pub fn batched(&self) -> bool {
            self.kernel.batched()
        }

        /// What the batched FFT's power is scaled by (4 for power, 2 for magnitude; 1
        /// for realfft).
        pub fn scale(&self) -> f32 {
            match &self.kernel.transform {
                clip::Transform::Batched64(f, _) => 1.0 / f.weight_scale(),
                clip::Transform::Batched32(f, _) => 1.0 / f.weight_scale(),
                _ => 1.0,
            }
        }

        /// Power spectra of consecutive frames (a multiple of 8 frames): bin `k` of
        /// frame `8g + j` at `out[(g · n_freqs + k) · 8 + j]`, times [`scale`](Self::scale).
        pub fn power(&mut self, frames: &[f32], out: &mut [f32]) {
            let k = &self.kernel;
            match self.isa {
                #[cfg(target_arch = "x86_64")]
                // SAFETY: `isa` is Avx2 only when the CPU has AVX2 and FMA (resolve).
                Isa::Avx2 => unsafe { transforms_avx2(k, &mut self.buf, frames, out) },

                _ => clip::transform_frames(Portable, PortableF64, k, &mut self.buf, frames, out),
            }
        }
    }

    /// [`clip::transform_frames`] compiled for AVX2 + FMA.
    ///
    /// # Safety
    /// The CPU must support AVX2 and FMA.
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2,fma")]
    unsafe fn transforms_avx2(k: &Kernel, buf: &mut Aligned, frames: &[f32], out: &mut [f32]) {
        // SAFETY: this function runs only where AVX2 and FMA exist (its contract).
        let s = unsafe { simd::avx2::Avx2::new_unchecked() };
        clip::transform_frames(s, s.f64(), k, buf, frames, out)
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
        // Clips were skipped: the batch is not whole.
        let cancelled = self.cancel.as_ref();
        if cancelled.is_some_and(|c| c.load(std::sync::atomic::Ordering::Relaxed)) {
            return Err(mel_core::Error::Cancelled);
        }
        Ok(())
    }

    fn watch_cancel(&mut self, cancel: std::sync::Arc<std::sync::atomic::AtomicBool>) {
        self.cancel = Some(cancel);
    }
}

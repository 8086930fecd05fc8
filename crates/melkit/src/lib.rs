//! **melkit**: melctl as a library. Compute exactly the log-mel spectrograms `melctl
//! build` stores, in your own program (a trainer, or a detector in the field that must
//! see the features its model was trained on), with the backend chosen for you.
//!
//! ```
//! use melkit::{BackendRequest, Extractor, Preset};
//!
//! # fn main() -> melkit::Result<()> {
//! // The leak-4k workload: 10 s at 4096 Hz → 79 long × 3 short windows of 32 mels × 5 frames.
//! let spec = Preset::Leak4k.spec();
//! // CUDA if a device works, else a hardware GPU through wgpu, else the CPU.
//! let mut extractor = Extractor::new(&spec, &BackendRequest::auto())?;
//! println!("backend: {:?}", extractor.choice().kind);
//!
//! // One second of a 440 Hz tone at 8 kHz: resampled to 4096 Hz and padded to 10 s,
//! // exactly as a file would be.
//! let tone: Vec<f32> = (0..8000)
//!     .map(|i| (2.0 * std::f32::consts::PI * 440.0 * i as f32 / 8000.0).sin() * 0.5)
//!     .collect();
//! let features = extractor.samples(&tone, 8000)?;
//! assert_eq!(features.shape(), &[1, 79, 3, 32, 5]);
//! let db = features.clip_f32(0); // f16 as stored, widened: [79, 3, 32, 5]
//! assert!(db.iter().all(|v| v.is_finite()));
//! # Ok(())
//! # }
//! ```
//!
//! Cargo features: `cpu` (default), `cuda`, `wgpu` (the backends compiled in; automatic
//! choice skips what is absent, asking for it by name is a clear error), and `datasets`
//! (the loaders and the HDF5 / npy sinks `melctl build` uses). The `extract` example turns
//! one file into a float32 `.npy`:
//! `cargo run --release -p melkit --example extract -- --preset leak-4k IN.wav OUT.npy`.
#![warn(missing_docs)]

pub mod backend;
#[cfg(feature = "datasets")]
pub mod dataset;
pub mod demo;
pub mod extract;

pub use backend::{AutoReason, BackendChoice, BackendRequest, StartedBackend, choose};
pub use extract::{Extractor, Features};

pub use mel_core::config::{self, BackendKind, DeviceSelector};
pub use mel_core::spec;
pub use mel_core::{
    ClipFailure, Config, Dtype, Error, FailureKind, LogScale, MelBackend, MelPlan, MelSpec,
    OutputBuf, Preset, Result,
};

/// The shared vocabulary (`mel-core`): configuration, plan, errors, on-disk formats,
/// file safety, the build record. Front ends use it through melkit, never directly.
pub use mel_core as core;

/// Decoding and dataset scanning (`mel-audio`).
pub mod audio {
    pub use mel_audio::*;
}

/// Reading datasets back (`melread`): splits, shuffled and prefetched batches, file-level
/// evaluation.
#[cfg(feature = "datasets")]
pub use melread as read;

/// The mel backends compiled into this build.
pub mod backends {
    #[cfg(feature = "cpu")]
    pub use mel_cpu::CpuBackend;
    /// The CUDA backend's crate (device listing, NVRTC folders).
    #[cfg(feature = "cuda")]
    pub use mel_cuda as cuda;
    #[cfg(feature = "cuda")]
    pub use mel_cuda::{CudaBackend, add_nvrtc_dirs};
    /// The wgpu backend's crate (adapter listing).
    #[cfg(feature = "wgpu")]
    pub use mel_wgpu as wgpu;
    #[cfg(feature = "wgpu")]
    pub use mel_wgpu::WgpuBackend;
}

/// The pipeline runner (loader → backend → sink) and its metrics.
pub use mel_core::pipeline;

/// Loaders: RAM preload, the memmap cache, streaming.
#[cfg(feature = "datasets")]
pub use mel_loaders as loaders;

/// Sinks: HDF5, npy, and the resume journal.
#[cfg(feature = "datasets")]
pub use mel_sinks as sinks;

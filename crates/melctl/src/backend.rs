//! Picking the mel backend (melkit's automatic choice), phrased for the terminal.

use anyhow::Result;
use mel_core::config::BackendKind;
use mel_core::{Config, MelBackend, MelPlan};
use melkit::{AutoReason, BackendRequest};

/// A started backend, with a line saying which and why.
pub struct Chosen {
    /// The backend.
    pub backend: Box<dyn MelBackend>,
    /// E.g. `cuda on NVIDIA H100 (auto: a CUDA device works)`.
    pub line: String,
}

/// Starts the backend `run.backend` names; with `auto`, a backend that fails to start is
/// named in a warning on stderr and the next one is tried.
pub fn choose(plan: &MelPlan, config: &Config) -> Result<Chosen> {
    let request = BackendRequest {
        kind: config.run.backend,
        device: config.run.device.clone(),
        // Chunks of a quarter batch (at least 64 clips) alternate between two buffer
        // sets, so copies and compute of consecutive chunks overlap.
        gpu_chunk_clips: (config.run.batch_clips / 4).max(64),
    };
    let chosen = melkit::choose(plan, &request)?;
    let c = &chosen.choice;
    for (kind, e) in &c.skipped {
        errln!(
            "warning: backend auto: {} did not start, trying the next: {e}",
            kind.name()
        );
    }
    let on = c
        .device
        .as_ref()
        .map(|d| format!(" on {d}"))
        .unwrap_or_default();
    let line = match (c.kind, c.auto) {
        (BackendKind::Wgpu, None) => format!("wgpu{on}"),
        (kind, None) => kind.name().to_string(),
        (_, Some(AutoReason::CudaDevice)) => "cuda (auto: a CUDA device works)".into(),
        (_, Some(AutoReason::HardwareAdapter)) => {
            format!("wgpu{on} (auto: no CUDA device; a hardware GPU adapter)")
        }
        (_, Some(AutoReason::NoGpu)) => {
            "cpu (auto: no CUDA device and no hardware GPU adapter)".into()
        }
    };
    Ok(Chosen {
        backend: chosen.backend,
        line,
    })
}

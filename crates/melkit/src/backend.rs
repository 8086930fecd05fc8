//! Choosing and starting a mel backend: the one asked for, or with `auto` the best that
//! starts (CUDA, else a hardware wgpu adapter, else the CPU), falling back when one fails
//! to start and saying why.
//!
//! Backends are a closed set ([`BackendKind`]); one compiled out of this build (a cargo
//! feature not enabled) is a clear error when asked for, and skipped by `auto`.

use mel_core::config::{BackendKind, DeviceSelector};
use mel_core::{Error, MelBackend, MelPlan, Result};
use std::sync::OnceLock;

/// What to start.
#[derive(Debug, Clone, PartialEq)]
pub struct BackendRequest {
    /// The backend, or `Auto`.
    pub kind: BackendKind,
    /// A GPU: its index (`melctl devices`), or for wgpu a part of the adapter's name.
    pub device: Option<DeviceSelector>,
    /// Clips per device transfer for GPU backends (copies and compute of consecutive
    /// chunks overlap).
    pub gpu_chunk_clips: usize,
}

impl Default for BackendRequest {
    fn default() -> Self {
        BackendRequest {
            kind: BackendKind::Auto,
            device: None,
            gpu_chunk_clips: 64,
        }
    }
}

impl BackendRequest {
    /// `Auto`, the default device, chunks of 64 clips.
    pub fn auto() -> Self {
        BackendRequest::default()
    }

    /// A request for `kind` with the defaults otherwise.
    pub fn of(kind: BackendKind) -> Self {
        BackendRequest {
            kind,
            ..BackendRequest::default()
        }
    }
}

/// Why `auto` chose what it chose.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AutoReason {
    /// A CUDA device started.
    CudaDevice,
    /// No CUDA device; a hardware GPU adapter started through wgpu.
    HardwareAdapter,
    /// No GPU started; the CPU.
    NoGpu,
}

/// The backend that was started, on what, and why.
#[derive(Debug)]
pub struct BackendChoice {
    /// The backend (never `Auto`).
    pub kind: BackendKind,
    /// The device's name, for GPU backends.
    pub device: Option<String>,
    /// `Some` when `auto` chose.
    pub auto: Option<AutoReason>,
    /// Backends `auto` tried that did not start, with their errors, in order.
    pub skipped: Vec<(BackendKind, Error)>,
}

/// A started backend and how it was chosen.
pub struct StartedBackend {
    /// The backend.
    pub backend: Box<dyn MelBackend>,
    /// How it was chosen.
    pub choice: BackendChoice,
}

#[cfg_attr(
    all(feature = "cpu", feature = "cuda", feature = "wgpu"),
    allow(dead_code)
)]
fn not_compiled(kind: BackendKind, feature: &str) -> Error {
    Error::device(
        kind.name(),
        format!("this build of melkit does not include it (cargo feature `{feature}`)"),
    )
}

/// Starts the CPU backend.
#[cfg(feature = "cpu")]
fn cpu(plan: &MelPlan) -> Result<Box<dyn MelBackend>> {
    Ok(Box::new(mel_cpu::CpuBackend::new(plan.clone())))
}

/// The CPU backend is not in this build.
#[cfg(not(feature = "cpu"))]
fn cpu(_plan: &MelPlan) -> Result<Box<dyn MelBackend>> {
    Err(not_compiled(BackendKind::Cpu, "cpu"))
}

/// The CUDA device index the request names (CUDA devices have no name selection).
fn cuda_ordinal(req: &BackendRequest) -> Result<usize> {
    match &req.device {
        None => Ok(0),
        Some(DeviceSelector::Index(i)) => Ok(*i),
        Some(DeviceSelector::Name(n)) => Err(Error::device(
            "cuda",
            format!("device {n:?}: CUDA devices are chosen by index; names select wgpu adapters"),
        )),
    }
}

/// Starts the CUDA backend on the device the request names.
#[cfg(feature = "cuda")]
fn cuda(plan: &MelPlan, req: &BackendRequest) -> Result<(Box<dyn MelBackend>, String)> {
    let ordinal = cuda_ordinal(req)?;
    let b = mel_cuda::CudaBackend::new(plan.clone(), ordinal, req.gpu_chunk_clips)?;
    let name = mel_cuda::devices()
        .ok()
        .and_then(|d| d.into_iter().find(|d| d.ordinal == ordinal))
        .map_or_else(|| format!("CUDA device {ordinal}"), |d| d.name);
    // The kernel the device was given (f64, or compensated f32 where FP64 is slow).
    let name = format!("{name}, {} kernel", b.kernel().name());
    Ok((Box::new(b), name))
}

/// The CUDA backend is not in this build.
#[cfg(not(feature = "cuda"))]
fn cuda(_plan: &MelPlan, req: &BackendRequest) -> Result<(Box<dyn MelBackend>, String)> {
    cuda_ordinal(req)?;
    Err(not_compiled(BackendKind::Cuda, "cuda"))
}

/// Starts the wgpu backend on the adapter the request names (or the best one).
#[cfg(feature = "wgpu")]
fn wgpu(plan: &MelPlan, req: &BackendRequest) -> Result<(Box<dyn MelBackend>, String)> {
    let choice = mel_wgpu::AdapterChoice::from(req.device.as_ref());
    let b = mel_wgpu::WgpuBackend::new(plan.clone(), &choice, req.gpu_chunk_clips)?;
    let name = format!("{} ({})", b.adapter().name, b.adapter().backend);
    Ok((Box::new(b), name))
}

/// The wgpu backend is not in this build.
#[cfg(not(feature = "wgpu"))]
fn wgpu(_plan: &MelPlan, _req: &BackendRequest) -> Result<(Box<dyn MelBackend>, String)> {
    Err(not_compiled(BackendKind::Wgpu, "wgpu"))
}

/// Whether a CUDA device is visible: the driver loads and lists one (asked once per
/// process).
fn cuda_present() -> bool {
    static PRESENT: OnceLock<bool> = OnceLock::new();
    *PRESENT.get_or_init(|| {
        #[cfg(feature = "cuda")]
        let present = mel_cuda::devices().is_ok_and(|d| !d.is_empty());
        #[cfg(not(feature = "cuda"))]
        let present = false;
        present
    })
}

/// Starts, on a background thread, the device discovery that [`choose`] does for `kind`
/// (`auto`: the CUDA driver, then the wgpu adapters; tens of milliseconds where a
/// software Vulkan driver loads), so that it overlaps what the caller does next, such as
/// scanning a dataset. `choose` then uses its answers (waiting for them if need be).
/// Keep the guard while working; dropping it waits for the discovery to end.
pub fn prewarm(kind: BackendKind) -> Prewarm {
    let thread = (kind == BackendKind::Auto).then(|| {
        std::thread::Builder::new()
            .name("melkit-probe".into())
            .spawn(|| cuda_present() || hardware_adapter_present())
            .ok()
    });
    Prewarm(thread.flatten())
}

/// Device discovery running in the background ([`prewarm`]). Dropping it waits for the
/// discovery to finish, so that a process leaving early (a failed scan) never exits in
/// the middle of a driver's initialisation.
#[must_use = "dropping the guard waits for the discovery to finish"]
pub struct Prewarm(Option<std::thread::JoinHandle<bool>>);

impl std::fmt::Debug for Prewarm {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("Prewarm").field(&self.0.is_some()).finish()
    }
}

impl Drop for Prewarm {
    fn drop(&mut self) {
        if let Some(thread) = self.0.take() {
            let _ = thread.join();
        }
    }
}

/// Whether `auto` would try this wgpu adapter: any hardware (not software) adapter (the
/// shader runs in compensated f32, so no 64-bit float support is needed). A software
/// adapter such as lavapipe is correct but slower than the CPU backend.
#[cfg(feature = "wgpu")]
pub fn auto_accepts(a: &mel_wgpu::AdapterInfo) -> bool {
    !a.is_software()
}

/// Whether a wgpu adapter `auto` would try is present (asked once per process).
fn hardware_adapter_present() -> bool {
    static PRESENT: OnceLock<bool> = OnceLock::new();
    *PRESENT.get_or_init(|| {
        #[cfg(feature = "wgpu")]
        let present = mel_wgpu::adapters().iter().any(auto_accepts);
        #[cfg(not(feature = "wgpu"))]
        let present = false;
        present
    })
}

/// Starts the backend `req` asks for; `auto` tries CUDA, then a hardware wgpu adapter,
/// then the CPU, recording each that did not start.
pub fn choose(plan: &MelPlan, req: &BackendRequest) -> Result<StartedBackend> {
    let started = |backend, kind, device, auto, skipped| StartedBackend {
        backend,
        choice: BackendChoice {
            kind,
            device,
            auto,
            skipped,
        },
    };
    match req.kind {
        BackendKind::Cpu => Ok(started(cpu(plan)?, BackendKind::Cpu, None, None, vec![])),
        BackendKind::Cuda => {
            let (b, name) = cuda(plan, req)?;
            Ok(started(b, BackendKind::Cuda, Some(name), None, vec![]))
        }
        BackendKind::Wgpu => {
            let (b, name) = wgpu(plan, req)?;
            Ok(started(b, BackendKind::Wgpu, Some(name), None, vec![]))
        }
        BackendKind::Auto => {
            let mut skipped = Vec::new();
            if cuda_present() {
                match cuda(plan, req) {
                    Ok((b, name)) => {
                        let why = Some(AutoReason::CudaDevice);
                        return Ok(started(b, BackendKind::Cuda, Some(name), why, skipped));
                    }
                    Err(e) => skipped.push((BackendKind::Cuda, e)),
                }
            }
            if hardware_adapter_present() {
                match wgpu(plan, req) {
                    Ok((b, name)) => {
                        let why = Some(AutoReason::HardwareAdapter);
                        return Ok(started(b, BackendKind::Wgpu, Some(name), why, skipped));
                    }
                    Err(e) => skipped.push((BackendKind::Wgpu, e)),
                }
            }
            let why = Some(AutoReason::NoGpu);
            Ok(started(cpu(plan)?, BackendKind::Cpu, None, why, skipped))
        }
    }
}

/// A started backend with its description: which and why, and a warning for each backend
/// `auto` tried that did not start.
pub struct Described {
    /// The backend.
    pub backend: Box<dyn MelBackend>,
    /// E.g. `cuda (auto: a CUDA device works)`, `wgpu on Intel Arc`.
    pub line: String,
    /// `warning: backend auto: cuda did not start, trying the next: ...`, one per backend.
    pub warnings: Vec<String>,
}

/// Starts the backend `run.backend` names (device `run.device`), as [`choose`] does, and
/// describes the choice.
pub fn choose_described(plan: &MelPlan, config: &mel_core::Config) -> Result<Described> {
    let request = BackendRequest {
        kind: config.run.backend,
        device: config.run.device.clone(),
        // Chunks of a quarter batch (at least 64 clips) alternate between two buffer
        // sets, so copies and compute of consecutive chunks overlap.
        gpu_chunk_clips: (config.run.batch_clips / 4).max(64),
    };
    let chosen = choose(plan, &request)?;
    let c = &chosen.choice;
    let warnings = c
        .skipped
        .iter()
        .map(|(kind, e)| {
            format!(
                "warning: backend auto: {} did not start, trying the next: {e}",
                kind.name()
            )
        })
        .collect();
    let on = c
        .device
        .as_ref()
        .map(|d| format!(" on {d}"))
        .unwrap_or_default();
    let line = match (c.kind, c.auto) {
        (kind, None) => format!("{}{on}", kind.name()),
        (_, Some(AutoReason::CudaDevice)) => format!("cuda{on} (auto: a CUDA device works)"),
        (_, Some(AutoReason::HardwareAdapter)) => {
            format!("wgpu{on} (auto: no CUDA device; a hardware GPU adapter)")
        }
        (_, Some(AutoReason::NoGpu)) => {
            "cpu (auto: no CUDA device and no hardware GPU adapter)".into()
        }
    };
    let line = match precision_note(plan, c.kind) {
        Some(note) => format!("{line}, {note}"),
        None => line,
    };
    Ok(Described {
        backend: chosen.backend,
        line,
        warnings,
    })
}

/// What `precision = "fast"` runs on `kind` (nothing to say for `exact`).
fn precision_note(plan: &MelPlan, kind: BackendKind) -> Option<String> {
    use mel_core::spec::Precision;
    if plan.spec().mel.precision != Precision::Fast {
        return None;
    }
    let what = match kind {
        #[cfg(feature = "cpu")]
        BackendKind::Cpu => {
            // What `cpu()` starts: the default options, following the plan's spec.
            match mel_cpu::CpuOptions::default().precision_for(plan) {
                mel_cpu::FloatWidth::F32 => "f32 transform".to_string(),
                mel_cpu::FloatWidth::F64 => format!(
                    "f64 transform (no batched f32 FFT for n_fft {})",
                    plan.n_fft()
                ),
            }
        }
        _ => "the exact kernel (this backend has no plain-f32 one)".to_string(),
    };
    Some(format!("precision fast: {what}"))
}

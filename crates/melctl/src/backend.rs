//! Picking the mel backend: the one `run.backend` names, or with `auto` the best that
//! starts: CUDA, else a hardware wgpu adapter, else the CPU.

use anyhow::{Result, bail};
use mel_core::config::{BackendKind, DeviceSelector};
use mel_core::{Config, MelBackend, MelPlan};
use mel_cpu::CpuBackend;
use mel_cuda::CudaBackend;
use mel_wgpu::{AdapterChoice, WgpuBackend};

/// A started backend, with a line saying which and why.
pub struct Chosen {
    /// The backend.
    pub backend: Box<dyn MelBackend>,
    /// E.g. `cuda on NVIDIA H100 (auto: a CUDA device works)`.
    pub line: String,
}

/// The CUDA device index `run.device` names (CUDA devices have no name selection).
fn cuda_ordinal(config: &Config) -> Result<usize> {
    match &config.run.device {
        None => Ok(0),
        Some(DeviceSelector::Index(i)) => Ok(*i),
        Some(DeviceSelector::Name(n)) => bail!(
            "--device {n:?}: CUDA devices are chosen by index (see `melctl devices`); names select wgpu adapters"
        ),
    }
}

/// GPU backends take a batch as chunks of a quarter batch (at least 64 clips) that
/// alternate between two buffer sets, so copies and compute of consecutive chunks overlap.
fn gpu_chunk(config: &Config) -> usize {
    (config.run.batch_clips / 4).max(64)
}

fn cuda(plan: &MelPlan, config: &Config) -> Result<Box<dyn MelBackend>> {
    let b = CudaBackend::new(plan.clone(), cuda_ordinal(config)?, gpu_chunk(config))?;
    Ok(Box::new(b))
}

fn wgpu(plan: &MelPlan, config: &Config) -> Result<(Box<dyn MelBackend>, String)> {
    let choice = AdapterChoice::from(config.run.device.as_ref());
    let b = WgpuBackend::new(plan.clone(), &choice, gpu_chunk(config))?;
    let name = format!("{} ({})", b.adapter().name, b.adapter().backend);
    Ok((Box::new(b), name))
}

/// Starts the backend `run.backend` names; `auto` falls back with a warning on stderr
/// when a backend fails to start.
pub fn choose(plan: &MelPlan, config: &Config) -> Result<Chosen> {
    let cpu = || Box::new(CpuBackend::new(plan.clone())) as Box<dyn MelBackend>;
    Ok(match config.run.backend {
        BackendKind::Cpu => Chosen {
            backend: cpu(),
            line: "cpu".into(),
        },
        BackendKind::Cuda => Chosen {
            backend: cuda(plan, config)?,
            line: "cuda".into(),
        },
        BackendKind::Wgpu => {
            let (backend, name) = wgpu(plan, config)?;
            Chosen {
                backend,
                line: format!("wgpu on {name}"),
            }
        }
        BackendKind::Auto => auto(plan, config, cpu),
    })
}

fn auto(plan: &MelPlan, config: &Config, cpu: impl Fn() -> Box<dyn MelBackend>) -> Chosen {
    let warn = |what: &str, e: &dyn std::fmt::Display| {
        eprintln!("warning: backend auto: {what} did not start, trying the next: {e}");
    };
    let cuda_devices = mel_cuda::devices().unwrap_or_default();
    if !cuda_devices.is_empty() {
        match cuda(plan, config) {
            Ok(backend) => {
                return Chosen {
                    backend,
                    line: "cuda (auto: a CUDA device works)".into(),
                };
            }
            Err(e) => warn("cuda", &e),
        }
    }
    let hardware = mel_wgpu::adapters()
        .into_iter()
        .any(|a| a.shader_f64 && !a.is_software());
    if hardware {
        match wgpu(plan, config) {
            Ok((backend, name)) => {
                return Chosen {
                    backend,
                    line: format!("wgpu on {name} (auto: no CUDA device; a hardware GPU adapter)"),
                };
            }
            Err(e) => warn("wgpu", &e),
        }
    }
    Chosen {
        backend: cpu(),
        line: "cpu (auto: no CUDA device and no hardware wgpu adapter with f64 shaders)".into(),
    }
}

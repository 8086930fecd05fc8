//! Finding wgpu adapters: listing them for `melctl devices`, and picking one by index,
//! by name, or the best by kind (discrete, integrated, virtual, then CPU).

use mel_core::config::DeviceSelector;
use mel_core::{Error, Result};

/// One wgpu adapter as `melctl devices` shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AdapterInfo {
    /// Position in [`adapters`]'s list (what `--device N` selects).
    pub index: usize,
    /// The adapter's name (e.g. "NVIDIA H100 80GB HBM3", "llvmpipe (LLVM 15.0.6, 256 bits)").
    pub name: String,
    /// The graphics API (Vulkan, Metal, Dx12).
    pub backend: String,
    /// Discrete / integrated / virtual GPU, or a CPU (software) device.
    pub device_type: String,
    /// Driver name and version, where the API reports them.
    pub driver: String,
    /// Whether shaders can use 64-bit floats. Reported for `melctl devices`; the backend
    /// no longer needs them (its shader is f32 throughout).
    pub shader_f64: bool,
    /// Largest storage buffer binding, bytes.
    pub max_storage_binding: u64,
    /// Workgroup memory per workgroup, bytes.
    pub max_workgroup_storage: u32,
}

impl AdapterInfo {
    /// Whether this is a software (CPU) adapter such as lavapipe.
    pub fn is_software(&self) -> bool {
        self.device_type == "Cpu"
    }
}

impl std::fmt::Display for AdapterInfo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "wgpu {}: {} ({}, {}; {}), f64 {}, storage binding {} MiB, workgroup memory {} KiB",
            self.index,
            self.name,
            self.backend,
            self.device_type,
            if self.driver.is_empty() {
                "driver ?"
            } else {
                &self.driver
            },
            if self.shader_f64 { "yes" } else { "no" },
            self.max_storage_binding >> 20,
            self.max_workgroup_storage >> 10
        )
    }
}

/// How the backend picks an adapter.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum AdapterChoice {
    /// The best adapter: discrete, integrated, virtual, then CPU (software).
    #[default]
    Best,
    /// The adapter at this position in [`adapters`].
    Index(usize),
    /// The first adapter whose name contains this text (case-insensitive).
    Name(String),
}

impl From<Option<&DeviceSelector>> for AdapterChoice {
    /// `--device N` or `--device NAME`; none: the best adapter.
    fn from(d: Option<&DeviceSelector>) -> Self {
        match d {
            None => AdapterChoice::Best,
            Some(DeviceSelector::Index(i)) => AdapterChoice::Index(*i),
            Some(DeviceSelector::Name(n)) => AdapterChoice::Name(n.clone()),
        }
    }
}

pub(crate) fn err(message: impl std::fmt::Display) -> Error {
    Error::Device {
        backend: "wgpu".into(),
        message: message.to_string(),
    }
}

/// The process's one wgpu instance: creating one per backend exhausted the NVIDIA Vulkan
/// driver after a few dozen (no adapter was found any more).
pub(crate) fn instance() -> &'static wgpu::Instance {
    static INSTANCE: std::sync::OnceLock<wgpu::Instance> = std::sync::OnceLock::new();
    INSTANCE.get_or_init(|| {
        wgpu::Instance::new(&wgpu::InstanceDescriptor {
            backends: wgpu::Backends::PRIMARY,
            ..Default::default()
        })
    })
}

fn info(index: usize, a: &wgpu::Adapter) -> AdapterInfo {
    let i = a.get_info();
    let l = a.limits();
    AdapterInfo {
        index,
        name: i.name,
        backend: format!("{:?}", i.backend),
        device_type: format!("{:?}", i.device_type),
        driver: format!("{} {}", i.driver, i.driver_info).trim().to_string(),
        shader_f64: a.features().contains(wgpu::Features::SHADER_F64),
        max_storage_binding: u64::from(l.max_storage_buffer_binding_size).min(l.max_buffer_size),
        max_workgroup_storage: l.max_compute_workgroup_storage_size,
    }
}

/// Every adapter wgpu finds (Vulkan, Metal or DX12), in a stable order.
pub fn adapters() -> Vec<AdapterInfo> {
    list(instance()).iter().map(|(i, _)| i.clone()).collect()
}

fn list(instance: &wgpu::Instance) -> Vec<(AdapterInfo, wgpu::Adapter)> {
    let mut all = instance.enumerate_adapters(wgpu::Backends::PRIMARY);
    all.sort_by_key(|a| {
        let i = a.get_info();
        (i.backend as u32, i.device, i.name.clone())
    });
    all.into_iter()
        .enumerate()
        .map(|(n, a)| (info(n, &a), a))
        .collect()
}

fn rank(device_type: &str) -> u8 {
    match device_type {
        "DiscreteGpu" => 0,
        "IntegratedGpu" => 1,
        "VirtualGpu" => 2,
        "Other" => 3,
        _ => 4,
    }
}

/// The adapter `choice` names, with its description; an error says what exists instead.
pub(crate) fn pick(
    instance: &wgpu::Instance,
    choice: &AdapterChoice,
) -> Result<(AdapterInfo, wgpu::Adapter)> {
    let all = list(instance);
    if all.is_empty() {
        return Err(err(
            "no wgpu adapter found (no Vulkan, Metal or DX12 driver; on Linux install the GPU's \
             Vulkan driver and libvulkan1, or mesa-vulkan-drivers for the software lavapipe)",
        ));
    }
    let names = || {
        all.iter()
            .map(|(i, _)| format!("{}: {}", i.index, i.name))
            .collect::<Vec<_>>()
            .join("; ")
    };
    let found = match choice {
        AdapterChoice::Best => all
            .into_iter()
            .min_by_key(|(i, _)| (rank(&i.device_type), i.index)),
        AdapterChoice::Index(n) => {
            let n = *n;
            if n >= all.len() {
                return Err(err(format!(
                    "device {n}: there are {} wgpu adapters ({})",
                    all.len(),
                    names()
                )));
            }
            all.into_iter().nth(n)
        }
        AdapterChoice::Name(text) => {
            let t = text.to_lowercase();
            let list = names();
            match all
                .into_iter()
                .find(|(i, _)| i.name.to_lowercase().contains(&t))
            {
                Some(x) => Some(x),
                None => {
                    return Err(err(format!(
                        "device {text:?}: no wgpu adapter's name contains it ({list})"
                    )));
                }
            }
        }
    };
    found.ok_or_else(|| err("no wgpu adapter found"))
}

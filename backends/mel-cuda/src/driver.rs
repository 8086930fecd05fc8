//! Finding the CUDA driver and NVRTC at run time without panicking: cudarc's dynamic
//! loading panics when a library is missing, so each is probed with libloading first
//! (and, for NVRTC, looked for where CUDA toolkits and the `nvidia-cuda-nvrtc` wheel
//! put it, the wheel's place asked of `python3` last, then loaded by full path so
//! cudarc's later lookup by name finds it).

use std::path::PathBuf;
use std::sync::OnceLock;

use mel_core::{Error, Result};

fn backend_error(message: String) -> Error {
    Error::Device {
        backend: "cuda".into(),
        message,
    }
}

/// Tries each of cudarc's candidate names for `lib` and keeps the first that loads.
fn load_by_name(lib: &str) -> Option<String> {
    for name in cudarc::get_lib_name_candidates(lib) {
        // SAFETY: loading a vendor library runs its initialisers; these are CUDA's own.
        if let Ok(l) = unsafe { libloading::Library::new(&name) } {
            std::mem::forget(l); // stay loaded for cudarc
            return Some(name);
        }
    }
    None
}

/// Folders the application named (a CUDA toolkit's `CUDA_HOME`, ...), searched first.
static EXTRA_DIRS: std::sync::Mutex<Vec<PathBuf>> = std::sync::Mutex::new(Vec::new());

/// Adds folders to search for libnvrtc (each, and its `lib64` and `lib`), before the
/// usual places; call it before the first backend starts (the search runs once).
pub fn add_nvrtc_dirs(dirs: impl IntoIterator<Item = PathBuf>) {
    if let Ok(mut d) = EXTRA_DIRS.lock() {
        for p in dirs {
            d.push(p.join("lib64"));
            d.push(p.join("lib"));
            d.push(p);
        }
    }
}

/// Folders where libnvrtc is commonly found.
fn nvrtc_dirs() -> Vec<PathBuf> {
    let mut dirs = EXTRA_DIRS.lock().map(|d| d.clone()).unwrap_or_default();
    dirs.push("/usr/local/cuda/lib64".into());
    dirs.push("/usr/local/cuda/targets/x86_64-linux/lib".into());
    // pip's nvidia-cuda-nvrtc wheel (cu13 and cu12 layouts) in any site-packages we can see.
    for base in [
        "/usr/local/lib",
        "/usr/lib",
        "/opt/conda/lib",
        "/opt/torch/.venv/lib",
    ] {
        if let Ok(entries) = std::fs::read_dir(base) {
            for e in entries.flatten() {
                let py = e.path();
                for sub in ["site-packages", "dist-packages"] {
                    dirs.push(py.join(sub).join("nvidia/cu13/lib"));
                    dirs.push(py.join(sub).join("nvidia/cuda_nvrtc/lib"));
                }
            }
        }
    }
    // Last: ask the Python on PATH where its site-packages are (pyenv, venvs, user installs).
    let probe = "import site, sys; print('\\n'.join(site.getsitepackages() + [site.getusersitepackages()]))";
    if let Ok(out) = std::process::Command::new("python3")
        .args(["-c", probe])
        .output()
    {
        for line in String::from_utf8_lossy(&out.stdout).lines() {
            let p = PathBuf::from(line.trim());
            dirs.push(p.join("nvidia/cu13/lib"));
            dirs.push(p.join("nvidia/cuda_nvrtc/lib"));
        }
    }
    dirs
}

static DRIVER: OnceLock<std::result::Result<String, String>> = OnceLock::new();
static NVRTC: OnceLock<std::result::Result<String, String>> = OnceLock::new();

/// Loads the CUDA driver library, or says why not.
pub fn ensure_driver() -> Result<()> {
    DRIVER
        .get_or_init(|| {
            load_by_name("cuda").ok_or_else(|| {
                "no CUDA driver found (libcuda.so could not be loaded): install the NVIDIA driver, or use another backend".to_string()
            })
        })
        .as_ref()
        .map(|_| ())
        .map_err(|e| backend_error(e.clone()))
}

/// Loads NVRTC, or says why not.
pub fn ensure_nvrtc() -> Result<()> {
    NVRTC
        .get_or_init(|| {
            if let Some(name) = load_by_name("nvrtc") {
                return Ok(name);
            }
            for dir in nvrtc_dirs() {
                let Ok(entries) = std::fs::read_dir(&dir) else { continue };
                let mut libs: Vec<PathBuf> = entries
                    .flatten()
                    .map(|e| e.path())
                    .filter(|p| {
                        p.file_name()
                            .and_then(|n| n.to_str())
                            .is_some_and(|n| n.starts_with("libnvrtc.so"))
                    })
                    .collect();
                libs.sort();
                for lib in libs {
                    // SAFETY: as above; loaded by path so the soname is resident for cudarc.
                    if let Ok(l) = unsafe { libloading::Library::new(&lib) } {
                        std::mem::forget(l);
                        if load_by_name("nvrtc").is_some() {
                            return Ok(lib.display().to_string());
                        }
                    }
                }
            }
            Err("NVRTC (libnvrtc.so) not found: install the CUDA toolkit, or `pip install nvidia-cuda-nvrtc`, or name the folder holding it (mel_cuda::add_nvrtc_dirs)".to_string())
        })
        .as_ref()
        .map(|_| ())
        .map_err(|e| backend_error(e.clone()))
}

/// One CUDA device as `melctl devices` lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeviceInfo {
    /// Device ordinal (`--device N`).
    pub ordinal: usize,
    /// Marketing name.
    pub name: String,
    /// Compute capability (major, minor).
    pub compute_capability: (i32, i32),
    /// Global memory in bytes.
    pub memory_bytes: usize,
}

/// The CUDA devices present, or why there are none.
pub fn devices() -> Result<Vec<DeviceInfo>> {
    ensure_driver()?;
    let count = cudarc::driver::CudaContext::device_count()
        .map_err(|e| backend_error(format!("the CUDA driver did not start: {e}")))?;
    let mut out = Vec::new();
    for ordinal in 0..count.max(0) as usize {
        let ctx = cudarc::driver::CudaContext::new(ordinal)
            .map_err(|e| backend_error(format!("device {ordinal}: {e}")))?;
        out.push(DeviceInfo {
            ordinal,
            name: ctx.name().unwrap_or_else(|_| "unknown".into()),
            compute_capability: ctx.compute_capability().unwrap_or((0, 0)),
            memory_bytes: cudarc::driver::result::mem_get_info()
                .map(|(_, total)| total)
                .unwrap_or(0),
        });
    }
    Ok(out)
}

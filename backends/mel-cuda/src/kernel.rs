//! The two kernels' sources as NVRTC compiles them (`mel.cu`, `mel_f32.cu`), their entry
//! points, and [`CudaKernel`], which names one.

/// The f64 kernel (verified on an H100), compiled by NVRTC with
/// [`macros`](crate::codegen::macros).
pub const KERNEL_SOURCE: &str = include_str!("mel.cu");

/// The f64 kernel's entry point.
pub const KERNEL_NAME: &str = "mel_kernel";

/// The f32 kernel (compensated double-word arithmetic, no double anywhere).
pub const KERNEL_SOURCE_F32: &str = include_str!("mel_f32.cu");

/// The f32 kernel's entry point.
pub const KERNEL_NAME_F32: &str = "mel_kernel_f32";

/// Which kernel transforms: the f64 one, verified on an H100 and the default, or the f32
/// one (compensated double-word arithmetic: about 2⁻⁴⁴ accurate, no FP64 units needed),
/// which becomes the default only after its conformance suite has passed on a GPU.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum CudaKernel {
    /// `mel.cu`: the transform in f64.
    #[default]
    F64,
    /// `mel_f32.cu`: the transform in compensated f32.
    F32,
}

impl CudaKernel {
    /// Both kernels, the default first.
    pub const ALL: [CudaKernel; 2] = [CudaKernel::F64, CudaKernel::F32];

    /// `f64` or `f32`.
    pub fn name(self) -> &'static str {
        match self {
            CudaKernel::F64 => "f64",
            CudaKernel::F32 => "f32",
        }
    }

    /// The kernel's file: `mel.cu` or `mel_f32.cu` (NVRTC's name for the program).
    pub fn file(self) -> &'static str {
        match self {
            CudaKernel::F64 => "mel.cu",
            CudaKernel::F32 => "mel_f32.cu",
        }
    }

    /// The kernel's source.
    pub fn source(self) -> &'static str {
        match self {
            CudaKernel::F64 => KERNEL_SOURCE,
            CudaKernel::F32 => KERNEL_SOURCE_F32,
        }
    }

    /// The kernel's entry point.
    pub fn entry(self) -> &'static str {
        match self {
            CudaKernel::F64 => KERNEL_NAME,
            CudaKernel::F32 => KERNEL_NAME_F32,
        }
    }
}

impl std::str::FromStr for CudaKernel {
    type Err = String;

    /// `f64` or `f32`.
    fn from_str(s: &str) -> std::result::Result<Self, String> {
        match s {
            "f64" => Ok(CudaKernel::F64),
            "f32" => Ok(CudaKernel::F32),
            _ => Err(format!("unknown CUDA kernel {s:?} (f64 or f32)")),
        }
    }
}

//! The two kernels as NVRTC compiles them: each source is `mel_common.cuh` (what both
//! share) followed by the kernel's own file, `mel.cu` or `mel_f32.cu`, with `#line`
//! marks so that a compiler's messages name the file and line they come from; their entry
//! points; and [`CudaKernel`], which names one.

/// What both kernels share, written once (padding, launch bounds, where a block's
/// segments and frames lie, the mel sums, the log / top_db epilogue, the stores, and as
/// templates over each kernel's arithmetic the butterflies, the Stockham stages and the
/// kernel body): `mel_common.cuh`, in front of each kernel's own source.
pub const COMMON_SOURCE: &str = include_str!("mel_common.cuh");

/// `mel_common.cuh`, then the kernel file `$file`, each from its own line 1.
macro_rules! behind_common {
    ($file:literal) => {
        concat!(
            "#line 1 \"mel_common.cuh\"\n",
            include_str!("mel_common.cuh"),
            "#line 1 \"",
            $file,
            "\"\n",
            include_str!($file)
        )
    };
}

/// The f64 kernel (verified on an H100), compiled by NVRTC with
/// [`macros`](crate::codegen::macros): `mel_common.cuh`, then `mel.cu`.
pub const KERNEL_SOURCE: &str = behind_common!("mel.cu");

/// The f64 kernel's entry point.
pub const KERNEL_NAME: &str = "mel_kernel";

/// The f32 kernel (compensated double-word arithmetic, no double anywhere):
/// `mel_common.cuh`, then `mel_f32.cu`.
pub const KERNEL_SOURCE_F32: &str = behind_common!("mel_f32.cu");

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

    /// The kernel's source, the shared header included.
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

#[cfg(test)]
mod tests {
    use super::*;

    /// The definitions each kernel takes from the shared header, and nowhere else.
    const SHARED: [&str; 18] = [
        "typedef unsigned short u16;",
        "#if MIN_BLOCKS > 0",
        "int pad_idx(int i)",
        "float padded_sample(const float *seg, int p)",
        "const float *segment_start(",
        "BlockSegments block_segments(",
        "void mel_sums_pair(",
        "void mel_sums(",
        "float log_scale(float v)",
        "u16 f16_bits(float v)",
        "void store(void *out, long i, float v)",
        "void finish_segments(",
        "void dft2(",
        "void dft4(",
        "void dft8(",
        "void stockham_stage(",
        "void fft_from(",
        "void mel_body(",
    ];

    #[test]
    fn both_kernels_are_the_shared_header_then_their_own_file() {
        for kernel in CudaKernel::ALL {
            let src = kernel.source();
            let own = src
                .strip_prefix("#line 1 \"mel_common.cuh\"\n")
                .and_then(|s| s.strip_prefix(COMMON_SOURCE))
                .unwrap_or_else(|| panic!("{}: the header does not come first", kernel.name()));
            let line = format!("#line 1 \"{}\"\n", kernel.file());
            let own = own.strip_prefix(line.as_str()).expect("the kernel's #line");
            assert!(own.contains(&format!("void BOUNDS\n{}(", kernel.entry())));
            // The entry point runs the shared body with the file's own arithmetic.
            assert_eq!(own.matches("mel_body<").count(), 1, "{}", kernel.name());
            for s in SHARED {
                assert_eq!(src.matches(s).count(), 1, "{}: {s}", kernel.name());
                assert!(COMMON_SOURCE.contains(s), "{s}");
            }
        }
    }
}

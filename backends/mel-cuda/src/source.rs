//! The kernel sources and the plan-specific pieces that go with them: NVRTC macro
//! definitions, the device's limits and the launch shape chosen within them, shared-memory
//! size, and the constant tables.

use mel_core::dsp::{
    ComplexDw, FilterSpans, SegmentCsr, dft_twiddles, f32_dw, stockham_twiddles_dw, twiddles_dw,
};
use mel_core::spec::{LogScale, PadMode};
use mel_core::{Dtype, Error, MelPlan, Result};

/// The f64 kernel (verified on an H100), compiled by NVRTC with [`macros`].
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

    /// Registers per thread ptxas gives the kernel for leak-4k on sm_90 (160 and 168;
    /// other architectures differ: sm_89 118 and 193), the estimate [`Shape::choose`]
    /// counts occupancy with (the real count is known only once compiled for the shape).
    pub fn registers_estimate(self) -> usize {
        match self {
            CudaKernel::F64 => 160,
            CudaKernel::F32 => 168,
        }
    }

    /// The kernel likely fastest on a device: f64 where FP64 runs at half the FP32 rate
    /// (the data-centre chips: compute capability 6.0, 7.0, 8.0, 9.0, 10.0), f32
    /// elsewhere (FP64 at 1/32 or 1/64). A suggestion, not the default: the default stays
    /// [`CudaKernel::F64`] until the f32 kernel has passed its conformance suite on a GPU.
    pub fn suggested(device: &DeviceLimits) -> CudaKernel {
        match device.compute_capability {
            (6, 0) | (7, 0) | (8, 0) | (9, 0) | (10, 0) => CudaKernel::F64,
            _ => CudaKernel::F32,
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

/// What the launch shape is chosen from: the device's attributes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DeviceLimits {
    /// Compute capability (major, minor).
    pub compute_capability: (i32, i32),
    /// Streaming multiprocessors.
    pub sm_count: usize,
    /// Dynamic shared memory one block may use (opt-in maximum), bytes.
    pub shared_per_block: usize,
    /// Shared memory of one multiprocessor, bytes.
    pub shared_per_sm: usize,
    /// Resident threads per multiprocessor.
    pub threads_per_sm: usize,
    /// Resident blocks per multiprocessor.
    pub blocks_per_sm: usize,
    /// 32-bit registers per multiprocessor.
    pub registers_per_sm: usize,
}

impl DeviceLimits {
    /// An H100 SXM (132 SMs, 227 KiB per block, 228 KiB per SM): for tests and examples.
    pub const H100: DeviceLimits = DeviceLimits {
        compute_capability: (9, 0),
        sm_count: 132,
        shared_per_block: 227 * 1024,
        shared_per_sm: 228 * 1024,
        threads_per_sm: 2048,
        blocks_per_sm: 32,
        registers_per_sm: 65536,
    };

    /// A GeForce RTX 4090 (Ada: 128 SMs, 99 KiB per block, 100 KiB per SM): for tests.
    pub const RTX_4090: DeviceLimits = DeviceLimits {
        compute_capability: (8, 9),
        sm_count: 128,
        shared_per_block: 99 * 1024,
        shared_per_sm: 100 * 1024,
        threads_per_sm: 1536,
        blocks_per_sm: 24,
        registers_per_sm: 65536,
    };

    /// Blocks of `shape` that can be resident on one multiprocessor at once, as shared
    /// memory, threads, registers (`registers` per thread) and the block limit allow.
    pub fn resident_blocks(&self, shape: &Shape, plan: &MelPlan, registers: usize) -> usize {
        // The driver reserves 1 KiB of shared memory per block.
        let by_shared = self.shared_per_sm / (shape.shared_bytes(plan) + 1024);
        let by_threads = self.threads_per_sm / (32 * shape.warps);
        // Registers are allocated per warp in units of 256.
        let per_warp = (registers.max(1) * 32).next_multiple_of(256);
        let by_registers = self.registers_per_sm / (per_warp * shape.warps);
        by_shared
            .min(by_threads)
            .min(by_registers)
            .min(self.blocks_per_sm)
    }
}

/// Launch shape: warps per block, distinct segments per block, and the blocks per
/// multiprocessor the compiler must fit (a register cap; 0 for none).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shape {
    /// Warps per block.
    pub warps: usize,
    /// Distinct segments per block.
    pub segs: usize,
    /// `__launch_bounds__` minimum blocks per multiprocessor; 0 leaves registers uncapped.
    pub min_blocks: usize,
}

impl Shape {
    /// Dynamic shared memory one block needs for `plan` (the same for both kernels: the
    /// f32 kernel's double-word values and hi + lo tables take the f64 kernel's bytes).
    pub fn shared_bytes(&self, plan: &MelPlan) -> usize {
        let twiddles = plan.n_fft() * 16;
        let buffers = self.warps * (plan.n_fft() + plan.n_fft() / 8) * 16;
        let window = plan.n_fft() * 8;
        let weights = weight_count(plan).next_multiple_of(4) * 4;
        let mel = self.segs * plan.n_mels() * plan.n_frames() * 4;
        twiddles + buffers + window + weights + mel
    }

    /// The launch shape for `plan` on `device`, for chunks of `chunk_clips` clips.
    ///
    /// Candidates are 1, 2, 4 or 8 warps and up to enough segments for 40 frames per
    /// block (a power of two: 8 for leak-4k), every one that fits the device's shared
    /// memory per block. Preferred, in order: (1) no idle warp (at least one frame pair
    /// per warp); (2) resident warps per multiprocessor, up to 16, as shared memory,
    /// threads and registers allow ([`CudaKernel::registers_estimate`]); (3) a chunk's
    /// blocks filling every multiprocessor's resident blocks (the SM count enters here;
    /// as a fraction, up to all of them); (4) frames per warp, up to 10 (the tables each
    /// block loads are amortised over more transforms); (5) 4 warps, the measured
    /// default. On an H100 both kernels get 4 warps × 8 segments for leak-4k (the f64
    /// kernel's verified shape: 12 resident warps per SM, as registers allow).
    pub fn choose(
        plan: &MelPlan,
        kernel: CudaKernel,
        device: &DeviceLimits,
        chunk_clips: usize,
    ) -> Result<Shape> {
        let frames = plan.n_frames().max(1);
        let most_segs = 40usize.div_ceil(frames).next_power_of_two();
        let segments = chunk_clips.max(1) * plan.distinct_offsets().len();
        // (no idle warp, resident warps, fill ‰, frames per warp, 4 warps)
        type Score = (bool, usize, usize, usize, bool);
        let mut best: Option<(Score, Shape)> = None;
        for warps in [4, 8, 2, 1] {
            let mut segs = most_segs;
            while segs >= 1 {
                let shape = Shape {
                    warps,
                    segs,
                    min_blocks: 0,
                };
                if shape.shared_bytes(plan) <= device.shared_per_block {
                    let resident =
                        device.resident_blocks(&shape, plan, kernel.registers_estimate());
                    let slots = (device.sm_count * resident).max(1);
                    let score = (
                        (segs * frames).div_ceil(2) >= warps,
                        (resident * warps).min(16),
                        (segments.div_ceil(segs) * 1000 / slots).min(1000),
                        (segs * frames).div_ceil(warps).min(10),
                        warps == 4,
                    );
                    if best.as_ref().is_none_or(|(b, _)| score > *b) {
                        best = Some((score, shape));
                    }
                }
                segs /= 2;
            }
        }
        if let Some((_, shape)) = best {
            return Ok(shape);
        }
        let one = Shape {
            warps: 1,
            segs: 1,
            min_blocks: 0,
        };
        Err(Error::Device {
            backend: "cuda".into(),
            message: format!(
                "n_fft {} with {} mels × {} frames needs {} bytes of shared memory per block; the device allows {}",
                plan.n_fft(),
                plan.n_mels(),
                plan.n_frames(),
                one.shared_bytes(plan),
                device.shared_per_block
            ),
        })
    }
}

/// Non-zero filterbank weights (the kernel keeps them in shared memory).
pub fn weight_count(plan: &MelPlan) -> usize {
    plan.sparse_filterbank()
        .filters
        .iter()
        .map(|f| f.weights.len())
        .sum()
}

fn lit(v: f64) -> String {
    format!("{v:e}")
}

/// `-D` definitions that specialise either kernel to `plan` and `shape`.
pub fn macros(plan: &MelPlan, shape: Shape) -> Result<Vec<String>> {
    let refuse = |why: String| Error::Device {
        backend: "cuda".into(),
        message: why,
    };
    if plan.n_fft() > 1 << 15 {
        return Err(refuse(format!(
            "n_fft {} is above the CUDA backend's limit of 32768",
            plan.n_fft()
        )));
    }
    if plan.clip_samples() > i32::MAX as usize {
        return Err(refuse("clips longer than 2^31 samples".into()));
    }
    let (log_kind, log_mul, amin, has_top, top, ln_off) = match plan.log() {
        LogScale::Db { amin, top_db } => (
            1,
            plan.db_multiplier(),
            amin,
            top_db.is_some(),
            top_db.unwrap_or(0.0),
            0.0,
        ),
        LogScale::Ln { offset } => (2, 1.0, 0.0, false, 0.0, offset),
        LogScale::None => (0, 1.0, 0.0, false, 0.0, 0.0),
    };
    let out_kind = match plan.dtype() {
        Dtype::F32 => 0,
        Dtype::F16 => 1,
        Dtype::Bf16 => 2,
    };
    let pad = if plan.center() { plan.n_fft() / 2 } else { 0 };
    let [r2_hi, r2_lo] = f32_dw(std::f64::consts::FRAC_1_SQRT_2);
    let defs = [
        ("N_FFT", plan.n_fft().to_string()),
        ("POW2", u8::from(plan.n_fft().is_power_of_two()).to_string()),
        ("N_FREQS", plan.n_freqs().to_string()),
        ("HOP", plan.hop_length().to_string()),
        ("N_FRAMES", plan.n_frames().to_string()),
        ("SEG_LEN", plan.segment_len().to_string()),
        ("PAD", pad.to_string()),
        (
            "REFLECT",
            u8::from(plan.pad_mode() == PadMode::Reflect && pad > 0).to_string(),
        ),
        ("POWER", plan.power().to_string()),
        ("N_MELS", plan.n_mels().to_string()),
        ("N_WEIGHTS", weight_count(plan).to_string()),
        ("CLIP_SAMPLES", plan.clip_samples().to_string()),
        ("N_DISTINCT", plan.distinct_offsets().len().to_string()),
        ("LOG_KIND", log_kind.to_string()),
        ("LOG_MUL", format!("{}f", lit(log_mul))),
        ("AMIN", format!("{}f", lit(amin))),
        ("HAS_TOP_DB", u8::from(has_top).to_string()),
        ("TOP_DB", format!("{}f", lit(top))),
        ("LN_OFFSET", format!("{}f", lit(ln_off))),
        ("OUT_KIND", out_kind.to_string()),
        ("SEGS", shape.segs.to_string()),
        ("WARPS", shape.warps.to_string()),
        ("MIN_BLOCKS", shape.min_blocks.to_string()),
        // cos(pi/4) for the f32 kernel, from f64: hi rounded once, lo the rest.
        ("R2_HI", format!("{r2_hi:e}f")),
        ("R2_LO", format!("{r2_lo:e}f")),
    ];
    Ok(defs.iter().map(|(k, v)| format!("-D{k}={v}")).collect())
}

/// The constant tables the kernel reads, built once per plan.
#[derive(Debug, Clone, PartialEq)]
pub struct Tables {
    /// Analysis window, zero-padded to n_fft.
    pub window: Vec<f64>,
    /// Twiddles as interleaved (re, im), computed in f64, n_fft entries: for a power-of-two
    /// n_fft the Stockham stages' tables one after another (see [`stage_twiddles`]),
    /// zero-padded; otherwise exp(-2πik/n_fft) for k in 0..n_fft (the direct DFT's).
    pub twiddle: Vec<f64>,
    /// Start of each distinct segment in its clip.
    pub offsets: Vec<i32>,
    /// CSR: output segments of distinct segment d are `map_out[map_start[d]..map_start[d+1]]`.
    pub map_start: Vec<i32>,
    /// See `map_start`.
    pub map_out: Vec<i32>,
    /// First bin of each mel filter.
    pub f_start: Vec<i32>,
    /// Bins in each mel filter.
    pub f_len: Vec<i32>,
    /// Offset of each filter's weights in `f_w`.
    pub f_off: Vec<i32>,
    /// The filters' non-zero weights (f32: the mel sums run in f32, like the CPU backend's output).
    pub f_w: Vec<f32>,
    /// The f32 kernel's window: `[hi, lo]` per sample (hi rounded once from f64).
    pub window_dw: Vec<[f32; 2]>,
    /// The f32 kernel's twiddles, `[re.hi, im.hi, re.lo, im.lo]`, n_fft entries: for a
    /// power-of-two n_fft the Stockham stages' tables ([`stockham_twiddles_dw`]: every
    /// power of each stage's twiddle, laid out as [`stage_twiddles`]), zero-padded;
    /// otherwise exp(-2πik/n_fft) for k in 0..n_fft.
    pub twiddle_dw: Vec<[f32; 4]>,
}

impl Tables {
    /// The tables for `plan`.
    pub fn new(plan: &MelPlan) -> Tables {
        let n = plan.n_fft();
        let mut twiddle: Vec<f64> = if n.is_power_of_two() {
            stage_twiddles(n)
        } else {
            dft_twiddles(n)
        };
        twiddle.resize(2 * n, 0.0);
        let csr = SegmentCsr::new(plan);
        let spans = FilterSpans::new(plan);
        let ints = |v: Vec<u32>| v.into_iter().map(|x| x as i32).collect::<Vec<i32>>();
        let quad = |t: &ComplexDw| [t.hi[0], t.hi[1], t.lo[0], t.lo[1]];
        let mut twiddle_dw: Vec<[f32; 4]> = if n.is_power_of_two() {
            stockham_twiddles_dw(n, &stage_radices(n))
        } else {
            twiddles_dw(n)
        }
        .iter()
        .map(quad)
        .collect();
        twiddle_dw.resize(n, [0.0; 4]);
        Tables {
            window: plan.window().to_vec(),
            twiddle,
            offsets: plan.distinct_offsets().iter().map(|&o| o as i32).collect(),
            map_start: ints(csr.start),
            map_out: ints(csr.out),
            f_start: ints(spans.first),
            f_len: ints(spans.len),
            f_off: ints(spans.offset),
            f_w: spans.weights,
            window_dw: plan.window().iter().map(|&w| f32_dw(w)).collect(),
            twiddle_dw,
        }
    }
}

/// The kernels' Stockham stage radices for a power-of-two `n`: radix 8 while it divides
/// what is left, then one radix-4 or radix-2 stage.
pub fn stage_radices(n: usize) -> Vec<usize> {
    let mut out = Vec::new();
    let mut ns = 1;
    while ns < n {
        let radix = if ns * 8 <= n {
            8
        } else if ns * 4 <= n {
            4
        } else {
            2
        };
        out.push(radix);
        ns *= radix;
    }
    out
}

/// The kernel's Stockham stages for a power-of-two `n` ([`stage_radices`]). Each stage
/// with `ns` values done so far and radix `r_max` contributes exp(-2πi·r·k/(ns·r_max))
/// for r in 1..r_max, k in 0..ns, laid out `[r - 1][k]`, as interleaved (re, im).
pub fn stage_twiddles(n: usize) -> Vec<f64> {
    let mut out = Vec::new();
    let mut ns = 1;
    while ns < n {
        let radix = if ns * 8 <= n {
            8
        } else if ns * 4 <= n {
            4
        } else {
            2
        };
        for r in 1..radix {
            for k in 0..ns {
                let a = -2.0 * std::f64::consts::PI * (r * k) as f64 / (ns * radix) as f64;
                out.extend([a.cos(), a.sin()]);
            }
        }
        ns *= radix;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use mel_core::Config;

    #[test]
    fn leak_4k_tables_and_macros() {
        let plan = MelPlan::from_config(&Config::default()).unwrap();
        let t = Tables::new(&plan);
        assert_eq!(t.offsets.len(), 159);
        assert_eq!(t.map_start.len(), 160);
        assert_eq!(t.map_out.len(), 237);
        assert_eq!(*t.map_start.last().unwrap(), 237);
        let mut seen: Vec<i32> = t.map_out.clone();
        seen.sort();
        assert_eq!(seen, (0..237).collect::<Vec<_>>());
        assert_eq!(t.f_start.len(), 32);
        assert_eq!(t.f_w.len(), t.f_len.iter().sum::<i32>() as usize);
        // Stage tables: 7 (ns 1) + 56 (ns 8) + 448 (ns 64) entries, padded to 512.
        assert_eq!(stage_twiddles(512).len(), 2 * 511);
        assert_eq!(t.twiddle.len(), 2 * 512);
        // Stage 2 (ns 8, from entry 7): r = 2, k = 2 is exp(-2πi·4/64) = exp(-iπ/8).
        let e = 7 + 8 + 2;
        let a = -std::f64::consts::PI / 8.0;
        assert!((t.twiddle[2 * e] - a.cos()).abs() < 1e-15);
        assert!((t.twiddle[2 * e + 1] - a.sin()).abs() < 1e-15);
        assert_eq!(stage_twiddles(8).len(), 2 * 7);
        assert_eq!(stage_twiddles(32).len(), 2 * (7 + 3 * 8));
        // The f32 kernel's tables: the same values as hi + lo, every power stored.
        assert_eq!(t.twiddle_dw.len(), 512);
        let q = t.twiddle_dw[e];
        assert_eq!([q[0], q[1]], [a.cos() as f32, a.sin() as f32]);
        assert!((q[0] as f64 + q[2] as f64 - a.cos()).abs() < 1e-15);
        // The last stage (ns 64, from entry 63), r = 7, k = 5: exp(-2πi·35/512).
        let q = t.twiddle_dw[63 + 6 * 64 + 5];
        let b = -2.0 * std::f64::consts::PI * 35.0 / 512.0;
        assert_eq!([q[0], q[1]], [b.cos() as f32, b.sin() as f32]);
        // hi + lo is the f64 window (0.5 - 0.5·cos(π/2) is 0.5 - 5.6e-17 in f64).
        let [hi, lo] = t.window_dw[128];
        assert_eq!(hi, 0.5);
        assert_eq!(hi as f64 + lo as f64, plan.window()[128]);
        let shape = Shape::choose(&plan, CudaKernel::F64, &DeviceLimits::H100, 256).unwrap();
        let m = macros(&plan, shape).unwrap();
        assert!(m.contains(&"-DN_FFT=512".to_string()));
        assert!(m.contains(&"-DPOW2=1".to_string()));
        assert!(m.contains(&"-DOUT_KIND=1".to_string()));
        assert!(m.iter().any(|d| d.starts_with("-DAMIN=1e-10")));
        assert!(m.contains(&"-DR2_HI=7.0710677e-1f".to_string()), "{m:?}");
        assert!(m.contains(&"-DR2_LO=1.21016175e-8f".to_string()), "{m:?}");
    }

    #[test]
    fn shapes_follow_the_device() {
        let plan = MelPlan::from_config(&Config::default()).unwrap();
        let choose = |k, d: &DeviceLimits, chunk| Shape::choose(&plan, k, d, chunk).unwrap();
        let h100 = DeviceLimits::H100;
        // H100: the f64 kernel keeps its verified shape (4 warps, 8 segments: 3 blocks
        // of 56 KiB, 12 warps per SM, as its 160 registers allow), and so does the f32
        // one (168 registers: 12 warps per SM whatever the shared memory).
        for kernel in CudaKernel::ALL {
            let s = choose(kernel, &h100, 256);
            assert_eq!((s.warps, s.segs), (4, 8), "{kernel:?}");
            let regs = kernel.registers_estimate();
            assert_eq!(h100.resident_blocks(&s, &plan, regs), 3);
        }
        // 100 KiB per SM (Ada): one 4-warp block of 8 segments fits, two of 2 do.
        let ada_limits = DeviceLimits::RTX_4090;
        let ada = choose(CudaKernel::F32, &ada_limits, 256);
        assert!(ada.shared_bytes(&plan) <= ada_limits.shared_per_block);
        let regs = CudaKernel::F32.registers_estimate();
        assert!(
            ada_limits.resident_blocks(&ada, &plan, regs) * ada.warps >= 8,
            "{ada:?}"
        );
        // One clip per chunk is 159 segments: smaller blocks spread it over more SMs,
        // and no warp is left without a frame pair.
        let small = choose(CudaKernel::F64, &h100, 1);
        assert!(small.segs < 8, "{small:?}");
        assert!((small.segs * plan.n_frames()).div_ceil(2) >= small.warps);
        for s in [ada, small] {
            assert!(s.shared_bytes(&plan) <= h100.shared_per_block);
        }
    }

    #[test]
    fn the_suggested_kernel_follows_fp64_throughput() {
        assert_eq!(CudaKernel::suggested(&DeviceLimits::H100), CudaKernel::F64);
        assert_eq!(
            CudaKernel::suggested(&DeviceLimits::RTX_4090),
            CudaKernel::F32
        );
        assert_eq!(CudaKernel::default(), CudaKernel::F64);
        assert_eq!("f32".parse::<CudaKernel>(), Ok(CudaKernel::F32));
        assert!("f16".parse::<CudaKernel>().is_err());
    }

    #[test]
    fn a_block_that_cannot_fit_is_refused_with_the_numbers() {
        let plan = MelPlan::from_config(&Config::default()).unwrap();
        let tiny = DeviceLimits {
            shared_per_block: 1000,
            ..DeviceLimits::H100
        };
        let e = Shape::choose(&plan, CudaKernel::F32, &tiny, 1)
            .unwrap_err()
            .to_string();
        assert!(e.contains("shared memory") && e.contains("1000"), "{e}");
    }
}

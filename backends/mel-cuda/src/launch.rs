//! The launch shape: the device's limits ([`DeviceLimits`], from its attributes), the
//! warps and segments per block chosen within them ([`Shape::choose`]), the shared memory
//! a block needs, and what the choice knows of each kernel (its registers, and which one
//! a device likely runs fastest).

use mel_core::{Error, MelPlan, Result};

use crate::kernel::CudaKernel;
use crate::tables::weight_count;

// What the launch shape knows of each kernel.
impl CudaKernel {
    /// Registers per thread ptxas gives the kernel for leak-4k on sm_90 (160 and 168;
    /// other architectures differ: sm_89 118 and 193), the estimate [`Shape::choose`]
    /// counts occupancy with (the real count is known only once compiled for the shape).
    pub fn registers_estimate(self) -> usize {
        match self {
            CudaKernel::F64 => 160,
            CudaKernel::F32 => 168,
        }
    }

    /// The kernel likely fastest on a device, and the backend's default: f64 where FP64
    /// runs at half the FP32 rate (the data-centre chips: compute capability 6.0, 7.0,
    /// 8.0, 9.0, 10.0), the compensated f32 one elsewhere (FP64 at 1/32 or 1/64: every
    /// consumer and laptop GPU). Both passed the 11 golden variants on an H100
    /// (BENCHMARKS.md, 2026-11-25).
    pub fn suggested(device: &DeviceLimits) -> CudaKernel {
        match device.compute_capability {
            (6, 0) | (7, 0) | (8, 0) | (9, 0) | (10, 0) => CudaKernel::F64,
            _ => CudaKernel::F32,
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

#[cfg(test)]
mod tests {
    use super::*;
    use mel_core::Config;

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

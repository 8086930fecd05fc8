//! The kernel source and the plan-specific pieces that go with it: NVRTC macro
//! definitions, launch shape and shared-memory size, and the constant tables.

use mel_core::config::{LogScale, PadMode};
use mel_core::dsp::{FilterSpans, SegmentCsr, dft_twiddles};
use mel_core::{Dtype, Error, MelPlan, Result};

/// The fused kernel, compiled by NVRTC with [`macros`].
pub const KERNEL_SOURCE: &str = include_str!("mel.cu");

/// The kernel's entry point.
pub const KERNEL_NAME: &str = "mel_kernel";

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
    /// Dynamic shared memory one block needs for `plan`.
    pub fn shared_bytes(&self, plan: &MelPlan) -> usize {
        let twiddles = plan.n_fft() * 16;
        let buffers = self.warps * (plan.n_fft() + plan.n_fft() / 8) * 16;
        let window = plan.n_fft() * 8;
        let weights = weight_count(plan).next_multiple_of(4) * 4;
        let mel = self.segs * plan.n_mels() * plan.n_frames() * 4;
        twiddles + buffers + window + weights + mel
    }

    /// The default shape for `plan` within `max_shared` bytes per block: 4 warps, and
    /// enough segments for 10 frames (5 pairs) per warp; fewer if memory is short.
    pub fn choose(plan: &MelPlan, max_shared: usize) -> Result<Shape> {
        let frames_wanted: usize = 40;
        let mut segs = frames_wanted.div_ceil(plan.n_frames().max(1)).max(1);
        let warps = 4;
        loop {
            let s = Shape {
                warps,
                segs,
                min_blocks: 0,
            };
            if s.shared_bytes(plan) <= max_shared {
                return Ok(s);
            }
            if segs == 1 {
                break;
            }
            segs /= 2;
        }
        let one = Shape {
            warps: 1,
            segs: 1,
            min_blocks: 0,
        };
        let need = one.shared_bytes(plan);
        if need <= max_shared {
            return Ok(one);
        }
        Err(Error::Device {
            backend: "cuda".into(),
            message: format!(
                "n_fft {} with {} mels × {} frames needs {need} bytes of shared memory per block; the device allows {max_shared}",
                plan.n_fft(),
                plan.n_mels(),
                plan.n_frames()
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

/// `-D` definitions that specialise the kernel to `plan` and `shape`.
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
        }
    }
}

/// The kernel's Stockham stages for a power-of-two `n`: radix 8 while it divides what is
/// left, then one radix-4 or radix-2 stage. Each stage with `ns` values done so far and
/// radix `r_max` contributes exp(-2πi·r·k/(ns·r_max)) for r in 1..r_max, k in 0..ns,
/// laid out [r - 1][k], as interleaved (re, im).
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
        let shape = Shape::choose(&plan, 48 * 1024).unwrap();
        assert!(shape.shared_bytes(&plan) <= 48 * 1024);
        let m = macros(&plan, shape).unwrap();
        assert!(m.contains(&"-DN_FFT=512".to_string()));
        assert!(m.contains(&"-DPOW2=1".to_string()));
        assert!(m.contains(&"-DOUT_KIND=1".to_string()));
        assert!(m.iter().any(|d| d.starts_with("-DAMIN=1e-10")));
    }

    #[test]
    fn a_block_that_cannot_fit_is_refused_with_the_numbers() {
        let plan = MelPlan::from_config(&Config::default()).unwrap();
        let e = Shape::choose(&plan, 1000).unwrap_err().to_string();
        assert!(e.contains("shared memory") && e.contains("1000"), "{e}");
    }
}

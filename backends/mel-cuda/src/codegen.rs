//! The code generation: the `-D` definitions that specialise either kernel's source to
//! a plan and a launch shape (every loop bound a constant the compiler knows), for NVRTC
//! and for the host emulation alike.

use mel_core::dsp::f32_dw;
use mel_core::spec::{LogScale, PadMode};
use mel_core::{Dtype, Error, MelPlan, Result};

use crate::launch::Shape;
use crate::tables::weight_count;

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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{CudaKernel, DeviceLimits};
    use mel_core::Config;

    #[test]
    fn leak_4k_macros() {
        let plan = MelPlan::from_config(&Config::default()).unwrap();
        let shape = Shape::choose(&plan, CudaKernel::F64, &DeviceLimits::H100, 256).unwrap();
        let m = macros(&plan, shape).unwrap();
        assert!(m.contains(&"-DN_FFT=512".to_string()));
        assert!(m.contains(&"-DPOW2=1".to_string()));
        assert!(m.contains(&"-DOUT_KIND=1".to_string()));
        assert!(m.iter().any(|d| d.starts_with("-DAMIN=1e-10")));
        assert!(m.contains(&"-DR2_HI=7.0710677e-1f".to_string()), "{m:?}");
        assert!(m.contains(&"-DR2_LO=1.21016175e-8f".to_string()), "{m:?}");
    }
}

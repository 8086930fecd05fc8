//! The comparison rule shared by every backend test.

use mel_core::{Dtype, LogScale, MelPlan, OutputBuf};

/// dB bound for f32 output.
pub const DB_TOLERANCE: f64 = 0.01;
/// Bins more than this many dB below their spectrogram's peak are not compared.
pub const DYNAMIC_RANGE_DB: f64 = 100.0;

/// The first bin that broke the bound.
#[derive(Debug, Clone, PartialEq)]
pub struct Mismatch {
    /// Flat index in the output.
    pub index: usize,
    /// Our value.
    pub ours: f64,
    /// The reference value.
    pub reference: f64,
    /// The allowed absolute difference at this bin.
    pub allowed: f64,
}

impl std::fmt::Display for Mismatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "bin {}: ours {:.6}, reference {:.6}, |diff| {:.6} > allowed {:.6}",
            self.index,
            self.ours,
            self.reference,
            (self.ours - self.reference).abs(),
            self.allowed
        )
    }
}

/// What a comparison found.
#[derive(Debug, Clone, PartialEq)]
pub struct Comparison {
    /// Bins inside the dynamic range that were compared.
    pub compared: usize,
    /// Largest |ours − reference| among compared bins.
    pub worst_error: f64,
    /// The allowance at that bin.
    pub worst_allowed: f64,
    /// The first failing bin, if any.
    pub first_mismatch: Option<Mismatch>,
}

/// Unit in the last place of `dtype` at magnitude `v` (0 for f32: the dB bound alone applies).
pub fn ulp(dtype: Dtype, v: f64) -> f64 {
    // (mantissa bits, exponent of the smallest normal)
    let (mantissa_bits, min_exp) = match dtype {
        Dtype::F32 => return 0.0,
        Dtype::F16 => (10, -14),
        Dtype::Bf16 => (7, -126),
    };
    // Subnormals share the smallest normal's spacing.
    let e = v.abs().log2().floor().max(min_exp as f64);
    2f64.powf(e - mantissa_bits as f64)
}

/// Compares `ours` with `reference` (same layout) under the suite's rule for `plan`.
pub fn compare(plan: &MelPlan, ours: &OutputBuf, reference: &[f64]) -> Comparison {
    compare_within(plan, ours, reference, DB_TOLERANCE)
}

/// [`compare`] with another dB bound for f32 output (the `fast` precision's).
pub fn compare_within(
    plan: &MelPlan,
    ours: &OutputBuf,
    reference: &[f64],
    db_bound: f64,
) -> Comparison {
    assert_eq!(
        ours.len(),
        reference.len(),
        "output and reference sizes differ"
    );
    let vps = plan.values_per_segment();
    let mut result = Comparison {
        compared: 0,
        worst_error: 0.0,
        worst_allowed: 0.0,
        first_mismatch: None,
    };
    for (s, spec) in reference.chunks(vps).enumerate() {
        let peak = spec.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
        for (j, &r) in spec.iter().enumerate() {
            let (inside, bound) = match plan.log() {
                LogScale::Db { .. } => (r >= peak - DYNAMIC_RANGE_DB, db_bound),
                LogScale::Ln { .. } => (
                    r >= peak - DYNAMIC_RANGE_DB * std::f64::consts::LN_10 / 10.0,
                    db_bound * std::f64::consts::LN_10 / 10.0,
                ),
                LogScale::None => (
                    r >= peak * 10f64.powf(-DYNAMIC_RANGE_DB / 10.0),
                    r * (10f64.powf(db_bound / 10.0) - 1.0),
                ),
            };
            if !inside {
                continue;
            }
            let index = s * vps + j;
            let o = ours.get_f64(index);
            let allowed = bound + ulp(ours.dtype(), r);
            let err = (o - r).abs();
            result.compared += 1;
            if err > result.worst_error || err.is_nan() {
                result.worst_error = err;
                result.worst_allowed = allowed;
            }
            let within = err <= allowed; // false for NaN
            if !within && result.first_mismatch.is_none() {
                result.first_mismatch = Some(Mismatch {
                    index,
                    ours: o,
                    reference: r,
                    allowed,
                });
            }
        }
    }
    result
}

#[cfg(test)]
mod tests {
    use super::*;
    use mel_core::Config;

    fn plan() -> MelPlan {
        let mut c = Config::default();
        c.audio.clip_seconds = 0.25; // 1024 samples: one long window
        c.output.dtype = Dtype::F32;
        MelPlan::from_config(&c).unwrap()
    }

    #[test]
    fn detects_an_error_just_above_the_bound_and_accepts_one_below() {
        let p = plan();
        let reference: Vec<f64> = (0..p.values_per_clip())
            .map(|i| -((i % 90) as f64))
            .collect();
        let mut ours: Vec<f32> = reference.iter().map(|&r| r as f32).collect();
        ours[7] += 0.009;
        assert!(
            compare(&p, &OutputBuf::F32(ours.clone()), &reference)
                .first_mismatch
                .is_none()
        );
        ours[7] += 0.002;
        let m = compare(&p, &OutputBuf::F32(ours), &reference)
            .first_mismatch
            .unwrap();
        assert_eq!(m.index, 7);
    }

    #[test]
    fn bins_below_the_dynamic_range_are_not_compared() {
        let p = plan();
        let mut reference = vec![-10.0; p.values_per_clip()];
        reference[3] = -150.0; // 140 dB below the peak of its spectrogram
        let mut ours: Vec<f32> = reference.iter().map(|&r| r as f32).collect();
        ours[3] = -100.0;
        let c = compare(&p, &OutputBuf::F32(ours.clone()), &reference);
        assert!(c.first_mismatch.is_none());
        assert_eq!(c.compared, p.values_per_clip() - 1);
        ours[4] = f32::NAN;
        assert!(
            compare(&p, &OutputBuf::F32(ours), &reference)
                .first_mismatch
                .is_some()
        );
    }

    #[test]
    fn ulp_of_half_types() {
        assert_eq!(ulp(Dtype::F16, 1.0), 2f64.powi(-10));
        assert_eq!(ulp(Dtype::F16, -100.0), 2f64.powi(6 - 10));
        assert_eq!(ulp(Dtype::Bf16, 3.0), 2f64.powi(1 - 7));
        assert_eq!(ulp(Dtype::F32, 3.0), 0.0);
        // f16 subnormals are 2^-24 apart
        assert_eq!(ulp(Dtype::F16, 3e-6), 2f64.powi(-24));
        assert_eq!(ulp(Dtype::F16, 0.0), 2f64.powi(-24));
    }
}

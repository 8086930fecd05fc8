//! The backend conformance suite: every backend is run through the same golden
//! variants and dtypes, and compared with the float64 torchaudio-definition references
//! in `fixtures/golden` under one tolerance rule.
//!
//! Tolerance (issue 3): for f32 output, |ours − reference| ≤ 0.01 dB on every bin within
//! 100 dB of its spectrogram's peak; for f16/bf16 the same plus one unit in the last place
//! of the stored type at the reference value. For `ln` and `none` log scales the 0.01 dB
//! bound is converted to the stored unit (ln: 0.01·ln10/10; linear: a ratio of 10^0.001).
#![warn(missing_docs)]

pub mod extra;
pub mod fast;
pub mod golden;
pub mod tolerance;

pub use fast::run_fast_suite;
pub use golden::{Golden, fixtures_dir, goldens};
pub use tolerance::{Mismatch, compare, compare_within};

use mel_core::{Config, Dtype, MelBackend, MelPlan, OutputBuf};

/// The dtypes every backend is checked in.
pub const DTYPES: [Dtype; 3] = [Dtype::F32, Dtype::F16, Dtype::Bf16];

/// The plan of `config`, or `None` where its dtype is refused because it cannot hold
/// what full-scale input gives (mel energies without a log in f16); any other refusal panics.
pub fn plan_in_dtype(config: &Config) -> Option<MelPlan> {
    match MelPlan::from_config(config) {
        Ok(plan) => Some(plan),
        Err(e) if e.to_string().contains("output.dtype = f16 cannot hold") => None,
        Err(e) => panic!("configuration refused: {e}"),
    }
}

/// Runs `backend_for(plan)` over every golden variant in every dtype and returns one line
/// per failing (variant, dtype), empty when all conform. `backend_for` returns `None` to
/// refuse a configuration, which counts as a failure (every backend must run every variant).
pub fn run_suite(
    mut backend_for: impl FnMut(MelPlan) -> Option<Box<dyn MelBackend>>,
) -> Vec<String> {
    let mut failures = Vec::new();
    for g in goldens() {
        for dtype in DTYPES {
            let mut config: Config = g.config.clone();
            config.output.dtype = dtype;
            let Some(plan) = plan_in_dtype(&config) else {
                continue;
            };
            let Some(mut backend) = backend_for(plan.clone()) else {
                failures.push(format!(
                    "{} {}: backend refused the configuration",
                    g.name,
                    dtype.name()
                ));
                continue;
            };
            let mut out = OutputBuf::zeros(dtype, g.clips * plan.values_per_clip());
            if let Err(e) = backend.compute(&g.input, out.as_mut_slice()) {
                failures.push(format!("{} {}: {e}", g.name, dtype.name()));
                continue;
            }
            let result = compare(&plan, &out, &g.expected);
            println!(
                "{:<40} {:<4} {}: {} bins compared, worst |err| {:.5} (allowed {:.5})",
                g.name,
                dtype.name(),
                backend.name(),
                result.compared,
                result.worst_error,
                result.worst_allowed
            );
            if let Some(m) = result.first_mismatch {
                failures.push(format!("{} {}: {m}", g.name, dtype.name()));
            }
        }
    }
    failures
}

//! The `fast` precision's conformance: every golden variant with `mel.precision = "fast"`,
//! f32 output, held to torchaudio's own float32 CPU error on that fixture instead of
//! the exact paths' 0.01 dB.
//!
//! The bounds are torchaudio 2.11's float32 CPU `MelSpectrogram` + `AmplitudeToDB`
//! against the float64 definition, worst dB over bins within 100 dB of each
//! spectrogram's peak, measured on these fixtures (`../shared/NOTES.md`, "Precision";
//! issue 26). torchaudio was measured on four of the eleven variants; each other variant
//! is held to the largest figure measured on its preset's signals (the stress fixture of
//! that preset, the hardest signals for a float32 transform), which is what torchaudio's
//! float32 reaches on that preset's inputs.

use mel_core::spec::Precision;
use mel_core::{Config, Dtype, MelBackend, MelPlan, OutputBuf};

use crate::golden::{Golden, goldens};
use crate::tolerance::compare_within;

/// torchaudio's float32 CPU error in dB on each fixture it was measured on: (fixture,
/// its preset, dB).
pub const TORCHAUDIO_F32_CPU_DB: [(&str, &str, f64); 4] = [
    ("leak-4k", "leak-4k", 0.0131),
    ("speech-16k", "speech-16k", 0.0290),
    ("stress-leak-4k", "leak-4k", 0.0286),
    ("stress-speech-16k", "speech-16k", 0.0470),
];

/// The `fast` bound for `g`: torchaudio's measured figure on it, else the largest
/// figure measured on its preset (leak-4k: 0.0286; speech-16k: 0.0470).
pub fn fast_bound(g: &Golden) -> f64 {
    if let Some((.., db)) = TORCHAUDIO_F32_CPU_DB.iter().find(|(n, ..)| *n == g.name) {
        return *db;
    }
    TORCHAUDIO_F32_CPU_DB
        .iter()
        .filter(|(_, preset, _)| *preset == g.preset)
        .map(|(.., db)| *db)
        .fold(f64::NAN, f64::max)
}

/// Runs `backend_for(plan)` over every golden variant with `precision = "fast"` in f32
/// and returns one line per variant that breaks its [`fast_bound`], empty when all hold.
/// Prints each variant's worst error and bound.
pub fn run_fast_suite(
    mut backend_for: impl FnMut(MelPlan) -> Option<Box<dyn MelBackend>>,
) -> Vec<String> {
    let mut failures = Vec::new();
    for g in goldens() {
        let mut config: Config = g.config.clone();
        config.output.dtype = Dtype::F32;
        config.mel.precision = Precision::Fast;
        let plan = MelPlan::from_config(&config).expect("every golden plans in f32");
        let bound = fast_bound(&g);
        assert!(
            bound.is_finite(),
            "{}: no fast bound for its preset",
            g.name
        );
        let Some(mut backend) = backend_for(plan.clone()) else {
            failures.push(format!("{}: backend refused the configuration", g.name));
            continue;
        };
        let mut out = OutputBuf::zeros(Dtype::F32, g.clips * plan.values_per_clip());
        if let Err(e) = backend.compute(&g.input, out.as_mut_slice()) {
            failures.push(format!("{}: {e}", g.name));
            continue;
        }
        let c = compare_within(&plan, &out, &g.expected, bound);
        println!(
            "fast {:<40} {}: worst {:.5} dB (bound {bound:.4}, torchaudio f32 CPU)",
            g.name,
            backend.name(),
            c.worst_error
        );
        if c.compared == 0 {
            failures.push(format!("{} fast: no bin compared", g.name));
        }
        if let Some(m) = c.first_mismatch {
            failures.push(format!("{} fast: {m}", g.name));
        }
    }
    failures
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_variant_has_a_bound_no_looser_than_torchaudios_worst_on_its_preset() {
        // The table's presets are the manifest's.
        for (name, preset, _) in TORCHAUDIO_F32_CPU_DB {
            let g = goldens().into_iter().find(|g| g.name == name).unwrap();
            assert_eq!(g.preset, preset, "{name}");
        }
        for g in goldens() {
            let b = fast_bound(&g);
            assert!(b.is_finite() && b > 0.01 && b <= 0.0470, "{}: {b}", g.name);
        }
        let leak = goldens().into_iter().find(|g| g.name == "leak-4k").unwrap();
        assert_eq!(fast_bound(&leak), 0.0131);
        let pad = goldens()
            .into_iter()
            .find(|g| g.name == "leak-constant-pad-power1")
            .unwrap();
        assert_eq!(fast_bound(&pad), 0.0286);
    }
}

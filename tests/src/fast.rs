//! The `fast` precision's conformance: every golden variant with `mel.precision = "fast"`,
//! f32 output, held to torchaudio's own float32 CPU error on that fixture (where that
//! is larger than the exact paths' 0.01 dB) instead of the exact paths' 0.01 dB.
//!
//! The figures are torchaudio 2.11's float32 CPU `MelSpectrogram` + `AmplitudeToDB` (or
//! the variant's ln / no log) against the float64 definition, worst error over bins
//! within 100 dB of each spectrogram's peak, in dB (the ln and no-log variants in their
//! dB equivalent, the unit `compare_within` takes), measured on every fixture by
//! `fixtures/torchaudio_f32_error.py` (which first reproduces each `expected.npy` from
//! torchaudio in float64 to 1e-9 dB). torchaudio's own error ranges from 0.00009 dB
//! (leak-top-db: the clamp leaves no deep bins) to 0.047 dB (stress-speech-16k).
//!
//! The bound is the larger of that figure and 0.01 dB: `fast` may be as far from the
//! definition as torchaudio's own float32, and never needs to be closer than the exact
//! contract. On two fixtures the CPU's f32 transform is within 0.01 dB but further than
//! torchaudio's f32 (leak-slaney-norm 0.0100 on AVX2 against 0.0085; the Hamming
//! variant 0.0006 against 0.0005): docs/numerics.md says so.

use mel_core::spec::Precision;
use mel_core::{Config, Dtype, MelBackend, MelPlan, OutputBuf};

use crate::golden::{Golden, goldens};
use crate::tolerance::compare_within;

/// torchaudio 2.11's float32 CPU error in dB on each golden fixture (the dB equivalent
/// for the ln and no-log variants), from `fixtures/torchaudio_f32_error.py`.
pub const TORCHAUDIO_F32_CPU_DB: [(&str, f64); 11] = [
    ("leak-4k", 0.01312),
    ("speech-16k", 0.02899),
    ("leak-slaney-norm", 0.008461),
    ("leak-constant-pad-power1", 0.02494),
    ("leak-top-db", 0.00009045),
    ("leak-short-only-no-log", 0.007384),
    ("speech-hamming-short-window-no-center", 0.0005146),
    ("speech-rect-ln-band", 0.005844),
    ("speech-slaney-norm-top-db", 0.0006442),
    ("stress-leak-4k", 0.0286),
    ("stress-speech-16k", 0.04702),
];

/// The exact paths' bound in dB, the least any fixture's `fast` bound is.
pub const EXACT_DB: f64 = 0.01;

/// The `fast` bound for `g`: torchaudio's float32 error on it or [`EXACT_DB`], whichever
/// is larger; `None` for a fixture torchaudio was not measured on (measure it with
/// `fixtures/torchaudio_f32_error.py` and add it to [`TORCHAUDIO_F32_CPU_DB`]).
pub fn fast_bound(g: &Golden) -> Option<f64> {
    TORCHAUDIO_F32_CPU_DB
        .iter()
        .find(|(n, _)| *n == g.name)
        .map(|(_, db)| db.max(EXACT_DB))
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
        let Some(bound) = fast_bound(&g) else {
            failures.push(format!(
                "{}: torchaudio's f32 error was not measured on it (fixtures/torchaudio_f32_error.py)",
                g.name
            ));
            continue;
        };
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
            "fast {:<40} {}: worst {:.6} (bound {bound:.4} dB: torchaudio f32 CPU {:.6}, exact {EXACT_DB})",
            g.name,
            backend.name(),
            c.worst_error,
            torchaudio_db(&g)
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

/// torchaudio's measured float32 error on `g` (NaN where not measured).
fn torchaudio_db(g: &Golden) -> f64 {
    TORCHAUDIO_F32_CPU_DB
        .iter()
        .find(|(n, _)| *n == g.name)
        .map_or(f64::NAN, |(_, db)| *db)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_table_measures_exactly_the_manifests_variants() {
        let mut table: Vec<&str> = TORCHAUDIO_F32_CPU_DB.iter().map(|(n, _)| *n).collect();
        let mut manifest: Vec<String> = goldens().into_iter().map(|g| g.name).collect();
        table.sort_unstable();
        manifest.sort_unstable();
        assert_eq!(table, manifest);
    }

    #[test]
    fn each_bound_is_torchaudios_error_or_the_exact_bound_whichever_is_larger() {
        let bound = |name: &str| {
            let g = goldens().into_iter().find(|g| g.name == name).unwrap();
            fast_bound(&g).unwrap()
        };
        assert_eq!(bound("leak-4k"), 0.01312);
        assert_eq!(bound("stress-speech-16k"), 0.04702);
        assert_eq!(bound("leak-top-db"), EXACT_DB);
        assert_eq!(bound("leak-slaney-norm"), EXACT_DB);
    }
}

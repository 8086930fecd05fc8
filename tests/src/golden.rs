//! Loading the golden fixtures written by `fixtures/make_goldens.py`.

use std::path::PathBuf;

use mel_core::Config;
use ndarray::ArrayD;
use ndarray_npy::read_npy;
use serde::Deserialize;

/// One golden variant: a configuration, its input clips and the reference output.
#[derive(Debug, Clone)]
pub struct Golden {
    /// Variant name.
    pub name: String,
    /// Which golden set: `torchaudio` (the definition's variants) or `stress` (signals
    /// hard on a float32 transform: int16-floor tones, DC offsets, 90 dB spreads, ...).
    pub set: String,
    /// The preset the configuration starts from (`leak-4k`, `speech-16k`).
    pub preset: String,
    /// The configuration (preset + overrides), output dtype left at the preset's.
    pub config: Config,
    /// Number of clips.
    pub clips: usize,
    /// `[clips, clip_samples]` input as f32 (the int16 fixture divided by 32768).
    pub input: Vec<f32>,
    /// The int16 samples as stored.
    pub input_i16: Vec<i16>,
    /// Reference output `[clips, ...clip_shape]` in f64, row-major.
    pub expected: Vec<f64>,
    /// Reference output shape.
    pub shape: Vec<usize>,
}

#[derive(Deserialize)]
struct Manifest {
    variants: Vec<Entry>,
}

#[derive(Deserialize)]
struct Entry {
    name: String,
    set: String,
    preset: String,
    config: String,
    input: String,
    expected: String,
}

/// The repository's `fixtures/` folder: where the build put it, else `fixtures/` in the
/// current folder (test binaries copied to another machine run from its checkout's root).
pub fn fixtures_dir() -> PathBuf {
    let built = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../fixtures");
    if built.exists() {
        built
    } else {
        PathBuf::from("fixtures")
    }
}

/// Every golden variant in `fixtures/golden/manifest.json`.
pub fn goldens() -> Vec<Golden> {
    let dir = fixtures_dir().join("golden");
    let manifest = dir.join("manifest.json");
    let text = std::fs::read_to_string(&manifest).unwrap_or_else(|e| {
        panic!(
            "the golden fixtures are missing ({}: {e}): run the tests from the root of a \
             checkout, whose fixtures/ they read (on another machine, carry fixtures/ with \
             the binaries)",
            std::path::absolute(&manifest)
                .unwrap_or(manifest.clone())
                .display()
        )
    });
    let manifest: Manifest = serde_json::from_str(&text).expect("manifest.json parses");
    manifest
        .variants
        .into_iter()
        .map(|e| {
            let base = mel_core::Preset::from_name(&e.preset)
                .expect("known preset")
                .config();
            let config =
                Config::merge_toml(&base, &e.config, Some(&e.name)).expect("variant config parses");
            let input: ArrayD<i16> = read_npy(dir.join(&e.input)).expect("input .npy reads");
            let expected: ArrayD<f64> =
                read_npy(dir.join(&e.expected)).expect("expected .npy reads");
            let clips = input.shape()[0];
            let input_i16: Vec<i16> = input.iter().copied().collect();
            Golden {
                name: e.name,
                set: e.set,
                preset: e.preset,
                config,
                clips,
                input: input_i16.iter().map(|&s| s as f32 / 32768.0).collect(),
                input_i16,
                shape: expected.shape().to_vec(),
                expected: expected.iter().copied().collect(),
            }
        })
        .collect()
}

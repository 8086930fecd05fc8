//! Only finite numbers are stored: float WAVs far beyond full scale (1e18, 1e30), with a
//! NaN or an infinity, and clips louder than the output dtype holds are named failures on
//! every backend, the rest is stored, and every stored value and statistic is finite;
//! settings that are 0 in f32, or a dtype that cannot hold full-scale values, are refused
//! before anything is read.

mod util;

use std::path::Path;
use std::process::Output;

use hound::{SampleFormat, WavSpec, WavWriter};
use util::{Dir, TestCommand};

const RATE: u32 = 4096;

/// Writes a mono float32 WAV of `samples` at 4096 Hz to `rel`.
fn float_wav(dir: &Dir, rel: &str, samples: &[f32]) {
    let p = dir.join(rel);
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    let spec = WavSpec {
        channels: 1,
        sample_rate: RATE,
        bits_per_sample: 32,
        sample_format: SampleFormat::Float,
    };
    let mut w = WavWriter::create(&p, spec).unwrap();
    for &s in samples {
        w.write_sample(s).unwrap();
    }
    w.finalize().unwrap();
}

/// 10 s of a sine at `hz` with amplitude `amp`, one sample replaced by `spike` if given.
fn sine(hz: f64, amp: f64, spike: Option<f32>) -> Vec<f32> {
    let mut v: Vec<f32> = (0..RATE as usize * 10)
        .map(|i| (amp * (2.0 * std::f64::consts::PI * hz * i as f64 / RATE as f64).sin()) as f32)
        .collect();
    if let Some(s) = spike {
        v[1000] = s;
    }
    v
}

/// The files a hostile or unlucky user brings: four good clips and, among them, float
/// WAVs at 1e18 and 1e30, one with a NaN sample and one with an infinite sample.
fn hostile_dataset(dir: &Dir) -> Vec<&'static str> {
    for (i, hz) in [110.0, 220.0].into_iter().enumerate() {
        float_wav(
            dir,
            &format!("data/training/hum/ok{i}.wav"),
            &sine(hz, 0.5, None),
        );
        float_wav(
            dir,
            &format!("data/training/leak/ok{i}.wav"),
            &sine(hz * 7.0, 0.9, None),
        );
    }
    float_wav(dir, "data/training/hum/big18.wav", &sine(300.0, 1e18, None));
    float_wav(
        dir,
        "data/training/leak/big30.wav",
        &sine(300.0, 1e30, None),
    );
    float_wav(
        dir,
        "data/training/hum/nan.wav",
        &sine(300.0, 0.5, Some(f32::NAN)),
    );
    float_wav(
        dir,
        "data/training/leak/inf.wav",
        &sine(300.0, 0.5, Some(f32::INFINITY)),
    );
    vec!["big18.wav", "big30.wav", "inf.wav", "nan.wav"]
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// The training split of a `--report` file.
fn training_report(cmd: &TestCommand, o: &Output, path: &Path) -> serde_json::Value {
    let body = std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("{}", cmd.explain(o, &format!("a report: {e}"))));
    let r: serde_json::Value = serde_json::from_str(&body).unwrap();
    r["splits"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|s| s["split"] == "training")
        .cloned()
        .unwrap_or_else(|| panic!("{}", cmd.explain(o, "a training split in the report")))
}

/// Every stored value (widened to f64), the paths, and the statistics of an HDF5 output.
struct Stored {
    values: Vec<f64>,
    paths: Vec<String>,
    mean: Vec<f64>,
    std: Vec<f64>,
}

fn stored(path: &Path) -> Stored {
    let f = hdf5::File::open(path).unwrap();
    let mel = f.dataset("mel").unwrap();
    let values: Vec<f64> = match mel.dtype().unwrap().size() {
        2 => mel
            .read_raw::<half::f16>()
            .unwrap()
            .iter()
            .map(|v| v.to_f64())
            .collect(),
        _ => mel
            .read_raw::<f32>()
            .unwrap()
            .iter()
            .map(|&v| v as f64)
            .collect(),
    };
    let paths: Vec<hdf5::types::VarLenUnicode> = f.dataset("path").unwrap().read_raw().unwrap();
    Stored {
        values,
        paths: paths.iter().map(|p| p.to_string()).collect(),
        mean: f.dataset("mel_mean").unwrap().read_raw().unwrap(),
        std: f.dataset("mel_std").unwrap().read_raw().unwrap(),
    }
}

/// Backends to check: the CPU, and wgpu where an adapter exists (lavapipe in CI).
fn backends(dir: &Dir) -> Vec<&'static str> {
    let o = dir.melctl().args(["devices", "--json"]).output();
    let listed: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap_or_default();
    let wgpu = listed["wgpu"]["adapters"]
        .as_array()
        .is_some_and(|a| !a.is_empty());
    if wgpu {
        vec!["cpu", "wgpu"]
    } else {
        let required = std::env::var("MEL_REQUIRE_WGPU").is_ok_and(|v| v == "1");
        assert!(!required, "MEL_REQUIRE_WGPU=1 but no wgpu adapter");
        println!("wgpu not checked: no adapter (no Vulkan, Metal or DX12 driver)");
        vec!["cpu"]
    }
}

#[test]
fn samples_beyond_full_scale_or_not_finite_are_named_and_everything_stored_is_finite() {
    let dir = Dir::new();
    let bad = hostile_dataset(&dir);
    for backend in backends(&dir) {
        for dtype in ["f16", "f32"] {
            let (out, report) = (
                format!("out-{backend}-{dtype}"),
                format!("{backend}-{dtype}.json"),
            );
            let mut build = dir.melctl();
            build
                .args([
                    "build",
                    "--split",
                    "training",
                    "--backend",
                    backend,
                    "--dtype",
                    dtype,
                ])
                .args(["--input", "data", "--output", &out, "--report", &report]);
            let o = build.expect_code(0);
            let stdout = text(&o.stdout);
            let t = training_report(&build, &o, &dir.join(&report));
            let skipped: Vec<(String, String, String)> = t["skipped"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|s| {
                    let name = s["path"]
                        .as_str()
                        .unwrap_or("")
                        .rsplit('/')
                        .next()
                        .unwrap_or("");
                    let field = |k: &str| s[k].as_str().unwrap_or("").to_string();
                    (name.to_string(), field("kind"), field("reason"))
                })
                .collect();
            let mut names: Vec<&str> = skipped.iter().map(|s| s.0.as_str()).collect();
            names.sort();
            build.check(
                &o,
                names == bad,
                &format!("the four bad files are skipped: {skipped:?}"),
            );
            for (name, kind, reason) in &skipped {
                // Whoever refuses it (the decoder or the pipeline's check), the reason is
                // named; the pipeline's says "non-finite".
                build.check(
                    &o,
                    !reason.is_empty() && (kind != "non-finite" || reason.contains("non-finite")),
                    &format!("{name}: kind {kind}, reason {reason}"),
                );
                build.check(
                    &o,
                    stdout.contains(name.as_str()),
                    &format!("the summary names {name}"),
                );
            }
            build.check(&o, t["clips"] == 4, &format!("4 clips stored: {t}"));
            let s = stored(&dir.join(&out).join("training.h5"));
            build.check(&o, s.paths.len() == 4, &format!("4 rows: {:?}", s.paths));
            build.check(
                &o,
                s.paths.iter().all(|p| p.contains("/ok")),
                &format!("only the good clips are stored: {:?}", s.paths),
            );
            build.check(&o, !s.values.is_empty(), "values");
            let worst = s.values.iter().find(|v| !v.is_finite());
            build.check(
                &o,
                worst.is_none(),
                &format!("every stored value is finite ({worst:?})"),
            );
            build.check(
                &o,
                s.mean.iter().chain(&s.std).all(|v| v.is_finite()) && s.mean.len() == 32,
                &format!("mel_mean {:?} and mel_std {:?} are finite", s.mean, s.std),
            );
        }
        // --on-error fail stops at the first of them and writes nothing.
        let mut build = dir.melctl();
        build
            .args([
                "build",
                "--split",
                "training",
                "--backend",
                backend,
                "--on-error",
                "fail",
            ])
            .args(["--input", "data", "--output", "strict"]);
        let o = build.output();
        let stderr = text(&o.stderr);
        build.check(
            &o,
            !o.status.success() && bad.iter().any(|b| stderr.contains(b)),
            "--on-error fail names a bad file and fails",
        );
        build.check(
            &o,
            !dir.join("strict/training.h5").exists(),
            "nothing written",
        );
    }
}

#[test]
fn a_clip_louder_than_the_dtype_holds_is_named_and_its_split_is_stored_without_it() {
    // Mel energies (no log) with Slaney-normalised filters fit f16 for full-scale input;
    // a float WAV at 1000 times full scale (finite, within what f32 computes) does not.
    let dir = Dir::new();
    dir.create(
        "none.toml",
        "[log]\nkind = \"none\"\n[mel]\nnorm = \"slaney\"\n",
    );
    float_wav(&dir, "data/training/hum/ok.wav", &sine(110.0, 0.9, None));
    float_wav(
        &dir,
        "data/training/hum/ok-full.wav",
        &sine(1000.0, 1.0, None),
    );
    float_wav(
        &dir,
        "data/training/leak/loud.wav",
        &sine(1000.0, 1000.0, None),
    );
    float_wav(&dir, "data/training/leak/ok.wav", &sine(770.0, 0.9, None));
    for backend in backends(&dir) {
        let (out, report) = (format!("out-{backend}"), format!("{backend}.json"));
        let mut build = dir.melctl();
        build
            .args(["build", "--config", "none.toml", "--backend", backend])
            .args(["--input", "data", "--output", &out, "--report", &report]);
        let o = build.expect_code(0);
        let t = training_report(&build, &o, &dir.join(&report));
        let reason = t["skipped"][0]["reason"].as_str().unwrap_or("");
        build.check(
            &o,
            t["skipped"].as_array().map(Vec::len) == Some(1)
                && t["skipped"][0]["path"]
                    .as_str()
                    .is_some_and(|p| p.ends_with("loud.wav"))
                && t["skipped"][0]["kind"] == "non-finite"
                && reason.contains("inf")
                && reason.contains("f16"),
            &format!("loud.wav is named: {t}"),
        );
        let s = stored(&dir.join(&out).join("training.h5"));
        build.check(&o, s.paths.len() == 3, &format!("3 rows: {:?}", s.paths));
        build.check(&o, s.values.iter().all(|v| v.is_finite()), "finite values");
        build.check(
            &o,
            s.mean.iter().chain(&s.std).all(|v| v.is_finite()),
            "finite statistics",
        );
    }
}

#[test]
fn settings_that_vanish_in_f32_or_overflow_the_dtype_are_refused_before_reading_audio() {
    let dir = Dir::new();
    float_wav(&dir, "data/training/hum/ok.wav", &sine(110.0, 0.5, None));
    for (name, toml, words) in [
        (
            "amin.toml",
            "[log]\nkind = \"db\"\namin = 1e-50\n",
            &["log.amin", "is 0 in f32", "1.1754944e-38"][..],
        ),
        (
            "offset.toml",
            "[log]\nkind = \"ln\"\noffset = 1e-50\n",
            &["log.offset", "is 0 in f32"][..],
        ),
        (
            "none.toml",
            "[log]\nkind = \"none\"\n",
            &[
                "output.dtype",
                "= f16",
                "65504",
                "n_fft 512",
                "window sum 256",
            ][..],
        ),
    ] {
        dir.create(name, toml);
        let mut build = dir.melctl();
        build
            .args(["build", "--config", name])
            .args(["--input", "data", "--output", "out"]);
        let o = build.output();
        let stderr = text(&o.stderr);
        build.check(
            &o,
            !o.status.success() && words.iter().all(|w| stderr.contains(w)),
            &format!("{name} is refused naming {words:?}"),
        );
        build.check(&o, !dir.join("out").exists(), "nothing written");
    }
    // The same mel energies in f32 are accepted and finite.
    let mut build = dir.melctl();
    build
        .args(["build", "--config", "none.toml", "--dtype", "f32"])
        .args(["--input", "data", "--output", "f32"]);
    let o = build.expect_code(0);
    let s = stored(&dir.join("f32/training.h5"));
    build.check(&o, s.values.iter().all(|v| v.is_finite()), "finite values");
}

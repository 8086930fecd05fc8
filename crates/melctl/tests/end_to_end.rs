//! melctl as a user runs it: WAV folders in, HDF5 out, read back by Python's h5py
//! and compared with the golden fixtures.

use std::path::{Path, PathBuf};
use std::process::Command;

use hound::{SampleFormat, WavSpec, WavWriter};
use mel_tests::{fixtures_dir, goldens};

fn melctl() -> Command {
    Command::new(env!("CARGO_BIN_EXE_melctl"))
}

fn write_wav(path: &Path, samples: &[i16], rate: u32) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    let spec = WavSpec {
        channels: 1,
        sample_rate: rate,
        bits_per_sample: 16,
        sample_format: SampleFormat::Int,
    };
    let mut w = WavWriter::create(path, spec).unwrap();
    for &s in samples {
        w.write_sample(s).unwrap();
    }
    w.finalize().unwrap();
}

/// A dataset made of the leak-4k golden clips: training/{leak,quiet}, testing/leak, plus one broken file.
fn golden_dataset(root: &Path) {
    let g = goldens().into_iter().find(|g| g.name == "leak-4k").unwrap();
    let n = g.input_i16.len() / g.clips;
    let clip = |i: usize| &g.input_i16[i * n..(i + 1) * n];
    write_wav(&root.join("training/leak/a.wav"), clip(0), 4096);
    write_wav(&root.join("training/quiet/b.wav"), clip(1), 4096);
    write_wav(&root.join("testing/leak/c.wav"), clip(1), 4096);
    std::fs::write(
        root.join("training/leak/broken.wav"),
        b"hello, this is a text file, not audio\n",
    )
    .unwrap();
}

fn python_check(spec: serde_json::Value, dir: &Path, tag: &str) {
    let spec_path = dir.join(format!("spec-{tag}.json"));
    std::fs::write(&spec_path, spec.to_string()).unwrap();
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/h5py_check.py");
    let out = Command::new("python3")
        .arg(&script)
        .arg(&spec_path)
        .output()
        .expect("python3 runs (the h5py check needs python3 with numpy and h5py: pip install numpy h5py)");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    println!("{text}");
    assert!(out.status.success(), "the h5py check failed:\n{text}");
    assert!(text.contains(" passed, 0 failed"), "{text}");
}

#[test]
fn build_is_read_back_by_h5py_identical_to_the_goldens() {
    let t = tempfile::tempdir().unwrap();
    let data = t.path().join("data");
    golden_dataset(&data);
    let expected = fixtures_dir().join("golden/leak-4k.expected.npy");
    for (flag, h5dtype) in [("f32", "float32"), ("f16", "float16")] {
        let out = t.path().join(format!("out-{flag}"));
        let report = t.path().join(format!("report-{flag}.json"));
        let run = melctl()
            .args(["build", "--preset", "leak-4k", "--dtype", flag, "--input"])
            .arg(&data)
            .arg("--output")
            .arg(&out)
            .arg("--report")
            .arg(&report)
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&run.stdout);
        assert!(
            run.status.success(),
            "{stdout}{}",
            String::from_utf8_lossy(&run.stderr)
        );
        // the broken file is skipped and named, with its reason
        assert!(
            stdout.contains("skipped") && stdout.contains("broken.wav"),
            "{stdout}"
        );
        let r: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&report).unwrap()).unwrap();
        let training = r["splits"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["split"] == "training")
            .unwrap();
        assert_eq!(training["clips"], 2);
        assert_eq!(training["files"], 3);
        assert!(
            training["skipped"][0]["reason"]
                .as_str()
                .unwrap()
                .contains("WAV"),
            "{training}"
        );
        // nothing partial is left beside the outputs
        let mut names: Vec<String> = std::fs::read_dir(&out)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        assert_eq!(names, vec!["testing.h5", "training.h5"]);

        python_check(
            serde_json::json!({
                "file": out.join("training.h5"), "dtype": h5dtype, "shape": [2, 79, 3, 32, 5],
                "labels": [0, 1], "paths": ["training/leak/a.wav", "training/quiet/b.wav"],
                "label_names": ["leak", "quiet"], "expected": expected, "expected_rows": [0, 1],
            }),
            t.path(),
            &format!("training-{flag}"),
        );
        python_check(
            serde_json::json!({
                "file": out.join("testing.h5"), "dtype": h5dtype, "shape": [1, 79, 3, 32, 5],
                "labels": [0], "paths": ["testing/leak/c.wav"],
                "label_names": ["leak", "quiet"], "expected": expected, "expected_rows": [1],
            }),
            t.path(),
            &format!("testing-{flag}"),
        );
    }
}

#[test]
fn on_error_fail_stops_with_the_path_and_writes_nothing() {
    let t = tempfile::tempdir().unwrap();
    let data = t.path().join("data");
    golden_dataset(&data);
    let out = t.path().join("out");
    let run = melctl()
        .args([
            "build",
            "--on-error",
            "fail",
            "--split",
            "training",
            "--input",
        ])
        .arg(&data)
        .arg("--output")
        .arg(&out)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert!(!run.status.success());
    assert!(
        stderr.contains("broken.wav") && stderr.contains("--on-error fail"),
        "{stderr}"
    );
    let entries = std::fs::read_dir(&out).map(|d| d.count()).unwrap_or(0);
    assert_eq!(entries, 0, "the output folder must stay empty");
}

#[test]
fn invalid_configuration_is_a_clear_error_naming_the_field() {
    let t = tempfile::tempdir().unwrap();
    let cfg = t.path().join("bad.toml");
    std::fs::write(&cfg, "[mel]\nf_max = 3000.0\n").unwrap();
    let run = melctl()
        .arg("config")
        .arg("--config")
        .arg(&cfg)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert!(!run.status.success());
    assert!(
        stderr.contains("mel.f_max") && stderr.contains("Nyquist"),
        "{stderr}"
    );
    let run = melctl()
        .args(["build", "--input", "/nonexistent/x", "--output"])
        .arg(t.path())
        .output()
        .unwrap();
    assert!(!run.status.success());
    assert!(String::from_utf8_lossy(&run.stderr).contains("/nonexistent/x"));
}

#[test]
fn demo_builds_and_inspect_describes_the_result() {
    let t = tempfile::tempdir().unwrap();
    let run = melctl()
        .arg("demo")
        .arg(t.path())
        .args(["--clips", "25"])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&run.stdout);
    assert!(
        run.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&run.stderr)
    );
    assert!(
        stdout.contains("total") && stdout.contains("clips/s"),
        "{stdout}"
    );
    let run = melctl()
        .arg("inspect")
        .arg(t.path().join("out/training.h5"))
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&run.stdout);
    assert!(run.status.success(), "{text}");
    assert!(
        text.contains("[18, 79, 3, 32, 5]") && text.contains("no_leak"),
        "{text}"
    );
    assert!(text.contains("non-finite 0"), "{text}");
}

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

/// Reads `mel`, `label` and `path` of an output file as raw bits.
fn read_back(path: &Path) -> (Vec<u16>, Vec<i64>, Vec<String>) {
    let f = hdf5::File::open(path).unwrap();
    let mel: Vec<half::f16> = f.dataset("mel").unwrap().read_raw().unwrap();
    let label: Vec<i64> = f.dataset("label").unwrap().read_raw().unwrap();
    let paths: Vec<hdf5::types::VarLenUnicode> = f.dataset("path").unwrap().read_raw().unwrap();
    (
        mel.iter().map(|x| x.to_bits()).collect(),
        label,
        paths.iter().map(|p| p.to_string()).collect(),
    )
}

#[test]
fn every_loader_writes_the_same_bytes_and_the_report_names_the_bottleneck() {
    let t = tempfile::tempdir().unwrap();
    let data = t.path().join("data");
    let out = t.path().join("demo");
    let made = melctl()
        .args(["demo", "--clips", "40", "--no-build"])
        .arg(&out)
        .output()
        .unwrap();
    assert!(made.status.success());
    std::fs::rename(out.join("data"), &data).unwrap();
    std::fs::write(
        data.join("training/leak/zz-broken.wav"),
        b"RIFF....WAVEjunk",
    )
    .unwrap();
    let cache = t.path().join("cache");
    let mut results = Vec::new();
    for (tag, loader) in [
        ("preload", "preload"),
        ("stream", "stream"),
        ("memmap-miss", "memmap"),
        ("memmap-hit", "memmap"),
        ("auto", "auto"),
    ] {
        let o = t.path().join(tag);
        let report = t.path().join(format!("{tag}.json"));
        let run = melctl()
            .args([
                "build", "--split", "training", "--batch", "7", "--loader", loader,
            ])
            .arg("--input")
            .arg(&data)
            .arg("--output")
            .arg(&o)
            .arg("--cache-dir")
            .arg(&cache)
            .arg("--report")
            .arg(&report)
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&run.stdout);
        assert!(
            run.status.success(),
            "{tag}: {}",
            String::from_utf8_lossy(&run.stderr)
        );
        assert!(stdout.contains("bottleneck:"), "{stdout}");
        assert!(stdout.contains("zz-broken.wav"), "{stdout}");
        let r: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&report).unwrap()).unwrap();
        let split = &r["splits"][0];
        assert_eq!(split["skipped"].as_array().unwrap().len(), 1);
        let stages: Vec<&str> = split["stages"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s["name"].as_str().unwrap())
            .collect();
        assert_eq!(stages, ["load", "mel", "write"]);
        assert_eq!(split["stages"][1]["items"], split["clips"]);
        assert!(split["bottleneck"]["advice"].as_str().unwrap().len() > 10);
        let note = split["loader"]["note"].as_str().unwrap().to_string();
        match tag {
            "memmap-miss" => assert!(note.contains("cache miss"), "{note}"),
            "memmap-hit" => assert!(note.contains("cache hit"), "{note}"),
            "auto" => assert!(
                split["loader_choice"]
                    .as_str()
                    .unwrap()
                    .starts_with("memmap"),
                "auto picks the existing cache: {split}"
            ),
            _ => {}
        }
        results.push(read_back(&o.join("training.h5")));
    }
    let (mel, label, paths) = &results[0];
    assert_eq!(paths.len(), label.len());
    assert!(!paths.iter().any(|p| p.contains("broken")));
    assert_eq!(mel.len(), paths.len() * 79 * 3 * 32 * 5);
    for r in &results[1..] {
        assert!(r == &results[0], "identical output for every loader");
    }
}

#[test]
fn compressed_chunks_hold_the_contiguous_values_and_h5py_reads_them() {
    let t = tempfile::tempdir().unwrap();
    let data = t.path().join("data");
    let out = t.path().join("demo");
    let made = melctl()
        .args(["demo", "--clips", "40", "--no-build"])
        .arg(&out)
        .output()
        .unwrap();
    assert!(made.status.success());
    std::fs::rename(out.join("data"), &data).unwrap();
    // A skipped file: fewer rows than planned, so the last chunk is written partial
    // and the dataset shrunk.
    std::fs::write(
        data.join("training/leak/zz-broken.wav"),
        b"RIFF....WAVEjunk",
    )
    .unwrap();
    let mut results = Vec::new();
    // Contiguous; chunks of 3 clips straddling batches of 7, stored and deflated; one
    // chunk larger than the whole split.
    for (tag, toml) in [
        ("contiguous", ""),
        ("chunk3", "[hdf5]\nchunk_clips = 3\n"),
        ("chunk3-gzip", "[hdf5]\nchunk_clips = 3\ngzip = 1\n"),
        ("chunk64-gzip6", "[hdf5]\nchunk_clips = 64\ngzip = 6\n"),
    ] {
        let o = t.path().join(tag);
        let config = t.path().join(format!("{tag}.toml"));
        std::fs::write(&config, toml).unwrap();
        let run = melctl()
            .args(["build", "--split", "training", "--batch", "7", "--config"])
            .arg(&config)
            .arg("--input")
            .arg(&data)
            .arg("--output")
            .arg(&o)
            .output()
            .unwrap();
        assert!(
            run.status.success(),
            "{tag}: {}",
            String::from_utf8_lossy(&run.stderr)
        );
        let file = o.join("training.h5");
        let f = hdf5::File::open(&file).unwrap();
        let mel = f.dataset("mel").unwrap();
        let filters = mel.filters();
        match tag {
            "contiguous" => assert!(!mel.is_chunked()),
            "chunk3" => assert!(mel.is_chunked() && filters.is_empty(), "{filters:?}"),
            _ => assert_eq!(
                filters.len(),
                2,
                "{tag}: shuffle then deflate, got {filters:?}"
            ),
        }
        results.push((
            tag,
            read_back(&file),
            std::fs::metadata(&file).unwrap().len(),
        ));
    }
    let (_, first, contiguous_size) = &results[0];
    assert!(!first.2.iter().any(|p| p.contains("broken")));
    assert_eq!(first.0.len(), first.2.len() * 79 * 3 * 32 * 5);
    for (tag, r, size) in &results[1..] {
        assert!(
            r == first,
            "{tag}: the same values, labels and paths as contiguous"
        );
        if tag.contains("gzip") {
            assert!(
                *size * 3 < *contiguous_size * 2,
                "{tag}: {size} bytes against {contiguous_size} uncompressed"
            );
        }
    }
    // h5py without plugins decodes the shuffled, deflated chunks to the same values.
    let script = "import h5py, numpy as np, sys\n\
        a = h5py.File(sys.argv[1])['mel']; b = h5py.File(sys.argv[2])['mel']\n\
        assert a.compression == 'gzip' and a.shuffle, (a.compression, a.shuffle)\n\
        assert a.chunks[0] == 3, a.chunks\n\
        assert np.array_equal(a[:].view(np.uint16), b[:].view(np.uint16))\n\
        print('h5py ok', a.shape)\n";
    let py = Command::new("python3")
        .arg("-c")
        .arg(script)
        .arg(t.path().join("chunk3-gzip/training.h5"))
        .arg(t.path().join("contiguous/training.h5"))
        .output()
        .expect("python3 runs (pip install numpy h5py)");
    let text =
        String::from_utf8_lossy(&py.stdout).to_string() + &String::from_utf8_lossy(&py.stderr);
    assert!(py.status.success() && text.contains("h5py ok"), "{text}");
}

#[test]
fn a_wgpu_build_matches_the_cpu_build() {
    let devices = melctl().arg("devices").output().unwrap();
    let listing = String::from_utf8_lossy(&devices.stdout).to_string();
    if !listing
        .lines()
        .any(|l| l.starts_with("wgpu") && l.contains("f64 yes"))
    {
        let required = std::env::var("MEL_REQUIRE_WGPU").is_ok_and(|v| v == "1");
        assert!(
            !required,
            "MEL_REQUIRE_WGPU=1 but no wgpu adapter with f64:\n{listing}"
        );
        println!("skipped: no wgpu adapter with 64-bit floats");
        return;
    }
    let t = tempfile::tempdir().unwrap();
    let made = melctl()
        .args(["demo", "--clips", "12", "--no-build"])
        .arg(t.path())
        .output()
        .unwrap();
    assert!(made.status.success());
    let mut results = Vec::new();
    for backend in ["cpu", "wgpu"] {
        let o = t.path().join(backend);
        // Batches of 5: both upload buffers alternate, and the last batch is short.
        let run = melctl()
            .args([
                "build",
                "--split",
                "training",
                "--batch",
                "5",
                "--backend",
                backend,
            ])
            .arg("--input")
            .arg(t.path().join("data"))
            .arg("--output")
            .arg(&o)
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&run.stdout);
        assert!(
            run.status.success(),
            "{backend}: {stdout}{}",
            String::from_utf8_lossy(&run.stderr)
        );
        assert!(stdout.contains(&format!("backend  {backend}")), "{stdout}");
        results.push(read_back(&o.join("training.h5")));
    }
    let (cpu, gpu) = (&results[0], &results[1]);
    assert_eq!((&cpu.1, &cpu.2), (&gpu.1, &gpu.2), "labels and paths");
    assert_eq!(cpu.0.len(), gpu.0.len());
    assert!(!cpu.0.is_empty());
    // The suite's rule: within 0.01 dB plus one f16 ulp of the value (near 0 dB an f16
    // ulp is ~1e-7 dB, so counting ulps alone would flag meaningless differences).
    let mut differ = 0;
    for (i, (a, b)) in cpu.0.iter().zip(&gpu.0).enumerate() {
        let (x, y) = (
            half::f16::from_bits(*a).to_f64(),
            half::f16::from_bits(*b).to_f64(),
        );
        let ulp = x.abs().max(6.1e-5) * 2f64.powi(-10);
        assert!(
            (x - y).abs() <= 0.01 + ulp,
            "value {i}: cpu {x} dB, wgpu {y} dB"
        );
        differ += usize::from(a != b);
    }
    assert!(
        differ * 100 < cpu.0.len(),
        "{differ} of {} values differ",
        cpu.0.len()
    );
}

#[test]
fn the_npy_sink_holds_the_same_spectrograms_and_numpy_maps_them() {
    let t = tempfile::tempdir().unwrap();
    let data = t.path().join("data");
    golden_dataset(&data);
    let build = |sink: &str, out: &Path| {
        let run = melctl()
            .args(["build", "--split", "training", "--sink", sink, "--input"])
            .arg(&data)
            .arg("--output")
            .arg(out)
            .output()
            .unwrap();
        assert!(
            run.status.success(),
            "{}",
            String::from_utf8_lossy(&run.stderr)
        );
    };
    let (h5_out, npy_out) = (t.path().join("h5"), t.path().join("npy"));
    build("hdf5", &h5_out);
    build("npy", &npy_out);
    let (mel, labels, paths) = read_back(&h5_out.join("training.h5"));
    let dir = npy_out.join("training.npy.d");
    let bytes = std::fs::read(dir.join("mel.npy")).unwrap();
    let body: Vec<u16> = bytes[256..]
        .chunks_exact(2)
        .map(|b| u16::from_le_bytes([b[0], b[1]]))
        .collect();
    assert_eq!(
        body, mel,
        "mel.npy holds exactly the HDF5 file's spectrograms"
    );
    let meta: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("meta.json")).unwrap()).unwrap();
    let meta_paths: Vec<String> = meta["paths"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p.as_str().unwrap().to_string())
        .collect();
    assert_eq!(meta_paths, paths);
    let script = format!(
        "import numpy as np\nm = np.load({:?}, mmap_mode='r')\nl = np.load({:?})\nprint(m.shape, m.dtype, l.tolist())",
        dir.join("mel.npy"),
        dir.join("label.npy")
    );
    let py = Command::new("python3")
        .args(["-c", &script])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&py.stdout);
    assert!(
        py.status.success(),
        "{}",
        String::from_utf8_lossy(&py.stderr)
    );
    assert_eq!(
        text.trim(),
        format!("(2, 79, 3, 32, 5) float16 {labels:?}").as_str(),
        "numpy reads the arrays"
    );
}

#[test]
fn ctrl_c_stops_the_build_cleanly_and_leaves_no_partial_output() {
    let t = tempfile::tempdir().unwrap();
    let demo = t.path().join("demo");
    let made = melctl()
        .args(["demo", "--clips", "3000", "--no-build"])
        .arg(&demo)
        .output()
        .unwrap();
    assert!(made.status.success());
    let out = t.path().join("out");
    let child = melctl()
        .args([
            "build",
            "--split",
            "training",
            "--threads",
            "1",
            "--loader",
            "stream",
            "--input",
        ])
        .arg(demo.join("data"))
        .arg("--output")
        .arg(&out)
        .stderr(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(std::time::Duration::from_millis(700));
    // SAFETY: sending SIGINT to our own child process.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let result = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&result.stderr);
    assert!(
        !result.status.success(),
        "the build must not report success: {stderr}"
    );
    assert!(stderr.contains("interrupted"), "{stderr}");
    let left: Vec<_> = std::fs::read_dir(&out)
        .map(|d| d.map(|e| e.unwrap().file_name()).collect())
        .unwrap_or_default();
    assert!(left.is_empty(), "nothing may be left behind: {left:?}");
}

#[test]
fn a_manifest_with_a_label_map_builds_the_same_clips() {
    let t = tempfile::tempdir().unwrap();
    let data = t.path().join("data");
    golden_dataset(&data);
    std::fs::write(
        data.join("clips.csv"),
        "path,label,split\ntraining/leak/a.wav,leak,train\ntraining/quiet/b.wav,quiet,train\ntraining/leak/broken.wav,leak,train\n",
    )
    .unwrap();
    std::fs::write(data.join("labels.txt"), "quiet\nnormal\nleak\n").unwrap();
    let out = t.path().join("out");
    let run = melctl()
        .args(["build", "--manifest"])
        .arg(data.join("clips.csv"))
        .arg("--labels")
        .arg(data.join("labels.txt"))
        .arg("--output")
        .arg(&out)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&run.stdout);
    assert!(
        run.status.success(),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    assert!(
        stdout.contains("broken.wav"),
        "the broken file is listed: {stdout}"
    );
    let (_, labels, paths) = read_back(&out.join("train.h5"));
    assert_eq!(paths, ["training/leak/a.wav", "training/quiet/b.wav"]);
    assert_eq!(labels, [2, 0], "ids from the label map");
    let f = hdf5::File::open(out.join("train.h5")).unwrap();
    let names: Vec<hdf5::types::VarLenUnicode> = f.attr("label_names").unwrap().read_raw().unwrap();
    let names: Vec<String> = names.iter().map(|n| n.to_string()).collect();
    assert_eq!(names, ["quiet", "normal", "leak"]);
    // A class missing from the map is refused by name.
    std::fs::write(data.join("short.txt"), "quiet\n").unwrap();
    let run = melctl()
        .args(["build", "--manifest"])
        .arg(data.join("clips.csv"))
        .arg("--labels")
        .arg(data.join("short.txt"))
        .arg("--output")
        .arg(t.path().join("out2"))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert!(!run.status.success() && stderr.contains("leak"), "{stderr}");
}

#[test]
fn sigkill_at_any_moment_leaves_the_previous_output_or_none() {
    let t = tempfile::tempdir().unwrap();
    let demo = t.path().join("demo");
    let made = melctl()
        .args(["demo", "--clips", "3000", "--no-build"])
        .arg(&demo)
        .output()
        .unwrap();
    assert!(made.status.success());
    let out = t.path().join("out");
    let build = || {
        let mut c = melctl();
        c.args([
            "build",
            "--split",
            "training",
            "--threads",
            "1",
            "--loader",
            "stream",
            "--input",
        ])
        .arg(demo.join("data"))
        .arg("--output")
        .arg(&out)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null());
        c
    };
    let kill_after = |ms: u64| {
        let mut child = build().spawn().unwrap();
        std::thread::sleep(std::time::Duration::from_millis(ms));
        child.kill().unwrap(); // SIGKILL
        child.wait().unwrap();
    };
    // No previous output: a kill leaves nothing at the final path.
    for ms in [150, 600, 1200] {
        kill_after(ms);
        assert!(!out.join("training.h5").exists(), "killed after {ms} ms");
    }
    // A complete build (which also clears what the killed runs left behind).
    assert!(build().status().unwrap().success());
    let names: Vec<String> = std::fs::read_dir(&out)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(names, ["training.h5"], "no partial files left: {names:?}");
    let complete = read_back(&out.join("training.h5"));
    assert_eq!(complete.2.len(), 2100);
    // With a previous output: a kill during the rebuild leaves it whole and unchanged.
    for ms in [150, 900] {
        kill_after(ms);
        assert!(
            read_back(&out.join("training.h5")) == complete,
            "killed after {ms} ms"
        );
    }
}

#[test]
fn unreadable_entries_and_non_utf8_names_are_skipped_and_listed() {
    use std::os::unix::ffi::OsStrExt;
    let t = tempfile::tempdir().unwrap();
    let data = t.path().join("data");
    golden_dataset(&data);
    let leak = data.join("training/leak");
    let good = std::fs::read(leak.join("a.wav")).unwrap();
    std::fs::write(
        leak.join(std::ffi::OsStr::from_bytes(b"caf\xe9.wav")),
        &good,
    )
    .unwrap();
    std::os::unix::fs::symlink(leak.join("gone.wav"), leak.join("dangling.wav")).unwrap();
    std::fs::create_dir(leak.join("folder.wav")).unwrap();
    let out = t.path().join("out");
    let report = t.path().join("report.json");
    let run = melctl()
        .args(["build", "--split", "training", "--input"])
        .arg(&data)
        .arg("--output")
        .arg(&out)
        .arg("--report")
        .arg(&report)
        .output()
        .unwrap();
    assert!(
        run.status.success(),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    let r: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&report).unwrap()).unwrap();
    let skipped: Vec<(String, String)> = r["splits"][0]["skipped"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            (
                s["path"].as_str().unwrap_or("").to_string(),
                s["reason"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    let find = |needle: &str| {
        skipped
            .iter()
            .find(|(p, _)| p.contains(needle))
            .unwrap_or_else(|| panic!("{needle} not in {skipped:?}"))
            .1
            .clone()
    };
    assert!(find("caf").contains("not valid UTF-8"));
    assert!(find("dangling.wav").contains("cannot read"));
    assert!(find("broken.wav").contains("not a valid WAV"));
    let (_, _, paths) = read_back(&out.join("training.h5"));
    assert_eq!(paths, ["training/leak/a.wav", "training/quiet/b.wav"]);
}

#[test]
fn resume_after_sigkill_continues_and_equals_an_uninterrupted_build() {
    let t = tempfile::tempdir().unwrap();
    let demo = t.path().join("demo");
    let made = melctl()
        .args(["demo", "--clips", "3000", "--no-build"])
        .arg(&demo)
        .output()
        .unwrap();
    assert!(made.status.success());
    let build = |out: &Path, extra: &[&str]| {
        let mut c = melctl();
        c.args([
            "build",
            "--split",
            "training",
            "--threads",
            "1",
            "--batch",
            "32",
        ])
        .args(extra)
        .arg("--input")
        .arg(demo.join("data"))
        .arg("--output")
        .arg(out);
        c
    };
    let out = t.path().join("out");
    let journal = out.join(".training.resume");
    let batches = || -> Vec<std::path::PathBuf> {
        let mut v: Vec<_> = std::fs::read_dir(&journal)
            .map(|d| d.flatten().map(|e| e.path()).collect())
            .unwrap_or_default();
        v.retain(|p| p.file_name().unwrap().to_string_lossy().starts_with("b-"));
        v.sort();
        v
    };
    // Kill the first run once a few batches are journaled.
    let mut child = build(&out, &["--resume"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let start = std::time::Instant::now();
    while batches().len() < 4 && start.elapsed().as_secs() < 60 {
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
    let kept = batches();
    assert!(kept.len() >= 4, "journal batches: {kept:?}");
    assert!(!out.join("training.h5").exists(), "no output after a kill");
    // Damage one batch: it must be detected, dropped and redone.
    let damaged = kept.last().unwrap();
    let len = std::fs::metadata(damaged).unwrap().len();
    std::fs::OpenOptions::new()
        .write(true)
        .open(damaged)
        .unwrap()
        .set_len(len - 100)
        .unwrap();

    let resumed = build(&out, &["--resume"]).output().unwrap();
    let err = String::from_utf8_lossy(&resumed.stderr);
    assert!(resumed.status.success(), "{err}");
    assert!(
        err.contains("journal batches") && err.contains("dropped and redone"),
        "{err}"
    );
    let n_from_journal: usize = err
        .split("resume: ")
        .nth(1)
        .and_then(|s| s.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .unwrap_or(0);
    assert!(n_from_journal >= 3 * 32, "{err}");
    assert!(
        !journal.exists(),
        "the journal is removed after a successful build"
    );

    let whole = t.path().join("whole");
    let plain = build(&whole, &[]).output().unwrap();
    assert!(plain.status.success());
    let a = read_back(&out.join("training.h5"));
    let b = read_back(&whole.join("training.h5"));
    assert_eq!(a.2.len(), 2100);
    assert!(a == b, "a resumed build equals an uninterrupted one");

    // A journal from another configuration is not used.
    let mut child = build(&out, &["--resume"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let start = std::time::Instant::now();
    while batches().is_empty() && start.elapsed().as_secs() < 60 {
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    child.kill().unwrap();
    child.wait().unwrap();
    let other = build(&out, &["--resume", "--dtype", "f32"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&other.stderr);
    assert!(other.status.success(), "{err}");
    assert!(err.contains("another configuration"), "{err}");
}

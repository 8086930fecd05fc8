//! melctl as a user runs it: WAV folders in, HDF5 out, read back by Python's h5py
//! and compared with the golden fixtures.
//!
//! Every scenario is a [`Dir`] and every run a [`TestCommand`] started in it, so the
//! paths below are the ones a user types. A failed check prints the command, its exit
//! status, stdout, stderr and a listing of the folder.

mod util;

use std::path::{Path, PathBuf};
use std::process::{Child, Output, Stdio};
use std::time::{Duration, Instant};

use mel_tests::{fixtures_dir, goldens};
use util::{Dir, TestCommand};

/// A run's stdout or stderr as text.
fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// Runs `cmd`, which must fail (any unsuccessful status); returns its output.
#[track_caller]
fn failure(cmd: &mut TestCommand) -> Output {
    let o = cmd.output();
    cmd.check(&o, !o.status.success(), "expected failure");
    o
}

/// Runs a python3 command; a missing python3 says what to install.
#[track_caller]
fn python(py: &mut TestCommand) -> Output {
    py.command().output().expect(
        "python3 runs (the checks need python3 with numpy and h5py: pip install numpy h5py)",
    )
}

/// Starts `cmd` with its output discarded: it is going to be killed.
#[track_caller]
fn spawn_quiet(cmd: &mut TestCommand) -> Child {
    cmd.command()
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("melctl starts")
}

/// Kills `child` (SIGKILL) and reaps it; its status, as an output to explain checks with.
#[track_caller]
fn kill(mut child: Child) -> Output {
    child.kill().unwrap(); // SIGKILL
    let status = child.wait().unwrap();
    Output {
        status,
        stdout: Vec::new(),
        stderr: Vec::new(),
    }
}

/// The JSON file (a report, a sink's metadata) a run wrote to `path`.
fn json_of(cmd: &TestCommand, o: &Output, path: &Path) -> serde_json::Value {
    let body = std::fs::read_to_string(path).unwrap_or_else(|e| {
        let what = format!("a JSON file at {}: {e}", path.display());
        panic!("{}", cmd.explain(o, &what))
    });
    serde_json::from_str(&body).unwrap_or_else(|e| {
        let what = format!("{} parses as JSON: {e}", path.display());
        panic!("{}", cmd.explain(o, &what))
    })
}

/// A dataset made of the leak-4k golden clips in `data/`: training/{leak,quiet},
/// testing/leak, plus one broken file.
fn golden_dataset(dir: &Dir) {
    let g = goldens().into_iter().find(|g| g.name == "leak-4k").unwrap();
    let n = g.input_i16.len() / g.clips;
    let clip = |i: usize| &g.input_i16[i * n..(i + 1) * n];
    dir.wav("data/training/leak/a.wav", clip(0), 4096);
    dir.wav("data/training/quiet/b.wav", clip(1), 4096);
    dir.wav("data/testing/leak/c.wav", clip(1), 4096);
    dir.create(
        "data/training/leak/broken.wav",
        "hello, this is a text file, not audio\n",
    );
}

fn python_check(dir: &Dir, spec: serde_json::Value, tag: &str) {
    let spec_path = dir.create(format!("spec-{tag}.json"), spec.to_string());
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/h5py_check.py");
    let mut py = dir.program("python3");
    py.arg(&script).arg(&spec_path);
    let o = python(&mut py);
    let text = text(&o.stdout) + &text(&o.stderr);
    println!("{text}");
    py.check(&o, o.status.success(), "the h5py check passes");
    py.check(
        &o,
        text.contains(" passed, 0 failed"),
        "the h5py check reports ' passed, 0 failed'",
    );
}

#[test]
fn build_is_read_back_by_h5py_identical_to_the_goldens() {
    let dir = Dir::new();
    golden_dataset(&dir);
    let expected = fixtures_dir().join("golden/leak-4k.expected.npy");
    for (flag, h5dtype) in [("f32", "float32"), ("f16", "float16")] {
        let (out, report) = (format!("out-{flag}"), format!("report-{flag}.json"));
        let mut build = dir.melctl();
        build
            .args(["build", "--preset", "leak-4k", "--dtype", flag])
            .args(["--input", "data", "--output", &out, "--report", &report]);
        let o = build.expect_code(0);
        let stdout = text(&o.stdout);
        // the broken file is skipped and named, with its reason
        build.check(
            &o,
            stdout.contains("skipped") && stdout.contains("broken.wav"),
            "the broken file is named as skipped",
        );
        let r = json_of(&build, &o, &dir.join(&report));
        let training = r["splits"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|s| s["split"] == "training")
            .unwrap_or(&serde_json::Value::Null);
        build.check(
            &o,
            training["clips"] == 2,
            &format!("2 training clips: {training}"),
        );
        build.check(
            &o,
            training["files"] == 3,
            &format!("3 training files: {training}"),
        );
        build.check(
            &o,
            training["skipped"][0]["reason"]
                .as_str()
                .is_some_and(|reason| reason.contains("WAV")),
            &format!("the skipped file's reason names WAV: {training}"),
        );
        build.check(
            &o,
            dir.names(&out) == ["melctl-build.json", "testing.h5", "training.h5"],
            "nothing partial is left beside the outputs",
        );

        python_check(
            &dir,
            serde_json::json!({
                "file": dir.join(&out).join("training.h5"), "dtype": h5dtype,
                "shape": [2, 79, 3, 32, 5], "labels": [0, 1],
                "paths": ["training/leak/a.wav", "training/quiet/b.wav"],
                "label_names": ["leak", "quiet"], "expected": expected, "expected_rows": [0, 1],
            }),
            &format!("training-{flag}"),
        );
        python_check(
            &dir,
            serde_json::json!({
                "file": dir.join(&out).join("testing.h5"), "dtype": h5dtype,
                "shape": [1, 79, 3, 32, 5], "labels": [0], "paths": ["testing/leak/c.wav"],
                "label_names": ["leak", "quiet"], "expected": expected, "expected_rows": [1],
            }),
            &format!("testing-{flag}"),
        );
    }
}

#[test]
fn on_error_fail_stops_with_the_path_and_writes_nothing() {
    let dir = Dir::new();
    golden_dataset(&dir);
    let mut build = dir.melctl();
    build.args(["build", "--on-error", "fail", "--split", "training"]);
    build.args(["--input", "data", "--output", "out"]);
    let o = failure(&mut build);
    let stderr = text(&o.stderr);
    build.check(
        &o,
        stderr.contains("broken.wav") && stderr.contains("--on-error fail"),
        "the error names the file and the flag",
    );
    build.check(
        &o,
        dir.names("out").is_empty(),
        "the output folder must stay empty",
    );
}

#[test]
fn invalid_configuration_is_a_clear_error_naming_the_field() {
    let dir = Dir::new();
    dir.create("bad.toml", "[mel]\nf_max = 3000.0\n");
    let mut config = dir.melctl();
    config.args(["config", "--config", "bad.toml"]);
    let o = failure(&mut config);
    let stderr = text(&o.stderr);
    config.check(
        &o,
        stderr.contains("mel.f_max") && stderr.contains("Nyquist"),
        "the error names the field and the Nyquist limit",
    );

    let mut build = dir.melctl();
    build.args(["build", "--input", "/nonexistent/x", "--output", "."]);
    let o = failure(&mut build);
    build.check(
        &o,
        text(&o.stderr).contains("/nonexistent/x"),
        "the error names the missing input",
    );
}

#[test]
fn demo_builds_and_inspect_describes_the_result() {
    let dir = Dir::new();
    let mut demo = dir.melctl();
    demo.args(["demo", ".", "--clips", "25"]);
    let o = demo.expect_code(0);
    let stdout = text(&o.stdout);
    demo.check(
        &o,
        stdout.contains("total") && stdout.contains("clips/s"),
        "the summary has a total and a rate",
    );

    let mut inspect = dir.melctl();
    inspect.args(["inspect", "out/training.h5"]);
    let o = inspect.expect_code(0);
    let stdout = text(&o.stdout);
    inspect.check(
        &o,
        stdout.contains("[18, 79, 3, 32, 5]") && stdout.contains("no_leak"),
        "inspect shows the shape and the classes",
    );
    inspect.check(
        &o,
        stdout.contains("non-finite 0"),
        "inspect counts no non-finite values",
    );
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

/// `melctl demo --clips N --no-build demo` and its audio moved to `data/`, plus a broken
/// file among the training clips.
fn demo_data_with_a_broken_file(dir: &Dir, clips: &str) {
    dir.melctl()
        .args(["demo", "--clips", clips, "--no-build", "demo"])
        .stdout();
    std::fs::rename(dir.join("demo/data"), dir.join("data")).unwrap();
    dir.create("data/training/leak/zz-broken.wav", "RIFF....WAVEjunk");
}

#[test]
fn every_loader_writes_the_same_bytes_and_the_report_names_the_bottleneck() {
    let dir = Dir::new();
    demo_data_with_a_broken_file(&dir, "40");
    let mut runs = Vec::new();
    for (tag, loader) in [
        ("preload", "preload"),
        ("stream", "stream"),
        ("memmap-miss", "memmap"),
        ("memmap-hit", "memmap"),
        ("auto", "auto"),
    ] {
        let report = format!("{tag}.json");
        let mut build = dir.melctl();
        build
            .args([
                "build", "--split", "training", "--batch", "7", "--loader", loader,
            ])
            .args(["--input", "data", "--output", tag, "--cache-dir", "cache"])
            .args(["--report", &report]);
        let o = build.expect_code(0);
        let stdout = text(&o.stdout);
        build.check(
            &o,
            stdout.contains("bottleneck:"),
            "the summary names the bottleneck",
        );
        build.check(
            &o,
            stdout.contains("zz-broken.wav"),
            "the summary lists the broken file",
        );
        let r = json_of(&build, &o, &dir.join(&report));
        let split = &r["splits"][0];
        build.check(
            &o,
            split["skipped"].as_array().map(Vec::len) == Some(1),
            &format!("one skipped file: {split}"),
        );
        let stages: Option<Vec<&str>> = split["stages"]
            .as_array()
            .and_then(|a| a.iter().map(|s| s["name"].as_str()).collect());
        build.check(
            &o,
            stages == Some(vec!["load", "mel", "write"]),
            &format!("stages load, mel, write: {stages:?}"),
        );
        build.check(
            &o,
            split["stages"][1]["items"] == split["clips"],
            &format!("the mel stage counts every clip: {split}"),
        );
        build.check(
            &o,
            split["bottleneck"]["advice"]
                .as_str()
                .is_some_and(|a| a.len() > 10),
            &format!("advice on the bottleneck: {split}"),
        );
        let note = split["loader"]["note"].as_str();
        build.check(&o, note.is_some(), &format!("a loader note: {split}"));
        let note = note.unwrap_or_default();
        match tag {
            "memmap-miss" => build.check(&o, note.contains("cache miss"), note),
            "memmap-hit" => build.check(&o, note.contains("cache hit"), note),
            "auto" => build.check(
                &o,
                split["loader_choice"]
                    .as_str()
                    .is_some_and(|c| c.starts_with("memmap")),
                &format!("auto picks the existing cache: {split}"),
            ),
            _ => {}
        }
        let result = read_back(&dir.join(tag).join("training.h5"));
        runs.push((build, o, result));
    }
    let (first, o, (mel, label, paths)) = &runs[0];
    first.check(
        o,
        paths.len() == label.len(),
        &format!("{} paths, {} labels", paths.len(), label.len()),
    );
    first.check(
        o,
        !paths.iter().any(|p| p.contains("broken")),
        "the broken file is not in the output",
    );
    first.check(
        o,
        mel.len() == paths.len() * 79 * 3 * 32 * 5,
        &format!("{} values for {} clips", mel.len(), paths.len()),
    );
    for (build, o, result) in &runs[1..] {
        build.check(o, result == &runs[0].2, "identical output for every loader");
    }
}

#[test]
fn compressed_chunks_hold_the_contiguous_values_and_h5py_reads_them() {
    let dir = Dir::new();
    // A skipped file: fewer rows than planned, so the last chunk is written partial
    // and the dataset shrunk.
    demo_data_with_a_broken_file(&dir, "40");
    let mut runs = Vec::new();
    // Contiguous; chunks of 3 clips straddling batches of 7, stored and deflated; one
    // chunk larger than the whole split.
    for (tag, toml) in [
        ("contiguous", ""),
        ("chunk3", "[hdf5]\nchunk_clips = 3\n"),
        ("chunk3-gzip", "[hdf5]\nchunk_clips = 3\ngzip = 1\n"),
        ("chunk64-gzip6", "[hdf5]\nchunk_clips = 64\ngzip = 6\n"),
    ] {
        let config = format!("{tag}.toml");
        dir.create(&config, toml);
        let mut build = dir.melctl();
        build
            .args([
                "build", "--split", "training", "--batch", "7", "--config", &config,
            ])
            .args(["--input", "data", "--output", tag]);
        let o = build.expect_code(0);
        let file = dir.join(tag).join("training.h5");
        let f = hdf5::File::open(&file).unwrap();
        let mel = f.dataset("mel").unwrap();
        let filters = mel.filters();
        match tag {
            "contiguous" => build.check(&o, !mel.is_chunked(), "a contiguous dataset"),
            "chunk3" => build.check(
                &o,
                mel.is_chunked() && filters.is_empty(),
                &format!("chunked without filters: {filters:?}"),
            ),
            _ => build.check(
                &o,
                filters.len() == 2,
                &format!("{tag}: shuffle then deflate, got {filters:?}"),
            ),
        }
        let size = std::fs::metadata(&file).unwrap().len();
        runs.push((tag, build, o, read_back(&file), size));
    }
    let (_, contiguous, o, first, contiguous_size) = &runs[0];
    contiguous.check(
        o,
        !first.2.iter().any(|p| p.contains("broken")),
        "the broken file is not in the output",
    );
    contiguous.check(
        o,
        first.0.len() == first.2.len() * 79 * 3 * 32 * 5,
        &format!("{} values for {} clips", first.0.len(), first.2.len()),
    );
    for (tag, build, o, result, size) in &runs[1..] {
        build.check(
            o,
            result == first,
            &format!("{tag}: the same values, labels and paths as contiguous"),
        );
        if tag.contains("gzip") {
            build.check(
                o,
                *size * 3 < *contiguous_size * 2,
                &format!("{tag}: {size} bytes against {contiguous_size} uncompressed"),
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
    let mut py = dir.program("python3");
    py.args(["-c", script])
        .args(["chunk3-gzip/training.h5", "contiguous/training.h5"]);
    let o = python(&mut py);
    let text = text(&o.stdout) + &text(&o.stderr);
    py.check(
        &o,
        o.status.success() && text.contains("h5py ok"),
        "h5py decodes the deflated chunks to the contiguous values",
    );
}

#[test]
fn a_wgpu_build_matches_the_cpu_build() {
    let dir = Dir::new();
    let mut devices = dir.melctl();
    devices.args(["devices", "--json"]);
    let o = devices.output();
    let listed: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap_or_default();
    let any_adapter = listed["wgpu"]["adapters"]
        .as_array()
        .is_some_and(|a| !a.is_empty());
    if !any_adapter {
        let required = std::env::var("MEL_REQUIRE_WGPU").is_ok_and(|v| v == "1");
        devices.check(&o, !required, "MEL_REQUIRE_WGPU=1 but no wgpu adapter");
        println!("skipped: no wgpu adapter (no Vulkan, Metal or DX12 driver)");
        return;
    }
    dir.melctl()
        .args(["demo", "--clips", "12", "--no-build", "."])
        .stdout();
    let mut runs = Vec::new();
    for backend in ["cpu", "wgpu"] {
        // Batches of 5: both upload buffers alternate, and the last batch is short.
        let mut build = dir.melctl();
        build
            .args([
                "build",
                "--split",
                "training",
                "--batch",
                "5",
                "--backend",
                backend,
            ])
            .args(["--input", "data", "--output", backend]);
        let o = build.expect_code(0);
        build.check(
            &o,
            text(&o.stdout).contains(&format!("backend  {backend}")),
            &format!("the summary names backend {backend}"),
        );
        let result = read_back(&dir.join(backend).join("training.h5"));
        runs.push((build, o, result));
    }
    let (cpu, (wgpu_build, o, gpu)) = (&runs[0].2, &runs[1]);
    wgpu_build.check(o, (&cpu.1, &cpu.2) == (&gpu.1, &gpu.2), "labels and paths");
    wgpu_build.check(
        o,
        cpu.0.len() == gpu.0.len(),
        &format!("{} cpu values, {} wgpu values", cpu.0.len(), gpu.0.len()),
    );
    wgpu_build.check(o, !cpu.0.is_empty(), "values");
    // The suite's rule: within 0.01 dB plus one f16 ulp of the value (near 0 dB an f16
    // ulp is ~1e-7 dB, so counting ulps alone would flag meaningless differences).
    let within = |x: f64, y: f64| {
        let ulp = x.abs().max(6.1e-5) * 2f64.powi(-10);
        (x - y).abs() <= 0.01 + ulp
    };
    let mut differ = 0;
    for (i, (a, b)) in cpu.0.iter().zip(&gpu.0).enumerate() {
        let (x, y) = (
            half::f16::from_bits(*a).to_f64(),
            half::f16::from_bits(*b).to_f64(),
        );
        if !within(x, y) {
            let what = format!("value {i}: cpu {x} dB, wgpu {y} dB");
            panic!("{}", wgpu_build.explain(o, &what));
        }
        differ += usize::from(a != b);
    }
    wgpu_build.check(
        o,
        differ * 100 < cpu.0.len(),
        &format!("{differ} of {} values differ", cpu.0.len()),
    );
}

#[test]
fn the_npy_sink_holds_the_same_spectrograms_and_numpy_maps_them() {
    let dir = Dir::new();
    golden_dataset(&dir);
    let build = |sink: &str, out: &str| {
        let mut cmd = dir.melctl();
        cmd.args(["build", "--split", "training", "--sink", sink])
            .args(["--input", "data", "--output", out]);
        let o = cmd.expect_code(0);
        (cmd, o)
    };
    build("hdf5", "h5");
    let (npy_build, o) = build("npy", "npy");
    let (mel, labels, paths) = read_back(&dir.join("h5/training.h5"));
    let npy = dir.join("npy/training.npy.d");
    let bytes = std::fs::read(npy.join("mel.npy")).unwrap();
    let body: Vec<u16> = bytes[256..]
        .chunks_exact(2)
        .map(|b| u16::from_le_bytes([b[0], b[1]]))
        .collect();
    npy_build.check(
        &o,
        body == mel,
        "mel.npy holds exactly the HDF5 file's spectrograms",
    );
    let meta = json_of(&npy_build, &o, &npy.join("meta.json"));
    let meta_paths: Option<Vec<String>> = meta["paths"]
        .as_array()
        .and_then(|a| a.iter().map(|p| p.as_str().map(String::from)).collect());
    npy_build.check(
        &o,
        meta_paths.as_ref() == Some(&paths),
        &format!("meta.json lists the paths {paths:?}: {meta_paths:?}"),
    );

    let script = format!(
        "import numpy as np\nm = np.load({:?}, mmap_mode='r')\nl = np.load({:?})\nprint(m.shape, m.dtype, l.tolist())",
        npy.join("mel.npy"),
        npy.join("label.npy")
    );
    let mut py = dir.program("python3");
    py.args(["-c", &script]);
    let o = python(&mut py);
    py.check(&o, o.status.success(), "numpy loads the arrays");
    let expected = format!("(2, 79, 3, 32, 5) float16 {labels:?}");
    py.check(
        &o,
        text(&o.stdout).trim() == expected,
        &format!("numpy reads the arrays: {expected}"),
    );
}

#[test]
fn ctrl_c_stops_the_build_cleanly_and_leaves_no_partial_output() {
    let dir = Dir::new();
    dir.melctl()
        .args(["demo", "--clips", "3000", "--no-build", "demo"])
        .stdout();
    // SIGTERM (a scheduler's cancel, `kill`) too: it left a full-size preallocated
    // `.training.h5.partial-PID` behind.
    for (signal, out) in [(libc::SIGINT, "out"), (libc::SIGTERM, "out-term")] {
        let mut build = dir.melctl();
        build
            .args([
                "build",
                "--split",
                "training",
                "--threads",
                "1",
                "--loader",
                "stream",
            ])
            .args(["--input", "demo/data", "--output", out]);
        let child = build
            .command()
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        std::thread::sleep(Duration::from_millis(700));
        // SAFETY: sending a signal to our own child process.
        unsafe { libc::kill(child.id() as i32, signal) };
        let o = child.wait_with_output().unwrap();
        build.check(&o, !o.status.success(), "the build must not report success");
        build.check(
            &o,
            text(&o.stderr).contains("interrupted"),
            "the build says it was interrupted",
        );
        build.check(&o, dir.names(out).is_empty(), "nothing may be left behind");
    }
}

#[test]
fn a_manifest_with_a_label_map_builds_the_same_clips() {
    let dir = Dir::new();
    golden_dataset(&dir);
    dir.create(
        "data/clips.csv",
        "path,label,split\ntraining/leak/a.wav,leak,train\ntraining/quiet/b.wav,quiet,train\ntraining/leak/broken.wav,leak,train\n",
    );
    dir.create("data/labels.txt", "quiet\nnormal\nleak\n");
    let mut build = dir.melctl();
    build.args([
        "build",
        "--manifest",
        "data/clips.csv",
        "--labels",
        "data/labels.txt",
    ]);
    build.args(["--output", "out"]);
    let o = build.expect_code(0);
    build.check(
        &o,
        text(&o.stdout).contains("broken.wav"),
        "the broken file is listed",
    );
    let (_, labels, paths) = read_back(&dir.join("out/train.h5"));
    build.check(
        &o,
        paths == ["training/leak/a.wav", "training/quiet/b.wav"],
        &format!("paths {paths:?}"),
    );
    build.check(
        &o,
        labels == [2, 0],
        &format!("ids from the label map: {labels:?}"),
    );
    let f = hdf5::File::open(dir.join("out/train.h5")).unwrap();
    let names: Vec<hdf5::types::VarLenUnicode> = f.attr("label_names").unwrap().read_raw().unwrap();
    let names: Vec<String> = names.iter().map(|n| n.to_string()).collect();
    build.check(
        &o,
        names == ["quiet", "normal", "leak"],
        &format!("label_names {names:?}"),
    );

    // A class missing from the map is refused by name.
    dir.create("data/short.txt", "quiet\n");
    let mut refused = dir.melctl();
    refused.args([
        "build",
        "--manifest",
        "data/clips.csv",
        "--labels",
        "data/short.txt",
    ]);
    refused.args(["--output", "out2"]);
    let o = failure(&mut refused);
    refused.check(
        &o,
        text(&o.stderr).contains("leak"),
        "the missing class is named",
    );
}

#[test]
fn sigkill_at_any_moment_leaves_the_previous_output_or_none() {
    let dir = Dir::new();
    dir.melctl()
        .args(["demo", "--clips", "3000", "--no-build", "demo"])
        .stdout();
    let build = || {
        let mut cmd = dir.melctl();
        cmd.args([
            "build",
            "--split",
            "training",
            "--threads",
            "1",
            "--loader",
            "stream",
        ])
        .args(["--input", "demo/data", "--output", "out"]);
        cmd
    };
    let kill_after = |ms: u64| {
        let mut cmd = build();
        let child = spawn_quiet(&mut cmd);
        std::thread::sleep(Duration::from_millis(ms));
        let killed = kill(child);
        (cmd, killed)
    };
    // No previous output: a kill leaves nothing at the final path.
    for ms in [150, 600, 1200] {
        let (build, killed) = kill_after(ms);
        build.check(
            &killed,
            !dir.join("out/training.h5").exists(),
            &format!("killed after {ms} ms"),
        );
    }
    // A complete build (which also clears what the killed runs left behind).
    let mut complete_build = build();
    let o = complete_build.expect_code(0);
    complete_build.check(
        &o,
        dir.names("out") == ["melctl-build.json", "training.h5"],
        "no partial files left",
    );
    let complete = read_back(&dir.join("out/training.h5"));
    complete_build.check(
        &o,
        complete.2.len() == 2100,
        &format!("2100 clips, got {}", complete.2.len()),
    );
    // With a previous output: a kill during the rebuild leaves it whole and unchanged.
    for ms in [150, 900] {
        let (build, killed) = kill_after(ms);
        build.check(
            &killed,
            read_back(&dir.join("out/training.h5")) == complete,
            &format!("killed after {ms} ms"),
        );
    }
}

#[test]
fn unreadable_entries_and_non_utf8_names_are_skipped_and_listed() {
    use std::os::unix::ffi::OsStrExt;
    let dir = Dir::new();
    golden_dataset(&dir);
    let leak = dir.join("data/training/leak");
    let good = std::fs::read(leak.join("a.wav")).unwrap();
    std::fs::write(
        leak.join(std::ffi::OsStr::from_bytes(b"caf\xe9.wav")),
        &good,
    )
    .unwrap();
    std::os::unix::fs::symlink(leak.join("gone.wav"), leak.join("dangling.wav")).unwrap();
    std::fs::create_dir(leak.join("folder.wav")).unwrap();
    let mut build = dir.melctl();
    build.args([
        "build", "--split", "training", "--input", "data", "--output", "out",
    ]);
    build.args(["--report", "report.json"]);
    let o = build.expect_code(0);
    let r = json_of(&build, &o, &dir.join("report.json"));
    let skipped: Option<Vec<(String, String)>> =
        r["splits"][0]["skipped"].as_array().and_then(|a| {
            a.iter()
                .map(|s| {
                    let path = s["path"].as_str().unwrap_or("").to_string();
                    Some((path, s["reason"].as_str()?.to_string()))
                })
                .collect()
        });
    build.check(
        &o,
        skipped.is_some(),
        &format!("skipped files with their reasons: {r}"),
    );
    let skipped = skipped.unwrap_or_default();
    let skipped_because = |needle: &str, why: &str| {
        let reason = skipped.iter().find(|(p, _)| p.contains(needle));
        build.check(
            &o,
            reason.is_some_and(|(_, r)| r.contains(why)),
            &format!("{needle}: {why:?} in {skipped:?}"),
        );
    };
    skipped_because("caf", "not valid UTF-8");
    skipped_because("dangling.wav", "cannot read");
    skipped_because("broken.wav", "not a valid WAV");
    let (_, _, paths) = read_back(&dir.join("out/training.h5"));
    build.check(
        &o,
        paths == ["training/leak/a.wav", "training/quiet/b.wav"],
        &format!("paths {paths:?}"),
    );
}

#[test]
fn resume_after_sigkill_continues_and_equals_an_uninterrupted_build() {
    let dir = Dir::new();
    dir.melctl()
        .args(["demo", "--clips", "3000", "--no-build", "demo"])
        .stdout();
    let build = |out: &str, extra: &[&str]| {
        let mut cmd = dir.melctl();
        cmd.args([
            "build",
            "--split",
            "training",
            "--threads",
            "1",
            "--batch",
            "32",
        ])
        .args(extra)
        .args(["--input", "demo/data", "--output", out]);
        cmd
    };
    let journal = dir.join("out/.training.resume");
    let batches = || -> Vec<PathBuf> {
        let mut v: Vec<_> = std::fs::read_dir(&journal)
            .map(|d| d.flatten().map(|e| e.path()).collect())
            .unwrap_or_default();
        v.retain(|p| p.file_name().unwrap().to_string_lossy().starts_with("b-"));
        v.sort();
        v
    };
    // Kill the first run once a few batches are journaled.
    let mut first = build("out", &["--resume"]);
    let child = spawn_quiet(&mut first);
    let start = Instant::now();
    while batches().len() < 4 && start.elapsed().as_secs() < 60 {
        std::thread::sleep(Duration::from_millis(5));
    }
    let killed = kill(child);
    let kept = batches();
    first.check(
        &killed,
        kept.len() >= 4,
        &format!("journal batches: {kept:?}"),
    );
    first.check(
        &killed,
        !dir.join("out/training.h5").exists(),
        "no output after a kill",
    );
    // Damage one batch: it must be detected, dropped and redone.
    let damaged = kept.last().unwrap();
    let len = std::fs::metadata(damaged).unwrap().len();
    std::fs::OpenOptions::new()
        .write(true)
        .open(damaged)
        .unwrap()
        .set_len(len - 100)
        .unwrap();

    let mut resumed = build("out", &["--resume"]);
    let o = resumed.expect_code(0);
    let err = text(&o.stderr);
    resumed.check(
        &o,
        err.contains("journal batches") && err.contains("dropped and redone"),
        "the damaged batch is dropped and redone",
    );
    let n_from_journal: usize = err
        .split("resume: ")
        .nth(1)
        .and_then(|s| s.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .unwrap_or(0);
    resumed.check(
        &o,
        n_from_journal >= 3 * 32,
        &format!("at least 3 batches of 32 from the journal, got {n_from_journal}"),
    );
    resumed.check(
        &o,
        !journal.exists(),
        "the journal is removed after a successful build",
    );

    build("whole", &[]).expect_code(0);
    let a = read_back(&dir.join("out/training.h5"));
    let b = read_back(&dir.join("whole/training.h5"));
    resumed.check(
        &o,
        a.2.len() == 2100,
        &format!("2100 clips, got {}", a.2.len()),
    );
    resumed.check(&o, a == b, "a resumed build equals an uninterrupted one");

    // A journal from another configuration is not used, and starting over is said even
    // under -q (a warning: the interrupted run's work is lost).
    let mut again = build("out", &["--resume"]);
    let child = spawn_quiet(&mut again);
    let start = Instant::now();
    while batches().is_empty() && start.elapsed().as_secs() < 60 {
        std::thread::sleep(Duration::from_millis(5));
    }
    kill(child);
    let mut other = build("out", &["--resume", "--dtype", "f32", "-q"]);
    let o = other.expect_code(0);
    other.check(
        &o,
        text(&o.stderr).contains("another configuration")
            && text(&o.stderr).contains("starting over"),
        "a journal from another configuration is not used, said under -q",
    );
}

/// melkit's `extract` example, which `cargo test --workspace` builds beside melctl.
fn extract_example() -> PathBuf {
    let melctl = Path::new(env!("CARGO_BIN_EXE_melctl"));
    let exe = melctl
        .parent()
        .expect("the folder of the melctl binary")
        .join("examples")
        .join(format!("extract{}", std::env::consts::EXE_SUFFIX));
    assert!(
        exe.is_file(),
        "melkit's extract example is not built at {}: build it with \
         `cargo build -p melkit --examples` (`cargo test --workspace` builds it too)",
        exe.display()
    );
    exe
}

#[test]
fn the_extract_example_writes_the_spectrogram_melctl_build_stores() {
    let extract = extract_example();
    for (preset, rate, clip_samples, shape) in [
        ("leak-4k", 4096, 40960, &[79, 3, 32, 5][..]),
        ("speech-16k", 16000, 16000, &[80, 101][..]),
    ] {
        // A few whole clips of the preset (10 s at 4096 Hz, 1 s at 16 kHz).
        let g = goldens().into_iter().find(|g| g.name == preset).unwrap();
        let n = g.input_i16.len() / g.clips;
        assert_eq!(n, clip_samples, "{preset}: a golden clip is one whole clip");
        let clip = |i: usize| &g.input_i16[i * n..(i + 1) * n];
        let reversed: Vec<i16> = clip(1).iter().rev().copied().collect();
        let dir = Dir::new();
        let files = [
            "data/training/leak/a.wav",
            "data/training/quiet/b.wav",
            "data/training/quiet/c.wav",
        ];
        dir.wav(files[0], clip(0), rate);
        dir.wav(files[1], clip(1), rate);
        dir.wav(files[2], &reversed, rate);

        // The example on each file; it says which backend it ran on.
        let mut extracted = Vec::new();
        for (i, file) in files.iter().enumerate() {
            let npy = format!("{i}.npy");
            let mut example = dir.program(&extract);
            example.args(["--preset", preset, file, &npy]);
            let o = example.expect_code(0);
            let backend = text(&o.stderr)
                .rsplit_once("(backend ")
                .and_then(|(_, b)| b.split_once(')'))
                .map(|(b, _)| b.to_string());
            example.check(&o, backend.is_some(), "the example names its backend");
            let values: ndarray::ArrayD<f32> = ndarray_npy::read_npy(dir.join(&npy))
                .unwrap_or_else(|e| panic!("{}", example.explain(&o, &format!("{npy}: {e}"))));
            example.check(
                &o,
                values.shape() == shape,
                &format!("{npy} has the shape {shape:?}, got {:?}", values.shape()),
            );
            extracted.push((example, o, backend.unwrap_or_default(), values));
        }
        // The example never writes over its input, by name or through a link (it did,
        // with exit 0: issue 22's attack round).
        let wav = std::fs::read(dir.join(files[0])).unwrap();
        std::os::unix::fs::symlink(files[0], dir.join("link.npy")).unwrap();
        for out in [files[0], "link.npy"] {
            let mut example = dir.program(&extract);
            example.args(["--preset", preset, files[0], out]);
            let o = example.output();
            example.check(
                &o,
                !o.status.success() && text(&o.stderr).contains("the input"),
                &format!("writing {out} over the input is refused"),
            );
            assert_eq!(std::fs::read(dir.join(files[0])).unwrap(), wav, "{out}");
        }

        // melctl build on the same backend stores the same values, as f16: the example
        // writes those widened to f32, so they are equal bit for bit.
        let backend = &extracted[0].2;
        let mut build = dir.melctl();
        build
            .args(["build", "--preset", preset, "--backend", backend])
            .args(["--input", "data", "--output", "out"]);
        let built = build.expect_code(0);
        let stored_as = hdf5::File::open(dir.join("out/training.h5"))
            .and_then(|f| f.dataset("mel")?.dtype()?.to_descriptor())
            .map(|d| d.to_string());
        build.check(
            &built,
            matches!(stored_as.as_deref(), Ok("float16")),
            &format!("mel stored as float16 (the default), got {stored_as:?}"),
        );
        let (mel, _, paths) = read_back(&dir.join("out/training.h5"));
        let per: usize = shape.iter().product();
        build.check(
            &built,
            mel.len() == paths.len() * per,
            &format!(
                "{} values for {} clips of {shape:?}",
                mel.len(),
                paths.len()
            ),
        );
        for (file, (example, o, ran_on, values)) in files.iter().zip(&extracted) {
            let path = file.strip_prefix("data/").unwrap();
            let row = paths.iter().position(|p| p == path);
            let Some(row) = row else {
                panic!(
                    "{}",
                    build.explain(&built, &format!("{path} is not in {paths:?}"))
                );
            };
            let stored: Vec<u32> = mel[row * per..(row + 1) * per]
                .iter()
                .map(|&bits| half::f16::from_bits(bits).to_f32().to_bits())
                .collect();
            let written: Vec<u32> = values.iter().map(|v| v.to_bits()).collect();
            let first_difference = stored
                .iter()
                .zip(&written)
                .enumerate()
                .find(|(_, (a, b))| a != b)
                .map(|(i, (a, b))| (i, f32::from_bits(*a), f32::from_bits(*b)));
            example.check(
                o,
                ran_on == backend && written == stored,
                &format!(
                    "{preset}: the example's {path} (backend {ran_on}) equals row {row} of \
                     the build's mel (backend {backend}) widened to f32; first difference \
                     (index, stored, written): {first_difference:?}"
                ),
            );
        }
    }
}

/// melkit's `build` example (the build as a library, issue 23) writes what `melctl build`
/// writes with the same settings: every dataset and attribute of every split equal, and
/// the same build record, but for the build's id.
#[test]
fn the_melkit_build_example_writes_what_melctl_build_writes() {
    let example =
        extract_example().with_file_name(format!("build{}", std::env::consts::EXE_SUFFIX));
    assert!(
        example.is_file(),
        "melkit's build example is not built at {}: `cargo build -p melkit --features datasets --examples`",
        example.display()
    );
    let dir = Dir::new();
    dir.melctl()
        .args(["demo", "--clips", "40", "--no-build", "demo"])
        .stdout();
    dir.melctl()
        .args(["build", "-i", "demo/data", "-o", "cli", "-q"])
        .args(["--backend", "cpu", "--loader", "stream"])
        .expect_code(0);
    dir.program(&example)
        .args([
            "--input",
            "demo/data",
            "--output",
            "lib",
            "--preset",
            "leak-4k",
        ])
        .args(["--backend", "cpu"])
        .expect_code(0);
    let diff = dir.program("python3").args([
        "-c",
        r#"
import json, h5py, numpy as np
def dump(folder):
    out = {}
    for split in ["training", "validation", "testing"]:
        with h5py.File(f"{folder}/{split}.h5", "r") as f:
            for k, v in f.attrs.items():
                out[f"{split}@{k}"] = repr(v)
            def visit(name, obj):
                if isinstance(obj, h5py.Dataset):
                    out[f"{split}/{name}"] = (obj.dtype.str, obj.shape, obj[()].tobytes() if obj.dtype.kind != "O" else repr(list(obj[()])))
                    for k, v in obj.attrs.items():
                        out[f"{split}/{name}@{k}"] = repr(v)
            f.visititems(visit)
    rec = json.load(open(f"{folder}/melctl-build.json"))
    out["record"] = sorted((s, e["output"]) for s, e in rec["splits"].items())
    return out
a, b = dump("cli"), dump("lib")
print(sorted(k for k in set(a) | set(b) if a.get(k) != b.get(k)))
print(len(a))
"#,
    ]).stdout();
    let mut lines = diff.lines();
    let differ = lines.next().unwrap_or_default();
    let compared: usize = lines.next().unwrap_or("0").trim().parse().unwrap_or(0);
    assert_eq!(
        differ, "['testing@build_id', 'training@build_id', 'validation@build_id']",
        "only the build ids differ"
    );
    assert!(compared > 30, "{compared} items compared");
}

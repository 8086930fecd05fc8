//! The ways of running melctl besides a plain build: `--dry-run`, `-q`, `--strict`,
//! `--report -`, `inspect --json`, `show`, and the flag combinations it refuses.

mod util;

use std::path::Path;

use util::Dir;

/// A run's stdout or stderr as text.
fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// `melctl demo --clips N --no-build` moved to `data/`, plus one broken training file.
fn demo_with_a_broken_file(dir: &Dir, clips: &str) {
    dir.melctl()
        .args(["demo", "--clips", clips, "--no-build", "demo"])
        .stdout();
    std::fs::rename(dir.join("demo/data"), dir.join("data")).unwrap();
    dir.create("data/training/leak/zz-broken.wav", "RIFF....WAVEjunk");
}

/// Width and height of a PNG file, from its IHDR chunk.
fn png_size(path: &Path) -> (u32, u32) {
    let b = std::fs::read(path).unwrap();
    assert_eq!(&b[..8], b"\x89PNG\r\n\x1a\n", "{} is a PNG", path.display());
    assert_eq!(&b[12..16], b"IHDR");
    let be = |at: usize| u32::from_be_bytes(b[at..at + 4].try_into().unwrap());
    (be(16), be(20))
}

#[test]
fn dry_run_names_splits_classes_backend_and_size_and_writes_nothing() {
    let dir = Dir::new();
    demo_with_a_broken_file(&dir, "20");
    // A cut-short copy of a good file: its header promises more than it holds.
    let good = dir
        .join("data/training/quiet")
        .read_dir()
        .unwrap()
        .next()
        .unwrap();
    let bytes = std::fs::read(good.unwrap().path()).unwrap();
    dir.create("data/training/quiet/cut.wav", &bytes[..bytes.len() / 2]);
    let mut dry = dir.melctl();
    dry.args(["build", "-i", "data", "-o", "out", "--dry-run"]);
    let o = dry.expect_code(0);
    let stdout = text(&o.stdout);
    for needle in [
        "dry run",
        "training",
        "validation",
        "no_leak",
        "backend  cpu",
        "loader   training: stream",
        "as hdf5: about",
        "would skip data/training/leak/zz-broken.wav: truncated",
        "would skip data/training/quiet/cut.wav: truncated data: the header promises",
    ] {
        dry.check(
            &o,
            stdout.contains(needle),
            &format!("stdout names {needle:?}"),
        );
    }
    dry.check(&o, !dir.join("out").exists(), "nothing is written");
}

#[test]
fn quiet_prints_nothing_but_the_skipped_files_and_strict_exits_3() {
    let dir = Dir::new();
    demo_with_a_broken_file(&dir, "20");
    let mut quiet = dir.melctl();
    quiet.args(["build", "-i", "data", "-o", "out", "-q"]);
    let o = quiet.expect_code(0);
    quiet.check(&o, o.stdout.is_empty(), "nothing on stdout");
    let stderr = text(&o.stderr);
    quiet.check(
        &o,
        stderr.lines().count() == 1
            && stderr.contains("zz-broken.wav")
            && stderr.contains("truncated"),
        "stderr has one line naming the skipped file and why",
    );
    quiet.check(&o, dir.join("out/training.h5").is_file(), "the build wrote");

    let mut strict = dir.melctl();
    strict.args(["build", "-i", "data", "-o", "strict", "-q", "--strict"]);
    let o = strict.expect_code(3);
    let stderr = text(&o.stderr);
    strict.check(
        &o,
        stderr.contains("zz-broken.wav") && stderr.contains("--strict: 1 file was skipped"),
        "strict names the file and says why it failed",
    );
    strict.check(
        &o,
        dir.join("strict/training.h5").is_file(),
        "strict still writes the outputs (the exit status tells a pipeline)",
    );

    // Without broken files, strict succeeds.
    std::fs::remove_file(dir.join("data/training/leak/zz-broken.wav")).unwrap();
    dir.melctl()
        .args(["build", "-i", "data", "-o", "clean", "-q", "--strict"])
        .expect_code(0);
}

#[test]
fn report_to_stdout_is_the_only_thing_on_stdout() {
    let dir = Dir::new();
    demo_with_a_broken_file(&dir, "20");
    let mut build = dir.melctl();
    build.args(["build", "-i", "data", "-o", "out", "--report", "-"]);
    let o = build.expect_code(0);
    let report: serde_json::Value = serde_json::from_slice(&o.stdout)
        .unwrap_or_else(|e| panic!("{}", build.explain(&o, &format!("stdout is JSON: {e}"))));
    build.check(&o, report["ok"] == true, "the report says ok");
    let skipped = report["splits"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|s| s["skipped"].as_array().unwrap())
        .count();
    build.check(&o, skipped == 1, "the report lists the broken file");
    build.check(
        &o,
        text(&o.stderr).contains("total"),
        "the human summary moved to stderr",
    );
}

#[test]
fn device_with_the_cpu_backend_is_refused_before_any_work() {
    let dir = Dir::new();
    demo_with_a_broken_file(&dir, "5");
    let mut build = dir.melctl();
    build.args([
        "build",
        "-i",
        "data",
        "-o",
        "out",
        "--backend",
        "cpu",
        "--device",
        "0",
    ]);
    let stderr = build.stderr_of_failure();
    assert!(stderr.contains("--device"), "{stderr}");
    assert!(!dir.join("out").exists());
}

#[test]
fn a_value_refused_names_the_flag_that_gave_it_and_a_files_value_the_key() {
    let dir = Dir::new();
    let stderr = dir
        .melctl()
        .args(["config", "--threads", "100000"])
        .stderr_of_failure();
    assert!(stderr.contains("run.threads (--threads)"), "{stderr}");
    dir.create("c.toml", "[run]\nthreads = 100000\n");
    let stderr = dir
        .melctl()
        .args(["config", "--config", "c.toml"])
        .stderr_of_failure();
    assert!(stderr.contains("run.threads"), "{stderr}");
    assert!(!stderr.contains("--threads"), "{stderr}");
    // Refused before anything is sized by it: a build's worker pool of 99,999,999
    // threads was started before the plan refused it (an attack found it hanging).
    let started = std::time::Instant::now();
    let stderr = dir
        .melctl()
        .args([
            "build",
            "-i",
            "data",
            "-o",
            "out",
            "--dry-run",
            "--threads",
            "99999999",
        ])
        .stderr_of_failure();
    assert!(stderr.contains("run.threads (--threads)"), "{stderr}");
    assert!(started.elapsed() < std::time::Duration::from_secs(60));
    // The flag overrides the file, so the file's value never counts.
    let config = dir
        .melctl()
        .args(["config", "--config", "c.toml", "--threads", "3"])
        .stdout();
    assert!(config.contains("threads = 3"), "{config}");
}

#[test]
fn inspect_json_and_show_describe_and_draw_an_output() {
    let dir = Dir::new();
    dir.melctl()
        .args(["demo", ".", "--clips", "25", "-q"])
        .expect_code(0);

    let mut inspect = dir.melctl();
    inspect.args(["inspect", "out/training.h5", "--json"]);
    let o = inspect.expect_code(0);
    let j: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    inspect.check(
        &o,
        j["shape"] == serde_json::json!([18, 79, 3, 32, 5]) && j["dtype"] == "f16",
        "shape and dtype",
    );
    let per_class: Vec<u64> = j["classes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c[1].as_u64().unwrap())
        .collect();
    inspect.check(
        &o,
        per_class.len() == 5 && per_class.iter().sum::<u64>() == 18,
        "five classes whose counts add up to the clips",
    );
    inspect.check(
        &o,
        j["mel_mean"].as_array().map(Vec::len) == Some(32) && j["values"]["non_finite"] == 0,
        "per-bin statistics and no non-finite values",
    );

    let mut show = dir.melctl();
    show.args(["show", "out/training.h5", "--index", "2", "-o", "clip.png"]);
    show.stdout();
    assert_eq!(png_size(&dir.join("clip.png")), (900, 520));
    dir.melctl()
        .args([
            "show",
            "out/training.h5",
            "--class-means",
            "-o",
            "means.png",
        ])
        .stdout();
    let (w, _) = png_size(&dir.join("means.png"));
    assert!(w > 900, "five panels are wider than one: {w}");
    dir.melctl()
        .args([
            "show",
            "out/training.h5",
            "--segment",
            "78,2",
            "-o",
            "seg.png",
        ])
        .stdout();
    assert_eq!(png_size(&dir.join("seg.png")), (900, 520));

    // Bad requests are errors that say what exists; no picture, no partial file.
    for (args, needle) in [
        (vec!["--index", "18"], "holds 18 clips"),
        (vec!["--segment", "79,0"], "79 long × 3 short"),
    ] {
        let mut bad = dir.melctl();
        bad.args(["show", "out/training.h5", "-o", "bad.png"])
            .args(args);
        let stderr = bad.stderr_of_failure();
        assert!(stderr.contains(needle), "{stderr}");
    }
    let mut not_h5 = dir.melctl();
    not_h5.args(["show", "data/training/leak", "-o", "bad.png"]);
    not_h5.stderr_of_failure();
    assert!(
        !dir.names(".").iter().any(|n| n.contains("bad.png")),
        "{}",
        dir.listing()
    );
}

#[test]
fn show_refuses_a_tampered_npy_output_without_panicking() {
    let dir = Dir::new();
    demo_with_a_broken_file(&dir, "10");
    dir.melctl()
        .args(["build", "-i", "data", "-o", "out", "--sink", "npy", "-q"])
        .output();
    let labels = dir.join("out/training.npy.d/label.npy");
    let bytes = std::fs::read(&labels).unwrap();
    // Drop the last label: the labels no longer cover the clips.
    std::fs::write(&labels, &bytes[..bytes.len() - 8]).unwrap();
    let mut show = dir.melctl();
    show.args(["show", "out/training.npy.d", "--class-means", "-o", "x.png"]);
    let stderr = show.stderr_of_failure();
    assert!(stderr.starts_with("error: "), "{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
    // A label file shorter than its header.
    std::fs::write(&labels, b"\x93NUMPY").unwrap();
    let stderr = show.stderr_of_failure();
    assert!(!stderr.contains("panicked"), "{stderr}");
    let mut inspect = dir.melctl();
    inspect.args(["inspect", "out/training.npy.d"]);
    let stderr = inspect.stderr_of_failure();
    assert!(
        stderr.starts_with("error: ") && !stderr.contains("panicked"),
        "{stderr}"
    );
}

#[test]
fn show_and_inspect_refuse_a_tampered_hdf5_output_without_panicking() {
    let dir = Dir::new();
    demo_with_a_broken_file(&dir, "10");
    dir.melctl()
        .args(["build", "-i", "data", "-o", "out", "-q"])
        .output();
    // Fewer paths than clips, and a `label` dataset that claims 2^40 rows (chunked, never
    // written: a few bytes on disk, 8 TiB if read blindly).
    let script = r#"
import h5py, numpy as np, sys
f = h5py.File(sys.argv[1], "r+")
paths = f["path"][:]
del f["path"]
f.create_dataset("path", data=paths[:-1], dtype=h5py.string_dtype())
f.close()
g = h5py.File(sys.argv[2], "r+")
del g["label"]
g.create_dataset("label", shape=(1 << 40,), dtype="<i8", chunks=(1024,))
g.close()
"#;
    std::fs::copy(dir.join("out/training.h5"), dir.join("huge.h5")).unwrap();
    let o = dir
        .program("python3")
        .args(["-c", script, "out/training.h5", "huge.h5"])
        .output();
    assert!(o.status.success(), "{}", text(&o.stderr));
    for file in ["out/training.h5", "huge.h5"] {
        for args in [
            vec!["show", file, "-o", "x.png"],
            vec!["show", file, "--class-means", "-o", "x.png"],
            vec!["inspect", file],
        ] {
            let mut c = dir.melctl();
            c.args(&args);
            let stderr = c.stderr_of_failure();
            assert!(
                stderr.starts_with("error: ") && !stderr.contains("panicked"),
                "{args:?}: {stderr}"
            );
        }
    }
    assert!(!dir.join("x.png").exists());
}

/// A split every file of which is broken is not published (an empty output would replace
/// what is there: a mount gone, every file emptied, exit 0); the build fails naming it,
/// and nothing is written.
#[test]
fn a_split_whose_every_file_is_broken_is_refused_and_named() {
    let dir = Dir::new();
    demo_with_a_broken_file(&dir, "10");
    std::fs::remove_dir_all(dir.join("data/testing")).unwrap();
    dir.create("data/testing/leak/only.wav", "not audio");
    for sink in ["hdf5", "npy"] {
        let out = format!("out-{sink}");
        let mut build = dir.melctl();
        build.args(["build", "-i", "data", "-o", &out, "-q", "--sink", sink]);
        let o = build.expect_code(1);
        build.check(
            &o,
            text(&o.stderr).contains("only.wav")
                && text(&o.stderr).contains("split testing: all 1 of its files were left out"),
            "the split and its broken file are named",
        );
        build.check(
            &o,
            dir.names(&out).iter().all(|n| n.starts_with('.')),
            "nothing was published",
        );
    }
}

#[test]
fn counts_of_one_are_singular_in_the_header_and_the_dry_run() {
    let dir = Dir::new();
    demo_with_a_broken_file(&dir, "10");
    let wav = std::fs::read_dir(dir.join("data/training/leak"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| !p.ends_with("zz-broken.wav"))
        .unwrap();
    dir.create("one/leak/a.wav", std::fs::read(wav).unwrap());
    let mut dry = dir.melctl();
    dry.args(["build", "-i", "one", "-o", "out", "--dry-run"]);
    let o = dry.expect_code(0);
    dry.check(
        &o,
        text(&o.stderr).contains("1 split, 1 class, 1 file;"),
        "the header counts in the singular",
    );
    dry.check(
        &o,
        text(&o.stdout).contains("(1 split, 1 class)"),
        "the layout line counts in the singular",
    );
}

/// With stderr not a terminal (a batch job's log) a build printed nothing until it ended:
/// now a line every --progress-every seconds says it is alive.
#[test]
fn progress_without_a_terminal_is_a_line_every_few_seconds() {
    let dir = Dir::demo(12);
    let stderr = |flags: &[&str], out: &str| {
        let o = dir.build(out).args(flags).expect_code(0);
        String::from_utf8_lossy(&o.stderr).into_owned()
    };
    let lines = stderr(&["--progress", "lines", "--progress-every", "0"], "a");
    for split in ["testing", "training", "validation"] {
        assert!(
            lines.contains(&format!("build {split}: ")) && lines.contains("clips/s"),
            "{lines}"
        );
    }
    // The default: a short build ends before the first line is due.
    assert!(
        !stderr(&[], "b").contains("clips/s,"),
        "no line before 10 s"
    );
    assert!(!stderr(&["--progress", "none", "--progress-every", "0"], "c").contains("clips/s,"));
    assert!(!stderr(&["-q", "--progress-every", "0"], "d").contains("clips/s,"));
    let e = dir
        .build("e")
        .args(["--progress-every", "nan"])
        .stderr_of_failure();
    assert!(e.contains("not a number of seconds"), "{e}");
}

/// A split with files left out never reached its total, so its last progress line read
/// "84%, 1 s left" after the split had ended: the last line says it is done, and how
/// many were left out.
#[test]
fn the_last_progress_line_says_done_when_files_were_left_out() {
    let dir = Dir::new();
    demo_with_a_broken_file(&dir, "12");
    let o = dir
        .melctl()
        .args(["build", "-i", "data", "-o", "out", "--split", "training"])
        .args(["--progress", "lines", "--progress-every", "0"])
        .expect_code(0);
    let stderr = String::from_utf8_lossy(&o.stderr).into_owned();
    let last = stderr
        .lines()
        .rfind(|l| l.starts_with("build training: "))
        .unwrap_or_default();
    assert!(
        last.contains("done in") && last.ends_with("(1 left out)"),
        "{stderr}"
    );
}

/// `--dry-run --report FILE` wrote no report and said nothing; `-q --resume` printed the
/// journal's state on success; a manifest's dry run described a folder layout it never
/// read.
#[test]
fn quiet_means_quiet_and_a_dry_run_says_what_it_reads() {
    let dir = Dir::new();
    demo_with_a_broken_file(&dir, "12");
    let e = dir
        .melctl()
        .args([
            "build",
            "-i",
            "data",
            "-o",
            "out",
            "--dry-run",
            "--report",
            "r.json",
        ])
        .stderr_of_failure();
    assert!(e.contains("--report") && e.contains("--dry-run"), "{e}");
    assert!(!dir.join("r.json").exists());
    let o = dir
        .melctl()
        .args(["build", "-i", "data", "-o", "out", "-q", "--resume"])
        .expect_code(0);
    let stderr = String::from_utf8_lossy(&o.stderr).into_owned();
    assert!(!stderr.contains("resume"), "{stderr}");
    assert!(
        stderr.contains("skipped") && stderr.contains("zz-broken.wav"),
        "{stderr}"
    );
    let wavs: Vec<String> = ["training", "testing"]
        .iter()
        .flat_map(|s| {
            let class = dir.names(format!("data/{s}"))[0].clone();
            dir.names(format!("data/{s}/{class}"))
                .into_iter()
                .filter(|n| n.ends_with(".wav") && !n.starts_with("zz"))
                .map(move |n| format!("data/{s}/{class}/{n},{class},{s}\n"))
        })
        .collect();
    dir.create("clips.csv", format!("path,label,split\n{}", wavs.concat()));
    let out = dir
        .melctl()
        .args(["build", "--manifest", "clips.csv", "-o", "m", "--dry-run"])
        .stdout();
    let layout = out
        .lines()
        .find(|l| l.starts_with("layout"))
        .unwrap_or_default();
    assert!(
        layout.contains("the manifest's rows")
            && layout.contains("clips.csv")
            && !layout.contains("ROOT/"),
        "{out}"
    );
}

#[test]
fn verify_names_a_split_left_by_another_build_and_a_missing_one() {
    let dir = Dir::demo(20);
    for out in ["a", "b"] {
        dir.melctl()
            .args(["build", "-i", "data", "-o", out, "-q"])
            .expect_code(0);
    }
    let whole = dir.melctl().args(["verify", "a"]).stdout();
    assert!(whole.contains("whole: 3 splits of build"), "{whole}");
    // What a kill between two publish renames leaves: one split of another build.
    std::fs::copy(dir.join("b/validation.h5"), dir.join("a/validation.h5")).unwrap();
    let o = dir.melctl().args(["verify", "a"]).expect_code(1);
    let err = text(&o.stderr);
    assert!(
        err.contains("split \"validation\"") && err.contains("from build"),
        "{err}"
    );
    assert!(!err.contains("\"training\""), "{err}");
    std::fs::remove_file(dir.join("a/testing.h5")).unwrap();
    let o = dir.melctl().args(["verify", "--json", "a"]).expect_code(1);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["whole"], false);
    let problems = v["problems"].as_array().unwrap();
    assert_eq!(problems.len(), 2, "{problems:?}");
    assert!(
        problems.iter().any(|p| p
            .as_str()
            .unwrap()
            .contains("testing.h5 for it, which is missing")),
        "{problems:?}"
    );
    // No record to name the build: splits carrying two builds' ids are still refused.
    std::fs::copy(dir.join("a/training.h5"), dir.join("b/training.h5")).unwrap();
    std::fs::remove_file(dir.join("b/melctl-build.json")).unwrap();
    let err = dir.melctl().args(["verify", "b"]).stderr_of_failure();
    assert!(
        err.contains("the splits come from different builds") && err.contains("\"training\""),
        "{err}"
    );
    // Not a folder of outputs: one line, status 1.
    let err = dir.melctl().args(["verify", "data/x"]).stderr_of_failure();
    assert_eq!(err.lines().count(), 1, "{err}");
}

#[test]
fn show_draws_an_audio_file_as_a_build_would_store_it() {
    let dir = Dir::demo(10);
    let wav = dir
        .names("data/training/leak")
        .into_iter()
        .next()
        .expect("a demo clip");
    let wav = format!("data/training/leak/{wav}");
    let o = dir
        .melctl()
        .args(["show", &wav, "-o", "w.png"])
        .expect_code(0);
    assert!(
        text(&o.stderr).contains("wrote w.png"),
        "{}",
        text(&o.stderr)
    );
    // The waveform's strip above one spectrogram panel.
    assert_eq!(png_size(&dir.join("w.png")), (900, 740));
    // Another configuration: another picture, drawn at its own rate.
    dir.melctl()
        .args(["show", &wav, "-o", "s.png", "--preset", "speech-16k"])
        .expect_code(0);
    assert_ne!(
        std::fs::read(dir.join("w.png")).unwrap(),
        std::fs::read(dir.join("s.png")).unwrap()
    );
    // Class means need an output; a file that is not audio is its one-line error.
    for args in [
        vec!["show", &wav, "-o", "m.png", "--class-means"],
        vec!["show", "no-such.wav", "-o", "m.png"],
    ] {
        let err = dir.melctl().args(&args).stderr_of_failure();
        assert_eq!(err.lines().count(), 1, "{args:?}: {err}");
    }
    dir.create("notes.txt", "not audio at all");
    let err = dir
        .melctl()
        .args(["show", "notes.txt", "-o", "m.png"])
        .stderr_of_failure();
    assert!(err.contains("notes.txt"), "{err}");
    assert!(!dir.join("m.png").exists());
}

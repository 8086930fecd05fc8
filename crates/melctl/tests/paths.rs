//! Paths and names, as a hostile or unlucky user gives them: one file is one clip however
//! it is spelled or linked, nothing under the root vanishes without being named (hidden
//! entries, links not followed), no tree of links hangs the scan, split and label names
//! cannot take the form of melctl's own temporary files or carry terminal escapes, and
//! the CLI's own input files (manifest, configuration, label map) are read bounded and
//! never block.

mod util;

use std::path::Path;
use std::process::{Output, Stdio};
use std::time::{Duration, Instant};

use util::{Dir, TestCommand};

/// Short clips, so builds are quick.
const SHORT_CLIPS: &str = "[audio]\nclip_seconds = 1.0\n";

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// A one-second 4096 Hz clip, different for each `i`.
fn tone(i: usize) -> Vec<i16> {
    (0..4096)
        .map(|k| ((k as f64 * 0.01 * (i + 1) as f64).sin() * 8000.0) as i16)
        .collect()
}

/// A scenario with a WAV at each of `rels` and the short-clip configuration.
fn scenario(rels: &[&str]) -> Dir {
    let dir = Dir::new();
    for (i, rel) in rels.iter().enumerate() {
        dir.wav(rel, &tone(i), 4096);
    }
    dir.create("short.toml", SHORT_CLIPS);
    dir
}

/// `melctl build` with the short clips on the CPU, then `args`.
fn melctl_build(dir: &Dir, args: &[&str]) -> TestCommand {
    let mut c = dir.melctl();
    c.args(["build", "--config", "short.toml", "--backend", "cpu"])
        .args(args);
    c
}

/// Runs `cmd` to completion, failing the test (with the run explained) if it takes more
/// than `secs`: a hang is a failure, not a stuck test run.
#[track_caller]
fn within(cmd: &mut TestCommand, secs: u64) -> Output {
    let start = Instant::now();
    let mut child = cmd
        .command()
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("melctl starts");
    while child.try_wait().expect("wait").is_none() {
        if start.elapsed() > Duration::from_secs(secs) {
            child.kill().expect("kill");
            let o = child.wait_with_output().expect("reap");
            panic!("{}", cmd.explain(&o, &format!("an end within {secs} s")));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    child.wait_with_output().expect("output")
}

/// The JSON report at `path`.
fn report(path: &Path) -> serde_json::Value {
    serde_json::from_slice(&std::fs::read(path).expect("the report")).expect("JSON")
}

/// The report's ignored entries as (path, reason).
fn ignored(r: &serde_json::Value) -> Vec<(String, String)> {
    r["ignored"]
        .as_array()
        .map(|a| {
            a.iter()
                .map(|i| {
                    let s = |k: &str| i[k].as_str().unwrap_or_default().to_string();
                    (s("path"), s("reason"))
                })
                .collect()
        })
        .unwrap_or_default()
}

fn mkfifo(path: &Path) {
    let c = std::ffi::CString::new(path.to_str().unwrap()).unwrap();
    // SAFETY: a valid NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o644) }, 0);
}

#[test]
fn one_file_under_any_spelling_or_link_in_a_manifest_is_refused_naming_both_lines() {
    let dir = scenario(&["clips/x.wav", "clips/y.wav"]);
    std::fs::create_dir(dir.join("b")).unwrap();
    std::os::unix::fs::symlink("x.wav", dir.join("clips/l.wav")).unwrap();
    let abs = dir.join("clips/x.wav").display().to_string();
    let mut ok = melctl_build(&dir, &["--manifest", "ok.csv", "-o", "ok"]);
    dir.create(
        "ok.csv",
        "path,label,split\nclips/x.wav,leak,training\nclips/y.wav,quiet,training\n",
    );
    let o = ok.expect_code(0);
    ok.check(&o, dir.join("ok/training.h5").is_file(), "two files build");
    for other in [
        "./clips/x.wav",
        "clips//x.wav",
        "b/../clips/x.wav",
        abs.as_str(),
        "clips/l.wav",
    ] {
        dir.create(
            "m.csv",
            format!(
                "path,label,split\nclips/x.wav,leak,training\nclips/y.wav,quiet,training\n{other},quiet,testing\n"
            ),
        );
        let mut b = melctl_build(&dir, &["--manifest", "m.csv", "-o", "out"]);
        let o = b.output();
        let err = text(&o.stderr);
        b.check(
            &o,
            !o.status.success()
                && err.contains("lines 2 and 4 name one file")
                && err.contains(other),
            &format!("{other}: refused, naming both lines"),
        );
        b.check(&o, dir.names("out").is_empty(), "nothing is written");
    }
}

#[test]
fn hidden_entries_are_listed_with_their_reason_and_counted_by_strict() {
    let dir = scenario(&[
        "data/training/leak/a.wav",
        "data/training/quiet/b.wav",
        "data/training/leak/.take2.wav",
        "data/training/.hiss/c.wav",
        "data/.validation/leak/d.wav",
        "data/.validation/leak/e.wav",
    ]);
    let args = ["-i", "data", "-o", "out", "--report", "r.json", "-q"];
    let mut strict = melctl_build(&dir, &args);
    strict.arg("--strict");
    let o = strict.expect_code(3);
    let err = text(&o.stderr);
    for name in [".take2.wav", ".hiss", ".validation"] {
        strict.check(
            &o,
            err.lines()
                .any(|l| l.contains(name) && l.contains("hidden")),
            &format!("-q names {name} and why"),
        );
    }
    strict.check(
        &o,
        err.contains("--strict: 4 files were skipped"),
        "strict counts the 4 hidden audio files",
    );
    let ig = ignored(&report(&dir.join("r.json")));
    for name in [
        "data/training/leak/.take2.wav",
        "data/training/.hiss",
        "data/.validation",
    ] {
        strict.check(
            &o,
            ig.iter()
                .any(|(p, why)| p == name && why.contains("hidden")),
            &format!("the report lists {name} with its reason: {ig:?}"),
        );
    }
    strict.check(
        &o,
        dir.join("out/training.h5").is_file(),
        "training is built",
    );
    // The summary names them too.
    let mut plain = melctl_build(&dir, &["-i", "data", "-o", "plain"]);
    let o = plain.expect_code(0);
    let out = text(&o.stdout);
    plain.check(
        &o,
        out.contains(".take2.wav") && out.contains(".validation") && out.contains("4 skipped"),
        "the summary names the hidden audio and counts it",
    );
}

#[test]
fn self_links_below_a_class_folder_neither_hang_nor_vanish() {
    let dir = scenario(&["data/training/leak/a.wav", "data/training/quiet/b.wav"]);
    // In a class folder, and in a folder without audio below one (2^40 paths to walk).
    std::fs::create_dir(dir.join("data/training/quiet/sub")).unwrap();
    for folder in ["leak", "quiet/sub"] {
        for link in ["a", "b"] {
            let at = dir.join("data/training").join(folder).join(link);
            std::os::unix::fs::symlink(".", at).unwrap();
        }
    }
    let mut b = melctl_build(&dir, &["-i", "data", "-o", "out", "--report", "r.json"]);
    let o = within(&mut b, 60);
    b.check(&o, o.status.success(), "the build succeeds");
    let ig = ignored(&report(&dir.join("r.json")));
    for link in [
        "data/training/leak/a",
        "data/training/leak/b",
        "data/training/quiet/sub/a",
        "data/training/quiet/sub/b",
    ] {
        b.check(
            &o,
            ig.iter()
                .any(|(p, why)| p == link && why.contains("not followed")),
            &format!("{link} is listed as not followed: {ig:?}"),
        );
    }
}

#[test]
fn one_file_reached_by_two_folder_paths_is_refused_naming_both() {
    let dir = scenario(&["data/training/leak/a.wav", "data/testing/quiet/b.wav"]);
    std::os::unix::fs::symlink("../training/leak", dir.join("data/testing/leak")).unwrap();
    let mut b = melctl_build(&dir, &["-i", "data", "-o", "out"]);
    let o = b.output();
    let err = text(&o.stderr);
    b.check(
        &o,
        !o.status.success()
            && err.contains("one file is one clip")
            && err.contains("data/training/leak/a.wav")
            && err.contains("data/testing/leak/a.wav"),
        "a clip in two splits through a linked folder is refused, both paths named",
    );
    b.check(&o, dir.names("out").is_empty(), "nothing is written");
}

#[test]
fn split_and_label_names_cannot_be_temporary_names_paths_or_escapes() {
    let dir = scenario(&["clips/x.wav", "clips/y.wav"]);
    dir.create(
        "m.csv",
        "path,label,split\nclips/x.wav,leak,training\nclips/y.wav,quiet,.x.h5.partial-99999999-a\n",
    );
    let mut b = melctl_build(&dir, &["--manifest", "m.csv", "-o", "out"]);
    let o = b.output();
    b.check(
        &o,
        !o.status.success() && text(&o.stderr).contains("line 3: the split"),
        "a split in the temporary-file form is refused with its line",
    );
    b.check(&o, dir.names("out").is_empty(), "nothing is written");
    dir.create(
        "m.csv",
        "path,label,split\nclips/x.wav,leak,training\nclips/y.wav,quiet,training\n",
    );
    for (labels, line) in [
        ("leak\nquiet\n../../evil\n", "line 3"),
        ("leak\n\u{1b}[2J\u{1b}[31mquiet\n", "line 2"),
        ("leak\nquiet\n.hidden\n", "line 3"),
    ] {
        dir.create("labels.txt", labels);
        let mut b = melctl_build(
            &dir,
            &["--manifest", "m.csv", "--labels", "labels.txt", "-o", "out"],
        );
        let o = b.output();
        let err = text(&o.stderr);
        b.check(
            &o,
            !o.status.success()
                && err.contains("labels.txt")
                && err.contains(line)
                && !err.contains('\u{1b}'),
            &format!("{labels:?}: refused naming the file and line, nothing raw printed"),
        );
        b.check(&o, dir.names("out").is_empty(), "nothing is written");
    }
}

#[test]
fn manifest_config_and_labels_are_read_bounded_and_never_block() {
    let dir = scenario(&["data/training/leak/a.wav", "data/training/quiet/b.wav"]);
    let mut b = melctl_build(&dir, &["--manifest", "/dev/zero", "-o", "out"]);
    let o = within(&mut b, 20);
    let err = text(&o.stderr);
    b.check(
        &o,
        !o.status.success() && err.contains("/dev/zero") && err.contains("character device"),
        "/dev/zero is refused at once, named",
    );
    mkfifo(&dir.join("fifo.csv"));
    mkfifo(&dir.join("fifo.toml"));
    mkfifo(&dir.join("fifo.txt"));
    for args in [
        &["--manifest", "fifo.csv", "-o", "out"][..],
        &["-i", "data", "--labels", "fifo.txt", "-o", "out"][..],
    ] {
        let mut b = melctl_build(&dir, args);
        let o = within(&mut b, 20);
        b.check(
            &o,
            !o.status.success()
                && text(&o.stderr).contains("fifo.")
                && text(&o.stderr).contains("FIFO"),
            "a FIFO is refused at once, named",
        );
    }
    let mut b = dir.melctl();
    b.args(["build", "--config", "fifo.toml", "-i", "data", "-o", "out"]);
    let o = within(&mut b, 20);
    let err = text(&o.stderr);
    b.check(
        &o,
        !o.status.success()
            && err.contains("fifo.toml")
            && err.contains("FIFO")
            && err.trim().lines().count() == 1,
        "a FIFO configuration is refused at once, in one line naming it",
    );
}

/// Every container the decoder reads is picked up by the folder scan, and an audio format
/// it refuses is a named, counted skip: `.m4a` and `.caf` class folders were ignored as
/// "not an audio file", so the class vanished from the label map with exit 0 even under
/// `--strict` (issue 22 attack round).
#[test]
fn every_format_the_decoder_reads_is_built_from_folders_and_foreign_audio_is_counted() {
    let dir = scenario(&["data/all/a/x.wav", "data/all/c/z.wav"]);
    let corpus = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/corpus");
    for (from, to) in [
        ("alac.m4a", "data/all/b/p.m4a"),
        ("clip.caf", "data/all/b/q.caf"),
        ("adts.aac", "data/all/b/r.aac"),
        ("flac.mka", "data/all/b/s.mka"),
        ("pcm16.wav", "data/all/b/u.bwf"),
        ("clip.opus", "data/all/c/t.opus"),
    ] {
        std::fs::create_dir_all(dir.join(to).parent().unwrap()).unwrap();
        std::fs::copy(corpus.join(from), dir.join(to)).unwrap();
    }
    let mut strict = melctl_build(&dir, &["-i", "data", "-o", "out", "--strict"]);
    let o = strict.expect_code(3);
    let err = text(&o.stderr);
    strict.check(
        &o,
        err.contains("--strict: 1 file was skipped"),
        "only the Opus file is skipped",
    );
    let all = format!("{}{err}", text(&o.stdout));
    strict.check(
        &o,
        all.contains("t.opus") && all.contains("Opus"),
        "the Opus file is named with its codec",
    );
    let names = dir.program("python3").args([
        "-c",
        "import h5py; f = h5py.File('out/all.h5'); print(list(f.attrs['label_names']), len(f['label']))",
    ]).stdout();
    strict.check(
        &o,
        names.trim() == "['a', 'b', 'c'] 7",
        &format!("three classes, seven clips: {names}"),
    );
}

/// `--split-ratio` and `--seed` split a manifest without a split column; given where they
/// cannot apply (folders, or a manifest naming its splits) they are refused, not ignored
/// (exit 0 with the flags silently dropped, issue 22 attack round).
#[test]
fn split_flags_that_cannot_apply_are_refused_not_ignored() {
    let dir = scenario(&["in/training/leak/x.wav", "in/training/quiet/y.wav"]);
    // Folders that name their splits refuse ratios and a seed (a ROOT/{class} tree takes
    // them); --group-by names a manifest column, so it is a usage error with folders.
    for flag in [&["--split-ratio", "a=0.5,b=0.5"][..], &["--seed", "9"]] {
        let mut b = melctl_build(&dir, &[&["-i", "in", "-o", "out"][..], flag].concat());
        let o = b.output();
        b.check(
            &o,
            o.status.code() == Some(1)
                && text(&o.stderr).contains("first-level folders name the splits"),
            &format!("{flag:?} with split folders is refused"),
        );
    }
    let mut b = melctl_build(&dir, &["-i", "in", "-o", "out", "--group-by", "speaker"]);
    let o = b.output();
    b.check(
        &o,
        o.status.code() == Some(2) && text(&o.stderr).contains("cannot be used with"),
        "--group-by with folders is a usage error",
    );
    dir.create(
        "m.csv",
        "path,label,split\nin/training/leak/x.wav,leak,training\nin/training/quiet/y.wav,quiet,training\n",
    );
    let mut b = melctl_build(&dir, &["--manifest", "m.csv", "--seed", "3", "-o", "out"]);
    let o = b.output();
    b.check(
        &o,
        o.status.code() == Some(1) && text(&o.stderr).contains("do not apply"),
        "a manifest naming its splits refuses a seed",
    );
    b.check(&o, dir.names("out").is_empty(), "nothing is written");
    let mut b = melctl_build(&dir, &["--manifest", "m.csv", "-o", "out"]);
    let o = b.output();
    b.check(&o, o.status.success(), "without the flags it builds");
}

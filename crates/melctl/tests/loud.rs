//! Failing loudly and clearly: a closed stdout ends output quietly, a failed write to stdout
//! or stderr is an error with its own exit status (never a panic), and bounds on what a
//! typo could make melctl do.

mod util;

use std::path::Path;
use std::process::Stdio;

use util::Dir;

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

#[test]
fn a_closed_stdout_ends_output_quietly() {
    let dir = Dir::demo(10);
    dir.melctl()
        .args(["build", "--input", "data", "--output", "out", "-q"])
        .expect_code(0);
    for args in [
        vec!["inspect", "out/training.h5"],
        vec!["inspect", "--json", "out/training.h5"],
        vec!["config", "--preset", "leak-4k"],
        vec!["devices"],
        // A picture to a closed stdout (`show X -o - | head -c 8`) said "Broken pipe", 1.
        vec!["show", "out/training.h5", "-o", "-"],
    ] {
        let mut child = dir
            .melctl()
            .args(&args)
            .command()
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        // The reader goes away before melctl writes a byte: `| head -0`.
        drop(child.stdout.take());
        let o = child.wait_with_output().unwrap();
        let err = text(&o.stderr);
        assert!(!err.contains("panicked"), "{args:?}: {err}");
        assert_eq!(o.status.code(), Some(0), "{args:?}: {err}");
    }
}

#[test]
fn a_failed_write_to_stdout_or_stderr_is_an_error_not_a_panic() {
    let dir = Dir::demo(10);
    // A full device of the test's own (as /dev/full is).
    let Some(device) = dir.device("full", 1, 7) else {
        return;
    };
    let full = || {
        std::fs::OpenOptions::new()
            .write(true)
            .open(&device)
            .unwrap()
    };
    // The summary goes to stdout: the build publishes, then says it could not report.
    let o = dir
        .melctl()
        .args(["build", "--input", "data", "--output", "out"])
        .command()
        .stdout(full())
        .output()
        .unwrap();
    let err = text(&o.stderr);
    assert!(!err.contains("panicked"), "{err}");
    assert_eq!(o.status.code(), Some(74), "{err}");
    assert!(
        err.contains("cannot write to standard output: No space left on device"),
        "{err}"
    );
    assert!(dir.join("out/training.h5").exists());
    // stderr full: nothing can be said, but the status says it.
    let o = dir
        .melctl()
        .args(["build", "--input", "data", "--output", "out2", "-v"])
        .command()
        .stderr(full())
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(74), "{}", text(&o.stdout));
    // Help, the version and the configuration to a full stdout: clap's own printing too.
    for args in [vec!["--help"], vec!["--version"], vec!["config"]] {
        let o = dir
            .melctl()
            .args(&args)
            .command()
            .stdout(full())
            .output()
            .unwrap();
        let err = text(&o.stderr);
        assert_eq!(o.status.code(), Some(74), "{args:?}: {err}");
        assert!(err.contains("No space left on device"), "{args:?}: {err}");
    }
    // inspect's table to a full stdout.
    let o = dir
        .melctl()
        .args(["inspect", "out/training.h5"])
        .command()
        .stdout(full())
        .output()
        .unwrap();
    let err = text(&o.stderr);
    assert!(!err.contains("panicked"), "{err}");
    assert_eq!(o.status.code(), Some(74), "{err}");
}

#[test]
fn names_that_would_steer_the_terminal_are_printed_escaped() {
    let dir = Dir::demo(10);
    // A hidden file is listed, not built: its name reaches the summary.
    dir.create("data/training/leak/.\u{1b}[2J.wav", "RIFF");
    let o = dir
        .melctl()
        .args(["build", "--input", "data", "--output", "out"])
        .output();
    let all = format!("{}{}", text(&o.stdout), text(&o.stderr));
    assert!(!all.contains('\u{1b}'), "{all:?}");
    assert!(all.contains("\\u{1b}[2J.wav"), "{all}");
}

/// A cache folder that is the output folder: the build took the output folder's lock, then
/// waited for the same lock for the cache, for ever (issue 22's second attack round).
#[test]
fn a_cache_folder_that_is_the_output_folder_is_refused_not_a_hang() {
    let dir = Dir::demo(10);
    let mut child = dir
        .melctl()
        .args([
            "build", "--input", "data", "--output", "out", "--loader", "memmap",
        ])
        .args(["--cache-dir", "out"])
        .command()
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let started = std::time::Instant::now();
    while child.try_wait().unwrap().is_none() {
        if started.elapsed() > std::time::Duration::from_secs(60) {
            let _ = child.kill();
            panic!("the build hung for 60 s");
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let o = child.wait_with_output().unwrap();
    let err = text(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(
        err.contains("this process already holds this folder's lock"),
        "{err}"
    );
}

/// A report that cannot be written was reported instead of the build's own failure (the
/// file that stopped an `--on-error fail` build went unnamed).
#[test]
fn a_failed_build_is_named_even_when_its_report_cannot_be_written() {
    let dir = Dir::demo(10);
    dir.create("data/training/leak/zz-broken.wav", "RIFF....WAVEjunk");
    let Some(full) = dir.device("full", 1, 7) else {
        return;
    };
    let o = dir
        .melctl()
        .args([
            "build",
            "--input",
            "data",
            "--output",
            "out",
            "--on-error",
            "fail",
        ])
        .arg("--report")
        .arg(&full)
        .output();
    let err = text(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(err.contains("zz-broken.wav"), "{err}");
    assert!(err.contains("cannot write the report"), "{err}");
}

/// Messages that state the real cause (issue 22 attack round): a cache folder that is a
/// device or a file was "File exists"; an output folder given to `inspect` was
/// "meta.json: cannot read".
#[test]
fn misleading_messages_name_the_real_cause() {
    let dir = Dir::demo(10);
    dir.create("afile", b"x");
    let null = dir.device("null", 1, 3);
    let caches = null.iter().map(|p| p.to_str().unwrap()).chain(["afile"]);
    for cache in caches {
        let o = dir
            .melctl()
            .args(["build", "-i", "data", "-o", "out", "--loader", "memmap"])
            .args(["--cache-dir", cache, "-q"])
            .output();
        let err = text(&o.stderr);
        assert_eq!(o.status.code(), Some(1), "{err}");
        assert!(
            err.contains("the cache folder is") && err.contains("not a folder"),
            "{cache}: {err}"
        );
    }
    dir.melctl()
        .args(["build", "-i", "data", "-o", "out", "-q"])
        .expect_code(0);
    let o = dir.melctl().args(["inspect", "out"]).output();
    let err = text(&o.stderr);
    assert!(
        err.contains("no npy split") && err.contains("training.h5"),
        "{err}"
    );
}

/// A class-per-folder tree one level too deep (`ROOT/dog/day1/*.wav`) builds splits `dog`
/// and `cat`: valid, so built, but said (it was silent); a usual tree gets no note.
#[test]
fn splits_named_like_classes_are_pointed_out() {
    let dir = Dir::demo(10);
    for (from, to) in [
        ("data/training/leak", "odd/dog/day1"),
        ("data/testing/leak", "odd/cat/day2"),
    ] {
        std::fs::create_dir_all(dir.join(to).parent().unwrap()).unwrap();
        std::fs::rename(dir.join(from), dir.join(to)).unwrap();
    }
    let o = dir
        .melctl()
        .args(["build", "-i", "odd", "-o", "o1", "-q"])
        .expect_code(0);
    let err = text(&o.stderr);
    assert!(
        err.contains("note: the folders cat, dog are read as splits"),
        "{err}"
    );
    let o = dir
        .melctl()
        .args(["build", "-i", "data", "-o", "o2", "-q"])
        .expect_code(0);
    assert!(!text(&o.stderr).contains("note:"), "{}", text(&o.stderr));
}

/// Files that make the decoding library panic: a CAF whose `desc` chunk says 2^32 - 1
/// bytes per packet, and an AIFF of 32767 channels (symphonia multiplies past u32 on
/// both). From the corpus's own clips, patched.
fn panicking_files(dir: &Dir) {
    let corpus = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/corpus");
    let mut caf = std::fs::read(corpus.join("clip.caf")).unwrap();
    assert_eq!(&caf[8..12], b"desc");
    caf[36..40].copy_from_slice(&[0xff; 4]);
    dir.create("data/a/bpp.caf", &caf);
    let mut aiff = b"FORM\0\0\x3e\xd0AIFFCOMM\0\0\0\x12\x7f\xff\0\0\x0f\xa0\0\x20".to_vec();
    aiff.extend_from_slice(&[0x40, 0x0b, 0xfa, 0, 0, 0, 0, 0, 0, 0]);
    aiff.extend_from_slice(b"SSND\0\0\x3e\x88\0\0\0\0\0\0\0\0");
    aiff.resize(16088, 0);
    dir.create("data/a/channels.aiff", &aiff);
}

/// A panic inside a decoder printed its text (a library's source line) and, with
/// RUST_BACKTRACE set, a whole backtrace before the file's own one-line error: the file is
/// named once, in melctl's words, in a build and in a dry run.
#[test]
fn a_decoder_panic_is_the_files_one_line_error_with_no_panic_text() {
    let dir = Dir::new();
    panicking_files(&dir);
    dir.wav("data/a/ok.wav", &[1000; 4096], 4096);
    for dry in [false, true] {
        let mut build = dir.melctl();
        build.args(["build", "-i", "data", "-o", "out"]);
        build.env("RUST_BACKTRACE", "1");
        if dry {
            build.arg("--dry-run");
        }
        let o = build.output();
        let stderr = text(&o.stderr);
        let all = text(&o.stdout) + &stderr;
        build.check(&o, o.status.success(), "the good file is built");
        for (name, what) in [
            ("bpp.caf", "the decoder failed on this file"),
            ("channels.aiff", "the decoder failed on this file"),
        ] {
            let lines: Vec<&str> = all.lines().filter(|l| l.contains(name)).collect();
            build.check(
                &o,
                lines.len() == 1 && lines[0].contains(what),
                &format!("{name} named once, {what:?}"),
            );
        }
        for word in ["panicked", "stack backtrace", "symphonia", "overflow"] {
            build.check(&o, !all.contains(word), &format!("no {word:?}"));
        }
    }
}

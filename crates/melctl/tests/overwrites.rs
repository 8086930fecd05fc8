//! Issue 22, group D: a build (and `show`) never overwrites what it must not. Every
//! output path is checked before any work: an input, the manifest, the configuration,
//! another output of the run, or an existing device, FIFO or folder is refused by name;
//! a FIFO or device asked for on purpose is written directly, never replaced by rename.

mod util;

use std::os::unix::fs::FileTypeExt;
use std::path::Path;
use std::time::Duration;

use util::{Dir, SHORT_CLIPS, TestCommand};

/// `melctl build` of `data/` into `out` with the short-clip config and `extra`.
fn build(dir: &Dir, extra: &[&str]) -> TestCommand {
    let mut c = dir.melctl();
    c.args(["build", "-i", "data", "-o", "out", "--config", "short.toml"])
        .args(["--backend", "cpu"])
        .args(extra);
    c
}

/// The first WAV of the training split.
fn an_input(dir: &Dir) -> String {
    let mut names = dir.names("data/training/leak");
    names.sort();
    format!("data/training/leak/{}", names[0])
}

fn mkfifo(path: &Path) {
    let c = std::ffi::CString::new(path.to_str().unwrap()).unwrap();
    // SAFETY: a valid NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o644) }, 0);
}

/// Runs `cmd`, which must fail, and returns its stderr; fails the test if it took long
/// (the refusal comes before any work).
fn refused(cmd: &mut TestCommand) -> String {
    let start = std::time::Instant::now();
    let err = cmd.stderr_of_failure();
    assert!(
        start.elapsed() < Duration::from_secs(20),
        "refused only after {:?}",
        start.elapsed()
    );
    err
}

#[test]
fn a_report_never_replaces_an_output_an_input_or_the_configuration() {
    let dir = Dir::demo(6);
    build(&dir, &[]).stdout();
    let published = std::fs::read(dir.join("out/training.h5")).unwrap();
    let wav = an_input(&dir);
    let wav_bytes = std::fs::read(dir.join(&wav)).unwrap();
    for (report, says) in [
        ("out/training.h5", "the output of split training"),
        ("out/./../out/training.h5", "the output of split training"),
        (wav.as_str(), "overwrite an input of this build"),
        ("short.toml", "overwrite the configuration file"),
        ("out/melctl-build.json", "the build record"),
    ] {
        let err = refused(&mut build(&dir, &["--report", report]));
        assert!(
            err.contains(says) && err.contains("the report"),
            "--report {report}: {err}"
        );
    }
    assert_eq!(
        std::fs::read(dir.join("out/training.h5")).unwrap(),
        published
    );
    assert_eq!(std::fs::read(dir.join(&wav)).unwrap(), wav_bytes);
    assert_eq!(
        std::fs::read_to_string(dir.join("short.toml")).unwrap(),
        SHORT_CLIPS
    );
    // The manifest and the label map are inputs too.
    let rel = wav.trim_start_matches("data/");
    dir.create(
        "clips.csv",
        format!("path,label,split\ndata/{rel},leak,t\n").as_bytes(),
    );
    dir.create("labels.txt", "leak\nno_leak\n");
    for (report, says) in [
        ("clips.csv", "overwrite the manifest"),
        ("labels.txt", "overwrite the label map"),
    ] {
        let mut c = dir.melctl();
        c.args(["build", "--manifest", "clips.csv", "-o", "m"])
            .args(["--labels", "labels.txt", "--backend", "cpu"])
            .args(["--report", report]);
        let err = refused(&mut c);
        assert!(err.contains(says), "--report {report}: {err}");
    }
    assert!(!dir.join("m").exists(), "nothing was built");
}

#[test]
fn show_never_replaces_the_output_it_reads() {
    let dir = Dir::demo(4);
    build(&dir, &[]).stdout();
    let before = std::fs::read(dir.join("out/training.h5")).unwrap();
    let err = dir
        .melctl()
        .args(["show", "out/training.h5", "-o", "out/training.h5"])
        .stderr_of_failure();
    assert!(err.contains("must end in .png"), "{err}");
    assert_eq!(std::fs::read(dir.join("out/training.h5")).unwrap(), before);
    // An npy output's files are the output too.
    build(&dir, &["--sink", "npy", "--split", "training"]).stdout();
    let mel = std::fs::read(dir.join("out/training.npy.d/mel.npy")).unwrap();
    let err = dir
        .melctl()
        .args([
            "show",
            "out/training.npy.d",
            "-o",
            "out/training.npy.d/mel.npy",
        ])
        .stderr_of_failure();
    assert!(err.contains("must end in .png"), "{err}");
    assert_eq!(
        std::fs::read(dir.join("out/training.npy.d/mel.npy")).unwrap(),
        mel
    );
}

#[test]
fn a_fifo_or_a_device_is_written_directly_and_stays_what_it_was() {
    let dir = Dir::demo(4);
    // A FIFO with a reader: the report arrives through it, and it is still a FIFO.
    let fifo = dir.join("report.fifo");
    mkfifo(&fifo);
    let reader = {
        let fifo = fifo.clone();
        std::thread::spawn(move || std::fs::read_to_string(fifo).unwrap())
    };
    build(&dir, &["--report", "report.fifo"]).stdout();
    // Checked before waiting for the reader, which a replaced FIFO leaves blocked.
    assert!(
        std::fs::metadata(&fifo).unwrap().file_type().is_fifo(),
        "the FIFO was replaced by a regular file"
    );
    let text = reader.join().unwrap();
    assert!(text.contains("\"published\": true"), "{text}");
    // `show -o` into a FIFO too.
    let reader = {
        let fifo = fifo.clone();
        std::thread::spawn(move || std::fs::read(fifo).unwrap())
    };
    dir.melctl()
        .args(["show", "out/training.h5", "-o", "report.fifo"])
        .stdout();
    assert!(std::fs::metadata(&fifo).unwrap().file_type().is_fifo());
    assert!(reader.join().unwrap().starts_with(b"\x89PNG"));
    // A character device (as /dev/null is): written to, never replaced. Making one
    // needs root (CI runs as root).
    let null = dir.join("null");
    let c = std::ffi::CString::new(null.to_str().unwrap()).unwrap();
    // SAFETY: a valid path; device 1:3 is the null device.
    let made = unsafe { libc::mknod(c.as_ptr(), libc::S_IFCHR | 0o666, libc::makedev(1, 3)) };
    if made != 0 {
        println!("skipped the device: mknod needs root");
        return;
    }
    build(&dir, &["--report", "null"]).stdout();
    assert!(
        std::fs::metadata(&null)
            .unwrap()
            .file_type()
            .is_char_device(),
        "the device was replaced"
    );
}

#[test]
fn an_output_path_holding_something_else_is_refused_before_any_work() {
    let dir = Dir::demo(9);
    std::fs::create_dir(dir.join("out")).unwrap();
    mkfifo(&dir.join("out/training.h5"));
    let err = refused(&mut build(&dir, &[]));
    assert!(
        err.contains("out/training.h5") && err.contains("a FIFO is there"),
        "{err}"
    );
    assert!(
        std::fs::metadata(dir.join("out/training.h5"))
            .unwrap()
            .file_type()
            .is_fifo()
    );
    assert_eq!(dir.names("out"), ["training.h5"], "nothing was built");
    // A folder where the report goes, a file where an npy folder goes.
    std::fs::create_dir(dir.join("r.json")).unwrap();
    let err = refused(&mut build(
        &dir,
        &["--split", "testing", "--report", "r.json"],
    ));
    assert!(err.contains("a folder is there"), "{err}");
    dir.create("out/testing.npy.d", "not a folder");
    let err = refused(&mut build(&dir, &["--split", "testing", "--sink", "npy"]));
    assert!(
        err.contains("testing.npy.d") && err.contains("a regular file is there"),
        "{err}"
    );
}

#[test]
fn a_report_to_this_process_stdout_is_written_to_it_not_renamed_over_the_link() {
    // `--report /dev/stdout` with stdout redirected to a file: a rename would replace the
    // system's /dev/stdout link with a regular file (as root). The same link, made in the
    // test's folder, must stay a link, and the report reach the redirected stdout.
    let dir = Dir::demo(4);
    let link = dir.join("stdout-link");
    std::os::unix::fs::symlink("/proc/self/fd/1", &link).unwrap();
    let captured = std::fs::File::create(dir.join("captured.txt")).unwrap();
    let mut c = build(&dir, &["--report", "stdout-link"]);
    let o = c.command().stdout(captured).output().unwrap();
    c.check(&o, o.status.success(), "the build succeeds");
    assert!(
        std::fs::symlink_metadata(&link)
            .unwrap()
            .file_type()
            .is_symlink(),
        "the link was replaced"
    );
    let text = std::fs::read_to_string(dir.join("captured.txt")).unwrap();
    assert!(text.contains("\"published\": true"), "{text}");
}

/// A build into another build's npy split folder, or a folder found inside one, is
/// refused: that split folder is replaced whole, and the nested dataset was deleted by the
/// next rebuild without a word (issue 22 attack round).
#[test]
fn a_split_folder_replaced_whole_never_takes_another_output_with_it() {
    let dir = Dir::demo(4);
    build(&dir, &["--sink", "npy"]).stdout();
    let mut nested = dir.melctl();
    nested
        .args(["build", "-i", "data", "-o", "out/training.npy.d"])
        .args([
            "--config",
            "short.toml",
            "--backend",
            "cpu",
            "--sink",
            "npy",
        ]);
    let err = refused(&mut nested);
    assert!(
        err.contains("inside") && err.contains("training.npy.d, a split folder"),
        "{err}"
    );
    assert_eq!(
        dir.names("out/training.npy.d"),
        ["label.npy", "mel.npy", "meta.json"]
    );
    // Nor through a link to it, with folders still to be made below (attack round 4).
    std::fs::create_dir(dir.join("other")).unwrap();
    std::os::unix::fs::symlink("../out/training.npy.d", dir.join("other/lnk")).unwrap();
    let mut linked = dir.melctl();
    linked
        .args(["build", "-i", "data", "-o", "other/lnk/deeper"])
        .args(["--config", "short.toml", "--backend", "cpu"]);
    let err = refused(&mut linked);
    assert!(err.contains("a split folder"), "{err}");
    assert_eq!(
        dir.names("out/training.npy.d"),
        ["label.npy", "mel.npy", "meta.json"]
    );
    // A folder someone put there is not deleted with the split: the rebuild is refused.
    std::fs::create_dir_all(dir.join("out/training.npy.d/mine")).unwrap();
    std::fs::write(dir.join("out/training.npy.d/mine/notes.txt"), b"keep").unwrap();
    let err = refused(&mut build(&dir, &["--sink", "npy"]));
    assert!(
        err.contains("holds the folder") && err.contains("mine"),
        "{err}"
    );
    assert_eq!(
        std::fs::read(dir.join("out/training.npy.d/mine/notes.txt")).unwrap(),
        b"keep"
    );
}

/// Without HOME or XDG_CACHE_HOME the decoded-audio cache goes to this user's private
/// folder in the temporary folder, never a shared predictable one another user could make
/// first (it was `/tmp/melctl-cache`); a folder at that name that is not private is
/// refused.
#[test]
fn the_fallback_cache_folder_is_private_to_the_user() {
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    let dir = Dir::demo(4);
    let tmp = dir.join("tmp");
    std::fs::create_dir(&tmp).unwrap();
    // SAFETY: getuid has no preconditions.
    let uid = unsafe { libc::getuid() };
    let cache = tmp.join(format!("melctl-cache-{uid}"));
    let mut c = dir.melctl();
    c.args(["build", "-i", "data", "-o", "out", "--config", "short.toml"])
        .args(["--backend", "cpu", "--loader", "memmap", "-q"]);
    c.command()
        .env_remove("HOME")
        .env_remove("XDG_CACHE_HOME")
        .env("TMPDIR", &tmp);
    c.expect_code(0);
    let m = std::fs::metadata(&cache).unwrap();
    assert!(m.is_dir() && m.mode() & 0o777 == 0o700, "{:o}", m.mode());
    assert_eq!(m.uid(), uid);
    assert!(
        std::fs::read_dir(&cache).unwrap().count() > 0,
        "the cache is there"
    );
    std::fs::set_permissions(&cache, std::fs::Permissions::from_mode(0o777)).unwrap();
    let err = refused(&mut c);
    assert!(err.contains("not a private folder of this user"), "{err}");
}

/// A build whose every file of a split failed (the files emptied, a mount gone) exited 0
/// and replaced a good dataset with 0-clip splits.
#[test]
fn a_split_none_of_whose_files_decode_is_not_published_over_a_good_one() {
    let dir = Dir::demo(12);
    build(&dir, &["-q"]).stdout();
    let before = std::fs::read(dir.join("out/training.h5")).unwrap();
    for class in dir.names("data/training") {
        for f in dir.names(format!("data/training/{class}")) {
            std::fs::write(dir.join(format!("data/training/{class}/{f}")), b"").unwrap();
        }
    }
    let err = refused(&mut build(&dir, &["-q"]));
    assert!(
        err.contains("split training")
            && err.contains("were left out")
            && err.contains("nothing was published"),
        "{err}"
    );
    assert_eq!(std::fs::read(dir.join("out/training.h5")).unwrap(), before);
    // The other splits, still readable, are not published alone either (one build).
    assert!(melkit::read::Split::open(dir.join("out/testing.h5")).is_ok());
}

/// An npy split folder or a resume journal holding someone's file was deleted whole by
/// the next build without a word (a folder inside was refused, a file was not); a file
/// at the journal's path made every later build fail, and --report could put one there.
#[test]
fn folders_replaced_whole_that_hold_someones_files_are_refused() {
    let dir = Dir::demo(9);
    dir.create("out/testing.npy.d/notes.txt", "mine");
    let err = refused(&mut build(&dir, &["-q", "--sink", "npy"]));
    assert!(
        err.contains("notes.txt") && err.contains("never writes there"),
        "{err}"
    );
    assert!(dir.join("out/testing.npy.d/notes.txt").is_file());
    std::fs::remove_dir_all(dir.join("out/testing.npy.d")).unwrap();

    dir.create("out/.training.resume/a.txt", "mine");
    let err = refused(&mut build(&dir, &["-q"]));
    assert!(
        err.contains("a.txt") && err.contains("resume journal"),
        "{err}"
    );
    assert!(dir.join("out/.training.resume/a.txt").is_file());
    std::fs::remove_dir_all(dir.join("out/.training.resume")).unwrap();

    let err = refused(&mut build(
        &dir,
        &["-q", "--report", "out/.training.resume"],
    ));
    assert!(err.contains("resume journal"), "{err}");
    dir.create("out/.training.resume", "a file");
    let err = refused(&mut build(&dir, &["-q"]));
    assert!(err.contains("a regular file is there"), "{err}");
    std::fs::remove_file(dir.join("out/.training.resume")).unwrap();
    // melctl's own files are replaced as before.
    build(&dir, &["-q", "--sink", "npy"]).stdout();
    build(&dir, &["-q", "--sink", "npy"]).stdout();
}

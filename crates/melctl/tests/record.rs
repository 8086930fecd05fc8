//! The build record vouches for exactly one build's splits: a whole build never vouches
//! for a split an earlier build left in the folder, and a `--split` build never leaves
//! beside what it builds a split that means other things by the same numbers (another
//! label map or mel configuration). Both once ended in exit 0 with a folder that read as
//! one dataset (issue 22's second attack round).

mod util;

use util::{Dir, SHORT_CLIPS};

fn build(dir: &Dir, extra: &[&str]) -> util::TestCommand {
    let mut c = dir.melctl();
    c.args(["build", "-i", "data", "-o", "out", "--config", "short.toml"])
        .args(["--backend", "cpu"])
        .args(extra);
    c
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

#[test]
fn a_whole_build_does_not_vouch_for_a_split_it_did_not_build() {
    let dir = Dir::demo(30);
    build(&dir, &["-q"]).expect_code(0);
    // The testing clips move into training, and testing is gone from the input.
    for e in walk(&dir.join("data/testing")) {
        let rel = e.strip_prefix(dir.join("data/testing")).unwrap();
        let to = dir.join("data/training").join(rel);
        std::fs::rename(
            &e,
            to.with_file_name(format!(
                "moved-{}",
                to.file_name().unwrap().to_str().unwrap()
            )),
        )
        .unwrap();
    }
    std::fs::remove_dir_all(dir.join("data/testing")).unwrap();
    let o = build(&dir, &["-q"]).expect_code(0);
    assert!(
        text(&o.stderr).contains("testing.h5 is left from an earlier build"),
        "{}",
        text(&o.stderr)
    );
    // testing.h5 is still in the folder, but no longer part of the build: readers refuse it.
    assert!(dir.join("out/testing.h5").exists());
    let mut inspect = dir.melctl();
    inspect.args(["inspect", "out/testing.h5"]);
    let o = inspect.output();
    inspect.check(
        &o,
        !o.status.success() && text(&o.stderr).contains("testing.h5"),
        "the stale testing split is refused",
    );
    let mut ok = dir.melctl();
    ok.args(["inspect", "out/training.h5"]).expect_code(0);
}

#[test]
fn a_split_build_refuses_to_leave_splits_of_another_label_map_or_configuration() {
    let dir = Dir::demo(30);
    build(&dir, &["-q"]).expect_code(0);
    let before = std::fs::read(dir.join("out/training.h5")).unwrap();
    // A class only training has: class 0 would be `aaa` in training, `leak` elsewhere.
    let wav = walk(&dir.join("data/training/leak")).remove(0);
    std::fs::create_dir_all(dir.join("data/training/aaa")).unwrap();
    std::fs::copy(&wav, dir.join("data/training/aaa/x.wav")).unwrap();
    let mut c = build(&dir, &["--split", "training"]);
    let o = c.output();
    let err = text(&o.stderr);
    c.check(
        &o,
        !o.status.success()
            && err.contains("label maps differ")
            && err.contains("--split training"),
        "a --split build with another label map is refused",
    );
    assert_eq!(std::fs::read(dir.join("out/training.h5")).unwrap(), before);
    std::fs::remove_dir_all(dir.join("data/training/aaa")).unwrap();
    // Another mel configuration.
    dir.create("short.toml", format!("{SHORT_CLIPS}[mel]\nn_mels = 16\n"));
    let mut c = build(&dir, &["--split", "training"]);
    let o = c.output();
    let err = text(&o.stderr);
    c.check(
        &o,
        !o.status.success()
            && err.contains("mel configurations differ")
            && err.contains("mel.n_mels"),
        "a --split build with another mel configuration is refused",
    );
    assert_eq!(std::fs::read(dir.join("out/training.h5")).unwrap(), before);
    // The same classes and settings: allowed.
    dir.create("short.toml", SHORT_CLIPS);
    build(&dir, &["--split", "training", "-q"]).expect_code(0);
}

/// Every file below `dir`, sorted.
fn walk(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut files = Vec::new();
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        if e.file_type().unwrap().is_dir() {
            files.extend(walk(&e.path()));
        } else {
            files.push(e.path());
        }
    }
    files.sort();
    files
}

/// `show -o` over the folder's build record or a sibling split replaced it with a picture
/// (exit 0), and every split then failed to open.
#[test]
fn show_never_writes_over_the_build_record_or_another_split() {
    let dir = Dir::demo(30);
    build(&dir, &["-q"]).expect_code(0);
    for target in ["out/melctl-build.json", "out/validation.h5"] {
        let before = std::fs::read(dir.join(target)).unwrap();
        let mut show = dir.melctl();
        show.args(["show", "out/training.h5", "-o", target]);
        let o = show.output();
        show.check(
            &o,
            !o.status.success(),
            &format!("show -o {target} is refused"),
        );
        assert_eq!(std::fs::read(dir.join(target)).unwrap(), before, "{target}");
    }
    dir.melctl()
        .args(["inspect", "out/validation.h5"])
        .expect_code(0);
    // Nor over another folder's split or an input clip (issue 22 attack round: replaced
    // by a PNG with exit 0): a picture goes only to a .png name.
    std::fs::create_dir_all(dir.join("other")).unwrap();
    std::fs::copy(
        dir.join("out/validation.h5"),
        dir.join("other/validation.h5"),
    )
    .unwrap();
    let clip = dir
        .names("data/training/leak")
        .into_iter()
        .next()
        .expect("a clip");
    let clip = format!("data/training/leak/{clip}");
    for target in ["other/validation.h5", clip.as_str()] {
        let before = std::fs::read(dir.join(target)).unwrap();
        let mut show = dir.melctl();
        show.args(["show", "out/training.h5", "-o", target]);
        let o = show.output();
        show.check(
            &o,
            !o.status.success() && String::from_utf8_lossy(&o.stderr).contains("must end in .png"),
            &format!("show -o {target} is refused"),
        );
        assert_eq!(std::fs::read(dir.join(target)).unwrap(), before, "{target}");
    }
    dir.melctl()
        .args(["show", "out/training.h5", "-o", "pic.PNG"])
        .expect_code(0);
    assert!(dir.join("pic.PNG").is_file());
}

/// The same input built with another `--batch` stores the same statistics, bit for bit
/// (they differed by ~5e-15: the accumulator's blocks followed the batches).
#[test]
fn statistics_do_not_depend_on_the_batch_size() {
    let dir = Dir::demo(30);
    let stats = |out: &str, batch: &str| {
        dir.melctl()
            .args(["build", "-i", "data", "-o", out, "--config", "short.toml"])
            .args(["--backend", "cpu", "-q", "--batch", batch])
            .expect_code(0);
        let s = melkit::read::Split::open_in(dir.join(out), "training").unwrap();
        let st = s.stored_stats().expect("stored statistics").clone();
        (
            st.mean.iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
            st.std.iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
        )
    };
    assert_eq!(stats("a", "64"), stats("b", "3"));
}

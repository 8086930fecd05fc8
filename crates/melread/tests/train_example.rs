//! The `train` example on small demo datasets of both presets: a few steps, the loss
//! falls, validation and testing are evaluated per file, and the output ends with the
//! promised line.

mod common;

#[path = "../examples/train.rs"]
#[allow(dead_code)]
mod train;

use common::{CLASSES, Out, build, build_leak, build_with_ids};
use melkit::{Dtype, Preset};

fn run(args: &train::Args) -> (train::Report, String) {
    let mut log = Vec::new();
    let report = train::run(args, &mut log).unwrap();
    let text = String::from_utf8(log).unwrap();
    println!("{text}");
    (report, text)
}

fn last_line_says_testing_accuracy(text: &str, files: usize) {
    let last = text.lines().last().unwrap();
    let rest = last
        .strip_prefix("file-level accuracy on testing: ")
        .unwrap_or_else(|| panic!("last line: {last:?}"));
    let (acc, n) = rest.split_once(' ').unwrap();
    let acc: f64 = acc.parse().unwrap();
    assert!((0.0..=1.0).contains(&acc), "{last}");
    assert_eq!(n, format!("({files} files)"));
    assert_eq!(
        text.matches("file-level accuracy on testing").count(),
        1,
        "exactly one such line"
    );
}

#[test]
fn leak_4k_segments_train_and_the_loss_falls() {
    let t = tempfile::tempdir().unwrap();
    let data = build_leak(
        t.path(),
        Dtype::F16,
        &[("training", 30), ("validation", 10), ("testing", 10)],
    );
    let args = train::Args {
        data,
        epochs: 2,
        batch: Some(128),
        steps: Some(20),
        lr: 2e-3,
        seed: 1,
        workers: Some(2),
        eval_batch: 4096,
        crop: None,
        max_frames: None,
    };
    let (report, text) = run(&args);
    assert_eq!(report.losses.len(), 40);
    assert!(report.losses.iter().all(|l| l.is_finite()));
    let head: f32 = report.losses[..5].iter().sum::<f32>() / 5.0;
    let tail: f32 = report.losses[35..].iter().sum::<f32>() / 5.0;
    assert!(tail < 0.7 * head, "the loss falls: {head} -> {tail}");
    assert_eq!(report.validation.len(), 2);
    assert_eq!(report.validation[1].1.files(), 10);
    assert_eq!(report.testing.files(), 10);
    assert!(
        text.contains("normalisation stored in the output"),
        "{text}"
    );
    last_line_says_testing_accuracy(&text, 10);
}

#[test]
fn speech_16k_whole_spectrograms_from_npy_train() {
    let t = tempfile::tempdir().unwrap();
    let data = build(
        t.path(),
        Preset::Speech16k,
        Dtype::Bf16,
        Out::Npy,
        &[("training", 25), ("validation", 5), ("testing", 5)],
    );
    let args = train::Args {
        data,
        epochs: 3,
        batch: Some(5),
        steps: None,
        lr: 2e-3,
        seed: 1,
        workers: Some(2),
        eval_batch: 64,
        crop: None,
        max_frames: None,
    };
    let (report, text) = run(&args);
    assert_eq!(report.losses.len(), 15);
    let head: f32 = report.losses[..3].iter().sum::<f32>() / 3.0;
    let tail: f32 = report.losses[12..].iter().sum::<f32>() / 3.0;
    assert!(tail < head, "the loss falls: {head} -> {tail}");
    assert!(text.contains("segments of [80, 101] bf16"), "{text}");
    last_line_says_testing_accuracy(&text, 5);
}

fn quick_args(data: std::path::PathBuf) -> train::Args {
    train::Args {
        data,
        epochs: 1,
        batch: Some(5),
        steps: Some(3),
        lr: 2e-3,
        seed: 1,
        workers: Some(2),
        eval_batch: 64,
        crop: None,
        max_frames: None,
    }
}

/// The error `train::run` ends with; a panic if it trained and evaluated to the end.
fn refused(args: &train::Args) -> String {
    let mut log = Vec::new();
    match train::run(args, &mut log) {
        Ok(r) => panic!(
            "trained with {args:?}: testing accuracy {:.3}\n{}",
            r.testing.accuracy(),
            String::from_utf8_lossy(&log)
        ),
        Err(e) => format!("{e:#}"),
    }
}

#[test]
fn options_no_training_can_use_are_refused_naming_the_flag() {
    let t = tempfile::tempdir().unwrap();
    let data = build(
        t.path(),
        Preset::Speech16k,
        Dtype::F16,
        Out::Npy,
        &[("training", 10), ("validation", 5), ("testing", 5)],
    );
    for lr in [f64::NAN, f64::INFINITY, 0.0, -1e-3, 2.0] {
        let e = refused(&train::Args {
            lr,
            ..quick_args(data.clone())
        });
        assert!(e.starts_with(&format!("--lr {lr}: ")), "{e}");
    }
    let base = quick_args(data);
    for (args, flag) in [
        (
            train::Args {
                epochs: 0,
                ..base.clone()
            },
            "--epochs 0",
        ),
        (
            train::Args {
                batch: Some(0),
                ..base.clone()
            },
            "--batch 0",
        ),
        (
            train::Args {
                eval_batch: 0,
                crop: None,
                max_frames: None,
                ..base.clone()
            },
            "--eval-batch 0",
        ),
        (
            train::Args {
                steps: Some(0),
                ..base.clone()
            },
            "--steps 0",
        ),
        (
            train::Args {
                workers: Some(0),
                ..base.clone()
            },
            "--workers 0",
        ),
    ] {
        let e = refused(&args);
        assert!(e.starts_with(flag), "{e}");
    }
}

/// A split with no clips (every file skipped) is refused naming it: train printed
/// "file-level accuracy 0.000 (0 files)".
#[test]
fn an_empty_split_is_refused_naming_it() {
    let t = tempfile::tempdir().unwrap();
    let data = build(
        t.path(),
        Preset::Speech16k,
        Dtype::F16,
        Out::Npy,
        &[("training", 10), ("validation", 5), ("testing", 0)],
    );
    let e = refused(&quick_args(data));
    assert!(
        e.contains("the testing split") && e.contains("holds no clips"),
        "{e}"
    );
}

#[test]
fn splits_with_another_label_map_or_mel_configuration_are_refused() {
    let t = tempfile::tempdir().unwrap();
    // Validation built with the label map reversed: id 0 names the last class.
    let data = build(
        t.path(),
        Preset::Speech16k,
        Dtype::F16,
        Out::Npy,
        &[("training", 10), ("testing", 5)],
    );
    build_with_ids(
        t.path(),
        Preset::Speech16k,
        Dtype::F16,
        Out::Npy,
        &[("validation", 5)],
        &|c| CLASSES.len() - 1 - c,
    );
    let e = refused(&quick_args(data.clone()));
    assert!(
        e.contains("split \"validation\" cannot be used with split \"training\"")
            && e.contains(&format!(
                "class 0 is {:?} in training and {:?} in validation",
                CLASSES[0],
                CLASSES[CLASSES.len() - 1]
            )),
        "{e}"
    );
    // Testing built with another mel configuration (and element type: that alone is
    // allowed): the first difference is named.
    std::fs::remove_dir_all(data.join("validation.npy.d")).unwrap();
    build(
        t.path(),
        Preset::Speech16k,
        Dtype::F16,
        Out::Npy,
        &[("validation", 5)],
    );
    std::fs::remove_dir_all(data.join("testing.npy.d")).unwrap();
    build_leak(t.path(), Dtype::F32, &[("testing", 5)]);
    let e = refused(&quick_args(data));
    assert!(
        e.contains("split \"testing\" cannot be used with split \"training\"")
            && e.contains("their mel configurations differ: audio."),
        "{e}"
    );
}

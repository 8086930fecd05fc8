//! `--precision fast`: the CPU's f32 transform runs, the summary says so, the spec
//! stored with the output records it, its values stay within the fast bound of the exact
//! build's, and shards of the two precisions are never merged.

mod util;

use util::Dir;

/// Builds `data` into `out` on the CPU in f32 with `flags`; returns stdout + stderr.
fn build(dir: &Dir, out: &str, flags: &[&str]) -> String {
    let o = dir
        .build(out)
        .args(["--backend", "cpu", "--dtype", "f32"])
        .args(flags)
        .expect_code(0);
    String::from_utf8_lossy(&o.stdout).into_owned() + &String::from_utf8_lossy(&o.stderr)
}

#[test]
fn fast_precision_runs_the_f32_transform_is_recorded_and_stays_near_exact() {
    let dir = Dir::demo(12);
    let exact = build(&dir, "exact", &[]);
    let fast = build(&dir, "fast", &["--precision", "fast"]);
    assert!(!exact.contains("precision fast"), "{exact}");
    assert!(
        fast.contains("backend  cpu, precision fast: f32 transform"),
        "{fast}"
    );
    let precision = |out: &str| {
        let s = melkit::read::Split::open(dir.join(format!("{out}/training.h5"))).unwrap();
        s.config().unwrap()["mel"]["precision"].clone()
    };
    // `exact`, the default, is not written (configurations stored before the key
    // existed read the same); `fast` is.
    assert_eq!(precision("exact"), serde_json::Value::Null);
    assert_eq!(precision("fast"), "fast");
    let a = melkit::read::Split::open(dir.join("exact/training.h5")).unwrap();
    let b = melkit::read::Split::open(dir.join("fast/training.h5")).unwrap();
    let (mut worst, mut differing) = (0f32, 0usize);
    for clip in 0..a.clips() {
        let (x, y) = (a.clip(clip).unwrap(), b.clip(clip).unwrap());
        // Bins within 100 dB of the loudest: the bound's range (the demo's quiet class
        // reaches the f32 floor far below it).
        let floor = x.iter().cloned().fold(f32::MIN, f32::max) - 100.0;
        for (p, q) in x.iter().zip(y.iter()) {
            if *p > floor {
                worst = worst.max((p - q).abs());
            }
            differing += usize::from(p != q);
        }
    }
    // The f32 transform ran (values differ), within twice torchaudio's own f32 error.
    assert!(differing > 0, "fast wrote the exact values");
    assert!(worst < 0.06, "fast is {worst} dB from exact");
    // Precision changes rounding, not meaning: the splits may be used together (a model
    // trained on an exact build, evaluated on a fast one), as f16 beside f32 may.
    a.check_compatible(&b).unwrap();
}

#[test]
fn shards_of_two_precisions_are_not_merged_and_the_key_is_named() {
    let dir = Dir::demo(8);
    let shard = |k: &str, flags: &[&str]| {
        dir.build("out")
            .args(["--shard", k, "-q"])
            .args(flags)
            .expect_code(0);
    };
    shard("0/2", &[]);
    shard("1/2", &["--precision", "fast"]);
    let e = dir.melctl().args(["merge", "out"]).stderr_of_failure();
    assert!(
        e.contains("configuration differs") && e.contains("mel.precision"),
        "{e}"
    );
}

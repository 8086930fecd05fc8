//! Sharded builds: `melctl build --shard K/N` (or an array task's environment) and
//! `melctl merge`. The merge of any number of shards equals the unsharded build, dataset
//! for dataset (checked with h5py and numpy by scripts/compare_outputs.py); a complete
//! shard is not built twice; an incomplete or mixed set of shards is refused, named.

mod util;

use std::path::Path;

use util::Dir;

/// The demo's clips, one of them damaged (every build leaves it out, named).
fn data_with_a_broken_file(clips: usize) -> Dir {
    let dir = Dir::demo(clips);
    let class = dir.names("data/training")[0].clone();
    dir.create(
        format!("data/training/{class}/zz_broken.wav"),
        b"RIFF\x10\0\0\0WAVEjunk",
    );
    dir
}

/// Builds shard `k` of `n` of `data` into `out`, with `flags`.
fn build_shard(dir: &Dir, out: &str, k: usize, n: usize, flags: &[&str]) -> String {
    let o = dir
        .melctl()
        .args(["build", "-i", "data", "-o", out, "--config", "short.toml"])
        .args(["--shard", &format!("{k}/{n}")])
        .args(flags)
        .expect_code(0);
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// What scripts/compare_outputs.py says of two output folders: `Ok(items compared)`
/// when they hold the same datasets, else the differences.
fn compare(dir: &Dir, a: &str, b: &str) -> Result<String, String> {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/compare_outputs.py");
    let o = dir
        .program("python3")
        .arg(script)
        .args([a, b])
        .command()
        .output()
        .expect("python3 runs (with numpy and h5py: pip install numpy h5py)");
    let text =
        String::from_utf8_lossy(&o.stdout).into_owned() + &String::from_utf8_lossy(&o.stderr);
    if o.status.success() {
        Ok(text)
    } else {
        Err(text)
    }
}

#[test]
fn the_merge_of_any_number_of_shards_equals_the_unsharded_build() {
    let dir = data_with_a_broken_file(40);
    let whole = dir
        .melctl()
        .args([
            "build",
            "-i",
            "data",
            "-o",
            "whole",
            "--config",
            "short.toml",
            "-q",
        ])
        .expect_code(0);
    assert!(String::from_utf8_lossy(&whole.stderr).contains("zz_broken.wav"));
    // 7 shards of the smallest split leave some shards without a file of it.
    for n in [1usize, 3, 7] {
        let out = format!("sharded-{n}");
        for k in 0..n {
            build_shard(&dir, &out, k, n, &["-q"]);
        }
        let o = dir.melctl().args(["merge", &out]).expect_code(0);
        let stdout = String::from_utf8_lossy(&o.stdout);
        let stderr = String::from_utf8_lossy(&o.stderr);
        assert!(stdout.contains(&format!("merged {n} shards")), "{stdout}");
        assert!(
            stderr.contains("skipped") && stderr.contains("zz_broken.wav"),
            "{stderr}"
        );
        let same = compare(&dir, "whole", &out).unwrap_or_else(|d| panic!("{n} shards:\n{d}"));
        assert!(same.starts_with("same:"), "{same}");
    }
    // The comparison can fail: a build of other clips is not the same.
    dir.melctl()
        .args([
            "build",
            "-i",
            "data",
            "-o",
            "f32",
            "--config",
            "short.toml",
            "-q",
        ])
        .args(["--dtype", "f32"])
        .expect_code(0);
    let d = compare(&dir, "whole", "f32").expect_err("f16 and f32 outputs differ");
    assert!(d.contains("mel differs"), "{d}");
}

#[test]
fn npy_shards_merge_to_the_unsharded_npy_build() {
    let dir = Dir::demo(24);
    dir.melctl()
        .args([
            "build",
            "-i",
            "data",
            "-o",
            "whole",
            "--config",
            "short.toml",
            "-q",
        ])
        .args(["--sink", "npy"])
        .expect_code(0);
    for k in 0..2 {
        build_shard(&dir, "sharded", k, 2, &["-q", "--sink", "npy"]);
    }
    dir.melctl().args(["merge", "sharded", "-q"]).expect_code(0);
    let same = compare(&dir, "whole", "sharded").unwrap_or_else(|d| panic!("{d}"));
    assert!(same.starts_with("same:"), "{same}");
    assert!(dir.join("sharded/training.npy.d/mel.npy").is_file());
}

#[test]
fn an_array_tasks_environment_chooses_the_shard() {
    let dir = Dir::demo(12);
    let run = |vars: &[(&str, &str)], extra: &[&str]| {
        let mut cmd = dir.melctl();
        cmd.args(["build", "-i", "data", "-o", "out", "--config", "short.toml"])
            .args(extra);
        for (k, v) in vars {
            cmd.env(k, v);
        }
        cmd.output()
    };
    // A Slurm array 1-3: task 2 is shard 1 of 3.
    let o = run(
        &[
            ("SLURM_ARRAY_TASK_ID", "2"),
            ("SLURM_ARRAY_TASK_MIN", "1"),
            ("SLURM_ARRAY_TASK_MAX", "3"),
            ("SLURM_ARRAY_TASK_COUNT", "3"),
        ],
        &[],
    );
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let said = String::from_utf8_lossy(&o.stderr);
    assert!(
        said.contains("shard 1/3 (from SLURM_ARRAY_TASK_ID=2"),
        "{said}"
    );
    assert!(dir.join("out/shards/1-of-3/shard.json").is_file());
    // A Kubernetes Indexed Job: the index, and the count from MELCTL_SHARDS.
    let o = run(
        &[("JOB_COMPLETION_INDEX", "0"), ("MELCTL_SHARDS", "3")],
        &[],
    );
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(dir.join("out/shards/0-of-3/shard.json").is_file());
    // Without the count it is refused, in words; --no-shard builds the whole tree.
    let o = run(&[("JOB_COMPLETION_INDEX", "0")], &[]);
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("MELCTL_SHARDS"));
    let o = run(&[("JOB_COMPLETION_INDEX", "0")], &["--no-shard", "-q"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(dir.join("out/training.h5").is_file());
    // --shard with --split cannot be merged: refused by clap before any work.
    let o = run(&[], &["--shard", "0/2", "--split", "training"]);
    assert!(!o.status.success());
}

#[test]
fn a_complete_shard_is_not_built_again_and_a_damaged_one_is() {
    let dir = Dir::demo(12);
    build_shard(&dir, "out", 0, 2, &[]);
    let output = dir.join("out/shards/0-of-2/training.h5");
    let before = std::fs::metadata(&output).unwrap().modified().unwrap();
    let said = build_shard(&dir, "out", 0, 2, &[]);
    assert!(
        said.contains("complete and verified") && said.contains("nothing to do"),
        "{said}"
    );
    assert_eq!(
        std::fs::metadata(&output).unwrap().modified().unwrap(),
        before
    );
    // Another configuration: built again.
    let said = build_shard(&dir, "out", 0, 2, &["--dtype", "f32"]);
    assert!(said.contains("another configuration"), "{said}");
    // A damaged output: built again.
    std::fs::write(&output, b"not HDF5").unwrap();
    let said = build_shard(&dir, "out", 0, 2, &["--dtype", "f32"]);
    assert!(said.contains("does not verify"), "{said}");
    assert!(melread::Split::open(&output).is_ok());
}

#[test]
fn the_merge_refuses_a_set_that_is_incomplete_or_mixed_and_names_the_fault() {
    let dir = Dir::demo(12);
    let merge = |out: &str, extra: &[&str]| {
        let mut cmd = dir.melctl();
        cmd.args(["merge", out]).args(extra);
        cmd.stderr_of_failure()
    };
    // No shards at all.
    std::fs::create_dir_all(dir.join("empty/shards")).unwrap();
    assert!(merge("empty", &[]).contains("no shard folder"));
    // A missing shard.
    build_shard(&dir, "out", 0, 3, &["-q"]);
    build_shard(&dir, "out", 2, 3, &["-q"]);
    let e = merge("out", &[]);
    assert!(e.contains("1 of 3 shards missing: 1-of-3"), "{e}");
    // An incomplete one (killed before its shard.json).
    build_shard(&dir, "out", 1, 3, &["-q"]);
    std::fs::remove_file(dir.join("out/shards/1-of-3/shard.json")).unwrap();
    let e = merge("out", &[]);
    assert!(e.contains("not complete") && e.contains("1-of-3"), "{e}");
    // Another configuration in one shard.
    build_shard(&dir, "out", 1, 3, &["-q", "--dtype", "f32"]);
    let e = merge("out", &[]);
    assert!(e.contains("configuration differs"), "{e}");
    build_shard(&dir, "out", 1, 3, &["-q"]);
    // Shards of two counts: the count must be named.
    build_shard(&dir, "out", 0, 2, &["-q"]);
    let e = merge("out", &[]);
    assert!(e.contains("2 counts (2, 3)"), "{e}");
    dir.melctl()
        .args(["merge", "out", "--shards", "3", "-q"])
        .expect_code(0);
    // A tree that changed between two tasks.
    let class = dir.names("data/testing")[0].clone();
    std::fs::copy(
        dir.join(format!(
            "data/testing/{class}/{}",
            dir.names(format!("data/testing/{class}"))[0]
        )),
        dir.join(format!("data/testing/{class}/added.wav")),
    )
    .unwrap();
    build_shard(&dir, "out", 1, 2, &["-q"]);
    let e = merge("out", &["--shards", "2"]);
    assert!(
        e.contains("another file set") && e.contains("tree changed"),
        "{e}"
    );
    // A shard.json that is not one.
    std::fs::write(dir.join("out/shards/1-of-2/shard.json"), b"{").unwrap();
    let e = merge("out", &["--shards", "2"]);
    assert!(e.contains("is not a shard record"), "{e}");
    // The refused merges changed nothing: the 3-shard merge's outputs are still there.
    assert!(melread::Split::open(dir.join("out/training.h5")).is_ok());
}

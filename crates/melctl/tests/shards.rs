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
        .build(out)
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
    let whole = dir.build("whole").arg("-q").expect_code(0);
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
    dir.build("f32")
        .arg("-q")
        .args(["--dtype", "f32"])
        .expect_code(0);
    let d = compare(&dir, "whole", "f32").expect_err("f16 and f32 outputs differ");
    assert!(d.contains("mel differs"), "{d}");
}

#[test]
fn npy_shards_merge_to_the_unsharded_npy_build() {
    let dir = Dir::demo(24);
    dir.build("whole")
        .arg("-q")
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
        let mut cmd = dir.build("out");
        cmd.args(extra);
        for (k, v) in vars {
            cmd.env(k, v);
        }
        cmd.output()
    };
    // A Slurm array 0-2: task 2 is shard 2 of 3.
    let o = run(
        &[
            ("SLURM_ARRAY_TASK_ID", "2"),
            ("SLURM_ARRAY_TASK_MIN", "0"),
            ("SLURM_ARRAY_TASK_MAX", "2"),
            ("SLURM_ARRAY_TASK_COUNT", "3"),
        ],
        &[],
    );
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let said = String::from_utf8_lossy(&o.stderr);
    assert!(
        said.contains("shard 2/3 (from SLURM_ARRAY_TASK_ID=2"),
        "{said}"
    );
    assert!(dir.join("out/shards/2-of-3/shard.json").is_file());
    // Task 1 resubmitted alone (sbatch --array=1): its own count of 1 is not N; refused
    // without MELCTL_SHARDS, shard 1 of 3 with it.
    let retry = [
        ("SLURM_ARRAY_TASK_ID", "1"),
        ("SLURM_ARRAY_TASK_MIN", "1"),
        ("SLURM_ARRAY_TASK_MAX", "1"),
        ("SLURM_ARRAY_TASK_COUNT", "1"),
    ];
    let o = run(&retry, &[]);
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("MELCTL_SHARDS"));
    let o = run(&[&retry[..], &[("MELCTL_SHARDS", "3")]].concat(), &[]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(dir.join("out/shards/1-of-3/shard.json").is_file());
    assert!(!dir.join("out/shards/0-of-1").exists());
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
    assert!(melkit::read::Split::open(&output).is_ok());
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
    assert!(melkit::read::Split::open(dir.join("out/training.h5")).is_ok());
}

#[test]
fn a_rerun_builds_again_what_changed_in_place_and_strict_still_counts_what_was_left_out() {
    let dir = Dir::demo(12);
    // A broken file last in training's sorted list: in the last shard's range.
    let class = dir.names("data/training").last().unwrap().clone();
    let broken = dir.create(
        format!("data/training/{class}/zz_broken.wav"),
        b"RIFF\x10\0\0\0WAVEjunk",
    );
    let o = dir
        .build("out")
        .args(["--shard", "1/2", "--strict"])
        .expect_code(3);
    let said = String::from_utf8_lossy(&o.stdout) + String::from_utf8_lossy(&o.stderr);
    assert!(said.contains("zz_broken.wav"), "{said}");
    // The retry has nothing to build, but names the file again and fails as strictly.
    let o = dir
        .build("out")
        .args(["--shard", "1/2", "--strict"])
        .expect_code(3);
    let said = String::from_utf8_lossy(&o.stderr);
    assert!(
        said.contains("nothing to do")
            && said.contains("zz_broken.wav")
            && said.contains("earlier build"),
        "{said}"
    );
    // The file repaired in place: built again, and now in.
    let good = dir.join(format!(
        "data/training/{class}/{}",
        dir.names(format!("data/training/{class}"))[0]
    ));
    std::fs::copy(&good, &broken).unwrap();
    let said = build_shard(&dir, "out", 1, 2, &["--strict"]);
    assert!(said.contains("files changed since"), "{said}");
    // Audio swapped in place between two same-size files: built again too.
    build_shard(&dir, "out", 0, 2, &[]);
    let classes = dir.names("data/validation");
    let file = |c: &str| {
        let folder = dir.join(format!("data/validation/{c}"));
        folder.join(&dir.names(&folder)[0])
    };
    let (pa, pb) = (file(&classes[0]), file(&classes[1]));
    let (ba, bb) = (std::fs::read(&pa).unwrap(), std::fs::read(&pb).unwrap());
    std::fs::write(&pa, bb).unwrap();
    std::fs::write(&pb, ba).unwrap();
    let said = build_shard(&dir, "out", 0, 2, &[]);
    let said2 = build_shard(&dir, "out", 1, 2, &[]);
    assert!(
        said.contains("building it again") || said2.contains("building it again"),
        "{said}\n{said2}"
    );
    dir.melctl().args(["merge", "out", "-q"]).expect_code(0);
    dir.build("whole").arg("-q").expect_code(0);
    let same = compare(&dir, "whole", "out").unwrap_or_else(|d| panic!("{d}"));
    assert!(same.starts_with("same:"), "{same}");
}

#[test]
fn shards_of_two_backends_are_not_merged_and_a_named_backend_rebuilds() {
    let dir = Dir::demo(12);
    let wgpu = dir
        .build("out")
        .arg("-q")
        .args(["--shard", "0/2", "--backend", "wgpu"])
        .output();
    if !wgpu.status.success() {
        // No Vulkan device here: the refusal is still checked with a forged record.
        let e = String::from_utf8_lossy(&wgpu.stderr);
        assert!(
            std::env::var("MEL_REQUIRE_WGPU").as_deref() != Ok("1"),
            "{e}"
        );
        println!("skipped the wgpu half: {e}");
        return;
    }
    build_shard(&dir, "out", 1, 2, &["-q", "--backend", "cpu"]);
    let e = dir.melctl().args(["merge", "out"]).stderr_of_failure();
    assert!(
        e.contains("wgpu backend") && e.contains("cpu backend"),
        "{e}"
    );
    // Asking for the CPU by name rebuilds the wgpu shard; then they merge.
    let said = build_shard(&dir, "out", 0, 2, &["--backend", "cpu"]);
    assert!(said.contains("building it again"), "{said}");
    dir.melctl().args(["merge", "out", "-q"]).expect_code(0);
}

#[test]
fn merge_refuses_bad_counts_foreign_outputs_and_an_unwritable_report_before_any_work() {
    let dir = Dir::demo(12);
    for k in 0..2 {
        build_shard(&dir, "out", k, 2, &["-q"]);
    }
    for n in ["0", "2000000"] {
        let o = dir.melctl().args(["merge", "out", "--shards", n]).output();
        assert_eq!(o.status.code(), Some(1), "--shards {n}: {o:?}");
        assert!(
            String::from_utf8_lossy(&o.stderr).contains("shards"),
            "{o:?}"
        );
    }
    // A report that cannot be written is refused before the merge publishes anything.
    std::fs::create_dir_all(dir.join("a-folder")).unwrap();
    let e = dir
        .melctl()
        .args(["merge", "out", "--report", "a-folder"])
        .stderr_of_failure();
    assert!(e.contains("a-folder"), "{e}");
    assert!(!dir.join("out/training.h5").exists());
    // A shard.json that points a split at another split's output.
    let record = dir.join("out/shards/1-of-2/shard.json");
    let text = std::fs::read_to_string(&record).unwrap();
    let mut json: serde_json::Value = serde_json::from_str(&text).unwrap();
    json["splits"]["training"]["output"] = "validation.h5".into();
    std::fs::write(&record, serde_json::to_string(&json).unwrap()).unwrap();
    let e = dir.melctl().args(["merge", "out"]).stderr_of_failure();
    assert!(
        e.contains("names the output") && e.contains("validation.h5"),
        "{e}"
    );
    std::fs::write(&record, text).unwrap();
    // A shard folder that is a link to one is read; a name with a leading zero is not a
    // shard's.
    std::fs::rename(dir.join("out/shards/1-of-2"), dir.join("elsewhere")).unwrap();
    std::os::unix::fs::symlink(dir.join("elsewhere"), dir.join("out/shards/1-of-2")).unwrap();
    std::fs::create_dir_all(dir.join("out/shards/1-of-02")).unwrap();
    dir.melctl().args(["merge", "out", "-q"]).expect_code(0);
}

/// `melctl merge` had no output guard: `--report OUT/training.h5` replaced the merged
/// split with the JSON report, `--report` onto a shard's file destroyed a merge input, and
/// an `OUT/{split}.npy.d` holding someone's folder was deleted whole.
#[test]
fn the_merge_guards_every_output_it_plans_as_a_build_does() {
    let dir = Dir::demo(12);
    for k in 0..2 {
        build_shard(&dir, "out", k, 2, &["-q"]);
    }
    let shard_file = dir.join("out/shards/1-of-2/training.h5");
    let before = std::fs::read(&shard_file).unwrap();
    for (report, why) in [
        ("out/training.h5", "also the merged split training"),
        ("out/shards/1-of-2/training.h5", "a shard's file"),
        ("out/shards/0-of-2/shard.json", "a shard's file"),
        ("out/melctl-build.json", "also the build record"),
    ] {
        let e = dir
            .melctl()
            .args(["merge", "out", "--report", report])
            .stderr_of_failure();
        assert!(e.contains(report) && e.contains(why), "{report}: {e}");
    }
    assert_eq!(std::fs::read(&shard_file).unwrap(), before, "a merge input");
    assert!(!dir.join("out/training.h5").exists(), "nothing was merged");
    dir.melctl()
        .args(["merge", "out", "-q", "--report", "out/report.json"])
        .expect_code(0);
    assert!(melkit::read::Split::open(dir.join("out/training.h5")).is_ok());

    // An npy merge whose split folder holds someone's folder.
    for k in 0..2 {
        build_shard(&dir, "npy", k, 2, &["-q", "--sink", "npy"]);
    }
    std::fs::create_dir_all(dir.join("npy/testing.npy.d/mine")).unwrap();
    dir.create("npy/testing.npy.d/mine/notes.txt", "keep me");
    let e = dir.melctl().args(["merge", "npy"]).stderr_of_failure();
    assert!(e.contains("holds the folder") && e.contains("mine"), "{e}");
    assert!(dir.join("npy/testing.npy.d/mine/notes.txt").is_file());
}

/// A retry of a complete shard wrote no `--report`: a stale report stayed at the path,
/// and `--report -` printed nothing.
#[test]
fn a_retry_of_a_complete_shard_writes_its_report() {
    let dir = Dir::demo(12);
    build_shard(&dir, "out", 0, 2, &["-q", "--report", "r.json"]);
    let first: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("r.json")).unwrap()).unwrap();
    assert_eq!(first["shard"]["built"], true, "{first}");
    std::fs::write(dir.join("r.json"), "stale").unwrap();
    build_shard(&dir, "out", 0, 2, &["-q", "--report", "r.json"]);
    let again: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("r.json")).unwrap()).unwrap();
    assert_eq!(again["shard"]["built"], false, "{again}");
    assert_eq!(again["shard"]["index"], 0, "{again}");
    assert_eq!(again["ok"], true, "{again}");
    let o = dir
        .build("out")
        .args(["--shard", "0/2", "-q", "--report", "-"])
        .expect_code(0);
    let printed: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(printed["shard"]["built"], false, "{printed}");
}

/// The harness passed the caller's environment to every `melctl` it ran: inside a Slurm
/// array task every build test became a shard build and failed. This file's tests, run
/// again inside such a task's environment, pass.
#[test]
fn the_tests_pass_inside_a_slurm_array_task() {
    const NESTED: &str = "MELCTL_TEST_NESTED";
    if std::env::var_os(NESTED).is_some() {
        return; // the nested run itself
    }
    let o = std::process::Command::new(std::env::current_exe().unwrap())
        .args(["--skip", "the_tests_pass_inside_a_slurm_array_task"])
        .env(NESTED, "1")
        .env("SLURM_ARRAY_TASK_ID", "1")
        .env("SLURM_ARRAY_TASK_COUNT", "3")
        .env("SLURM_ARRAY_TASK_MIN", "0")
        .env("SLURM_ARRAY_TASK_MAX", "2")
        .env("MELCTL_SHARDS", "3")
        .env("JOB_COMPLETION_INDEX", "2")
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(
        o.status.success() && text.contains("test result: ok"),
        "{text}{}",
        String::from_utf8_lossy(&o.stderr)
    );
}

#[test]
fn many_shards_merge_within_a_small_descriptor_limit() {
    let dir = Dir::demo(12);
    let n = 40;
    for k in 0..n {
        build_shard(&dir, "out", k, n, &["-q"]);
    }
    // One shard's lock at a time: 40 shards merge with 32 descriptors.
    let o = dir
        .program("sh")
        .args([
            "-c",
            &format!(
                "ulimit -n 32 && exec {} merge out -q",
                env!("CARGO_BIN_EXE_melctl")
            ),
        ])
        .output();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
}

#[test]
fn split_with_a_shard_from_the_environment_is_refused_before_any_work() {
    let dir = Dir::demo(12);
    let o = dir
        .build("out")
        .args(["--split", "training", "--dry-run"])
        .env("JOB_COMPLETION_INDEX", "0")
        .env("MELCTL_SHARDS", "2")
        .output();
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("--split with shard 0/2"));
}

/// `melctl merge --strict` exited 0 though the shards' builds left hidden audio out, and
/// the merged report had no `ignored` list (an unsharded build names them and exits 3).
#[test]
fn the_merge_reports_and_counts_what_the_scan_left_out_as_a_build_does() {
    let dir = Dir::demo(12);
    let class = dir.names("data/training")[0].clone();
    let first = dir.names(format!("data/training/{class}"))[0].clone();
    std::fs::copy(
        dir.join(format!("data/training/{class}/{first}")),
        dir.join(format!("data/training/{class}/.take2.wav")),
    )
    .unwrap();
    dir.create("data/training/notes.txt", "not audio");
    dir.build("whole").args(["-q", "--strict"]).expect_code(3);
    for k in 0..2 {
        dir.build("out")
            .args(["-q", "--strict", "--shard", &format!("{k}/2")])
            .expect_code(3);
    }
    let o = dir
        .melctl()
        .args(["merge", "out", "-q", "--strict", "--report", "r.json"])
        .expect_code(3);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains(".take2.wav"), "{err}");
    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("r.json")).unwrap()).unwrap();
    let ignored = report["ignored"].to_string();
    assert!(
        ignored.contains(".take2.wav") && ignored.contains("notes.txt"),
        "{report}"
    );
}

/// A shard folder copied over another, its record edited to the other's range, merged
/// with exit 0: the merged split held the first shard's clips twice and lost the other's.
/// The merged rows must strictly increase by path, as the split's sorted ranges do.
#[test]
fn a_shard_copied_over_another_is_refused_not_merged_twice() {
    let dir = Dir::demo(30);
    for k in 0..3 {
        build_shard(&dir, "out", k, 3, &["-q"]);
    }
    let (zero, one) = (dir.join("out/shards/0-of-3"), dir.join("out/shards/1-of-3"));
    std::fs::remove_dir_all(&one).unwrap();
    std::fs::create_dir(&one).unwrap();
    for entry in std::fs::read_dir(&zero).unwrap() {
        let entry = entry.unwrap();
        std::fs::copy(entry.path(), one.join(entry.file_name())).unwrap();
    }
    let path = one.join("shard.json");
    let mut record: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    record["shard"] = 1.into();
    for part in record["splits"].as_object_mut().unwrap().values_mut() {
        let (first, end) = (
            part["first"].as_u64().unwrap(),
            part["end"].as_u64().unwrap(),
        );
        part["first"] = end.into();
        part["end"] = (2 * end - first).into();
    }
    std::fs::write(&path, record.to_string()).unwrap();
    let e = dir.melctl().args(["merge", "out"]).stderr_of_failure();
    assert!(e.contains("the shards overlap or are out of order"), "{e}");
    assert!(!dir.join("out/training.h5").exists(), "nothing merged");
}

/// `melctl merge --report` onto a clip of the dataset the shards were built from replaced
/// the clip with JSON (exit 0); a build refuses the same path.
#[test]
fn the_merge_report_may_not_replace_an_input_of_the_sharded_build() {
    let dir = Dir::demo(12);
    for k in 0..2 {
        build_shard(&dir, "out", k, 2, &["-q"]);
    }
    let class = dir.names("data/training")[0].clone();
    let clip = format!(
        "data/training/{class}/{}",
        dir.names(format!("data/training/{class}"))[0]
    );
    let before = std::fs::read(dir.join(&clip)).unwrap();
    let e = dir
        .melctl()
        .args(["merge", "out", "--report", &clip])
        .stderr_of_failure();
    assert!(e.contains("an input of the sharded build"), "{e}");
    assert_eq!(std::fs::read(dir.join(&clip)).unwrap(), before);
    // From another folder, by an absolute path: the record's root is absolute.
    let mut merge = dir.melctl();
    merge.command().current_dir(dir.join("out"));
    let e = merge
        .args(["merge", "."])
        .arg("--report")
        .arg(dir.join(&clip))
        .stderr_of_failure();
    assert!(e.contains("an input of the sharded build"), "{e}");
    assert_eq!(std::fs::read(dir.join(&clip)).unwrap(), before);
}

/// Rows are sorted by their relative path as a string, where `leak-small/` comes before
/// `leak/`; the merge compared paths component by component and refused every correct
/// set of shards of such a tree, built again or not.
#[test]
fn classes_whose_names_prefix_each_other_merge_as_the_unsharded_build() {
    let dir = Dir::demo(24);
    for split in dir.names("data") {
        let from = dir.join(format!("data/{split}/no_leak"));
        if from.is_dir() {
            std::fs::rename(&from, dir.join(format!("data/{split}/leak-small"))).unwrap();
        }
    }
    dir.build("whole").args(["-q"]).expect_code(0);
    for k in 0..2 {
        build_shard(&dir, "out", k, 2, &["-q"]);
    }
    dir.melctl().args(["merge", "out", "-q"]).expect_code(0);
    compare(&dir, "whole", "out").unwrap();
}

/// A shard whose part of a split was all unreadable files failed ("all of its files were
/// left out"), so the merge could never run, while the whole build exits 0: a shard's
/// part may be empty; the merge judges the whole split.
#[test]
fn a_shard_whose_part_is_all_unreadable_merges_as_the_unsharded_build() {
    let dir = Dir::demo(24);
    let class = dir.names("data/training")[0].clone();
    let mut files: Vec<String> = dir
        .names("data/training")
        .iter()
        .flat_map(|c| {
            dir.names(format!("data/training/{c}"))
                .into_iter()
                .map(move |n| format!("{c}/{n}"))
        })
        .collect();
    files.sort();
    assert!(files[0].starts_with(&class));
    // Shard 0 of 3 holds the first third of the sorted files: every one of them broken.
    let third = files.len() / 3;
    assert!(third > 0);
    for f in &files[..third] {
        dir.create(format!("data/training/{f}"), b"RIFF\x10\0\0\0WAVEjunk");
    }
    dir.build("whole").args(["-q"]).expect_code(0);
    for k in 0..3 {
        build_shard(&dir, "out", k, 3, &["-q"]);
    }
    dir.melctl().args(["merge", "out", "-q"]).expect_code(0);
    compare(&dir, "whole", "out").unwrap();
}

//! The `read_bench` example refuses what it cannot measure, as the tools do: on a split
//! smaller than one batch it exited 0 printing "melread is NaNx".

mod common;

#[path = "../examples/read_bench.rs"]
#[allow(dead_code)]
mod read_bench;

use clap::Parser;
use common::build_leak;
use melkit::Dtype;

#[test]
fn a_split_smaller_than_one_batch_is_refused_not_measured() {
    let t = tempfile::tempdir().unwrap();
    let out = build_leak(t.path(), Dtype::F16, &[("training", 3)]);
    let data = out.to_str().unwrap();
    for extra in [
        &["--batch", "5632"][..],
        &["--batch", "4", "--batches", "0"],
    ] {
        let mut argv = vec!["read_bench", "--data", data, "--warm-only"];
        argv.extend(extra);
        let args = read_bench::Args::try_parse_from(&argv).unwrap();
        let e = read_bench::run(&args).unwrap_err().to_string();
        assert!(e.contains("nothing"), "{extra:?}: {e}");
    }
}

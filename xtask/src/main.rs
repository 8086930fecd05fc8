//! Developer tasks: `cargo xtask gpu-check` (stage the GPU check) and `cargo xtask bench`
//! (the configuration matrix against the Python peer).

mod bench;
mod gpu;

use anyhow::{Result, bail};

fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.first().map(String::as_str) {
        Some("gpu-check") => gpu::stage(),
        Some("bench") => bench::run(&args[1..]),
        Some("fuzz") => fuzz(&args[1..]),
        _ => bail!(
            "usage: cargo xtask gpu-check | bench [--clips N[,N..]] [--quick] | fuzz [--seconds N]\n\
             gpu-check: builds the release binaries the GPU check needs into .device-bin/;\n\
             then run `bash scripts/gpu-check.sh` on the GPU machine (README: GPU check)"
        ),
    }
}

/// The workspace root (xtask lives one level below it).
pub fn root() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("xtask is inside the workspace")
        .to_path_buf()
}

/// Runs `cargo` with `args` in the workspace root; returns stdout.
pub fn cargo(args: &[&str]) -> Result<String> {
    let out = std::process::Command::new(env!("CARGO"))
        .args(args)
        .current_dir(root())
        .stderr(std::process::Stdio::inherit())
        .output()?;
    if !out.status.success() {
        bail!("cargo {} failed", args.join(" "));
    }
    Ok(String::from_utf8(out.stdout)?)
}

/// `cargo xtask fuzz [--seconds N]`: runs the decoder fuzz target (fuzz/, cargo-fuzz on
/// nightly) for a bounded time, seeded with the format corpus. A crash is written under
/// fuzz/artifacts/; turn it into a regression case in fixtures/make_corpus.py.
fn fuzz(args: &[String]) -> Result<()> {
    let seconds = match args {
        [flag, n] if flag == "--seconds" => n.parse::<u64>()?,
        [] => 60,
        _ => bail!("usage: cargo xtask fuzz [--seconds N]"),
    };
    let seeds = root().join("target/fuzz-seeds");
    std::fs::create_dir_all(&seeds)?;
    for e in std::fs::read_dir(root().join("fixtures/corpus"))? {
        let p = e?.path();
        let name = p
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        // The long silence makes every run slow; the rest are small.
        if !name.ends_with(".json") && !name.starts_with("long-") {
            std::fs::copy(&p, seeds.join(&name))?;
        }
    }
    let status = std::process::Command::new("cargo")
        .args(["+nightly", "fuzz", "run", "decode_bytes"])
        .arg(&seeds)
        .arg("--")
        .arg(format!("-max_total_time={seconds}"))
        .arg("-rss_limit_mb=2048")
        .current_dir(root().join("fuzz"))
        .status()
        .map_err(|e| anyhow::anyhow!("running cargo +nightly fuzz (rustup toolchain install nightly; cargo install cargo-fuzz): {e}"))?;
    if !status.success() {
        bail!("the fuzzer found a crash: see fuzz/artifacts/decode_bytes/");
    }
    println!("no crash in {seconds} s");
    Ok(())
}

//! Developer tasks: `cargo xtask gpu-check` (stage the GPU check) and `cargo xtask bench`
//! (the configuration matrix against the Python peer).

mod bench;
mod gpu;

use anyhow::{Result, bail};
use clap::{Parser, Subcommand};

/// melctl's project automation.
#[derive(Parser)]
#[command(name = "cargo xtask")]
struct Cli {
    #[command(subcommand)]
    task: Task,
}

#[derive(Subcommand)]
enum Task {
    /// Build the release binaries the GPU check needs into .device-bin/; then run
    /// `bash scripts/gpu-check.sh` on the GPU machine (README: GPU check).
    GpuCheck,
    /// The loader × backend × dtype × sink matrix against the Python peer, in one run.
    Bench(bench::Args),
    /// Fuzz the parsers (decoders, manifests, configurations, the container format) for a
    /// bounded time with a memory limit (nightly + cargo-fuzz).
    Fuzz {
        /// Seconds to run.
        #[arg(long, default_value_t = 60)]
        seconds: u64,
    },
}

fn main() -> Result<()> {
    match Cli::parse().task {
        Task::GpuCheck => gpu::stage(),
        Task::Bench(args) => bench::run(&args),
        Task::Fuzz { seconds } => fuzz(seconds),
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

/// `cargo xtask fuzz [--seconds N]`: runs the fuzz targets (fuzz/: decoders, text parsers, the container, the readers; cargo-fuzz on
/// nightly) for a bounded time, seeded with the format corpus. A crash is written under
/// fuzz/artifacts/; turn it into a regression case in fixtures/make_corpus.py.
fn fuzz(seconds: u64) -> Result<()> {
    let audio_seeds = root().join("target/fuzz-seeds/audio");
    std::fs::create_dir_all(&audio_seeds)?;
    for e in std::fs::read_dir(root().join("fixtures/corpus"))? {
        let p = e?.path();
        let name = p
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        // The long silence makes every run slow; the rest are small.
        if !name.ends_with(".json") && !name.starts_with("long-") {
            std::fs::copy(&p, audio_seeds.join(&name))?;
        }
    }
    // Seeds for the text parsers: the presets' TOML and small manifests.
    let text_seeds = root().join("target/fuzz-seeds/text");
    std::fs::create_dir_all(&text_seeds)?;
    std::fs::write(
        text_seeds.join("preset.toml"),
        "[mel]\nn_fft = 400\nn_mels = 80\n[segment]\nlong = \"off\"\n",
    )?;
    std::fs::write(
        text_seeds.join("m.csv"),
        "path,label,split\na.wav,leak,training\n",
    )?;
    std::fs::write(
        text_seeds.join("m.jsonl"),
        "{\"path\": \"a.wav\", \"label\": \"leak\"}\n",
    )?;
    // Seeds for the readers: an npy header dictionary and a build record (an HDF5 split
    // is found by the fuzzer from its signature: the bytes decide the layout).
    let reader_seeds = root().join("target/fuzz-seeds/reader");
    std::fs::create_dir_all(&reader_seeds)?;
    std::fs::write(
        reader_seeds.join("npy-dict"),
        "{'descr': '<f2', 'fortran_order': False, 'shape': (3, 79, 3, 32, 5), }",
    )?;
    std::fs::write(
        reader_seeds.join("record.json"),
        "{\"format\": 1, \"build\": \"b\", \"splits\": {\"training\": {\"output\": \"training.h5\", \"build\": \"b\"}}}",
    )?;
    std::fs::write(reader_seeds.join("hdf5-signature"), b"\x89HDF\r\n\x1a\n")?;
    // Every target gets a share of the time, a memory limit and its seeds.
    let targets = [
        ("decode_bytes", &audio_seeds),
        ("decode_file", &audio_seeds),
        ("manifest", &text_seeds),
        ("config_plan", &text_seeds),
        ("container", &text_seeds),
        ("reader", &reader_seeds),
    ];
    let each = (seconds / targets.len() as u64).max(5);
    for (target, seeds) in targets {
        println!("fuzzing {target} for {each} s");
        let status = std::process::Command::new("cargo")
            .args(["+nightly", "fuzz", "run", target])
            .arg(seeds)
            .arg("--")
            .arg(format!("-max_total_time={each}"))
            .arg("-rss_limit_mb=2048")
            .arg("-timeout=10")
            .current_dir(root().join("fuzz"))
            .status()
            .map_err(|e| anyhow::anyhow!("running cargo +nightly fuzz (rustup toolchain install nightly; cargo install cargo-fuzz): {e}"))?;
        if !status.success() {
            bail!(
                "the fuzzer found a crash in {target}: see fuzz/artifacts/{target}/; add it as a regression test"
            );
        }
    }
    println!("no crash in {} targets × {each} s", targets.len());
    Ok(())
}

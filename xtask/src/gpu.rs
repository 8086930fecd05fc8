//! `cargo xtask gpu-check`: builds, here, everything the GPU check runs there (the GPU
//! machine has no Rust): melctl, the CUDA and wgpu conformance test binaries (the CUDA one
//! tests both kernels, f64 and f32) and the CUDA and wgpu kernel timers, all release
//! builds, copied into `.device-bin/` (git-ignored, carried to the machine), where
//! `scripts/gpu-check.sh` runs them.

use anyhow::{Context, Result};

use crate::{cargo, root};

/// Builds and stages the binaries; prints what to run on the GPU machine.
pub fn stage() -> Result<()> {
    let dir = root().join(".device-bin");
    std::fs::create_dir_all(&dir)?;
    cargo(&["build", "--release", "-p", "melctl"])?;
    cargo(&[
        "build",
        "--release",
        "-p",
        "mel-cuda",
        "--example",
        "kernel_time",
    ])?;
    cargo(&[
        "build",
        "--release",
        "-p",
        "mel-wgpu",
        "--example",
        "wgpu_time",
    ])?;
    let cuda_test = test_binary("conformance_cuda")?;
    let wgpu_test = test_binary("conformance_wgpu")?;
    let target = root().join("target/release");
    let copies = [
        (target.join("melctl"), "melctl"),
        (target.join("examples/kernel_time"), "kernel_time"),
        (target.join("examples/wgpu_time"), "wgpu_time"),
        (cuda_test, "conformance_cuda"),
        (wgpu_test, "conformance_wgpu"),
    ];
    let mut total = 0;
    for (from, name) in copies {
        let to = dir.join(name);
        std::fs::copy(&from, &to).with_context(|| format!("copy {}", from.display()))?;
        // Debug line tables are not needed there; stripping keeps the carry small.
        let _ = std::process::Command::new("strip").arg(&to).status();
        total += std::fs::metadata(&to)?.len();
    }
    println!(
        "staged .device-bin/ ({:.1} MB). On the GPU machine, from the repository root:\n  \
         bash scripts/gpu-check.sh        (carry: .device-bin, and .gl for the Vulkan loader: see README)\n\
         It runs the wgpu suite (f32 shader) and the CUDA suite with both kernels (f64, f32),\n\
         both CUDA kernels, wgpu and torchaudio alone side by side (with the launch shapes\n\
         chosen for the device), then the whole leak-4k builds; --quick stops after the\n\
         kernels (with ncu profiles of both CUDA kernels), --wgpu runs a short lease's subset.",
        total as f64 / 1e6
    );
    Ok(())
}

/// Builds the release test binary `name` of mel-tests and returns its path.
fn test_binary(name: &str) -> Result<std::path::PathBuf> {
    let json = cargo(&[
        "test",
        "--release",
        "--no-run",
        "-p",
        "mel-tests",
        "--test",
        name,
        "--message-format=json",
    ])?;
    json.lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|v| v["reason"] == "compiler-artifact" && v["target"]["name"] == name)
        .find_map(|v| v["executable"].as_str().map(Into::into))
        .with_context(|| format!("cargo did not report the {name} test binary"))
}

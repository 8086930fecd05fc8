//! A dataset built in-process, with `melctl build`'s guarantees (lock, all-or-nothing
//! publish, build record) and the same outputs for the same settings:
//!
//! `cargo run --release -p melkit --features datasets --example build -- --input DIR --output OUT --preset leak-4k`

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;

use clap::Parser;
use melkit::Preset;
use melkit::dataset::{BuildReport, BuildRequest, Host, Observer, Source};

/// Builds ROOT/{split}/{class}/*.wav into OUT/{split}.h5 as `melctl build` does.
#[derive(Parser)]
struct Args {
    /// Dataset root: ROOT/{split}/{class}/*.wav.
    #[arg(long)]
    input: PathBuf,
    /// Output folder.
    #[arg(long)]
    output: PathBuf,
    /// Preset: leak-4k or speech-16k.
    #[arg(long, default_value = "leak-4k")]
    preset: String,
    /// Mel backend: auto, cpu, cuda or wgpu.
    #[arg(long, default_value = "auto")]
    backend: String,
}

/// Notices on stderr.
struct Stderr;

impl Observer for Stderr {
    fn notice(&self, line: &str) {
        eprintln!("{line}");
    }
}

fn run(args: &Args) -> Result<(), Box<dyn std::error::Error>> {
    let mut config = Preset::from_name(&args.preset)?.config();
    use melkit::BackendKind;
    config.run.backend = [
        BackendKind::Auto,
        BackendKind::Cpu,
        BackendKind::Cuda,
        BackendKind::Wgpu,
    ]
    .into_iter()
    .find(|k| k.name() == args.backend)
    .ok_or_else(|| format!("--backend {}: auto, cpu, cuda or wgpu", args.backend))?;
    // The streaming loader: no decoded-audio cache, so no cache folder to name.
    config.run.loader = melkit::config::LoaderKind::Stream;
    let mut request = BuildRequest::new(Source::Folder(args.input.clone()), &args.output, config);
    // The memory check and the default cache folder of `melctl build`: this process's.
    request.host = Host::with_env(|name| std::env::var_os(name));
    // Every check `melctl build` makes (plan, memory, split names, output guard), once.
    let prepared = request.prepare()?;
    let mut report = BuildReport::default();
    prepared.run(&Stderr, &Arc::new(AtomicBool::new(false)), &mut report)?;
    for s in &report.splits {
        eprintln!(
            "{}: {} clips of {} files -> {}",
            s.split,
            s.clips,
            s.files,
            s.output.display()
        );
    }
    Ok(())
}

fn main() -> ExitCode {
    match run(&Args::parse()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}

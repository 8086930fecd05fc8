//! One audio file to the spectrogram `melctl build` would store for it, as a float32
//! `.npy` of the clip's shape (`[79, 3, 32, 5]` for leak-4k, `[80, 101]` for speech-16k):
//!
//! `cargo run --release -p melkit --example extract -- --preset leak-4k IN.wav OUT.npy`

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Parser;
use melkit::{BackendRequest, Extractor, Preset};

/// Computes one file's log-mel spectrogram exactly as `melctl build` does.
#[derive(Parser)]
struct Args {
    /// Preset: leak-4k or speech-16k.
    #[arg(long, default_value = "leak-4k")]
    preset: String,
    /// Audio file (WAV, FLAC, Ogg, MP3, AIFF).
    input: PathBuf,
    /// Where to write the float32 .npy.
    output: PathBuf,
}

fn run(args: &Args) -> Result<(), Box<dyn std::error::Error>> {
    let spec = Preset::from_name(&args.preset)?.spec();
    let mut extractor = Extractor::new(&spec, &BackendRequest::auto())?;
    let features = extractor.file(&args.input)?;
    let clip = features.clip_f32(0);
    ndarray_npy::write_npy(&args.output, &clip)?;
    eprintln!(
        "{} -> {} {:?} float32 (backend {})",
        args.input.display(),
        args.output.display(),
        clip.shape(),
        extractor.choice().kind.name()
    );
    Ok(())
}

fn main() -> ExitCode {
    let args = Args::parse();
    match run(&args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}

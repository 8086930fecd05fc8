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
    // The output may not replace the input (or a link to it), and is written whole by
    // a temporary file and a rename: a failed run leaves nothing half-written.
    let mut guard = mel_core::outputs::Guard::new();
    guard.input(&args.input, "the input");
    let output = mel_core::outputs::Output::new(
        &args.output,
        "the spectrogram",
        mel_core::outputs::Written::File,
    );
    guard.check(std::slice::from_ref(&output))?;
    let spec = Preset::from_name(&args.preset)?.spec();
    let mut extractor = Extractor::new(&spec, &BackendRequest::auto())?;
    let features = extractor.file(&args.input)?;
    let clip = features.clip_f32(0);
    let mut npy = Vec::new();
    ndarray_npy::WriteNpyExt::write_npy(&clip, &mut npy)?;
    mel_core::atomic::write_file(&args.output, &npy, true)?;
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

//! Command-line flags (clap). Parsed and validated here; turned into a `Config` in `settings`.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand, ValueEnum};

/// melctl turns folders of labelled audio clips (ROOT/{split}/{class}/*.wav) into
/// log-mel-spectrogram datasets, one HDF5 file per split, numerically identical to
/// torchaudio's MelSpectrogram + AmplitudeToDB.
#[derive(Debug, Parser)]
#[command(name = "melctl", version, propagate_version = true)]
pub struct Cli {
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// melctl's subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Build one HDF5 file of mel spectrograms per split.
    Build(BuildArgs),
    /// Describe an HDF5 file written by melctl: shapes, labels, configuration, statistics.
    Inspect(InspectArgs),
    /// Generate a small deterministic leak-4k-shaped dataset and build it.
    Demo(DemoArgs),
    /// Print the resolved configuration (preset + file + flags) as TOML.
    Config(ConfigArgs),
}

/// Flags that choose and override the configuration (preset < file < flags).
#[derive(Debug, Args, Clone)]
pub struct ConfigFlags {
    /// Built-in preset to start from.
    #[arg(long, value_enum, default_value = "leak-4k")]
    pub preset: PresetArg,
    /// TOML file whose keys override the preset (see `melctl config` for every key).
    #[arg(long, value_name = "FILE.toml")]
    pub config: Option<PathBuf>,
    /// Stored element type of the spectrograms (overrides the file).
    #[arg(long, value_enum)]
    pub dtype: Option<DtypeArg>,
    /// Mel backend.
    #[arg(long, value_enum)]
    pub backend: Option<BackendArg>,
    /// How audio reaches memory.
    #[arg(long, value_enum)]
    pub loader: Option<LoaderArg>,
    /// Worker threads for decoding and the CPU backend (0 = all cores).
    #[arg(long, value_name = "N")]
    pub threads: Option<usize>,
    /// Clips per batch between stages.
    #[arg(long, value_name = "N")]
    pub batch: Option<usize>,
}

/// `melctl build`.
#[derive(Debug, Args)]
pub struct BuildArgs {
    /// Dataset root: ROOT/{split}/{class}/*.wav, or ROOT/{class}/*.wav for one split `all`.
    #[arg(long, short, value_name = "ROOT")]
    pub input: PathBuf,
    /// Output folder; receives OUT/{split}.h5 (created if missing).
    #[arg(long, short, value_name = "OUT")]
    pub output: PathBuf,
    /// Configuration choices.
    #[command(flatten)]
    pub flags: ConfigFlags,
    /// What to do with a file that cannot be decoded: leave it out and list it, or stop.
    #[arg(long, value_enum, default_value = "skip")]
    pub on_error: OnError,
    /// Build only these splits (repeatable); default: all.
    #[arg(long = "split", value_name = "NAME")]
    pub splits: Vec<String>,
    /// Write the summary (stages, timings, skipped files) as JSON to this file.
    #[arg(long, value_name = "FILE.json")]
    pub report: Option<PathBuf>,
}

/// `melctl inspect`.
#[derive(Debug, Args)]
pub struct InspectArgs {
    /// The HDF5 file.
    pub file: PathBuf,
    /// Clips sampled for the value statistics.
    #[arg(long, default_value_t = 256)]
    pub sample: usize,
}

/// `melctl demo`.
#[derive(Debug, Args)]
pub struct DemoArgs {
    /// Folder for the generated dataset (DIR/data) and its build (DIR/out).
    #[arg(default_value = "target/melctl-demo")]
    pub dir: PathBuf,
    /// Clips to generate across all splits and the five classes.
    #[arg(long, default_value_t = 300)]
    pub clips: usize,
    /// Only generate the dataset; do not build it.
    #[arg(long)]
    pub no_build: bool,
    /// Configuration choices for the build.
    #[command(flatten)]
    pub flags: ConfigFlags,
}

/// `melctl config`.
#[derive(Debug, Args)]
pub struct ConfigArgs {
    /// Configuration choices.
    #[command(flatten)]
    pub flags: ConfigFlags,
}

/// Presets on the command line.
#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum PresetArg {
    /// 4096 Hz, 10 s clips, two-stage segmentation, 32 mels, f16.
    #[value(name = "leak-4k")]
    Leak4k,
    /// 16 kHz, 1 s clips, n_fft 400, hop 160, 80 mels, one spectrogram per clip.
    #[value(name = "speech-16k")]
    Speech16k,
}

/// Output dtypes on the command line.
#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum DtypeArg {
    /// 32-bit float.
    F32,
    /// 16-bit float (IEEE half).
    F16,
    /// bfloat16 (stored as uint16 bit patterns).
    Bf16,
}

/// Backends on the command line.
#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum BackendArg {
    /// rayon + realfft on all cores.
    Cpu,
}

/// Loaders on the command line.
#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum LoaderArg {
    /// Decode a whole split into RAM first.
    Preload,
}

/// What to do with undecodable files.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum OnError {
    /// Leave the file out, list it in the summary and the report.
    Skip,
    /// Stop with a non-zero exit and the file's path; nothing is written.
    Fail,
}

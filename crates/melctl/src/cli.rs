//! Command-line flags (clap). Parsed and validated here; turned into a `Config` in `settings`.

use std::path::PathBuf;

use clap::builder::{PossibleValue, PossibleValuesParser, TypedValueParser};
use clap::{Args, Parser, Subcommand, ValueEnum};
use melkit::core::config::{BackendKind, DeviceSelector, LoaderKind, Named, Preset, SinkKind};
use melkit::core::spec::{Dtype, Precision};
use melkit::dataset::OnError;

/// A flag's parser for a configuration enum: its names (mel-core's one list), each with
/// its line of help.
fn named<T: Named + Clone>() -> impl TypedValueParser<Value = T> {
    let values = T::ALL
        .iter()
        .map(|v| PossibleValue::new(v.name()).help(v.about()));
    PossibleValuesParser::new(values).map(|name| T::parse_name(&name).expect("a listed name"))
}

/// melctl turns folders of labelled audio clips (ROOT/{split}/{class}/*.wav) into
/// log-mel-spectrogram datasets, one HDF5 file per split, within 0.01 dB of torchaudio's
/// MelSpectrogram + AmplitudeToDB computed in float64 (the conformance suite's bound).
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
    /// Build one HDF5 file (or npy folder) of mel spectrograms per split (or one shard of
    /// the build).
    Build(Box<BuildArgs>),
    /// Merge the shards of a sharded build (OUT/shards/K-of-N/) into OUT/{split}.h5:
    /// the datasets one build of the whole tree writes.
    Merge(MergeArgs),
    /// Describe an HDF5 file or npy folder written by melctl: shapes, labels,
    /// configuration, statistics.
    Inspect(InspectArgs),
    /// Check that an output folder is one whole set of splits: each opens with every
    /// reader check, the build record names each one, and they share labels and
    /// configuration. Exits 1 naming any split left by an interrupted build (h5py would
    /// read it without a word).
    Verify(VerifyArgs),
    /// Generate a small deterministic leak-4k-shaped dataset and build it.
    Demo(DemoArgs),
    /// Print the resolved configuration (preset + file + flags) as TOML.
    Config(ConfigArgs),
    /// List the GPU devices melctl can use.
    Devices(DevicesArgs),
    /// Draw a clip's spectrogram (or each class's mean) from an output as a PNG.
    Show(ShowArgs),
}

/// Flags that choose and override the configuration (preset < file < flags).
#[derive(Debug, Args, Clone)]
pub struct ConfigFlags {
    /// Built-in preset to start from.
    #[arg(long, default_value = "leak-4k", value_parser = named::<Preset>())]
    pub preset: Preset,
    /// TOML file whose keys override the preset (see `melctl config` for every key).
    #[arg(long, value_name = "FILE.toml")]
    pub config: Option<PathBuf>,
    /// Stored element type of the spectrograms (overrides the file).
    #[arg(long, value_parser = named::<Dtype>())]
    pub dtype: Option<Dtype>,
    /// Transform precision: `exact` (within 0.01 dB of the float64 definition, the
    /// default) or `fast` (plain float32 where the backend has it, no worse than
    /// torchaudio's own float32).
    #[arg(long, value_parser = named::<Precision>())]
    pub precision: Option<Precision>,
    /// Mel backend.
    #[arg(long, value_parser = named::<BackendKind>())]
    pub backend: Option<BackendKind>,
    /// How audio reaches memory.
    #[arg(long, value_parser = named::<LoaderKind>())]
    pub loader: Option<LoaderKind>,
    /// Worker threads for decoding, the CPU backend and the output checks (0 = all cores).
    #[arg(long, value_name = "N")]
    pub threads: Option<usize>,
    /// Clips per batch between stages.
    #[arg(long, value_name = "N")]
    pub batch: Option<usize>,
    /// Output format.
    #[arg(long, value_parser = named::<SinkKind>())]
    pub sink: Option<SinkKind>,
    /// Batches each queue between stages holds at most.
    #[arg(long, value_name = "N")]
    pub queue_depth: Option<usize>,
    /// Reader threads of the streaming loader (0 = one per worker thread).
    #[arg(long, value_name = "N")]
    pub readers: Option<usize>,
    /// GPU device: an index, or for wgpu part of the adapter's name (see `melctl devices`).
    #[arg(long, value_name = "N|NAME")]
    pub device: Option<DeviceSelector>,
    /// Folder of the memmap loader's cache files.
    #[arg(long, value_name = "DIR")]
    pub cache_dir: Option<PathBuf>,
}

/// `--group-pattern`'s parser: a regular expression with a capture group (checked here,
/// so a bad one is a usage error naming the flag).
fn group_pattern(text: &str) -> Result<String, String> {
    melkit::audio::GroupPattern::new(text).map(|_| text.to_string())
}

/// `melctl build`.
#[derive(Debug, Args)]
pub struct BuildArgs {
    /// Dataset root: ROOT/{split}/{class}/*.wav, or ROOT/{class}/*.wav for one split `all`.
    #[arg(
        long,
        short,
        value_name = "ROOT",
        required_unless_present = "manifest",
        conflicts_with = "manifest"
    )]
    pub input: Option<PathBuf>,
    /// A manifest instead of folders: CSV (header `path,label[,split]`, then any metadata
    /// columns, e.g. `speaker`, kept per clip) or JSONL (`{"path": ..., "label": ...,
    /// "split": ..., "speaker": ...}`); paths relative to the manifest's folder.
    #[arg(long, value_name = "FILE.csv|FILE.jsonl")]
    pub manifest: Option<PathBuf>,
    /// Splits and ratios for a manifest without a `split` column or a ROOT/{class} folder,
    /// each file's split drawn from a seeded hash of its group, or of its path without
    /// groups [default: training=0.7,validation=0.2,testing=0.1].
    #[arg(long, value_name = "NAME=R,...")]
    pub split_ratio: Option<String>,
    /// Seed of the split draw [default: 0].
    #[arg(long)]
    pub seed: Option<u64>,
    /// Keep every clip of a group in one split: the group is this manifest column's value
    /// (e.g. `speaker`, so no voice is in both training and testing).
    #[arg(long, value_name = "COLUMN", conflicts_with_all = ["input", "group_pattern"])]
    pub group_by: Option<String>,
    /// Keep every clip of a group in one split: the group is this regular expression's
    /// first capture in each clip's path (`([^/]+)_nohash_` for Speech Commands), stored
    /// as the metadata column `group`.
    #[arg(long, value_name = "REGEX", value_parser = group_pattern)]
    pub group_pattern: Option<String>,
    /// Label map: one class name per line; ids count the class lines from 0, blank and `#`
    /// lines skipped (keeps ids stable).
    #[arg(long, value_name = "FILE")]
    pub labels: Option<PathBuf>,
    /// Output folder; receives OUT/{split}.h5 (created if missing).
    #[arg(long, short, value_name = "OUT")]
    pub output: PathBuf,
    /// Configuration choices.
    #[command(flatten)]
    pub flags: ConfigFlags,
    /// What to do with a file that cannot be decoded: leave it out and list it, or stop.
    #[arg(long, default_value = "skip", value_parser = named::<OnError>())]
    pub on_error: OnError,
    /// Build only these splits (repeatable); default: all.
    #[arg(long = "split", value_name = "NAME")]
    pub splits: Vec<String>,
    /// Write the summary (stages, timings, skipped files) as JSON to this file; `-` writes
    /// it to stdout (the human summary then goes to stderr).
    #[arg(long, value_name = "FILE.json|-")]
    pub report: Option<PathBuf>,
    /// Scan and validate, print what the build would do (layout, splits × classes, files
    /// that would be skipped, output size, backend and loader), and write nothing.
    #[arg(long, conflicts_with = "report")]
    pub dry_run: bool,
    /// Exit with status 3 when any file was skipped (outputs are still written), for
    /// pipelines that must not lose data quietly.
    #[arg(long)]
    pub strict: bool,
    /// Output verbosity.
    #[command(flatten)]
    pub verbosity: Verbosity,
    /// Journal finished batches beside the output (OUT/.SPLIT.resume/), and continue an
    /// interrupted build of the same command from them: the result is identical to an
    /// uninterrupted build.
    #[arg(long)]
    pub resume: bool,
    /// Build shard K of N (numbered from 0) into OUT/shards/K-of-N/, for `melctl merge
    /// OUT`. Each split's sorted file list is cut into N contiguous ranges. Without the
    /// flag, an array task's environment gives it: K is SLURM_ARRAY_TASK_ID or
    /// JOB_COMPLETION_INDEX (a Kubernetes Indexed Job); N is --shards or MELCTL_SHARDS,
    /// else SLURM_ARRAY_TASK_COUNT of a whole array 0..N-1.
    #[arg(long, value_name = "K/N", conflicts_with_all = ["shards", "no_shard", "splits"])]
    pub shard: Option<String>,
    /// The shard count N, with the index from the environment (JOB_COMPLETION_INDEX or
    /// SLURM_ARRAY_TASK_ID).
    #[arg(long, value_name = "N", conflicts_with = "no_shard")]
    pub shards: Option<usize>,
    /// Build the whole tree even in an array task's environment (SLURM_ARRAY_TASK_ID,
    /// JOB_COMPLETION_INDEX).
    #[arg(long)]
    pub no_shard: bool,
}

/// `melctl merge`.
#[derive(Debug, Args)]
pub struct MergeArgs {
    /// The sharded build's output folder: merges OUT/shards/K-of-N/ into OUT/{split}.h5.
    pub output: PathBuf,
    /// The shard count to merge, when OUT/shards holds shards of several counts.
    #[arg(long, value_name = "N")]
    pub shards: Option<usize>,
    /// Threads writing the merged output (0 = all cores).
    #[arg(long, value_name = "N", default_value_t = 0)]
    pub threads: usize,
    /// Write the summary as JSON to this file; `-` writes it to stdout.
    #[arg(long, value_name = "FILE.json|-")]
    pub report: Option<PathBuf>,
    /// Exit with status 3 when the shards left any file out (the output is still written).
    #[arg(long)]
    pub strict: bool,
    /// Output verbosity.
    #[command(flatten)]
    pub verbosity: Verbosity,
}

/// How much a command prints.
#[derive(Debug, Args, Clone, Copy)]
pub struct Verbosity {
    /// Print nothing on success (errors and skipped files still go to stderr).
    #[arg(short, long, conflicts_with = "verbose")]
    pub quiet: bool,
    /// Print the per-stage profiler table, the loader and the queues of every split.
    #[arg(short, long)]
    pub verbose: bool,
    /// How progress is shown: a bar on a terminal and a line every --progress-every
    /// seconds elsewhere (a batch job's log), or always a bar, always lines, or none.
    #[arg(long, value_enum, default_value_t = ProgressArg::Auto)]
    pub progress: ProgressArg,
    /// Seconds between progress lines (where they are lines).
    #[arg(long, default_value_t = 10.0, value_parser = seconds)]
    pub progress_every: f64,
}

/// A number of seconds from 0 to a day.
fn seconds(s: &str) -> Result<f64, String> {
    match s.trim().parse::<f64>() {
        Ok(v) if (0.0..=86_400.0).contains(&v) => Ok(v),
        _ => Err(format!("{s:?} is not a number of seconds from 0 to 86400")),
    }
}

/// `--progress`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, ValueEnum)]
pub enum ProgressArg {
    /// A bar when stderr is a terminal, else lines.
    #[default]
    Auto,
    /// A bar (drawn only where stderr is a terminal).
    Bar,
    /// A line every --progress-every seconds: clips done, rate, time left.
    Lines,
    /// Nothing.
    None,
}

/// `melctl inspect`.
#[derive(Debug, Args)]
pub struct InspectArgs {
    /// An HDF5 file or an npy folder written by melctl.
    pub file: PathBuf,
    /// Clips sampled for the value statistics.
    #[arg(long, default_value_t = 256)]
    pub sample: usize,
    /// Print JSON (for scripts) instead of text.
    #[arg(long)]
    pub json: bool,
}

/// `melctl verify`.
#[derive(Debug, Args)]
pub struct VerifyArgs {
    /// The output folder (`OUT` of `melctl build`).
    pub out: PathBuf,
    /// Print JSON (for scripts) instead of text.
    #[arg(long)]
    pub json: bool,
}

/// `melctl show`.
#[derive(Debug, Args)]
pub struct ShowArgs {
    /// An HDF5 file or an npy folder written by melctl; or an audio file, drawn as its
    /// samples above the spectrogram a build with the configuration flags would store.
    pub file: PathBuf,
    /// The clip to draw (its row).
    #[arg(long, visible_alias = "clip", default_value_t = 0)]
    pub index: usize,
    /// Where to write the picture.
    #[arg(long, short = 'o', visible_alias = "output", value_name = "OUT.png")]
    pub png: PathBuf,
    /// One segment, long window L and short window S, instead of the clip's segments in
    /// time order.
    #[arg(long, value_name = "L,S", value_parser = parse_segment)]
    pub segment: Option<(usize, usize)>,
    /// Each class's mean spectrogram, in a grid.
    #[arg(long, conflicts_with = "index")]
    pub class_means: bool,
    /// The configuration an audio file is shown with (ignored for an output, which
    /// carries its own).
    #[command(flatten)]
    pub flags: ConfigFlags,
}

fn parse_segment(s: &str) -> Result<(usize, usize), String> {
    let (l, r) = s.split_once(',').ok_or("expected L,S (e.g. 10,1)")?;
    let n = |x: &str| x.trim().parse::<usize>().map_err(|e| format!("{x:?}: {e}"));
    Ok((n(l)?, n(r)?))
}

/// `melctl devices`.
#[derive(Debug, Args)]
pub struct DevicesArgs {
    /// Print JSON (for scripts) instead of text.
    #[arg(long)]
    pub json: bool,
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
    /// Output verbosity of the build.
    #[command(flatten)]
    pub verbosity: Verbosity,
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

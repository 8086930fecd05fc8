//! What a build did: per split, kept splits, and the whole build (filled as it goes, so a
//! failed build reports what it did).

use std::path::PathBuf;
use std::time::Duration;

use mel_audio::scan::Skipped;
use mel_core::pipeline::{QueueMetrics, StageMetrics, Verdict};
use mel_core::{ClipFailure, LoaderStats, Provenance};

/// What happened to one split.
#[derive(Debug, Clone)]
pub struct SplitReport {
    /// Split name.
    pub split: String,
    /// Files found.
    pub files: usize,
    /// Clips written.
    pub clips: usize,
    /// Files left out, with reasons.
    pub skipped: Vec<ClipFailure>,
    /// Folders of the split that could not be listed (their files are not in it).
    pub unreadable: Vec<Skipped>,
    /// Clips written per class: (class name, clips), in label order.
    pub classes: Vec<(String, usize)>,
    /// How many clips were resampled, downmixed, padded or trimmed.
    pub provenance: Provenance,
    /// The output (published when the whole build succeeded).
    pub output: PathBuf,
    /// Its size in bytes.
    pub output_bytes: u64,
    /// The loader used and why it was chosen.
    pub loader_choice: String,
    /// The loader's own account (workers, read/decode time, cache outcome).
    pub loader: LoaderStats,
    /// load, mel, write.
    pub stages: Vec<StageMetrics>,
    /// The queues between them.
    pub queues: Vec<QueueMetrics>,
    /// The bottleneck and advice.
    pub verdict: Verdict,
    /// Whole split, wall.
    pub wall: Duration,
}

/// A split an interrupted `--resume` run had already published, kept as it was.
#[derive(Debug, Clone)]
pub struct KeptSplit {
    /// Split name.
    pub split: String,
    /// Its files the kept output lacks (the interrupted run left them out).
    pub skipped: Vec<ClipFailure>,
    /// Folders of the split that could not be listed (their files are not in it).
    pub unreadable: Vec<Skipped>,
}

impl KeptSplit {
    /// Files and folders left out of the kept output.
    pub fn left_out(&self) -> usize {
        self.skipped.len() + self.unreadable.len()
    }

    /// `PATH: REASON` of each file and folder left out.
    pub fn left_out_lines(&self) -> impl Iterator<Item = String> + '_ {
        left_out_lines(&self.skipped, &self.unreadable)
    }
}

impl SplitReport {
    /// Files and folders left out of the output.
    pub fn left_out(&self) -> usize {
        self.skipped.len() + self.unreadable.len()
    }

    /// `PATH: REASON` of each file and folder left out.
    pub fn left_out_lines(&self) -> impl Iterator<Item = String> + '_ {
        left_out_lines(&self.skipped, &self.unreadable)
    }
}

impl BuildReport {
    /// Files and folders left out of every output, built or kept, and audio files the
    /// dataset holds in no split (hidden ones: `ignored` entries with audio in them).
    pub fn left_out(&self) -> usize {
        let kept: usize = self.kept.iter().map(KeptSplit::left_out).sum();
        let ignored: usize = self.ignored.iter().map(|i| i.audio).sum();
        kept + ignored + self.splits.iter().map(SplitReport::left_out).sum::<usize>()
    }

    /// `PATH: REASON` of each ignored entry that is or holds audio.
    pub fn ignored_audio_lines(&self) -> impl Iterator<Item = String> + '_ {
        let audio = self.ignored.iter().filter(|i| i.audio > 0);
        audio.map(|i| format!("{}: {}", i.path.display(), i.reason))
    }
}

/// `PATH: REASON` of each skipped file, then of each unreadable folder.
fn left_out_lines<'a>(
    skipped: &'a [ClipFailure],
    unreadable: &'a [Skipped],
) -> impl Iterator<Item = String> + 'a {
    let files = skipped.iter().map(|f| (&f.path, &f.reason));
    let folders = unreadable.iter().map(|u| (&u.path, &u.reason));
    files
        .chain(folders)
        .map(|(path, reason)| format!("{}: {reason}", path.display()))
}

/// What happened in the whole build (filled as it goes: a failed build reports what it did).
#[derive(Debug, Clone, Default)]
pub struct BuildReport {
    /// One entry per split built.
    pub splits: Vec<SplitReport>,
    /// Splits an interrupted `--resume` run had already published, kept as they were.
    pub kept: Vec<KeptSplit>,
    /// Entries of the dataset that are not built, with why (`Skipped::audio` counts audio).
    pub ignored: Vec<Skipped>,
    /// Whether the outputs were published (false when the build failed or was interrupted).
    pub published: bool,
    /// Whole build, wall.
    pub wall: Duration,
    /// Peak resident memory of the process, if the OS reports it.
    pub peak_rss_bytes: Option<u64>,
    /// Worker threads used.
    pub threads: usize,
    /// The mel backend, and with `auto` why it was chosen.
    pub backend: String,
}

/// Peak resident set size (VmHWM) of this process, on Linux.
pub fn peak_rss_bytes() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb * 1024)
}

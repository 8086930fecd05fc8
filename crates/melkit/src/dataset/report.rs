//! What a build did: per split, kept splits, and the whole build (filled as it goes, so a
//! failed build reports what it did).

use std::path::PathBuf;
use std::time::Duration;

use mel_audio::scan::Skipped;
use mel_core::pipeline::{QueueMetrics, StageMetrics, Verdict};
use mel_core::{AdjustmentCounts, ClipFailure, LoaderStats};

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
    pub provenance: AdjustmentCounts,
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
    /// The backend's name alone (`cpu`, `cuda`, `wgpu`).
    pub backend_name: String,
}

/// Peak resident set size (VmHWM) of this process, on Linux.
pub fn peak_rss_bytes() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb * 1024)
}

fn secs(d: Duration) -> f64 {
    d.as_secs_f64()
}

/// An entry left out of the dataset, as JSON.
fn skipped_json(s: &Skipped) -> serde_json::Value {
    serde_json::json!({"path": s.path.to_string_lossy(), "reason": s.reason})
}

impl BuildReport {
    /// The report as JSON (what `melctl build --report` writes, less the advice in
    /// melctl's flags): the configuration (`config_json`, resolved), the build's figures,
    /// every split's figures, bottleneck and left-out files; `error` is why the build
    /// failed, if it did.
    pub fn to_json(&self, config_json: &str, error: Option<&str>) -> serde_json::Value {
        let r = self;
        let splits: Vec<serde_json::Value> = r
            .splits
            .iter()
            .map(|x| {
                serde_json::json!({
                    "split": x.split,
                    "files": x.files,
                    "clips": x.clips,
                    "output": x.output.to_string_lossy(),
                    "output_bytes": x.output_bytes,
                    "wall_seconds": secs(x.wall),
                    "clips_per_second": x.clips as f64 / secs(x.wall).max(1e-9),
                    "loader_choice": x.loader_choice,
                    "loader": x.loader,
                    "stages": x.stages,
                    "queues": x.queues,
                    "bottleneck": {
                        "stage": x.verdict.bottleneck.map_or("none", |s| s.name()),
                        "utilisation": x.verdict.utilisation,
                        "verdict": x.verdict,
                    },
                    "skipped": x.skipped,
                    "classes": x.classes.iter().map(|(n, c)| serde_json::json!({"class": n, "clips": c})).collect::<Vec<_>>(),
                    "provenance": x.provenance,
                    "unreadable": x.unreadable.iter().map(skipped_json).collect::<Vec<_>>(),
                })
            })
            .collect();
        serde_json::json!({
            "melctl_version": env!("CARGO_PKG_VERSION"),
            "config": serde_json::from_str::<serde_json::Value>(config_json).unwrap_or_default(),
            "threads": r.threads,
            "backend": r.backend,
            "wall_seconds": secs(r.wall),
            "peak_rss_bytes": r.peak_rss_bytes,
            "ok": error.is_none(),
            "error": error,
            "published": r.published,
            "kept": r.kept.iter().map(|k| &k.split).collect::<Vec<_>>(),
            "kept_skipped": r.kept.iter().map(|k| serde_json::json!({
                "split": k.split,
                "skipped": k.skipped,
                "unreadable": k.unreadable.iter().map(skipped_json).collect::<Vec<_>>(),
            })).collect::<Vec<_>>(),
            "ignored": r.ignored.iter().map(skipped_json).collect::<Vec<_>>(),
            "splits": splits,
        })
    }
}

//! Building a dataset in-process, with the guarantees of `melctl build`: per split, a
//! loader → mel backend → sink pipeline into a temporary output; the output folder locked
//! for the whole build; every split published only when all have succeeded, then the
//! build record that names them; with `resume`, finished batches journalled and an
//! interrupted build continued.
//!
//! ```no_run
//! use std::sync::{Arc, atomic::AtomicBool};
//! use melkit::dataset::{BuildReport, BuildRequest, Host, NoObserver, Source};
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let config = melkit::Preset::Leak4k.config();
//! let mut request = BuildRequest::new(Source::Folder("clips".into()), "out", config);
//! request.host = Host::with_env(|name| std::env::var_os(name));
//! let prepared = request.prepare()?; // every check melctl build makes, before any work
//! let mut report = BuildReport::default();
//! prepared.run(&NoObserver, &Arc::new(AtomicBool::new(false)), &mut report)?;
//! # Ok(())
//! # }
//! ```
//!
//! A request is checked and its dataset listed once ([`BuildRequest::prepare`]); progress
//! and notices reach the caller through an [`Observer`]; the library reads no environment
//! variable (the host's facts are handed in, [`Host`]) and prints nothing. [`Build`] is the
//! layer below: a listed dataset's splits, built with settings the caller resolved.

mod cache;
mod error;
mod loaders;
pub mod merge;
mod outputs;
mod report;
mod request;
mod resume;
mod run;
pub mod shard;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::Instant;

use mel_audio::{Dataset, ScannedSplit};
use mel_core::atomic::DirLock;
use mel_core::config::LoaderKind;
use mel_core::outputs::{Guard, Output};
use mel_core::{ClipFailure, ClipMeta, Config, MelPlan, SourceInfo};

pub use cache::default_cache_dir;
pub use error::{Error, Result};
pub use merge::{MergeReport, MergedSplit, merge};
pub use outputs::{check_split_names, final_path};
pub use report::{BuildReport, KeptSplit, SplitReport, peak_rss_bytes};
pub use request::{BuildRequest, Host, Labels, PreparedBuild, Source, Splitting};
pub use shard::{Shard, ShardOutcome, build_shard};

/// What a build does with a file it cannot decode.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum OnError {
    /// Leave it out, name it in the report, and build the rest.
    #[default]
    Skip,
    /// Stop at the first one and write nothing.
    Fail,
}

impl mel_core::config::Named for OnError {
    const WHAT: &'static str = "way to handle a bad file";
    const ALL: &'static [Self] = &[OnError::Skip, OnError::Fail];
    fn name(self) -> &'static str {
        match self {
            OnError::Skip => "skip",
            OnError::Fail => "fail",
        }
    }
    fn about(self) -> &'static str {
        match self {
            OnError::Skip => "leave the file out, list it in the summary and the report",
            OnError::Fail => "stop with a non-zero exit and the file's path; nothing is written",
        }
    }
}

/// Everything a build needs besides the dataset, resolved once.
#[derive(Debug, Clone)]
pub struct BuildSettings {
    /// The spectrogram, run and output configuration.
    pub config: Config,
    /// Skip or stop at a file that cannot be decoded.
    pub on_error: OnError,
    /// Splits to build; empty: all. The folder's other splits stay as they are.
    pub only: Vec<String>,
    /// Journal finished batches beside the output and continue an interrupted build.
    pub resume: bool,
    /// Where the memmap loader keeps decoded audio (needed when `run.loader` is `auto` or
    /// `memmap`).
    pub cache_dir: Option<PathBuf>,
}

impl BuildSettings {
    /// Settings for `config`: skip bad files, build every split, no journal, no cache.
    pub fn new(config: Config) -> Self {
        BuildSettings {
            config,
            on_error: OnError::Skip,
            only: Vec::new(),
            resume: false,
            cache_dir: None,
        }
    }

    /// Whether split `name` is one this build writes.
    pub fn builds(&self, name: &str) -> bool {
        self.only.is_empty() || self.only.iter().any(|o| o == name)
    }
}

/// Told what a build is doing, as it happens (from the calling thread and the pipeline's
/// writer thread). Every method has a default that ignores it.
pub trait Observer: Sync {
    /// A line worth telling the user: a resume's state, a backend that did not start, a
    /// file left from an earlier build.
    fn notice(&self, _line: &str) {}
    /// A line the user may need to act on even when asking for quiet: a backend that did
    /// not start and was replaced, a file left from an earlier build. By default a notice.
    fn warning(&self, line: &str) {
        self.notice(line)
    }
    /// Split `split` starts computing `clips` clips.
    fn split_started(&self, _split: &str, _clips: u64) {}
    /// `n` more clips of the split being computed are done.
    fn progress(&self, _n: u64) {}
    /// The split being computed is done computing, every file of it read (those left out
    /// included): it is published with the others.
    fn split_finished(&self, _split: &str) {}
    /// The split being computed stopped before its end (an error, a cancel): the build's
    /// error follows.
    fn split_stopped(&self, _split: &str) {}
    /// The outputs are about to be published: the last moment at which the cancel flag
    /// stops the run (nothing published). Called once, on the run's thread, right before
    /// that check; a front end that raises the flag from elsewhere (a callback's error,
    /// an interrupt) decides before returning from here, so that no error of its own is
    /// raised after a publish it did not stop.
    fn before_publish(&self) {}
}

/// An observer that ignores everything.
#[derive(Debug, Clone, Copy, Default)]
pub struct NoObserver;

impl Observer for NoObserver {}

/// A build of a dataset's splits, its settings checked.
#[derive(Debug)]
pub struct Build<'a> {
    dataset: &'a Dataset,
    settings: BuildSettings,
    plan: MelPlan,
    /// Whether it builds whole splits (`false`: a shard's part of each, which may be left
    /// with no clip while the split has some: the merge judges the whole split).
    whole: bool,
}

impl<'a> Build<'a> {
    /// Checks `settings` against `dataset` once: the configuration (a mel plan), the split
    /// names asked for, and a cache folder where the loader may need one.
    pub fn new(dataset: &'a Dataset, settings: BuildSettings) -> Result<Self> {
        let plan = MelPlan::from_config(&settings.config)?;
        check_split_names(dataset, &settings.only)?;
        let cached = matches!(
            settings.config.run.loader,
            LoaderKind::Auto | LoaderKind::Memmap
        );
        if cached && settings.cache_dir.is_none() {
            return Err(Error::Core(mel_core::Error::config(
                "run.cache_dir",
                "the loader may use the decoded-audio cache, and no cache folder was given",
            )));
        }
        Ok(Build {
            dataset,
            settings,
            plan,
            whole: true,
        })
    }

    /// A build whose settings [`BuildRequest::prepare`] checked, with their plan.
    fn prepared(dataset: &'a Dataset, settings: BuildSettings, plan: MelPlan) -> Self {
        Build {
            dataset,
            settings,
            plan,
            whole: true,
        }
    }

    /// The same build of a shard's part of each split.
    fn of_a_shard(mut self) -> Self {
        self.whole = false;
        self
    }

    /// The settings.
    pub fn settings(&self) -> &BuildSettings {
        &self.settings
    }

    /// The mel plan every split is computed with.
    pub fn plan(&self) -> &MelPlan {
        &self.plan
    }

    /// The splits this build writes, in the dataset's order.
    pub fn splits(&self) -> impl Iterator<Item = &'a ScannedSplit> + '_ {
        self.dataset
            .splits
            .iter()
            .filter(|s| self.settings.builds(&s.name))
    }

    /// Every path a build into `out` writes, with what it is (for [`Guard::check`]).
    pub fn planned_outputs(&self, out: &Path) -> Vec<Output> {
        outputs::planned_outputs(self.dataset, &self.settings, out)
    }

    /// Protects every audio file of the dataset in `guard`.
    pub fn protect_inputs(&self, guard: &mut Guard) {
        outputs::protect_inputs(guard, self.dataset)
    }

    /// The loader each split would get and why, without building any; a preload too
    /// large for memory is refused as the build would refuse it.
    pub fn loader_choices(&self) -> Result<Vec<(String, String)>> {
        loaders::check_preloads(
            &self.settings.config,
            self.splits(),
            mel_loaders::select::available_memory(),
        )?;
        if self.plan.cutting().is_some() {
            let line = "whole files (each decoded whole, then cut into rows: whole clips' blocks or windows)";
            return Ok(self
                .splits()
                .map(|s| (s.name.clone(), line.to_string()))
                .collect());
        }
        self.splits()
            .map(|s| {
                let (choice, _) = loaders::loader_choice(
                    self.dataset,
                    &s.name,
                    &s.files,
                    &self.settings.config,
                    self.cache_dir(),
                )?;
                Ok((s.name.clone(), loaders::describe(&choice)))
            })
            .collect()
    }

    fn cache_dir(&self) -> &Path {
        self.settings.cache_dir.as_deref().unwrap_or(Path::new(""))
    }

    /// Builds the chosen splits into `out`, filling `report` as it goes. Every split is
    /// finished under a temporary name first; only when all have succeeded are they
    /// published, so a failed or cancelled build leaves the previous outputs as they
    /// were. The output folder is locked for the whole build. Raising `cancel` stops the
    /// build before its publish; once the publish has begun it completes.
    pub fn run(
        &self,
        out: &Path,
        observer: &dyn Observer,
        cancel: &Arc<AtomicBool>,
        report: &mut BuildReport,
    ) -> Result<()> {
        let created = std::fs::symlink_metadata(out).is_err();
        let result = timed(report, |report| {
            let _lock = lock_folder(out)?;
            self.run_locked(out, observer, cancel, report)
        });
        // A build that made the output folder and published nothing leaves no empty
        // folder behind (`remove_dir` takes only an empty one).
        if result.is_err() && created {
            let _ = std::fs::remove_dir(out);
        }
        result
    }
}

/// `PATH: REASON` of the first file left out (skipped while built, or unreadable when
/// scanned).
fn left_out_first(skipped: &[ClipFailure], unreadable: &[mel_audio::scan::Skipped]) -> String {
    match (skipped.first(), unreadable.first()) {
        (Some(f), _) => format!("{}: {}", f.path.display(), f.reason),
        (None, Some(u)) => format!("{}: {}", u.path.display(), u.reason),
        (None, None) => "none named".into(),
    }
}

/// Creates the output folder `out` if needed and takes its lock: one build (or merge)
/// writes into a folder at a time.
fn lock_folder(out: &Path) -> Result<DirLock> {
    std::fs::create_dir_all(out).map_err(|e| mel_core::Error::io(out, e))?;
    Ok(DirLock::try_now(out)?)
}

/// Runs `f`, then records its wall time and the process's peak memory in `report`.
fn timed<T>(report: &mut BuildReport, f: impl FnOnce(&mut BuildReport) -> T) -> T {
    let started = Instant::now();
    let r = f(report);
    report.wall = started.elapsed();
    report.peak_rss_bytes = peak_rss_bytes();
    r
}

/// Clips written per class: the split's files of each class less those skipped.
pub fn class_counts(
    label_names: &[String],
    split: &ScannedSplit,
    skipped: &[ClipFailure],
) -> Vec<(String, usize)> {
    let mut counts = vec![0usize; label_names.len()];
    for f in &split.files {
        counts[f.label as usize] += 1;
    }
    for s in skipped {
        counts[split.files[s.index].label as usize] -= 1;
    }
    label_names.iter().cloned().zip(counts).collect()
}

/// The metadata of file `index` of `split`.
fn clip_meta(split: &ScannedSplit, index: usize) -> ClipMeta {
    let f = &split.files[index];
    ClipMeta {
        meta: f.meta.clone(),
        index,
        source: SourceInfo::default(),
        label: f.label,
        path: f.rel.clone(),
    }
}

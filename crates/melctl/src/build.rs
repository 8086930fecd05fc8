//! `melctl build`: scan → per split: pick a loader → run loader → mel backend → HDF5
//! sink as concurrent stages (mel_core::pipeline) → collect the stage metrics.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use mel_audio::scan::Skipped;
use mel_audio::{Dataset, FileEntry, Split};
use mel_core::atomic::DirLock;
use mel_core::config::{LoaderKind, SinkKind};
use mel_core::outputs::{Guard, Output, Written};
use mel_core::pipeline::{self, QueueMetrics, RunOptions, StageMetrics, Verdict};
use mel_core::{
    ClipFailure, ClipMeta, Config, Finished, Loader, LoaderStats, MelPlan, Provenance, Sink,
    SinkSpec, SourceInfo,
};
use mel_loaders::{CacheKey, CacheLoader, Lazy, PreloadLoader, StreamLoader};
use mel_sinks::{
    Hdf5Options, Hdf5Sink, Journal, JournalState, NpyOptions, NpySink, publish_build,
    remove_journal,
};

use crate::cli::OnError;
use crate::progress::Progress;

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

/// How `build` treats bad files, which splits it builds, and whether it journals.
#[derive(Debug, Clone)]
pub struct BuildOptions {
    /// Skip or stop at a file that cannot be decoded.
    pub on_error: OnError,
    /// Splits to build; empty: all.
    pub only: Vec<String>,
    /// Journal finished batches and continue an interrupted build (`mel_sinks::journal`).
    pub resume: bool,
}

/// The sink `output.sink` names, for `spec`, under `out`, writing with `threads` threads
/// and marking the output as build `build_id`'s.
fn make_sink(
    config: &Config,
    out: &Path,
    spec: SinkSpec,
    threads: usize,
    build_id: &str,
) -> Result<Box<dyn Sink>> {
    Ok(match config.output.sink {
        SinkKind::Hdf5 => Box::new(
            Hdf5Sink::create(
                out,
                spec,
                Hdf5Options {
                    chunk_clips: config.hdf5.chunk_clips,
                    gzip: config.hdf5.gzip,
                    fsync: config.output.fsync,
                    writers: threads,
                },
            )?
            .with_build(build_id),
        ),
        SinkKind::Npy => Box::new(
            NpySink::create(
                out,
                spec,
                NpyOptions {
                    fsync: config.output.fsync,
                },
            )?
            .with_build(build_id),
        ),
    })
}

/// Every path a build of `dataset`'s chosen splits into `out` writes, with what it is:
/// the splits' outputs, the build record and, with `--resume`, the journals.
pub fn planned_outputs(
    dataset: &Dataset,
    config: &Config,
    out: &Path,
    options: &BuildOptions,
) -> Vec<Output> {
    let written = match config.output.sink {
        SinkKind::Hdf5 => Written::File,
        SinkKind::Npy => Written::Folder,
    };
    let mut outputs = Vec::new();
    let chosen = dataset
        .splits
        .iter()
        .filter(|s| options.only.is_empty() || options.only.contains(&s.name));
    for split in chosen {
        let what = format!("the output of split {}", split.name);
        outputs.push(Output::new(
            final_path(config, out, &split.name),
            what,
            written,
        ));
        if options.resume {
            outputs.push(Output::new(
                mel_sinks::journal::journal_dir(out, &split.name),
                format!("the resume journal of split {}", split.name),
                Written::Folder,
            ));
        }
    }
    outputs.push(Output::new(
        mel_core::record::path(out),
        "the build record",
        Written::File,
    ));
    outputs
}

/// Protects every audio file of `dataset` (all splits: a `--split` build still must not
/// replace another split's input).
pub fn protect_inputs(guard: &mut Guard, dataset: &Dataset) {
    for f in dataset.splits.iter().flat_map(|s| &s.files) {
        guard.input(&f.path, "an input of this build");
    }
}

/// Where the sink `output.sink` names puts split `split` under `out`.
fn final_path(config: &Config, out: &Path, split: &str) -> PathBuf {
    match config.output.sink {
        SinkKind::Hdf5 => out.join(format!("{split}.h5")),
        SinkKind::Npy => out.join(format!("{split}.npy.d")),
    }
}

/// Refuses a `--split` name the dataset does not have, listing those it has.
pub fn check_split_names(dataset: &Dataset, only: &[String]) -> Result<()> {
    for name in only {
        if !dataset.splits.iter().any(|s| &s.name == name) {
            let known: Vec<_> = dataset.splits.iter().map(|s| s.name.as_str()).collect();
            bail!(
                "no split named {name:?} in {} (found: {})",
                dataset.root.display(),
                known.join(", ")
            );
        }
    }
    Ok(())
}

/// `dataset` with only the splits named in `only` (all when it is empty).
pub fn only_splits(dataset: &Dataset, only: &[String]) -> Result<Dataset> {
    check_split_names(dataset, only)?;
    let mut chosen = dataset.clone();
    chosen
        .splits
        .retain(|s| only.is_empty() || only.contains(&s.name));
    Ok(chosen)
}

/// Builds every split of `dataset` (or those named in `options.only`) into `out`, filling
/// `report` as it goes. Every split is finished under a temporary name first; only when
/// all of them have succeeded are they published, so a failed build leaves the previous
/// outputs as they were. The output folder is locked for the whole build.
pub fn build(
    dataset: &Dataset,
    config: &Config,
    out: &Path,
    options: &BuildOptions,
    progress: &Progress,
    cancel: Arc<AtomicBool>,
    report: &mut BuildReport,
) -> Result<()> {
    let started = Instant::now();
    let r = build_inner(dataset, config, out, options, progress, cancel, report);
    report.wall = started.elapsed();
    report.peak_rss_bytes = peak_rss_bytes();
    r
}

fn build_inner(
    dataset: &Dataset,
    config: &Config,
    out: &Path,
    options: &BuildOptions,
    progress: &Progress,
    cancel: Arc<AtomicBool>,
    report: &mut BuildReport,
) -> Result<()> {
    let (on_error, only, resume) = (options.on_error, &options.only, options.resume);
    let plan = MelPlan::from_config(config)?;
    std::fs::create_dir_all(out)
        .with_context(|| format!("cannot create output folder {}", out.display()))?;
    let _lock = DirLock::try_now(out)?;
    report.ignored = dataset.ignored.clone();
    check_split_names(dataset, only)?;
    let chosen_splits: Vec<&Split> = dataset
        .splits
        .iter()
        .filter(|s| only.is_empty() || only.contains(&s.name))
        .collect();
    if let Some(first) = chosen_splits.first()
        && !only.is_empty()
    {
        check_kept_splits_match(out, only, &first.name, &dataset.label_names, config)?;
    }
    if on_error == OnError::Fail
        && let Some(u) = chosen_splits.iter().flat_map(|s| &s.unreadable).next()
    {
        bail!(
            "{}: {} (--on-error fail stops at the first bad entry and writes nothing)",
            u.path.display(),
            u.reason
        );
    }
    let threads = rayon::current_num_threads();
    report.threads = threads;
    // One backend for every split: device setup and kernel compilation happen once.
    let chosen = crate::backend::choose(&plan, config)?;
    report.backend = chosen.line;
    let mut backend = chosen.backend;
    let mut finished: Vec<(String, Finished, Option<Journal>)> = Vec::new();
    // Every output of this build carries its id; the build record names it once all
    // are published.
    let build_id = mel_core::record::new_build_id();
    // An explicit preload too large for memory is refused before any split is computed.
    check_preloads(config, chosen_splits.iter().copied())?;
    // Output buffers shared by the splits' runs (their pages are faulted in once).
    let buffers = pipeline::OutputPool::default();
    for split in chosen_splits {
        let t0 = Instant::now();
        let spec = SinkSpec {
            split: split.name.clone(),
            rows: split.files.len(),
            plan: plan.clone(),
            label_names: dataset.label_names.clone(),
            provenance: config.resolved_json(),
        };
        // With --resume, the pipeline computes only what the journal lacks, into it.
        let mut journal = None;
        let mut todo: Vec<usize> = (0..split.files.len()).collect();
        if resume {
            let fingerprint =
                journal_fingerprint(config, backend.name(), &dataset.label_names, split);
            let j = Journal::open(out, &split.name, fingerprint, &plan, split.files.len())?;
            errln!("{}: resume: {}", split.name, describe_journal(j.state()));
            let published = final_path(config, out, &split.name);
            if let Some(build) = j.committed_build() {
                // The journal's word is checked against what is at the final path: a
                // later build may have replaced it.
                match melread::commit::verify_published(&published, &build) {
                    Ok(()) => {
                        errln!(
                            "{}: resume: already built by the interrupted run; kept",
                            split.name
                        );
                        let skipped = missing_from_kept(&published, split)?;
                        // --on-error fail promises every file or nothing: a kept split
                        // that lacks files breaks it as a skipped file would.
                        if on_error == OnError::Fail
                            && let Some(f) = skipped.first()
                        {
                            bail!(
                                "{}: {} file(s) missing from split {}, which the interrupted run published without them (first: {}); --on-error fail: build again without --resume",
                                published.display(),
                                skipped.len(),
                                split.name,
                                f.path.display()
                            );
                        }
                        report.kept.push(KeptSplit {
                            split: split.name.clone(),
                            skipped,
                            unreadable: split.unreadable.clone(),
                        });
                        continue;
                    }
                    Err(e) => errln!(
                        "{}: resume: the interrupted run published this split, but it is no longer what is there ({}); building it again",
                        split.name,
                        crate::inspect::one_line(&e.to_string())
                    ),
                }
            }
            let done = j.done();
            todo.retain(|&i| !done[i]);
            journal = Some(j);
        }
        let files: Vec<FileEntry> = todo.iter().map(|&i| split.files[i].clone()).collect();
        let (loader, loader_choice) =
            make_loader(dataset, &split.name, &files, config, threads, &cancel)?;
        let sink = match &journal {
            Some(j) => j.sink(),
            None => make_sink(config, out, spec.clone(), threads, &build_id)?,
        };
        let bar = progress.bar(files.len() as u64, &format!("build {}", split.name));
        // Clip `i` of this run is file `todo[i]` of the split.
        let meta = |i: usize| clip_meta(split, todo[i]);
        let opts = RunOptions {
            queue_depth: config.run.queue_depth,
            stop_on_failure: on_error == OnError::Fail,
            cancel: cancel.clone(),
            buffers: buffers.clone(),
        };
        let result = pipeline::run(loader, backend.as_mut(), sink, &meta, &opts, &|n| {
            bar.inc(n as u64)
        });
        bar.finish_and_clear();
        let r = result.map_err(|e| match e {
            e @ (mel_core::Error::Decode { .. }
            | mel_core::Error::Unsupported { .. }
            | mel_core::Error::Io { .. }
            | mel_core::Error::Limit { .. })
                if on_error == OnError::Fail =>
            {
                anyhow::anyhow!(
                    "{e} (split {}; --on-error fail stops at the first bad file and writes nothing)",
                    split.name
                )
            }
            mel_core::Error::Cancelled if resume => anyhow::anyhow!(
                "interrupted: split {} was not written; its finished batches are in the journal: run the same command with --resume to continue",
                split.name
            ),
            mel_core::Error::Cancelled => anyhow::anyhow!(
                "interrupted: split {} was not written; no output was changed",
                split.name
            ),
            other => other.into(),
        })?;
        let skipped: Vec<ClipFailure> = r
            .failures
            .iter()
            .map(|f| ClipFailure {
                index: todo[f.index],
                path: split.files[todo[f.index]].path.clone(),
                ..f.clone()
            })
            .collect();
        let (output, clips) = match journal.as_mut() {
            Some(j) => {
                let sink = make_sink(config, out, spec, threads, &build_id)?;
                let f = j.assemble(sink, &|i| clip_meta(split, i))?;
                let clips = split.files.len() - skipped.len();
                (f, clips)
            }
            None => (r.output, r.rows),
        };
        let verdict = pipeline::verdict(&r.stages, r.wall.as_secs_f64(), &r.loader);
        let classes = class_counts(&dataset.label_names, split, &skipped);
        report.splits.push(SplitReport {
            split: split.name.clone(),
            files: split.files.len(),
            clips,
            classes,
            provenance: output.provenance(),
            skipped,
            unreadable: split.unreadable.clone(),
            output: output.final_path().to_path_buf(),
            output_bytes: output.bytes(),
            loader_choice,
            loader: r.loader,
            stages: r.stages,
            queues: r.queues,
            verdict,
            wall: t0.elapsed(),
        });
        finished.push((split.name.clone(), output, journal));
    }
    // Every split succeeded. A plain build makes any journal of the splits it replaces
    // stale: removed first, so no journal can vouch for an output it did not write.
    if !resume {
        for (name, _, _) in &finished {
            remove_journal(out, name)?;
        }
    }
    // Publish them all, then the build record that names them, then the journals' note.
    let mut journals = Vec::new();
    let mut outputs = Vec::new();
    for (name, output, journal) in finished {
        outputs.push((name, output));
        journals.extend(journal);
    }
    // A whole build vouches only for what it built or kept from an interrupted publish;
    // a `--split` build leaves the other splits as the record names them.
    let kept: Vec<&str> = report.kept.iter().map(|k| k.split.as_str()).collect();
    let keep =
        |name: &str| kept.contains(&name) || !(only.is_empty() || only.iter().any(|o| o == name));
    let built: Vec<String> = outputs.iter().map(|(n, _)| n.clone()).collect();
    let dropped: Vec<String> = match mel_core::record::read(out) {
        Ok(Some(r)) => r
            .splits
            .into_iter()
            .filter(|(n, e)| !keep(n) && !built.contains(n) && out.join(&e.output).exists())
            .map(|(_, e)| e.output)
            .collect(),
        _ => Vec::new(),
    };
    // The last point where an interrupt stops the build: once the publish begins, it
    // completes whole (main says so if an interrupt came during it).
    if cancel.load(std::sync::atomic::Ordering::SeqCst) {
        anyhow::bail!(
            "interrupted before the outputs were committed: no output was changed{}",
            if resume {
                "; the finished batches are in the journals: run the same command with --resume to continue"
            } else {
                ""
            }
        );
    }
    publish_build(out, &build_id, outputs, &keep, config.output.fsync)?;
    for name in dropped {
        errln!(
            "note: {} is left from an earlier build and is not part of this one (readers refuse it); remove it",
            out.join(name).display()
        );
    }
    for mut j in journals {
        j.mark_committed(&build_id)?;
    }
    report.published = true;
    if resume {
        let kept = report.kept.iter().map(|k| &k.split);
        for name in report.splits.iter().map(|s| &s.split).chain(kept) {
            remove_journal(out, name)?;
        }
    }
    Ok(())
}

/// A `--split` build leaves the folder's other splits as its build record names them: each
/// must mean the same thing by the same numbers as the splits built now (one label map, one
/// mel configuration), or the folder would pair, say, class 0 = `aaa` in training with
/// class 0 = `leak` in testing. Checked before any work.
fn check_kept_splits_match(
    out: &Path,
    only: &[String],
    built: &str,
    label_names: &[String],
    config: &Config,
) -> Result<()> {
    let Some(record) = mel_core::record::read(out)? else {
        return Ok(());
    };
    let resolved: serde_json::Value = serde_json::from_str(&config.resolved_json())?;
    for (name, entry) in record.splits.iter().filter(|(n, _)| !only.contains(n)) {
        let path = out.join(&entry.output);
        if std::fs::symlink_metadata(&path).is_err() {
            continue;
        }
        let kept = melread::Split::open(&path)
            .with_context(|| format!("--split keeps split {name}, which does not open"))?;
        kept.check_matches(built, label_names, &resolved).with_context(|| {
            format!(
                "--split {built} would leave {} beside it built another way; rebuild every split (no --split), or build with the same classes and settings",
                path.display()
            )
        })?;
    }
    Ok(())
}

/// Refuses `--loader preload` when the arena of any of `splits` would not fit in memory.
fn check_preloads<'a>(config: &Config, splits: impl IntoIterator<Item = &'a Split>) -> Result<()> {
    if config.run.loader != LoaderKind::Preload {
        return Ok(());
    }
    let available = mel_loaders::select::available_memory();
    for split in splits {
        let decoded = (split.files.len() * config.audio.clip_samples() * 4) as u64;
        mel_loaders::select::check_preload(decoded, available)
            .map_err(|e| anyhow::anyhow!("split {}: {e}", split.name))?;
    }
    Ok(())
}

/// The files of `split` that the output a `--resume` run keeps does not hold: those the
/// interrupted run skipped, which must still be named (and counted by `--strict`).
fn missing_from_kept(output: &Path, split: &Split) -> Result<Vec<ClipFailure>> {
    let kept = melread::Split::open(output).map_err(|e| {
        anyhow::anyhow!(
            "{}: the output an interrupted run published does not read back ({e}); remove it or build without --resume",
            output.display()
        )
    })?;
    let stored: std::collections::HashSet<&str> = kept.paths().iter().map(String::as_str).collect();
    Ok(split
        .files
        .iter()
        .enumerate()
        .filter(|(_, f)| !stored.contains(f.rel.as_str()))
        .map(|(index, f)| ClipFailure {
            index,
            path: f.path.clone(),
            kind: mel_core::FailureKind::Other,
            reason: "left out by the interrupted run that published this split (kept as it was; that run named the reason)"
                .into(),
        })
        .collect())
}

/// Clips written per class: the split's files of each class less those skipped.
pub fn class_counts(
    label_names: &[String],
    split: &Split,
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
fn clip_meta(split: &Split, index: usize) -> ClipMeta {
    let f = &split.files[index];
    ClipMeta {
        index,
        source: SourceInfo::default(),
        label: f.label,
        path: f.rel.clone(),
    }
}

/// What a resume journal is for: every setting that changes output values (the resolved
/// spec), the backend that actually runs, the class names, and the split's files
/// (the fingerprint the memmap cache uses too).
fn journal_fingerprint(config: &Config, backend: &str, labels: &[String], split: &Split) -> u128 {
    let mut h = xxhash_rust::xxh3::Xxh3::new();
    let spec = serde_json::to_string(&config.spec().resolved()).expect("a spec serialises");
    h.update(spec.as_bytes());
    h.update(&[0]);
    h.update(backend.as_bytes());
    h.update(&[0]);
    h.update(labels.join("\0").as_bytes());
    h.update(&mel_audio::files_fingerprint(&split.files, &config.audio).to_le_bytes());
    h.digest128()
}

/// A journal's state in words.
fn describe_journal(state: &JournalState) -> String {
    match state {
        JournalState::Started => "no journal; starting".into(),
        JournalState::Restarted => {
            "the journal is from another configuration, backend or file set; starting over".into()
        }
        JournalState::Resumed {
            clips,
            batches,
            dropped,
        } => format!(
            "{clips} clips in {batches} journal batches{}",
            if dropped.is_empty() {
                String::new()
            } else {
                format!("; dropped and redone: {}", dropped.join(", "))
            }
        ),
    }
}

/// The cache folder the configuration names; by default `$XDG_CACHE_HOME/melctl`, else
/// `~/.cache/melctl`, else this user's own folder in the system's temporary folder
/// (`melctl-cache-UID`, mode 0700): a shared, predictable `/tmp/melctl-cache` could be
/// made first by another user, who would then serve this user's decoded audio.
pub fn cache_dir(config: &Config) -> Result<PathBuf> {
    if !config.run.cache_dir.is_empty() {
        return Ok(PathBuf::from(&config.run.cache_dir));
    }
    let var = |name| std::env::var_os(name).filter(|x| !x.is_empty());
    if let Some(x) = var("XDG_CACHE_HOME") {
        return Ok(PathBuf::from(x).join("melctl"));
    }
    if let Some(h) = var("HOME") {
        return Ok(PathBuf::from(h).join(".cache").join("melctl"));
    }
    use std::os::unix::fs::{DirBuilderExt, MetadataExt};
    // SAFETY: getuid has no preconditions.
    let uid = unsafe { libc::getuid() };
    let dir = std::env::temp_dir().join(format!("melctl-cache-{uid}"));
    let _ = std::fs::DirBuilder::new().mode(0o700).create(&dir);
    let m = std::fs::symlink_metadata(&dir)
        .with_context(|| format!("cannot create the cache folder {}", dir.display()))?;
    if !m.is_dir() || m.uid() != uid || m.mode() & 0o077 != 0 {
        anyhow::bail!(
            "{}: the default cache folder (no HOME or XDG_CACHE_HOME) is not a private folder of this user; set --cache-dir",
            dir.display()
        );
    }
    Ok(dir)
}

/// The loader each split would get and why, without building any (`--dry-run`); an
/// explicit preload too large for memory is refused as the build would refuse it.
pub fn loader_choices(dataset: &Dataset, config: &Config) -> Result<Vec<(String, String)>> {
    check_preloads(config, &dataset.splits)?;
    dataset
        .splits
        .iter()
        .map(|s| {
            let choice = loader_choice(dataset, &s.name, &s.files, config)?.0;
            Ok((
                s.name.clone(),
                format!("{} ({})", choice.kind.name(), choice.reason),
            ))
        })
        .collect()
}

/// `run.loader` resolved for a split of `files`, and the cache key when one is needed.
fn loader_choice(
    dataset: &Dataset,
    split: &str,
    files: &[FileEntry],
    config: &Config,
) -> Result<(mel_loaders::Choice, Option<CacheKey>)> {
    let needs_key = matches!(config.run.loader, LoaderKind::Auto | LoaderKind::Memmap);
    let key = if needs_key {
        Some(CacheKey::new(
            &cache_dir(config)?,
            &dataset.root,
            split,
            files,
            &config.audio,
        )?)
    } else {
        None
    };
    let cache_exists = key.as_ref().is_some_and(|k| k.path.exists());
    let choice = mel_loaders::choose(config.run.loader, cache_exists);
    Ok((choice, key))
}

/// Resolves `run.loader` for `split` and builds the loader (lazily: its up-front work runs
/// inside the pipeline's load stage). Returns it with a line saying which and why.
fn make_loader(
    dataset: &Dataset,
    split: &str,
    files: &[FileEntry],
    config: &Config,
    threads: usize,
    cancel: &Arc<AtomicBool>,
) -> Result<(Box<dyn Loader>, String)> {
    let audio = config.audio.clone();
    let stop = cancel.clone();
    // Called before each file a preload or a cache build decodes: an interrupt stops it.
    let on_file = move || !stop.load(std::sync::atomic::Ordering::Relaxed);
    let batch = config.run.batch_clips;
    let (choice, key) = loader_choice(dataset, split, files, config)?;
    let files: Vec<FileEntry> = files.to_vec();
    let line = format!("{} ({})", choice.kind.name(), choice.reason);
    let loader: Box<dyn Loader> = match choice.kind {
        LoaderKind::Preload => Box::new(Lazy::new("preload", move || {
            Ok(Box::new(PreloadLoader::load(&files, &audio, batch, &on_file)?) as Box<dyn Loader>)
        })),
        LoaderKind::Memmap => {
            let key = key.expect("a key for memmap");
            Box::new(Lazy::new("memmap", move || {
                Ok(
                    Box::new(CacheLoader::open(&key, &files, &audio, batch, &on_file)?)
                        as Box<dyn Loader>,
                )
            }))
        }
        LoaderKind::Stream | LoaderKind::Auto => Box::new(StreamLoader::start(
            files,
            &audio,
            batch,
            threads,
            &config.run.stream,
            config.run.queue_depth + 2,
        )?),
    };
    Ok((loader, line))
}

/// Peak resident set size (VmHWM) of this process, on Linux.
pub fn peak_rss_bytes() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb * 1024)
}

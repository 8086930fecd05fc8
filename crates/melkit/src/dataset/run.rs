//! A build's run, in named phases: the checks before any work, the shared start (one
//! backend, the build id, the pools), each split (where a resume picks up, the pipeline,
//! what it wrote), and the all-or-nothing publish.

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use mel_audio::{FileEntry, ScannedSplit};
use mel_core::pipeline::{self, RunOptions, RunResult};
use mel_core::{ClipFailure, Finished, MelBackend, SinkSpec};
use mel_loaders::pool::SpareBuffers;
use mel_sinks::{Journal, publish_build, remove_journal};

use super::{
    Build, BuildReport, Error, KeptSplit, Observer, OnError, Result, SplitReport, class_counts,
    clip_meta, final_path, left_out_first, loaders, outputs, resume,
};

/// What a build's splits share while it runs.
struct Run<'r> {
    out: &'r Path,
    observer: &'r dyn Observer,
    cancel: &'r Arc<AtomicBool>,
    /// One backend for every split: device setup and kernel compilation happen once.
    backend: Box<dyn MelBackend>,
    /// Every output of this build carries it; the build record names it once all are
    /// published.
    build_id: String,
    threads: usize,
    /// Output buffers shared by the splits' runs (their pages are faulted in once).
    buffers: pipeline::OutputPool,
    /// Sample buffers shared by the splits' streaming loaders (faulted in once).
    samples: SpareBuffers,
    /// The checks' and statistics' threads, shared by the splits' runs.
    checks: pipeline::CheckPool,
}

/// A split computed, waiting for the publish.
struct Computed {
    name: String,
    output: Finished,
    journal: Option<Journal>,
}

/// Where a split's computation starts: the files still to compute (indices into the
/// split) and, when resuming, the journal they go into.
struct Start {
    todo: Vec<usize>,
    journal: Option<Journal>,
}

impl Build<'_> {
    /// [`run`](Self::run) into `out`, whose lock the caller holds.
    pub(super) fn run_locked(
        &self,
        out: &Path,
        observer: &dyn Observer,
        cancel: &Arc<AtomicBool>,
        report: &mut BuildReport,
    ) -> Result<()> {
        report.ignored = self.dataset.ignored.clone();
        let chosen: Vec<&ScannedSplit> = self.splits().collect();
        self.check_before(out, &chosen)?;
        let mut run = self.start(out, observer, cancel, &chosen, report)?;
        let mut computed = Vec::new();
        for split in chosen {
            // A cancel raised before this split (during the scan, or the last split's
            // end) stops here, not after another split's work.
            if cancel.load(Ordering::SeqCst) {
                return Err(self.interrupted(Some(&split.name)));
            }
            computed.extend(self.build_split(&mut run, split, report)?);
        }
        self.publish(&run, computed, report)
    }

    /// The refusals before any work: splits kept beside a partial build must match it,
    /// and failing on a bad file fails on one the scan could not read.
    fn check_before(&self, out: &Path, chosen: &[&ScannedSplit]) -> Result<()> {
        let (only, config) = (&self.settings.only, &self.settings.config);
        if let Some(first) = chosen.first()
            && !only.is_empty()
        {
            let labels = &self.dataset.label_names;
            resume::check_kept_splits_match(out, only, &first.name, labels, config)?;
        }
        if self.settings.on_error == OnError::Fail
            && let Some((split, u)) = chosen
                .iter()
                .flat_map(|s| s.unreadable.iter().map(move |u| (s, u)))
                .next()
        {
            return Err(Error::Stopped {
                split: split.name.clone(),
                cause: format!("{}: {}", u.path.display(), u.reason),
            });
        }
        Ok(())
    }

    /// What every split shares: the backend (its warnings told), the build id, the
    /// pools; a preload too large for memory refused before any split is computed.
    fn start<'r>(
        &self,
        out: &'r Path,
        observer: &'r dyn Observer,
        cancel: &'r Arc<AtomicBool>,
        chosen: &[&ScannedSplit],
        report: &mut BuildReport,
    ) -> Result<Run<'r>> {
        let config = &self.settings.config;
        let threads = rayon::current_num_threads();
        report.threads = threads;
        let chosen_backend = crate::backend::choose_described(&self.plan, config)?;
        for line in &chosen_backend.warnings {
            observer.warning(line);
        }
        report.backend = chosen_backend.line;
        let backend = chosen_backend.backend;
        report.backend_name = backend.name().to_string();
        let available = mel_loaders::select::available_memory();
        loaders::check_preloads(config, chosen.iter().copied(), available)?;
        Ok(Run {
            out,
            observer,
            cancel,
            backend,
            build_id: mel_core::record::new_build_id(),
            threads,
            buffers: pipeline::OutputPool::default(),
            samples: SpareBuffers::default(),
            checks: pipeline::CheckPool::new(threads),
        })
    }

    /// Computes `split` (what a resume lacks of it), or keeps it as an interrupted run
    /// published it (`None`), filling `report`.
    fn build_split(
        &self,
        run: &mut Run<'_>,
        split: &ScannedSplit,
        report: &mut BuildReport,
    ) -> Result<Option<Computed>> {
        let t0 = Instant::now();
        let Some(start) = self.resume_point(run, split, report)? else {
            return Ok(None);
        };
        let (r, loader_choice) = self.compute(run, split, &start)?;
        let Start { todo, mut journal } = start;
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
                let sink = self.sink(run, split, split.files.len())?;
                let f = j.assemble(sink, &|i| clip_meta(split, i))?;
                (f, split.files.len() - skipped.len())
            }
            // Whole clips: a row is a block; the clips are the files built.
            None if self.plan.whole().is_some() => (r.output, split.files.len() - skipped.len()),
            None => (r.output, r.rows),
        };
        // A split none of whose files made it is not published over what is there (a
        // shard's part may be left empty: the merge judges the whole split).
        if clips == 0 && !split.files.is_empty() && self.whole {
            return Err(Error::NothingLeft {
                split: split.name.clone(),
                files: split.files.len(),
                first: left_out_first(&skipped, &split.unreadable),
            });
        }
        let verdict = pipeline::verdict(&r.stages, r.wall.as_secs_f64(), &r.loader);
        let classes = class_counts(&self.dataset.label_names, split, &skipped);
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
        Ok(Some(Computed {
            name: split.name.clone(),
            output,
            journal,
        }))
    }

    /// Where `split`'s computation starts: every file; or, resuming, what its journal
    /// lacks; or nothing (`None`) when the interrupted run published it and it is still
    /// what is at its path (kept, in `report`).
    fn resume_point(
        &self,
        run: &Run<'_>,
        split: &ScannedSplit,
        report: &mut BuildReport,
    ) -> Result<Option<Start>> {
        let mut todo: Vec<usize> = (0..split.files.len()).collect();
        if !self.settings.resume {
            return Ok(Some(Start {
                todo,
                journal: None,
            }));
        }
        let (config, observer, name) = (&self.settings.config, run.observer, &split.name);
        let labels = &self.dataset.label_names;
        let fingerprint = resume::journal_fingerprint(config, run.backend.name(), labels, split);
        let rows = split.files.len();
        let j = Journal::open(run.out, name, fingerprint, &self.plan, rows)?;
        let state = resume::describe_journal(j.state());
        let line = format!("{name}: resume: {state}");
        // Starting over loses the interrupted run's work: a warning, said under --quiet.
        match j.state() {
            mel_sinks::JournalState::Restarted => observer.warning(&line),
            _ => observer.notice(&line),
        }
        let published = final_path(config, run.out, name);
        if let Some(build) = j.committed_build() {
            // The journal's word is checked against what is at the final path: a later
            // build may have replaced it.
            match melread::commit::verify_published(&published, &build) {
                Ok(()) => {
                    observer.notice(&format!(
                        "{name}: resume: already built by the interrupted run; kept"
                    ));
                    report.kept.push(self.kept(split, &published)?);
                    return Ok(None);
                }
                Err(e) => observer.notice(&format!(
                    "{name}: resume: the interrupted run published this split, but it is no longer what is there ({}); building it again",
                    mel_core::error::one_line(&e.to_string())
                )),
            }
        }
        let done = j.done();
        todo.retain(|&i| !done[i]);
        Ok(Some(Start {
            todo,
            journal: Some(j),
        }))
    }

    /// `split` kept as the interrupted run published it at `published`, with the files
    /// it lacks; failing on a bad file promises every file or nothing, so a kept split
    /// that lacks files breaks it as a skipped file would.
    fn kept(&self, split: &ScannedSplit, published: &Path) -> Result<KeptSplit> {
        let skipped = resume::missing_from_kept(published, split)?;
        if self.settings.on_error == OnError::Fail
            && let Some(f) = skipped.first()
        {
            return Err(Error::KeptIncomplete {
                output: published.to_path_buf(),
                split: split.name.clone(),
                missing: skipped.len(),
                first: f.path.clone(),
            });
        }
        Ok(KeptSplit {
            split: split.name.clone(),
            skipped,
            unreadable: split.unreadable.clone(),
        })
    }

    /// Runs the pipeline over `start`'s files of `split` (into the journal when
    /// resuming), telling the observer; returns its result and the loader's line.
    fn compute(
        &self,
        run: &mut Run<'_>,
        split: &ScannedSplit,
        start: &Start,
    ) -> Result<(RunResult, String)> {
        let config = &self.settings.config;
        let todo = &start.todo;
        let files: Vec<FileEntry> = todo.iter().map(|&i| split.files[i].clone()).collect();
        let files_to_load = files.len() as u64;
        let env = loaders::LoaderEnv {
            cache_dir: self.cache_dir(),
            threads: run.threads,
            cancel: run.cancel,
            spares: &run.samples,
        };
        let (loader, choice, rows) = match self.plan.cutting() {
            Some(_) => {
                let loader = mel_loaders::WholeLoader::start(
                    files,
                    &self.plan,
                    config.run.batch_clips,
                    run.threads,
                    loaders::read_options(config),
                    run.cancel.clone(),
                )?;
                let rows = loader.rows();
                let line = match self.plan.whole() {
                    Some(_) => "whole (audio.length = \"whole\": each file decoded whole)",
                    None => {
                        "whole files (audio.windows: each file decoded whole, cut into windows)"
                    }
                }
                .to_string();
                (
                    Box::new(loader) as Box<dyn mel_core::AudioLoader>,
                    line,
                    rows,
                )
            }
            None => {
                let (loader, choice) =
                    loaders::make_loader(self.dataset, &split.name, files, config, &env)?;
                (loader, choice, split.files.len())
            }
        };
        let sink = match &start.journal {
            Some(j) => j.sink(),
            None => self.sink(run, split, rows)?,
        };
        let progress_total = if self.plan.cutting().is_some() {
            rows as u64
        } else {
            files_to_load
        };
        run.observer.split_started(&split.name, progress_total);
        // Clip `i` of this run is file `todo[i]` of the split.
        let meta = |i: usize| clip_meta(split, todo[i]);
        let opts = RunOptions {
            queue_depth: config.run.queue_depth,
            stop_on_failure: self.settings.on_error == OnError::Fail,
            cancel: run.cancel.clone(),
            buffers: run.buffers.clone(),
            checks: run.checks.clone(),
        };
        let observer = run.observer;
        let result = pipeline::run(loader, run.backend.as_mut(), sink, &meta, &opts, &|n| {
            observer.progress(n as u64)
        });
        match &result {
            Ok(_) => observer.split_finished(&split.name),
            Err(_) => observer.split_stopped(&split.name),
        }
        let r = result.map_err(|e| self.split_error(&split.name, e))?;
        Ok((r, choice))
    }

    /// The sink of `split`'s final output, of at most `rows` rows (a file each, or
    /// for whole clips a block each).
    fn sink(
        &self,
        run: &Run<'_>,
        split: &ScannedSplit,
        rows: usize,
    ) -> Result<Box<dyn mel_core::Sink>> {
        let spec = SinkSpec {
            meta_columns: self.dataset.meta_columns.clone(),
            split: split.name.clone(),
            rows,
            plan: self.plan.clone(),
            label_names: self.dataset.label_names.clone(),
            provenance: self.settings.config.resolved_json(),
        };
        let config = &self.settings.config;
        outputs::make_sink(config, run.out, spec, run.threads, &run.build_id)
    }

    /// A pipeline's error on split `name` as the build's: a bad file when failing on
    /// one, an interrupt, or what the layers below said.
    fn split_error(&self, name: &str, e: mel_core::Error) -> Error {
        match e {
            e @ (mel_core::Error::Decode { .. }
            | mel_core::Error::Unsupported { .. }
            | mel_core::Error::Io { .. }
            | mel_core::Error::Limit { .. })
                if self.settings.on_error == OnError::Fail =>
            {
                Error::Stopped {
                    split: name.to_string(),
                    cause: e.to_string(),
                }
            }
            mel_core::Error::Cancelled => self.interrupted(Some(name)),
            other => Error::Core(other),
        }
    }

    /// The build interrupted while computing `split` (`None`: before its publish).
    fn interrupted(&self, split: Option<&str>) -> Error {
        Error::Interrupted {
            split: split.map(str::to_string),
            journaled: self.settings.resume,
        }
    }

    /// Every split succeeded: publishes them all, then the build record that names them,
    /// then the journals' note. A cancel seen before the publish stops it; once the
    /// publish begins it completes whole.
    fn publish(
        &self,
        run: &Run<'_>,
        computed: Vec<Computed>,
        report: &mut BuildReport,
    ) -> Result<()> {
        let (out, resume) = (run.out, self.settings.resume);
        // A plain build makes any journal of the splits it replaces stale: removed first,
        // so no journal can vouch for an output it did not write.
        if !resume {
            for c in &computed {
                remove_journal(out, &c.name)?;
            }
        }
        let mut journals = Vec::new();
        let mut published = Vec::new();
        for c in computed {
            published.push((c.name, c.output));
            journals.extend(c.journal);
        }
        // A whole build vouches only for what it built or kept from an interrupted
        // publish; a build of some splits leaves the others as the record names them.
        let kept: Vec<&str> = report.kept.iter().map(|k| k.split.as_str()).collect();
        let keep = |name: &str| kept.contains(&name) || !self.settings.builds(name);
        let built: Vec<&str> = published.iter().map(|(n, _)| n.as_str()).collect();
        let dropped = left_from_earlier(out, &keep, &built);
        run.observer.before_publish();
        if run.cancel.load(Ordering::SeqCst) {
            return Err(self.interrupted(None));
        }
        let fsync = self.settings.config.output.fsync;
        publish_build(out, &run.build_id, published, &keep, fsync)?;
        for name in dropped {
            run.observer.warning(&format!(
                "note: {} is left from an earlier build and is not part of this one (readers refuse it); remove it",
                out.join(name).display()
            ));
        }
        for mut j in journals {
            j.mark_committed(&run.build_id)?;
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
}

/// The outputs the record under `out` names that this publish neither keeps nor
/// rewrites, and that are still there.
fn left_from_earlier(out: &Path, keep: &dyn Fn(&str) -> bool, built: &[&str]) -> Vec<String> {
    match mel_core::record::read(out) {
        Ok(Some(r)) => r
            .splits
            .into_iter()
            .filter(|(n, e)| {
                !keep(n) && !built.contains(&n.as_str()) && out.join(&e.output).exists()
            })
            .map(|(_, e)| e.output)
            .collect(),
        _ => Vec::new(),
    }
}

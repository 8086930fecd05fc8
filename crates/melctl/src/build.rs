//! `melctl build` over melkit's build: the request from the flags (the host's facts from
//! this process's environment), what it reads and writes said on stderr, the progress
//! bar and notices, the report, and the words of its errors (flag names, what to type
//! next).

use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};

use anyhow::{Context, Result};
use melkit::core::Config;
use melkit::core::config::Overrides;
pub use melkit::dataset::BuildReport;
use melkit::dataset::{
    BuildRequest, Error, Host, Labels, Observer, PreparedBuild, Shard, ShardOutcome, Source,
    Splitting,
};

use crate::cli::BuildArgs;
use crate::progress::Progress;
use crate::{EXIT_SKIPPED, dryrun, report};

/// The request `args` make, with `config` resolved from their flags, for `shard`.
pub fn request(args: &BuildArgs, config: Config, shard: Option<Shard>) -> Result<BuildRequest> {
    let source = match (&args.input, &args.manifest) {
        (Some(root), _) => Source::Folder(root.clone()),
        (None, Some(path)) => Source::Manifest(path.clone()),
        (None, None) => anyhow::bail!("give --input ROOT or --manifest FILE"),
    };
    let mut request = BuildRequest::new(source, &args.output, config);
    request.splitting = Splitting {
        ratios: args
            .split_ratio
            .as_deref()
            .map(melkit::audio::ManifestOptions::parse_ratios)
            .transpose()
            .map_err(|why| anyhow::anyhow!("--split-ratio: {why}"))?,
        seed: args.seed,
        group_by: args.group_by.clone(),
        group_pattern: args.group_pattern.clone(),
    };
    request.labels = args.labels.clone().map(Labels::File);
    request.config_file = args.flags.config.clone();
    request.on_error = args.on_error;
    request.only = args.splits.clone();
    request.resume = args.resume;
    request.shard = shard;
    request.report = args.report.clone().filter(|p| !to_stdout(p));
    request.host = Host::with_env(|name| std::env::var_os(name));
    Ok(request)
}

/// Whether the report goes to stdout (`--report -`).
fn to_stdout(path: &std::path::Path) -> bool {
    path == std::path::Path::new("-")
}

/// Says on stderr what the build reads and, for a shard, which part and where the shard
/// came from (`shard_from`): unless `--quiet`.
pub fn announce(args: &BuildArgs, prepared: &PreparedBuild, shard_from: &str) {
    let dataset = prepared.dataset();
    if let Some(note) = split_names_note(args, dataset) {
        errln!("{note}");
    }
    if args.verbosity.quiet {
        return;
    }
    let files = |d: &melkit::audio::Dataset| d.splits.iter().map(|s| s.files.len()).sum::<usize>();
    if let Some(shard) = prepared.request().shard {
        errln!(
            "shard {shard} (from {shard_from}): {} of the {} files, into {}",
            files(prepared.tree()),
            files(dataset),
            prepared.out_dir().display()
        );
    }
    let config = &prepared.settings().config;
    let per = if prepared.plan().whole().is_some() {
        "whole clips, each stored as rows (blocks) of"
    } else {
        "per clip:"
    };
    errln!(
        "{}: {}, {}, {}; {per} {:?} {}",
        prepared.request().source.path().display(),
        dryrun::count(dataset.splits.len(), "split", "splits"),
        dryrun::count(dataset.label_names.len(), "class", "classes"),
        dryrun::count(files(dataset), "file", "files"),
        prepared.plan().clip_shape(),
        config.output.dtype.name(),
    );
}

/// `--dry-run`: what would be built, how, and where; the backend is started to be sure
/// it works (a CUDA device, a wgpu adapter), as the build would.
pub fn dry_run(prepared: &PreparedBuild, flags: &Overrides) -> Result<u8> {
    let (config, plan) = (&prepared.settings().config, prepared.plan());
    let chosen = melkit::backend::choose_described(plan, config)?;
    for line in &chosen.warnings {
        errln!("{line}");
    }
    let loaders = prepared.loader_choices().map_err(|e| in_words(e, flags))?;
    out!(
        "{}",
        dryrun::text(
            &prepared.chosen_tree(),
            match &prepared.request().source {
                Source::Manifest(path) => Some(path),
                Source::Folder(_) => None,
            },
            config,
            plan,
            prepared.out_dir(),
            &chosen.line,
            &loaders
        )?
    );
    Ok(0)
}

/// After the run: the summary, the report asked for (a retry of a complete shard's too),
/// the build's error, and the exit status (`--strict`: 3 when files were left out).
pub fn finish(
    args: &BuildArgs,
    prepared: &PreparedBuild,
    report: &BuildReport,
    built: Result<ShardOutcome>,
    cancel: &AtomicBool,
) -> Result<u8> {
    let (quiet, verbose) = (args.verbosity.quiet, args.verbosity.verbose);
    let report_to_stdout = args.report.as_deref().is_some_and(to_stdout);
    // A complete shard, verified: an array task's retry has nothing to do, but what its
    // build left out is named again, and --strict fails on it as it did then.
    let earlier = match &built {
        Ok(ShardOutcome::AlreadyComplete { skipped }) => Some(skipped.clone()),
        _ => None,
    };
    if let Some(skipped) = &earlier {
        for line in skipped {
            errln!("skipped {line} (left out by the shard's earlier build)");
        }
    } else if built.is_ok() && !quiet {
        let summary = report::text(report, verbose);
        if report_to_stdout {
            err!("{summary}");
        } else {
            out!("{summary}");
        }
    }
    if let Some(path) = &args.report {
        write_report(path, prepared, report, &built)?;
    }
    built?;
    let left_out = match earlier {
        Some(skipped) => skipped.len(),
        None => {
            say_interrupt_came_late(cancel);
            if quiet {
                name_left_out(report);
            }
            report.left_out()
        }
    };
    if args.strict && left_out > 0 {
        errln!(
            "error: --strict: {} skipped (listed above); the {}outputs were written",
            dryrun::count(left_out, "file was", "files were"),
            if prepared.request().shard.is_some() {
                "shard's "
            } else {
                ""
            }
        );
        return Ok(EXIT_SKIPPED);
    }
    Ok(0)
}

/// Writes the report to `path` (`-`: stdout): every run writes the report it was asked
/// for, a retry of a complete shard too (a stale report would otherwise stay at the
/// path). A report that cannot be written is said beside the build's own failure, never
/// instead of it.
fn write_report(
    path: &std::path::Path,
    prepared: &PreparedBuild,
    report: &BuildReport,
    built: &Result<ShardOutcome>,
) -> Result<()> {
    let error = built.as_ref().err().map(crate::error_line);
    let json = report::json(
        prepared.report_json(report, built.as_ref().ok(), error.as_deref()),
        report,
    );
    let text = serde_json::to_string_pretty(&json)? + "\n";
    if to_stdout(path) {
        out!("{text}");
        return Ok(());
    }
    let written = melkit::core::atomic::write_file(path, text.as_bytes(), false)
        .with_context(|| format!("cannot write the report to {}", path.display()));
    match (built, written) {
        (Err(_), Err(e)) => {
            errln!("error: {}", crate::error_line(&e));
            Ok(())
        }
        (Ok(_), Err(e)) => Err(e),
        (_, Ok(())) => Ok(()),
    }
}

/// An interrupt seen after the build's last check came while the outputs were being
/// committed, which completes whole rather than stopping: said so.
fn say_interrupt_came_late(cancel: &AtomicBool) {
    if cancel.load(Ordering::SeqCst) {
        errln!(
            "note: the interrupt came while the outputs were being committed: the build completed and its outputs are whole"
        );
    }
}

/// `--quiet` prints nothing on success, but nothing is dropped without being named.
fn name_left_out(report: &BuildReport) {
    let kept = report.kept.iter().flat_map(|k| k.left_out_lines());
    let kept = kept.chain(report.ignored_audio_lines());
    for line in kept.chain(report.splits.iter().flat_map(|x| x.left_out_lines())) {
        errln!("skipped {line}");
    }
}

/// A note when folder splits have no name a split usually has: `ROOT/dog/day1/*.wav`
/// builds splits `dog` and `cat` of classes `day1`, `day2`, which is valid but rarely
/// meant (a class-per-folder tree one level too deep).
fn split_names_note(args: &BuildArgs, dataset: &melkit::audio::Dataset) -> Option<String> {
    const SPLIT_WORDS: [&str; 7] = ["train", "val", "test", "dev", "eval", "hold", "all"];
    let names: Vec<&str> = dataset.splits.iter().map(|s| s.name.as_str()).collect();
    let split_like = |n: &&str| {
        let n = n.to_lowercase();
        SPLIT_WORDS.iter().any(|w| n.contains(w))
    };
    if args.input.is_none() || names.iter().any(split_like) {
        return None;
    }
    Some(format!(
        "note: the folders {} are read as splits (ROOT/{{split}}/{{class}}/), with classes {}; if they are classes, put them in one folder: ROOT/{{class}}/ builds one split `all`",
        names.join(", "),
        dataset.label_names.join(", ")
    ))
}

/// The build's observer on a terminal: notices on stderr, one progress bar per split.
pub struct Terminal<'a> {
    progress: &'a Progress,
    bar: Mutex<Option<crate::progress::Meter>>,
    /// `--quiet`: warnings only, no notices.
    quiet: bool,
}

impl<'a> Terminal<'a> {
    /// Notices (unless `quiet`) and warnings on stderr, bars from `progress`.
    pub fn new(progress: &'a Progress, quiet: bool) -> Self {
        Terminal {
            progress,
            bar: Mutex::new(None),
            quiet,
        }
    }

    fn with_bar(&self, f: impl FnOnce(&mut Option<crate::progress::Meter>)) {
        f(&mut self.bar.lock().unwrap_or_else(|p| p.into_inner()));
    }
}

impl Observer for Terminal<'_> {
    fn notice(&self, line: &str) {
        if !self.quiet {
            errln!("{line}");
        }
    }

    fn warning(&self, line: &str) {
        errln!("{line}");
    }

    fn split_started(&self, split: &str, clips: u64) {
        let bar = self.progress.meter(clips, &format!("build {split}"));
        self.with_bar(|b| *b = Some(bar));
    }

    fn progress(&self, n: u64) {
        self.with_bar(|b| {
            if let Some(bar) = b {
                bar.inc(n)
            }
        });
    }

    fn split_finished(&self, _split: &str) {
        self.with_bar(|b| {
            if let Some(bar) = b.take() {
                bar.finish()
            }
        });
    }

    fn split_stopped(&self, _split: &str) {
        self.with_bar(|b| {
            if let Some(bar) = b.take() {
                bar.stop()
            }
        });
    }
}

/// The first Ctrl-C (or SIGTERM, SIGHUP) raises `cancel`, which stops the work cleanly
/// with no output committed; a second exits at once (status 130).
///
/// The flag is raised inside the signal handler, so a thread the signal interrupts sees
/// it as soon as the interrupted call returns: an interrupt during the outputs' publish
/// is always reported as such. (A handler thread, as the `ctrlc` crate has, raised it
/// later: a build that finished first exited without a word of the interrupt.)
pub fn stop_on_ctrl_c(cancel: &Arc<AtomicBool>) {
    use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};
    const SIGNALS: [i32; 3] = [SIGINT, SIGTERM, SIGHUP];
    for signal in SIGNALS {
        // The exit goes first: it acts only once an earlier signal has raised the flag.
        let _ = signal_hook::flag::register_conditional_shutdown(signal, 130, cancel.clone());
        let _ = signal_hook::flag::register(signal, cancel.clone());
    }
    // The message, from a thread of its own (a handler may not print).
    if let Ok(mut signals) = signal_hook::iterator::Signals::new(SIGNALS) {
        let _ = std::thread::Builder::new()
            .name("ctrl-c".into())
            .spawn(move || {
                if signals.forever().next().is_some() {
                    say_interrupted();
                }
            });
    }
}

/// Says that an interrupt came if `cancel` is raised: the command calls it before it
/// reports how the interrupt ended, so the line is never lost to a process that exits
/// before the signal's message thread runs.
pub fn say_if_interrupted(cancel: &AtomicBool) {
    if cancel.load(std::sync::atomic::Ordering::SeqCst) {
        say_interrupted();
    }
}

/// Says once that an interrupt came, from whichever thread gets there first.
fn say_interrupted() {
    use std::sync::atomic::{AtomicBool, Ordering};
    static SAID: AtomicBool = AtomicBool::new(false);
    if !SAID.swap(true, Ordering::SeqCst) {
        errln!("\ninterrupted: stopping (each output is committed whole or not at all)");
    }
}

/// A build error in the CLI's words: what was refused, and the flag (of those in `flags`)
/// or command to use.
pub fn in_words(e: Error, flags: &Overrides) -> anyhow::Error {
    match e {
        Error::Stopped { split, cause } => anyhow::anyhow!(
            "{cause} (split {split}; --on-error fail stops at the first bad file and writes nothing)"
        ),
        Error::Interrupted {
            split: Some(split),
            journaled: true,
        } => anyhow::anyhow!(
            "interrupted: split {split} was not written; its finished batches are in the journal: run the same command with --resume to continue"
        ),
        Error::Interrupted {
            split: Some(split),
            journaled: false,
        } => anyhow::anyhow!("interrupted: split {split} was not written; no output was changed"),
        Error::Interrupted {
            split: None,
            journaled,
        } => anyhow::anyhow!(
            "interrupted before the outputs were committed: no output was changed{}",
            if journaled {
                "; the finished batches are in the journals: run the same command with --resume to continue"
            } else {
                ""
            }
        ),
        Error::ShardOfSomeSplits { shard } => anyhow::anyhow!(
            "--split with shard {shard}: a shard holds its part of every split, or the shards cannot be merged; drop --split, or pass --no-shard"
        ),
        e @ Error::KeptIncomplete { .. } => {
            anyhow::anyhow!("{e}; --on-error fail: build again without --resume")
        }
        Error::KeptMismatch {
            path,
            built,
            reason,
        } => anyhow::anyhow!(
            "--split {built} would leave {} beside it, {reason}; rebuild every split (no --split), or build with the same classes and settings",
            path.display()
        ),
        Error::Core(e) => flags.in_words(e).into(),
        e => e.into(),
    }
}

//! melctl: labelled audio folders to log-mel-spectrogram datasets.
// Everything melctl prints goes through `term` (out!, outln!, err!, errln!): print! and
// eprint! panic on a closed or full stdout/stderr (`melctl inspect X | head -1`, `>/dev/full`).
#![deny(clippy::print_stdout, clippy::print_stderr)]

#[macro_use]
mod term;
mod advice;
mod build;
mod cli;
mod demo;
mod dryrun;
mod inspect;
mod progress;
mod report;
mod settings;
mod shard;
mod show;

use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use anyhow::{Context, Result};
use clap::Parser;
use mel_core::MelPlan;
use mel_core::config::BackendKind;

use cli::{BuildArgs, Cli, Command, OnError};

/// Exit status after an interrupt (128 + SIGINT), as shells report it.
const EXIT_INTERRUPTED: u8 = 130;
/// Exit status when writing to stdout or stderr failed (BSD's EX_IOERR).
const EXIT_OUTPUT_FAILED: u8 = 74;
/// Exit status when a memory-mapped file changed while it was read (BSD's EX_IOERR).
const EXIT_MAPPED_INPUT_CHANGED: u8 = 74;

fn main() -> ExitCode {
    let cli = Cli::parse();
    quiet_vulkan_loader();
    on_sigbus_explain_and_exit();
    // Where NVRTC may be, beyond the usual places: the environment is the CLI's to read.
    mel_cuda::add_nvrtc_dirs(
        ["MELCTL_NVRTC_DIR", "CUDA_PATH", "CUDA_HOME", "CUDA_ROOT"]
            .iter()
            .filter_map(|v| std::env::var_os(v).filter(|x| !x.is_empty()))
            .map(std::path::PathBuf::from),
    );
    let interrupted = Arc::new(AtomicBool::new(false));
    let code = match run(cli, &interrupted) {
        Ok(code) => ExitCode::from(code),
        Err(e) => {
            errln!("error: {}", error_line(&e));
            if interrupted.load(Ordering::SeqCst) {
                ExitCode::from(EXIT_INTERRUPTED)
            } else {
                ExitCode::FAILURE
            }
        }
    };
    // A failed write to stdout or stderr (a full disk, a broken terminal) is an error of its
    // own, whatever the work's outcome; a closed stdout (`| head`) is not.
    match term::failure() {
        Some(failure) => {
            errln!("error: {failure}");
            ExitCode::from(EXIT_OUTPUT_FAILED)
        }
        None => code,
    }
}

/// An error and its causes on one line, each cause once: a cause whose text the message
/// already holds (an error that prints its source and also names it) is not repeated.
fn error_line(e: &anyhow::Error) -> String {
    let mut line = String::new();
    for cause in e.chain() {
        let text = mel_core::error::one_line(&cause.to_string());
        if line.contains(&text) {
            continue;
        }
        if !line.is_empty() {
            line += ": ";
        }
        line += &text;
    }
    line
}

/// Probing Vulkan (wgpu's adapters) makes the loader print "error: XDG_RUNTIME_DIR is
/// invalid or not set" to stderr, twice, when the variable is missing (a server, CI, a
/// container). Point it at a private folder of ours before any thread starts.
fn quiet_vulkan_loader() {
    use std::os::unix::fs::{DirBuilderExt, MetadataExt};
    let usable = std::env::var_os("XDG_RUNTIME_DIR")
        .map(std::path::PathBuf::from)
        .and_then(|d| std::fs::metadata(d).ok())
        .is_some_and(|m| m.is_dir());
    if usable {
        return;
    }
    // SAFETY: getuid has no preconditions.
    let uid = unsafe { libc::getuid() };
    let dir = std::env::temp_dir().join(format!("melctl-runtime-{uid}"));
    let _ = std::fs::DirBuilder::new().mode(0o700).create(&dir);
    let ours = std::fs::metadata(&dir).is_ok_and(|m| m.is_dir() && m.uid() == uid);
    if ours {
        // SAFETY: called first thing in main, before any other thread exists.
        unsafe { std::env::set_var("XDG_RUNTIME_DIR", &dir) };
    }
}

/// A file mapped into memory (the decoded-audio cache) that shrinks under the process
/// makes the next read of it raise SIGBUS. Say what happened instead of dying silently;
/// nothing was published (outputs are renamed into place only at the end).
fn on_sigbus_explain_and_exit() {
    melread::sigbus::exit_on_sigbus(
        "error: a memory-mapped file changed under melctl (the decoded-audio cache or a dataset being read was truncated or replaced by another process, or its disk failed); nothing was published; run again once it is complete (the cache is checked and rebuilt)",
        EXIT_MAPPED_INPUT_CHANGED,
    );
}

fn run(cli: Cli, interrupted: &Arc<AtomicBool>) -> Result<u8> {
    match cli.command {
        Command::Build(args) => run_build(&args, interrupted),
        Command::Merge(args) => shard::run_merge(&args, interrupted),
        Command::Inspect(args) => {
            let summary = inspect::summarize(&args.file, args.sample)?;
            if args.json {
                outln!("{}", serde_json::to_string_pretty(&summary)?);
            } else {
                out!("{}", inspect::text(&summary)?);
            }
            Ok(0)
        }
        Command::Show(args) => {
            show::show(
                &args.file,
                args.index,
                &args.png,
                args.segment,
                args.class_means,
            )?;
            errln!("wrote {}", args.png.display());
            Ok(0)
        }
        Command::Devices(args) if args.json => {
            outln!("{}", serde_json::to_string_pretty(&devices_json())?);
            Ok(0)
        }
        Command::Devices(_) => {
            out!("{}", devices_text());
            Ok(0)
        }
        Command::Config(args) => {
            let config = settings::resolve(&args.flags)?;
            MelPlan::from_config(&config)?;
            out!("{}", settings::annotated_toml(&config));
            Ok(0)
        }
        Command::Demo(args) => {
            let data = args.dir.join("data");
            let config = settings::resolve(&args.flags)?;
            let (rate, clip) = (config.audio.sample_rate, config.audio.clip_samples());
            if !args.verbosity.quiet {
                errln!(
                    "generating {} clips of {clip} samples at {rate} Hz under {}",
                    args.clips,
                    data.display()
                );
            }
            let n = demo::generate(&data, args.clips, rate, clip)?;
            if !args.verbosity.quiet {
                errln!("{n} clips ready");
            }
            if args.no_build {
                return Ok(0);
            }
            run_build(
                &BuildArgs {
                    input: Some(data),
                    manifest: None,
                    split_ratio: None,
                    seed: None,
                    labels: None,
                    output: args.dir.join("out"),
                    flags: args.flags,
                    on_error: OnError::Skip,
                    splits: vec![],
                    report: Some(args.dir.join("report.json")),
                    resume: false,
                    dry_run: false,
                    strict: false,
                    verbosity: args.verbosity,
                    // The demo builds its whole tree, in an array task too.
                    shard: None,
                    shards: None,
                    no_shard: true,
                },
                interrupted,
            )
        }
    }
}

/// Exit status of `--strict` when files were skipped.
pub(crate) const EXIT_SKIPPED: u8 = 3;

#[allow(clippy::too_many_lines)] // on tests/tidy.rs's shrinking list: cut it into named phases
fn run_build(args: &BuildArgs, cancel: &Arc<AtomicBool>) -> Result<u8> {
    let config = settings::resolve(&args.flags)?;
    let plan = MelPlan::from_config(&config)?;
    if config.run.backend == BackendKind::Cpu && config.run.device.is_some() {
        anyhow::bail!("--device picks a GPU; --backend cpu uses none (drop one of them)");
    }
    if let Some(available) = melkit::loaders::select::available_memory() {
        mel_core::pipeline::check_memory(&config, &plan, available)?;
    }
    let report_to_stdout = args.report.as_deref() == Some(std::path::Path::new("-"));
    let (quiet, verbose) = (args.verbosity.quiet, args.verbosity.verbose);
    // Device discovery for `auto` runs while the dataset is scanned.
    let _discovery = melkit::backend::prewarm(config.run.backend);
    start_workers(config.run.threads)?;
    let (dataset, source) = load_dataset(args)?;
    let sharded = shard::choose(args, &|name| std::env::var(name).ok())?;
    if let Some(c) = &sharded
        && !args.splits.is_empty()
    {
        anyhow::bail!(
            "--split with shard {} (from {}): a shard holds its part of every split, or the shards cannot be merged; drop --split, or pass --no-shard",
            c.shard,
            c.source
        );
    }
    let settings = build::settings(config.clone(), args)?;
    // A shard builds its part of every split (the whole tree's label map) into
    // OUT/shards/K-of-N.
    let part = sharded.as_ref().map(|c| c.shard.part(&dataset));
    let tree = part.as_ref().unwrap_or(&dataset);
    let out_dir = match &sharded {
        Some(c) => c.shard.dir(&args.output),
        None => args.output.clone(),
    };
    let builder = melkit::dataset::Build::new(tree, settings.clone()).map_err(build::in_words)?;
    check_outputs(
        args,
        &builder,
        &out_dir,
        sharded.is_some(),
        report_to_stdout,
    )?;
    if let Some(note) = split_names_note(args, &dataset) {
        errln!("{note}");
    }
    if let Some(c) = &sharded
        && !quiet
    {
        let files = |d: &mel_audio::Dataset| d.splits.iter().map(|s| s.files.len()).sum::<usize>();
        errln!(
            "shard {} (from {}): {} of the {} files, into {}",
            c.shard,
            c.source,
            files(tree),
            files(&dataset),
            out_dir.display()
        );
    }
    if !quiet {
        errln!(
            "{}: {}, {}, {}; clip {:?} {} per clip",
            source.display(),
            dryrun::count(dataset.splits.len(), "split", "splits"),
            dryrun::count(dataset.label_names.len(), "class", "classes"),
            dryrun::count(
                dataset.splits.iter().map(|s| s.files.len()).sum::<usize>(),
                "file",
                "files"
            ),
            plan.clip_shape(),
            config.output.dtype.name(),
        );
    }
    if args.dry_run {
        let mut chosen_splits = tree.clone();
        chosen_splits
            .splits
            .retain(|s| builder.settings().builds(&s.name));
        let dataset = chosen_splits;
        // The backend is started to be sure it works (a CUDA device, a wgpu adapter), as
        // the build would; the dry run says so.
        let chosen = melkit::backend::choose_described(&plan, &config)?;
        for line in &chosen.warnings {
            errln!("{line}");
        }
        let loaders = builder.loader_choices().map_err(build::in_words)?;
        out!(
            "{}",
            dryrun::text(&dataset, &config, &plan, &out_dir, &chosen.line, &loaders)?
        );
        return Ok(0);
    }
    let progress = if quiet {
        progress::Progress::hidden()
    } else {
        progress::Progress::for_stderr(
            args.verbosity.progress,
            std::time::Duration::from_secs_f64(args.verbosity.progress_every),
        )
    };
    build::stop_on_ctrl_c(cancel);
    let mut report = build::BuildReport::default();
    let observer = build::Terminal::new(&progress);
    let built = match &sharded {
        Some(c) => melkit::dataset::build_shard(
            &dataset,
            settings,
            c.shard,
            &args.output,
            &observer,
            cancel,
            &mut report,
        )
        .map(Some),
        None => builder
            .run(&args.output, &observer, cancel, &mut report)
            .map(|()| None),
    }
    .map_err(build::in_words);
    build::say_if_interrupted(cancel);
    // A complete shard, verified: an array task's retry has nothing to do, but what its
    // build left out is named again, and --strict fails on it as it did then.
    let earlier = match &built {
        Ok(Some(melkit::dataset::ShardOutcome::AlreadyComplete { skipped })) => {
            Some(skipped.clone())
        }
        _ => None,
    };
    if let Some(skipped) = &earlier {
        for line in skipped {
            errln!("skipped {line} (left out by the shard's earlier build)");
        }
    } else if built.is_ok() && !quiet {
        let summary = report::text(&report, verbose);
        if report_to_stdout {
            err!("{summary}");
        } else {
            out!("{summary}");
        }
    }
    // Every run writes the report it was asked for, a retry of a complete shard too (a
    // stale report would otherwise stay at the path).
    if let Some(path) = &args.report {
        let error = built.as_ref().err().map(error_line);
        let mut json = report::json(&report, &config.resolved_json(), error.as_deref());
        if let (Some(c), Ok(Some(outcome))) = (&sharded, &built) {
            json["shard"] = melkit::dataset::shard::report_json(c.shard, &out_dir, outcome);
        }
        let text = serde_json::to_string_pretty(&json)? + "\n";
        if report_to_stdout {
            out!("{text}");
        } else {
            let written = mel_core::atomic::write_file(path, text.as_bytes(), false)
                .with_context(|| format!("cannot write the report to {}", path.display()));
            // The build's own failure is the one to report; a report that could not be
            // written is said beside it, never instead of it.
            match (&built, written) {
                (Err(_), Err(e)) => errln!("error: {}", error_line(&e)),
                (Ok(_), Err(e)) => return Err(e),
                (_, Ok(())) => {}
            }
        }
    }
    built?;
    if let Some(skipped) = earlier {
        if args.strict && !skipped.is_empty() {
            errln!(
                "error: --strict: {} skipped (listed above); the shard's outputs were written",
                dryrun::count(skipped.len(), "file was", "files were")
            );
            return Ok(EXIT_SKIPPED);
        }
        return Ok(0);
    }
    // The build checks for an interrupt just before its publish, so one seen now came
    // while the outputs were being committed, which completes whole rather than stopping.
    if cancel.load(Ordering::SeqCst) {
        errln!(
            "note: the interrupt came while the outputs were being committed: the build completed and its outputs are whole"
        );
    }
    if quiet {
        // Quiet prints nothing on success, but nothing is dropped without being named.
        let kept = report.kept.iter().flat_map(|k| k.left_out_lines());
        let kept = kept.chain(report.ignored_audio_lines());
        for line in kept.chain(report.splits.iter().flat_map(|x| x.left_out_lines())) {
            errln!("skipped {line}");
        }
    }
    let skipped = report.left_out();
    if args.strict && skipped > 0 {
        errln!(
            "error: --strict: {} skipped (listed above); the outputs were written",
            dryrun::count(skipped, "file was", "files were")
        );
        return Ok(EXIT_SKIPPED);
    }
    Ok(0)
}

/// Checks every path the build will write before any work: no output may replace an
/// input (audio, manifest, configuration, label map), another output, or an existing
/// file of another kind; the report's folder must take a new file.
fn check_outputs(
    args: &BuildArgs,
    builder: &melkit::dataset::Build<'_>,
    out_dir: &std::path::Path,
    sharded: bool,
    report_to_stdout: bool,
) -> Result<()> {
    use mel_core::outputs::{Guard, Output, Written};
    let mut guard = Guard::new();
    builder.protect_inputs(&mut guard);
    let named = [
        (&args.manifest, "the manifest"),
        (&args.flags.config, "the configuration file"),
        (&args.labels, "the label map"),
    ];
    for (path, what) in named {
        if let Some(p) = path {
            guard.input(p, what);
        }
    }
    let mut outputs = builder.planned_outputs(out_dir);
    if sharded {
        use melkit::dataset::shard::{SHARD_RECORD, SHARD_REPORT};
        outputs.push(Output::new(
            out_dir.join(SHARD_RECORD),
            "the shard record",
            Written::File,
        ));
        outputs.push(Output::new(
            out_dir.join(SHARD_REPORT),
            "the shard's report",
            Written::File,
        ));
    }
    if let Some(path) = args.report.as_ref().filter(|_| !report_to_stdout) {
        outputs.push(Output::new(path, "the report", Written::Stream));
    }
    guard.check(&outputs)?;
    Ok(())
}

/// Starts the process's worker pool (decoding, the CPU backend) with `threads` threads,
/// 0 meaning one per core. Every pool melctl uses is sized from this budget.
fn start_workers(threads: usize) -> Result<()> {
    let n = if threads == 0 {
        std::thread::available_parallelism().map_or(1, |n| n.get())
    } else {
        threads
    };
    rayon::ThreadPoolBuilder::new()
        .num_threads(n)
        .thread_name(|i| format!("melctl-worker-{i}"))
        .build_global()
        .with_context(|| format!("cannot start {n} worker threads (run.threads)"))
}

/// `melctl devices`: the CUDA devices and the wgpu adapters, or why there are none.
fn devices_text() -> String {
    let mut s: String = match mel_cuda::devices() {
        Ok(d) if d.is_empty() => "cuda: no device\n".into(),
        Ok(d) => d
            .iter()
            .map(|x| {
                format!(
                    "cuda {}: {} (compute {}.{}, {:.1} GB)\n",
                    x.ordinal,
                    x.name,
                    x.compute_capability.0,
                    x.compute_capability.1,
                    x.memory_bytes as f64 / 1e9
                )
            })
            .collect(),
        Err(e) => format!("cuda: unavailable: {e}\n"),
    };
    let adapters = mel_wgpu::adapters();
    if adapters.is_empty() {
        s += "wgpu: no adapter (no Vulkan, Metal or DX12 driver found)\n";
    }
    for a in adapters {
        s += &format!("{a}\n");
    }
    s
}

/// `melctl devices --json`: the CUDA devices and the wgpu adapters as data, with
/// whether automatic choice would try each adapter.
fn devices_json() -> serde_json::Value {
    let cuda = match mel_cuda::devices() {
        Ok(d) => serde_json::json!({
            "available": true,
            "error": null,
            "devices": d.iter().map(|x| serde_json::json!({
                "ordinal": x.ordinal,
                "name": x.name,
                "compute_capability": [x.compute_capability.0, x.compute_capability.1],
                "memory_bytes": x.memory_bytes,
            })).collect::<Vec<_>>(),
        }),
        Err(e) => serde_json::json!({"available": false, "error": e.to_string(), "devices": []}),
    };
    let adapters: Vec<serde_json::Value> = mel_wgpu::adapters()
        .iter()
        .map(|a| {
            serde_json::json!({
                "index": a.index,
                "name": a.name,
                "api": a.backend,
                "device_type": a.device_type,
                "driver": a.driver,
                "software": a.is_software(),
                "shader_f64": a.shader_f64,
                "max_storage_binding": a.max_storage_binding,
                "max_workgroup_storage": a.max_workgroup_storage,
                "auto_candidate": melkit::backend::auto_accepts(a),
            })
        })
        .collect();
    serde_json::json!({"cuda": cuda, "wgpu": {"adapters": adapters}})
}

/// A note when folder splits have no name a split usually has: `ROOT/dog/day1/*.wav`
/// builds splits `dog` and `cat` of classes `day1`, `day2`, which is valid but rarely
/// meant (a class-per-folder tree one level too deep).
fn split_names_note(args: &BuildArgs, dataset: &mel_audio::Dataset) -> Option<String> {
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

/// How a manifest without a split column is split unless `--split-ratio` says otherwise.
const DEFAULT_SPLIT_RATIOS: &str = "training=0.7,validation=0.2,testing=0.1";

/// The dataset the build reads: a folder scan, or a manifest.
fn load_dataset(args: &BuildArgs) -> Result<(mel_audio::Dataset, std::path::PathBuf)> {
    let mut dataset = match (&args.input, &args.manifest) {
        (Some(root), _) => (mel_audio::scan(root)?, root.clone()),
        (None, Some(m)) => {
            let text = args.split_ratio.as_deref().unwrap_or(DEFAULT_SPLIT_RATIOS);
            let ratios = mel_audio::ManifestOptions::parse_ratios(text)
                .map_err(|why| anyhow::anyhow!("--split-ratio: {why}"))?;
            let opts = mel_audio::ManifestOptions {
                ratios,
                seed: args.seed.unwrap_or(0),
                ratios_given: args.split_ratio.is_some() || args.seed.is_some(),
                label_map: None,
            };
            (mel_audio::from_manifest(m, &opts)?, m.clone())
        }
        (None, None) => anyhow::bail!("give --input ROOT or --manifest FILE"),
    };
    if let Some(map) = &args.labels {
        let names = mel_audio::read_label_map(map)?;
        dataset
            .0
            .relabel(names)
            .with_context(|| format!("label map {}", map.display()))?;
    }
    Ok(dataset)
}

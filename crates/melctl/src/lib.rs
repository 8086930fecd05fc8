//! melctl's command line as a library: the `melctl` binary and the Python package's
//! `melctl` command (`python -m melctl`) both call [`main_with_args`], so there is one CLI.
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
mod verify;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use anyhow::Result;
use clap::Parser;
use melkit::core::MelPlan;
use std::ffi::OsString;

use cli::{BuildArgs, Cli, Command};

/// Exit status after an interrupt (128 + SIGINT), as shells report it.
const EXIT_INTERRUPTED: u8 = 130;
/// Exit status when writing to stdout or stderr failed (BSD's EX_IOERR).
const EXIT_OUTPUT_FAILED: u8 = 74;
/// Exit status when a memory-mapped file changed while it was read (BSD's EX_IOERR).
const EXIT_MAPPED_INPUT_CHANGED: u8 = 74;

/// Runs the CLI on `args` (the program's name first, as `std::env::args_os` gives them)
/// and returns the exit status; help, version and usage errors are printed here too.
/// Installs process-wide handlers (SIGINT, SIGBUS, the panic hook quiet in decoders): the
/// process is the command's for the rest of its life.
pub fn main_with_args<I, T>(args: I) -> u8
where
    I: IntoIterator<Item = T>,
    T: Into<OsString> + Clone,
{
    let cli = match Cli::try_parse_from(args) {
        Ok(cli) => cli,
        Err(e) => {
            // Help and --version go to stdout with status 0, usage errors to stderr with 2;
            // help that could not be written (a full disk) is a failed output, as elsewhere.
            if let Err(failure) = e.print() {
                errln!("error: {failure}");
                return EXIT_OUTPUT_FAILED;
            }
            return u8::try_from(e.exit_code()).unwrap_or(2);
        }
    };
    quiet_vulkan_loader();
    on_sigbus_explain_and_exit();
    // A decoder's panic is that file's one-line error, not a message and backtrace.
    melkit::audio::quiet_decoder_panics();
    // Where NVRTC may be, beyond the usual places: the environment is the CLI's to read.
    melkit::backends::cuda::add_nvrtc_dirs(
        ["MELCTL_NVRTC_DIR", "CUDA_PATH", "CUDA_HOME", "CUDA_ROOT"]
            .iter()
            .filter_map(|v| std::env::var_os(v).filter(|x| !x.is_empty()))
            .map(std::path::PathBuf::from),
    );
    let interrupted = Arc::new(AtomicBool::new(false));
    let code = match run(cli, &interrupted) {
        Ok(code) => code,
        Err(e) => {
            errln!("error: {}", error_line(&e));
            if interrupted.load(Ordering::SeqCst) {
                EXIT_INTERRUPTED
            } else {
                1
            }
        }
    };
    // A failed write to stdout or stderr (a full disk, a broken terminal) is an error of its
    // own, whatever the work's outcome; a closed stdout (`| head`) is not.
    match term::failure() {
        Some(failure) => {
            errln!("error: {failure}");
            EXIT_OUTPUT_FAILED
        }
        None => code,
    }
}

/// An error and its causes on one line, each cause once: a cause whose text the message
/// already holds (an error that prints its source and also names it) is not repeated.
fn error_line(e: &anyhow::Error) -> String {
    let mut line = String::new();
    for cause in e.chain() {
        let text = melkit::core::error::one_line(&cause.to_string());
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
    melkit::read::sigbus::exit_on_sigbus(
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
        Command::Verify(args) => verify::run(&args),
        Command::Show(args) if !show::is_output(&args.file) => {
            if args.class_means {
                anyhow::bail!(
                    "--class-means: {} is not a melctl output (an .h5 file or a folder)",
                    args.file.display()
                );
            }
            let (config, flags) = settings::resolve(&args.flags)?;
            show::show_audio(&args.file, &args.png, args.segment, &config).map_err(|e| {
                match e.downcast::<melkit::core::Error>() {
                    Ok(e) => flags.in_words(e).into(),
                    Err(e) => e,
                }
            })?;
            errln!("wrote {}", args.png.display());
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
            let (config, flags) = settings::resolve(&args.flags)?;
            MelPlan::from_config(&config).map_err(|e| flags.in_words(e))?;
            out!("{}", settings::annotated_toml(&config));
            Ok(0)
        }
        Command::Demo(args) => {
            let data = args.dir.join("data");
            let (config, _) = settings::resolve(&args.flags)?;
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
                    group_by: None,
                    group_pattern: None,
                    labels: None,
                    output: args.dir.join("out"),
                    flags: args.flags,
                    on_error: melkit::dataset::OnError::Skip,
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

/// `melctl build`: the request from the flags, prepared and run by melkit; what it did
/// and the report in the CLI's words; exit 3 under `--strict` when files were left out.
fn run_build(args: &BuildArgs, cancel: &Arc<AtomicBool>) -> Result<u8> {
    // From the start: a Ctrl-C while a large tree is scanned stops the build too.
    build::stop_on_ctrl_c(cancel);
    let (config, flags) = settings::resolve(&args.flags)?;
    start_workers(config.run.threads)?;
    let sharded = shard::choose(args, &|name| std::env::var(name).ok())?;
    let request = build::request(args, config, sharded.as_ref().map(|c| c.shard))?;
    let prepared = request.prepare().map_err(|e| build::in_words(e, &flags))?;
    let shard_from = sharded.as_ref().map_or("", |c| c.source.as_str());
    build::announce(args, &prepared, shard_from);
    if cancel.load(Ordering::SeqCst) {
        build::say_if_interrupted(cancel);
        anyhow::bail!("interrupted before any work: no output was changed");
    }
    if args.dry_run {
        return build::dry_run(&prepared, &flags);
    }
    let progress = if args.verbosity.quiet {
        progress::Progress::hidden()
    } else {
        progress::Progress::for_stderr(
            args.verbosity.progress,
            std::time::Duration::from_secs_f64(args.verbosity.progress_every),
        )
    };
    let mut report = build::BuildReport::default();
    let built = prepared
        .run(
            &build::Terminal::new(&progress, args.verbosity.quiet),
            cancel,
            &mut report,
        )
        .map_err(|e| build::in_words(e, &flags));
    build::say_if_interrupted(cancel);
    build::finish(args, &prepared, &report, built, cancel)
}

/// Starts the process's worker pool (decoding, the CPU backend) with `threads` threads,
/// 0 meaning one per core. Every pool melctl uses is sized from this budget.
fn start_workers(threads: usize) -> Result<()> {
    let n = if threads == 0 {
        std::thread::available_parallelism().map_or(1, |n| n.get())
    } else {
        threads
    };
    let started = rayon::ThreadPoolBuilder::new()
        .num_threads(n)
        .thread_name(|i| format!("melctl-worker-{i}"))
        .build_global();
    // A second command in one process (the Python package's `_cli_main` called twice)
    // finds the pool started: fine if it is the size asked for.
    match started {
        Err(_) if rayon::current_num_threads() == n => Ok(()),
        Err(_) => anyhow::bail!(
            "cannot start {n} worker threads (run.threads): this process already runs melctl's worker pool with {} threads; run each command with another --threads in its own process",
            rayon::current_num_threads()
        ),
        Ok(()) => Ok(()),
    }
}

/// `melctl devices`: the CUDA devices and the wgpu adapters, or why there are none.
fn devices_text() -> String {
    let mut s: String = match melkit::backends::cuda::devices() {
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
    let adapters = melkit::backends::wgpu::adapters();
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
    let cuda = match melkit::backends::cuda::devices() {
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
    let adapters: Vec<serde_json::Value> = melkit::backends::wgpu::adapters()
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

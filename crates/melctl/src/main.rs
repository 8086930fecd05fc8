//! melctl: labelled audio folders to log-mel-spectrogram datasets.

mod build;
mod cli;
mod demo;
mod inspect;
mod progress;
mod report;
mod settings;

use std::process::ExitCode;

use anyhow::{Context, Result};
use clap::Parser;
use mel_core::MelPlan;

use cli::{BuildArgs, Cli, Command, OnError};

fn main() -> ExitCode {
    let cli = Cli::parse();
    match run(cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

fn run(cli: Cli) -> Result<()> {
    match cli.command {
        Command::Build(args) => run_build(&args),
        Command::Inspect(args) => {
            print!("{}", inspect::inspect(&args.file, args.sample)?);
            Ok(())
        }
        Command::Config(args) => {
            let config = settings::resolve(&args.flags)?;
            MelPlan::new(&config)?;
            print!("{}", config.to_toml());
            Ok(())
        }
        Command::Demo(args) => {
            let data = args.dir.join("data");
            eprintln!(
                "generating {} leak-4k clips under {}",
                args.clips,
                data.display()
            );
            let n = demo::generate(&data, args.clips)?;
            eprintln!("{n} clips ready");
            if args.no_build {
                return Ok(());
            }
            run_build(&BuildArgs {
                input: data,
                output: args.dir.join("out"),
                flags: args.flags,
                on_error: OnError::Skip,
                splits: vec![],
                report: Some(args.dir.join("report.json")),
            })
        }
    }
}

fn run_build(args: &BuildArgs) -> Result<()> {
    let config = settings::resolve(&args.flags)?;
    let plan = MelPlan::new(&config)?;
    let dataset = mel_audio::scan(&args.input)?;
    eprintln!(
        "{}: {} splits, {} classes, {} files; clip {:?} {} per clip",
        args.input.display(),
        dataset.splits.len(),
        dataset.label_names.len(),
        dataset.splits.iter().map(|s| s.files.len()).sum::<usize>(),
        plan.clip_shape(),
        config.output.dtype.name(),
    );
    let progress = progress::Progress::for_stderr();
    let report = build::build(
        &dataset,
        &config,
        &args.output,
        args.on_error,
        &args.splits,
        &progress,
    )?;
    print!("{}", report::text(&report));
    if let Some(path) = &args.report {
        let json = report::json(&report, &config.resolved_json());
        std::fs::write(path, serde_json::to_string_pretty(&json)? + "\n")
            .with_context(|| format!("cannot write report {}", path.display()))?;
    }
    Ok(())
}

//! Which shard a build is, from `--shard` or an array task's environment (the one place
//! melctl reads Slurm's and Kubernetes' variables), and `melctl merge`.

use std::sync::Arc;
use std::sync::atomic::AtomicBool;

use anyhow::{Context, Result, bail};
use melkit::dataset::Shard;
use melkit::dataset::merge::{MergeReport, MergeSettings};

use crate::cli::{BuildArgs, MergeArgs};

/// A shard and where it came from, in words ("--shard", or the variables that gave it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GivenShard {
    /// The shard.
    pub shard: Shard,
    /// Where it came from.
    pub source: String,
}

/// The shard `args` ask for: `--shard K/N`, else an array task's environment (read
/// through `env`), else none. `--no-shard` ignores the environment.
pub fn choose(
    args: &BuildArgs,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<Option<GivenShard>> {
    if let Some(text) = &args.shard {
        let shard = Shard::parse(text).with_context(|| format!("--shard {text}"))?;
        return Ok(Some(GivenShard {
            shard,
            source: "--shard".into(),
        }));
    }
    if args.no_shard {
        return Ok(None);
    }
    // A variable set but empty is an error, not unset: an array task whose index came
    // out empty would otherwise build the whole tree, as would every task.
    let var = |name: &str| env(name);
    let number = |name: &str| -> Result<Option<usize>> {
        var(name)
            .map(|v| {
                v.trim().parse::<usize>().map_err(|_| {
                    anyhow::anyhow!(
                        "{name}={v:?} is not a whole number (an array task's index or count)"
                    )
                })
            })
            .transpose()
    };
    let count_flag = match (args.shards, number("MELCTL_SHARDS")?) {
        (Some(n), _) => Some((n, "--shards")),
        (None, Some(n)) => Some((n, "MELCTL_SHARDS")),
        (None, None) => None,
    };
    if let Some(id) = number("SLURM_ARRAY_TASK_ID")? {
        // Shard K is array task K: an array numbered from 0. The task count says N only
        // when the array is whole (tasks 0..COUNT-1): a task resubmitted alone
        // (--array=5) or a part (--array=3-5) has MIN and COUNT of its own, which cannot
        // be told from an array numbered from another first index, so N must then be
        // given (--shards, MELCTL_SHARDS: docs/cluster/submit.sh exports it).
        let min = number("SLURM_ARRAY_TASK_MIN")?;
        let max = number("SLURM_ARRAY_TASK_MAX")?;
        let task_count = number("SLURM_ARRAY_TASK_COUNT")?;
        let step = number("SLURM_ARRAY_TASK_STEP")?.unwrap_or(1);
        let whole = match (min, max, task_count) {
            (Some(0), Some(max), Some(n)) => step == 1 && max.checked_add(1) == Some(n),
            (None, None, Some(_)) => step == 1,
            _ => false,
        };
        let (n, from) = match (count_flag, task_count) {
            (Some((n, from)), _) => (n, from.to_string()),
            (None, Some(n)) if whole => (n, "SLURM_ARRAY_TASK_COUNT".to_string()),
            (None, _) => bail!(
                "SLURM_ARRAY_TASK_ID={id} in an array that is not tasks 0..N-1 (tasks {}..={}, step {step}: a part resubmitted, or numbered from 1): shard K is task K, so give N with --shards N or MELCTL_SHARDS (docs/cluster/submit.sh sets it), or pass --shard K/N",
                min.map_or("?".into(), |v| v.to_string()),
                max.map_or("?".into(), |v| v.to_string()),
            ),
        };
        let shard = Shard::new(id, n)
            .with_context(|| format!("SLURM_ARRAY_TASK_ID={id} with N from {from}"))?;
        return Ok(Some(GivenShard {
            shard,
            source: format!("SLURM_ARRAY_TASK_ID={id}, N from {from}"),
        }));
    }
    if let Some(k) = number("JOB_COMPLETION_INDEX")? {
        let Some((n, from)) = count_flag else {
            bail!(
                "JOB_COMPLETION_INDEX={k} is set (a Kubernetes Indexed Job), but not the shard count: pass --shards N (the Job's completions) or set MELCTL_SHARDS"
            );
        };
        let shard = Shard::new(k, n)
            .with_context(|| format!("JOB_COMPLETION_INDEX={k} with N from {from}"))?;
        return Ok(Some(GivenShard {
            shard,
            source: format!("JOB_COMPLETION_INDEX={k}, N from {from}"),
        }));
    }
    if let Some((_, from)) = count_flag {
        bail!(
            "{from} gives the shard count, and the shard's index comes from an array task's environment (SLURM_ARRAY_TASK_ID, JOB_COMPLETION_INDEX), but neither is set: each task would build the whole tree; pass --shard K/N, or --no-shard"
        );
    }
    Ok(None)
}

/// `melctl merge`: merges, prints the summary, writes the report; returns the exit status.
pub fn run_merge(args: &MergeArgs, cancel: &Arc<AtomicBool>) -> Result<u8> {
    let threads = if args.threads == 0 {
        std::thread::available_parallelism().map_or(1, |n| n.get())
    } else {
        args.threads
    };
    // The report is checked with the merge's own outputs, before any work: a report
    // that cannot be written, or that would replace a merged split or a shard's file, is
    // not found out after the merge has published.
    let to_stdout = args.report.as_deref() == Some(std::path::Path::new("-"));
    let also_writes = args
        .report
        .iter()
        .filter(|_| !to_stdout)
        .map(|path| {
            melkit::core::outputs::Output::new(
                path,
                "the report",
                melkit::core::outputs::Written::Stream,
            )
        })
        .collect();
    let settings = MergeSettings {
        shards: args.shards,
        threads,
        also_writes,
    };
    let progress = if args.verbosity.quiet {
        crate::progress::Progress::hidden()
    } else {
        crate::progress::Progress::for_stderr(
            args.verbosity.progress,
            std::time::Duration::from_secs_f64(args.verbosity.progress_every),
        )
    };
    crate::build::stop_on_ctrl_c(cancel);
    let merged = melkit::dataset::merge(
        &args.output,
        &settings,
        &crate::build::Terminal::new(&progress, args.verbosity.quiet),
        cancel,
    );
    crate::build::say_if_interrupted(cancel);
    let merged = merged.map_err(|e| crate::build::in_words(e, &Default::default()))?;
    let skipped = merged.left_out();
    for i in merged.ignored.iter().filter(|i| i.audio > 0) {
        errln!("skipped {}: {}", i.path.display(), i.reason);
    }
    for s in &merged.splits {
        for line in &s.skipped {
            errln!("skipped {line}");
        }
    }
    if !args.verbosity.quiet {
        let text = summary(&merged);
        if to_stdout {
            err!("{text}");
        } else {
            out!("{text}");
        }
    }
    if let Some(path) = &args.report {
        let text = serde_json::to_string_pretty(&merged.to_json())? + "\n";
        if to_stdout {
            out!("{text}");
        } else {
            melkit::core::atomic::write_file(path, text.as_bytes(), false)
                .with_context(|| format!("cannot write the report to {}", path.display()))?;
        }
    }
    if args.strict && skipped > 0 {
        errln!(
            "error: --strict: the shards left {skipped} file(s) out (listed above); the merged outputs were written"
        );
        return Ok(crate::EXIT_SKIPPED);
    }
    Ok(0)
}

/// The merge in words: each split's clips and output, the total.
fn summary(m: &MergeReport) -> String {
    let mut s = String::new();
    for split in &m.splits {
        s += &format!(
            "{}: {} clips of {} files -> {} ({:.1} MB)\n",
            split.split,
            split.clips,
            split.files,
            split.output.display(),
            split.output_bytes as f64 / 1e6
        );
    }
    s += &format!(
        "merged {} shards into build {} in {:.2} s\n",
        m.shards,
        m.build,
        m.wall.as_secs_f64()
    );
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    fn args(flags: &[&str]) -> BuildArgs {
        let mut argv = vec!["melctl", "build", "-i", "in", "-o", "out"];
        argv.extend(flags);
        match crate::cli::Cli::parse_from(argv).command {
            crate::cli::Command::Build(a) => *a,
            _ => unreachable!(),
        }
    }

    fn with(vars: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let vars: Vec<(String, String)> = vars
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        move |name| vars.iter().find(|(k, _)| k == name).map(|(_, v)| v.clone())
    }

    fn shard(k: usize, n: usize) -> Shard {
        Shard::new(k, n).unwrap()
    }

    #[test]
    fn the_flag_wins_and_no_environment_means_no_shard() {
        let slurm = with(&[
            ("SLURM_ARRAY_TASK_ID", "1"),
            ("SLURM_ARRAY_TASK_COUNT", "4"),
        ]);
        let c = choose(&args(&["--shard", "2/3"]), &slurm).unwrap().unwrap();
        assert_eq!(c.shard, shard(2, 3));
        assert_eq!(choose(&args(&[]), &with(&[])).unwrap(), None);
        assert_eq!(choose(&args(&["--no-shard"]), &slurm).unwrap(), None);
        // Set but empty is refused, never read as unset (every task of a job whose index
        // came out empty built the whole tree); so is a count without an index.
        for vars in [
            &[("JOB_COMPLETION_INDEX", " ")][..],
            &[("SLURM_ARRAY_TASK_ID", "")],
            &[("MELCTL_SHARDS", "3")],
        ] {
            let e = choose(&args(&[]), &with(vars)).unwrap_err().to_string();
            assert!(e.contains(vars[0].0), "{vars:?}: {e}");
        }
        assert_eq!(
            choose(&args(&["--no-shard"]), &with(&[("MELCTL_SHARDS", "3")])).unwrap(),
            None
        );
    }

    #[test]
    fn a_whole_slurm_array_gives_the_shard_and_a_part_of_one_needs_the_count() {
        let whole = [
            ("SLURM_ARRAY_TASK_ID", "2"),
            ("SLURM_ARRAY_TASK_MIN", "0"),
            ("SLURM_ARRAY_TASK_MAX", "3"),
            ("SLURM_ARRAY_TASK_COUNT", "4"),
            ("SLURM_ARRAY_TASK_STEP", "1"),
        ];
        let c = choose(&args(&[]), &with(&whole)).unwrap().unwrap();
        assert_eq!(c.shard, shard(2, 4));
        assert!(c.source.contains("SLURM_ARRAY_TASK_ID=2"), "{}", c.source);
        // Task 5 resubmitted alone (sbatch --array=5): its own MIN, MAX and COUNT of 1
        // must not make it shard 0 of 1; with the count given it is shard 5.
        let retry = [
            ("SLURM_ARRAY_TASK_ID", "5"),
            ("SLURM_ARRAY_TASK_MIN", "5"),
            ("SLURM_ARRAY_TASK_MAX", "5"),
            ("SLURM_ARRAY_TASK_COUNT", "1"),
            ("SLURM_ARRAY_TASK_STEP", "1"),
        ];
        let e = format!("{:#}", choose(&args(&[]), &with(&retry)).unwrap_err());
        assert!(
            e.contains("MELCTL_SHARDS") && e.contains("tasks 5..=5"),
            "{e}"
        );
        let mut given = retry.to_vec();
        given.push(("MELCTL_SHARDS", "8"));
        let c = choose(&args(&[]), &with(&given)).unwrap().unwrap();
        assert_eq!(c.shard, shard(5, 8));
        let c = choose(&args(&["--shards", "6"]), &with(&retry))
            .unwrap()
            .unwrap();
        assert_eq!(c.shard, shard(5, 6));
    }

    #[test]
    fn arrays_that_are_not_tasks_0_to_n_need_the_count_and_bad_values_are_refused() {
        for (vars, says) in [
            // Sparse (0,2,4), numbered from 1, stepped, without a count, absurd bounds.
            (
                vec![
                    ("SLURM_ARRAY_TASK_ID", "4"),
                    ("SLURM_ARRAY_TASK_MIN", "0"),
                    ("SLURM_ARRAY_TASK_MAX", "4"),
                    ("SLURM_ARRAY_TASK_COUNT", "3"),
                ],
                "not tasks 0..N-1",
            ),
            (
                vec![
                    ("SLURM_ARRAY_TASK_ID", "2"),
                    ("SLURM_ARRAY_TASK_MIN", "1"),
                    ("SLURM_ARRAY_TASK_MAX", "3"),
                    ("SLURM_ARRAY_TASK_COUNT", "3"),
                ],
                "numbered from 1",
            ),
            (
                vec![
                    ("SLURM_ARRAY_TASK_ID", "2"),
                    ("SLURM_ARRAY_TASK_STEP", "2"),
                    ("SLURM_ARRAY_TASK_COUNT", "3"),
                ],
                "step 2",
            ),
            (vec![("SLURM_ARRAY_TASK_ID", "2")], "--shards N"),
            (
                vec![
                    ("SLURM_ARRAY_TASK_ID", "0"),
                    ("SLURM_ARRAY_TASK_MIN", "0"),
                    ("SLURM_ARRAY_TASK_MAX", "18446744073709551615"),
                    ("SLURM_ARRAY_TASK_COUNT", "4"),
                ],
                "not tasks 0..N-1",
            ),
            (
                vec![
                    ("SLURM_ARRAY_TASK_ID", "x"),
                    ("SLURM_ARRAY_TASK_COUNT", "3"),
                ],
                "not a whole number",
            ),
            (
                vec![("SLURM_ARRAY_TASK_ID", "3"), ("MELCTL_SHARDS", "3")],
                "numbered from 0",
            ),
            (vec![("JOB_COMPLETION_INDEX", "2")], "--shards N"),
            (
                vec![("JOB_COMPLETION_INDEX", "4"), ("MELCTL_SHARDS", "4")],
                "numbered from 0",
            ),
        ] {
            let e = format!("{:#}", choose(&args(&[]), &with(&vars)).unwrap_err());
            assert!(e.contains(says), "{vars:?}: {e}");
        }
        let e = format!(
            "{:#}",
            choose(&args(&["--shards", "4"]), &with(&[])).unwrap_err()
        );
        assert!(e.contains("neither is set"), "{e}");
    }

    #[test]
    fn an_indexed_job_takes_its_count_from_the_flag_or_the_variable() {
        let env = with(&[("JOB_COMPLETION_INDEX", "1"), ("MELCTL_SHARDS", "3")]);
        assert_eq!(
            choose(&args(&[]), &env).unwrap().unwrap().shard,
            shard(1, 3)
        );
        let c = choose(&args(&["--shards", "5"]), &env).unwrap().unwrap();
        assert_eq!(c.shard, shard(1, 5));
        assert!(c.source.contains("--shards"), "{}", c.source);
    }
}

//! The closing summary of a build, as text (a line per split with its classes, sources,
//! bottleneck and skipped files; with `-v` the profiler-style stage table, loader and
//! queues too) and as JSON (`--report FILE.json`).

use std::time::Duration;

use crate::advice;
use melkit::dataset::{BuildReport, SplitReport};

fn secs(d: Duration) -> f64 {
    d.as_secs_f64()
}

/// Human-readable byte count.
pub fn bytes(n: u64) -> String {
    let n = n as f64;
    if n >= 1e9 {
        format!("{:.2} GB", n / 1e9)
    } else if n >= 1e6 {
        format!("{:.1} MB", n / 1e6)
    } else {
        format!("{:.1} kB", n / 1e3)
    }
}

fn split_text(x: &SplitReport, verbose: bool) -> String {
    let wall = secs(x.wall).max(1e-9);
    let mut s = format!(
        "{:<12} {:>7} clips -> {} ({}) in {:.2} s = {:.0} clips/s\n",
        x.split,
        x.clips,
        x.output.display(),
        bytes(x.output_bytes),
        wall,
        x.clips as f64 / wall
    );
    s += &format!(
        "  classes  {}\n",
        x.classes
            .iter()
            .map(|(n, c)| format!("{n} {c}"))
            .collect::<Vec<_>>()
            .join(", ")
    );
    let p = &x.provenance;
    if p.resampled + p.downmixed + p.padded + p.trimmed > 0 {
        s += &format!(
            "  sources  {} resampled, {} downmixed, {} padded, {} trimmed\n",
            p.resampled, p.downmixed, p.padded, p.trimmed
        );
    }
    if verbose {
        s += &format!("  loader   {}\n", x.loader_choice);
        if !x.loader.note.is_empty() {
            s += &format!("           {}\n", x.loader.note);
        }
        if x.loader.decode_seconds > 0.0 {
            s += &format!(
                "           {} workers: read + decode {:.2} s (summed), {} from {} files\n",
                x.loader.workers,
                x.loader.decode_seconds,
                bytes(x.loader.bytes_read),
                x.loader.files
            );
        }
        s += "  stage    impl      busy s   busy%  wait-in s  wait-out s    clips/busy-s\n";
        for m in &x.stages {
            s += &format!(
                "  {:<8} {:<8} {:>7.2}  {:>5.0}%  {:>9.2}  {:>10.2}  {:>14.0}\n",
                m.name,
                m.implementation,
                m.busy_seconds,
                100.0 * m.busy_seconds / wall,
                m.wait_input_seconds,
                m.wait_output_seconds,
                m.capacity_per_second()
            );
        }
        if let Some(w) = x.stages.iter().find(|m| m.name == "write") {
            s += &format!(
                "  write    of which commit (metadata, flush, rename) {:.2} s\n",
                w.finish_seconds
            );
        }
        for q in &x.queues {
            s += &format!(
                "  queue {:<11} depth mean {:.1} max {} of {}\n",
                q.name, q.mean_depth, q.max_depth, q.capacity
            );
        }
    }
    s += &format!(
        "  bottleneck: {} ({:.0}% busy): {}\n",
        advice::stage_name(&x.verdict),
        x.verdict.utilisation * 100.0,
        advice::advice(&x.verdict)
    );
    for line in x.left_out_lines() {
        s += &format!("  skipped {line}\n");
    }
    s
}

/// The text summary printed at the end of a build.
pub fn text(r: &BuildReport, verbose: bool) -> String {
    let mut s = format!("backend  {}\n", r.backend);
    let clips: usize = r.splits.iter().map(|x| x.clips).sum();
    for x in &r.splits {
        s += &split_text(x, verbose);
    }
    for k in &r.kept {
        s += &format!("{:<15} kept as the interrupted run published it\n", k.split);
        for line in k.left_out_lines() {
            s += &format!("  skipped {line}\n");
        }
    }
    for line in r.ignored_audio_lines() {
        s += &format!("skipped  {line}\n");
    }
    let skipped = r.left_out();
    if !r.ignored.is_empty() {
        const SHOWN: usize = 5;
        let names: Vec<String> = r
            .ignored
            .iter()
            .take(SHOWN)
            .map(|i| i.path.display().to_string())
            .collect();
        s += &format!(
            "ignored  {} entries not built: {}{}\n",
            r.ignored.len(),
            names.join(", "),
            if r.ignored.len() > SHOWN {
                ", ... (all in --report)"
            } else {
                ""
            }
        );
    }
    s += &format!(
        "total        {clips:>7} clips in {:.2} s = {:.0} clips/s on {} threads; {} skipped; peak memory {}\n",
        secs(r.wall),
        clips as f64 / secs(r.wall).max(1e-9),
        r.threads,
        skipped,
        r.peak_rss_bytes
            .map(bytes)
            .unwrap_or_else(|| "unknown".into())
    );
    s
}

/// The JSON report (`--report FILE.json`): melkit's report `json` of the build `r`, each
/// split's bottleneck with the advice in melctl's flags.
pub fn json(mut json: serde_json::Value, r: &BuildReport) -> serde_json::Value {
    if let Some(splits) = json["splits"].as_array_mut() {
        for (x, j) in r.splits.iter().zip(splits) {
            j["bottleneck"]["advice"] = advice::advice(&x.verdict).into();
        }
    }
    json
}

//! `melctl build --dry-run`: what a build would do, from the scan and the configuration
//! alone. Nothing is decoded or written.

use std::fmt::Write as _;
use std::path::Path;

use anyhow::Result;
use melkit::audio::Dataset;
use melkit::core::{Config, MelPlan};
use rayon::prelude::*;

use crate::report::bytes;

/// The rows a listed file would give (1; for files read whole, its blocks or windows),
/// or why it would be skipped: a name the output could not store, a header that does not
/// decode ([`melkit::audio::probe`]: no audio is decoded), or, read whole, a length the
/// build refuses.
fn precheck(path: &Path, config: &Config, plan: &MelPlan) -> Result<u64, String> {
    if path.file_name().and_then(|n| n.to_str()).is_none() {
        return Err("the file name is not valid UTF-8".into());
    }
    let Some(cutting) = plan.cutting() else {
        return melkit::audio::probe(path, &config.audio)
            .map(|()| 1)
            .map_err(|e| e.reason());
    };
    let audio = melkit::spec::AudioConfig {
        trim: melkit::spec::TrimPolicy::Start,
        ..config.audio.clone()
    };
    let (rate, frames) = melkit::audio::probe_length(path, &audio).map_err(|e| e.reason())?;
    let rate_out = config.audio.sample_rate;
    let samples = (frames as u128 * rate_out as u128).div_ceil(rate.max(1) as u128) as u64;
    cutting
        .check_samples(&path.display().to_string(), samples, rate_out)
        .map_err(|e| e.reason())?;
    Ok(cutting.rows(samples))
}

/// The dry run's text; `backend` and `loaders` are the choices the build would make.
pub fn text(
    dataset: &Dataset,
    manifest: Option<&Path>,
    config: &Config,
    plan: &MelPlan,
    out: &Path,
    backend: &str,
    loaders: &[(String, String)],
) -> Result<String> {
    let mut s = String::from("dry run: headers are read; nothing is decoded or written\n");
    let layout = if manifest.is_some() {
        "the manifest's rows"
    } else if dataset.splits.len() == 1 && dataset.splits[0].name == "all" {
        "ROOT/{class}/*.wav: one split, `all`"
    } else {
        "ROOT/{split}/{class}/*.wav"
    };
    let place = match manifest {
        Some(m) => format!(
            "{} (its paths relative to {})",
            m.display(),
            dataset.root.display()
        ),
        None => dataset.root.display().to_string(),
    };
    writeln!(
        s,
        "layout   {layout} ({}, {}) in {place}",
        count(dataset.splits.len(), "split", "splits"),
        count(dataset.label_names.len(), "class", "classes"),
    )?;
    let width = dataset
        .label_names
        .iter()
        .map(|n| n.len().max(6))
        .collect::<Vec<_>>();
    let mut head = format!("  {:<12} {:>7}", "split", "files");
    for (n, w) in dataset.label_names.iter().zip(&width) {
        head += &format!(" {n:>w$}");
    }
    writeln!(s, "{head}")?;
    let mut skips = Vec::new();
    let (mut clips, mut rows) = (0usize, 0u64);
    for split in &dataset.splits {
        let mut counts = vec![0usize; dataset.label_names.len()];
        let verdicts: Vec<Result<u64, String>> = split
            .files
            .par_iter()
            .map(|f| precheck(&f.path, config, plan))
            .collect();
        for (f, verdict) in split.files.iter().zip(verdicts) {
            counts[f.label as usize] += 1;
            match verdict {
                Err(why) => skips.push(format!("{}: {why}", f.path.display())),
                Ok(n) => {
                    clips += 1;
                    rows += n;
                }
            }
        }
        for u in &split.unreadable {
            skips.push(format!("{}: {}", u.path.display(), u.reason));
        }
        let mut row = format!("  {:<12} {:>7}", split.name, split.files.len());
        for (c, w) in counts.iter().zip(&width) {
            row += &format!(" {c:>w$}");
        }
        writeln!(s, "{row}")?;
    }
    for i in dataset.ignored.iter().filter(|i| i.audio > 0) {
        skips.push(format!("{}: {}", i.path.display(), i.reason));
    }
    for skip in &skips {
        writeln!(s, "would skip {skip}")?;
    }
    if !dataset.ignored.is_empty() {
        writeln!(
            s,
            "ignored  {} entries not built: {}",
            dataset.ignored.len(),
            dataset
                .ignored
                .iter()
                .take(5)
                .map(|i| i.path.display().to_string())
                .collect::<Vec<_>>()
                .join(", ")
        )?;
    }
    let per_clip = plan.bytes_per_clip() as u64;
    let estimate = rows * per_clip + dataset.splits.len() as u64 * (64 << 10);
    let sink = config.output.sink.name();
    let compressed =
        if config.hdf5.gzip > 0 && config.output.sink == melkit::core::config::SinkKind::Hdf5 {
            " before compression (deflate roughly halves leak-4k)"
        } else {
            ""
        };
    let what = match (plan.whole(), plan.windows()) {
        (Some(_), _) => format!("{clips} whole clips in {rows} rows (blocks)"),
        (_, Some(_)) => format!("{clips} files in {rows} windows"),
        _ => format!("{clips} clips"),
    };
    writeln!(
        s,
        "output   {} as {sink}: about {} ({what} × {} of {} {:?}{compressed})",
        out.display(),
        bytes(estimate),
        bytes(per_clip),
        plan.dtype().name(),
        plan.clip_shape()
    )?;
    writeln!(
        s,
        "         files whose data fails to decode are skipped in the build (use --on-error fail to stop)"
    )?;
    writeln!(s, "backend  {backend} (started to be sure it works)")?;
    for (split, loader) in loaders {
        writeln!(s, "loader   {split}: {loader}")?;
    }
    Ok(s)
}

/// `n` and the noun in the number it needs: "1 split", "3 splits".
pub fn count(n: usize, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

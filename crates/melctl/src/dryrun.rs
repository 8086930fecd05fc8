//! `melctl build --dry-run`: what a build would do, from the scan and the configuration
//! alone. Nothing is decoded or written.

use std::fmt::Write as _;
use std::path::Path;

use anyhow::Result;
use melkit::audio::Dataset;
use melkit::core::{Config, MelPlan};
use rayon::prelude::*;

use crate::report::bytes;

/// Why a listed file would be skipped, if it would: a name the output could not store,
/// or a header that does not decode ([`melkit::audio::probe`]: no audio is decoded).
fn precheck(path: &Path, config: &Config) -> Option<String> {
    if path.file_name().and_then(|n| n.to_str()).is_none() {
        return Some("the file name is not valid UTF-8".into());
    }
    melkit::audio::probe(path, &config.audio)
        .err()
        .map(|e| e.reason())
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
    let mut clips = 0usize;
    for split in &dataset.splits {
        let mut counts = vec![0usize; dataset.label_names.len()];
        let verdicts: Vec<Option<String>> = split
            .files
            .par_iter()
            .map(|f| precheck(&f.path, config))
            .collect();
        for (f, verdict) in split.files.iter().zip(verdicts) {
            counts[f.label as usize] += 1;
            match verdict {
                Some(why) => skips.push(format!("{}: {why}", f.path.display())),
                None => clips += 1,
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
    let estimate = clips as u64 * per_clip + dataset.splits.len() as u64 * (64 << 10);
    let sink = config.output.sink.name();
    let compressed =
        if config.hdf5.gzip > 0 && config.output.sink == melkit::core::config::SinkKind::Hdf5 {
            " before compression (deflate roughly halves leak-4k)"
        } else {
            ""
        };
    writeln!(
        s,
        "output   {} as {sink}: about {} ({clips} clips × {} of {} {:?}{compressed})",
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

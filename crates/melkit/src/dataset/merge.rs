//! Merging a sharded build: the `N` shards under `OUT/shards/K-of-N/` become
//! `OUT/{split}.h5` (or `.npy.d`), the datasets one build of the whole tree writes, byte
//! for byte (the statistics are computed in one pass over the rows in order, as a build
//! computes them). The set is checked first (every shard present once and complete,
//! one version, configuration, label map and file set, ranges that tile each split) and
//! each shard's outputs are opened with every check of the reader. The merged splits
//! are published together with a new build record, atomically, like a build's.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use mel_core::atomic::DirLock;
use mel_core::config::MAX_THREADS;
use mel_core::outputs::{Guard, Output, Written};
use mel_core::{ClipMeta, Config, Finished, MelPlan, OutputBuf, SinkSpec, SourceInfo};

use super::error::{Error, Result};
use super::shard::{SHARD_RECORD, SHARDS_DIR, Shard, ShardRecord};
use super::{Observer, lock_folder, outputs};

/// Bytes of spectrograms handed to the sink at a time.
const BATCH_BYTES: usize = 16 << 20;

/// How a merge runs.
#[derive(Debug, Clone, Default)]
pub struct MergeSettings {
    /// The shard count to merge when `OUT/shards` holds shards of several counts (an
    /// earlier run's); `None`: the one count found.
    pub shards: Option<usize>,
    /// Threads for the sink's writes (0: one).
    pub threads: usize,
    /// What the caller writes beside the merge (a report): checked by the merge's output
    /// guard with its own outputs, before any work, so that none replaces a merged split,
    /// a shard's file or another of them.
    pub also_writes: Vec<Output>,
}

/// One merged split.
#[derive(Debug, Clone)]
pub struct MergedSplit {
    /// Its name.
    pub split: String,
    /// Files of the whole split.
    pub files: usize,
    /// Clips written (the files less those the shards left out).
    pub clips: usize,
    /// The files the shards left out, `path: reason`, in the split's order.
    pub skipped: Vec<String>,
    /// The published output.
    pub output: PathBuf,
    /// Its size in bytes.
    pub output_bytes: u64,
}

/// What a merge wrote.
#[derive(Debug, Clone, Default)]
pub struct MergeReport {
    /// Shards merged.
    pub shards: usize,
    /// The merged output's build id.
    pub build: String,
    /// Each split, in name order.
    pub splits: Vec<MergedSplit>,
    /// What the scan left out of every split (shard 0's record; every shard scanned the
    /// whole tree).
    pub ignored: Vec<super::shard::IgnoredEntry>,
    /// Wall time.
    pub wall: Duration,
}

impl MergeReport {
    /// Files left out of the merged splits: those the shards skipped, and audio the scan
    /// left out (hidden files), as a build's report counts them.
    pub fn left_out(&self) -> usize {
        let skipped: usize = self.splits.iter().map(|s| s.skipped.len()).sum();
        skipped + self.ignored.iter().map(|i| i.audio).sum::<usize>()
    }

    /// The report as JSON (`melctl merge --report`, and `melctl.merge`'s dict).
    pub fn to_json(&self) -> serde_json::Value {
        serde_json::json!({
            "shards": self.shards,
            "build": self.build,
            "wall_s": self.wall.as_secs_f64(),
            "ignored": self.ignored.iter().map(|i| serde_json::json!({
                "path": i.path.to_string_lossy(),
                "reason": i.reason,
            })).collect::<Vec<_>>(),
            "splits": self.splits.iter().map(|s| serde_json::json!({
                "split": s.split,
                "files": s.files,
                "clips": s.clips,
                "skipped": s.skipped,
                "output": s.output,
                "output_bytes": s.output_bytes,
            })).collect::<Vec<_>>(),
        })
    }
}

/// A shard found under `OUT/shards`, its record read and checked.
struct Found {
    shard: Shard,
    dir: PathBuf,
    record: ShardRecord,
}

/// Merges the shards under `out/shards/` into `out` (see the module documentation).
/// Raising `cancel` stops it before the publish, leaving `out` as it was. Progress is
/// told as one run (`split_started("merge", clips of every split)`): the shards are read
/// one after the other, each into every split's output, each under its lock (one open
/// descriptor at a time, however many shards), its record read again and checked
/// unchanged first.
pub fn merge(
    out: &Path,
    settings: &MergeSettings,
    observer: &dyn Observer,
    cancel: &Arc<AtomicBool>,
) -> Result<MergeReport> {
    let started = Instant::now();
    if let Some(n) = settings.shards {
        Shard::new(0, n)?;
    }
    if settings.threads > MAX_THREADS {
        return Err(Error::Core(mel_core::Error::config(
            "threads",
            format!("{} is above the limit of {MAX_THREADS}", settings.threads),
        )));
    }
    let shards = find_shards(out, settings.shards)?;
    let found = read_records(&shards)?;
    check_consistent(&found)?;
    let first = &found[0].record;
    let config: Config = serde_json::from_value(first.config.clone()).map_err(|e| {
        bad(
            &found[0].dir.join(SHARD_RECORD),
            format!("its configuration does not read: {e}"),
        )
    })?;
    let plan = MelPlan::from_config(&config)?;
    check_outputs(out, &config, &found, &settings.also_writes)?;
    let _lock = lock_folder(out)?;
    let build_id = mel_core::record::new_build_id();
    let threads = settings.threads.max(1);
    let mut report = MergeReport {
        shards: found.len(),
        build: build_id.clone(),
        ignored: first.ignored.clone(),
        ..MergeReport::default()
    };
    // One output per split, written shard after shard in the global row order.
    let mut splits = Vec::new();
    for (name, part) in &first.splits {
        let clips: usize = found.iter().map(|f| f.record.splits[name].clips).sum();
        let rows = output_rows(&plan, &found, name, clips)?;
        let spec = SinkSpec {
            meta_columns: first.meta_columns.clone(),
            split: name.clone(),
            rows,
            plan: plan.clone(),
            label_names: first.label_names.clone(),
            provenance: config.resolved_json(),
        };
        let sink = outputs::make_sink(&config, out, spec, threads, &build_id)?;
        splits.push((name.clone(), part.files, rows, sink, 0usize, None));
    }
    let total: usize = splits.iter().map(|s| s.2).sum();
    observer.split_started("merge", total as u64);
    for f in &found {
        let _shard_lock = DirLock::try_now(&f.dir)?;
        match ShardRecord::read(&f.dir)? {
            Some(now) if now == f.record => {}
            _ => {
                return Err(bad(
                    &f.dir,
                    "changed during the merge (built again?); merge once every shard is done"
                        .into(),
                ));
            }
        }
        f.record.verify(&f.dir)?;
        for (name, _, _, sink, row, last) in &mut splits {
            let path = f.dir.join(&f.record.splits[name.as_str()].output);
            let sink = sink.as_mut();
            let columns = &first.meta_columns;
            *row += copy_rows(
                &path, name, &plan, columns, *row, last, sink, observer, cancel,
            )?;
        }
    }
    observer.split_finished("merge");
    let mut finished: Vec<(String, Finished)> = Vec::new();
    for (name, files, rows, sink, row, _) in splits {
        // Whole clips: `rows` counts blocks; the report counts clips.
        let clips: usize = found.iter().map(|f| f.record.splits[&name].clips).sum();
        if row != rows {
            return Err(bad(
                &out.join(SHARDS_DIR),
                format!("split {name}: the shards hold {row} rows; their records say {rows}"),
            ));
        }
        let skipped: Vec<String> = found
            .iter()
            .flat_map(|f| f.record.splits[name.as_str()].skipped.iter().cloned())
            .collect();
        // A split none of whose files made it is not published, as a build refuses it
        // (each shard's part may be empty: judged here, on the whole split).
        if clips == 0 && files > 0 {
            return Err(Error::NothingLeft {
                split: name,
                files,
                first: skipped
                    .first()
                    .cloned()
                    .unwrap_or_else(|| "none named".into()),
            });
        }
        let output = sink.finish(rows)?;
        report.splits.push(MergedSplit {
            split: name.clone(),
            files,
            clips,
            skipped,
            output: output.final_path().to_path_buf(),
            output_bytes: output.bytes(),
        });
        finished.push((name, output));
    }
    // The last point where a cancel stops the merge: once the publish begins, it
    // completes whole.
    observer.before_publish();
    if cancel.load(Ordering::SeqCst) {
        return Err(Error::Interrupted {
            split: None,
            journaled: false,
        });
    }
    mel_sinks::publish_build(out, &build_id, finished, &|_| false, config.output.fsync)?;
    report.wall = started.elapsed();
    Ok(report)
}

/// The merge's output guard, as a build runs its own: the merged splits, the build record
/// and `also_writes` may replace no shard's file (the merge's inputs), no other output of
/// the merge, and nothing of another kind (someone's folder where an npy split goes).
fn check_outputs(
    out: &Path,
    config: &Config,
    found: &[Found],
    also_writes: &[Output],
) -> Result<()> {
    let mut guard = Guard::new();
    for f in found {
        protect_folder(&mut guard, &f.dir, 2)?;
        protect_sources(&mut guard, f);
    }
    let mut planned: Vec<Output> = found[0]
        .record
        .splits
        .keys()
        .map(|name| outputs::split_output(config, out, name, format!("the merged split {name}")))
        .collect();
    planned.push(Output::new(
        mel_core::record::path(out),
        "the build record",
        Written::File,
    ));
    planned.extend(also_writes.iter().cloned());
    guard.check(&planned)?;
    Ok(())
}

/// Protects what shard `f` was built from, as its build protected it: the manifest, and
/// each clip its outputs' rows name under the tree's root (a merge report written over a
/// clip of the dataset replaced it). A record from before roots were kept, or an output
/// that does not open (refused later, by name), protects nothing here.
fn protect_sources(guard: &mut Guard, f: &Found) {
    if let Some(m) = &f.record.manifest {
        guard.input(m, "the manifest the shards were built from");
    }
    let Some(root) = &f.record.root else { return };
    for part in f.record.splits.values() {
        if let Ok(split) = melread::Split::open(f.dir.join(&part.output)) {
            for p in split.paths() {
                guard.input(&root.join(p), "an input of the sharded build");
            }
        }
    }
}

/// Protects every file in `dir` and, `depth` levels down, in its folders (a shard's npy
/// split folders), as a merge input.
fn protect_folder(guard: &mut Guard, dir: &Path, depth: usize) -> Result<()> {
    let entries = std::fs::read_dir(dir).map_err(|e| mel_core::Error::io(dir, e))?;
    for entry in entries {
        let entry = entry.map_err(|e| mel_core::Error::io(dir, e))?;
        let path = entry.path();
        match std::fs::metadata(&path) {
            Ok(m) if m.is_dir() && depth > 1 => protect_folder(guard, &path, depth - 1)?,
            Ok(m) if m.is_file() => guard.input(&path, "a shard's file (an input of the merge)"),
            _ => {}
        }
    }
    Ok(())
}

/// Copies every clip of the shard output at `path` (split `name`) into `sink` from row
/// `first_row` on, with its label, path and source facts; returns the clips copied.
#[allow(clippy::too_many_arguments)]
fn copy_rows(
    path: &Path,
    name: &str,
    plan: &MelPlan,
    columns: &[String],
    first_row: usize,
    last: &mut Option<String>,
    sink: &mut dyn mel_core::Sink,
    observer: &dyn Observer,
    cancel: &AtomicBool,
) -> Result<usize> {
    let split = melread::Split::open(path)?;
    if split.name() != name {
        return Err(bad(
            path,
            format!("holds split {}, not split {name}", split.name()),
        ));
    }
    if split.clip_shape() != plan.clip_shape() || split.dtype() != plan.dtype() {
        return Err(bad(
            path,
            format!(
                "holds clips of {:?} {}; the configuration gives {:?} {}",
                split.clip_shape(),
                split.dtype().name(),
                plan.clip_shape(),
                plan.dtype().name()
            ),
        ));
    }
    if split.meta_columns() != columns {
        return Err(bad(
            path,
            format!(
                "holds the metadata columns [{}]; the shards' record names [{}]",
                split.meta_columns().join(", "),
                columns.join(", ")
            ),
        ));
    }
    let clips = split.clips();
    let per = plan.bytes_per_clip();
    let batch = (BATCH_BYTES / per.max(1)).clamp(1, clips.max(1));
    let provenance = split.provenance();
    let source = |i: usize| SourceInfo {
        rate: provenance.source_rate.as_ref().map_or(0, |v| v[i]),
        channels: provenance.source_channels.as_ref().map_or(0, |v| v[i]),
        frames: provenance.source_frames.as_ref().map_or(0, |v| v[i]),
    };
    let mut reader = split.reader();
    let mut bytes = Vec::with_capacity(batch * per);
    for start in (0..clips).step_by(batch) {
        if cancel.load(Ordering::SeqCst) {
            return Err(Error::Interrupted {
                split: Some(split.name().to_string()),
                journaled: false,
            });
        }
        let end = (start + batch).min(clips);
        bytes.clear();
        let mut metas = Vec::with_capacity(end - start);
        for i in start..end {
            // A file read whole (a whole clip's blocks, windows) has rows of one path
            // (melread checked the runs): its first row follows the last file merged.
            let read_whole = split.whole().is_some() || split.windows().is_some();
            let same_clip = read_whole && i > 0 && split.paths()[i - 1] == split.paths()[i];
            if !same_clip {
                follows(path, last, &split.paths()[i])?;
            }
            bytes.extend_from_slice(reader.raw(i, None)?);
            metas.push(ClipMeta {
                meta: split.clip_meta(i).into(),
                index: first_row + i,
                source: source(i),
                label: split.labels()[i],
                path: split.paths()[i].clone(),
            });
        }
        let data = OutputBuf::from_bytes(plan.dtype(), &bytes)
            .ok_or_else(|| bad(path, "its clips do not fill whole values".into()))?;
        sink.write(first_row + start, &metas, &data)?;
        observer.progress((end - start) as u64);
    }
    Ok(clips)
}

/// The rows split `name`'s merged output holds: one per clip, or for whole clips the
/// shards' rows (blocks).
fn output_rows(plan: &MelPlan, found: &[Found], name: &str, clips: usize) -> Result<usize> {
    if plan.whole().is_none() {
        return Ok(clips);
    }
    found.iter().try_fold(0usize, |n, f| {
        let path = f.dir.join(&f.record.splits[name].output);
        Ok(n + melread::Split::open(&path)?.clips())
    })
}

/// Refuses a row of `output` whose path `next` does not come after the `last` merged
/// row's: each split's files are sorted by their relative path as a string (the scan's
/// and the manifest's order, compared the same way here: `leak-small/` before `leak/`)
/// and cut into consecutive ranges, so the merged rows of a true set of shards strictly
/// increase. A shard folder copied over
/// another with its record edited (its own rows again, under another range) merged its
/// clips twice and lost the other's.
fn follows(output: &Path, last: &mut Option<String>, next: &str) -> Result<()> {
    if let Some(before) = last.as_deref()
        && next <= before
    {
        return Err(bad(
            output,
            format!(
                "its row of {next:?} does not come after {before:?}, merged before it: the shards overlap or are out of order (a shard folder copied or renamed?); build the shards again"
            ),
        ));
    }
    *last = Some(next.to_string());
    Ok(())
}

/// The shards of one count under `out/shards`, every one of `0..N` present, in order.
fn find_shards(out: &Path, count: Option<usize>) -> Result<Vec<(Shard, PathBuf)>> {
    let root = out.join(SHARDS_DIR);
    let no_shards = || {
        bad(
            out,
            format!("holds no shard folder ({SHARDS_DIR}/K-of-N, written by sharded builds)"),
        )
    };
    match std::fs::metadata(&root) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Err(no_shards()),
        Err(e) => return Err(mel_core::Error::io(&root, e).into()),
        Ok(m) if !m.is_dir() => return Err(bad(&root, "is not a folder".into())),
        Ok(_) => {}
    }
    let entries = std::fs::read_dir(&root).map_err(|e| mel_core::Error::io(&root, e))?;
    let mut all: Vec<Shard> = Vec::new();
    for entry in entries {
        let entry = entry.map_err(|e| mel_core::Error::io(&root, e))?;
        let name = entry.file_name();
        let Some(shard) = name.to_str().and_then(Shard::from_dir_name) else {
            continue;
        };
        // A folder, or a link to one (a build writes through such a link too).
        if std::fs::metadata(entry.path()).is_ok_and(|m| m.is_dir()) {
            all.push(shard);
        }
    }
    let mut counts: Vec<usize> = all.iter().map(Shard::count).collect();
    counts.sort_unstable();
    counts.dedup();
    let n = match (count, counts.as_slice()) {
        (Some(n), _) => n,
        (None, [n]) => *n,
        (None, []) => return Err(no_shards()),
        (None, many) => {
            let many: Vec<String> = many.iter().map(usize::to_string).collect();
            return Err(bad(
                &root,
                format!(
                    "holds shards of {} counts ({}); say which to merge",
                    many.len(),
                    many.join(", ")
                ),
            ));
        }
    };
    let missing: Vec<String> = (0..n)
        .filter(|&k| !all.contains(&Shard::new(k, n).expect("k < n")))
        .map(|k| format!("{k}-of-{n}"))
        .collect();
    if !missing.is_empty() {
        return Err(bad(
            &root,
            format!(
                "{} of {n} shards missing: {}",
                missing.len(),
                named(&missing)
            ),
        ));
    }
    Ok((0..n)
        .map(|k| {
            let s = Shard::new(k, n).expect("k < n");
            (s, s.dir(out))
        })
        .collect())
}

/// Each shard's record: every one there and complete.
fn read_records(shards: &[(Shard, PathBuf)]) -> Result<Vec<Found>> {
    let mut found = Vec::with_capacity(shards.len());
    let mut incomplete = Vec::new();
    for (shard, dir) in shards {
        match ShardRecord::read(dir)? {
            Some(record) => found.push(Found {
                shard: *shard,
                dir: dir.clone(),
                record,
            }),
            None => incomplete.push(shard.dir_name()),
        }
    }
    if !incomplete.is_empty() {
        let root = shards[0].1.parent().unwrap_or(Path::new(""));
        return Err(bad(
            root,
            format!(
                "{} of {} shards not complete (no shard.json: still building, failed or killed; build them again): {}",
                incomplete.len(),
                shards.len(),
                named(&incomplete)
            ),
        ));
    }
    Ok(found)
}

/// Refuses a set of shards that are not of one build: each record must be its folder's
/// shard, of the same version, configuration (its run options aside), classes and
/// splits, each split seen as the same file set, cut into the ranges the partition gives.
fn check_consistent(found: &[Found]) -> Result<()> {
    let first = &found[0].record;
    for f in found {
        let r = &f.record;
        let path = f.dir.join(SHARD_RECORD);
        let differs = |what: &str| {
            Err(bad(
                &path,
                format!("its {what} differs from shard 0-of-{}'s", f.shard.count()),
            ))
        };
        if (r.shard, r.of) != (f.shard.index(), f.shard.count()) {
            return Err(bad(
                &path,
                format!(
                    "says shard {}/{}, in the folder of shard {}",
                    r.shard, r.of, f.shard
                ),
            ));
        }
        if r.melctl_version != first.melctl_version {
            return differs("melctl version");
        }
        if let Some(key) = first_difference(&first.values_config(), &r.values_config(), "") {
            return Err(bad(
                &path,
                format!(
                    "its configuration differs from shard 0-of-{}'s at {key}",
                    f.shard.count()
                ),
            ));
        }
        if r.backend != first.backend {
            return Err(bad(
                &path,
                format!(
                    "was computed by the {} backend, shard 0-of-{} by the {} backend: backends agree within the conformance bound, not bit for bit, so the merge would equal no single build; build every shard on one backend",
                    r.backend,
                    f.shard.count(),
                    first.backend
                ),
            ));
        }
        if r.label_names != first.label_names {
            return differs("label map");
        }
        if r.meta_columns != first.meta_columns {
            return differs("metadata columns");
        }
        if r.splits.keys().ne(first.splits.keys()) {
            return differs("set of splits");
        }
        for (name, part) in &r.splits {
            let want = &first.splits[name];
            if part.output != want.output
                || mel_core::format::split_of_name(&part.output) != Some(name.as_str())
            {
                return Err(bad(
                    &path,
                    format!(
                        "split {name}: names the output {:?}, not split {name}'s",
                        part.output
                    ),
                ));
            }
            if (part.files, &part.fingerprint) != (want.files, &want.fingerprint) {
                return Err(bad(
                    &path,
                    format!(
                        "split {name}: built from another file set than shard 0-of-{} ({} files against {}): the tree changed between the tasks; build every shard again",
                        f.shard.count(),
                        part.files,
                        want.files
                    ),
                ));
            }
            let range = f.shard.range(part.files);
            // With windows a file gives several clips; otherwise at most one.
            let windows = f.record.config["audio"].get("windows").is_some();
            if (part.first, part.end) != (range.start, range.end)
                || (part.clips > range.len() && !windows)
            {
                return Err(bad(
                    &path,
                    format!(
                        "split {name}: holds files {}..{} ({} clips); shard {} of {} files is {}..{}",
                        part.first,
                        part.end,
                        part.clips,
                        f.shard,
                        part.files,
                        range.start,
                        range.end
                    ),
                ));
            }
        }
    }
    Ok(())
}

/// The first key path (`output.dtype`) where `a` and `b` differ, if any.
fn first_difference(a: &serde_json::Value, b: &serde_json::Value, at: &str) -> Option<String> {
    use serde_json::Value;
    match (a, b) {
        (Value::Object(x), Value::Object(y)) => {
            let keys: std::collections::BTreeSet<&String> = x.keys().chain(y.keys()).collect();
            keys.into_iter().find_map(|k| {
                let path = if at.is_empty() {
                    k.clone()
                } else {
                    format!("{at}.{k}")
                };
                match (x.get(k), y.get(k)) {
                    (Some(p), Some(q)) => first_difference(p, q, &path),
                    _ => Some(path),
                }
            })
        }
        _ if a == b => None,
        _ => Some(if at.is_empty() {
            "the top".into()
        } else {
            at.to_string()
        }),
    }
}

/// At most twelve names, then how many more.
fn named(names: &[String]) -> String {
    const SHOWN: usize = 12;
    let mut s = names
        .iter()
        .take(SHOWN)
        .cloned()
        .collect::<Vec<_>>()
        .join(", ");
    if names.len() > SHOWN {
        s += &format!(" and {} more", names.len() - SHOWN);
    }
    s
}

fn bad(path: &Path, reason: String) -> Error {
    Error::Core(mel_core::Error::Dataset {
        root: path.to_path_buf(),
        reason,
    })
}

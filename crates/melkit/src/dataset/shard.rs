//! Sharded builds: one task of an array job (Slurm, a Kubernetes Indexed Job, a Dask or
//! Ray map) builds shard `K` of `N` into `OUT/shards/K-of-N/`, independently of the
//! others and with no coordinator; [`merge`](super::merge) then writes what one build of
//! the whole dataset would have written.
//!
//! The partition: each split's files, sorted by relative path (the scan's order, which
//! does not depend on the order the file system lists them), cut into `N` contiguous
//! ranges of equal size to within one file. Contiguous ranges make the merge a
//! concatenation in order (streamed, no sort) and each shard's output one block of the
//! merged one; clips of one length cost the same, so equal counts are equal work. Every
//! shard records each split's fingerprint (its file count, relative paths and labels):
//! shards that saw different trees (a file added between two tasks) are refused at the
//! merge, never merged into a dataset no single build would give.

use std::collections::BTreeMap;
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::AtomicBool;

use mel_audio::{Dataset, FileEntry, ScannedSplit};
use mel_core::Config;
use serde::{Deserialize, Serialize};

use super::error::{Error, Result};
use super::{Build, BuildReport, BuildSettings, Observer, lock_folder, timed};

/// The most shards a build may be cut into.
pub const MAX_SHARDS: usize = 1 << 20;

/// The folder, under a build's output folder, that holds the shards.
pub const SHARDS_DIR: &str = "shards";

/// The file, in a shard's folder, that says the shard is complete and what it holds.
pub const SHARD_RECORD: &str = "shard.json";

/// The build report a shard writes beside its outputs.
pub const SHARD_REPORT: &str = "report.json";

/// Version of [`ShardRecord`]'s layout.
pub const SHARD_FORMAT: u32 = 1;

/// One shard of a sharded build: `index` of `count`, numbered from 0.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Shard {
    index: usize,
    count: usize,
}

impl Shard {
    /// Shard `index` of `count` (from 0): refused unless `index < count <= MAX_SHARDS`.
    pub fn new(index: usize, count: usize) -> Result<Shard> {
        if count == 0 || count > MAX_SHARDS {
            return Err(shard_error(format!(
                "{count} shards: give 1 to {MAX_SHARDS}"
            )));
        }
        if index >= count {
            return Err(shard_error(format!(
                "shard {index} of {count}: shards are numbered from 0 to {}",
                count - 1
            )));
        }
        Ok(Shard { index, count })
    }

    /// Parses `K/N` (`3/8`: the fourth of eight, numbered from 0).
    pub fn parse(text: &str) -> Result<Shard> {
        let bad = || {
            shard_error(format!(
                "{text:?} is not K/N (shard K of N, numbered from 0: 0/4, 1/4, 2/4, 3/4)"
            ))
        };
        let (k, n) = text.split_once('/').ok_or_else(bad)?;
        let num = |s: &str| s.trim().parse::<usize>().map_err(|_| bad());
        Shard::new(num(k)?, num(n)?)
    }

    /// The shard's number, from 0.
    pub fn index(&self) -> usize {
        self.index
    }

    /// How many shards there are.
    pub fn count(&self) -> usize {
        self.count
    }

    /// The shard's folder name, `K-of-N`.
    pub fn dir_name(&self) -> String {
        format!("{}-of-{}", self.index, self.count)
    }

    /// The shard's folder under the build's output folder `out`: `out/shards/K-of-N`.
    pub fn dir(&self, out: &Path) -> PathBuf {
        out.join(SHARDS_DIR).join(self.dir_name())
    }

    /// Reads a folder name `K-of-N` back; `None` for any other name.
    pub fn from_dir_name(name: &str) -> Option<Shard> {
        let (k, n) = name.split_once("-of-")?;
        let number = |s: &str| {
            !s.is_empty()
                && s.bytes().all(|b| b.is_ascii_digit())
                && (s.len() == 1 || !s.starts_with('0'))
        };
        if !number(k) || !number(n) {
            return None;
        }
        Shard::new(k.parse().ok()?, n.parse().ok()?).ok()
    }

    /// The files `[start, end)` of a split of `files` files this shard takes: the `N`
    /// ranges are contiguous, in order, and differ in size by at most one file.
    pub fn range(&self, files: usize) -> Range<usize> {
        let cut = |k: usize| ((k as u128 * files as u128) / self.count as u128) as usize;
        cut(self.index)..cut(self.index + 1)
    }

    /// `dataset` with each split cut to this shard's range; the label map and everything
    /// else are the whole dataset's.
    pub fn part(&self, dataset: &Dataset) -> Dataset {
        // Only the range's entries are copied: a shard of a million-file tree holds its
        // part, not a second copy of the whole list.
        let splits = dataset
            .splits
            .iter()
            .map(|s| ScannedSplit {
                name: s.name.clone(),
                files: s.files[self.range(s.files.len())].to_vec(),
                unreadable: s.unreadable.clone(),
            })
            .collect();
        Dataset {
            root: dataset.root.clone(),
            label_names: dataset.label_names.clone(),
            meta_columns: dataset.meta_columns.clone(),
            splits,
            ignored: dataset.ignored.clone(),
        }
    }
}

impl std::fmt::Display for Shard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.index, self.count)
    }
}

fn shard_error(reason: String) -> Error {
    Error::Core(mel_core::Error::config("shard", reason))
}

/// A split's identity across machines: its file count and every file's listing (relative
/// path, label, metadata: [`FileEntry::hash_listing`]), hashed (xxh3-128, hex). Unlike the resume journal's fingerprint it leaves
/// out sizes, times and inodes, which differ between the nodes that mount one tree.
pub fn split_fingerprint(split: &ScannedSplit) -> String {
    let mut h = xxhash_rust::xxh3::Xxh3::new();
    h.update(&(split.files.len() as u64).to_le_bytes());
    for f in &split.files {
        f.hash_listing(&mut h);
    }
    format!("{:032x}", h.digest128())
}

/// The shard's own files as they are now: each one's listing (path, label, metadata), size and
/// modification time (xxh3-128, hex). A rerun of the shard compares it, so audio changed
/// in place (or a broken file repaired) is built again rather than kept.
pub fn range_fingerprint(files: &[FileEntry]) -> String {
    use std::os::unix::fs::MetadataExt;
    let mut h = xxhash_rust::xxh3::Xxh3::new();
    h.update(&(files.len() as u64).to_le_bytes());
    for f in files {
        let (size, secs, nanos) = match std::fs::metadata(&f.path) {
            Ok(m) => (m.len(), m.mtime(), m.mtime_nsec()),
            Err(_) => (u64::MAX, 0, 0),
        };
        f.hash_listing(&mut h);
        for v in [size, secs as u64, nanos as u64] {
            h.update(&v.to_le_bytes());
        }
    }
    format!("{:032x}", h.digest128())
}

/// What a shard holds of one split.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ShardSplit {
    /// Files of the whole split.
    pub files: usize,
    /// The shard's files, `[first, end)` of the split's sorted list.
    pub first: usize,
    /// End of the shard's range.
    pub end: usize,
    /// The whole split's [`split_fingerprint`].
    pub fingerprint: String,
    /// The shard's own files' [`range_fingerprint`] when it was built.
    pub content: String,
    /// Clips the shard's output holds (its files less those left out).
    pub clips: usize,
    /// The files the shard left out, each `path: reason`.
    pub skipped: Vec<String>,
    /// The shard's output, relative to its folder.
    pub output: String,
}

/// `shard.json`: written last, after the shard's outputs are published, so its presence
/// says the shard is complete; the merge checks every shard's against the others'.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ShardRecord {
    /// [`SHARD_FORMAT`].
    pub format: u32,
    /// This shard's number, from 0.
    pub shard: usize,
    /// How many shards there are.
    pub of: usize,
    /// The melctl version that built it.
    pub melctl_version: String,
    /// The build id its outputs carry.
    pub build: String,
    /// The backend that computed it (`cpu`, `cuda`, `wgpu`); in a planned record, the
    /// one asked for, or empty for `auto`.
    pub backend: String,
    /// The configuration, resolved (its `run` part may differ between shards).
    pub config: serde_json::Value,
    /// The whole tree's class names, in id order.
    pub label_names: Vec<String>,
    /// The metadata columns every output holds, in order (absent from records written
    /// before metadata: none).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub meta_columns: Vec<String>,
    /// Each split's part, by name.
    pub splits: BTreeMap<String, ShardSplit>,
    /// What the scan of the whole tree left out of every split (hidden audio, files that
    /// are not audio, links not followed): the same in every shard, reported once by the
    /// merge (`--strict` counts the audio among them, as a build does). Absent from
    /// records written before it was kept.
    #[serde(default)]
    pub ignored: Vec<IgnoredEntry>,
    /// The tree's root folder (a manifest's folder), absolute, as the shard's build saw
    /// it: the merge protects the files under it that the rows name from its outputs.
    /// Absent from records written before it was kept.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub root: Option<PathBuf>,
    /// The manifest the shard was built from, absolute, if it was (protected likewise).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub manifest: Option<PathBuf>,
}

/// An entry the scan left out of the dataset, and why (a [`mel_audio::scan::Skipped`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct IgnoredEntry {
    /// The file or folder.
    pub path: PathBuf,
    /// Why, in words.
    pub reason: String,
    /// Audio files it is or holds (left out: a strict caller counts them).
    pub audio: usize,
}

impl IgnoredEntry {
    /// `entry` as a record keeps it.
    pub fn of(entry: &mel_audio::scan::Skipped) -> IgnoredEntry {
        IgnoredEntry {
            path: entry.path.clone(),
            reason: entry.reason.clone(),
            audio: entry.audio,
        }
    }
}

impl ShardRecord {
    /// The record `shard` would write for `dataset` (the whole tree, from `manifest` if
    /// one) and `config`, before its build: every field but the build id, the clips and
    /// the skipped files.
    pub fn planned(
        shard: Shard,
        dataset: &Dataset,
        manifest: Option<&Path>,
        config: &Config,
    ) -> ShardRecord {
        let splits = dataset
            .splits
            .iter()
            .map(|s| {
                let range = shard.range(s.files.len());
                let output = super::final_path(config, Path::new(""), &s.name);
                let part = ShardSplit {
                    files: s.files.len(),
                    first: range.start,
                    end: range.end,
                    fingerprint: split_fingerprint(s),
                    content: range_fingerprint(&s.files[range]),
                    clips: 0,
                    skipped: Vec::new(),
                    output: output.display().to_string(),
                };
                (s.name.clone(), part)
            })
            .collect();
        ShardRecord {
            format: SHARD_FORMAT,
            shard: shard.index,
            of: shard.count,
            melctl_version: env!("CARGO_PKG_VERSION").to_string(),
            build: String::new(),
            backend: match config.run.backend {
                mel_core::config::BackendKind::Auto => String::new(),
                kind => kind.name().to_string(),
            },
            config: serde_json::from_str(&config.resolved_json()).expect("a config is JSON"),
            label_names: dataset.label_names.clone(),
            meta_columns: dataset.meta_columns.clone(),
            splits,
            ignored: dataset.ignored.iter().map(IgnoredEntry::of).collect(),
            root: std::path::absolute(&dataset.root).ok(),
            manifest: manifest.and_then(|m| std::path::absolute(m).ok()),
        }
    }

    /// What must be equal in every shard: the configuration seen as
    /// [`Sameness::Output`](mel_core::config::Sameness::Output) (all but how it was run
    /// and flushed).
    pub fn values_config(&self) -> serde_json::Value {
        mel_core::config::Sameness::Output.view(&self.config)
    }

    /// Whether `self` (read from disk) is the record `planned` describes, built: the same
    /// shard, version, configuration, classes and split ranges of the same trees.
    pub fn matches(&self, planned: &ShardRecord) -> bool {
        let same_parts = self.splits.len() == planned.splits.len()
            && self.splits.iter().all(|(name, s)| {
                planned.splits.get(name).is_some_and(|p| {
                    (
                        s.files,
                        s.first,
                        s.end,
                        &s.fingerprint,
                        &s.content,
                        &s.output,
                    ) == (
                        p.files,
                        p.first,
                        p.end,
                        &p.fingerprint,
                        &p.content,
                        &p.output,
                    )
                })
            });
        self.format == planned.format
            && (planned.backend.is_empty() || planned.backend == self.backend)
            && (self.shard, self.of) == (planned.shard, planned.of)
            && self.melctl_version == planned.melctl_version
            && self.values_config() == planned.values_config()
            && self.label_names == planned.label_names
            && self.meta_columns == planned.meta_columns
            && same_parts
    }

    /// Checks that the shard in `dir` holds what this record says: the folder's build
    /// record names this build, and every split's output opens (every check of the
    /// reader) as that build's, with the clips the record counts.
    pub fn verify(&self, dir: &Path) -> Result<()> {
        let bad = |reason: String| {
            Error::Core(mel_core::Error::Dataset {
                root: dir.to_path_buf(),
                reason,
            })
        };
        let folder = mel_core::record::read(dir)?
            .ok_or_else(|| bad("has no build record (melctl-build.json)".into()))?;
        if folder.build.as_deref() != Some(self.build.as_str()) {
            return Err(bad(format!(
                "its build record is of build {}, its shard.json of build {}",
                folder.build.as_deref().unwrap_or("(none)"),
                self.build
            )));
        }
        for (name, part) in &self.splits {
            let path = dir.join(&part.output);
            let entry = folder
                .splits
                .get(name)
                .ok_or_else(|| bad(format!("its build record does not name split {name}")))?;
            melread::commit::verify_published(&path, &entry.build)?;
            let split = melread::Split::open(&path)?;
            // Whole clips: a clip is a run of rows.
            let held = split.whole().map_or(split.clips(), |w| w.clips());
            if held != part.clips {
                return Err(bad(format!(
                    "{} holds {} clips; its shard.json says {}",
                    path.display(),
                    held,
                    part.clips
                )));
            }
        }
        Ok(())
    }

    /// Reads `dir/shard.json`: `None` when there is none; an error naming the file when
    /// it does not read as a shard record.
    pub fn read(dir: &Path) -> Result<Option<ShardRecord>> {
        let path = dir.join(SHARD_RECORD);
        if std::fs::symlink_metadata(&path).is_err() {
            return Ok(None);
        }
        let bytes = mel_core::input::read_bounded(&path, MAX_RECORD_BYTES)
            .map_err(|e| mel_core::Error::read(&path, e))?;
        let record: ShardRecord = serde_json::from_slice(&bytes).map_err(|e| {
            Error::Core(mel_core::Error::Dataset {
                root: path.clone(),
                reason: format!("is not a shard record: {e}"),
            })
        })?;
        if record.format != SHARD_FORMAT {
            return Err(Error::Core(mel_core::Error::Dataset {
                root: path,
                reason: format!(
                    "has format {}; this melctl reads format {SHARD_FORMAT}",
                    record.format
                ),
            }));
        }
        Ok(Some(record))
    }

    /// Writes `dir/shard.json` atomically (and durably when `durable`).
    pub fn write(&self, dir: &Path, durable: bool) -> Result<()> {
        let text = serde_json::to_string_pretty(self).expect("a shard record is JSON") + "\n";
        mel_core::atomic::write_file(&dir.join(SHARD_RECORD), text.as_bytes(), durable)?;
        Ok(())
    }
}

/// What a shard task did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ShardOutcome {
    /// It built the shard.
    Built,
    /// The shard was complete and verified already (an array task's retry): nothing
    /// was done. `skipped`: the files its build left out, `path: reason`, named again
    /// (a strict caller fails on them as the first run did).
    AlreadyComplete {
        /// The files left out.
        skipped: Vec<String>,
    },
}

/// The `shard` entry of a sharded build's report (`melctl build --report`,
/// `melctl.build`'s dict), the same from every front end: which shard, its folder,
/// whether this run built it, and, for a retry of a complete shard, the files its build
/// left out.
pub fn report_json(shard: Shard, folder: &Path, outcome: &ShardOutcome) -> serde_json::Value {
    let skipped: &[String] = match outcome {
        ShardOutcome::Built => &[],
        ShardOutcome::AlreadyComplete { skipped } => skipped,
    };
    serde_json::json!({
        "index": shard.index(),
        "count": shard.count(),
        "folder": folder,
        "built": matches!(outcome, ShardOutcome::Built),
        "skipped": skipped,
    })
}

/// Builds `shard` of `dataset` (the whole tree, whose label map every shard keeps) with
/// `settings` into `out/shards/K-of-N/`, as [`Build::run`] builds a folder, then writes
/// its report and, last, its `shard.json`. A shard whose `shard.json` matches this task
/// (version, configuration, classes, split ranges of the same trees) and whose outputs
/// verify is left as it is ([`ShardOutcome::AlreadyComplete`]); any other earlier
/// attempt loses its `shard.json` first, so a task killed midway leaves the shard
/// incomplete, never looking complete. `--resume` works within a shard as in any build.
pub fn build_shard(
    dataset: &Dataset,
    settings: BuildSettings,
    shard: Shard,
    out: &Path,
    observer: &dyn Observer,
    cancel: &Arc<AtomicBool>,
    report: &mut BuildReport,
) -> Result<ShardOutcome> {
    if !settings.only.is_empty() {
        return Err(Error::ShardOfSomeSplits { shard });
    }
    let part = shard.part(dataset);
    let build = Build::new(&part, settings)?.of_a_shard();
    let tree = (dataset, None);
    run_shard(tree, &build, shard, out, observer, cancel, report)
}

/// [`build_shard`] with `build`, the build of `shard`'s part of `dataset` (listed from
/// `manifest`, if one), checked.
pub(super) fn run_shard(
    (dataset, manifest): (&Dataset, Option<&Path>),
    build: &Build<'_>,
    shard: Shard,
    out: &Path,
    observer: &dyn Observer,
    cancel: &Arc<AtomicBool>,
    report: &mut BuildReport,
) -> Result<ShardOutcome> {
    let settings = build.settings();
    let durable = settings.config.output.fsync;
    let config_json = settings.config.resolved_json();
    let mut record = ShardRecord::planned(shard, dataset, manifest, &settings.config);
    let dir = shard.dir(out);
    timed(report, |report| {
        let _lock = lock_folder(&dir)?;
        match ShardRecord::read(&dir) {
            Ok(Some(found)) if found.matches(&record) => match found.verify(&dir) {
                Ok(()) => {
                    observer.notice(&format!(
                        "shard {shard}: complete and verified in {}; nothing to do",
                        dir.display()
                    ));
                    let skipped = found.splits.values().flat_map(|s| s.skipped.clone());
                    return Ok(ShardOutcome::AlreadyComplete {
                        skipped: skipped.collect(),
                    });
                }
                Err(e) => observer.notice(&format!(
                    "shard {shard}: the earlier build does not verify ({}); building it again",
                    mel_core::error::one_line(&e.to_string())
                )),
            },
            Ok(Some(_)) => observer.notice(&format!(
                "shard {shard}: the earlier build is of another configuration, backend, version or file set, or its files changed since; building it again"
            )),
            Ok(None) => {}
            Err(e) => observer.notice(&format!(
                "shard {shard}: {}; building it again",
                mel_core::error::one_line(&e.to_string())
            )),
        }
        remove_record(&dir)?;
        build.run_locked(&dir, observer, cancel, report)?;
        let published = mel_core::record::read(&dir)?.and_then(|r| r.build);
        record.backend = report.backend_name.clone();
        record.build = published.ok_or_else(|| {
            Error::Core(mel_core::Error::Internal(format!(
                "{} has no build record after the shard's publish",
                dir.display()
            )))
        })?;
        for s in &report.splits {
            if let Some(part) = record.splits.get_mut(&s.split) {
                part.clips = s.clips;
                part.skipped = skipped_lines(&s.skipped);
            }
        }
        for k in &report.kept {
            if let Some(part) = record.splits.get_mut(&k.split) {
                part.clips = (part.end - part.first).saturating_sub(k.skipped.len());
                part.skipped = skipped_lines(&k.skipped);
            }
        }
        let json = serde_json::to_string_pretty(&report.to_json(&config_json, None))
            .expect("a report is JSON")
            + "\n";
        mel_core::atomic::write_file(&dir.join(SHARD_REPORT), json.as_bytes(), durable)?;
        record.write(&dir, durable)?;
        Ok(ShardOutcome::Built)
    })
}

/// Each left-out file as `path: reason`.
fn skipped_lines(skipped: &[mel_core::ClipFailure]) -> Vec<String> {
    skipped
        .iter()
        .map(|f| format!("{}: {}", f.path.display(), f.reason))
        .collect()
}

/// Removes `dir/shard.json` if it is there: the shard is incomplete from now on.
fn remove_record(dir: &Path) -> Result<()> {
    let path = dir.join(SHARD_RECORD);
    match std::fs::remove_file(&path) {
        Ok(()) => std::fs::File::open(dir)
            .and_then(|d| d.sync_all())
            .map_err(|e| mel_core::Error::io(dir, e).into()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(mel_core::Error::io(&path, e).into()),
    }
}

/// Shard records larger than this are refused (a record names each skipped file; 256
/// MiB is far beyond any real one).
pub const MAX_RECORD_BYTES: u64 = 256 << 20;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_cover_every_file_once_in_order_and_differ_by_at_most_one() {
        for files in [0usize, 1, 2, 7, 100, 1001] {
            for count in [1usize, 2, 3, 7, 16, 2000] {
                let mut next = 0;
                let mut sizes = Vec::new();
                for k in 0..count {
                    let r = Shard::new(k, count).unwrap().range(files);
                    assert_eq!(r.start, next, "{files} files, {k}/{count}");
                    next = r.end;
                    sizes.push(r.len());
                }
                assert_eq!(next, files);
                let (lo, hi) = (sizes.iter().min().unwrap(), sizes.iter().max().unwrap());
                assert!(hi - lo <= 1, "{files} files in {count}: {lo}..{hi}");
            }
        }
    }

    #[test]
    fn shard_names_parse_and_bad_ones_are_refused() {
        assert_eq!(Shard::parse("3/8").unwrap(), Shard::new(3, 8).unwrap());
        assert_eq!(Shard::parse(" 0 / 1 ").unwrap().dir_name(), "0-of-1");
        for bad in ["8/8", "1/0", "-1/4", "a/4", "3", "3/4/5", "", "1/2000000"] {
            let e = Shard::parse(bad).unwrap_err().to_string();
            assert!(e.contains("shard"), "{bad}: {e}");
        }
        assert_eq!(
            Shard::from_dir_name("2-of-5"),
            Some(Shard::new(2, 5).unwrap())
        );
        for bad in [
            "5-of-5",
            "02-of-5",
            "x-of-5",
            "2-of-",
            "2of5",
            "-1-of-5",
            "2-of-5.tmp",
        ] {
            assert_eq!(Shard::from_dir_name(bad), None, "{bad}");
        }
    }
}

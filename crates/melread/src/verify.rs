//! Whether an output folder holds one whole, readable set of splits (`melctl verify OUT`,
//! `melctl.verify`): every split output opens with all of melread's checks (format, shape,
//! labels, the build record), every split the record names is there, and the splits mean
//! the same thing (one label map, one mel configuration). h5py reads a split left by an
//! interrupted publish as if nothing happened; this says which one it is.

use std::path::{Path, PathBuf};

use mel_core::format::{HDF5_SUFFIX, NPY_SUFFIX, check_name};
use mel_core::record;

use crate::limits::bad;
use crate::{Result, Split};

/// One split output of the folder and what opening it found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SplitCheck {
    /// The split's name (`training`).
    pub name: String,
    /// Its output (`OUT/training.h5` or `OUT/training.npy.d`).
    pub output: PathBuf,
    /// Clips, when it opened.
    pub clips: Option<usize>,
    /// The build it carries, when it opened and carries one.
    pub build: Option<String>,
    /// Why it cannot be used, if it cannot (one line).
    pub problem: Option<String>,
}

/// The folder's verdict: each split output, and what is wrong with the set.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FolderCheck {
    /// The last build the record says finished publishing (none without a record).
    pub build: Option<String>,
    /// Each split output found, in name order.
    pub splits: Vec<SplitCheck>,
    /// Every problem, one line each, naming the split (empty: the set is whole).
    pub problems: Vec<String>,
}

impl FolderCheck {
    /// Whether the folder is one whole set of readable splits.
    pub fn is_whole(&self) -> bool {
        self.problems.is_empty()
    }

    /// The verdict as JSON (`melctl verify --json`; what `melctl.verify` returns).
    pub fn to_json(&self) -> serde_json::Value {
        let splits: Vec<serde_json::Value> = self
            .splits
            .iter()
            .map(|s| {
                serde_json::json!({
                    "name": s.name,
                    "output": s.output,
                    "clips": s.clips,
                    "build": s.build,
                    "problem": s.problem,
                })
            })
            .collect();
        serde_json::json!({
            "whole": self.is_whole(),
            "build": self.build,
            "splits": splits,
            "problems": self.problems,
        })
    }
}

/// Checks the output folder `out` (see the module's description). An error only when
/// `out` cannot be listed or its build record cannot be read; everything else wrong is
/// a problem of the verdict.
pub fn verify_folder(out: &Path) -> Result<FolderCheck> {
    if !out.is_dir() {
        return Err(bad(out, "not a folder of melctl outputs"));
    }
    if let Some(busy) = in_use(out) {
        return Ok(FolderCheck {
            problems: vec![busy],
            ..FolderCheck::default()
        });
    }
    let record = record::read(out)?;
    let mut check = FolderCheck {
        build: record.as_ref().and_then(|r| r.build.clone()),
        ..FolderCheck::default()
    };
    let mut opened = Vec::new();
    for (name, output) in split_outputs(out)? {
        let (one, split) = open_one(name, output);
        if let Some(split) = split {
            opened.push((one.name.clone(), split));
        }
        check.splits.push(one);
    }
    for s in &check.splits {
        if let Some(why) = &s.problem {
            check.problems.push(format!("split {:?}: {why}", s.name));
        }
    }
    if let Some(record) = &record {
        for (name, entry) in &record.splits {
            if !out.join(&entry.output).exists() {
                check.problems.push(format!(
                    "split {name:?}: {} names {} for it, which is missing",
                    record::path(out).display(),
                    entry.output
                ));
            }
        }
    }
    if record.is_none() {
        one_build_without_a_record(&check.splits, &mut check.problems);
    }
    compare_meanings(&opened, &mut check.problems);
    // A build that started publishing while the folder was read mixes its splits with
    // the last build's: that is a build in progress, not an interrupted one.
    if !check.problems.is_empty()
        && let Some(busy) = in_use(out)
    {
        check.problems = vec![busy];
    }
    if check.splits.is_empty() {
        check.problems.push(format!(
            "{}: no split outputs (*{HDF5_SUFFIX}, *{NPY_SUFFIX}) here",
            out.display()
        ));
    }
    Ok(check)
}

/// Why the folder cannot be judged now, if a build or merge holds its lock (taken and
/// let go at once: verifying never keeps a build waiting).
fn in_use(out: &Path) -> Option<String> {
    match mel_core::atomic::DirLock::try_now(out) {
        Ok(_released) => None,
        Err(e @ mel_core::Error::Output { .. }) => Some(format!(
            "{}; verify again when it has finished",
            mel_core::error::one_line(&e.to_string())
        )),
        Err(_) => None,
    }
}

/// The split outputs in `out`, by name: `{name}.h5` and `{name}.npy.d`, hidden
/// (temporary) names left out.
fn split_outputs(out: &Path) -> Result<Vec<(String, PathBuf)>> {
    let listing = std::fs::read_dir(out).map_err(|e| mel_core::Error::read(out, e))?;
    let mut found = Vec::new();
    for entry in listing {
        let entry = entry.map_err(|e| mel_core::Error::read(out, e))?;
        let Some(file) = entry.file_name().to_str().map(str::to_string) else {
            continue;
        };
        let name = file
            .strip_suffix(HDF5_SUFFIX)
            .or_else(|| file.strip_suffix(NPY_SUFFIX));
        if let Some(name) = name
            && !file.starts_with('.')
            && check_name(name).is_ok()
        {
            found.push((name.to_string(), entry.path()));
        }
    }
    found.sort();
    Ok(found)
}

/// Opens one output with every check a reader makes.
fn open_one(name: String, output: PathBuf) -> (SplitCheck, Option<Split>) {
    match Split::open(&output) {
        Ok(split) => (
            SplitCheck {
                name,
                clips: Some(split.whole().map_or(split.clips(), |w| w.clips())),
                build: split.build_id().map(str::to_string),
                problem: None,
                output,
            },
            Some(split),
        ),
        Err(e) => (
            SplitCheck {
                name,
                clips: None,
                build: None,
                problem: Some(mel_core::error::one_line(&e.to_string())),
                output,
            },
            None,
        ),
    }
}

/// With no build record to name the build, the splits that carry a build id must all
/// carry the same one: splits copied together from two builds are not one set.
fn one_build_without_a_record(splits: &[SplitCheck], problems: &mut Vec<String>) {
    let carried: Vec<(&str, &str)> = splits
        .iter()
        .filter_map(|s| s.build.as_deref().map(|b| (s.name.as_str(), b)))
        .collect();
    if let Some((_, first)) = carried.first()
        && carried.iter().any(|(_, b)| b != first)
    {
        let each: Vec<String> = carried
            .iter()
            .map(|(name, b)| format!("{name:?} from build {}", &b[..b.len().min(12)]))
            .collect();
        problems.push(format!(
            "no {} names the build, and the splits come from different builds: {}",
            record::FILE_NAME,
            each.join(", ")
        ));
    }
}

/// Each readable split against the first: one label map, one mel configuration.
fn compare_meanings(opened: &[(String, Split)], problems: &mut Vec<String>) {
    if let Some(((first, a), rest)) = opened.split_first() {
        for (name, b) in rest {
            if let Err(e) = a.check_compatible(b) {
                problems.push(format!(
                    "splits {first:?} and {name:?} cannot be used together: {}",
                    mel_core::error::one_line(&e.to_string())
                ));
            }
        }
    }
}

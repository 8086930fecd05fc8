//! The build record, `OUT/melctl-build.json`: which build each split output in the folder
//! comes from. Every split a build writes carries the build's id (the HDF5 root attribute
//! `build_id`, `build_id` in an npy split's `meta.json`); the record is rewritten, by
//! temporary file and rename, only after every split of the build has been renamed into
//! place. A kill between two of those renames leaves splits whose id the record does
//! not name, and readers refuse them ([`check`]): a folder holding splits of two builds
//! is never read as one.
//!
//! ```json
//! {"format": 1, "build": "9c2e…", "splits": {"training": {"build": "9c2e…", "output": "training.h5"}}}
//! ```

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};

/// The record's file name in an output folder.
pub const FILE_NAME: &str = "melctl-build.json";
/// Format version written.
const FORMAT: u32 = 1;
/// The most bytes a record may hold (a few hundred bytes per split).
const MAX_BYTES: u64 = 16 << 20;

/// One split's entry: the build whose output is at `output`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Entry {
    /// The build id the output carries.
    pub build: String,
    /// The output's name in the folder (`training.h5`, `training.npy.d`).
    pub output: String,
}

/// What an output folder's last completed publish put there.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Record {
    /// Format version.
    pub format: u32,
    /// The last build that finished publishing (none before the first).
    pub build: Option<String>,
    /// Split name → the build its output comes from.
    pub splits: BTreeMap<String, Entry>,
}

/// The record's path in the output folder `out`.
pub fn path(out: &Path) -> PathBuf {
    out.join(FILE_NAME)
}

/// A new build id: 32 hex digits from the clock, the process and the standard
/// library's randomly keyed hasher, unique among the builds of a folder.
pub fn new_build_id() -> String {
    use std::hash::BuildHasher;
    let mut h = xxhash_rust::xxh3::Xxh3::new();
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    h.update(&now.as_nanos().to_le_bytes());
    h.update(&std::process::id().to_le_bytes());
    let random = std::collections::hash_map::RandomState::new().hash_one(now);
    h.update(&random.to_le_bytes());
    format!("{:032x}", h.digest128())
}

/// The record of `out`, `None` when there is none. A record that is not a regular file,
/// is too large or does not parse is an error naming it.
pub fn read(out: &Path) -> Result<Option<Record>> {
    let p = path(out);
    if std::fs::symlink_metadata(&p).is_err() {
        return Ok(None);
    }
    let text = crate::input::read_bounded_text(&p, MAX_BYTES).map_err(|e| Error::read(&p, e))?;
    let r: Record = serde_json::from_str(&text).map_err(|e| Error::Dataset {
        root: p.clone(),
        reason: format!("the build record does not parse ({e}); build the output again"),
    })?;
    if r.format != FORMAT {
        return Err(Error::Dataset {
            root: p,
            reason: format!(
                "build record format {} (this melctl reads {FORMAT})",
                r.format
            ),
        });
    }
    // Every name in it is joined to the folder: only the outputs melctl writes there, by
    // their split's name, never a path elsewhere.
    for (split, e) in &r.splits {
        let plain = !split.is_empty()
            && !split.starts_with('.')
            && !split.contains(['/', '\\'])
            && !split.contains("..")
            && !split.chars().any(char::is_control);
        let ours = [crate::format::HDF5_SUFFIX, crate::format::NPY_SUFFIX]
            .iter()
            .any(|suffix| e.output == crate::format::output_name(split, suffix));
        if !plain || !ours {
            return Err(Error::Dataset {
                root: p,
                reason: format!(
                    "the build record names split {split:?} with output {:?}, which no build writes (tampered?); build the output again",
                    e.output
                ),
            });
        }
    }
    Ok(Some(r))
}

/// Writes `record` as the record of `out` (temporary file, rename; flushed if `durable`;
/// never into anything but a regular file), removing what killed runs left of earlier
/// writes.
pub fn write(out: &Path, record: &Record, durable: bool) -> Result<()> {
    use std::io::Write;
    let mut r = record.clone();
    r.format = FORMAT;
    let text = serde_json::to_string_pretty(&r).expect("a record serialises") + "\n";
    let p = path(out);
    crate::atomic::remove_stale_partials(&p);
    let (staged, mut f) = crate::atomic::Staged::file(&p)?;
    f.write_all(text.as_bytes())
        .map_err(|e| crate::atomic::write_failed(&p, "writing", &e))?;
    drop(f);
    staged.commit(durable)?;
    Ok(())
}

/// The split an output path holds and its folder: `OUT/training.h5` → (`OUT`,
/// `training`, `training.h5`); `None` for a name that is no split output.
pub fn split_of(output: &Path) -> Option<(PathBuf, String, String)> {
    let file = output.file_name()?.to_str()?.to_string();
    let split = crate::format::split_of_name(&file)?.to_string();
    let dir = match output.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => PathBuf::from("."),
    };
    Some((dir, split, file))
}

/// Whether the split output at `output`, which carries build id `stored` (`None`: written
/// before build ids existed, or not by melctl), belongs to the last completed publish of
/// its folder. `Ok` when the folder has no record (a copied file); an error naming what
/// is wrong and what to do when the record names another build for it, or does not
/// list a split that carries an id (its build was interrupted while publishing).
pub fn check(output: &Path, stored: Option<&str>) -> Result<()> {
    let Some((dir, split, file)) = split_of(output) else {
        return Ok(());
    };
    let Some(record) = read(&dir)? else {
        return Ok(());
    };
    let rec = path(&dir);
    let interrupted = "a build was interrupted while publishing its splits, so this folder holds splits of different builds; run the build again to publish a complete set (or, if a build is publishing right now, try again when it has finished)";
    let why = match (record.splits.get(&split), stored) {
        (Some(e), Some(id)) if e.build == id && e.output == file => return Ok(()),
        (None, None) => return Ok(()),
        (Some(e), _) if e.output != file => format!(
            "{} names {} as split {split:?}, not this {file} (left by an earlier build); use {} or remove this one",
            rec.display(),
            e.output,
            e.output
        ),
        (Some(e), Some(id)) => format!(
            "this output is from build {}, but {} says split {split:?} is from build {}: {interrupted}",
            short(id),
            rec.display(),
            short(&e.build)
        ),
        (Some(e), None) => format!(
            "this output carries no build id, but {} says split {split:?} is from build {}: it was replaced after that build; build it again",
            rec.display(),
            short(&e.build)
        ),
        (None, Some(id)) => format!(
            "this output is from build {}, which {} does not list: it is left from an earlier build that a later one did not include (remove it), or {interrupted}",
            short(id),
            rec.display()
        ),
    };
    Err(Error::Dataset {
        root: output.to_path_buf(),
        reason: why,
    })
}

/// The first 12 digits of a build id, enough to tell builds apart in a message.
fn short(id: &str) -> &str {
    id.get(..12).unwrap_or(id)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A record's names are joined to the folder, so a tampered one could point a note or a
    /// read at any path ("../victim/x.wav"): refused as a whole.
    #[test]
    fn a_record_naming_outputs_no_build_writes_is_refused() {
        let t = tempfile::tempdir().unwrap();
        for (split, output) in [
            ("validation", "../victim/x.wav"),
            ("../../evil", "../../evil.h5"),
            ("training", "/tmp/notes.txt"),
            ("training", "testing.h5"),
            (".x", ".x.h5"),
        ] {
            let mut r = Record::default();
            r.splits.insert(
                split.into(),
                Entry {
                    build: new_build_id(),
                    output: output.into(),
                },
            );
            write(t.path(), &r, false).unwrap();
            let e = read(t.path()).unwrap_err().to_string();
            assert!(e.contains("which no build writes"), "{split} {output}: {e}");
        }
        let mut r = Record::default();
        for (split, output) in [("training", "training.h5"), ("testing", "testing.npy.d")] {
            r.splits.insert(
                split.into(),
                Entry {
                    build: new_build_id(),
                    output: output.into(),
                },
            );
        }
        write(t.path(), &r, false).unwrap();
        assert_eq!(read(t.path()).unwrap().unwrap().splits.len(), 2);
    }

    #[test]
    fn a_split_is_read_only_when_the_record_names_its_build() {
        let t = tempfile::tempdir().unwrap();
        let out = t.path();
        let h5 = out.join("training.h5");
        // No record: nothing to check against.
        check(&h5, Some("a")).unwrap();
        check(&h5, None).unwrap();
        let (a, b) = (new_build_id(), new_build_id());
        assert_ne!(a, b);
        assert_eq!(a.len(), 32);
        let mut r = Record::default();
        write(out, &r, false).unwrap();
        // An empty record (a first build interrupted): a split with an id is refused,
        // one from before build ids is not.
        let e = check(&h5, Some(&a)).unwrap_err().to_string();
        assert!(
            e.contains("does not list") && e.contains("interrupted"),
            "{e}"
        );
        check(&out.join("legacy.h5"), None).unwrap();
        r.build = Some(a.clone());
        r.splits.insert(
            "training".into(),
            Entry {
                build: a.clone(),
                output: "training.h5".into(),
            },
        );
        write(out, &r, false).unwrap();
        assert_eq!(read(out).unwrap().unwrap(), {
            let mut w = r.clone();
            w.format = FORMAT;
            w
        });
        check(&h5, Some(&a)).unwrap();
        let e = check(&h5, Some(&b)).unwrap_err().to_string();
        assert!(
            e.contains(&format!("from build {}", &b[..12])) && e.contains("run the build again"),
            "{e}"
        );
        let e = check(&h5, None).unwrap_err().to_string();
        assert!(e.contains("carries no build id"), "{e}");
        let e = check(&out.join("training.npy.d"), Some(&a))
            .unwrap_err()
            .to_string();
        assert!(e.contains("names training.h5"), "{e}");
        // A record that is not one is an error naming it.
        std::fs::write(path(out), b"{").unwrap();
        let e = check(&h5, Some(&a)).unwrap_err().to_string();
        assert!(e.contains(FILE_NAME) && e.contains("does not parse"), "{e}");
        // A FIFO in its place is neither read (no blocking) nor written into.
        std::fs::remove_file(path(out)).unwrap();
        let c = std::ffi::CString::new(path(out).to_str().unwrap()).unwrap();
        // SAFETY: a valid NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o644) }, 0);
        let e = check(&h5, Some(&a)).unwrap_err().to_string();
        assert!(e.contains("not a regular file (a FIFO)"), "{e}");
        let e = write(out, &r, false).unwrap_err().to_string();
        assert!(e.contains("a FIFO is there"), "{e}");
    }
}

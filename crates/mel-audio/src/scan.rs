//! Dataset scanning: `ROOT/{split}/{class}/*.wav`, or `ROOT/{class}/*.wav` as one split `all`.

use std::path::{Path, PathBuf};

use mel_core::{Error, Result};

/// File extensions recognised as audio (lowercase).
pub const AUDIO_EXTENSIONS: &[&str] = &[
    "wav", "wave", "flac", "ogg", "oga", "mp3", "aif", "aiff", "aifc",
];

/// One audio file of a split.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileEntry {
    /// Full path.
    pub path: PathBuf,
    /// Path relative to the dataset root, with `/` separators.
    pub rel: String,
    /// Class id (index into [`Dataset::label_names`]).
    pub label: i64,
}

/// One split: its name and its files in sorted path order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Split {
    /// Split name (the first-level folder, or `all`).
    pub name: String,
    /// Files sorted by relative path.
    pub files: Vec<FileEntry>,
}

/// A scanned dataset: one label map shared by every split.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Dataset {
    /// The root folder.
    pub root: PathBuf,
    /// Class names sorted; a label is an index into this list in every split.
    pub label_names: Vec<String>,
    /// Splits sorted by name.
    pub splits: Vec<Split>,
}

fn sorted_dirs(dir: &Path) -> Result<Vec<PathBuf>> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).map_err(|e| Error::io(dir, e))? {
        let entry = entry.map_err(|e| Error::io(dir, e))?;
        let path = entry.path();
        if path.is_dir() && !entry.file_name().to_string_lossy().starts_with('.') {
            out.push(path);
        }
    }
    out.sort();
    Ok(out)
}

fn is_audio(path: &Path) -> bool {
    path.extension()
        .and_then(|e| e.to_str())
        .is_some_and(|e| AUDIO_EXTENSIONS.contains(&e.to_ascii_lowercase().as_str()))
}

fn audio_files(dir: &Path) -> Result<Vec<PathBuf>> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).map_err(|e| Error::io(dir, e))? {
        let path = entry.map_err(|e| Error::io(dir, e))?.path();
        if is_audio(&path) && !path.is_dir() {
            out.push(path);
        }
    }
    out.sort();
    Ok(out)
}

fn name_of(path: &Path) -> String {
    path.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
}

/// Scans `root`. First-level folders that hold class folders are splits; if the first
/// level holds audio files directly, the root is one split named `all` whose classes are
/// the first-level folders. Order is deterministic (sorted paths).
pub fn scan(root: &Path) -> Result<Dataset> {
    let dataset_err = |reason: String| Error::Dataset {
        root: root.to_path_buf(),
        reason,
    };
    if !root.is_dir() {
        return Err(dataset_err("is not a folder".into()));
    }
    let first = sorted_dirs(root)?;
    let mut flat = false;
    for d in &first {
        if !audio_files(d)?.is_empty() {
            flat = true;
        }
    }
    // (split name, [(class name, class dir)])
    let mut layout: Vec<(String, Vec<(String, PathBuf)>)> = Vec::new();
    if flat {
        layout.push((
            "all".into(),
            first.iter().map(|d| (name_of(d), d.clone())).collect(),
        ));
    } else {
        for split_dir in &first {
            let classes: Vec<(String, PathBuf)> = sorted_dirs(split_dir)?
                .into_iter()
                .map(|d| (name_of(&d), d))
                .collect();
            if !classes.is_empty() {
                layout.push((name_of(split_dir), classes));
            }
        }
    }
    let mut label_names: Vec<String> = layout
        .iter()
        .flat_map(|(_, c)| c.iter().map(|(n, _)| n.clone()))
        .collect();
    label_names.sort();
    label_names.dedup();
    let mut splits = Vec::new();
    for (name, classes) in layout {
        let mut files = Vec::new();
        for (class, dir) in classes {
            let label = label_names
                .binary_search(&class)
                .expect("class is in the label map") as i64;
            for path in audio_files(&dir)? {
                let rel = path
                    .strip_prefix(root)
                    .expect("scanned paths are under the root")
                    .components()
                    .map(|c| c.as_os_str().to_string_lossy())
                    .collect::<Vec<_>>()
                    .join("/");
                files.push(FileEntry { path, rel, label });
            }
        }
        files.sort_by(|a, b| a.rel.cmp(&b.rel));
        if !files.is_empty() {
            splits.push(Split { name, files });
        }
    }
    if splits.is_empty() {
        return Err(dataset_err(format!(
            "no audio files found: expected ROOT/{{split}}/{{class}}/*.wav or ROOT/{{class}}/*.wav (extensions: {})",
            AUDIO_EXTENSIONS.join(", ")
        )));
    }
    Ok(Dataset {
        root: root.to_path_buf(),
        label_names,
        splits,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn touch(root: &Path, rel: &str) {
        let p = root.join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, b"x").unwrap();
    }

    #[test]
    fn splits_share_one_sorted_label_map() {
        let t = tempfile::tempdir().unwrap();
        touch(t.path(), "training/quiet/b.wav");
        touch(t.path(), "training/leak/a.wav");
        touch(t.path(), "training/leak/c.WAV");
        touch(t.path(), "testing/normal/z.wav");
        touch(t.path(), "testing/leak/notes.txt");
        let d = scan(t.path()).unwrap();
        assert_eq!(d.label_names, vec!["leak", "normal", "quiet"]);
        assert_eq!(
            d.splits.iter().map(|s| s.name.as_str()).collect::<Vec<_>>(),
            vec!["testing", "training"]
        );
        let training = &d.splits[1];
        let rels: Vec<_> = training
            .files
            .iter()
            .map(|f| (f.rel.as_str(), f.label))
            .collect();
        assert_eq!(
            rels,
            vec![
                ("training/leak/a.wav", 0),
                ("training/leak/c.WAV", 0),
                ("training/quiet/b.wav", 2)
            ]
        );
        assert_eq!(d.splits[0].files[0].label, 1);
    }

    #[test]
    fn classes_at_first_level_make_one_split_named_all() {
        let t = tempfile::tempdir().unwrap();
        touch(t.path(), "yes/1.wav");
        touch(t.path(), "no/2.wav");
        let d = scan(t.path()).unwrap();
        assert_eq!(d.splits.len(), 1);
        assert_eq!(d.splits[0].name, "all");
        assert_eq!(d.label_names, vec!["no", "yes"]);
    }

    #[test]
    fn empty_or_missing_root_is_a_clear_error() {
        let t = tempfile::tempdir().unwrap();
        let e = scan(t.path()).unwrap_err().to_string();
        assert!(e.contains("no audio files found"), "{e}");
        let e = scan(&t.path().join("nope")).unwrap_err().to_string();
        assert!(e.contains("is not a folder"), "{e}");
    }
}

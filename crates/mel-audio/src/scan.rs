//! Dataset scanning: `ROOT/{split}/{class}/*.wav`, or `ROOT/{class}/*.wav` as one split
//! `all`.
//!
//! The layout is decided from the whole tree, never from one entry: every audio file must
//! sit exactly at the depth of the one layout the tree fits. A tree that fits neither
//! (an audio file directly in a split folder beside class folders, audio below a class
//! folder, some first-level folders holding audio and others holding class folders,
//! audio directly in the root) is refused with the offending paths named, so nothing is
//! ever dropped silently. Entries whose names start with `.` are skipped; other files
//! without an audio extension are listed as ignored; a folder that cannot be listed is
//! a per-entry failure of its split.

use std::path::{Path, PathBuf};

use mel_core::{Error, Result};

/// File extensions recognised as audio (lowercase).
pub const AUDIO_EXTENSIONS: &[&str] = &[
    "wav", "wave", "flac", "ogg", "oga", "mp3", "aif", "aiff", "aifc",
];

/// Offending paths named in a refusal, at most.
const NAMED: usize = 12;

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

/// An entry that is not part of the dataset, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Skipped {
    /// The file or folder.
    pub path: PathBuf,
    /// Why, in words.
    pub reason: String,
}

/// One split: its name and its files in sorted path order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Split {
    /// Split name (the first-level folder, or `all`).
    pub name: String,
    /// Files sorted by relative path.
    pub files: Vec<FileEntry>,
    /// Folders of this split that could not be listed (their files are not in `files`).
    pub unreadable: Vec<Skipped>,
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
    /// Files that are not audio (by extension) and folders without audio, left out.
    pub ignored: Vec<Skipped>,
}

/// Whether `path` has an audio extension.
pub fn is_audio(path: &Path) -> bool {
    path.extension()
        .and_then(|e| e.to_str())
        .is_some_and(|e| AUDIO_EXTENSIONS.contains(&e.to_ascii_lowercase().as_str()))
}

/// The entries of one folder, sorted, hidden ones left out: (folders, other entries).
fn list(dir: &Path) -> std::io::Result<(Vec<PathBuf>, Vec<PathBuf>)> {
    let mut dirs = Vec::new();
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        if entry.file_name().as_encoded_bytes().starts_with(b".") {
            continue;
        }
        let path = entry.path();
        // Links are followed; a dangling link is an entry (it fails when read, by name).
        if path.is_dir() {
            dirs.push(path);
        } else {
            files.push(path);
        }
    }
    dirs.sort();
    files.sort();
    Ok((dirs, files))
}

/// Audio files at any depth below `dir` (for naming misplaced audio), at most `NAMED`.
fn audio_below(dir: &Path, found: &mut Vec<PathBuf>) {
    let Ok((dirs, files)) = list(dir) else {
        return;
    };
    found.extend(files.into_iter().filter(|f| is_audio(f)));
    for d in dirs {
        if found.len() >= NAMED {
            return;
        }
        audio_below(&d, found);
    }
}

/// Checks a split or class name: it names an output file and is stored in every output,
/// so it must be non-empty, without path separators, `.` or `..`, NUL or other control
/// characters. The error says what is wrong.
pub fn check_name(name: &str) -> std::result::Result<(), String> {
    if name.is_empty() {
        return Err("an empty name".into());
    }
    if name == "." || name == ".." || name.contains("..") {
        return Err(format!("{name:?} contains \"..\" or is \".\""));
    }
    if name.contains(['/', '\\']) {
        return Err(format!("{name:?} contains a path separator"));
    }
    if let Some(c) = name.chars().find(|c| c.is_control()) {
        return Err(format!("{name:?} contains the control character {c:?}"));
    }
    Ok(())
}

/// A folder's name as a split or class name, or a refusal naming the folder.
fn utf8_name(path: &Path, root: &Path) -> Result<String> {
    let refuse = |why: String| Error::Dataset {
        root: root.to_path_buf(),
        reason: format!("{}: {why}; rename the folder", path.display()),
    };
    let name = path.file_name().unwrap_or_default();
    let name = name.to_str().ok_or_else(|| {
        refuse("folder names become split and class names, which must be UTF-8".into())
    })?;
    check_name(name)
        .map_err(|why| refuse(format!("not usable as a split or class name: {why}")))?;
    Ok(name.to_string())
}

/// What one first-level folder holds.
struct Level1 {
    dir: PathBuf,
    /// Audio files directly in it.
    audio: Vec<PathBuf>,
    /// Its subfolders: (folder, audio files directly in it, audio further below it).
    subs: Vec<(PathBuf, Vec<PathBuf>, Vec<PathBuf>)>,
    /// Folders that could not be listed, with the reason.
    unreadable: Vec<Skipped>,
    /// Non-audio files.
    other: Vec<PathBuf>,
}

fn read_level1(dir: &Path) -> Level1 {
    let mut l = Level1 {
        dir: dir.to_path_buf(),
        audio: vec![],
        subs: vec![],
        unreadable: vec![],
        other: vec![],
    };
    let (dirs, files) = match list(dir) {
        Ok(x) => x,
        Err(e) => {
            l.unreadable.push(Skipped {
                path: dir.to_path_buf(),
                reason: format!("cannot list the folder: {e}"),
            });
            return l;
        }
    };
    let (audio, other): (Vec<_>, Vec<_>) = files.into_iter().partition(|f| is_audio(f));
    l.audio = audio;
    l.other = other;
    for sub in dirs {
        match list(&sub) {
            Ok((subdirs, files)) => {
                let (audio, other): (Vec<_>, Vec<_>) = files.into_iter().partition(|f| is_audio(f));
                l.other.extend(other);
                let mut deeper = Vec::new();
                for d in &subdirs {
                    audio_below(d, &mut deeper);
                }
                l.subs.push((sub, audio, deeper));
            }
            Err(e) => l.unreadable.push(Skipped {
                path: sub,
                reason: format!("cannot list the folder: {e}"),
            }),
        }
    }
    l
}

/// The layouts a tree can fit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Layout {
    /// `ROOT/{split}/{class}/*.wav`.
    Splits,
    /// `ROOT/{class}/*.wav`: one split, `all`.
    Classes,
}

/// Scans `root`. See the module documentation for the rules.
pub fn scan(root: &Path) -> Result<Dataset> {
    let dataset_err = |reason: String| Error::Dataset {
        root: root.to_path_buf(),
        reason,
    };
    if !root.is_dir() {
        return Err(dataset_err("is not a folder".into()));
    }
    let (first, root_files) = list(root).map_err(|e| Error::io(root, e))?;
    let mut offending: Vec<String> = root_files
        .iter()
        .filter(|f| is_audio(f))
        .map(|f| format!("{} (audio directly in the root)", f.display()))
        .collect();
    let mut ignored: Vec<Skipped> = root_files
        .into_iter()
        .filter(|f| !is_audio(f))
        .map(|path| Skipped {
            path,
            reason: "not an audio file (by its extension)".into(),
        })
        .collect();
    let level1: Vec<Level1> = first.iter().map(|d| read_level1(d)).collect();
    // The layout the tree's audio says, from every folder.
    let holds_audio_directly = level1.iter().filter(|l| !l.audio.is_empty()).count();
    let holds_class_folders = level1
        .iter()
        .filter(|l| l.subs.iter().any(|(_, a, _)| !a.is_empty()))
        .count();
    let layout = if holds_class_folders == 0 && holds_audio_directly > 0 {
        Layout::Classes
    } else {
        Layout::Splits
    };
    for l in &level1 {
        match layout {
            Layout::Splits => {
                offending.extend(l.audio.iter().map(|f| {
                    format!(
                        "{} (an audio file directly in a split folder, beside its class folders)",
                        f.display()
                    )
                }));
                for (_, _, deeper) in &l.subs {
                    offending.extend(
                        deeper
                            .iter()
                            .map(|f| format!("{} (audio below a class folder)", f.display())),
                    );
                }
            }
            Layout::Classes => {
                for (_, audio, deeper) in &l.subs {
                    offending.extend(
                        audio
                            .iter()
                            .chain(deeper)
                            .map(|f| format!("{} (audio below a class folder)", f.display())),
                    );
                }
            }
        }
    }
    if !offending.is_empty() {
        let n = offending.len();
        offending.truncate(NAMED);
        return Err(dataset_err(format!(
            "the folder tree fits no layout (ROOT/{{split}}/{{class}}/*.wav or ROOT/{{class}}/*.wav): {n} audio file(s) would be left out: {}{}",
            offending.join("; "),
            if n > NAMED { "; ..." } else { "" }
        )));
    }
    // (split name, unreadable folders, [(class name, class folder, audio files)])
    type Classes = Vec<(String, Vec<PathBuf>)>;
    let mut layout_splits: Vec<(String, Vec<Skipped>, Classes)> = Vec::new();
    match layout {
        Layout::Classes => {
            let mut classes = Vec::new();
            let mut unreadable = Vec::new();
            for l in level1 {
                unreadable.extend(l.unreadable);
                ignored.extend(l.other.into_iter().map(|path| Skipped {
                    path,
                    reason: "not an audio file (by its extension)".into(),
                }));
                for (sub, _, _) in l.subs {
                    ignored.push(Skipped {
                        path: sub,
                        reason: "a folder without audio files".into(),
                    });
                }
                if !l.audio.is_empty() {
                    classes.push((utf8_name(&l.dir, root)?, l.audio));
                }
            }
            layout_splits.push(("all".into(), unreadable, classes));
        }
        Layout::Splits => {
            for l in level1 {
                ignored.extend(l.other.into_iter().map(|path| Skipped {
                    path,
                    reason: "not an audio file (by its extension)".into(),
                }));
                let mut classes = Vec::new();
                for (sub, audio, _) in l.subs {
                    if audio.is_empty() {
                        ignored.push(Skipped {
                            path: sub,
                            reason: "a folder without audio files".into(),
                        });
                    } else {
                        classes.push((utf8_name(&sub, root)?, audio));
                    }
                }
                if classes.is_empty() && l.unreadable.is_empty() {
                    ignored.push(Skipped {
                        path: l.dir,
                        reason: "a folder without audio files".into(),
                    });
                    continue;
                }
                layout_splits.push((utf8_name(&l.dir, root)?, l.unreadable, classes));
            }
        }
    }
    let mut label_names: Vec<String> = layout_splits
        .iter()
        .flat_map(|(_, _, c)| c.iter().map(|(n, _)| n.clone()))
        .collect();
    label_names.sort();
    label_names.dedup();
    let mut splits = Vec::new();
    for (name, unreadable, classes) in layout_splits {
        let mut files = Vec::new();
        for (class, audio) in classes {
            let label = label_names
                .binary_search(&class)
                .expect("class is in the label map") as i64;
            for path in audio {
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
        if !files.is_empty() || !unreadable.is_empty() {
            splits.push(Split {
                name,
                files,
                unreadable,
            });
        }
    }
    if splits.iter().all(|s| s.files.is_empty()) {
        return Err(dataset_err(format!(
            "no audio files found: expected ROOT/{{split}}/{{class}}/*.wav or ROOT/{{class}}/*.wav (extensions: {})",
            AUDIO_EXTENSIONS.join(", ")
        )));
    }
    Ok(Dataset {
        root: root.to_path_buf(),
        label_names,
        splits,
        ignored,
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
        // The text file is listed as ignored, with the class folder holding only it.
        let ignored: Vec<String> = d
            .ignored
            .iter()
            .map(|s| s.path.strip_prefix(t.path()).unwrap().display().to_string())
            .collect();
        assert_eq!(ignored, ["testing/leak/notes.txt", "testing/leak"]);
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

    #[test]
    fn a_stray_file_in_a_split_folder_is_refused_by_name_not_flipping_the_layout() {
        let t = tempfile::tempdir().unwrap();
        for i in 0..20 {
            touch(t.path(), &format!("training/leak/{i}.wav"));
            touch(t.path(), &format!("training/quiet/{i}.wav"));
        }
        touch(t.path(), "training/stray.wav");
        let e = scan(t.path()).unwrap_err().to_string();
        assert!(
            e.contains("training/stray.wav") && e.contains("directly in a split folder"),
            "{e}"
        );
        assert!(e.contains("1 audio file(s) would be left out"), "{e}");
    }

    #[test]
    fn audio_below_a_class_folder_is_refused_in_both_layouts() {
        let t = tempfile::tempdir().unwrap();
        touch(t.path(), "training/leak/a.wav");
        touch(t.path(), "training/leak/sub/x.wav");
        let e = scan(t.path()).unwrap_err().to_string();
        assert!(
            e.contains("training/leak/sub/x.wav") && e.contains("below a class folder"),
            "{e}"
        );
        let t = tempfile::tempdir().unwrap();
        touch(t.path(), "leak/a.wav");
        touch(t.path(), "leak/sub/deeper/x.wav");
        let e = scan(t.path()).unwrap_err().to_string();
        assert!(e.contains("leak/sub/deeper/x.wav"), "{e}");
        let t = tempfile::tempdir().unwrap();
        touch(t.path(), "leak/a.wav");
        touch(t.path(), "b.wav");
        let e = scan(t.path()).unwrap_err().to_string();
        assert!(e.contains("b.wav (audio directly in the root)"), "{e}");
    }

    #[test]
    fn mixing_split_folders_and_class_folders_is_refused() {
        let t = tempfile::tempdir().unwrap();
        touch(t.path(), "training/leak/a.wav");
        touch(t.path(), "quiet/b.wav");
        let e = scan(t.path()).unwrap_err().to_string();
        assert!(e.contains("quiet/b.wav"), "{e}");
    }

    #[test]
    fn non_utf8_class_names_are_refused_and_unreadable_folders_are_per_split_failures() {
        use std::os::unix::ffi::OsStrExt;
        let t = tempfile::tempdir().unwrap();
        touch(t.path(), "training/leak/a.wav");
        let bad = t
            .path()
            .join("training")
            .join(std::ffi::OsStr::from_bytes(b"le\xffak"));
        std::fs::create_dir_all(&bad).unwrap();
        std::fs::write(bad.join("b.wav"), b"x").unwrap();
        let e = scan(t.path()).unwrap_err().to_string();
        assert!(e.contains("must be UTF-8"), "{e}");
        std::fs::remove_dir_all(&bad).unwrap();

        touch(t.path(), "training/quiet/b.wav");
        let locked = t.path().join("training/quiet");
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&locked, std::fs::Permissions::from_mode(0o000)).unwrap();
        let listable = std::fs::read_dir(&locked).is_ok(); // root reads anything
        let d = scan(t.path());
        std::fs::set_permissions(&locked, std::fs::Permissions::from_mode(0o755)).unwrap();
        let d = d.unwrap();
        if listable {
            println!("skipped the unreadable-folder half: running as root, every folder lists");
            assert_eq!(d.splits[0].files.len(), 2);
        } else {
            assert_eq!(d.splits[0].files.len(), 1);
            assert_eq!(d.splits[0].unreadable.len(), 1);
            assert!(d.splits[0].unreadable[0].reason.contains("cannot list"));
        }
    }
}

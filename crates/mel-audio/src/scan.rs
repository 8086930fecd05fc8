//! Dataset scanning: `ROOT/{split}/{class}/*.wav`, or `ROOT/{class}/*.wav` as one split
//! `all`.
//!
//! The layout is decided from the whole tree, never from one entry: every audio file must
//! sit exactly at the depth of the one layout the tree fits. A tree that fits neither
//! (an audio file directly in a split folder beside class folders, audio below a class
//! folder, some first-level folders holding audio and others holding class folders,
//! audio directly in the root) is refused with the offending paths named.
//!
//! Nothing vanishes: every entry that is not built is in [`Dataset::ignored`] with its
//! reason, and [`Skipped::audio`] counts the audio files among them (data left out,
//! which a strict build counts as skipped). Hidden entries (names starting with `.`) are not built; a hidden file with an
//! audio extension, or a hidden folder holding audio, is listed with that count. Files
//! without an audio extension and folders without audio are listed too. A folder that
//! cannot be listed is a per-entry failure of its split.
//!
//! Links are followed (a dataset assembled from links to other places works), but each
//! folder is visited once, by identity (device and inode): a link back to a folder
//! already visited (`a -> .`) is not followed and is listed as such, so no tree of links
//! can make the scan loop or fan out. One file is one clip: two paths to one file (a
//! symbolic or hard link, a linked folder) are refused with both paths named.

use std::collections::hash_map::Entry;
use std::collections::{HashMap, HashSet};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use mel_core::{Error, Result};

/// File extensions recognised as audio (lowercase): every container melctl decodes (the
/// decoder itself goes by the content, `sniff`), and the audio formats it refuses by name,
/// so that such a file is a named, counted skip (`--strict`) rather than ignored as "not
/// audio": an `.m4a` class folder once vanished from the label map with exit 0.
pub const AUDIO_EXTENSIONS: &[&str] = &[
    // Decoded.
    "wav", "wave", "bwf", "rf64", "bw64", "flac", "ogg", "oga", "mp3", "aif", "aiff", "aifc", "m4a",
    "m4b", "mp4", "caf", "aac", "adts", "mka", "mkv", "webm", // Refused by name.
    "opus", "wv", "au", "snd", "w64", "wma", "ape", "amr", "ac3", "mp2", "spx", "tta", "mpc",
    "3gp", "dts", "voc",
];

/// Offending paths named in a refusal, at most.
const NAMED: usize = 12;

/// The longest split or class name, in bytes (the on-disk format's limit).
pub use mel_core::format::MAX_NAME_BYTES;

/// One audio file of a split.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileEntry {
    /// Full path.
    pub path: PathBuf,
    /// Path relative to the dataset root, with `/` separators.
    pub rel: String,
    /// Class id (index into [`Dataset::label_names`]).
    pub label: i64,
    /// Metadata values, one per [`Dataset::meta_columns`] (shared with every row the
    /// file becomes).
    pub meta: std::sync::Arc<[String]>,
}

impl FileEntry {
    /// Feeds what the listing says of this file (its relative path, class and metadata)
    /// to `h`: the one definition every fingerprint of a file list hashes (the cache's,
    /// the resume journal's, a shard's split and range), so none can leave a field out
    /// (a shard once kept metadata edited after it was built).
    pub fn hash_listing(&self, h: &mut xxhash_rust::xxh3::Xxh3) {
        h.update(self.rel.as_bytes());
        h.update(&[0]);
        h.update(&self.label.to_le_bytes());
        for v in self.meta.iter() {
            h.update(v.as_bytes());
            h.update(&[0]);
        }
    }
}

/// An entry that is not part of the dataset, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Skipped {
    /// The file or folder.
    pub path: PathBuf,
    /// Why, in words.
    pub reason: String,
    /// Audio files (by extension) this entry is or holds that are built nowhere else:
    /// data left out, which a strict caller counts as skipped; 0 for anything else.
    pub audio: usize,
}

impl Skipped {
    /// An entry without audio in it.
    fn other(path: PathBuf, reason: impl Into<String>) -> Skipped {
        Skipped {
            path,
            reason: reason.into(),
            audio: 0,
        }
    }
}

/// One split: its name and its files in sorted path order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScannedSplit {
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
    /// Metadata columns (a manifest's beyond `path`, `label` and `split`; `group` from a
    /// `--group-pattern`), in order; every file holds one value per column.
    pub meta_columns: Vec<String>,
    /// Splits sorted by name.
    pub splits: Vec<ScannedSplit>,
    /// Everything under the root that is not built and is no split's failure, with why:
    /// files that are not audio, folders without audio, hidden entries, links not
    /// followed.
    pub ignored: Vec<Skipped>,
}

impl Dataset {
    /// Audio files under the root that no split holds (hidden ones, say): the sum of
    /// [`Skipped::audio`] over [`Dataset::ignored`].
    pub fn audio_left_out(&self) -> usize {
        self.ignored.iter().map(|i| i.audio).sum()
    }

    /// Renumbers every file's label by `names` (a label map, e.g. from
    /// [`read_label_map`](crate::read_label_map)), which must name every class of the
    /// dataset; classes it names beyond them keep their ids and hold no file.
    pub fn relabel(&mut self, names: Vec<String>) -> Result<()> {
        crate::check_label_names(&names).map_err(|reason| Error::config("labels", reason))?;
        let missing: Vec<&str> = self
            .label_names
            .iter()
            .filter(|n| !names.contains(n))
            .map(String::as_str)
            .collect();
        if !missing.is_empty() {
            return Err(Error::config(
                "labels",
                format!("classes not in the label map: {}", missing.join(", ")),
            ));
        }
        let old = std::mem::replace(&mut self.label_names, names);
        for split in &mut self.splits {
            for f in &mut split.files {
                let name = &old[f.label as usize];
                let id = self.label_names.iter().position(|n| n == name);
                f.label = id.expect("every class is in the map (checked)") as i64;
            }
        }
        Ok(())
    }
}

/// Whether `path` has an audio extension.
pub fn is_audio(path: &Path) -> bool {
    path.extension()
        .and_then(|e| e.to_str())
        .is_some_and(|e| AUDIO_EXTENSIONS.contains(&e.to_ascii_lowercase().as_str()))
}

/// Whether the last component of `path` starts with `.`.
fn is_hidden(path: &Path) -> bool {
    path.file_name()
        .is_some_and(|n| n.as_encoded_bytes().starts_with(b"."))
}

/// What identifies a file or folder whatever the path to it: device and inode, links
/// followed. `None` when it cannot be found (a dangling link).
pub type Identity = (u64, u64);

/// The [`Identity`] of `path` (links followed), if it exists.
pub fn identity(path: &Path) -> Option<Identity> {
    std::fs::metadata(path).ok().map(|m| (m.dev(), m.ino()))
}

/// Checks a split or class name: the one check of every name (see
/// [`mel_core::format::check_name`]; readers run it too).
pub use mel_core::format::check_name;

/// Checks that no two of `names` (split or class names, as `kind` says) are the same text
/// in two Unicode encodings (`café` as one code point or as `e` plus a combining accent):
/// they print alike, so a second class (or split) would look like the first. The error
/// names both with their non-ASCII characters escaped.
pub fn check_distinct<'a>(
    kind: &str,
    names: impl IntoIterator<Item = &'a str>,
) -> std::result::Result<(), String> {
    use unicode_normalization::UnicodeNormalization;
    let mut seen: HashMap<String, &str> = HashMap::new();
    for name in names {
        if let Some(first) = seen.insert(name.nfc().collect(), name)
            && first != name
        {
            return Err(format!(
                "the {kind} names \"{}\" and \"{}\" are one name written in two Unicode forms (they print alike); rename one",
                escape_non_ascii(first),
                escape_non_ascii(name)
            ));
        }
    }
    Ok(())
}

/// Refuses two split names that one disk may take for one file name: equal once in one
/// Unicode form and case-folded (`Training` and `training`), so their outputs
/// (`{split}.h5`) would be one file on a case-insensitive disk (macOS, Windows) or after
/// a copy to one. Compatibility forms stay distinct (`fold2` and `fold²`), as on disks.
pub fn check_split_files<'a>(
    names: impl IntoIterator<Item = &'a str>,
) -> std::result::Result<(), String> {
    use unicode_normalization::UnicodeNormalization;
    let mut seen: HashMap<String, &str> = HashMap::new();
    for name in names {
        let folded = name.nfc().collect::<String>().to_lowercase();
        if let Some(first) = seen.insert(folded, name)
            && first != name
        {
            return Err(format!(
                "the split names \"{}\" and \"{}\" differ only in case or in form: their output files would be one file on a case-insensitive disk; rename one",
                escape_non_ascii(first),
                escape_non_ascii(name)
            ));
        }
    }
    Ok(())
}

/// `name` with every non-ASCII character written `\u{…}`.
fn escape_non_ascii(name: &str) -> String {
    name.chars()
        .map(|c| {
            if c.is_ascii() {
                c.to_string()
            } else {
                format!("\\u{{{:x}}}", c as u32)
            }
        })
        .collect()
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

/// An audio file found, with its identity.
struct Audio {
    path: PathBuf,
    id: Option<Identity>,
}

/// The visible entries of one folder, sorted.
#[derive(Default)]
struct Listing {
    dirs: Vec<PathBuf>,
    audio: Vec<Audio>,
    other: Vec<PathBuf>,
}

/// A walk of the tree that visits each folder once and remembers what it leaves out.
#[derive(Default)]
struct Walk {
    /// Folders entered, by identity, with the path they were first entered by.
    seen: HashMap<Identity, PathBuf>,
    /// Hidden entries met in the split and class levels, counted at the end.
    hidden: Vec<PathBuf>,
    /// What is not built, with why.
    ignored: Vec<Skipped>,
    /// The files the dataset holds: audio reached through other paths is not left out.
    built: HashSet<Identity>,
}

/// What a walk below a folder found.
#[derive(Default)]
struct Below {
    /// Visible audio files (the first [`NAMED`]).
    audio: Vec<PathBuf>,
    /// All audio files, hidden ones and those in hidden folders included.
    all_audio: usize,
}

impl Walk {
    /// Whether an audio file with this identity is built nowhere else.
    fn left_out(&self, id: Option<Identity>) -> bool {
        id.is_none_or(|id| !self.built.contains(&id))
    }

    /// Marks `dir` entered; false, with an ignored entry naming the path it was entered
    /// by first, when it was entered already (a link back, or a second link to it).
    fn enter(&mut self, dir: &Path) -> bool {
        let Some(id) = identity(dir) else {
            return true; // listing it fails and says why
        };
        match self.seen.entry(id) {
            Entry::Occupied(first) => {
                self.ignored.push(Skipped::other(
                    dir.to_path_buf(),
                    format!(
                        "the folder {} again (reached through a link): not followed, each folder is scanned once",
                        first.get().display()
                    ),
                ));
                false
            }
            Entry::Vacant(v) => {
                v.insert(dir.to_path_buf());
                true
            }
        }
    }

    /// The entries of `dir`: visible folders (links followed), audio files and other
    /// files, sorted; hidden entries are appended to `hidden`.
    fn list(&mut self, dir: &Path, hidden: &mut Vec<PathBuf>) -> std::io::Result<Listing> {
        let mut l = Listing::default();
        for entry in std::fs::read_dir(dir)? {
            let entry = entry?;
            let path = entry.path();
            if is_hidden(&path) {
                hidden.push(path);
                continue;
            }
            let kind = entry.file_type()?;
            // A link is followed; a dangling one is a file (it fails when read, by name).
            let meta = if kind.is_symlink() {
                std::fs::metadata(&path).ok()
            } else {
                entry.metadata().ok()
            };
            if meta.as_ref().is_some_and(|m| m.is_dir()) {
                l.dirs.push(path);
            } else if is_audio(&path) {
                let id = meta.map(|m| (m.dev(), m.ino()));
                l.audio.push(Audio { path, id });
            } else {
                l.other.push(path);
            }
        }
        l.dirs.sort();
        l.audio.sort_by(|a, b| a.path.cmp(&b.path));
        l.other.sort();
        Ok(l)
    }

    /// Walks everything below `top` (entering each folder once, iteratively): the visible
    /// audio files (up to [`NAMED`] of them named) and all audio files counted. Folders
    /// that cannot be listed and links not followed are listed as ignored.
    fn below(&mut self, top: &Path, stop_at_named: bool) -> Option<Below> {
        if !self.enter(top) {
            return None;
        }
        let mut found = Below::default();
        let mut stack = vec![(top.to_path_buf(), is_hidden(top))];
        while let Some((dir, in_hidden)) = stack.pop() {
            let mut hidden = Vec::new();
            let l = match self.list(&dir, &mut hidden) {
                Ok(l) => l,
                Err(e) => {
                    self.ignored
                        .push(Skipped::other(dir, format!("cannot list the folder: {e}")));
                    continue;
                }
            };
            found.all_audio += l.audio.iter().filter(|a| self.left_out(a.id)).count();
            if !in_hidden {
                let room = NAMED.saturating_sub(found.audio.len());
                found
                    .audio
                    .extend(l.audio.into_iter().take(room).map(|a| a.path));
                if stop_at_named && found.audio.len() >= NAMED {
                    break;
                }
            }
            for h in hidden {
                if h.is_dir() {
                    if self.enter(&h) {
                        stack.push((h, true));
                    }
                } else if is_audio(&h) && self.left_out(identity(&h)) {
                    found.all_audio += 1;
                }
            }
            for d in l.dirs.into_iter().rev() {
                if self.enter(&d) {
                    stack.push((d, in_hidden));
                }
            }
        }
        Some(found)
    }
}

/// A folder at the class level: what it holds directly, and its subfolders.
struct Sub {
    dir: PathBuf,
    audio: Vec<Audio>,
    /// Its subfolders (below a class folder in either layout: walked later).
    dirs: Vec<PathBuf>,
}

/// What one first-level folder holds.
struct Level1 {
    dir: PathBuf,
    /// Audio files directly in it.
    audio: Vec<Audio>,
    /// Its subfolders.
    subs: Vec<Sub>,
    /// Folders that could not be listed, with the reason.
    unreadable: Vec<Skipped>,
    /// Non-audio files in it and in its subfolders.
    other: Vec<PathBuf>,
}

impl Walk {
    /// Lists a first-level folder and its subfolders (links followed, no deeper).
    fn level1(&mut self, dir: &Path) -> Level1 {
        let mut l = Level1 {
            dir: dir.to_path_buf(),
            audio: vec![],
            subs: vec![],
            unreadable: vec![],
            other: vec![],
        };
        let mut hidden = Vec::new();
        let listing = match self.list(dir, &mut hidden) {
            Ok(x) => x,
            Err(e) => {
                l.unreadable.push(Skipped::other(
                    dir.to_path_buf(),
                    format!("cannot list the folder: {e}"),
                ));
                return l;
            }
        };
        l.audio = listing.audio;
        l.other = listing.other;
        for sub in listing.dirs {
            self.mark(&sub);
            match self.list(&sub, &mut hidden) {
                Ok(s) => {
                    l.other.extend(s.other);
                    l.subs.push(Sub {
                        dir: sub,
                        audio: s.audio,
                        dirs: s.dirs,
                    });
                }
                Err(e) => l
                    .unreadable
                    .push(Skipped::other(sub, format!("cannot list the folder: {e}"))),
            }
        }
        self.hidden.extend(hidden);
        l
    }

    /// Marks a split- or class-level folder entered. These two levels are listed even when
    /// reached twice (no recursion, so no fan-out): a second path to the same files is
    /// then refused by name, whichever path comes first in sorted order.
    fn mark(&mut self, dir: &Path) {
        if let Some(id) = identity(dir) {
            self.seen.entry(id).or_insert_with(|| dir.to_path_buf());
        }
    }

    /// Walks a folder below a class folder: its visible audio is misplaced (named in
    /// `offending`); without any, the folder is listed as not built.
    fn below_class(&mut self, dir: &Path, offending: &mut Vec<String>) {
        let Some(found) = self.below(dir, true) else {
            return;
        };
        if found.audio.is_empty() {
            self.ignored
                .push(folder_below_class(dir.to_path_buf(), found.all_audio));
        }
        offending.extend(
            found
                .audio
                .iter()
                .map(|f| format!("{} (audio below a class folder)", f.display())),
        );
    }

    /// Lists each hidden entry met at the split and class levels (and in the root), with
    /// the audio in it that is built nowhere else.
    fn list_hidden(&mut self) {
        for h in std::mem::take(&mut self.hidden) {
            let meta = std::fs::metadata(&h);
            if meta.as_ref().is_ok_and(|m| m.is_dir()) {
                let Some(found) = self.below(&h, false) else {
                    continue;
                };
                self.ignored.push(Skipped {
                    path: h,
                    reason: format!(
                        "a hidden folder (its name starts with '.'), not built; {} audio file(s) in it",
                        found.all_audio
                    ),
                    audio: found.all_audio,
                });
            } else {
                let audio = is_audio(&h) && self.left_out(meta.ok().map(|m| (m.dev(), m.ino())));
                self.ignored.push(Skipped {
                    path: h,
                    reason: "hidden (its name starts with '.'): not built".into(),
                    audio: usize::from(audio),
                });
            }
        }
    }
}

/// The entry for a folder below a class folder that holds no visible audio.
fn folder_below_class(path: PathBuf, hidden_audio: usize) -> Skipped {
    let reason = if hidden_audio == 0 {
        "a folder below a class folder, without audio: not built".to_string()
    } else {
        format!(
            "a folder below a class folder, not built; {hidden_audio} hidden audio file(s) in it"
        )
    };
    Skipped {
        path,
        reason,
        audio: hidden_audio,
    }
}

/// Entries for files that are not audio.
fn not_audio(files: Vec<PathBuf>) -> impl Iterator<Item = Skipped> {
    files
        .into_iter()
        .map(|path| Skipped::other(path, "not an audio file (by its extension)"))
}

/// The layouts a tree can fit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Layout {
    /// `ROOT/{split}/{class}/*.wav`.
    Splits,
    /// `ROOT/{class}/*.wav`: one split, `all`.
    Classes,
}

/// Scans `root`. See the module documentation for the rules.
pub fn scan(root: &Path) -> Result<Dataset> {
    scan_layout(root).map(|(d, _)| d)
}

/// Scans `root` and says which layout it fits.
pub(crate) fn scan_layout(root: &Path) -> Result<(Dataset, Layout)> {
    let dataset_err = |reason: String| Error::Dataset {
        root: root.to_path_buf(),
        reason,
    };
    if !root.is_dir() {
        return Err(dataset_err("is not a folder".into()));
    }
    let mut walk = Walk::default();
    walk.mark(root);
    let mut hidden = Vec::new();
    let top = walk
        .list(root, &mut hidden)
        .map_err(|e| Error::io(root, e))?;
    walk.hidden.extend(hidden);
    let mut offending: Vec<String> = top
        .audio
        .iter()
        .map(|f| format!("{} (audio directly in the root)", f.path.display()))
        .collect();
    walk.ignored.extend(not_audio(top.other));
    // Both levels are marked before anything deeper is walked, so a link below a class
    // folder back up to a split or class folder is never followed.
    for d in &top.dirs {
        walk.mark(d);
    }
    let level1: Vec<Level1> = top.dirs.iter().map(|d| walk.level1(d)).collect();
    // The layout the tree's audio says, from every folder.
    let holds_audio_directly = level1.iter().filter(|l| !l.audio.is_empty()).count();
    let holds_class_folders = level1
        .iter()
        .filter(|l| l.subs.iter().any(|s| !s.audio.is_empty()))
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
                        f.path.display()
                    )
                }));
                for s in &l.subs {
                    for d in &s.dirs {
                        walk.below_class(d, &mut offending);
                    }
                }
            }
            Layout::Classes => {
                for s in &l.subs {
                    let before = offending.len();
                    offending.extend(
                        s.audio
                            .iter()
                            .map(|f| format!("{} (audio below a class folder)", f.path.display())),
                    );
                    let mut hidden_audio = 0;
                    for d in &s.dirs {
                        if let Some(found) = walk.below(d, true) {
                            hidden_audio += found.all_audio;
                            offending.extend(
                                found.audio.iter().map(|f| {
                                    format!("{} (audio below a class folder)", f.display())
                                }),
                            );
                        }
                    }
                    if offending.len() == before {
                        walk.ignored
                            .push(folder_below_class(s.dir.clone(), hidden_audio));
                    }
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
    // (split name, unreadable folders, [(class name, audio files)])
    type Classes = Vec<(String, Vec<Audio>)>;
    let mut layout_splits: Vec<(String, Vec<Skipped>, Classes)> = Vec::new();
    match layout {
        Layout::Classes => {
            let mut classes = Vec::new();
            let mut unreadable = Vec::new();
            for l in level1 {
                unreadable.extend(l.unreadable);
                walk.ignored.extend(not_audio(l.other));
                if l.audio.is_empty() {
                    walk.ignored
                        .push(Skipped::other(l.dir, "a folder without audio files"));
                } else {
                    classes.push((utf8_name(&l.dir, root)?, l.audio));
                }
            }
            layout_splits.push(("all".into(), unreadable, classes));
        }
        Layout::Splits => {
            for l in level1 {
                walk.ignored.extend(not_audio(l.other));
                let mut classes = Vec::new();
                for s in l.subs {
                    if s.audio.is_empty() {
                        walk.ignored
                            .push(Skipped::other(s.dir, "a folder without audio files"));
                    } else {
                        classes.push((utf8_name(&s.dir, root)?, s.audio));
                    }
                }
                if classes.is_empty() && l.unreadable.is_empty() {
                    walk.ignored
                        .push(Skipped::other(l.dir, "a folder without audio files"));
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
    check_distinct("class", label_names.iter().map(String::as_str))
        .and_then(|()| check_distinct("split", layout_splits.iter().map(|(n, _, _)| n.as_str())))
        .and_then(|()| check_split_files(layout_splits.iter().map(|(n, _, _)| n.as_str())))
        .map_err(dataset_err)?;
    // One file is one clip: a second path to a file (a link, a linked folder) is refused.
    let mut first_path: HashMap<Identity, PathBuf> = HashMap::new();
    let mut splits = Vec::new();
    for (name, unreadable, classes) in layout_splits {
        let mut files = Vec::new();
        for (class, audio) in classes {
            let label = label_names
                .binary_search(&class)
                .expect("class is in the label map") as i64;
            for Audio { path, id } in audio {
                if let Some(id) = id {
                    match first_path.entry(id) {
                        Entry::Occupied(first) => {
                            return Err(dataset_err(format!(
                                "{} and {} are one file (a link or a second name for it): one file is one clip; remove one of them",
                                first.get().display(),
                                path.display()
                            )));
                        }
                        Entry::Vacant(v) => {
                            v.insert(path.clone());
                        }
                    }
                }
                let rel = path
                    .strip_prefix(root)
                    .expect("scanned paths are under the root")
                    .components()
                    .map(|c| c.as_os_str().to_string_lossy())
                    .collect::<Vec<_>>()
                    .join("/");
                files.push(FileEntry {
                    path,
                    rel,
                    label,
                    meta: std::sync::Arc::from([]),
                });
            }
        }
        files.sort_by(|a, b| a.rel.cmp(&b.rel));
        if !files.is_empty() || !unreadable.is_empty() {
            splits.push(ScannedSplit {
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
    walk.built = first_path.into_keys().collect();
    walk.list_hidden();
    let mut ignored = walk.ignored;
    ignored.sort_by(|a, b| a.path.cmp(&b.path));
    Ok((
        Dataset {
            root: root.to_path_buf(),
            label_names,
            meta_columns: vec![],
            splits,
            ignored,
        },
        layout,
    ))
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// Writes a file at `rel` under `root`, making its folders.
    pub(crate) fn touch(root: &Path, rel: &str) {
        let p = root.join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, b"x").unwrap();
    }

    #[test]
    fn names_that_differ_only_in_unicode_form_are_refused_naming_both() {
        // "café" with a precomposed é, and with e + a combining acute accent.
        let (nfc, nfd) = ("caf\u{e9}", "cafe\u{301}");
        let t = tempfile::tempdir().unwrap();
        touch(t.path(), &format!("training/{nfc}/a.wav"));
        touch(t.path(), &format!("training/{nfd}/b.wav"));
        let e = scan(t.path()).unwrap_err().to_string();
        assert!(
            e.contains("the class names \"cafe\\u{301}\" and \"caf\\u{e9}\" are one name"),
            "{e}"
        );
        let t = tempfile::tempdir().unwrap();
        touch(t.path(), &format!("{nfc}/leak/a.wav"));
        touch(t.path(), &format!("{nfd}/leak/b.wav"));
        let e = scan(t.path()).unwrap_err().to_string();
        assert!(e.contains("the split names"), "{e}");
        // Distinct names pass, accented or not.
        let t = tempfile::tempdir().unwrap();
        touch(t.path(), &format!("training/{nfc}/a.wav"));
        touch(t.path(), "training/cafe/b.wav");
        assert_eq!(scan(t.path()).unwrap().label_names.len(), 2);
    }

    /// Class folders `leak` and `leak ` were two classes that print alike.
    #[test]
    fn names_with_white_space_around_them_are_refused_naming_them() {
        for (rel, kind) in [
            ("training/leak /a.wav", "leak "),
            ("training/ leak/a.wav", " leak"),
            ("training\u{3000}/leak/a.wav", "training\u{3000}"),
        ] {
            let t = tempfile::tempdir().unwrap();
            touch(t.path(), "training/leak/b.wav");
            touch(t.path(), rel);
            let e = scan(t.path()).unwrap_err().to_string();
            assert!(
                e.contains(&format!("{kind:?}")) && e.contains("white space"),
                "{rel}: {e}"
            );
        }
        assert!(check_name("no leak").is_ok(), "white space inside is fine");
    }

    /// `Training` and `training` were two splits whose outputs are one file on a
    /// case-insensitive disk.
    #[test]
    fn split_names_one_disk_takes_for_one_are_refused() {
        for (a, b) in [("Training", "training"), ("STRASSE", "strasse")] {
            let t = tempfile::tempdir().unwrap();
            touch(t.path(), &format!("{a}/leak/a.wav"));
            touch(t.path(), &format!("{b}/leak/b.wav"));
            let e = scan(t.path()).unwrap_err().to_string();
            assert!(e.contains("differ only in case or in form"), "{e}");
        }
        assert!(check_split_files(["training", "testing", "all"]).is_ok());
        // Distinct on every disk: compatibility forms are not folded.
        assert!(check_split_files(["fold2", "fold\u{b2}", "\u{fb01}x", "fix"]).is_ok());
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
        assert_eq!(ignored, ["testing/leak", "testing/leak/notes.txt"]);
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

    /// The ignored entries as (path relative to the root, audio count, reason).
    fn ignored(d: &Dataset, root: &Path) -> Vec<(String, usize, String)> {
        d.ignored
            .iter()
            .map(|s| {
                let rel = s.path.strip_prefix(root).unwrap_or(&s.path);
                (rel.display().to_string(), s.audio, s.reason.clone())
            })
            .collect()
    }

    #[test]
    fn hidden_entries_are_listed_with_the_audio_they_hold() {
        let t = tempfile::tempdir().unwrap();
        touch(t.path(), "training/leak/a.wav");
        touch(t.path(), "training/leak/.take2.wav");
        touch(t.path(), "training/leak/.DS_Store");
        touch(t.path(), "training/.quiet/b.wav");
        touch(t.path(), "training/.quiet/c.flac");
        touch(t.path(), ".validation/leak/d.wav");
        touch(t.path(), ".validation/leak/e.wav");
        touch(t.path(), ".validation/quiet/.f.wav");
        touch(t.path(), "training/leak/notes/readme.txt");
        let d = scan(t.path()).unwrap();
        assert_eq!(d.splits.len(), 1);
        assert_eq!(d.splits[0].files.len(), 1);
        let got = ignored(&d, t.path());
        let find = |p: &str| {
            got.iter()
                .find(|(rel, _, _)| rel == p)
                .unwrap_or_else(|| panic!("{p} is not listed: {got:?}"))
                .clone()
        };
        assert_eq!(find(".validation").1, 3);
        assert_eq!(find("training/.quiet").1, 2);
        assert_eq!(find("training/leak/.take2.wav").1, 1);
        assert_eq!(find("training/leak/.DS_Store").1, 0);
        let (_, n, why) = find("training/leak/notes");
        assert!(n == 0 && why.contains("below a class folder"), "{why}");
        assert!(find(".validation").2.contains("hidden"), "{got:?}");
        assert!(find("training/leak/.take2.wav").2.contains("hidden"));
        assert_eq!(d.audio_left_out(), 6);
    }

    /// Runs `scan` on another thread: an error (not a hang) after `secs`.
    fn scan_within(root: &Path, secs: u64) -> Result<Dataset> {
        let (tx, rx) = std::sync::mpsc::channel();
        let root = root.to_path_buf();
        std::thread::spawn(move || {
            let _ = tx.send(scan(&root));
        });
        rx.recv_timeout(std::time::Duration::from_secs(secs))
            .unwrap_or_else(|_| panic!("the scan did not finish within {secs} s"))
    }

    #[test]
    fn links_back_up_the_tree_are_not_followed_and_are_listed() {
        use std::os::unix::fs::symlink;
        let t = tempfile::tempdir().unwrap();
        touch(t.path(), "training/leak/a.wav");
        touch(t.path(), "training/quiet/b.wav");
        let leak = t.path().join("training/leak");
        // Two self-links fan out 2^depth paths when followed blindly.
        symlink(".", leak.join("a")).unwrap();
        symlink(".", leak.join("b")).unwrap();
        symlink("../..", leak.join("up")).unwrap();
        // A diamond of links below a class folder: no loop, still 2^n paths.
        let mut prev = leak.join("chain");
        std::fs::create_dir(&prev).unwrap();
        for i in 0..30 {
            let next = t.path().join(format!("outside/d{i}"));
            std::fs::create_dir_all(&next).unwrap();
            symlink(&next, prev.join("x")).unwrap();
            symlink(&next, prev.join("y")).unwrap();
            prev = next;
        }
        let d = scan_within(t.path(), 20).unwrap();
        assert_eq!(d.splits[0].files.len(), 2);
        let got = ignored(&d, t.path());
        for link in ["training/leak/a", "training/leak/b", "training/leak/up"] {
            assert!(
                got.iter()
                    .any(|(p, n, why)| p == link && *n == 0 && why.contains("again")),
                "{link}: {got:?}"
            );
        }
        assert!(
            got.iter()
                .any(|(p, _, why)| p == "training/leak/chain"
                    && why.contains("below a class folder"))
        );
    }

    #[test]
    fn two_paths_to_one_file_are_refused_naming_both() {
        use std::os::unix::fs::symlink;
        // A symbolic link, a hard link, and a linked class folder, each across splits.
        for how in ["symlink", "hardlink", "folder"] {
            let t = tempfile::tempdir().unwrap();
            touch(t.path(), "training/leak/a.wav");
            touch(t.path(), "training/quiet/q.wav");
            std::fs::create_dir_all(t.path().join("testing/quiet")).unwrap();
            touch(t.path(), "testing/quiet/z.wav");
            let a = t.path().join("training/leak/a.wav");
            match how {
                "symlink" => {
                    std::fs::create_dir_all(t.path().join("testing/leak")).unwrap();
                    symlink(&a, t.path().join("testing/leak/b.wav")).unwrap();
                }
                "hardlink" => {
                    std::fs::create_dir_all(t.path().join("testing/leak")).unwrap();
                    std::fs::hard_link(&a, t.path().join("testing/leak/b.wav")).unwrap();
                }
                _ => symlink("../training/leak", t.path().join("testing/leak")).unwrap(),
            }
            let e = scan(t.path()).unwrap_err().to_string();
            assert!(
                e.contains("one file is one clip")
                    && e.contains("training/leak/a.wav")
                    && e.contains("testing/leak/"),
                "{how}: {e}"
            );
        }
    }

    #[test]
    fn a_linked_class_folder_elsewhere_is_followed() {
        let t = tempfile::tempdir().unwrap();
        touch(t.path(), "store/leak/a.wav");
        touch(t.path(), "data/training/quiet/b.wav");
        std::os::unix::fs::symlink(
            t.path().join("store/leak"),
            t.path().join("data/training/leak"),
        )
        .unwrap();
        let d = scan(&t.path().join("data")).unwrap();
        let rels: Vec<_> = d.splits[0].files.iter().map(|f| f.rel.as_str()).collect();
        assert_eq!(rels, ["training/leak/a.wav", "training/quiet/b.wav"]);
    }

    #[test]
    fn names_that_are_hidden_escapes_or_too_long_are_refused() {
        for (name, why) in [
            (".x.h5.partial-99999999-a", "starts with '.'"),
            (".validation", "starts with '.'"),
            ("a\u{1b}[31mred", "control character"),
            ("evil\u{202e}vaw.exe", "control character"),
            ("../../evil", "\"..\""),
            ("a/b", "path separator"),
            ("", "empty"),
        ] {
            let e = check_name(name).unwrap_err();
            assert!(e.contains(why), "{name:?}: {e}");
            assert!(
                !e.contains(['\u{1b}', '\u{202e}']),
                "the error escapes the name: {e:?}"
            );
        }
        let long = "x".repeat(MAX_NAME_BYTES + 1);
        assert!(check_name(&long).unwrap_err().contains("the limit is"));
        for ok in [
            "training",
            "leak-1",
            "été",
            "a.b",
            "x".repeat(MAX_NAME_BYTES).as_str(),
        ] {
            check_name(ok).unwrap();
        }
    }
}

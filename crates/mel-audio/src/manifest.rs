//! Manifests as an alternative to folders: a CSV (header row) or JSONL file with `path`,
//! `label` and an optional `split` per clip. Paths are relative to the manifest's folder
//! (or absolute). Without a `split` column the clips are split by ratio, per class
//! (stratified), deterministically from a seed. A label map file (one class name per
//! line; the line number is the id) keeps class ids stable across datasets.
//!
//! Both are read bounded and without blocking ([`mel_core::input::read_bounded_text`]).
//! Split and label names pass the same check as folder names ([`check_name`]). One file
//! is one clip: rows are compared by the file they name (device and inode, links
//! followed; the normalised absolute path for a file that does not exist), so `x`,
//! `./x`, `a/../x`, the absolute path and a link to it are one file, and a second row
//! naming it is refused with both line numbers.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use std::collections::HashMap;
use std::collections::hash_map::Entry;
use std::path::Component;

use mel_core::input::read_bounded_text;
use mel_core::{Error, Result};

use crate::groups::{self, Grouping, Ratios};
use crate::scan::{
    Dataset, FileEntry, Identity, ScannedSplit, check_distinct, check_name, identity,
};

/// How to turn a manifest into splits and labels.
#[derive(Debug, Clone, PartialEq)]
pub struct ManifestOptions {
    /// Split names and ratios used when the manifest has no `split` column.
    pub ratios: Vec<(String, f64)>,
    /// Seed of the split assignment.
    pub seed: u64,
    /// Whether the ratios or the seed were asked for, not defaults: a manifest that names
    /// its splits then refuses them instead of ignoring them.
    pub ratios_given: bool,
    /// Class names in id order; `None`: the manifest's labels, sorted.
    pub label_map: Option<Vec<String>>,
    /// What puts clips into one group (one split per group); `None`: no groups.
    pub group: Option<Grouping>,
}

impl Default for ManifestOptions {
    fn default() -> Self {
        ManifestOptions {
            ratios: vec![
                ("training".into(), 0.7),
                ("validation".into(), 0.2),
                ("testing".into(), 0.1),
            ],
            seed: 0,
            ratios_given: false,
            label_map: None,
            group: None,
        }
    }
}

impl ManifestOptions {
    /// Split ratios written `NAME=RATIO,NAME=RATIO` (`training=0.7,validation=0.2,testing=0.1`,
    /// as `--split-ratio` and Python's `split_ratio=` take them); the reason names the
    /// part that is not one.
    pub fn parse_ratios(text: &str) -> std::result::Result<Vec<(String, f64)>, String> {
        text.split(',')
            .map(|part| {
                let (name, r) = part
                    .split_once('=')
                    .ok_or_else(|| format!("{part:?} is not NAME=RATIO"))?;
                let r: f64 = r
                    .trim()
                    .parse()
                    .map_err(|_| format!("{:?} is not a number", r.trim()))?;
                Ok((name.trim().to_string(), r))
            })
            .collect()
    }
}

/// Manifests larger than this are refused (1 GiB: tens of millions of rows).
pub const MAX_MANIFEST_BYTES: u64 = 1 << 30;

/// Label map files larger than this are refused (16 MiB: far more classes than any
/// output is meant to hold).
pub const MAX_LABEL_MAP_BYTES: u64 = 16 << 20;

/// One manifest row: its file, class, split and metadata values (one per column of
/// [`Parsed::columns`]). A column beyond `path`, `label` and `split` is metadata; one
/// that looks like those (`Split`, `spilt`) is refused: a misspelt `Split` column was
/// once ignored, and the rows meant for testing were re-split into training with exit 0.
#[derive(Debug, Clone, PartialEq)]
struct Row {
    path: String,
    label: String,
    split: Option<String>,
    meta: Vec<String>,
}

/// A JSONL line: the three named keys, and every other key as metadata.
#[derive(Debug, serde::Deserialize)]
struct JsonRow {
    path: String,
    label: String,
    #[serde(default)]
    split: Option<String>,
    #[serde(flatten)]
    extra: serde_json::Map<String, serde_json::Value>,
}

/// A manifest's rows with their line numbers, and its metadata columns in order.
#[derive(Debug, Default)]
struct Parsed {
    columns: Vec<String>,
    rows: Vec<(usize, Row)>,
}

/// A row as every manifest format gives it: the label, split and metadata trimmed (white
/// space around a CSV field or a JSON string is never part of a name), the path verbatim
/// (a file's name may begin or end with a space).
fn tidy(path: String, label: &str, split: Option<&str>, meta: Vec<String>) -> Row {
    Row {
        path,
        label: label.trim().to_string(),
        split: split.map(|s| s.trim().to_string()),
        meta: meta.into_iter().map(|m| m.trim().to_string()).collect(),
    }
}

/// A metadata column's name checked, and the column count bounded.
fn check_column(columns: &[String], name: &str) -> std::result::Result<(), String> {
    mel_core::format::check_column_name(name)?;
    groups::check_room(columns)
}

/// A JSON value as metadata text: strings as they are, whole numbers and booleans as
/// text, `null` as missing; a list, an object, and a number that is not a whole number
/// within 64 bits are refused (JSON keeps no spelling of a number: `0.10` would be
/// `0.1`, and two 20-digit speaker ids one value).
fn json_text(key: &str, v: &serde_json::Value) -> std::result::Result<Option<String>, String> {
    use serde_json::Value;
    match v {
        Value::Null => Ok(None),
        Value::String(s) => Ok(Some(s.clone())),
        Value::Number(n) if n.is_i64() || n.is_u64() => Ok(Some(n.to_string())),
        Value::Number(n) => Err(format!(
            "the value of {key:?} is the number {n}, which is not a whole number within 64 bits; write it as a string to keep it as written"
        )),
        Value::Bool(_) => Ok(Some(v.to_string())),
        Value::Array(_) | Value::Object(_) => Err(format!(
            "the value of {key:?} is a list or an object; metadata values are text or numbers"
        )),
    }
}

/// Checks class names given as a list (a label map from anywhere): each a valid name,
/// each once, and no two the same text in two Unicode forms; the reason names the first
/// offending entry.
pub fn check_label_names(names: &[String]) -> std::result::Result<(), String> {
    let mut seen: HashMap<&str, usize> = HashMap::new();
    for (i, name) in names.iter().enumerate() {
        check_name(name).map_err(|why| format!("label {i}: the label {why}"))?;
        if let Some(first) = seen.insert(name, i) {
            return Err(format!(
                "labels {first} and {i} are both {name:?}: each label once"
            ));
        }
    }
    check_distinct("label", names.iter().map(String::as_str))
}

/// Reads a label map: one class name per line (blank lines and `#` comments ignored),
/// each checked like a folder name; a name given twice is refused with both lines.
pub fn read_label_map(path: &Path) -> Result<Vec<String>> {
    let text = read_bounded_text(path, MAX_LABEL_MAP_BYTES).map_err(|e| Error::io(path, e))?;
    let refuse = |reason: String| Error::Dataset {
        root: path.to_path_buf(),
        reason,
    };
    let mut names = Vec::new();
    let mut lines: HashMap<&str, usize> = HashMap::new();
    for (i, line) in text.lines().enumerate() {
        let name = line.trim();
        if name.is_empty() || name.starts_with('#') {
            continue;
        }
        check_name(name).map_err(|why| refuse(format!("line {}: the label {why}", i + 1)))?;
        if let Some(first) = lines.insert(name, i + 1) {
            return Err(refuse(format!(
                "lines {first} and {} both name the label {name:?}: each label once",
                i + 1
            )));
        }
        names.push(name.to_string());
    }
    check_distinct("label", names.iter().map(String::as_str)).map_err(refuse)?;
    Ok(names)
}

/// Line numbers of byte offsets, counted forward from the last offset asked for.
struct LineCounter<'a> {
    text: &'a [u8],
    byte: usize,
    line: usize,
}

impl<'a> LineCounter<'a> {
    fn new(text: &'a str) -> Self {
        LineCounter {
            text: text.as_bytes(),
            byte: 0,
            line: 1,
        }
    }

    /// The 1-based line holding `byte`.
    fn at(&mut self, byte: u64) -> usize {
        let byte = (byte as usize).min(self.text.len());
        if byte < self.byte {
            (self.byte, self.line) = (0, 1);
        }
        self.line += self.text[self.byte..byte]
            .iter()
            .filter(|&&b| b == b'\n')
            .count();
        self.byte = byte;
        self.line
    }

    /// The line of a csv error (0 when it has no position).
    fn of(&mut self, e: &csv::Error) -> usize {
        e.position().map_or(0, |p| self.at(p.byte()))
    }
}

/// The rows of a manifest with their line numbers, and its metadata columns.
fn parse(path: &Path, text: &str) -> Result<Parsed> {
    let jsonl = path.extension().and_then(|e| e.to_str()).is_some_and(|e| {
        ["jsonl", "ndjson", "json"]
            .iter()
            .any(|j| e.eq_ignore_ascii_case(j))
    });
    // A byte-order mark (what some editors save first) is not part of the first row, in
    // JSONL as in CSV.
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    if jsonl {
        parse_jsonl(path, text)
    } else {
        parse_csv(path, text)
    }
}

/// The refusal of `manifest` at line `line`.
fn at_line(manifest: &Path, line: usize, why: impl std::fmt::Display) -> Error {
    Error::Dataset {
        root: manifest.to_path_buf(),
        reason: format!("line {line}: {why}"),
    }
}

/// A JSONL manifest: one object per line; keys beyond `path`, `label` and `split` are
/// metadata columns, in the order they first appear; a row without one holds "" there.
fn parse_jsonl(path: &Path, text: &str) -> Result<Parsed> {
    let mut parsed = Parsed::default();
    let mut extras = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let row: JsonRow = serde_json::from_str(line).map_err(|e| at_line(path, i + 1, e))?;
        let mut values = Vec::with_capacity(row.extra.len());
        for (key, v) in &row.extra {
            let column = match parsed.columns.iter().position(|c| c == key) {
                Some(c) => c,
                None => {
                    check_column(&parsed.columns, key).map_err(|why| at_line(path, i + 1, why))?;
                    parsed.columns.push(key.clone());
                    parsed.columns.len() - 1
                }
            };
            if let Some(text) = json_text(key, v).map_err(|why| at_line(path, i + 1, why))? {
                values.push((column, text));
            }
        }
        extras.push(values);
        let r = tidy(row.path, &row.label, row.split.as_deref(), vec![]);
        parsed.rows.push((i + 1, r));
    }
    for ((_, row), values) in parsed.rows.iter_mut().zip(extras) {
        row.meta = vec![String::new(); parsed.columns.len()];
        for (column, text) in values {
            row.meta[column] = text.trim().to_string();
        }
    }
    Ok(parsed)
}

/// A CSV manifest: a header row; columns beyond `path`, `label` and `split` are metadata.
fn parse_csv(path: &Path, text: &str) -> Result<Parsed> {
    // Headers, labels, splits and metadata are trimmed; a path is taken verbatim, as in
    // JSONL (csv's `Trim::All` also trimmed quoted fields, so the row `"sp.wav ",b` built
    // the file `sp.wav`).
    let mut reader = csv::ReaderBuilder::new()
        .trim(csv::Trim::Headers)
        .from_reader(text.as_bytes());
    // Line numbers from byte offsets (csv's own count skips blank lines), counted
    // forward from the last record, so the whole count is one pass over the text.
    let mut lines = LineCounter::new(text);
    let headers = match reader.headers() {
        Ok(h) => h.clone(),
        Err(e) => return Err(at_line(path, lines.of(&e), e)),
    };
    let mut parsed = Parsed::default();
    let (mut at_path, mut at_label, mut at_split, mut at_meta) = (None, None, None, vec![]);
    for (i, h) in headers.iter().enumerate() {
        let slot = match h {
            "path" => &mut at_path,
            "label" => &mut at_label,
            "split" => &mut at_split,
            _ => {
                if let Err(why) = check_column(&parsed.columns, h) {
                    // Named only when it looks like a column name: the first line of a
                    // file given as a manifest by mistake (`/etc/shadow`) is not echoed.
                    let looks_like_a_name = h.len() <= 32
                        && h.chars()
                            .all(|c| c.is_alphanumeric() || matches!(c, '_' | '-' | ' ' | '.'));
                    let why = if looks_like_a_name {
                        why
                    } else {
                        "the first line is not a header of columns (path, label, an optional split, then metadata)".into()
                    };
                    return Err(at_line(path, 1, why));
                }
                if parsed.columns.iter().any(|c| c == h) {
                    return Err(at_line(path, 1, format!("the column {h:?} is named twice")));
                }
                parsed.columns.push(h.to_string());
                at_meta.push(i);
                continue;
            }
        };
        if slot.replace(i).is_some() {
            return Err(at_line(path, 1, format!("the column {h:?} is named twice")));
        }
    }
    let (Some(at_path), Some(at_label)) = (at_path, at_label) else {
        let missing = if at_path.is_none() { "path" } else { "label" };
        return Err(at_line(
            path,
            1,
            format!(
                "the header names no {missing} column: the columns are path, label, an optional split, then metadata"
            ),
        ));
    };
    for rec in reader.records() {
        let rec = rec.map_err(|e| at_line(path, lines.of(&e), e))?;
        // The line the record starts on (a quoted field may span lines); csv reports
        // where it began reading: blank lines before the record included.
        let at = rec.position().map_or(0, |p| {
            let start = text.as_bytes()[(p.byte() as usize).min(text.len())..]
                .iter()
                .take_while(|&&b| b == b'\n' || b == b'\r')
                .count();
            lines.at(p.byte() + start as u64)
        });
        let field = |i: usize| rec.get(i).unwrap_or_default();
        let meta = at_meta.iter().map(|&i| field(i).to_string()).collect();
        let row = tidy(
            field(at_path).to_string(),
            field(at_label),
            at_split.map(field),
            meta,
        );
        parsed.rows.push((at, row));
    }
    Ok(parsed)
}

/// Reads the manifest at `path` into a dataset.
pub fn from_manifest(path: &Path, opts: &ManifestOptions) -> Result<Dataset> {
    let err = |reason: String| refusal(path, reason);
    // Bounded by the bytes read, not st_size (a device or a growing file), never blocking.
    let text = read_bounded_text(path, MAX_MANIFEST_BYTES).map_err(|e| Error::io(path, e))?;
    let Parsed {
        mut columns,
        rows: mut numbered,
    } = parse(path, &text)?;
    if numbered.is_empty() {
        return Err(err("no clips listed".into()));
    }
    check_rows(path, &numbered)?;
    // Rows are relative to the manifest file's own folder: a link to a manifest reads
    // its rows from where the manifest is, not from where the link is.
    let real = std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
    let base = real.parent().unwrap_or(Path::new(".")).to_path_buf();
    check_one_row_per_file(path, &numbered, &base)?;
    let group = match &opts.group {
        Some(g) => Some(group_rows_by(path, g, &mut columns, &mut numbered)?),
        None => None,
    };
    let rows: Vec<Row> = numbered.into_iter().map(|(_, r)| r).collect();
    let label_names = class_names(path, &rows, opts)?;
    let with_split = rows.iter().filter(|r| r.split.is_some()).count();
    if with_split != 0 && with_split != rows.len() {
        return Err(err(format!(
            "{with_split} of {} rows name a split: name one for every row, or for none",
            rows.len()
        )));
    }
    let (mut by_split, unsplit) = split_rows(&rows, &label_names, &base);
    if with_split == 0 {
        let r = Ratios {
            ratios: &opts.ratios,
            seed: opts.seed,
            key_is: if group.is_some() {
                "its group"
            } else {
                "its path"
            },
        };
        let folder = manifest_folder(path);
        let key = groups::file_key(|f| match group {
            Some(c) => std::borrow::Cow::Borrowed(f.meta[c].as_str()),
            None => std::borrow::Cow::Owned(split_key(&f.path, &folder)),
        });
        by_split = groups::assign_by_ratio(unsplit, &r, key).map_err(err)?;
    } else if opts.ratios_given {
        return Err(err(
            "the manifest names each row's split, so split ratios and a seed do not apply: leave them out, or drop the split column".into(),
        ));
    }
    check_distinct("class", label_names.iter().map(String::as_str))
        .and_then(|()| check_distinct("split", by_split.keys().map(String::as_str)))
        .and_then(|()| crate::scan::check_split_files(by_split.keys().map(String::as_str)))
        .map_err(err)?;
    let splits = by_split
        .into_iter()
        .filter(|(_, f)| !f.is_empty())
        .map(|(name, mut files)| {
            files.sort_by(|a, b| a.rel.cmp(&b.rel));
            ScannedSplit {
                name,
                files,
                unreadable: vec![],
            }
        })
        .collect();
    let dataset = Dataset {
        root: base,
        label_names,
        meta_columns: columns,
        ignored: vec![],
        splits,
    };
    if let Some(g) = &opts.group {
        groups::check_group_spellings(&dataset, g).map_err(err)?;
        if with_split != 0 {
            groups::check_groups_disjoint(&dataset, g).map_err(err)?;
        }
    }
    Ok(dataset)
}

/// Finds each row's group by `grouping` (adding the column `group` for a pattern), and
/// refuses a row without one, naming its line; returns the group's column.
fn group_rows_by(
    manifest: &Path,
    grouping: &Grouping,
    columns: &mut Vec<String>,
    numbered: &mut [(usize, Row)],
) -> Result<usize> {
    if let Grouping::Pattern(p) = grouping {
        groups::check_room_for_pattern(columns).map_err(|why| refusal(manifest, why))?;
        for (line, r) in numbered.iter_mut() {
            let g = p
                .group_of(&r.path)
                .map_err(|why| refusal(manifest, format!("line {line}: {why}")))?;
            r.meta.push(g.to_string());
        }
        columns.push(mel_core::format::GROUP_COLUMN.to_string());
    }
    let column = groups::group_column(columns, grouping).map_err(|why| refusal(manifest, why))?;
    if let Some((line, _)) = numbered.iter().find(|(_, r)| r.meta[column].is_empty()) {
        return Err(refusal(
            manifest,
            format!(
                "line {line}: no {:?} value, and rows are grouped by it: every row needs one",
                grouping.column()
            ),
        ));
    }
    Ok(column)
}

/// The manifest at `manifest` refused for `reason`.
fn refusal(manifest: &Path, reason: String) -> Error {
    Error::Dataset {
        root: manifest.to_path_buf(),
        reason,
    }
}

/// Checks every row's label and split as names, and its path: not empty, no control
/// characters.
fn check_rows(manifest: &Path, numbered: &[(usize, Row)]) -> Result<()> {
    let err = |reason: String| refusal(manifest, reason);
    for (line, r) in numbered {
        let names =
            std::iter::once(("label", &r.label)).chain(r.split.iter().map(|s| ("split", s)));
        for (what, name) in names {
            check_name(name).map_err(|why| err(format!("line {line}: the {what} {why}")))?;
        }
        if r.path.is_empty() {
            return Err(err(format!("line {line}: the path is empty")));
        }
        for v in &r.meta {
            mel_core::format::check_meta_value(v)
                .map_err(|why| err(format!("line {line}: the metadata value {why}")))?;
        }
        if let Some(c) = r.path.chars().find(|c| c.is_control()) {
            return Err(err(format!(
                "line {line}: the path {:?} holds the control character {c:?}",
                r.path
            )));
        }
    }
    Ok(())
}

/// A row's path as a file's: absolute as written, else under the manifest's folder `base`.
fn full_path(base: &Path, p: &str) -> PathBuf {
    if Path::new(p).is_absolute() {
        PathBuf::from(p)
    } else {
        base.join(p)
    }
}

/// One file is one clip, whatever the path's spelling or links: a second row naming a
/// file is refused with both line numbers.
fn check_one_row_per_file(manifest: &Path, numbered: &[(usize, Row)], base: &Path) -> Result<()> {
    let mut first_line: HashMap<FileKey, (usize, &str)> = HashMap::new();
    for (line, r) in numbered {
        match first_line.entry(file_key(&full_path(base, &r.path))) {
            Entry::Occupied(first) => {
                let (first, first_path) = *first.get();
                return Err(refusal(
                    manifest,
                    format!(
                        "lines {first} and {line} name one file ({first_path:?} and {:?}): one file is one clip; list it once",
                        r.path
                    ),
                ));
            }
            Entry::Vacant(v) => {
                v.insert((*line, &r.path));
            }
        }
    }
    Ok(())
}

/// Class names in id order: the label map's (checked, and holding every row's label), or
/// the rows' labels, sorted.
fn class_names(manifest: &Path, rows: &[Row], opts: &ManifestOptions) -> Result<Vec<String>> {
    Ok(match &opts.label_map {
        Some(map) => {
            check_label_names(map).map_err(|reason| Error::config("labels", reason))?;
            let unknown: Vec<&str> = rows
                .iter()
                .map(|r| r.label.as_str())
                .filter(|l| !map.iter().any(|m| m == l))
                .collect::<std::collections::BTreeSet<_>>()
                .into_iter()
                .collect();
            if !unknown.is_empty() {
                return Err(refusal(
                    manifest,
                    format!("labels not in the label map: {}", unknown.join(", ")),
                ));
            }
            map.clone()
        }
        None => {
            let mut names: Vec<String> = rows.iter().map(|r| r.label.clone()).collect();
            names.sort();
            names.dedup();
            names
        }
    })
}

/// The rows as files: those naming a split by split, the others in one list.
fn split_rows(
    rows: &[Row],
    label_names: &[String],
    base: &Path,
) -> (BTreeMap<String, Vec<FileEntry>>, Vec<FileEntry>) {
    let mut by_split: BTreeMap<String, Vec<FileEntry>> = BTreeMap::new();
    let mut unsplit = Vec::new();
    for r in rows {
        let label = label_names
            .iter()
            .position(|n| *n == r.label)
            .expect("every label is in the map") as i64;
        let entry = FileEntry {
            path: full_path(base, &r.path),
            rel: r.path.clone(),
            label,
            meta: r.meta.clone().into(),
        };
        match &r.split {
            Some(s) => by_split.entry(s.clone()).or_default().push(entry),
            None => unsplit.push(entry),
        }
    }
    (by_split, unsplit)
}

/// `path` made absolute and normalised without touching the disk (`.` dropped, `..` taken
/// back).
fn lexical(path: &Path) -> PathBuf {
    let absolute = std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf());
    let mut normal = PathBuf::new();
    for c in absolute.components() {
        match c {
            Component::CurDir => {}
            Component::ParentDir => {
                normal.pop();
            }
            other => normal.push(other),
        }
    }
    normal
}

/// The manifest's folder, absolute, links resolved (`m.csv`'s parent is the empty path,
/// which has no absolute form: it is `.`).
fn manifest_folder(manifest: &Path) -> PathBuf {
    let real = std::fs::canonicalize(manifest).unwrap_or_else(|_| manifest.to_path_buf());
    let folder = real
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    real_folder(folder)
}

/// `folder` absolute with its links resolved where it exists, else normalised by hand.
fn real_folder(folder: &Path) -> PathBuf {
    std::fs::canonicalize(folder).unwrap_or_else(|_| lexical(folder))
}

/// What the split assignment hashes for a file: its path relative to the manifest's
/// folder `base`, with `/` separators, going up with `..` where the file is outside it
/// (`../audio/x.wav`), folders' links resolved on both sides. The key never holds where
/// the dataset is mounted, the working folder, nor the links a path goes through: moving
/// the manifest with its audio, building on a machine that mounts them elsewhere, or
/// naming the manifest through a linked folder gives every file the split it had.
fn split_key(path: &Path, base: &Path) -> String {
    // The file's folder with its links resolved (as the manifest's is), its own name as
    // written: the same file reached through a linked folder is one key.
    let normal = lexical(path);
    let normal = match (normal.parent(), normal.file_name()) {
        (Some(folder), Some(name)) => real_folder(folder).join(name),
        _ => normal,
    };
    let (file, folder): (Vec<Component>, Vec<Component>) =
        (normal.components().collect(), base.components().collect());
    let common = file.iter().zip(&folder).take_while(|(a, b)| a == b).count();
    let up = std::iter::repeat_n("..".into(), folder.len() - common);
    let down = file[common..]
        .iter()
        .map(|c| c.as_os_str().to_string_lossy());
    up.chain(down).collect::<Vec<_>>().join("/")
}

/// What a manifest row's file is, for the one-file-one-clip check.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum FileKey {
    /// An existing file: device and inode, links followed.
    File(Identity),
    /// A file that does not exist (it fails when read): its absolute path, normalised.
    Missing(PathBuf),
}

/// The [`FileKey`] of `path`.
fn file_key(path: &Path) -> FileKey {
    match identity(path) {
        Some(id) => FileKey::File(id),
        None => FileKey::Missing(lexical(path)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::GroupPattern;

    fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
        let p = dir.join(name);
        std::fs::write(&p, text).unwrap();
        p
    }

    #[test]
    fn csv_with_splits_and_jsonl_without() {
        let t = tempfile::tempdir().unwrap();
        let csv = write(
            t.path(),
            "m.csv",
            "path,label,split\nb/2.wav,leak,train\na/1.wav, quiet ,train\nc/3.wav,leak,test\n",
        );
        let d = from_manifest(&csv, &ManifestOptions::default()).unwrap();
        assert_eq!(d.label_names, vec!["leak", "quiet"]);
        let names: Vec<_> = d.splits.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, ["test", "train"]);
        assert_eq!(d.splits[1].files[0].rel, "a/1.wav");
        assert_eq!(d.splits[1].files[0].label, 1);
        assert_eq!(d.splits[1].files[0].path, t.path().join("a/1.wav"));

        let mut jsonl = String::new();
        for c in ["leak", "quiet", "normal"] {
            for i in 0..100 {
                jsonl += &format!("{{\"path\": \"{c}/{i:03}.wav\", \"label\": \"{c}\"}}\n");
            }
        }
        let j = write(t.path(), "m.jsonl", &jsonl);
        let d = from_manifest(&j, &ManifestOptions::default()).unwrap();
        let sizes: Vec<(String, usize)> = d
            .splits
            .iter()
            .map(|s| (s.name.clone(), s.files.len()))
            .collect();
        // Each split gets its share on average (a binomial count: 300 rows at 0.1 give
        // 30 ± 5), of every class.
        let want = [("testing", 30.0), ("training", 210.0), ("validation", 60.0)];
        for ((name, n), (w, expected)) in sizes.iter().zip(want) {
            assert_eq!(name, w);
            assert!((*n as f64 - expected).abs() <= 20.0, "{sizes:?}");
        }
        for s in &d.splits {
            for label in 0..3 {
                let n = s.files.iter().filter(|f| f.label == label).count();
                assert!(n > 0, "every class in {}: {sizes:?}", s.name);
            }
        }
        // Deterministic for a seed, different for another, independent of row order.
        assert_eq!(from_manifest(&j, &ManifestOptions::default()).unwrap(), d);
        let other = ManifestOptions {
            seed: 7,
            ..ManifestOptions::default()
        };
        assert_ne!(from_manifest(&j, &other).unwrap().splits, d.splits);
        let reversed: String = jsonl.lines().rev().map(|l| format!("{l}\n")).collect();
        let r = write(t.path(), "r.jsonl", &reversed);
        assert_eq!(
            from_manifest(&r, &ManifestOptions::default())
                .unwrap()
                .splits,
            d.splits
        );
    }

    #[test]
    fn label_lists_are_checked_like_label_map_files() {
        let ok: Vec<String> = ["leak", "no_leak"].map(String::from).to_vec();
        assert!(check_label_names(&ok).is_ok());
        for (bad, why) in [
            (vec!["a", "b", "a"], "labels 0 and 2 are both \"a\""),
            (vec!["a", ""], "label 1"),
            (vec!["a", "x\ny"], "label 1"),
            (vec!["caf\u{e9}", "cafe\u{301}"], "two Unicode forms"),
        ] {
            let names: Vec<String> = bad.iter().map(|s| s.to_string()).collect();
            let e = check_label_names(&names).unwrap_err();
            assert!(e.contains(why), "{bad:?}: {e}");
        }
    }

    #[test]
    fn a_label_map_fixes_ids_and_unknown_labels_are_named() {
        let t = tempfile::tempdir().unwrap();
        let map = write(t.path(), "labels.txt", "# classes\nquiet\nleak\nnormal\n");
        let names = read_label_map(&map).unwrap();
        let csv = write(t.path(), "m.csv", "path,label,split\nx.wav,leak,all\n");
        let opts = ManifestOptions {
            label_map: Some(names),
            ..ManifestOptions::default()
        };
        let d = from_manifest(&csv, &opts).unwrap();
        assert_eq!(d.label_names, vec!["quiet", "leak", "normal"]);
        assert_eq!(d.splits[0].files[0].label, 1);
        let csv = write(
            t.path(),
            "u.csv",
            "path,label,split\nx.wav,drip,all\ny.wav,hiss,all\n",
        );
        let e = from_manifest(&csv, &opts).unwrap_err().to_string();
        assert!(e.contains("drip, hiss"), "{e}");
        let dup = write(t.path(), "dup.txt", "a\nb\n# c\na\n");
        let e = read_label_map(&dup).unwrap_err().to_string();
        assert!(e.contains("lines 1 and 4 both name the label \"a\""), "{e}");
    }

    #[test]
    fn malformed_manifests_are_errors_with_the_line() {
        let t = tempfile::tempdir().unwrap();
        let o = ManifestOptions::default();
        let e = from_manifest(&write(t.path(), "a.csv", "path,split\nx.wav,train\n"), &o)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("line 1: the header names no label column"),
            "{e}"
        );
        let e = from_manifest(
            &write(
                t.path(),
                "b.jsonl",
                "{\"path\": \"x.wav\", \"label\": \"a\"}\nnot json\n",
            ),
            &o,
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("line 2"), "{e}");
        let e = from_manifest(
            &write(
                t.path(),
                "c.csv",
                "path,label,split\nx.wav,a,train\nx.wav,a,test\n",
            ),
            &o,
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("lines 2 and 3 name one file"), "{e}");
        let e = from_manifest(&write(t.path(), "d.jsonl", "{\"path\":\"x.wav\",\"label\":\"a\",\"split\":\"t\"}\n{\"path\":\"y.wav\",\"label\":\"a\"}\n"), &o)
            .unwrap_err()
            .to_string();
        assert!(e.contains("1 of 2 rows name a split"), "{e}");
        assert!(from_manifest(&write(t.path(), "e.csv", "path,label\n"), &o).is_err());
    }

    /// A misspelt or capitalised split column (or JSON key) was ignored, and the rows
    /// meant for testing were re-split into training and validation with exit 0. Other
    /// columns are metadata now, but a look-alike of path, label or split is refused.
    #[test]
    fn a_look_alike_column_or_key_is_refused_by_name() {
        let t = tempfile::tempdir().unwrap();
        let o = ManifestOptions::default();
        let e = from_manifest(
            &write(t.path(), "a.csv", "path,label,Split\nx.wav,a,testing\n"),
            &o,
        )
        .unwrap_err()
        .to_string();
        assert!(
            e.contains("line 1: the column \"Split\" looks like the manifest's \"split\""),
            "{e}"
        );
        // A file given as a manifest by mistake is not echoed (its first line may be a
        // secret: /etc/shadow's).
        let e = from_manifest(
            &write(
                t.path(),
                "shadow.csv",
                "root:$6$SECRETHASH:19000:0:99999:7:::\n",
            ),
            &o,
        )
        .unwrap_err()
        .to_string();
        assert!(!e.contains("SECRET") && e.contains("not a header"), "{e}");
        for name in ["b.jsonl", "b.json"] {
            let e = from_manifest(
                &write(
                    t.path(),
                    name,
                    "{\"path\": \"x.wav\", \"label\": \"a\", \"spilt\": \"testing\"}\n",
                ),
                &o,
            )
            .unwrap_err()
            .to_string();
            assert!(
                e.contains("line 1") && e.contains("\"spilt\" looks like"),
                "{e}"
            );
        }
    }

    #[test]
    fn metadata_columns_are_kept_per_clip_in_csv_and_jsonl() {
        let t = tempfile::tempdir().unwrap();
        let o = ManifestOptions::default();
        let csv = write(
            t.path(),
            "m.csv",
            "path,speaker,label,split,mic\nb.wav, bob ,yes,training,1\na.wav,ann,no,training,\"2, left\"\n",
        );
        let d = from_manifest(&csv, &o).unwrap();
        assert_eq!(d.meta_columns, ["speaker", "mic"]);
        let f = &d.splits[0].files;
        assert_eq!(
            (f[0].rel.as_str(), &f[0].meta[..]),
            ("a.wav", &["ann".to_string(), "2, left".into()][..])
        );
        assert_eq!(&f[1].meta[..], ["bob", "1"], "trimmed as labels are");
        let jsonl = write(
            t.path(),
            "m.jsonl",
            "{\"path\": \"a.wav\", \"label\": \"no\", \"split\": \"t\", \"take\": 3}\n{\"path\": \"b.wav\", \"label\": \"no\", \"split\": \"t\", \"speaker\": \"bob\", \"take\": null}\n",
        );
        let d = from_manifest(&jsonl, &o).unwrap();
        assert_eq!(
            d.meta_columns,
            ["take", "speaker"],
            "in order of first appearance"
        );
        assert_eq!(&d.splits[0].files[0].meta[..], ["3", ""]);
        assert_eq!(&d.splits[0].files[1].meta[..], ["", "bob"]);
        for (name, text, why) in [
            (
                "l.jsonl",
                "{\"path\": \"a.wav\", \"label\": \"no\", \"tags\": [1]}\n",
                "line 1: the value of \"tags\" is a list",
            ),
            (
                "c.csv",
                "path,label,spk\na.wav,no,\"x\u{1b}[2J\"\n",
                "line 2: the metadata value",
            ),
            (
                "d.csv",
                "path,label,spk,spk\na.wav,no,a,b\n",
                "\"spk\" is named twice",
            ),
            ("n.csv", "spk,label\na.wav,no\n", "names no path column"),
        ] {
            let e = from_manifest(&write(t.path(), name, text), &o)
                .unwrap_err()
                .to_string();
            assert!(e.contains(why), "{name}: {e}");
        }
    }

    fn speakers_manifest(dir: &Path, split_column: bool) -> PathBuf {
        let mut text = String::from(if split_column {
            "path,label,speaker,split\n"
        } else {
            "path,label,speaker\n"
        });
        for spk in 0..30 {
            for word in ["yes", "no"] {
                for take in 0..3 {
                    text += &format!("{word}/s{spk}_{take}.wav,{word},s{spk}");
                    if split_column {
                        text += if spk % 5 == 0 {
                            ",testing"
                        } else {
                            ",training"
                        };
                    }
                    text += "\n";
                }
            }
        }
        write(
            dir,
            if split_column {
                "named.csv"
            } else {
                "ratio.csv"
            },
            &text,
        )
    }

    #[test]
    fn group_by_puts_each_speaker_in_one_split_and_refuses_a_leak() {
        let t = tempfile::tempdir().unwrap();
        let mut o = ManifestOptions {
            group: Some(Grouping::Column("speaker".into())),
            ..ManifestOptions::default()
        };
        let d = from_manifest(&speakers_manifest(t.path(), false), &o).unwrap();
        let mut split_of = std::collections::HashMap::new();
        for s in &d.splits {
            for f in &s.files {
                let first = split_of.entry(f.meta[0].clone()).or_insert(s.name.clone());
                assert_eq!(*first, s.name, "{} in two splits", f.meta[0]);
            }
        }
        assert_eq!(split_of.len(), 30);
        assert_eq!(d.splits.len(), 3, "30 speakers reach all three splits");
        // Without groups the same rows leak speakers across splits.
        let plain = from_manifest(
            &speakers_manifest(t.path(), false),
            &ManifestOptions::default(),
        )
        .unwrap();
        let leaks = (0..30).any(|spk| {
            plain
                .splits
                .iter()
                .filter(|s| s.files.iter().any(|f| f.meta[0] == format!("s{spk}")))
                .count()
                > 1
        });
        assert!(leaks, "the path hash splits a speaker's clips");
        // A source naming its splits is checked.
        let named = speakers_manifest(t.path(), true);
        from_manifest(&named, &o).unwrap();
        let text = std::fs::read_to_string(&named).unwrap().replacen(
            "no/s1_2.wav,no,s1,training",
            "no/s1_2.wav,no,s1,testing",
            1,
        );
        let e = from_manifest(&write(t.path(), "leak.csv", &text), &o)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("\"s1\" has clips in the splits") && e.contains("no/s1_2.wav"),
            "{e}"
        );
        // A row without a group, and a column that is not there, are named.
        let text = std::fs::read_to_string(speakers_manifest(t.path(), false))
            .unwrap()
            .replacen("yes/s3_1.wav,yes,s3", "yes/s3_1.wav,yes,", 1);
        let e = from_manifest(&write(t.path(), "gap.csv", &text), &o)
            .unwrap_err()
            .to_string();
        assert!(e.contains("line 21: no \"speaker\" value"), "{e}");
        o.group = Some(Grouping::Column("session".into()));
        let e = from_manifest(&speakers_manifest(t.path(), false), &o)
            .unwrap_err()
            .to_string();
        assert!(e.contains("grouping by the column \"session\": there is no such column (its metadata columns are speaker)"), "{e}");
        // A pattern over the paths gives the same groups, stored as `group`.
        o.group = Some(Grouping::Pattern(GroupPattern::new(r"/(s\d+)_").unwrap()));
        let d = from_manifest(&speakers_manifest(t.path(), false), &o).unwrap();
        assert_eq!(d.meta_columns, ["speaker", "group"]);
        assert!(
            d.splits
                .iter()
                .flat_map(|s| &s.files)
                .all(|f| f.meta[0] == f.meta[1])
        );
        o.group = Some(Grouping::Pattern(GroupPattern::new(r"/(x\d+)_").unwrap()));
        let e = from_manifest(&speakers_manifest(t.path(), false), &o)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("line 2: the group pattern")
                && e.contains("finds no group in \"yes/s0_0.wav\""),
            "{e}"
        );
    }

    /// The attack round's findings on groups (issue 37): a 65th column added by a
    /// pattern, one speaker in two Unicode forms, numbers JSON cannot keep as written.
    #[test]
    fn groups_and_values_that_would_mislead_are_refused() {
        let t = tempfile::tempdir().unwrap();
        let columns: Vec<String> = (0..64).map(|i| format!("c{i}")).collect();
        let mut text = format!("path,label,{}\n", columns.join(","));
        for spk in 0..4 {
            text += &format!("s{spk}_x.wav,a,{}\n", vec!["v"; 64].join(","));
        }
        let wide = write(t.path(), "wide.csv", &text);
        let pattern = ManifestOptions {
            group: Some(Grouping::Pattern(GroupPattern::new(r"(s\d)_").unwrap())),
            ratios: vec![("all".into(), 1.0)],
            ..ManifestOptions::default()
        };
        let e = from_manifest(&wide, &pattern).unwrap_err().to_string();
        assert!(
            e.contains("adds the column \"group\" to 64 metadata columns; at most 64"),
            "{e}"
        );
        let by_speaker = ManifestOptions {
            group: Some(Grouping::Column("speaker".into())),
            ..ManifestOptions::default()
        };
        let forms = write(
            t.path(),
            "forms.csv",
            "path,label,speaker,split\na.wav,a,Jos\u{e9},training\nb.wav,a,Jose\u{301},testing\n",
        );
        let e = from_manifest(&forms, &by_speaker).unwrap_err().to_string();
        assert!(
            e.contains("the group names") && e.contains("two Unicode forms"),
            "{e}"
        );
        for (value, kept) in [
            ("7", Some("7")),
            ("-3", Some("-3")),
            ("true", Some("true")),
            ("0.10", None),
            ("1e2", None),
            ("18446744073709551617", None),
        ] {
            let j = write(
                t.path(),
                "n.jsonl",
                &format!(
                    "{{\"path\": \"a.wav\", \"label\": \"a\", \"split\": \"t\", \"take\": {value}}}\n"
                ),
            );
            match (from_manifest(&j, &ManifestOptions::default()), kept) {
                (Ok(d), Some(k)) => assert_eq!(&d.splits[0].files[0].meta[..], [k]),
                (Err(e), None) => assert!(
                    e.to_string().contains("not a whole number within 64 bits"),
                    "{value}: {e}"
                ),
                (r, _) => panic!("{value}: {r:?}"),
            }
        }
    }

    #[test]
    fn labels_and_splits_in_two_unicode_forms_are_refused() {
        let t = tempfile::tempdir().unwrap();
        let m = write(
            t.path(),
            "m.csv",
            "path,label,split\na.wav,caf\u{e9},train\nb.wav,cafe\u{301},train\n",
        );
        let e = from_manifest(&m, &ManifestOptions::default())
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("the class names") && e.contains("two Unicode forms"),
            "{e}"
        );
        let m = write(
            t.path(),
            "s.csv",
            "path,label,split\na.wav,x,t\u{e9}st\nb.wav,x,te\u{301}st\n",
        );
        let e = from_manifest(&m, &ManifestOptions::default())
            .unwrap_err()
            .to_string();
        assert!(e.contains("the split names"), "{e}");
        let map = write(t.path(), "labels.txt", "caf\u{e9}\ncafe\u{301}\n");
        let e = read_label_map(&map).unwrap_err().to_string();
        assert!(e.contains("the label names"), "{e}");
    }

    /// A file's split depends only on its path and the seed: rewriting the paths (`./x`,
    /// absolute) or adding files never moves a file to another split, which would leak
    /// test clips into training across rebuilds (issue 22 attack round: 10 of 20 moved).
    #[test]
    fn a_files_split_survives_respelling_and_added_files() {
        let t = tempfile::tempdir().unwrap();
        let rows = |spell: &dyn Fn(&str) -> String, extra: usize| {
            let mut text = String::from("path,label\n");
            for c in ["a", "b"] {
                for i in 0..(10 + extra) {
                    text += &format!("{},{c}\n", spell(&format!("{c}{i}.wav")));
                }
            }
            text
        };
        let opts = ManifestOptions {
            seed: 7,
            ..ManifestOptions::default()
        };
        let split_of = |text: String, name: &str| -> BTreeMap<String, String> {
            let m = write(t.path(), name, &text);
            let d = from_manifest(&m, &opts).unwrap();
            d.splits
                .iter()
                .flat_map(|s| {
                    s.files.iter().map(|f| {
                        let file = f.path.file_name().unwrap().to_string_lossy().to_string();
                        (file, s.name.clone())
                    })
                })
                .collect()
        };
        let plain = split_of(rows(&|p| p.to_string(), 0), "plain.csv");
        assert_eq!(plain.len(), 20);
        let base = t.path().display().to_string();
        for (name, spelled) in [
            ("dot.csv", rows(&|p| format!("./{p}"), 0)),
            ("abs.csv", rows(&|p| format!("{base}/{p}"), 0)),
            ("up.csv", rows(&|p| format!("x/../{p}"), 0)),
        ] {
            assert_eq!(split_of(spelled, name), plain, "{name}");
        }
        let grown = split_of(rows(&|p| p.to_string(), 3), "grown.csv");
        assert_eq!(grown.len(), 26);
        for (file, split) in &plain {
            assert_eq!(&grown[file], split, "{file} moved when files were added");
        }
    }

    /// The key is the same however the manifest is named: `m.csv` (whose parent is the
    /// empty path), `./m.csv` or its absolute path (a bare name moved 11 of 30 files).
    #[test]
    fn the_split_key_does_not_depend_on_how_the_manifest_is_named() {
        let cwd = std::env::current_dir().unwrap();
        let file = cwd.join("a/f1.wav");
        let mut keys = Vec::new();
        for manifest in [
            PathBuf::from("m.csv"),
            PathBuf::from("./m.csv"),
            cwd.join("m.csv"),
        ] {
            keys.push(split_key(&file, &manifest_folder(&manifest)));
        }
        assert_eq!(keys, ["a/f1.wav", "a/f1.wav", "a/f1.wav"]);
    }

    /// JSONL labels and splits were taken untrimmed: `" leak"`, `"leak"` and `"leak "`
    /// were three classes, and the split `"all "` wrote `all .h5`. Both formats give the
    /// same rows.
    #[test]
    fn jsonl_and_csv_rows_are_read_alike() {
        let t = tempfile::tempdir().unwrap();
        let j = write(
            t.path(),
            "m.jsonl",
            concat!(
                "{\"path\": \"a.wav\", \"label\": \" leak\", \"split\": \"all \"}\n",
                "{\"path\": \"b.wav\", \"label\": \"leak\", \"split\": \"all\"}\n",
                "{\"path\": \"c.wav \", \"label\": \"leak \", \"split\": \" all\"}\n",
            ),
        );
        let c = write(
            t.path(),
            "m.csv",
            "path,label,split\na.wav, leak,all \nb.wav,leak,all\n\"c.wav \",leak , all\n",
        );
        // A byte-order mark before the first row is not part of it (an editor's).
        let bom = write(
            t.path(),
            "bom.jsonl",
            &format!("\u{feff}{}", std::fs::read_to_string(&j).unwrap()),
        );
        let with_bom = from_manifest(&bom, &ManifestOptions::default()).unwrap();
        let from_jsonl = from_manifest(&j, &ManifestOptions::default()).unwrap();
        assert_eq!(with_bom.splits, from_jsonl.splits);
        assert_eq!(from_jsonl.label_names, ["leak"]);
        let names: Vec<&str> = from_jsonl.splits.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, ["all"]);
        // The path is verbatim in both.
        assert_eq!(from_jsonl.splits[0].files[2].rel, "c.wav ");
        assert_eq!(
            from_jsonl.splits,
            from_manifest(&c, &ManifestOptions::default())
                .unwrap()
                .splits
        );
    }

    /// A file outside the manifest's folder (`../audio/x.wav`) was split by a hash of its
    /// absolute path: moving or remounting the dataset moved about half the clips
    /// between training and testing.
    #[test]
    fn files_outside_the_manifests_folder_keep_their_split_when_the_dataset_moves() {
        let t = tempfile::tempdir().unwrap();
        let mut text = String::from("path,label\n");
        for i in 0..40 {
            text += &format!("../audio/x{i}.wav,a\n");
        }
        let opts = ManifestOptions {
            seed: 3,
            ..ManifestOptions::default()
        };
        let splits_under = |root: &str| -> BTreeMap<String, String> {
            let dir = t.path().join(root).join("manifests");
            std::fs::create_dir_all(&dir).unwrap();
            let d = from_manifest(&write(&dir, "m.csv", &text), &opts).unwrap();
            d.splits
                .iter()
                .flat_map(|s| s.files.iter().map(|f| (f.rel.clone(), s.name.clone())))
                .collect()
        };
        let here = splits_under("one");
        assert_eq!(here.len(), 40);
        assert_eq!(splits_under("mounted/elsewhere/two"), here);
        // The key is the path as the manifest names it, relative, normalised.
        let base = t.path().join("m");
        assert_eq!(
            split_key(&base.join("../audio/./x.wav"), &base),
            "../audio/x.wav"
        );
        assert_eq!(
            split_key(&t.path().join("audio/x.wav"), &base),
            "../audio/x.wav"
        );
        assert_eq!(split_key(&base.join("sub/x.wav"), &base), "sub/x.wav");
    }

    /// The same manifest named through a linked folder (`alias/m.csv`, alias -> ds), or
    /// through a link to the file, split the same absolute rows differently: the key was
    /// relative to the folder as spelled, and relative rows were read from the link's
    /// folder.
    #[test]
    fn links_on_the_way_to_the_manifest_or_its_files_change_no_split() {
        let t = tempfile::tempdir().unwrap();
        let ds = t.path().join("ds");
        std::fs::create_dir_all(ds.join("clips")).unwrap();
        let mut absolute = String::from("path,label\n");
        let mut relative = String::from("path,label\n");
        for i in 0..60 {
            std::fs::write(ds.join(format!("clips/c{i}.wav")), b"x").unwrap();
            absolute += &format!("{}/clips/c{i}.wav,k{}\n", ds.display(), i % 3);
            relative += &format!("clips/c{i}.wav,k{}\n", i % 3);
        }
        write(&ds, "abs.csv", &absolute);
        write(&ds, "rel.csv", &relative);
        std::os::unix::fs::symlink(&ds, t.path().join("alias")).unwrap();
        std::fs::create_dir(t.path().join("elsewhere")).unwrap();
        std::os::unix::fs::symlink(ds.join("rel.csv"), t.path().join("elsewhere/link.csv"))
            .unwrap();
        let splits = |m: PathBuf| -> Vec<(String, Vec<String>)> {
            let d = from_manifest(&m, &ManifestOptions::default()).unwrap();
            d.splits
                .iter()
                .map(|s| {
                    let names = s
                        .files
                        .iter()
                        .map(|f| f.path.file_name().unwrap().to_string_lossy().into_owned());
                    (s.name.clone(), names.collect())
                })
                .collect()
        };
        let want = splits(ds.join("abs.csv"));
        assert_eq!(splits(t.path().join("alias/abs.csv")), want);
        assert_eq!(splits(ds.join("rel.csv")), want);
        assert_eq!(splits(t.path().join("alias/rel.csv")), want);
        // A link to the manifest reads its rows from the manifest's own folder.
        assert_eq!(splits(t.path().join("elsewhere/link.csv")), want);
    }

    /// A quoted CSV path keeps its spaces, as JSONL does: the row `"sp.wav ",b` named the
    /// file `sp.wav` (another clip, of class a) and built it as class b.
    #[test]
    fn csv_paths_are_taken_verbatim_and_labels_trimmed() {
        let t = tempfile::tempdir().unwrap();
        let m = write(
            t.path(),
            "m.csv",
            "path,label,split\n\"sp.wav \", b ,training\nsp.wav,a,training\n",
        );
        let d = from_manifest(&m, &ManifestOptions::default()).unwrap();
        let files: Vec<(&str, i64)> = d.splits[0]
            .files
            .iter()
            .map(|f| (f.rel.as_str(), f.label))
            .collect();
        assert_eq!(files, [("sp.wav", 0), ("sp.wav ", 1)]);
        assert_eq!(d.label_names, ["a", "b"]);
    }

    #[test]
    fn ratios_for_a_manifest_that_names_its_splits_are_refused_not_ignored() {
        let t = tempfile::tempdir().unwrap();
        let m = write(t.path(), "m.csv", "path,label,split\na.wav,x,training\n");
        let given = ManifestOptions {
            ratios_given: true,
            ..ManifestOptions::default()
        };
        let e = from_manifest(&m, &given).unwrap_err().to_string();
        assert!(e.contains("split ratios and a seed do not apply"), "{e}");
        assert!(from_manifest(&m, &ManifestOptions::default()).is_ok());
    }

    #[test]
    fn a_positive_ratio_that_gets_no_file_is_refused_naming_the_split() {
        let t = tempfile::tempdir().unwrap();
        let m = write(
            t.path(),
            "m.csv",
            "path,label\na/1.wav,leak\na/2.wav,leak\nb/3.wav,quiet\nb/4.wav,quiet\n",
        );
        let opts = |ratios: &[(&str, f64)]| ManifestOptions {
            ratios: ratios.iter().map(|(n, r)| (n.to_string(), *r)).collect(),
            ..ManifestOptions::default()
        };
        let e = from_manifest(&m, &opts(&[("training", 0.999), ("testing", 0.001)]))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("split ratio testing=0.001 gives split \"testing\" no file of the 4"),
            "{e}"
        );
        // A tiny ratio is printed as a number, not 300 digits.
        let e = from_manifest(&m, &opts(&[("training", 1.0), ("testing", 1e-300)]))
            .unwrap_err()
            .to_string();
        assert!(e.contains("testing=1e-300") && e.len() < 400, "{e}");
        // A ratio of 0 asks for no split; a ratio that gets files builds it.
        let d = from_manifest(&m, &opts(&[("training", 1.0), ("testing", 0.0)])).unwrap();
        let names: Vec<_> = d.splits.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, ["training"]);
        let many: String = (0..40).map(|i| format!("c/{i}.wav,leak\n")).collect();
        let m = write(t.path(), "many.csv", &format!("path,label\n{many}"));
        let d = from_manifest(&m, &opts(&[("training", 0.5), ("testing", 0.5)])).unwrap();
        assert_eq!(d.splits.len(), 2);
    }

    #[test]
    fn names_that_could_escape_or_corrupt_an_output_are_refused_with_the_line() {
        let t = tempfile::tempdir().unwrap();
        let o = ManifestOptions::default();
        for (text, want) in [
            (
                "path,label,split\nx.wav,a,../escaped\n",
                "line 2: the split",
            ),
            ("path,label,split\nx.wav,a,/etc/x\n", "path separator"),
            (
                "path,label,split\nx.wav,a,t\ny.wav,,t\n",
                "line 3: the label \"\" is empty",
            ),
            (
                "path,label,split\nx.wav,\"a\u{0}b\",t\n",
                "control character",
            ),
            ("path,label,split\nx.wav,a,..\n", "\"..\""),
        ] {
            let e = from_manifest(&write(t.path(), "m.csv", text), &o)
                .unwrap_err()
                .to_string();
            assert!(e.contains(want), "{text:?}: {e}");
        }
        let e = from_manifest(
            &write(
                t.path(),
                "j.jsonl",
                "{\"path\": \"x.wav\", \"label\": \"a\\u0000\"}\n",
            ),
            &o,
        )
        .unwrap_err()
        .to_string();
        assert!(
            e.contains("line 1: the label") && e.contains("control"),
            "{e}"
        );
        // Ratios must sum to 1.
        let csv = write(t.path(), "r.csv", "path,label\nx.wav,a\n");
        let bad = ManifestOptions {
            ratios: vec![("training".into(), 0.7), ("testing".into(), 0.2)],
            ..ManifestOptions::default()
        };
        let e = from_manifest(&csv, &bad).unwrap_err().to_string();
        assert!(e.contains("must sum to 1") && e.contains("0.9"), "{e}");
        // A split named twice put every clip in it (the second ratio won nothing).
        let twice = ManifestOptions {
            ratios: vec![("training".into(), 0.7), ("training".into(), 0.3)],
            ..ManifestOptions::default()
        };
        let e = from_manifest(&csv, &twice).unwrap_err().to_string();
        assert!(e.contains("\"training\" is given two ratios"), "{e}");
    }

    #[test]
    fn every_spelling_and_link_of_one_file_is_one_file_named_with_both_lines() {
        let t = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(t.path().join("a")).unwrap();
        std::fs::create_dir_all(t.path().join("b")).unwrap();
        std::fs::write(t.path().join("a/x.wav"), b"x").unwrap();
        std::os::unix::fs::symlink("a/x.wav", t.path().join("link.wav")).unwrap();
        std::fs::hard_link(t.path().join("a/x.wav"), t.path().join("hard.wav")).unwrap();
        let abs = t.path().join("a/x.wav").display().to_string();
        let o = ManifestOptions::default();
        for other in [
            "a/x.wav",
            "./a/x.wav",
            "a//x.wav",
            "b/../a/x.wav",
            abs.as_str(),
            "link.wav",
            "hard.wav",
        ] {
            let csv = format!("path,label,split\na/x.wav,leak,training\n\n{other},quiet,testing\n");
            let e = from_manifest(&write(t.path(), "m.csv", &csv), &o)
                .unwrap_err()
                .to_string();
            assert!(
                e.contains("lines 2 and 4 name one file") && e.contains(other),
                "{other}: {e}"
            );
        }
        // A file that does not exist: its spellings are one path.
        let csv = "path,label,split\ngone.wav,a,t\n./b/../gone.wav,a,v\n";
        let e = from_manifest(&write(t.path(), "g.csv", csv), &o)
            .unwrap_err()
            .to_string();
        assert!(e.contains("lines 2 and 3 name one file"), "{e}");
        // Two different files are two clips.
        std::fs::write(t.path().join("b/x.wav"), b"y").unwrap();
        let csv = "path,label,split\na/x.wav,a,t\nb/x.wav,a,t\n";
        let d = from_manifest(&write(t.path(), "ok.csv", csv), &o).unwrap();
        assert_eq!(d.splits[0].files.len(), 2);
    }

    #[test]
    fn manifests_and_label_maps_are_read_bounded_without_blocking() {
        let t = tempfile::tempdir().unwrap();
        let fifo = t.path().join("m.csv");
        let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
        // SAFETY: a valid NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o644) }, 0);
        let o = ManifestOptions::default();
        let (tx, rx) = std::sync::mpsc::channel();
        let f = fifo.clone();
        std::thread::spawn(move || {
            let _ = tx.send((
                from_manifest(&f, &ManifestOptions::default()).map(|_| ()),
                read_label_map(&f).map(|_| ()),
            ));
        });
        let (m, l) = rx
            .recv_timeout(std::time::Duration::from_secs(10))
            .expect("a FIFO is refused at once, not waited on");
        for e in [m.unwrap_err().to_string(), l.unwrap_err().to_string()] {
            assert!(e.contains("m.csv") && e.contains("a FIFO"), "{e}");
        }
        let e = from_manifest(Path::new("/dev/zero"), &o)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("/dev/zero") && e.contains("character device"),
            "{e}"
        );
        let e = read_label_map(Path::new("/dev/zero"))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("/dev/zero") && e.contains("character device"),
            "{e}"
        );
        let big = write(t.path(), "big.txt", &"a\n".repeat(9 << 20));
        let e = read_label_map(&big).unwrap_err().to_string();
        assert!(e.contains("big.txt") && e.contains("limit"), "{e}");
    }

    #[test]
    fn label_map_lines_are_checked_like_folder_names() {
        let t = tempfile::tempdir().unwrap();
        for (text, want) in [
            ("leak\n../../evil\n", "line 2: the label \"../../evil\""),
            ("leak\n\nred\u{1b}[31m\n", "line 3: the label"),
            ("# c\n.x.h5.partial-99999999-a\n", "line 2: the label"),
            ("a/b\n", "path separator"),
        ] {
            let e = read_label_map(&write(t.path(), "l.txt", text))
                .unwrap_err()
                .to_string();
            assert!(e.contains(want) && !e.contains('\u{1b}'), "{text:?}: {e}");
        }
        let e = from_manifest(
            &write(
                t.path(),
                "s.csv",
                "path,label,split\nx.wav,a,.x.h5.partial-99999999-a\n",
            ),
            &ManifestOptions::default(),
        )
        .unwrap_err()
        .to_string();
        assert!(
            e.contains("line 2: the split") && e.contains("starts with '.'"),
            "{e}"
        );
        // A quoted field over two lines: the next row's line is still right.
        let csv = "path,label,split\n\"x\ny.wav\",a,t\nz.wav,,t\n";
        let e = from_manifest(&write(t.path(), "q.csv", csv), &ManifestOptions::default())
            .unwrap_err()
            .to_string();
        assert!(e.contains("control character"), "{e}");
        let csv = "path,label,split\n\"x y.wav\",a,t\n\nz.wav,,t\n";
        let e = from_manifest(&write(t.path(), "q.csv", csv), &ManifestOptions::default())
            .unwrap_err()
            .to_string();
        assert!(e.contains("line 4: the label"), "{e}");
    }
}

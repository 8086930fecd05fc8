//! Groups: clips that must sit in one split (one speaker's, one machine's, one
//! recording session's), so that a test split never holds a voice the model trained on.
//!
//! A group is a metadata column's value (`--group-by speaker`, manifests) or the first
//! capture of a pattern over each clip's path (`--group-pattern`, folders and manifests:
//! Speech Commands names its files `SPEAKER_nohash_N.wav`). Where the splits are drawn
//! by ratio, a group's split is drawn from a seeded hash of the group, so it is the same
//! whatever else is added or removed; where the source names the splits (split folders,
//! a `split` column), a group found in two of them is refused with both named.

use std::borrow::Cow;
use std::collections::{BTreeMap, HashMap};

use mel_core::format::GROUP_COLUMN;
use xxhash_rust::xxh3::xxh3_64_with_seed;

use crate::scan::{Dataset, FileEntry};

/// What puts clips into one group.
#[derive(Debug, Clone, PartialEq)]
pub enum Grouping {
    /// A manifest's metadata column (`--group-by COLUMN`).
    Column(String),
    /// The first capture of a pattern over each clip's path (`--group-pattern REGEX`),
    /// stored as the metadata column `group`.
    Pattern(GroupPattern),
}

impl Grouping {
    /// The metadata column holding each clip's group.
    pub fn column(&self) -> &str {
        match self {
            Grouping::Column(c) => c,
            Grouping::Pattern(_) => GROUP_COLUMN,
        }
    }

    /// What asked for it, in words (`--group-by` / `group_by=`, `--group-pattern` /
    /// `group_pattern=`).
    fn option(&self) -> String {
        match self {
            Grouping::Column(c) => format!("grouping by the column {c:?}"),
            Grouping::Pattern(p) => format!("grouping by the pattern {:?}", p.as_str()),
        }
    }
}

/// A regular expression whose first capture is a clip's group, matched anywhere in the
/// clip's path (relative to the dataset root, `/` separators; a manifest's as written).
#[derive(Debug, Clone)]
pub struct GroupPattern(regex::Regex);

impl PartialEq for GroupPattern {
    fn eq(&self, other: &Self) -> bool {
        self.as_str() == other.as_str()
    }
}

impl GroupPattern {
    /// Compiles `pattern`, which must hold a capture group; the error says why not
    /// (without repeating the pattern, which the caller names).
    pub fn new(pattern: &str) -> Result<Self, String> {
        let regex = regex::RegexBuilder::new(pattern)
            .size_limit(1 << 20)
            .build()
            .map_err(|e| {
                // The library's message spans lines; its last line says what is wrong.
                let text = e.to_string();
                let last = text.lines().last().unwrap_or_default().trim();
                let why = last.strip_prefix("error:").unwrap_or(last).trim();
                format!("not a regular expression: {why}")
            })?;
        if regex.captures_len() < 2 {
            return Err(
                "no capture group: the first one, in parentheses, is the group (e.g. \"([^/]+)_nohash_\")".into(),
            );
        }
        Ok(GroupPattern(regex))
    }

    /// The pattern as given.
    pub fn as_str(&self) -> &str {
        self.0.as_str()
    }

    /// The group of the clip at `path`: the first capture, which must be there, not
    /// empty, and hold no `/` (a group is a name within the path: a capture of folders,
    /// `(.*)_nohash_`, would take in a split folder and make every group one split's);
    /// the error says which, naming the path.
    pub fn group_of<'a>(&self, path: &'a str) -> Result<&'a str, String> {
        let shown = format!("the group pattern {:?}", self.as_str());
        let g = self
            .0
            .captures(path)
            .and_then(|c| c.get(1))
            .map(|m| m.as_str())
            .filter(|g| !g.is_empty())
            .ok_or_else(|| {
                format!(
                    "{shown} finds no group in {path:?} (the group is the pattern's first capture, and must not be empty)"
                )
            })?;
        if g.contains('/') {
            return Err(format!(
                "{shown} captures {g:?} from {path:?}: a group is a name within the path, without '/' (capture a name, e.g. \"([^/]+)_nohash_\")"
            ));
        }
        Ok(g)
    }
}

/// Adds the metadata column `group` from `pattern` over each file's path; a file the
/// pattern finds no group in is refused by name (a clip in no group would land in a split
/// of its own choosing, beside its group's other clips).
pub(crate) fn add_pattern_column(
    columns: &mut Vec<String>,
    files: &mut [&mut FileEntry],
    pattern: &GroupPattern,
) -> Result<(), String> {
    check_room_for_pattern(columns)?;
    for f in files.iter_mut() {
        let group = pattern.group_of(&f.rel)?;
        let mut meta = f.meta.to_vec();
        meta.push(group.to_string());
        f.meta = meta.into();
    }
    columns.push(GROUP_COLUMN.to_string());
    Ok(())
}

/// Refuses two groups that are one name in two Unicode forms (`José` composed and
/// decomposed): they print alike, and would be two groups, one speaker in two splits.
/// Case is kept (`Ann` and `ann` are two groups, as they are two texts).
pub(crate) fn check_group_spellings(dataset: &Dataset, grouping: &Grouping) -> Result<(), String> {
    let column = group_column(&dataset.meta_columns, grouping)?;
    let values: std::collections::BTreeSet<&str> = dataset
        .splits
        .iter()
        .flat_map(|s| &s.files)
        .map(|f| f.meta[column].as_str())
        .collect();
    crate::scan::check_distinct("group", values)
        .map_err(|why| format!("{}: {why}", grouping.option()))
}

/// Refuses a metadata column beyond the `columns` there are, past the format's bound.
pub(crate) fn check_room(columns: &[String]) -> Result<(), String> {
    if columns.len() >= mel_core::format::MAX_META_COLUMNS {
        return Err(format!(
            "more than {} metadata columns",
            mel_core::format::MAX_META_COLUMNS
        ));
    }
    Ok(())
}

/// Refuses the column `group` a pattern adds to `columns`: already there, or past the
/// format's bound (a 65th column no reader opens). Folders and manifests both ask here.
pub(crate) fn check_room_for_pattern(columns: &[String]) -> Result<(), String> {
    if columns.iter().any(|c| c == GROUP_COLUMN) {
        return Err(format!(
            "a group pattern stores each clip's group in the column {GROUP_COLUMN:?}, which the manifest already has; group by that column instead"
        ));
    }
    check_room(columns).map_err(|_| {
        format!(
            "the group pattern adds the column {GROUP_COLUMN:?} to {} metadata columns; at most {} are kept",
            columns.len(),
            mel_core::format::MAX_META_COLUMNS
        )
    })
}

/// The index of `grouping`'s column among `columns`.
pub(crate) fn group_column(columns: &[String], grouping: &Grouping) -> Result<usize, String> {
    let want = grouping.column();
    columns.iter().position(|c| c == want).ok_or_else(|| {
        let have = if columns.is_empty() {
            "it has no metadata columns".to_string()
        } else {
            format!("its metadata columns are {}", columns.join(", "))
        };
        format!("{}: there is no such column ({have})", grouping.option())
    })
}

/// Refuses a group whose clips sit in two of the splits a source names, naming the group,
/// both splits and a clip of each.
pub(crate) fn check_groups_disjoint(dataset: &Dataset, grouping: &Grouping) -> Result<(), String> {
    let column = group_column(&dataset.meta_columns, grouping)?;
    let mut first: HashMap<&str, (&str, &str)> = HashMap::new();
    for split in &dataset.splits {
        for f in &split.files {
            let group = f.meta[column].as_str();
            let (split_a, clip_a) = *first.entry(group).or_insert((&split.name, &f.rel));
            if split_a != split.name {
                return Err(format!(
                    "{}: the group {group:?} has clips in the splits {split_a:?} ({clip_a}) and {:?} ({}); one group's clips must sit in one split, or the test split holds what training saw",
                    grouping.option(),
                    split.name,
                    f.rel
                ));
            }
        }
    }
    Ok(())
}

/// Split names and their shares, the seed of the draw, and what a file's key is (for
/// messages: "its path", "its group").
pub(crate) struct Ratios<'a> {
    /// Names and shares, in order.
    pub ratios: &'a [(String, f64)],
    /// The draw's seed.
    pub seed: u64,
    /// What the key of a file is, in words.
    pub key_is: &'a str,
}

/// Splits `files` by ratio: each goes to the split whose share of [0, 1) holds a seeded
/// hash of `key(file)`. A file's split thus depends on nothing but its key and the seed:
/// not on the order, nor on files added or removed (a rank-based cut moved files between
/// training and testing when three files were added). Shares are met on average. A split
/// asked for by a positive ratio that gets no file is refused (it would vanish without a
/// word).
pub(crate) fn assign_by_ratio(
    files: impl IntoIterator<Item = FileEntry>,
    r: &Ratios<'_>,
    key: impl Fn(&FileEntry) -> Cow<'_, str>,
) -> Result<BTreeMap<String, Vec<FileEntry>>, String> {
    check_ratios(r.ratios)?;
    let total: f64 = r.ratios.iter().map(|(_, x)| x).sum();
    let mut out: BTreeMap<String, Vec<FileEntry>> = BTreeMap::new();
    // Cumulative upper bounds of each split's share; a hash past the last bound
    // (rounding) goes to the last split with a share.
    let mut bounds = Vec::with_capacity(r.ratios.len());
    let mut acc = 0.0;
    for (name, x) in r.ratios {
        acc += x / total;
        out.entry(name.clone()).or_default();
        bounds.push(acc);
    }
    let last = r
        .ratios
        .iter()
        .rposition(|(_, x)| *x > 0.0)
        .expect("the ratios sum to 1, so one is positive");
    for f in files {
        let k = key(&f);
        // The hash's top 53 bits, as a fraction of 1.
        let at = (xxh3_64_with_seed(k.as_bytes(), r.seed) >> 11) as f64 / (1u64 << 53) as f64;
        let i = bounds.iter().position(|&end| at < end).unwrap_or(last);
        out.get_mut(&r.ratios[i].0)
            .expect("every split has an entry")
            .push(f);
    }
    let files: usize = out.values().map(Vec::len).sum();
    for (name, x) in r.ratios {
        if *x > 0.0 && out.get(name).is_none_or(Vec::is_empty) {
            return Err(format!(
                "split ratio {name}={x:?} gives split {name:?} no file of the {files} (a file's split is drawn from a hash of {}); give it a larger ratio, or leave it out",
                r.key_is
            ));
        }
    }
    out.retain(|_, f| !f.is_empty());
    Ok(out)
}

/// `key` as a key of [`assign_by_ratio`]: a closure's text borrowed from the file it is
/// given (Rust infers no such lifetime for a closure on its own).
pub(crate) fn file_key<F>(key: F) -> F
where
    F: Fn(&FileEntry) -> Cow<'_, str>,
{
    key
}

/// Refuses ratios that are not non-negative numbers summing to 1 over distinct, valid
/// split names.
fn check_ratios(ratios: &[(String, f64)]) -> Result<(), String> {
    let total: f64 = ratios.iter().map(|(_, r)| r).sum();
    if ratios.is_empty() || ratios.iter().any(|(_, r)| !(r.is_finite() && *r >= 0.0)) {
        return Err("split ratios must be non-negative numbers".into());
    }
    if (total - 1.0).abs() > 1e-6 {
        return Err(format!(
            "split ratios must sum to 1; {} sum to {}",
            ratios
                .iter()
                .map(|(n, r)| format!("{n}={r:?}"))
                .collect::<Vec<_>>()
                .join(","),
            (total * 1e6).round() / 1e6
        ));
    }
    for (i, (name, _)) in ratios.iter().enumerate() {
        crate::scan::check_name(name).map_err(|why| format!("split ratio name {why}"))?;
        if ratios[..i].iter().any(|(n, _)| n == name) {
            return Err(format!(
                "the split {name:?} is given two ratios; name each split once"
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    fn file(rel: &str, speaker: &str) -> FileEntry {
        FileEntry {
            path: PathBuf::from(rel),
            rel: rel.into(),
            label: 0,
            meta: vec![speaker.to_string()].into(),
        }
    }

    #[test]
    fn a_pattern_needs_a_capture_and_finds_the_first_one() {
        assert!(
            GroupPattern::new("_nohash_")
                .unwrap_err()
                .contains("no capture group")
        );
        let e = GroupPattern::new("([").unwrap_err();
        assert!(
            e.starts_with("not a regular expression: unclosed") && !e.contains("error:"),
            "{e}"
        );
        let p = GroupPattern::new(r"([^/]+)_nohash_").unwrap();
        assert_eq!(p.group_of("yes/0a7c2a8d_nohash_0.wav"), Ok("0a7c2a8d"));
        assert!(
            p.group_of("yes/other.wav")
                .unwrap_err()
                .contains("finds no group in \"yes/other.wav\"")
        );
        let empty = GroupPattern::new(r"/(x*)_").unwrap();
        assert!(
            empty.group_of("a/_b.wav").is_err(),
            "an empty capture is no group"
        );
        // A capture of folders would hide a leak across split folders.
        let folders = GroupPattern::new(r"(.*)_nohash_").unwrap();
        let e = folders
            .group_of("training/yes/spk1_nohash_0.wav")
            .unwrap_err();
        assert!(
            e.contains("captures \"training/yes/spk1\"") && e.contains("without '/'"),
            "{e}"
        );
    }

    #[test]
    fn groups_go_to_one_split_whatever_else_is_added() {
        let ratios = [("training".to_string(), 0.5), ("testing".to_string(), 0.5)];
        let r = Ratios {
            ratios: &ratios,
            seed: 3,
            key_is: "its group",
        };
        let files: Vec<FileEntry> = (0..400)
            .map(|i| file(&format!("c/{i}.wav"), &format!("spk{}", i % 40)))
            .collect();
        let by_group = file_key(|f| Cow::Borrowed(f.meta[0].as_str()));
        let a = assign_by_ratio(files.clone(), &r, by_group).unwrap();
        let where_is = |out: &BTreeMap<String, Vec<FileEntry>>, spk: &str| -> Vec<String> {
            let mut s: Vec<String> = out
                .iter()
                .filter(|(_, f)| f.iter().any(|f| f.meta[0] == spk))
                .map(|(n, _)| n.clone())
                .collect();
            s.dedup();
            s
        };
        for g in 0..40 {
            assert_eq!(
                where_is(&a, &format!("spk{g}")).len(),
                1,
                "spk{g} in one split"
            );
        }
        // Adding a group moves nobody else.
        let mut more = files.clone();
        more.extend((0..10).map(|i| file(&format!("d/{i}.wav"), "newcomer")));
        let b = assign_by_ratio(more, &r, by_group).unwrap();
        for g in 0..40 {
            assert_eq!(
                where_is(&a, &format!("spk{g}")),
                where_is(&b, &format!("spk{g}"))
            );
        }
        let e = assign_by_ratio(
            files[..10].to_vec(),
            &Ratios {
                ratios: &[("a".into(), 0.999), ("b".into(), 0.001)],
                seed: 0,
                key_is: "its group",
            },
            by_group,
        )
        .unwrap_err();
        assert!(
            e.contains("gives split \"b\" no file") && e.contains("its group"),
            "{e}"
        );
    }

    #[test]
    fn a_group_in_two_named_splits_is_refused_with_both_named() {
        use crate::scan::ScannedSplit;
        let split = |name: &str, files: Vec<FileEntry>| ScannedSplit {
            name: name.into(),
            files,
            unreadable: vec![],
        };
        let mut d = Dataset {
            root: PathBuf::from("r"),
            label_names: vec!["a".into()],
            meta_columns: vec!["speaker".into()],
            splits: vec![
                split("testing", vec![file("a/1.wav", "ann")]),
                split(
                    "training",
                    vec![file("a/2.wav", "bob"), file("a/3.wav", "ann")],
                ),
            ],
            ignored: vec![],
        };
        let g = Grouping::Column("speaker".into());
        let e = check_groups_disjoint(&d, &g).unwrap_err();
        assert!(
            e.contains("\"ann\"") && e.contains("a/1.wav") && e.contains("a/3.wav"),
            "{e}"
        );
        d.splits[1].files.pop();
        check_groups_disjoint(&d, &g).unwrap();
        let e = check_groups_disjoint(&d, &Grouping::Column("session".into())).unwrap_err();
        assert!(
            e.contains("the column \"session\": there is no such column") && e.contains("speaker"),
            "{e}"
        );
    }
}

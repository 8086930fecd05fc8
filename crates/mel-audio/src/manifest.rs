//! Manifests as an alternative to folders: a CSV (header row) or JSONL file with `path`,
//! `label` and an optional `split` per clip. Paths are relative to the manifest's folder
//! (or absolute). Without a `split` column the clips are split by ratio, per class
//! (stratified), deterministically from a seed. A label map file (one class name per
//! line; the line number is the id) keeps class ids stable across datasets.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use mel_core::{Error, Result};
use xxhash_rust::xxh3::xxh3_64_with_seed;

use crate::scan::{Dataset, FileEntry, Split};

/// How to turn a manifest into splits and labels.
#[derive(Debug, Clone, PartialEq)]
pub struct ManifestOptions {
    /// Split names and ratios used when the manifest has no `split` column.
    pub ratios: Vec<(String, f64)>,
    /// Seed of the split assignment.
    pub seed: u64,
    /// Class names in id order; `None`: the manifest's labels, sorted.
    pub label_map: Option<Vec<String>>,
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
            label_map: None,
        }
    }
}

/// Manifests larger than this are refused (1 GiB: tens of millions of rows).
pub const MAX_MANIFEST_BYTES: u64 = 1 << 30;

/// One manifest row.
#[derive(Debug, Clone, PartialEq, serde::Deserialize)]
struct Row {
    path: String,
    label: String,
    #[serde(default)]
    split: Option<String>,
}

/// Reads a label map: one class name per line (blank lines and `#` comments ignored).
pub fn read_label_map(path: &Path) -> Result<Vec<String>> {
    let text = std::fs::read_to_string(path).map_err(|e| Error::io(path, e))?;
    let names: Vec<String> = text
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .map(String::from)
        .collect();
    let mut sorted = names.clone();
    sorted.sort();
    if let Some(w) = sorted.windows(2).find(|w| w[0] == w[1]) {
        return Err(Error::Dataset {
            root: path.to_path_buf(),
            reason: format!("label {:?} appears twice in the label map", w[0]),
        });
    }
    Ok(names)
}

/// The rows of a manifest with their line numbers.
fn parse(path: &Path, text: &str) -> Result<Vec<(usize, Row)>> {
    let bad = |line: usize, why: String| Error::Dataset {
        root: path.to_path_buf(),
        reason: format!("line {line}: {why}"),
    };
    let jsonl = path
        .extension()
        .and_then(|e| e.to_str())
        .is_some_and(|e| e.eq_ignore_ascii_case("jsonl") || e.eq_ignore_ascii_case("ndjson"));
    let mut rows = Vec::new();
    if jsonl {
        for (i, line) in text.lines().enumerate() {
            if line.trim().is_empty() {
                continue;
            }
            let row: Row = serde_json::from_str(line).map_err(|e| bad(i + 1, e.to_string()))?;
            rows.push((i + 1, row));
        }
    } else {
        let mut reader = csv::ReaderBuilder::new()
            .trim(csv::Trim::All)
            .from_reader(text.as_bytes());
        for rec in reader.deserialize::<Row>() {
            let line = |e: &csv::Error| e.position().map_or(0, |p| p.line() as usize);
            let row = rec.map_err(|e| bad(line(&e), e.to_string()))?;
            rows.push((rows.len() + 2, row));
        }
    }
    Ok(rows)
}

/// Reads the manifest at `path` into a dataset.
pub fn from_manifest(path: &Path, opts: &ManifestOptions) -> Result<Dataset> {
    let err = |reason: String| Error::Dataset {
        root: path.to_path_buf(),
        reason,
    };
    let len = std::fs::metadata(path)
        .map_err(|e| Error::io(path, e))?
        .len();
    if len > MAX_MANIFEST_BYTES {
        return Err(Error::limit(
            path.display().to_string(),
            format!("the manifest is {len} bytes; the limit is {MAX_MANIFEST_BYTES}"),
        ));
    }
    let text = std::fs::read_to_string(path).map_err(|e| Error::io(path, e))?;
    let numbered = parse(path, &text)?;
    if numbered.is_empty() {
        return Err(err("no clips listed".into()));
    }
    for (line, r) in &numbered {
        let names =
            std::iter::once(("label", &r.label)).chain(r.split.iter().map(|s| ("split", s)));
        for (what, name) in names {
            crate::scan::check_name(name)
                .map_err(|why| err(format!("line {line}: the {what} {why}")))?;
        }
        if r.path.is_empty() || r.path.contains('\0') {
            return Err(err(format!(
                "line {line}: the path is empty or holds a NUL"
            )));
        }
    }
    let rows: Vec<Row> = numbered.into_iter().map(|(_, r)| r).collect();
    let base = path.parent().unwrap_or(Path::new(".")).to_path_buf();
    let label_names = match &opts.label_map {
        Some(map) => {
            let unknown: Vec<&str> = rows
                .iter()
                .map(|r| r.label.as_str())
                .filter(|l| !map.iter().any(|m| m == l))
                .collect::<std::collections::BTreeSet<_>>()
                .into_iter()
                .collect();
            if !unknown.is_empty() {
                return Err(err(format!(
                    "labels not in the label map: {}",
                    unknown.join(", ")
                )));
            }
            map.clone()
        }
        None => {
            let mut names: Vec<String> = rows.iter().map(|r| r.label.clone()).collect();
            names.sort();
            names.dedup();
            names
        }
    };
    let with_split = rows.iter().filter(|r| r.split.is_some()).count();
    if with_split != 0 && with_split != rows.len() {
        return Err(err(format!(
            "{with_split} of {} rows name a split: name one for every row, or for none",
            rows.len()
        )));
    }
    let mut seen = std::collections::HashSet::new();
    let mut by_split: BTreeMap<String, Vec<FileEntry>> = BTreeMap::new();
    let mut by_class: BTreeMap<i64, Vec<FileEntry>> = BTreeMap::new();
    for r in &rows {
        if !seen.insert(r.path.clone()) {
            return Err(err(format!("{} is listed twice", r.path)));
        }
        let label = label_names
            .iter()
            .position(|n| *n == r.label)
            .expect("every label is in the map") as i64;
        let full: PathBuf = if Path::new(&r.path).is_absolute() {
            PathBuf::from(&r.path)
        } else {
            base.join(&r.path)
        };
        let entry = FileEntry {
            path: full,
            rel: r.path.clone(),
            label,
        };
        match &r.split {
            Some(s) => by_split.entry(s.clone()).or_default().push(entry),
            None => by_class.entry(label).or_default().push(entry),
        }
    }
    if with_split == 0 {
        assign(by_class, opts, &mut by_split, path)?;
    }
    let splits = by_split
        .into_iter()
        .filter(|(_, f)| !f.is_empty())
        .map(|(name, mut files)| {
            files.sort_by(|a, b| a.rel.cmp(&b.rel));
            Split {
                name,
                files,
                unreadable: vec![],
            }
        })
        .collect();
    Ok(Dataset {
        root: base,
        label_names,
        ignored: vec![],
        splits,
    })
}

/// Splits each class by `opts.ratios`: members ordered by a seeded hash of their path
/// (a deterministic shuffle that does not depend on row order), then cut by cumulative
/// ratio, so every split gets its share of every class.
fn assign(
    by_class: BTreeMap<i64, Vec<FileEntry>>,
    opts: &ManifestOptions,
    out: &mut BTreeMap<String, Vec<FileEntry>>,
    manifest: &Path,
) -> Result<()> {
    let total: f64 = opts.ratios.iter().map(|(_, r)| r).sum();
    let refuse = |reason: String| Error::Dataset {
        root: manifest.to_path_buf(),
        reason,
    };
    if opts.ratios.is_empty()
        || opts
            .ratios
            .iter()
            .any(|(_, r)| !(r.is_finite() && *r >= 0.0))
    {
        return Err(refuse("split ratios must be non-negative numbers".into()));
    }
    if (total - 1.0).abs() > 1e-6 {
        return Err(refuse(format!(
            "split ratios must sum to 1; {} sum to {}",
            opts.ratios
                .iter()
                .map(|(n, r)| format!("{n}={r}"))
                .collect::<Vec<_>>()
                .join(","),
            (total * 1e6).round() / 1e6
        )));
    }
    for (name, _) in &opts.ratios {
        crate::scan::check_name(name).map_err(|why| refuse(format!("split ratio name {why}")))?;
    }
    for (_, mut members) in by_class {
        members.sort_by_key(|f| {
            (
                xxh3_64_with_seed(f.rel.as_bytes(), opts.seed),
                f.rel.clone(),
            )
        });
        let n = members.len();
        let mut start = 0;
        let mut acc = 0.0;
        for (i, (name, r)) in opts.ratios.iter().enumerate() {
            acc += r;
            let end = if i + 1 == opts.ratios.len() {
                n
            } else {
                ((acc / total) * n as f64).round() as usize
            }
            .clamp(start, n);
            out.entry(name.clone())
                .or_default()
                .extend(members[start..end].iter().cloned());
            start = end;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

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
        assert_eq!(
            sizes,
            [
                ("testing".into(), 30),
                ("training".into(), 210),
                ("validation".into(), 60)
            ]
        );
        for s in &d.splits {
            for label in 0..3 {
                let n = s.files.iter().filter(|f| f.label == label).count();
                assert_eq!(n * 3, s.files.len(), "stratified: {} class {label}", s.name);
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
        let dup = write(t.path(), "dup.txt", "a\nb\na\n");
        assert!(
            read_label_map(&dup)
                .unwrap_err()
                .to_string()
                .contains("twice")
        );
    }

    #[test]
    fn malformed_manifests_are_errors_with_the_line() {
        let t = tempfile::tempdir().unwrap();
        let o = ManifestOptions::default();
        let e = from_manifest(&write(t.path(), "a.csv", "path,split\nx.wav,train\n"), &o)
            .unwrap_err()
            .to_string();
        assert!(e.contains("line 2") && e.contains("label"), "{e}");
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
        assert!(e.contains("listed twice"), "{e}");
        let e = from_manifest(&write(t.path(), "d.jsonl", "{\"path\":\"x.wav\",\"label\":\"a\",\"split\":\"t\"}\n{\"path\":\"y.wav\",\"label\":\"a\"}\n"), &o)
            .unwrap_err()
            .to_string();
        assert!(e.contains("1 of 2 rows name a split"), "{e}");
        assert!(from_manifest(&write(t.path(), "e.csv", "path,label\n"), &o).is_err());
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
                "line 3: the label an empty name",
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
    }
}

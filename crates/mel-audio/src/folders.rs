//! Folder trees split and grouped beyond what their folders say: a `ROOT/{class}` tree
//! split by ratio (by group, or by path), a `ROOT/{split}/{class}` tree checked to hold
//! each group in one split.

use std::path::Path;

use mel_core::{Error, Result};

use crate::groups::{self, GroupPattern, Grouping, Ratios};
use crate::scan::{Dataset, FileEntry, Layout, ScannedSplit, scan_layout};

/// How a folder tree's files are split and grouped beyond what its folders say.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct FolderOptions {
    /// Split names and shares for a `ROOT/{class}` tree (default when only a seed or a
    /// group pattern is given: training 0.7, validation 0.2, testing 0.1).
    pub ratios: Option<Vec<(String, f64)>>,
    /// The seed of the split draw (default 0).
    pub seed: Option<u64>,
    /// Each clip's group from its path: stored as the column `group`; a `ROOT/{class}`
    /// tree is split by group, a `ROOT/{split}/{class}` tree is checked to hold each
    /// group in one split.
    pub group: Option<GroupPattern>,
}

/// Scans `root` as [`scan`] does, then splits and groups it by `opts`: a `ROOT/{class}`
/// tree given ratios, a seed or a group pattern is split by a seeded hash of each clip's
/// group (or of its path without one) instead of being one split `all`; a
/// `ROOT/{split}/{class}` tree keeps its splits, refuses ratios, and with a group
/// pattern refuses a group found in two splits.
pub fn scan_with(root: &Path, opts: &FolderOptions) -> Result<Dataset> {
    let refuse = |reason: String| Error::Dataset {
        root: root.to_path_buf(),
        reason,
    };
    let (mut d, layout) = scan_layout(root)?;
    let grouping = opts.group.clone().map(Grouping::Pattern);
    if let Some(Grouping::Pattern(p)) = &grouping {
        let mut files: Vec<&mut FileEntry> = d
            .splits
            .iter_mut()
            .flat_map(|s| s.files.iter_mut())
            .collect();
        groups::add_pattern_column(&mut d.meta_columns, &mut files, p).map_err(refuse)?;
    }
    if let Some(g) = &grouping {
        groups::check_group_spellings(&d, g).map_err(refuse)?;
    }
    let resplit = opts.ratios.is_some() || opts.seed.is_some() || grouping.is_some();
    match layout {
        Layout::Splits if opts.ratios.is_some() || opts.seed.is_some() => Err(refuse(
            "the first-level folders name the splits (ROOT/{split}/{class}); split ratios and a seed apply to a ROOT/{class} tree or a manifest".into(),
        )),
        Layout::Splits => {
            if let Some(g) = &grouping {
                groups::check_groups_disjoint(&d, g).map_err(refuse)?;
            }
            Ok(d)
        }
        Layout::Classes if resplit => {
            let all = d.splits.pop().expect("a tree of classes is one split");
            let defaults = crate::ManifestOptions::default().ratios;
            let ratios = opts.ratios.as_deref().unwrap_or(&defaults);
            let r = Ratios {
                ratios,
                seed: opts.seed.unwrap_or(0),
                key_is: if grouping.is_some() { "its group" } else { "its path" },
            };
            let column = grouping
                .as_ref()
                .map(|g| groups::group_column(&d.meta_columns, g))
                .transpose()
                .map_err(refuse)?;
            let key = groups::file_key(|f| match column {
                Some(c) => std::borrow::Cow::Borrowed(f.meta[c].as_str()),
                None => std::borrow::Cow::Borrowed(f.rel.as_str()),
            });
            let by_split = groups::assign_by_ratio(all.files, &r, key).map_err(refuse)?;
            // A folder that could not be listed is a failure of the first split drawn.
            let mut unreadable = Some(all.unreadable);
            d.splits = by_split
                .into_iter()
                .map(|(name, files)| ScannedSplit {
                    name,
                    files,
                    unreadable: unreadable.take().unwrap_or_default(),
                })
                .collect();
            Ok(d)
        }
        Layout::Classes => Ok(d),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scan::scan;
    use crate::scan::tests::touch;

    /// Speech Commands' names: `WORD/SPEAKER_nohash_N.wav`.
    #[test]
    fn a_tree_of_classes_is_split_by_group_and_a_tree_of_splits_checked() {
        let t = tempfile::tempdir().unwrap();
        for spk in 0..40 {
            for word in ["yes", "no"] {
                for n in 0..2 {
                    touch(t.path(), &format!("flat/{word}/{spk:08x}_nohash_{n}.wav"));
                }
            }
        }
        let pattern = GroupPattern::new(r"([^/]+)_nohash_").unwrap();
        let opts = FolderOptions {
            group: Some(pattern.clone()),
            ..FolderOptions::default()
        };
        let d = scan_with(&t.path().join("flat"), &opts).unwrap();
        assert_eq!(d.meta_columns, ["group"]);
        let names: Vec<&str> = d.splits.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, ["testing", "training", "validation"]);
        let mut split_of = std::collections::HashMap::new();
        for s in &d.splits {
            assert!(s.files.windows(2).all(|w| w[0].rel < w[1].rel), "sorted");
            for f in &s.files {
                assert_eq!(f.rel.split('/').nth(1).unwrap()[..8], f.meta[0]);
                let first = split_of.entry(f.meta[0].clone()).or_insert(&s.name);
                assert_eq!(*first, &s.name);
            }
        }
        assert_eq!(split_of.len(), 40);
        // Ratios without groups split a tree of classes by path; nothing given keeps `all`.
        let by_ratio = FolderOptions {
            ratios: Some(vec![("a".into(), 0.5), ("b".into(), 0.5)]),
            ..FolderOptions::default()
        };
        let d = scan_with(&t.path().join("flat"), &by_ratio).unwrap();
        assert_eq!(d.splits.len(), 2);
        assert!(d.meta_columns.is_empty());
        let d = scan_with(&t.path().join("flat"), &FolderOptions::default()).unwrap();
        assert_eq!(d, scan(&t.path().join("flat")).unwrap());
        // A tree that names its splits keeps them, refuses ratios, and refuses a leak.
        touch(t.path(), "named/training/yes/aa_nohash_0.wav");
        touch(t.path(), "named/testing/yes/bb_nohash_0.wav");
        scan_with(&t.path().join("named"), &opts).unwrap();
        let e = scan_with(&t.path().join("named"), &by_ratio)
            .unwrap_err()
            .to_string();
        assert!(e.contains("first-level folders name the splits"), "{e}");
        touch(t.path(), "named/testing/no/aa_nohash_1.wav");
        let e = scan_with(&t.path().join("named"), &opts)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("the group \"aa\" has clips in the splits")
                && e.contains("testing/no/aa_nohash_1.wav")
                && e.contains("training/yes/aa_nohash_0.wav"),
            "{e}"
        );
        touch(t.path(), "named/testing/no/stray.wav");
        let e = scan_with(&t.path().join("named"), &opts)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("finds no group in \"testing/no/stray.wav\""),
            "{e}"
        );
    }
}

//! What a split's file says, checked before the split is used (the HDF5 gate and the npy
//! header parser check the file's structure; these check its contents): `mel`'s shape,
//! every label naming a class, paths and class names no longer than melctl writes and no
//! class named twice, and statistics a normalisation can use.

use std::path::Path;

use mel_core::{Config, MelPlan, Result};

use super::Split;
use crate::limits::{MAX_LABEL_NAME_BYTES, MAX_PATH_BYTES, MAX_VALUES_PER_CLIP, bad};

/// Refuses paths and class names longer than melctl writes, and a class named twice: a
/// tampered 300 MB path took `show` half an hour to lay out as a title, and two classes
/// of one name cannot be told apart.
pub(super) fn check_strings(split: &Split) -> Result<()> {
    if let Some(i) = split.paths.iter().position(|p| p.len() > MAX_PATH_BYTES) {
        return Err(bad(
            &split.path,
            format!(
                "path {i} is {} bytes long, more than the {MAX_PATH_BYTES} melctl writes",
                split.paths[i].len()
            ),
        ));
    }
    let names = &split.label_names;
    if let Some(i) = names.iter().position(|n| n.len() > MAX_LABEL_NAME_BYTES) {
        return Err(bad(
            &split.path,
            format!(
                "label name {i} is {} bytes long, more than the {MAX_LABEL_NAME_BYTES} melctl writes",
                names[i].len()
            ),
        ));
    }
    let mut first = std::collections::HashMap::new();
    for (i, n) in names.iter().enumerate() {
        if let Some(j) = first.insert(n.as_str(), i) {
            return Err(bad(
                &split.path,
                format!("label names {j} and {i} are both {n:?}: each class has one name"),
            ));
        }
    }
    Ok(())
}

/// Refuses stored statistics no normalisation can use ([`mel_core::stats::MelStats::unusable`]; melctl
/// writes none such).
pub(super) fn check_stats(split: &Split) -> Result<()> {
    match split.stats.as_ref().and_then(|s| s.unusable()) {
        Some(why) => Err(bad(
            &split.path,
            format!("its stored statistics cannot be used: {why}"),
        )),
        None => Ok(()),
    }
}

/// Checks `mel`'s shape: at least `[clips, n_mels, frames]`, every axis after the first
/// non-empty, clips of at most [`MAX_VALUES_PER_CLIP`] values (every per-item buffer is
/// sized from one), and a byte size that fits in memory arithmetic.
pub(super) fn check_shape(path: &Path, shape: &[usize], elem: usize) -> Result<u64> {
    if shape.len() < 3 {
        return Err(bad(
            path,
            format!("mel has shape {shape:?}; at least [clips, n_mels, frames] is expected"),
        ));
    }
    if shape[1..].contains(&0) {
        return Err(bad(
            path,
            format!("mel has shape {shape:?}, with an empty axis"),
        ));
    }
    let per_clip = shape[1..]
        .iter()
        .try_fold(1u64, |a, &d| a.checked_mul(d as u64))
        .unwrap_or(u64::MAX);
    if per_clip > MAX_VALUES_PER_CLIP as u64 {
        return Err(bad(
            path,
            format!(
                "mel's shape {shape:?} gives clips of {per_clip} values, more than the {MAX_VALUES_PER_CLIP} melctl writes"
            ),
        ));
    }
    shape
        .iter()
        .try_fold(elem as u64, |a, &d| a.checked_mul(d as u64))
        .filter(|&b| b <= isize::MAX as u64)
        .ok_or_else(|| bad(path, format!("mel's shape {shape:?} overflows")))
}

/// Refuses a label outside `0..classes` (a class id with no name).
pub(super) fn check_labels(path: &Path, labels: &[i64], classes: usize) -> Result<()> {
    if let Some((i, &l)) = labels
        .iter()
        .enumerate()
        .find(|&(_, &l)| l < 0 || l as u64 >= classes as u64)
    {
        return Err(bad(
            path,
            format!("clip {i} has label {l}, outside the {classes} label names"),
        ));
    }
    Ok(())
}

/// Refuses a split whose own words contradict it: a `split` name that is not a valid
/// name, or that differs from the name its folder's build record gives this file (a file
/// put in another split's place); a stored configuration that is not one melctl reads,
/// or whose clips are not the shape `mel` holds (readers extract, compare and merge by
/// it). A file outside a recorded folder keeps its own name: a copy may be renamed.
/// Returns the plan of the stored configuration, where there is one.
pub(super) fn check_self_description(split: &Split) -> Result<Option<MelPlan>> {
    if let Err(why) = mel_core::format::check_name(&split.name) {
        return Err(bad(&split.path, format!("its split name {why}")));
    }
    if let Some((dir, named, _)) = mel_core::record::split_of(&split.path)
        && let Ok(Some(record)) = mel_core::record::read(&dir)
        && record.splits.contains_key(&named)
        && split.name != named
    {
        return Err(bad(
            &split.path,
            format!(
                "says it is split {:?}, but {} records it as split {named:?}",
                split.name,
                mel_core::record::path(&dir).display()
            ),
        ));
    }
    let Some(stored) = &split.config else {
        return Ok(None);
    };
    let config: Config = serde_json::from_value(stored.clone()).map_err(|e| {
        bad(
            &split.path,
            format!("its stored configuration is not one melctl reads: {e}"),
        )
    })?;
    let plan = MelPlan::new(&config.spec()).map_err(|e| {
        bad(
            &split.path,
            format!("its stored configuration does not hold: {e}"),
        )
    })?;
    if plan.clip_shape() != split.clip_shape() {
        return Err(bad(
            &split.path,
            format!(
                "its stored configuration gives clips of shape {:?}, but mel holds clips of {:?}",
                plan.clip_shape(),
                split.clip_shape()
            ),
        ));
    }
    Ok(Some(plan))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shapes_are_checked() {
        let p = Path::new("x.h5");
        assert!(check_shape(p, &[3, 32, 5], 2).is_ok());
        assert!(check_shape(p, &[3, 5], 2).is_err());
        assert!(check_shape(p, &[3, 0, 5], 2).is_err());
        assert!(check_shape(p, &[usize::MAX, 79, 3, 32, 5], 2).is_err());
        assert_eq!(check_shape(p, &[0, 79, 3, 32, 5], 2).unwrap(), 0);
        // A clip larger than melctl writes, even with one clip and a file that long.
        let e = check_shape(p, &[1, 1, 1, 32, 1_000_000_000], 4).unwrap_err();
        assert!(e.to_string().contains("32000000000 values"), "{e}");
        assert!(check_shape(p, &[1, 1, 1 << 28], 4).is_ok());
        assert!(check_shape(p, &[1, 1, (1 << 28) + 1], 4).is_err());
    }
}

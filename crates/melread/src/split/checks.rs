//! What a split's file says, checked before the split is used (the HDF5 gate and the npy
//! header parser check the file's structure; these check its contents): `mel`'s shape,
//! every label naming a class, paths and class names no longer than melctl writes and no
//! class named twice, and statistics a normalisation can use.

use std::path::Path;

use mel_core::Result;

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

/// `v` as a person reads it: plain, or in exponent form when very large or small.
fn shown(v: f64) -> String {
    if v == 0.0 || !v.is_finite() || (1e-4..1e6).contains(&v.abs()) {
        format!("{v}")
    } else {
        format!("{v:e}")
    }
}

/// Refuses stored statistics no normalisation can use: a mean that is not finite, or a
/// standard deviation that is not finite or is negative (melctl writes neither).
pub(super) fn check_stats(split: &Split) -> Result<()> {
    let Some(stats) = &split.stats else {
        return Ok(());
    };
    let bad_bin = |name: &str, values: &[f64], ok: fn(f64) -> bool| -> Result<()> {
        match values.iter().position(|&v| !ok(v)) {
            Some(bin) => Err(bad(
                &split.path,
                format!(
                    "{name}[{bin}] is {}, which statistics cannot be",
                    shown(values[bin])
                ),
            )),
            None => Ok(()),
        }
    };
    // Normalising computes (x - mean) * (1 / std) in f32: both must be finite there.
    bad_bin("mel_mean", &stats.mean, |v| (v as f32).is_finite())?;
    bad_bin("mel_std", &stats.std, |v| {
        v.is_finite() && (v == 0.0 || (v > 0.0 && ((1.0 / v) as f32).is_finite()))
    })
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

//! What a reader lets a file claim: the bounds on every size it takes from a file, the
//! check that bytes a file points at lie inside it, and the error that refuses a file.
//! The bottom of the crate: the HDF5 gate ([`crate::h5file`]) and the split's openers
//! build on it, and it uses no other module of the crate.

use std::path::Path;

use mel_core::{Error, Result};

/// The most values one clip may hold (melctl writes no more): every buffer sized from a
/// clip is bounded by this, whatever a file claims.
pub const MAX_VALUES_PER_CLIP: usize = mel_core::plan::MAX_VALUES_PER_CLIP;

/// The largest `meta.json` read (it lists every clip's path).
pub const MAX_META_BYTES: u64 = 1 << 30;

/// The largest chunk (after inflating) the reader decodes: the writer's bound.
pub const MAX_CHUNK_BYTES: usize = mel_core::format::MAX_CHUNK_BYTES;

/// The longest clip path melctl stores (Linux's `PATH_MAX`).
pub const MAX_PATH_BYTES: usize = 4096;

/// The longest class name melctl stores (its name check's limit).
pub const MAX_LABEL_NAME_BYTES: usize = mel_core::format::MAX_NAME_BYTES;

/// A file refused: the dataset error naming it and saying why.
pub(crate) fn bad(path: &Path, reason: impl Into<String>) -> Error {
    Error::Dataset {
        root: path.to_path_buf(),
        reason: reason.into(),
    }
}

/// Refuses `len` bytes at `offset` that do not lie inside a file of `file_len` bytes.
pub(crate) fn check_extent(
    path: &Path,
    what: &str,
    offset: u64,
    len: u64,
    file_len: u64,
) -> Result<()> {
    match offset.checked_add(len) {
        Some(end) if end <= file_len => Ok(()),
        _ => Err(bad(
            path,
            format!(
                "truncated or corrupt: {what} spans bytes {offset}..{} but the file has {file_len} bytes",
                offset as u128 + len as u128
            ),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn extents_beyond_the_file_are_refused() {
        let p = Path::new("x.npy");
        assert!(check_extent(p, "data", 10, 90, 100).is_ok());
        let e = check_extent(p, "data", 10, 91, 100)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("truncated or corrupt") && e.contains("10..101"),
            "{e}"
        );
        assert!(check_extent(p, "data", u64::MAX, 2, 100).is_err());
    }
}

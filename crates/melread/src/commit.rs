//! Which build a split comes from, checked when it is opened: a split whose build id
//! the folder's build record (`melctl-build.json`, [`mel_core::record`]) does not name is
//! refused, so splits of two builds (a build killed while publishing) are never read as
//! one dataset. A folder without a record (a copied file, an older melctl) is read as
//! it is.

use std::path::Path;

use mel_core::format::h5::BUILD_ID;
use mel_core::{Error, Result, record};

use crate::limits::MAX_META_BYTES;

/// The build id stored in the split output at `path` (HDF5 root attribute `build_id`,
/// or `build_id` in an npy folder's `meta.json`); `None` when it has none. An output
/// that does not open is an error (the caller's own opening explains it better).
pub fn stored_build(path: &Path) -> Result<Option<String>> {
    let bad = |reason: String| Error::Dataset {
        root: path.to_path_buf(),
        reason,
    };
    if path.is_dir() {
        let meta = path.join(mel_core::format::NPY_META);
        let bytes = mel_core::input::read_bounded(&meta, MAX_META_BYTES)
            .map_err(|e| Error::read(&meta, e))?;
        let m: serde_json::Value = serde_json::from_slice(&bytes)
            .map_err(|e| bad(format!("meta.json is not valid JSON: {e}")))?;
        return Ok(m.get(BUILD_ID).and_then(|v| v.as_str()).map(str::to_string));
    }
    // Opened like every other HDF5 input: a regular file without blocking, links refused.
    let input = crate::h5file::H5Input::open(path)?;
    let Ok(attr) = input.h5.attr(BUILD_ID) else {
        return Ok(None);
    };
    input.check_attr(&attr, BUILD_ID)?;
    let id: hdf5::types::VarLenUnicode = attr
        .read_scalar()
        .map_err(|e| bad(format!("its build_id attribute does not read: {e}")))?;
    crate::h5file::text(id.as_bytes())
        .map(Some)
        .ok_or_else(|| bad("its build_id attribute is not UTF-8 text".into()))
}

/// Refuses the split output at `path` when its folder's build record does not name the
/// build it carries (see [`mel_core::record::check`]). Cheap when the folder has no
/// record; an output that does not open is left to the caller's opening to report.
pub fn check(path: &Path) -> Result<()> {
    let Some((dir, _, _)) = record::split_of(path) else {
        return Ok(());
    };
    if std::fs::symlink_metadata(record::path(&dir)).is_err() {
        return Ok(());
    }
    match stored_build(path) {
        Ok(stored) => record::check(path, stored.as_deref()),
        Err(_) => Ok(()),
    }
}

/// Whether the split output at `path` is the one build `build_id` published: it carries
/// that id and its folder's record names it. An error saying what differs otherwise.
pub fn verify_published(path: &Path, build_id: &str) -> Result<()> {
    let stored = stored_build(path)?;
    if stored.as_deref() != Some(build_id) {
        return Err(Error::Dataset {
            root: path.to_path_buf(),
            reason: format!(
                "holds build {}, not build {build_id}",
                stored.as_deref().unwrap_or("(none)")
            ),
        });
    }
    record::check(path, stored.as_deref())
}

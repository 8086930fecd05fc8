//! Atomic output: write under a temporary name beside the final path, then rename.

use std::path::{Path, PathBuf};

use mel_core::{Error, Result};

/// A temporary path in the same folder as `final_path` (so the rename is atomic),
/// hidden and unmistakably partial: `.NAME.partial-PID`.
pub fn temp_path_for(final_path: &Path) -> PathBuf {
    let name = final_path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    final_path.with_file_name(format!(".{name}.partial-{}", std::process::id()))
}

/// Flushes `temp` to disk and renames it to `final_path`, then syncs the folder.
pub fn commit(temp: &Path, final_path: &Path) -> Result<()> {
    let f = std::fs::File::open(temp).map_err(|e| Error::io(temp, e))?;
    f.sync_all().map_err(|e| Error::io(temp, e))?;
    std::fs::rename(temp, final_path).map_err(|e| Error::io(final_path, e))?;
    if let Some(dir) = final_path.parent()
        && let Ok(d) = std::fs::File::open(if dir.as_os_str().is_empty() {
            Path::new(".")
        } else {
            dir
        })
    {
        let _ = d.sync_all();
    }
    Ok(())
}

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

/// Removes what killed runs left beside `final_path`: `.NAME.partial-PID` files or folders
/// whose process no longer exists (a SIGKILL leaves its temporary output behind; it
/// never appears at the final path). Returns how many were removed.
pub fn remove_stale_partials(final_path: &Path) -> usize {
    let Some(name) = final_path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
    else {
        return 0;
    };
    let dir = match final_path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    let prefix = format!(".{name}.partial-");
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    let mut removed = 0;
    for e in entries.flatten() {
        let file = e.file_name().to_string_lossy().into_owned();
        let Some(pid) = file
            .strip_prefix(&prefix)
            .and_then(|p| p.parse::<u32>().ok())
        else {
            continue;
        };
        let alive = pid == std::process::id() || Path::new(&format!("/proc/{pid}")).exists();
        if !alive {
            let p = e.path();
            let ok = if p.is_dir() {
                std::fs::remove_dir_all(&p)
            } else {
                std::fs::remove_file(&p)
            };
            removed += usize::from(ok.is_ok());
        }
    }
    removed
}

/// Renames `temp` to `final_path`. With `durable`, first flushes `temp` to disk and
/// afterwards syncs the folder, so the output survives a power loss too; without, a
/// killed process still never leaves a partial file at `final_path` (the rename happens
/// only after every byte was written), but a crash of the machine might.
pub fn commit(temp: &Path, final_path: &Path, durable: bool) -> Result<()> {
    if !durable {
        return std::fs::rename(temp, final_path).map_err(|e| Error::io(final_path, e));
    }
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

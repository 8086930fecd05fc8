//! Where the memmap loader keeps decoded audio when the configuration names no folder.

use std::ffi::OsStr;
use std::path::PathBuf;

/// The default cache folder, from the caller's environment values: `$XDG_CACHE_HOME/melctl`,
/// else `$HOME/.cache/melctl`, else this user's own folder in the system's temporary
/// folder (`melctl-cache-UID`, mode 0700, refused unless it is a private folder of this
/// user): a shared, predictable `/tmp/melctl-cache` could be made first by another user,
/// who would then serve this user's decoded audio. Empty values count as unset.
pub fn default_cache_dir(
    xdg_cache_home: Option<&OsStr>,
    home: Option<&OsStr>,
) -> mel_core::Result<PathBuf> {
    if let Some(x) = xdg_cache_home.filter(|x| !x.is_empty()) {
        return Ok(PathBuf::from(x).join("melctl"));
    }
    if let Some(h) = home.filter(|h| !h.is_empty()) {
        return Ok(PathBuf::from(h).join(".cache").join("melctl"));
    }
    use std::os::unix::fs::{DirBuilderExt, MetadataExt};
    // SAFETY: getuid has no preconditions.
    let uid = unsafe { libc::getuid() };
    let dir = std::env::temp_dir().join(format!("melctl-cache-{uid}"));
    let _ = std::fs::DirBuilder::new().mode(0o700).create(&dir);
    let m = std::fs::symlink_metadata(&dir).map_err(|e| mel_core::Error::io(&dir, e))?;
    if !m.is_dir() || m.uid() != uid || m.mode() & 0o077 != 0 {
        return Err(mel_core::Error::config(
            "run.cache_dir",
            format!(
                "{}: the default cache folder (no HOME or XDG_CACHE_HOME) is not a private folder of this user; name one",
                dir.display()
            ),
        ));
    }
    Ok(dir)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn xdg_then_home_then_a_private_temporary_folder() {
        let x = default_cache_dir(Some(OsStr::new("/x")), Some(OsStr::new("/h"))).unwrap();
        assert_eq!(x, PathBuf::from("/x/melctl"));
        let h = default_cache_dir(Some(OsStr::new("")), Some(OsStr::new("/h"))).unwrap();
        assert_eq!(h, PathBuf::from("/h/.cache/melctl"));
        let t = default_cache_dir(None, None).unwrap();
        assert!(t.starts_with(std::env::temp_dir()), "{}", t.display());
        use std::os::unix::fs::MetadataExt;
        assert_eq!(std::fs::metadata(&t).unwrap().mode() & 0o077, 0);
    }
}

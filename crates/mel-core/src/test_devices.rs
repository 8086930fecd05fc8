//! Device nodes made inside a test's own folder: tests run as root, and none may write to
//! a real system path such as `/dev/null` (a bug in what is tested would replace it).

use std::path::{Path, PathBuf};

/// A character device `major:minor` made at `dir/name` (1:3 is the null device, 1:7 the
/// full one), or `None`, with the reason printed, where `mknod` is refused (not root).
pub(crate) fn char_device(dir: &Path, name: &str, major: u32, minor: u32) -> Option<PathBuf> {
    let path = dir.join(name);
    let c = std::ffi::CString::new(path.to_str()?).ok()?;
    // SAFETY: a valid NUL-terminated path; mknod has no other precondition.
    let made = unsafe {
        libc::mknod(
            c.as_ptr(),
            libc::S_IFCHR | 0o666,
            libc::makedev(major, minor),
        )
    };
    if made != 0 {
        println!(
            "skipped the device part: mknod {}: {} (needs root)",
            path.display(),
            std::io::Error::last_os_error()
        );
        return None;
    }
    Some(path)
}

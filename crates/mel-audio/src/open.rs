//! Opening input files safely: only regular files (links followed) are read, and opening
//! never blocks (a FIFO named `x.wav` would block a plain `open` until a writer came, and
//! an interrupt could not stop it).

use std::fs::{File, OpenOptions};
use std::path::Path;

/// Opens `path` for reading: `O_NONBLOCK` (so opening a FIFO or device returns at once),
/// `O_NOATIME` when asked and allowed (no access-time write per file), then refuses
/// anything that is not a regular file, saying what it is.
pub fn open_input(path: &Path, noatime: bool) -> std::io::Result<File> {
    let f = open_flags(path, noatime)?;
    let kind = f.metadata()?.file_type();
    if !kind.is_file() {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            format!("not a regular file ({})", describe(kind)),
        ));
    }
    Ok(f)
}

#[cfg(target_os = "linux")]
fn open_flags(path: &Path, noatime: bool) -> std::io::Result<File> {
    use std::os::unix::fs::OpenOptionsExt;
    let open = |flags| OpenOptions::new().read(true).custom_flags(flags).open(path);
    if noatime && let Ok(f) = open(libc::O_NONBLOCK | libc::O_NOATIME) {
        return Ok(f);
    }
    // O_NOATIME is refused for files another user owns.
    open(libc::O_NONBLOCK)
}

#[cfg(all(unix, not(target_os = "linux")))]
fn open_flags(path: &Path, _noatime: bool) -> std::io::Result<File> {
    use std::os::unix::fs::OpenOptionsExt;
    OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)
}

fn describe(kind: std::fs::FileType) -> &'static str {
    use std::os::unix::fs::FileTypeExt;
    if kind.is_dir() {
        "a folder"
    } else if kind.is_fifo() {
        "a FIFO"
    } else if kind.is_socket() {
        "a socket"
    } else if kind.is_char_device() {
        "a character device"
    } else if kind.is_block_device() {
        "a block device"
    } else {
        "not a file"
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fifo_a_folder_and_a_device_are_refused_without_blocking() {
        let t = tempfile::tempdir().unwrap();
        let fifo = t.path().join("x.wav");
        let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
        // SAFETY: a valid NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o644) }, 0);
        let e = open_input(&fifo, true).unwrap_err();
        assert!(e.to_string().contains("a FIFO"), "{e}");
        let e = open_input(t.path(), true).unwrap_err();
        assert!(e.to_string().contains("a folder"), "{e}");
        let e = open_input(Path::new("/dev/null"), false).unwrap_err();
        assert!(e.to_string().contains("character device"), "{e}");
        let f = t.path().join("ok.wav");
        std::fs::write(&f, b"x").unwrap();
        assert!(open_input(&f, true).is_ok());
    }
}

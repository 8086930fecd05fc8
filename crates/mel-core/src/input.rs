//! Opening and reading input files safely: only regular files (links followed) are read,
//! opening never blocks (a FIFO named `x.wav` or `config.toml` would block a plain `open`
//! until a writer came), and a whole-file read is bounded by what is actually read, never
//! by `st_size` (a device or a file that grows would otherwise be read without end).

use std::fs::{File, OpenOptions};
use std::io::Read;
use std::path::Path;

/// Opens `path` for reading: `O_NONBLOCK` (so opening a FIFO or device returns at once),
/// `O_NOATIME` when asked and allowed (no access-time write per file), then refuses
/// anything that is not a regular file, saying what it is.
pub fn open_regular(path: &Path, noatime: bool) -> std::io::Result<File> {
    // A socket cannot be opened at all (ENXIO, "No such device or address"): say what
    // is there instead.
    let f = open_flags(path, noatime).map_err(|e| match std::fs::metadata(path) {
        Ok(m) if !m.is_file() && e.raw_os_error() == Some(libc::ENXIO) => std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            format!("not a regular file ({})", describe(m.file_type())),
        ),
        _ => e,
    })?;
    let kind = f.metadata()?.file_type();
    if !kind.is_file() {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            format!("not a regular file ({})", describe(kind)),
        ));
    }
    Ok(f)
}

/// The whole of the regular file at `path`, refused (`InvalidData`, naming the limit) when
/// it holds more than `max_bytes`. The bound is enforced on the bytes read, so a file that
/// grows while it is read cannot exceed it either.
pub fn read_bounded(path: &Path, max_bytes: u64) -> std::io::Result<Vec<u8>> {
    let f = open_regular(path, false)?;
    let claimed = f.metadata()?.len();
    let too_big = || {
        std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!("larger than the limit of {max_bytes} bytes for this kind of file"),
        )
    };
    if claimed > max_bytes {
        return Err(too_big());
    }
    let mut bytes = Vec::with_capacity(claimed as usize);
    f.take(max_bytes + 1).read_to_end(&mut bytes)?;
    if bytes.len() as u64 > max_bytes {
        return Err(too_big());
    }
    Ok(bytes)
}

/// [`read_bounded`] as UTF-8 text (`InvalidData` naming the byte offset otherwise).
pub fn read_bounded_text(path: &Path, max_bytes: u64) -> std::io::Result<String> {
    String::from_utf8(read_bounded(path, max_bytes)?).map_err(|e| {
        std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!("not UTF-8 text (byte {})", e.utf8_error().valid_up_to()),
        )
    })
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

/// What a file type is, in words ("a FIFO", "a folder", ...).
pub fn describe(kind: std::fs::FileType) -> &'static str {
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
    } else if kind.is_file() {
        "a regular file"
    } else {
        "not a file"
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mkfifo(path: &Path) {
        let c = std::ffi::CString::new(path.to_str().unwrap()).unwrap();
        // SAFETY: a valid NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o644) }, 0);
    }

    #[test]
    fn a_fifo_a_folder_and_a_device_are_refused_without_blocking() {
        let t = tempfile::tempdir().unwrap();
        let fifo = t.path().join("x.wav");
        mkfifo(&fifo);
        let e = open_regular(&fifo, true).unwrap_err();
        assert!(e.to_string().contains("a FIFO"), "{e}");
        let e = read_bounded(&fifo, 10).unwrap_err();
        assert!(e.to_string().contains("a FIFO"), "{e}");
        let e = open_regular(t.path(), true).unwrap_err();
        assert!(e.to_string().contains("a folder"), "{e}");
        let e = open_regular(Path::new("/dev/null"), false).unwrap_err();
        assert!(e.to_string().contains("character device"), "{e}");
        // /dev/zero would be read without end if the bound trusted st_size (0).
        let e = read_bounded(Path::new("/dev/zero"), 1 << 20).unwrap_err();
        assert!(e.to_string().contains("character device"), "{e}");
        // A socket is named as one (opening it fails with ENXIO, "No such device").
        let sock = t.path().join("s.wav");
        let _listener = std::os::unix::net::UnixListener::bind(&sock).unwrap();
        let e = open_regular(&sock, true).unwrap_err();
        assert!(
            e.to_string().contains("not a regular file (a socket)"),
            "{e}"
        );
        let f = t.path().join("ok.wav");
        std::fs::write(&f, b"x").unwrap();
        assert!(open_regular(&f, true).is_ok());
    }

    #[test]
    fn a_read_is_bounded_by_the_bytes_read_and_text_must_be_utf8() {
        let t = tempfile::tempdir().unwrap();
        let f = t.path().join("m.csv");
        std::fs::write(&f, b"0123456789").unwrap();
        assert_eq!(read_bounded(&f, 10).unwrap(), b"0123456789");
        let e = read_bounded(&f, 9).unwrap_err();
        assert!(e.to_string().contains("limit of 9 bytes"), "{e}");
        assert_eq!(read_bounded_text(&f, 10).unwrap(), "0123456789");
        std::fs::write(&f, b"ab\xffcd").unwrap();
        let e = read_bounded_text(&f, 10).unwrap_err();
        assert!(e.to_string().contains("byte 2"), "{e}");
    }
}

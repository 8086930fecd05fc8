//! One way to report a failed write of an output, whoever made the write (our positioned
//! writes, or the HDF5 library's): the output's path, what was being written, and the
//! operating system's cause, kept. A full disk or an exhausted quota is called that.

use std::path::Path;

use mel_core::Error;

pub(crate) use mel_core::atomic::{os_cause, write_failed};

/// The error of an HDF5 library call that failed doing `what` to the output `path`: when
/// the library's error stack holds the operating system's error number (its file
/// drivers record `errno = N` for a failed read, write or truncate), that cause leads,
/// so a full disk is reported as one; otherwise the library's own message.
pub(crate) fn hdf5_failed(path: &Path, what: &str, e: &hdf5::Error) -> Error {
    match os_error_in(e) {
        Some(os) => Error::output(path, format!("{what}: {} (HDF5: {e})", os_cause(&os))),
        None => Error::output(path, format!("{what}: {e}")),
    }
}

/// The operating system error recorded in an HDF5 error stack, if any.
fn os_error_in(e: &hdf5::Error) -> Option<std::io::Error> {
    let stack = e.stack()?;
    stack.iter().find_map(|frame| errno_in(frame.desc()))
}

/// `N` of the first `errno = N` in `text`.
fn errno_in(text: &str) -> Option<std::io::Error> {
    let (_, rest) = text.split_once("errno = ")?;
    let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
    let n: i32 = digits.parse().ok()?;
    (n > 0).then(|| std::io::Error::from_raw_os_error(n))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_os_error_is_found_in_an_hdf5_error_stack() {
        let text = "H5FD__sec2_write(): file write failed: time = Mon, filename = 'x.h5', file descriptor = 5, errno = 28, error message = 'No space left on device', buf = 0x1";
        assert_eq!(errno_in(text).unwrap().raw_os_error(), Some(28));
        assert!(errno_in("no number here").is_none());
        assert!(errno_in("errno = 0").is_none());
    }
}

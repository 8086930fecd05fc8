//! Opening input files safely: the one implementation lives in [`mel_core::input`].

pub use mel_core::input::open_regular;

/// Opens `path` for reading without blocking, refusing anything but a regular file
/// (see [`mel_core::input::open_regular`]).
pub fn open_input(path: &std::path::Path, noatime: bool) -> std::io::Result<std::fs::File> {
    open_regular(path, noatime)
}

//! Where a split's `mel` bytes are and how they are got: a read-only map or positioned
//! reads of contiguous bytes, chunks decoded by this crate ([`ChunkStore`]), or the HDF5
//! library.

use std::fs::File;
use std::path::Path;

use mel_core::{Dtype, Error, Result};
use ndarray::ArrayD;

use super::chunks::ChunkStore;
use super::{Access, ReadMode, Split};
use crate::limits::bad;

/// Where `mel`'s bytes are, chosen at open ([`Access`] names it).
pub(super) enum Store {
    /// `map[start..]` holds the data; `guard` records a fault in it (a truncated file),
    /// `file` what the file was when it was mapped.
    Map {
        map: memmap2::Mmap,
        start: usize,
        guard: crate::sigbus::MapGuard,
        file: Mapped,
    },
    /// The data starts at `base` in `file`.
    Pread { file: File, base: u64 },
    /// Chunked (every chunk present), decoded here.
    Chunks(ChunkStore),
    /// The HDF5 library.
    Library(Library),
}

/// A mapped file as it was mapped: a change since shows in its length or its time of
/// modification. A fault shows only a truncation across a page; one within the map's last
/// page leaves that page readable, its cut bytes zeros, and an overwrite in place changes
/// the bytes under the map with no fault at all.
pub(super) struct Mapped {
    file: File,
    /// The length the mapped bytes need (where `mel`'s bytes end).
    end: u64,
    modified: Option<std::time::SystemTime>,
}

impl Mapped {
    /// Whether the file is shorter than the mapped bytes need or was modified since it
    /// was mapped (or can no longer be looked at).
    pub(super) fn changed(&self) -> bool {
        match self.file.metadata() {
            Ok(now) => now.len() < self.end || now.modified().ok() != self.modified,
            Err(_) => true,
        }
    }
}

/// The HDF5 library's error while reading `what` of `path`, as an error naming the file.
pub(super) fn h5err(path: &Path, what: &str) -> impl Fn(hdf5::Error) -> Error {
    let path = path.to_path_buf();
    let what = what.to_string();
    move |e| bad(&path, format!("{what}: {e}"))
}

/// Reads items through the HDF5 library.
pub(super) struct Library {
    /// The dataset, opened through the gate.
    pub(super) mel: hdf5::Dataset,
}

impl Library {
    /// Reads an item into `out` as little-endian bytes of the stored dtype.
    pub(super) fn read(
        &self,
        split: &Split,
        clip: usize,
        segment: Option<usize>,
        out: &mut Vec<u8>,
    ) -> Result<()> {
        use hdf5::{Hyperslab, SliceOrIndex};
        let mut sel = vec![SliceOrIndex::Index(clip)];
        let seg_dims = &split.shape[1..split.shape.len() - 2];
        match segment {
            Some(mut s) => {
                let mut idx = vec![0; seg_dims.len()];
                for (k, &d) in seg_dims.iter().enumerate().rev() {
                    idx[k] = s % d;
                    s /= d;
                }
                sel.extend(idx.into_iter().map(SliceOrIndex::Index));
            }
            None => sel.extend(seg_dims.iter().map(|_| SliceOrIndex::from(..))),
        }
        sel.push(SliceOrIndex::from(..));
        sel.push(SliceOrIndex::from(..));
        let slab = Hyperslab::from(sel);
        let err = h5err(&split.path, "reading mel through the HDF5 library");
        let reader = self.mel.as_reader();
        out.clear();
        match split.dtype {
            Dtype::F32 => {
                let a: ArrayD<f32> = reader.read_slice(slab).map_err(err)?;
                out.extend(a.iter().flat_map(|v| v.to_le_bytes()));
            }
            Dtype::F16 => {
                let a: ArrayD<half::f16> = reader.read_slice(slab).map_err(err)?;
                out.extend(a.iter().flat_map(|v| v.to_le_bytes()));
            }
            Dtype::Bf16 => {
                let a: ArrayD<u16> = reader.read_slice(slab).map_err(err)?;
                out.extend(a.iter().flat_map(|v| v.to_le_bytes()));
            }
        }
        Ok(())
    }
}

/// Opens the contiguous bytes `[offset, offset + len)` of `file` (`path`, already checked
/// to hold them) for mapping or positioned reads.
pub(super) fn contiguous(
    path: &Path,
    file: File,
    offset: u64,
    len: u64,
    mode: ReadMode,
) -> Result<(Access, Store)> {
    if mode == ReadMode::Pread || len == 0 {
        return Ok((Access::Pread, Store::Pread { file, base: offset }));
    }
    let page = page_size();
    let aligned = offset - offset % page;
    let start = (offset - aligned) as usize;
    let map_len = usize::try_from(len + start as u64).map_err(|_| {
        Error::limit(
            path.display().to_string(),
            "mel is larger than the address space",
        )
    })?;
    // SAFETY: a read-only, private map of bytes checked at open to lie inside the file.
    // Mapped memory can still change under us if another process writes to or truncates
    // the file (reads then see the new bytes, or the process gets SIGBUS). melctl never
    // writes to a published output: it writes a new file and renames it over the old
    // one, which leaves this mapping on the old, unchanged inode. Every access slices
    // `[start + offset, start + offset + len)` with an item range checked against the
    // dataset's shape, inside the mapped length.
    let map = unsafe {
        memmap2::MmapOptions::new()
            .offset(aligned)
            .len(map_len)
            .map(&file)
    }
    .map_err(|e| Error::read(path, e))?;
    let guard = crate::sigbus::MapGuard::new(map.as_ptr(), map.len());
    let modified = file
        .metadata()
        .map_err(|e| Error::read(path, e))?
        .modified()
        .ok();
    let file = Mapped {
        file,
        end: offset + len,
        modified,
    };
    Ok((
        Access::Map,
        Store::Map {
            map,
            start,
            guard,
            file,
        },
    ))
}

/// The system's page size (map offsets are aligned to it).
fn page_size() -> u64 {
    // SAFETY: sysconf has no preconditions.
    let p = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    if p > 0 { p as u64 } else { 4096 }
}

//! The one gate between an HDF5 file and everything that reads it. A file is opened only
//! if it is a regular file (without blocking: a FIFO named `x.h5` is refused at once),
//! and the HDF5 library opens that same file through its descriptor, so what was checked
//! is what is read. Every dataset is checked here before anything reads it:
//!
//! - it is reached by a hard link: soft links and external links (to another object or
//!   another file) anywhere in the root group are refused, never followed;
//! - its layout is one melctl writes, contiguous or chunked: compact storage, virtual
//!   datasets (values from other files) and external raw storage (values from any host
//!   file, `/etc/passwd` included) are refused;
//! - its filters are ones this crate or the built-in library decodes (shuffle, deflate,
//!   Fletcher-32): an unknown filter is refused rather than looked up as a plugin;
//! - every element has storage inside the file: contiguous bytes within the file's length,
//!   every chunk present (none left to fill values) and within the file, chunks no larger
//!   than [`MAX_CHUNK_BYTES`], and no more logical bytes than the file can hold (times
//!   deflate's largest ratio when deflated).
//!
//! So every allocation a read makes is sized from bytes the file really holds.

use std::fs::File;
use std::path::{Path, PathBuf};

use hdf5::filters::Filter;
use hdf5::plist::dataset_create::Layout;
use hdf5::{IndexType, IterationOrder, LinkType};
use mel_core::{Error, Result};

use crate::limits::{MAX_CHUNK_BYTES, bad, check_extent};

/// Deflate never inflates more than 1032 bytes out of one stored byte; a deflated dataset
/// claiming more than this many times the file's length is refused before it is read.
pub(crate) const MAX_INFLATE_RATIO: u64 = 1032;

/// An HDF5 file open for reading: the library's handle and this crate's own descriptor
/// of the same (regular) file.
pub(crate) struct H5Input {
    /// The library's handle.
    pub h5: hdf5::File,
    /// The file, for positioned reads and maps of contiguous or chunked bytes.
    pub file: File,
    /// The file's length in bytes.
    pub len: u64,
    path: PathBuf,
}

/// Where a checked dataset's elements are stored.
#[derive(Debug)]
pub(crate) enum Storage {
    /// No elements.
    Empty,
    /// `len` bytes at `offset`, inside the file.
    Contiguous { offset: u64, len: u64 },
    /// Every chunk, present and inside the file.
    Chunked {
        /// The chunk shape.
        chunk: Vec<usize>,
        /// The filter pipeline, in write order.
        filters: Vec<Filter>,
        /// Every stored chunk.
        chunks: Vec<StoredChunk>,
    },
}

/// One stored chunk of a chunked dataset.
#[derive(Debug, Clone)]
pub(crate) struct StoredChunk {
    /// The logical position of its first element.
    pub offset: Vec<u64>,
    /// Its address in the file.
    pub addr: u64,
    /// Its stored (filtered) size in bytes.
    pub size: u64,
    /// Filters skipped for it (bit `k`: the `k`-th filter).
    pub mask: u32,
}

/// A dataset that passed every check, and where its elements are.
pub(crate) struct Checked {
    /// The dataset.
    pub ds: hdf5::Dataset,
    /// Where its elements are.
    pub storage: Storage,
}

impl H5Input {
    /// Opens `path`: a regular file (opened without blocking), then the HDF5 library on
    /// that same file; refuses a root group holding any link that is not a hard link.
    pub fn open(path: &Path) -> Result<H5Input> {
        let file = mel_core::input::open_regular(path, false).map_err(|e| Error::read(path, e))?;
        let len = file.metadata().map_err(|e| Error::read(path, e))?.len();
        // The library opens the descriptor's file, not the name again: a name swapped for
        // a FIFO or another file after the check above is never opened.
        let (name, shown) = library_name(&file, path);
        let h5 = hdf5::File::with_options()
            .with_fapl(|p| p.chunk_cache(10_007, 64 << 20, 1.0))
            .open(&name)
            .map_err(|e| {
                let text = e.to_string().replace(&shown, &path.display().to_string());
                bad(path, format!("cannot be opened as an HDF5 file: {text}"))
            })?;
        let input = H5Input {
            h5,
            file,
            len,
            path: path.to_path_buf(),
        };
        input.refuse_links(&input.h5, "the root group")?;
        Ok(input)
    }

    /// Refuses soft and external links (and user-defined ones) in `group` (`what` in
    /// words): the reader follows none.
    pub fn refuse_links(&self, group: &hdf5::Group, what: &str) -> Result<()> {
        let links = group
            .links(IndexType::Name, IterationOrder::Native)
            .map_err(|e| bad(&self.path, format!("listing {what}: {e}")))?;
        for (name, info) in links {
            let what = match info.link_type {
                LinkType::Hard => continue,
                LinkType::Soft => "a soft link to another object",
                LinkType::External => "an external link (to an object in another file)",
            };
            return Err(bad(
                &self.path,
                format!(
                    "`{name}` is {what}; melctl writes datasets, not links, and links are not followed"
                ),
            ));
        }
        Ok(())
    }

    /// The file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The dataset `name` of the root group after every check, or `None` if there is none.
    pub fn dataset(&self, name: &str) -> Result<Option<Checked>> {
        if !self.h5.link_exists(name) {
            return Ok(None);
        }
        let ds = self.h5.dataset(name).map_err(|e| {
            bad(
                &self.path,
                format!("`{name}` is not a readable dataset: {e}"),
            )
        })?;
        let storage = self.check(name, &ds)?;
        Ok(Some(Checked { ds, storage }))
    }

    /// The dataset `name`, which must exist.
    pub fn require(&self, name: &str) -> Result<Checked> {
        self.dataset(name)?
            .ok_or_else(|| bad(&self.path, format!("no `{name}` dataset")))
    }

    fn check(&self, name: &str, ds: &hdf5::Dataset) -> Result<Storage> {
        let path = &self.path;
        let h5e = |what: &str| {
            let what = format!("`{name}`'s {what}");
            move |e: hdf5::Error| bad(path, format!("{what}: {e}"))
        };
        let dcpl = ds.dcpl().map_err(h5e("creation properties"))?;
        let layout = dcpl.get_layout().map_err(h5e("layout"))?;
        let external = dcpl.get_external().map_err(h5e("storage"))?;
        if let Some(f) = external.first() {
            return Err(bad(
                path,
                format!(
                    "`{name}` keeps its values outside this file (external storage in {:?}); melctl never writes that and it is not read",
                    f.name
                ),
            ));
        }
        match layout {
            Layout::Contiguous | Layout::Chunked => {}
            Layout::Virtual => {
                return Err(bad(
                    path,
                    format!(
                        "`{name}` is a virtual dataset (its values come from other datasets or files); it is not read"
                    ),
                ));
            }
            Layout::Compact => {
                return Err(bad(
                    path,
                    format!("`{name}` has compact storage, which melctl never writes"),
                ));
            }
        }
        let filters = dcpl.get_filters().map_err(h5e("filters"))?;
        if let Some(f) = filters
            .iter()
            .find(|f| !matches!(f, Filter::Shuffle | Filter::Deflate(_) | Filter::Fletcher32))
        {
            return Err(Error::unsupported(
                path,
                format!(
                    "`{name}` has the filter {f:?} (shuffle, deflate and Fletcher-32 are read)"
                ),
            ));
        }
        let shape = ds.shape();
        let elements = shape
            .iter()
            .try_fold(1u64, |a, &d| a.checked_mul(d as u64))
            .ok_or_else(|| bad(path, format!("`{name}`'s shape {shape:?} overflows")))?;
        let elem = ds.dtype().map_err(h5e("element type"))?.size() as u64;
        let logical = elements
            .checked_mul(elem.max(1))
            .ok_or_else(|| bad(path, format!("`{name}`'s shape {shape:?} overflows")))?;
        let deflated = filters.iter().any(|f| matches!(f, Filter::Deflate(_)));
        let holdable = if deflated {
            self.len.saturating_mul(MAX_INFLATE_RATIO)
        } else {
            self.len
        };
        if logical > holdable {
            return Err(bad(
                path,
                format!(
                    "`{name}` claims {elements} elements ({logical} bytes), more than a {}-byte file can hold",
                    self.len
                ),
            ));
        }
        if elements == 0 {
            return Ok(Storage::Empty);
        }
        if layout == Layout::Contiguous {
            let Some(offset) = ds.offset() else {
                return Err(bad(
                    path,
                    format!(
                        "`{name}` was never written (it has no storage in the file; reading it would give fill values)"
                    ),
                ));
            };
            let len = ds.storage_size();
            if len < logical {
                return Err(bad(
                    path,
                    format!("`{name}` has {len} bytes of storage for {logical} bytes of values"),
                ));
            }
            check_extent(path, &format!("`{name}`"), offset, len, self.len)?;
            return Ok(Storage::Contiguous { offset, len });
        }
        self.chunked(name, ds, &shape, elem, filters)
    }

    /// Checks a chunked dataset: its chunk shape, every chunk present and inside the file.
    fn chunked(
        &self,
        name: &str,
        ds: &hdf5::Dataset,
        shape: &[usize],
        elem: u64,
        filters: Vec<Filter>,
    ) -> Result<Storage> {
        let path = &self.path;
        let chunk = ds
            .chunk()
            .filter(|c| c.len() == shape.len() && !c.contains(&0))
            .ok_or_else(|| {
                bad(
                    path,
                    format!("`{name}` is chunked but has no valid chunk shape"),
                )
            })?;
        let chunk_bytes = chunk
            .iter()
            .try_fold(elem, |a, &d| a.checked_mul(d as u64))
            .filter(|&b| b <= MAX_CHUNK_BYTES as u64)
            .ok_or_else(|| {
                Error::limit(
                    path.display().to_string(),
                    format!(
                        "`{name}`'s chunks of {chunk:?} exceed the {MAX_CHUNK_BYTES}-byte limit on a decoded chunk"
                    ),
                )
            })?;
        let expected = shape
            .iter()
            .zip(&chunk)
            .try_fold(1u64, |a, (&d, &c)| a.checked_mul(d.div_ceil(c) as u64))
            .unwrap_or(u64::MAX);
        // Each stored chunk takes well over 8 bytes of index in the file.
        if expected > self.len / 8 {
            return Err(bad(
                path,
                format!(
                    "`{name}` would need {expected} chunks of {chunk:?}, more than a {}-byte file can index",
                    self.len
                ),
            ));
        }
        let mut chunks = Vec::with_capacity(expected as usize);
        let mut too_many = false;
        let visited = ds.chunks_visit(|info| {
            if chunks.len() as u64 >= expected {
                too_many = true;
                return 1;
            }
            chunks.push(StoredChunk {
                offset: info.offset.to_vec(),
                addr: info.addr,
                size: info.size,
                mask: info.filter_mask,
            });
            0
        });
        if too_many {
            return Err(bad(
                path,
                format!("`{name}` lists more chunks than its {expected} chunks of {chunk:?}"),
            ));
        }
        visited.map_err(|e| bad(path, format!("listing `{name}`'s chunks: {e}")))?;
        // A stored chunk exceeds its decoded size only by deflate's framing.
        let max_stored = chunk_bytes + chunk_bytes / 1000 + 4096;
        for c in &chunks {
            let aligned = c.offset.len() == chunk.len()
                && c.offset
                    .iter()
                    .zip(shape.iter().zip(&chunk))
                    .all(|(&o, (&d, &k))| o % k as u64 == 0 && o < d as u64);
            if !aligned {
                return Err(bad(
                    path,
                    format!(
                        "a chunk of `{name}` starts at {:?}, not on its chunk grid",
                        c.offset
                    ),
                ));
            }
            if c.size > max_stored {
                return Err(bad(
                    path,
                    format!(
                        "the chunk of `{name}` at {:?} is stored in {} bytes, more than a {chunk_bytes}-byte chunk needs",
                        c.offset, c.size
                    ),
                ));
            }
            check_extent(
                path,
                &format!("the chunk of `{name}` at {:?}", c.offset),
                c.addr,
                c.size,
                self.len,
            )?;
        }
        let mut starts: Vec<&[u64]> = chunks.iter().map(|c| &c.offset[..]).collect();
        starts.sort_unstable();
        starts.dedup();
        if (starts.len() as u64) < expected {
            return Err(bad(
                path,
                format!(
                    "`{name}` has {} of its {expected} chunks; the others were never written (reading them would give fill values)",
                    starts.len()
                ),
            ));
        }
        Ok(Storage::Chunked {
            chunk,
            filters,
            chunks,
        })
    }

    /// Refuses an attribute whose stored size the file cannot hold.
    pub fn check_attr(&self, attr: &hdf5::Attribute, name: &str) -> Result<()> {
        if attr.size() as u64 > self.len {
            return Err(bad(
                &self.path,
                format!("`{name}` claims more elements than the file can hold"),
            ));
        }
        Ok(())
    }
}

/// The name under which the library opens `file`: its descriptor in `/proc/self/fd` where
/// there is one, so the library opens the very file checked, else `path`. Also returns the
/// name as the library will print it.
fn library_name(file: &File, path: &Path) -> (PathBuf, String) {
    use std::os::fd::AsRawFd;
    let proc = PathBuf::from(format!("/proc/self/fd/{}", file.as_raw_fd()));
    if proc.exists() {
        let shown = proc.display().to_string();
        (proc, shown)
    } else {
        (path.to_path_buf(), path.display().to_string())
    }
}

/// The text of an HDF5 string's bytes, checked: the library's `as_str` trusts the file to
/// hold UTF-8 (a string of `0xff 0xfe` was undefined behaviour, then an abort), so every
/// string a reader takes from a file comes through here; `None` for bytes that are not
/// UTF-8.
pub(crate) fn text(bytes: &[u8]) -> Option<String> {
    std::str::from_utf8(bytes).ok().map(str::to_string)
}

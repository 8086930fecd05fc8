//! Chunked `mel` read without the HDF5 library: an index of every stored chunk (from the
//! HDF5 gate's checked list), each chunk read with positioned reads and its filters
//! undone (inflated, unshuffled) on the calling thread.

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::Path;

use hdf5::filters::Filter;
use mel_core::{Error, Result};

use super::Access;
use crate::h5file::StoredChunk;
use crate::limits::{MAX_CHUNK_BYTES, bad};

/// Where each stored chunk of a chunked `mel` is, and how to decode it.
pub(super) struct ChunkStore {
    /// The file's own descriptor (never reopened by name).
    file: File,
    /// Clips per chunk.
    pub(super) clips_per_chunk: usize,
    /// Bytes of one decoded chunk.
    chunk_bytes: usize,
    /// (chunk index, file address, stored size, filter mask), sorted by index.
    index: Vec<(usize, u64, u64, u32)>,
    /// The filter pipeline in write order.
    filters: Vec<ChunkFilter>,
    /// Bytes per element (the shuffle's stride).
    elem: usize,
}

/// A filter this crate undoes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ChunkFilter {
    Shuffle,
    Deflate,
}

impl ChunkStore {
    /// Indexes a chunked `mel` (already checked: every chunk present, inside the file and on
    /// the chunk grid) for direct decoding, or says why the library must read it.
    pub(super) fn new(
        file: File,
        chunk: &[usize],
        filters: &[Filter],
        stored: &[StoredChunk],
        shape: &[usize],
        elem: usize,
        clip_bytes: u64,
    ) -> std::result::Result<ChunkStore, String> {
        if chunk[1..] != shape[1..] {
            return Err(format!(
                "mel's chunks {chunk:?} do not hold whole clips of {:?}",
                &shape[1..]
            ));
        }
        let clips_per_chunk = chunk[0];
        // H5Input bounded the chunk's size by MAX_CHUNK_BYTES.
        let chunk_bytes = (clip_bytes * clips_per_chunk as u64) as usize;
        debug_assert!(chunk_bytes <= MAX_CHUNK_BYTES);
        let mut pipeline = Vec::new();
        for f in filters {
            match f {
                Filter::Shuffle => pipeline.push(ChunkFilter::Shuffle),
                Filter::Deflate(_) => pipeline.push(ChunkFilter::Deflate),
                other => return Err(format!("mel has the filter {other:?}")),
            }
        }
        let mut index: Vec<(usize, u64, u64, u32)> = stored
            .iter()
            .map(|c| {
                (
                    (c.offset[0] / clips_per_chunk as u64) as usize,
                    c.addr,
                    c.size,
                    c.mask,
                )
            })
            .collect();
        index.sort_unstable_by_key(|e| e.0);
        Ok(ChunkStore {
            file,
            clips_per_chunk,
            chunk_bytes,
            index,
            filters: pipeline,
            elem,
        })
    }

    /// How [`Access`] reports this store.
    pub(super) fn access(&self) -> Access {
        Access::Chunks {
            clips_per_chunk: self.clips_per_chunk,
            deflate: self.filters.contains(&ChunkFilter::Deflate),
            shuffle: self.filters.contains(&ChunkFilter::Shuffle),
        }
    }

    fn find(&self, index: usize) -> Option<&(usize, u64, u64, u32)> {
        self.index
            .binary_search_by_key(&index, |e| e.0)
            .ok()
            .map(|i| &self.index[i])
    }

    /// Reads chunk `index`'s stored bytes and decodes them into `out` (`chunk_bytes`).
    pub(super) fn decode(
        &self,
        path: &Path,
        index: usize,
        scratch: &mut Vec<u8>,
        out: &mut Vec<u8>,
        inflater: &mut libdeflater::Decompressor,
    ) -> Result<()> {
        let &(_, addr, size, mask) = self
            .find(index)
            .ok_or_else(|| bad(path, format!("chunk {index} of mel is not stored")))?;
        scratch.resize(size as usize, 0);
        self.file
            .read_exact_at(scratch, addr)
            .map_err(|e| Error::read(path, e))?;
        // Undo the filters in reverse order; a set mask bit means the filter was skipped.
        let mut have_in_scratch = true;
        for (pos, f) in self.filters.iter().enumerate().rev() {
            if mask & (1 << pos) != 0 {
                continue;
            }
            let (src, dst) = if have_in_scratch {
                (&*scratch, &mut *out)
            } else {
                (&*out, &mut *scratch)
            };
            match f {
                ChunkFilter::Deflate => {
                    dst.resize(self.chunk_bytes, 0);
                    let n = inflater.zlib_decompress(src, dst).map_err(|e| {
                        bad(path, format!("chunk {index} of mel does not inflate: {e}"))
                    })?;
                    if n != self.chunk_bytes {
                        return Err(bad(
                            path,
                            format!(
                                "chunk {index} of mel inflates to {n} bytes, {} expected",
                                self.chunk_bytes
                            ),
                        ));
                    }
                }
                ChunkFilter::Shuffle => {
                    if src.len() != self.chunk_bytes {
                        return Err(bad(
                            path,
                            format!(
                                "chunk {index} of mel holds {} bytes, {} expected",
                                src.len(),
                                self.chunk_bytes
                            ),
                        ));
                    }
                    dst.resize(self.chunk_bytes, 0);
                    mel_core::format::shuffle::unshuffle(src, dst, self.elem);
                }
            }
            have_in_scratch = !have_in_scratch;
        }
        if have_in_scratch {
            std::mem::swap(scratch, out);
        }
        if out.len() != self.chunk_bytes {
            return Err(bad(
                path,
                format!(
                    "chunk {index} of mel holds {} bytes, {} expected",
                    out.len(),
                    self.chunk_bytes
                ),
            ));
        }
        Ok(())
    }
}

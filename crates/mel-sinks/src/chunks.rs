//! Chunked `mel` datasets written a chunk at a time: every complete chunk is shuffled
//! and deflated on the writer threads, in parallel, and handed to HDF5 as finished bytes
//! (`H5Dwrite_chunk`), skipping the library's single-threaded filter pipeline. The bytes
//! are what HDF5's own shuffle + deflate filters would store, so any HDF5 reader (h5py
//! without plugins included) decompresses them.

use std::borrow::Cow;
use std::cell::RefCell;
use std::collections::HashMap;
use std::path::{Path, PathBuf};

use hdf5::Dataset;
use libdeflater::{CompressionLvl, Compressor};
use mel_core::Result;
use rayon::prelude::*;

use crate::errors::hdf5_failed;

/// Accumulates rows into chunks of a chunked dataset and writes each chunk once whole.
pub(crate) struct ChunkWriter {
    /// The output, for errors.
    output: PathBuf,
    /// Clips per chunk.
    chunk_rows: usize,
    /// Bytes per clip.
    row_bytes: usize,
    /// Clips the dataset was created with.
    total_rows: usize,
    /// Bytes per element (the shuffle's unit).
    elem: usize,
    /// Deflate level 1–9, or 0 for chunks stored as they are (no filters).
    level: u8,
    /// Rank of the dataset.
    ndim: usize,
    /// Chunks some of whose rows have arrived: chunk index → (bytes, rows present).
    partial: HashMap<usize, (Vec<u8>, usize)>,
    /// Compressed bytes written so far.
    pub(crate) stored_bytes: u64,
}

impl ChunkWriter {
    /// A writer for a dataset of `total_rows` clips of `row_bytes` bytes each, chunked by
    /// `chunk_rows` clips, elements of `elem` bytes, deflate `level` (0: none).
    pub(crate) fn new(
        output: &Path,
        chunk_rows: usize,
        row_bytes: usize,
        total_rows: usize,
        elem: usize,
        level: u8,
        ndim: usize,
    ) -> Self {
        ChunkWriter {
            output: output.to_path_buf(),
            chunk_rows,
            row_bytes,
            total_rows,
            elem,
            level,
            ndim,
            partial: HashMap::new(),
            stored_bytes: 0,
        }
    }

    /// Whether chunks are deflated (else stored as they are).
    pub(crate) fn compresses(&self) -> bool {
        self.level > 0
    }

    /// Clips chunk `c` holds within the dataset (the last one may hold fewer).
    fn rows_in(&self, c: usize) -> usize {
        self.chunk_rows.min(self.total_rows - c * self.chunk_rows)
    }

    /// Takes rows `first_row..` (`bytes`, whole rows) and writes every chunk they
    /// complete; rows of chunks still incomplete are kept until the rest arrives.
    pub(crate) fn write(
        &mut self,
        mel: &Dataset,
        first_row: usize,
        bytes: &[u8],
        pool: &rayon::ThreadPool,
    ) -> Result<()> {
        let rows = bytes.len() / self.row_bytes;
        let chunk_bytes = self.chunk_rows * self.row_bytes;
        let mut ready: Vec<(usize, Cow<[u8]>)> = Vec::new();
        let mut row = first_row;
        while row < first_row + rows {
            let c = row / self.chunk_rows;
            let start = c * self.chunk_rows;
            let end = (start + self.rows_in(c)).min(first_row + rows);
            let piece =
                &bytes[(row - first_row) * self.row_bytes..(end - first_row) * self.row_bytes];
            let whole = row == start && end - start == self.chunk_rows;
            if whole {
                ready.push((c, Cow::Borrowed(piece)));
            } else {
                let (buf, have) = self
                    .partial
                    .entry(c)
                    .or_insert_with(|| (vec![0; chunk_bytes], 0));
                let at = (row - start) * self.row_bytes;
                buf[at..at + piece.len()].copy_from_slice(piece);
                *have += end - row;
                if *have == self.rows_in(c) {
                    let (buf, _) = self.partial.remove(&c).expect("just filled");
                    ready.push((c, Cow::Owned(buf)));
                }
            }
            row = end;
        }
        self.store(mel, ready, pool)
    }

    /// Writes the chunks still incomplete (rows never sent read as zeros; the caller
    /// shrinks the dataset to the rows it has).
    pub(crate) fn flush(&mut self, mel: &Dataset, pool: &rayon::ThreadPool) -> Result<()> {
        let ready = self
            .partial
            .drain()
            .map(|(c, (buf, _))| (c, Cow::Owned(buf)))
            .collect();
        self.store(mel, ready, pool)
    }

    /// Encodes `chunks` in parallel, then hands them to HDF5 one by one.
    fn store(
        &mut self,
        mel: &Dataset,
        chunks: Vec<(usize, Cow<[u8]>)>,
        pool: &rayon::ThreadPool,
    ) -> Result<()> {
        if chunks.is_empty() {
            return Ok(());
        }
        let (elem, level) = (self.elem, self.level);
        let encode = || -> Vec<(usize, Cow<[u8]>)> {
            chunks
                .into_par_iter()
                .map(|(c, raw)| {
                    if level == 0 {
                        (c, raw)
                    } else {
                        (
                            c,
                            Cow::Owned(deflate(
                                &mel_core::format::shuffle::shuffle(&raw, elem),
                                level,
                            )),
                        )
                    }
                })
                .collect()
        };
        let encoded = pool.install(encode);
        for (c, data) in encoded {
            let mut offset = vec![0u64; self.ndim];
            offset[0] = (c * self.chunk_rows) as u64;
            // The library's error stack is read under the same lock as the failed call.
            let failed = hdf5::sync::sync(|| {
                // SAFETY: a valid dataset id, an offset of the dataset's rank on a chunk
                // boundary, and `data` alive for the call.
                let status = unsafe {
                    hdf5_sys::h5d::H5Dwrite_chunk(
                        mel.id(),
                        hdf5_sys::h5p::H5P_DEFAULT,
                        0,
                        offset.as_ptr(),
                        data.len(),
                        data.as_ptr().cast(),
                    )
                };
                (status < 0).then(|| hdf5::Error::query().unwrap_or_else(|e| e))
            });
            if let Some(e) = failed {
                let what = format!("writing chunk {c} ({} bytes)", data.len());
                return Err(hdf5_failed(&self.output, &what, &e));
            }
            self.stored_bytes += data.len() as u64;
        }
        Ok(())
    }
}

/// HDF5's deflate filter: a zlib stream at `level` (libdeflate: on leak-4k f16 chunks
/// of 16 clips, level 1 compresses 2.04× at ~130 MB/s per core where zlib's level 1
/// gives 1.71× at ~100 MB/s; BENCHMARKS.md).
pub(crate) fn deflate(raw: &[u8], level: u8) -> Vec<u8> {
    thread_local! {
        static COMPRESSOR: RefCell<Option<(u8, Compressor)>> = const { RefCell::new(None) };
    }
    COMPRESSOR.with_borrow_mut(|slot| {
        if slot.as_ref().is_none_or(|(l, _)| *l != level) {
            let lvl = CompressionLvl::new(level.into()).unwrap_or_default();
            *slot = Some((level, Compressor::new(lvl)));
        }
        let (_, c) = slot.as_mut().expect("just set");
        let mut out = vec![0; c.zlib_compress_bound(raw.len())];
        let n = c
            .zlib_compress(raw, &mut out)
            .expect("the bound always fits");
        out.truncate(n);
        out
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deflate_round_trips_through_zlib_at_every_level() {
        let raw: Vec<u8> = (0..100_000u32).map(|i| (i % 251) as u8).collect();
        for level in 1..=9 {
            let z = deflate(&raw, level);
            assert!(z.len() < raw.len() / 10, "level {level}: {} bytes", z.len());
            // A zlib stream: header 0x78 (deflate, 32 KiB window).
            assert_eq!(z[0], 0x78);
            let mut back = vec![0; raw.len()];
            let n = libdeflater::Decompressor::new()
                .zlib_decompress(&z, &mut back)
                .unwrap();
            assert_eq!(&back[..n], &raw[..]);
        }
    }
}

//! The HDF5 sink: one file per split holding `mel`, `label`, `path` and attributes,
//! written under a temporary name and renamed on commit.

use std::path::{Path, PathBuf};

use hdf5::dataset::{AllocTime, FillTime};
use hdf5::types::VarLenUnicode;
use hdf5::{Dataset, Extent, File, Hyperslab, SimpleExtents, SliceOrIndex};
use mel_core::{ClipMeta, Dtype, Error, OutputBuf, Result, Sink, SinkSpec};

use crate::atomic;
use crate::chunks::ChunkWriter;

/// Options of the HDF5 sink.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Hdf5Options {
    /// Clips per chunk of `mel`; 0: contiguous (written straight to its bytes).
    pub chunk_clips: usize,
    /// Deflate level 1–9 after a byte shuffle (needs chunks); 0: none.
    pub gzip: u8,
    /// Flush the file to disk before renaming it into place.
    pub fsync: bool,
}

/// Writes `OUT/{split}.h5`.
///
/// With the default contiguous layout the `mel` storage is reserved when the file is
/// created and batches are written straight to its bytes (positioned writes from
/// several threads, writeback started as each batch lands), bypassing the HDF5
/// library's single-threaded write path; the library writes everything else. With a
/// chunked layout (`hdf5.chunk_clips > 0`, needed for gzip) each chunk is shuffled and
/// deflated on the writer threads in parallel and stored with HDF5's direct chunk write
/// (`chunks.rs`).
pub struct Hdf5Sink {
    raw: Option<RawWriter>,
    chunks: Option<ChunkWriter>,
    /// The temporary file, for starting writeback of chunks as they land (fsync only).
    writeback: Option<std::fs::File>,
    final_path: PathBuf,
    temp_path: PathBuf,
    file: Option<File>,
    mel: Dataset,
    spec: SinkSpec,
    labels: Vec<Option<i64>>,
    paths: Vec<Option<String>>,
    written: usize,
    opts: Hdf5Options,
}

impl Hdf5Sink {
    /// Creates the temporary file and the `mel` dataset for `spec` in `out_dir`.
    pub fn create(out_dir: &Path, spec: SinkSpec, opts: Hdf5Options) -> Result<Self> {
        let final_path = out_dir.join(format!("{}.h5", spec.split));
        atomic::remove_stale_partials(&final_path);
        let temp_path = atomic::temp_path_for(&final_path);
        let err = |e: hdf5::Error| Error::Output {
            path: final_path.clone(),
            message: e.to_string(),
        };
        let file = File::create(&temp_path).map_err(err)?;
        let clip_shape = spec.plan.clip_shape();
        let h5 = &opts;
        let chunk_clips = h5.chunk_clips.min(spec.rows.max(1));
        let builder = match spec.plan.dtype() {
            Dtype::F32 => file.new_dataset::<f32>(),
            Dtype::F16 => file.new_dataset::<half::f16>(),
            Dtype::Bf16 => file.new_dataset::<u16>(),
        };
        let chunked = chunk_clips > 0 && spec.rows > 0;
        // Chunked: the clip axis is resizable, so commit can shrink it to the clips that
        // decoded. Contiguous: fixed; commit copies into an exact-size dataset if needed.
        let mut extents = vec![if chunked {
            Extent::resizable(spec.rows)
        } else {
            Extent::fixed(spec.rows)
        }];
        extents.extend(clip_shape.iter().map(|&d| Extent::fixed(d)));
        let mut builder = builder.shape(SimpleExtents::from_vec(extents));
        if chunked {
            let mut chunk = vec![chunk_clips];
            chunk.extend(&clip_shape);
            builder = builder.chunk(chunk);
            if h5.gzip > 0 {
                // Byte shuffle first: deflate then finds the exponent bytes together.
                builder = builder.shuffle().deflate(h5.gzip);
            }
        } else {
            // Contiguous: storage reserved now (no fill values written), so its file
            // offset is known and batches can be written straight into it.
            builder = builder
                .no_chunk()
                .alloc_time(Some(AllocTime::Early))
                .fill_time(FillTime::Never);
        }
        let mel = builder.create("mel").map_err(err)?;
        let raw = if chunked {
            None
        } else {
            match mel.offset() {
                Some(offset) => Some(RawWriter::open(&temp_path, offset, opts.fsync)?),
                None => None,
            }
        };
        let chunks = chunked.then(|| {
            ChunkWriter::new(
                chunk_clips,
                spec.plan.bytes_per_clip(),
                spec.rows,
                spec.plan.dtype().size(),
                h5.gzip,
                clip_shape.len() + 1,
            )
        });
        let writeback = if chunked && opts.fsync {
            std::fs::OpenOptions::new()
                .write(true)
                .open(&temp_path)
                .ok()
        } else {
            None
        };
        let rows = spec.rows;
        Ok(Hdf5Sink {
            raw,
            chunks,
            writeback,
            final_path,
            temp_path,
            file: Some(file),
            mel,
            spec,
            labels: vec![None; rows],
            paths: vec![None; rows],
            written: 0,
            opts,
        })
    }

    fn err(&self, message: impl std::fmt::Display) -> Error {
        Error::Output {
            path: self.final_path.clone(),
            message: message.to_string(),
        }
    }

    /// Shrinks `mel` to `rows` clips: a resize when chunked, a copy when contiguous.
    fn shrink(&mut self, rows: usize) -> Result<()> {
        let mut shape = vec![rows];
        shape.extend(self.spec.plan.clip_shape());
        if self.mel.is_chunked() {
            return self.mel.resize(shape).map_err(|e| self.err(e));
        }
        let file = self.file.as_ref().expect("file is open until commit");
        let e = |e: hdf5::Error| self.err(e);
        file.relink("mel", "mel_full").map_err(e)?;
        let builder = match self.spec.plan.dtype() {
            Dtype::F32 => file.new_dataset::<f32>(),
            Dtype::F16 => file.new_dataset::<half::f16>(),
            Dtype::Bf16 => file.new_dataset::<u16>(),
        };
        let new = builder
            .shape(shape.clone())
            .no_chunk()
            .create("mel")
            .map_err(e)?;
        let ndim = shape.len();
        let step = 256;
        for first in (0..rows).step_by(step) {
            let n = step.min(rows - first);
            let slab = hyperslab(first, n, ndim);
            match self.spec.plan.dtype() {
                Dtype::F32 => {
                    let a = self.mel.read_slice::<f32, _, ndarray::IxDyn>(slab.clone());
                    a.and_then(|a| new.write_slice(&a, slab))
                }
                Dtype::F16 => {
                    let a = self
                        .mel
                        .read_slice::<half::f16, _, ndarray::IxDyn>(slab.clone());
                    a.and_then(|a| new.write_slice(&a, slab))
                }
                Dtype::Bf16 => {
                    let a = self.mel.read_slice::<u16, _, ndarray::IxDyn>(slab.clone());
                    a.and_then(|a| new.write_slice(&a, slab))
                }
            }
            .map_err(e)?;
        }
        file.unlink("mel_full").map_err(e)?;
        self.mel = new;
        Ok(())
    }

    fn finish(&mut self, rows: usize) -> Result<()> {
        let file = self.file.as_ref().expect("file is open until commit");
        let labels: Vec<i64> = self.labels[..rows]
            .iter()
            .map(|l| l.expect("checked"))
            .collect();
        let paths: Vec<VarLenUnicode> = self.paths[..rows]
            .iter()
            .map(|p| p.as_deref().expect("checked").parse().expect("UTF-8 path"))
            .collect();
        let e = |e: hdf5::Error| self.err(e);
        file.new_dataset_builder()
            .with_data(&labels)
            .create("label")
            .map_err(e)?;
        file.new_dataset_builder()
            .with_data(&paths)
            .create("path")
            .map_err(e)?;
        let names: Vec<VarLenUnicode> = self
            .spec
            .label_names
            .iter()
            .map(|n| n.parse().expect("UTF-8"))
            .collect();
        file.new_attr_builder()
            .with_data(&names)
            .create("label_names")
            .map_err(e)?;
        let text_attr = |name: &str, value: &str| -> Result<()> {
            let v: VarLenUnicode = value.parse().expect("UTF-8");
            file.new_attr::<VarLenUnicode>()
                .create(name)
                .map_err(e)?
                .write_scalar(&v)
                .map_err(e)
        };
        text_attr("config", &self.spec.provenance)?;
        text_attr("melctl_version", env!("CARGO_PKG_VERSION"))?;
        text_attr("split", &self.spec.split)?;
        let dims: Vec<&str> = ["clip"]
            .into_iter()
            .chain(self.spec.plan.long_count().map(|_| "long"))
            .chain(self.spec.plan.short_count().map(|_| "short"))
            .chain(["mel", "frame"])
            .collect();
        text_attr("mel_dims", &dims.join(","))?;
        let dtype_note = match self.spec.plan.dtype() {
            Dtype::Bf16 => {
                "bfloat16 stored as uint16 bit patterns: torch.from_numpy(x).view(torch.bfloat16)"
            }
            d => d.name(),
        };
        self.mel
            .new_attr::<VarLenUnicode>()
            .create("dtype")
            .and_then(|a| a.write_scalar(&dtype_note.parse::<VarLenUnicode>().expect("UTF-8")))
            .map_err(e)?;
        Ok(())
    }
}

fn hyperslab(first: usize, rows: usize, ndim: usize) -> Hyperslab {
    let mut s = vec![SliceOrIndex::from(first..first + rows)];
    s.extend((1..ndim).map(|_| SliceOrIndex::from(..)));
    Hyperslab::from(s)
}

impl Sink for Hdf5Sink {
    fn name(&self) -> &str {
        match &self.chunks {
            Some(c) if c.compresses() => "hdf5-gzip",
            _ => "hdf5",
        }
    }

    fn write(&mut self, first_row: usize, meta: &[ClipMeta], data: &OutputBuf) -> Result<()> {
        let rows = meta.len();
        if first_row + rows > self.spec.rows {
            return Err(self.err(format!(
                "rows {first_row}..{} exceed the {} planned",
                first_row + rows,
                self.spec.rows
            )));
        }
        if data.len() != rows * self.spec.plan.values_per_clip()
            || data.dtype() != self.spec.plan.dtype()
        {
            return Err(self.err("batch data does not match the plan's shape or dtype"));
        }
        for (i, m) in meta.iter().enumerate() {
            if self.labels[first_row + i].is_some() {
                return Err(self.err(format!("row {} written twice", first_row + i)));
            }
            self.labels[first_row + i] = Some(m.label);
            self.paths[first_row + i] = Some(m.path.clone());
        }
        if let Some(raw) = &self.raw {
            let offset = (first_row * self.spec.plan.bytes_per_clip()) as u64;
            raw.write_at(offset, data.as_bytes())
                .map_err(|e| self.err(format!("writing rows {first_row}..: {e}")))?;
            self.written += rows;
            return Ok(());
        }
        if let Some(chunks) = &mut self.chunks {
            let r = chunks.write(&self.mel, first_row, data.as_bytes(), writer_pool());
            r.map_err(|e| self.err(format!("writing rows {first_row}..: {e}")))?;
            if let Some(f) = &self.writeback {
                start_writeback(f, 0, 0);
            }
            self.written += rows;
            return Ok(());
        }
        let mut shape = vec![rows];
        shape.extend(self.spec.plan.clip_shape());
        let slab = hyperslab(first_row, rows, shape.len());
        let r = match data {
            OutputBuf::F32(v) => {
                ndarray::ArrayViewD::from_shape(shape, v).map(|a| self.mel.write_slice(a, slab))
            }
            OutputBuf::F16(v) => {
                ndarray::ArrayViewD::from_shape(shape, v).map(|a| self.mel.write_slice(a, slab))
            }
            OutputBuf::Bf16(v) => {
                let bits: &[u16] = bytemuck_cast(v);
                ndarray::ArrayViewD::from_shape(shape, bits).map(|a| self.mel.write_slice(a, slab))
            }
        };
        r.map_err(|e| self.err(e))?.map_err(|e| self.err(e))?;
        self.written += rows;
        Ok(())
    }

    fn commit(mut self: Box<Self>, rows: usize) -> Result<PathBuf> {
        if rows > self.spec.rows {
            return Err(self.err(format!(
                "commit of {rows} rows, but only {} were planned",
                self.spec.rows
            )));
        }
        if let Some(missing) = self.labels[..rows].iter().position(Option::is_none) {
            return Err(self.err(format!(
                "{} of {rows} rows were never written (first: row {missing}); the output was not committed",
                self.labels[..rows].iter().filter(|l| l.is_none()).count(),
            )));
        }
        if let Some(extra) = self.labels[rows..].iter().position(Option::is_some) {
            return Err(self.err(format!(
                "row {} was written but the output holds {rows} rows; the output was not committed",
                rows + extra
            )));
        }
        // Raw writes went through the page cache; HDF5 reads (a shrink) see them.
        self.raw = None;
        if let Some(mut chunks) = self.chunks.take() {
            let r = chunks.flush(&self.mel, writer_pool());
            r.map_err(|e| self.err(format!("writing the last chunks: {e}")))?;
        }
        self.writeback = None;
        if rows < self.spec.rows {
            self.shrink(rows)?;
        }
        self.finish(rows)?;
        if let Some(f) = self.file.take() {
            f.close().map_err(|e| self.err(e))?;
        }
        atomic::commit(&self.temp_path, &self.final_path, self.opts.fsync)?;
        Ok(self.final_path.clone())
    }
}

impl Drop for Hdf5Sink {
    /// An uncommitted sink removes its temporary file: nothing half-written stays behind.
    fn drop(&mut self) {
        if self.file.take().is_some() || self.temp_path.exists() {
            let _ = std::fs::remove_file(&self.temp_path);
        }
    }
}

fn bytemuck_cast(v: &[half::bf16]) -> &[u16] {
    half::slice::HalfFloatSliceExt::reinterpret_cast(v)
}

/// Threads of its own for positioned writes and chunk compression, so that writing never
/// waits for (or holds up) the worker pool the loaders and the CPU backend use: one per
/// core (compression is CPU work; positioned writes mostly wait), at least 8.
fn writer_pool() -> Option<&'static rayon::ThreadPool> {
    static POOL: std::sync::OnceLock<Option<rayon::ThreadPool>> = std::sync::OnceLock::new();
    POOL.get_or_init(|| {
        let cores = std::thread::available_parallelism().map_or(8, |n| n.get());
        rayon::ThreadPoolBuilder::new()
            .num_threads(cores.max(8))
            .thread_name(|i| format!("melctl-hdf5-{i}"))
            .build()
            .ok()
    })
    .as_ref()
}

/// Positioned writes into the reserved storage of a contiguous dataset.
struct RawWriter {
    file: std::fs::File,
    base: u64,
    /// Start writeback as batches land (only worth it when the commit will fsync).
    early_writeback: bool,
}

impl RawWriter {
    fn open(path: &Path, base: u64, early_writeback: bool) -> Result<Self> {
        let file = std::fs::OpenOptions::new()
            .write(true)
            .open(path)
            .map_err(|e| Error::io(path, e))?;
        Ok(RawWriter {
            file,
            base,
            early_writeback,
        })
    }

    /// Writes `bytes` at `offset` into the dataset, in parallel pieces, then asks the
    /// kernel to start writing them back (so the final fsync has little left to do).
    fn write_at(&self, offset: u64, bytes: &[u8]) -> std::io::Result<()> {
        use rayon::prelude::*;
        use std::os::unix::fs::FileExt;
        const PIECE: usize = 4 << 20;
        let at = self.base + offset;
        let write = || {
            bytes
                .par_chunks(PIECE)
                .enumerate()
                .try_for_each(|(i, piece)| self.file.write_all_at(piece, at + (i * PIECE) as u64))
        };
        match writer_pool() {
            Some(pool) => pool.install(write)?,
            None => write()?,
        }
        if self.early_writeback {
            start_writeback(&self.file, at, bytes.len() as u64);
        }
        Ok(())
    }
}

/// Asks the kernel to start writing `len` bytes of `file` from `offset` back to disk
/// (`len` 0: to the end), so that the commit's fsync has little left to do. Linux only;
/// a hint, so failures are ignored.
fn start_writeback(file: &std::fs::File, offset: u64, len: u64) {
    #[cfg(target_os = "linux")]
    {
        use std::os::fd::AsRawFd;
        // SAFETY: a valid descriptor and an in-file range; the call only starts writeback.
        unsafe {
            libc::sync_file_range(
                file.as_raw_fd(),
                offset as i64,
                len as i64,
                libc::SYNC_FILE_RANGE_WRITE,
            );
        }
    }
    #[cfg(not(target_os = "linux"))]
    let _ = (file, offset, len);
}

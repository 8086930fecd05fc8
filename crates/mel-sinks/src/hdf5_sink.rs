//! The HDF5 sink: one file per split holding `mel`, `label`, `path` and attributes,
//! written under a temporary name and renamed on commit.

use std::path::Path;

use hdf5::dataset::{AllocTime, FillTime};
use hdf5::types::VarLenUnicode;
use hdf5::{Dataset, Extent, File, Hyperslab, SimpleExtents, SliceOrIndex};
use mel_core::format::{self, h5};
use mel_core::{ClipMeta, Dtype, Error, OutputBuf, Result, Sink, SinkSpec};

use mel_core::Finished;
use mel_core::atomic::{self, Staged};

use crate::chunks::ChunkWriter;
use crate::errors::{hdf5_failed, write_failed};
use crate::rows::RowLedger;
use mel_core::row_stats::RowStats;

/// Options of the HDF5 sink.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Hdf5Options {
    /// Clips per chunk of `mel`; 0: contiguous (written straight to its bytes).
    pub chunk_clips: usize,
    /// Deflate level 1–9 after a byte shuffle (needs chunks); 0: none.
    pub gzip: u8,
    /// Flush the file to disk before renaming it into place.
    pub fsync: bool,
    /// Threads for positioned writes and chunk compression (the caller's thread budget).
    pub writers: usize,
}

impl Default for Hdf5Options {
    fn default() -> Self {
        Hdf5Options {
            chunk_clips: 0,
            gzip: 0,
            fsync: true,
            writers: 1,
        }
    }
}

/// Writes `OUT/{split}.h5`.
///
/// With the default contiguous layout the `mel` storage is reserved when the file is
/// created and batches are written straight to its bytes (positioned writes from
/// `writers` threads, writeback started as each batch lands), bypassing the HDF5
/// library's single-threaded write path; the library writes everything else. With a
/// chunked layout (`chunk_clips > 0`, needed for gzip) each chunk is shuffled and
/// deflated on the writer threads in parallel and stored with HDF5's direct chunk write
/// (`chunks.rs`).
///
/// [`Sink::finish`] closes every HDF5 object and the file, reopens it read-only to check
/// it holds what was written, and only then hands it over for publishing (flush, rename,
/// folder flush): nothing writes to the file after it is renamed.
pub struct Hdf5Sink {
    staged: Staged,
    raw: Option<RawWriter>,
    chunks: Option<ChunkWriter>,
    /// The temporary file, for starting writeback of chunks as they land (fsync only).
    writeback: Option<std::fs::File>,
    h5: Handles,
    spec: SinkSpec,
    ledger: RowLedger,
    stats: RowStats,
    opts: Hdf5Options,
    pool: rayon::ThreadPool,
    /// The build this output belongs to (the root attribute `build_id`).
    build_id: Option<String>,
}

/// Creates `mel` in `file` for `rows` clips of `spec`'s plan, chunked by `chunk_clips`
/// (0: contiguous, storage reserved now so its file offset is known).
fn create_mel(
    file: &File,
    spec: &SinkSpec,
    rows: usize,
    chunk_clips: usize,
    gzip: u8,
) -> hdf5::Result<Dataset> {
    let clip_shape = spec.plan.clip_shape();
    let builder = match spec.plan.dtype() {
        Dtype::F32 => file.new_dataset::<f32>(),
        Dtype::F16 => file.new_dataset::<half::f16>(),
        Dtype::Bf16 => file.new_dataset::<u16>(),
    };
    let chunked = chunk_clips > 0 && rows > 0;
    // Chunked: the clip axis is resizable, so finishing can shrink it to the clips that
    // decoded. Contiguous: fixed; finishing copies into an exact-size file if needed.
    let mut extents = vec![if chunked {
        Extent::resizable(rows)
    } else {
        Extent::fixed(rows)
    }];
    extents.extend(clip_shape.iter().map(|&d| Extent::fixed(d)));
    let mut builder = builder.shape(SimpleExtents::from_vec(extents));
    if chunked {
        let mut chunk = vec![chunk_clips];
        chunk.extend(&clip_shape);
        builder = builder.chunk(chunk);
        if gzip > 0 {
            // Byte shuffle first: deflate then finds the exponent bytes together.
            builder = builder.shuffle().deflate(gzip);
        }
    } else {
        // Contiguous: storage reserved now (no fill values written), so its file offset
        // is known and batches can be written straight into it.
        builder = builder
            .no_chunk()
            .alloc_time(Some(AllocTime::Early))
            .fill_time(FillTime::Never);
    }
    builder.create(h5::MEL)
}

impl Hdf5Sink {
    /// Creates, beside `final_path` (where the build decided the split goes: melkit's
    /// `final_path`), the temporary file and the `mel` dataset for `spec`.
    pub fn create(final_path: &Path, spec: SinkSpec, opts: Hdf5Options) -> Result<Self> {
        let final_path = final_path.to_path_buf();
        atomic::remove_stale_partials(&final_path);
        let (staged, handle) = Staged::file(&final_path)?;
        // Reserve the disk space the file will take before HDF5 writes anything: a full
        // disk is then this clear error, never a failed write inside the library (whose
        // error paths can leave it unable to close the file). HDF5 trims the file to
        // its contents when it closes it. Compressed chunks reserve only the metadata.
        let data = if opts.gzip > 0 {
            0
        } else {
            spec.rows as u64 * spec.plan.bytes_per_clip() as u64
        };
        reserve(
            &handle,
            data + metadata_bound(spec.rows, spec.meta_columns.len()),
        )
        .map_err(|e| write_failed(&final_path, "reserving disk space", &e))?;
        drop(handle);
        let err = |e: hdf5::Error| hdf5_failed(&final_path, "creating the file", &e);
        let file = create_private(staged.path()).map_err(err)?;
        let chunk_clips = opts.chunk_clips.min(spec.rows.max(1));
        let chunked = chunk_clips > 0 && spec.rows > 0;
        let mel = create_mel(&file, &spec, spec.rows, chunk_clips, opts.gzip).map_err(err)?;
        let raw = match (chunked, mel.offset()) {
            (false, Some(offset)) => Some(RawWriter::open(staged.path(), offset, opts.fsync)?),
            _ => None,
        };
        let chunks = chunked.then(|| {
            ChunkWriter::new(
                &final_path,
                chunk_clips,
                spec.plan.bytes_per_clip(),
                spec.rows,
                spec.plan.dtype().size(),
                opts.gzip,
                spec.plan.clip_shape().len() + 1,
            )
        });
        let writeback = if chunked && opts.fsync {
            std::fs::OpenOptions::new()
                .write(true)
                .open(staged.path())
                .ok()
        } else {
            None
        };
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(opts.writers.max(1))
            .thread_name(|i| format!("melctl-hdf5-{i}"))
            .build()
            .map_err(|e| Error::Internal(format!("cannot start the HDF5 writer threads: {e}")))?;
        let rows = spec.rows;
        let stats = RowStats::new(&spec.plan);
        Ok(Hdf5Sink {
            staged,
            raw,
            chunks,
            writeback,
            h5: Handles {
                file: Some(file),
                mel: Some(mel),
                columns: Vec::new(),
                groups: Vec::new(),
            },
            ledger: RowLedger::new(rows, spec.meta_columns.len()),
            spec,
            stats,
            opts,
            pool,
            build_id: None,
        })
    }

    /// The same sink, writing `build_id` into the output (the root attribute `build_id`)
    /// so that readers can tell which build of the folder it comes from
    /// ([`mel_core::record`]).
    pub fn with_build(mut self, build_id: &str) -> Self {
        self.build_id = Some(build_id.to_string());
        self
    }

    /// An HDF5 failure doing `what` to this output, its OS cause kept.
    fn h5err(&self, what: &str) -> impl Fn(hdf5::Error) -> Error + '_ {
        let what = what.to_string();
        move |e| hdf5_failed(self.staged.final_path(), &what, &e)
    }

    fn err(&self, message: impl std::fmt::Display) -> Error {
        Error::output(self.staged.final_path(), message)
    }

    fn mel(&self) -> &Dataset {
        self.h5.mel.as_ref().expect("mel is open until finish")
    }

    /// Shrinks `mel` to `rows` clips: a resize when chunked; when contiguous, a copy of the
    /// rows into a new file with an exact-size dataset (HDF5 cannot give back the space
    /// of a contiguous dataset, so a copy inside the file would leave the output twice
    /// its contents).
    fn shrink(&mut self, rows: usize) -> Result<()> {
        let mut shape = vec![rows];
        shape.extend(self.spec.plan.clip_shape());
        if self.mel().is_chunked() {
            return self
                .mel()
                .resize(shape)
                .map_err(self.h5err("shrinking mel"));
        }
        let bytes = (rows * self.spec.plan.bytes_per_clip()) as u64;
        let (staged, handle) = Staged::file(self.staged.final_path())?;
        drop(handle);
        let (file, mel) = {
            let e = self.h5err("creating the exact-size file");
            let file = create_private(staged.path()).map_err(&e)?;
            let mel = create_mel(&file, &self.spec, rows, 0, 0).map_err(&e)?;
            (file, mel)
        };
        // An empty dataset (every file of the split skipped) has no storage to copy.
        if rows > 0 {
            let no_offset = || self.err("contiguous mel has no offset");
            let from = self.mel().offset().ok_or_else(no_offset)?;
            let to = mel.offset().ok_or_else(no_offset)?;
            copy_range(self.staged.path(), from, staged.path(), to, bytes).map_err(|e| {
                write_failed(
                    self.staged.final_path(),
                    &format!("copying {rows} rows into an exact-size file"),
                    &e,
                )
            })?;
        }
        // The new file takes the old one's place; the old one is deleted (its Staged
        // drops) and its handles abandoned, not closed: closing would write metadata
        // into a file that is going away.
        std::mem::forget(self.h5.mel.replace(mel));
        std::mem::forget(self.h5.file.replace(file));
        self.staged = staged;
        Ok(())
    }

    /// Writes labels, paths, sources, statistics and attributes. Every dataset created
    /// is kept open in `self.h5.columns` until [`close`](Self::close) has flushed the
    /// file: the library writes their data at the flush, where a failure (a full disk)
    /// is reported, whereas closing a dataset whose write then fails leaves the library
    /// a dangling dataset that crashes the next flush.
    fn write_metadata(&mut self, rows: usize) -> Result<()> {
        let labels = self.ledger.labels(rows);
        let paths = varlens(self.ledger.paths(rows))?;
        self.column(h5::LABEL, &labels)?;
        self.column(h5::PATH, &paths)?;
        let sources = self.ledger.sources(rows);
        let rates: Vec<u32> = sources.iter().map(|s| s.rate).collect();
        let channels: Vec<u16> = sources.iter().map(|s| s.channels).collect();
        let frames: Vec<u64> = sources.iter().map(|s| s.frames).collect();
        self.column(h5::SOURCE_RATE, &rates)?;
        self.column(h5::SOURCE_CHANNELS, &channels)?;
        self.column(h5::SOURCE_FRAMES, &frames)?;
        self.write_meta_columns(rows)?;
        let stats = self.stats.finish();
        self.column(h5::MEL_MEAN, &stats.mean)?;
        self.column(h5::MEL_STD, &stats.std)?;
        let file = self.h5.file.as_ref().expect("file is open until finish");
        let e = self.h5err("writing attributes");
        let names = varlens(self.spec.label_names.iter().map(String::as_str))?;
        file.new_attr_builder()
            .with_data(&names)
            .create(h5::LABEL_NAMES)
            .map_err(&e)?;
        let text_attr = |name: &str, value: &str| -> Result<()> {
            file.new_attr::<VarLenUnicode>()
                .create(name)
                .map_err(&e)?
                .write_scalar(&varlen(value)?)
                .map_err(&e)
        };
        file.new_attr::<u64>()
            .create(h5::STATS_COUNT)
            .and_then(|a| a.write_scalar(&self.stats.count()))
            .map_err(&e)?;
        file.new_attr::<u64>()
            .create(format::FORMAT_VERSION)
            .and_then(|a| a.write_scalar(&format::VERSION))
            .map_err(&e)?;
        text_attr(h5::CONFIG, &self.spec.provenance)?;
        if let Some(id) = &self.build_id {
            text_attr(h5::BUILD_ID, id)?;
        }
        text_attr(h5::MELCTL_VERSION, env!("CARGO_PKG_VERSION"))?;
        text_attr(h5::SPLIT, &self.spec.split)?;
        text_attr(h5::MEL_DIMS, &self.spec.plan.dim_names().join(","))?;
        let dtype_note = match self.spec.plan.dtype() {
            Dtype::Bf16 => {
                "bfloat16 stored as uint16 bit patterns: torch.from_numpy(x.view(numpy.int16)).view(torch.bfloat16)"
            }
            d => d.name(),
        };
        self.mel()
            .new_attr::<VarLenUnicode>()
            .create(h5::DTYPE)
            .map_err(&e)?
            .write_scalar(&varlen(dtype_note)?)
            .map_err(&e)?;
        Ok(())
    }

    /// Writes the metadata: the group `meta` with one string dataset per column, and the
    /// columns' order as the root attribute `meta_columns` (nothing without columns).
    fn write_meta_columns(&mut self, rows: usize) -> Result<()> {
        if self.spec.meta_columns.is_empty() {
            return Ok(());
        }
        // What is created is kept open until the flush (see `write_metadata`), on an
        // error too.
        let (mut made, mut groups) = (Vec::new(), Vec::new());
        let written = self.create_meta_columns(rows, &mut made, &mut groups);
        self.h5.columns.extend(made);
        self.h5.groups.extend(groups);
        written
    }

    /// Creates and writes what [`write_meta_columns`](Self::write_meta_columns) says,
    /// handing each object created to `made` or `groups`.
    fn create_meta_columns(
        &self,
        rows: usize,
        made: &mut Vec<Dataset>,
        groups: &mut Vec<hdf5::Group>,
    ) -> Result<()> {
        let file = self.h5.file.as_ref().expect("file is open until finish");
        let e = self.h5err("writing the metadata");
        let names = varlens(self.spec.meta_columns.iter().map(String::as_str))?;
        file.new_attr_builder()
            .with_data(&names)
            .create(h5::META_COLUMNS)
            .map_err(&e)?;
        let group = file.create_group(h5::META).map_err(&e)?;
        groups.push(group.clone());
        for (i, column) in self.spec.meta_columns.iter().enumerate() {
            let values = varlens(self.ledger.meta_column(i, rows))?;
            kept_column(&group, column, &values, made).map_err(&e)?;
        }
        Ok(())
    }

    /// Creates the one-dimensional dataset `name` holding `data`, kept open until the
    /// file is flushed (see [`write_metadata`](Self::write_metadata)).
    fn column<T: hdf5::H5Type>(&mut self, name: &str, data: &[T]) -> Result<()> {
        let file = self.h5.file.as_ref().expect("file is open until finish");
        let mut made = Vec::new();
        let written = kept_column(file, name, data, &mut made);
        self.h5.columns.extend(made);
        written.map_err(self.h5err(&format!("writing {name}")))
    }

    /// Closes every HDF5 object and then the file, so that the library has written all
    /// of it (superblock, heaps, object headers) before anything else happens to it.
    fn close(&mut self) -> Result<()> {
        // Flush first, with every object open: a write that fails (a full disk) is
        // reported here. The file is then abandoned by Drop, never closed: HDF5 2.0 can
        // crash closing a file whose metadata flush failed.
        let flushed = self
            .h5
            .file
            .as_ref()
            .expect("file is open until finish")
            .flush();
        flushed.map_err(self.h5err("flushing the file"))?;
        self.h5.columns.clear();
        self.h5.groups.clear();
        self.h5.mel = None;
        let file = self.h5.file.take().expect("file is open until finish");
        let open = hdf5::sync::sync(|| {
            // SAFETY: a valid file id; the call only counts open objects.
            unsafe {
                hdf5_sys::h5f::H5Fget_obj_count(
                    file.id(),
                    hdf5_sys::h5f::H5F_OBJ_ALL | hdf5_sys::h5f::H5F_OBJ_LOCAL,
                )
            }
        });
        if open != 1 {
            std::mem::forget(file);
            return Err(self.err(format!(
                "{} HDF5 objects still open at close; the file would be written after it was committed",
                open - 1
            )));
        }
        file.close().map_err(self.h5err("closing the file"))
    }

    /// Reopens the closed file read-only and checks it holds `rows` clips of the plan's
    /// shape with their labels and paths: what will be published opens complete.
    fn verify(&self, rows: usize) -> Result<()> {
        let e = self.h5err("the finished file does not read back");
        let file = unlocked().open(self.staged.path()).map_err(&e)?;
        let mut shape = vec![rows];
        shape.extend(self.spec.plan.clip_shape());
        let mel = file.dataset(h5::MEL).map_err(&e)?.shape();
        let labels = file.dataset(h5::LABEL).map_err(&e)?.shape();
        let paths = file.dataset(h5::PATH).map_err(&e)?.shape();
        if mel != shape || labels != [rows] || paths != [rows] {
            return Err(self.err(format!(
                "the finished file reads back as mel {mel:?}, label {labels:?}, path {paths:?}; {shape:?} was written"
            )));
        }
        Ok(())
    }
}

/// Creates the HDF5 file at `path`, a staged name no other process knows, without
/// HDF5's file lock. The library takes an exclusive `flock` on the open descriptor, and a
/// descriptor is inherited by any child process forked while the file is open (HDF5
/// opens without `O_CLOEXEC`): a child outliving the close kept the lock, and the
/// read-back check of the finished file failed with EAGAIN. The staged name already
/// gives what the lock would (no reader sees the file before its rename), and the build
/// lock keeps other builds out.
fn create_private(path: &Path) -> hdf5::Result<File> {
    unlocked().create(path)
}

/// HDF5 file options without the library's file lock (see [`create_private`]).
fn unlocked() -> hdf5::FileBuilder {
    let mut options = File::with_options();
    options.with_fapl(|p| p.file_locking(false));
    options
}

/// A bound on the bytes HDF5 writes besides `mel` for `rows` clips with `columns`
/// metadata columns: labels, paths (in its global heap), sources, metadata (at a typical
/// 64 bytes a value: the space is reserved early to fail early, not to cap the file),
/// statistics, attributes and object headers.
fn metadata_bound(rows: usize, columns: usize) -> u64 {
    (256 << 10) + rows as u64 * (512 + 64 * columns as u64)
}

/// Allocates `bytes` of disk for `file` (`posix_fallocate`: `ENOSPC` now rather than
/// in a later write). Where the filesystem cannot (`EOPNOTSUPP`), nothing is reserved.
fn reserve(file: &std::fs::File, bytes: u64) -> std::io::Result<()> {
    use std::os::fd::AsRawFd;
    // SAFETY: a valid open descriptor; the call only allocates blocks for it.
    let r = unsafe { libc::posix_fallocate(file.as_raw_fd(), 0, bytes as libc::off_t) };
    match r {
        0 | libc::EOPNOTSUPP | libc::EINVAL => Ok(()),
        e => Err(std::io::Error::from_raw_os_error(e)),
    }
}

/// Creates the one-dimensional dataset `name` in `loc` holding `data`, handing it to
/// `made` (to be kept open until the flush) whether or not the write succeeds.
fn kept_column<T: hdf5::H5Type>(
    loc: &hdf5::Group,
    name: &str,
    data: &[T],
    made: &mut Vec<Dataset>,
) -> hdf5::Result<()> {
    let ds = loc.new_dataset::<T>().shape(data.len()).create(name)?;
    let written = ds.write_raw(data);
    made.push(ds);
    written
}

/// Strings as HDF5's variable-length UTF-8 (see [`varlen`]).
fn varlens<'a>(items: impl IntoIterator<Item = &'a str>) -> Result<Vec<VarLenUnicode>> {
    items.into_iter().map(varlen).collect()
}

/// A string as HDF5's variable-length UTF-8 (refused if it holds a NUL).
fn varlen(s: &str) -> Result<VarLenUnicode> {
    s.parse().map_err(|_| {
        Error::Shape(format!(
            "{s:?} cannot be stored as an HDF5 string (it holds a NUL character)"
        ))
    })
}

/// Copies `len` bytes at `from` in the file `src` to `to` in the file `dst`.
fn copy_range(src: &Path, from: u64, dst: &Path, to: u64, len: u64) -> std::io::Result<()> {
    use std::os::unix::fs::FileExt;
    let src = std::fs::File::open(src)?;
    let dst = std::fs::OpenOptions::new().write(true).open(dst)?;
    let mut buf = vec![0u8; 4 << 20];
    let mut done = 0;
    while done < len {
        let n = buf.len().min((len - done) as usize);
        src.read_exact_at(&mut buf[..n], from + done)?;
        dst.write_all_at(&buf[..n], to + done)?;
        done += n as u64;
    }
    Ok(())
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
        if data.len() != rows * self.spec.plan.values_per_clip()
            || data.dtype() != self.spec.plan.dtype()
        {
            return Err(self.err("batch data does not match the plan's shape or dtype"));
        }
        if let Err(m) = self.ledger.record(first_row, meta) {
            return Err(self.err(m));
        }
        if let Err(m) = self.stats.add(first_row, meta, data) {
            return Err(self.err(m));
        }
        let what = format!("writing rows {first_row}..");
        if let Some(raw) = &self.raw {
            let offset = (first_row * self.spec.plan.bytes_per_clip()) as u64;
            return raw
                .write_at(offset, data.as_bytes(), &self.pool)
                .map_err(|e| write_failed(self.staged.final_path(), &what, &e));
        }
        if let Some(chunks) = &mut self.chunks {
            let mel = self.h5.mel.as_ref().expect("mel is open until finish");
            chunks.write(mel, first_row, data.as_bytes(), &self.pool)?;
            if let Some(f) = &self.writeback {
                start_writeback(f, 0, 0);
            }
            return Ok(());
        }
        let mut shape = vec![rows];
        shape.extend(self.spec.plan.clip_shape());
        let slab = hyperslab(first_row, rows, shape.len());
        let mel = self.mel();
        let r = match data {
            OutputBuf::F32(v) => {
                ndarray::ArrayViewD::from_shape(shape, v).map(|a| mel.write_slice(a, slab))
            }
            OutputBuf::F16(v) => {
                ndarray::ArrayViewD::from_shape(shape, v).map(|a| mel.write_slice(a, slab))
            }
            OutputBuf::Bf16(v) => {
                let bits: &[u16] = bytemuck_cast(v);
                ndarray::ArrayViewD::from_shape(shape, bits).map(|a| mel.write_slice(a, slab))
            }
        };
        r.map_err(|e| self.err(format!("{what}: {e}")))?
            .map_err(self.h5err(&what))?;
        Ok(())
    }

    fn finish(mut self: Box<Self>, rows: usize) -> Result<Finished> {
        if let Err(m) = self.ledger.check(rows) {
            return Err(self.err(m));
        }
        if let Err(m) = self.stats.check_complete() {
            return Err(self.err(m));
        }
        // Raw writes went through the page cache; HDF5 reads (a shrink) see them. Every
        // write result was checked when it was made.
        self.raw = None;
        // Shrink before the last, partial chunks are written: resizing a dataset whose
        // edge chunk is already stored makes HDF5 rewrite that chunk elsewhere and keep
        // the old one's space, leaving the file larger than its contents.
        if rows < self.ledger.capacity() {
            self.shrink(rows)?;
        }
        if let Some(mut chunks) = self.chunks.take() {
            let mel = self.h5.mel.as_ref().expect("mel is open until finish");
            chunks.flush(mel, &self.pool)?;
        }
        self.writeback = None;
        self.write_metadata(rows)?;
        self.close()?;
        self.verify(rows)?;
        let bytes = std::fs::metadata(self.staged.path())
            .map_err(|e| Error::io(self.staged.path(), e))?
            .len();
        let provenance = self.ledger.provenance(rows, &self.spec.plan);
        let Hdf5Sink { staged, opts, .. } = *self;
        Ok(Finished::new(staged, opts.fsync, bytes).with_provenance(provenance))
    }
}

/// The HDF5 file and its `mel` dataset. Whatever is still open when this is dropped
/// (an unfinished sink: an error, a cancellation) is abandoned, not closed: after a
/// failed write HDF5's state is suspect, and closing can crash inside the library. The
/// temporary file is removed by its `Staged` all the same.
struct Handles {
    file: Option<File>,
    mel: Option<Dataset>,
    /// Datasets written at finishing, open until the file is flushed.
    columns: Vec<Dataset>,
    /// Groups created at finishing (`meta`), open until the file is flushed.
    groups: Vec<hdf5::Group>,
}

impl Drop for Handles {
    fn drop(&mut self) {
        std::mem::forget(std::mem::take(&mut self.columns));
        std::mem::forget(std::mem::take(&mut self.groups));
        std::mem::forget(self.mel.take());
        std::mem::forget(self.file.take());
    }
}

fn bytemuck_cast(v: &[half::bf16]) -> &[u16] {
    half::slice::HalfFloatSliceExt::reinterpret_cast(v)
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
    fn write_at(&self, offset: u64, bytes: &[u8], pool: &rayon::ThreadPool) -> std::io::Result<()> {
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
        pool.install(write)?;
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

#[cfg(test)]
mod tests {
    use super::*;
    use mel_core::{Config, MelPlan, SourceInfo};

    fn spec(rows: usize) -> SinkSpec {
        let mut c = Config::default();
        c.audio.clip_seconds = 1.0;
        c.output.fsync = false;
        SinkSpec {
            split: "train".into(),
            rows,
            plan: MelPlan::from_config(&c).unwrap(),
            label_names: vec!["a".into(), "b".into()],
            meta_columns: vec!["speaker".into()],
            provenance: c.resolved_json(),
        }
    }

    fn write_rows(sink: &mut Hdf5Sink, plan: &MelPlan, rows: usize) {
        let data = OutputBuf::zeros(plan.dtype(), rows * plan.values_per_clip());
        let metas: Vec<ClipMeta> = (0..rows)
            .map(|i| ClipMeta {
                index: i,
                source: SourceInfo::default(),
                label: (i % 2) as i64,
                path: format!("c/{i}.wav"),
                meta: std::sync::Arc::from([format!("spk{i}")]),
            })
            .collect();
        sink.write(0, &metas, &data).unwrap();
    }

    /// A child process started while the file is open inherits its descriptor and
    /// outlives the close. With HDF5's lock on that descriptor the read-back check failed
    /// ("unable to lock file, errno = 11"), as a concurrent test's `python3` once did in CI.
    #[test]
    fn a_child_process_holding_the_staged_files_descriptor_does_not_fail_the_build() {
        // (chunk_clips, rows planned, rows written): contiguous, contiguous shrunk into a
        // second file, chunked.
        for (chunk_clips, planned, kept) in [(0, 4, 4), (0, 4, 3), (2, 4, 3)] {
            let t = tempfile::tempdir().unwrap();
            let s = spec(planned);
            let plan = s.plan.clone();
            let opts = Hdf5Options {
                chunk_clips,
                gzip: 0,
                fsync: false,
                writers: 1,
            };
            let path = t.path().join(format!("{}.h5", s.split));
            let mut sink = Hdf5Sink::create(&path, s, opts).unwrap();
            let mut child = std::process::Command::new("sleep")
                .arg("60")
                .spawn()
                .expect("sleep runs");
            write_rows(&mut sink, &plan, kept);
            let result = Box::new(sink).finish(kept).and_then(|f| f.publish());
            child.kill().unwrap();
            child.wait().unwrap();
            let path =
                result.unwrap_or_else(|e| panic!("chunks {chunk_clips}, {kept} of {planned}: {e}"));
            let file = File::open(&path).unwrap();
            assert_eq!(file.dataset(h5::LABEL).unwrap().shape(), [kept]);
            let speakers: Vec<VarLenUnicode> =
                file.dataset("meta/speaker").unwrap().read_raw().unwrap();
            let want: Vec<String> = (0..kept).map(|i| format!("spk{i}")).collect();
            let got: Vec<&str> = speakers.iter().map(|s| s.as_str()).collect();
            assert_eq!(got, want);
        }
    }
}

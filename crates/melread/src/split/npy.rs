//! An npy split, `OUT/{split}.npy.d/`: a strict reader of `.npy` headers (format versions
//! 1, 2 and 3: the element type, the shape and where the data starts), and the opener of
//! the folder (`meta.json`, `mel.npy`, `label.npy`). Everything is checked against the
//! file's real length before anything is allocated from it.

use std::fs::File;
use std::io::Read;
use std::path::Path;

use mel_core::stats::MelStats;
use mel_core::{Dtype, Error, Result};

use super::checks::{check_labels, check_shape};
use super::store::contiguous;
use super::{Format, OpenOptions, Provenance, ReadMode, Split, default_dims, stem};
use crate::limits::{MAX_META_BYTES, bad, check_extent};
use mel_core::format::meta;
use mel_core::format::npy::{MAX_HEADER, NpyType, parse_dict, preamble};

/// A parsed `.npy` header.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct NpyHeader {
    /// The element type.
    pub ty: NpyType,
    /// The array's shape (C order).
    pub shape: Vec<usize>,
    /// Where the data starts in the file.
    pub data_offset: u64,
    /// Bytes of data the shape implies.
    pub data_len: u64,
}

/// Refuses a link: a split's files are its folder's own, and a link could bring in values
/// (or class names and statistics, for `meta.json`) from anywhere.
fn refuse_link(path: &Path) -> Result<()> {
    if std::fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_symlink()) {
        return Err(bad(
            path,
            "a link; melctl writes a split's files into its folder, and reads only those",
        ));
    }
    Ok(())
}

/// Opens the `.npy` file at `path` (a regular file, opened without blocking) and reads
/// and checks its header: a known element type, C order, a shape whose byte size does
/// not overflow, and a file at least as long as header plus data. Returns the header and
/// the open file, from which the data is then read.
pub(crate) fn open(path: &Path) -> Result<(NpyHeader, File)> {
    refuse_link(path)?;
    let mut file = mel_core::input::open_regular(path, false).map_err(|e| Error::read(path, e))?;
    let file_len = file.metadata().map_err(|e| Error::read(path, e))?.len();
    let mut pre = [0u8; 12];
    let got = read_up_to(&mut file, &mut pre).map_err(|e| Error::read(path, e))?;
    let (header_len, start) = preamble(&pre[..got]).map_err(|why| bad(path, why))?;
    if header_len > MAX_HEADER {
        return Err(Error::limit(
            path.display().to_string(),
            format!(".npy header of {header_len} bytes; at most {MAX_HEADER} are read"),
        ));
    }
    let data_offset = (start + header_len) as u64;
    if data_offset > file_len {
        return Err(bad(
            path,
            format!("truncated: the header claims {data_offset} bytes, the file has {file_len}"),
        ));
    }
    let mut text = vec![0u8; header_len];
    use std::io::{Seek, SeekFrom};
    file.seek(SeekFrom::Start(start as u64))
        .and_then(|_| file.read_exact(&mut text))
        .map_err(|e| Error::read(path, e))?;
    let text = std::str::from_utf8(&text).map_err(|_| bad(path, "the .npy header is not text"))?;
    let (ty, shape) = parse_dict(text).map_err(|m| bad(path, m))?;
    let count = shape
        .iter()
        .try_fold(1u64, |a, &d| a.checked_mul(d as u64))
        .ok_or_else(|| bad(path, format!("shape {shape:?} overflows")))?;
    let data_len = count
        .checked_mul(ty.size() as u64)
        .ok_or_else(|| bad(path, format!("shape {shape:?} overflows")))?;
    check_extent(path, "data", data_offset, data_len, file_len)?;
    // melctl's .npy files end with their data: bytes past it (a sparse 10 GB tail) are
    // not a file melctl wrote.
    if data_offset + data_len != file_len {
        return Err(bad(
            path,
            format!(
                "{} bytes follow the data its header describes; melctl's files end with their data",
                file_len - data_offset - data_len
            ),
        ));
    }
    let header = NpyHeader {
        ty,
        shape,
        data_offset,
        data_len,
    };
    Ok((header, file))
}

fn read_up_to(file: &mut File, buf: &mut [u8]) -> std::io::Result<usize> {
    let mut got = 0;
    while got < buf.len() {
        match file.read(&mut buf[got..])? {
            0 => break,
            n => got += n,
        }
    }
    Ok(got)
}

/// Reads a whole small `.npy` vector of `<i8` with `rows` elements.
pub(crate) fn read_i64_vector(path: &Path, rows: usize) -> Result<Vec<i64>> {
    let (h, file) = open(path)?;
    if h.ty != NpyType::I64 || h.shape != [rows] {
        return Err(bad(
            path,
            format!(
                "expected {rows} int64 labels, found {:?} of shape {:?}",
                h.ty, h.shape
            ),
        ));
    }
    let bytes = read_at(path, &file, h.data_offset, h.data_len as usize)?;
    Ok(bytes
        .chunks_exact(8)
        .map(|b| i64::from_le_bytes(b.try_into().expect("8 bytes")))
        .collect())
}

/// `len` bytes at `offset` of `file` (`path`; already checked to lie inside it).
fn read_at(path: &Path, file: &File, offset: u64, len: usize) -> Result<Vec<u8>> {
    use std::os::unix::fs::FileExt;
    let mut buf = vec![0u8; len];
    file.read_exact_at(&mut buf, offset)
        .map_err(|e| Error::read(path, e))?;
    Ok(buf)
}

/// Opens the npy split folder `dir`: `meta.json` (bounded, JSON, a known format version),
/// `mel.npy` mapped or read in place, `label.npy`, and every list `meta.json` holds checked
/// against `mel`'s rows and mel bins.
pub(super) fn open_npy(dir: &Path, opts: &OpenOptions) -> Result<Split> {
    if opts.read == ReadMode::Library {
        return Err(Error::unsupported(
            dir,
            "an npy folder has no HDF5 library path",
        ));
    }
    let meta_path = dir.join(mel_core::format::NPY_META);
    // A folder that is no npy split (an output folder given instead of one of its
    // splits): say so, rather than "meta.json: cannot read".
    if std::fs::symlink_metadata(&meta_path).is_err() {
        return Err(no_npy_split(dir));
    }
    let meta = MetaJson::read(&meta_path)?;
    let mel_path = dir.join(mel_core::format::NPY_MEL);
    let (h, mel_file) = open(&mel_path)?;
    let dtype = mel_dtype(&mel_path, h.ty, &meta)?;
    let shape = h.shape.clone();
    let data_bytes = check_shape(&mel_path, &shape, dtype.size())?;
    debug_assert_eq!(data_bytes, h.data_len);
    let rows = shape[0];
    let (access, store) = contiguous(&mel_path, mel_file, h.data_offset, h.data_len, opts.read)?;
    let labels = read_i64_vector(&dir.join(mel_core::format::NPY_LABEL), rows)?;
    let paths = meta.paths(rows)?;
    let metadata = meta.metadata(rows)?;
    let label_names = meta.strings(meta::LABEL_NAMES)?;
    check_labels(
        &dir.join(mel_core::format::NPY_LABEL),
        &labels,
        label_names.len(),
    )?;
    let dims = meta.dims(shape.len())?;
    let stats = meta.stats(shape[shape.len() - 2])?;
    let provenance = meta.provenance(rows)?;
    let json = &meta.json;
    let name = json[meta::SPLIT]
        .as_str()
        .map(str::to_string)
        .unwrap_or_else(|| stem(dir, mel_core::format::NPY_SUFFIX));
    Ok(Split {
        path: dir.to_path_buf(),
        format: Format::Npy,
        name,
        shape,
        dims,
        dtype,
        label_names,
        labels,
        paths,
        meta: metadata,
        config: Some(json[meta::CONFIG].clone()).filter(|c| !c.is_null()),
        version: json[meta::MELCTL_VERSION].as_str().map(str::to_string),
        build: json[meta::BUILD_ID].as_str().map(str::to_string),
        stats,
        provenance,
        access,
        store,
        chunk_cache: opts.chunk_cache,
        whole: None,
        windows: None,
    })
}

/// The error for a folder without `meta.json`, naming the splits it holds, if any (an
/// output folder given instead of one of its splits).
fn no_npy_split(dir: &Path) -> Error {
    let mut splits: Vec<String> = std::fs::read_dir(dir)
        .map(|d| {
            d.flatten()
                .filter_map(|e| e.file_name().to_str().map(str::to_string))
                .filter(|n| mel_core::format::split_of_name(n).is_some())
                .collect()
        })
        .unwrap_or_default();
    splits.sort();
    let hint = match splits.first() {
        Some(first) => format!(
            "; it holds the splits {}: give one of them, e.g. {}",
            splits.join(", "),
            dir.join(first).display()
        ),
        None => String::new(),
    };
    bad(
        dir,
        format!("a folder without meta.json is no npy split{hint}"),
    )
}

/// mel's element type from `mel.npy`'s header type, checked against the dtype that
/// `meta.json` and its config name.
fn mel_dtype(mel_path: &Path, ty: NpyType, meta: &MetaJson) -> Result<Dtype> {
    let json = &meta.json;
    let dtype = match ty {
        NpyType::F32 => Dtype::F32,
        NpyType::F16 => Dtype::F16,
        NpyType::U16 if json[meta::DTYPE] == "bf16" => Dtype::Bf16,
        NpyType::U16 => {
            return Err(bad(
                mel_path,
                "mel is <u2 but meta.json's dtype is not bf16",
            ));
        }
        NpyType::I64 => return Err(bad(mel_path, "mel is int64")),
    };
    // meta.json's dtype and the config's, where given, must name what mel.npy holds.
    let named = [
        &json[meta::DTYPE],
        json[meta::CONFIG]
            .pointer("/output/dtype")
            .unwrap_or(&serde_json::Value::Null),
    ];
    if named
        .iter()
        .any(|d| !d.is_null() && d.as_str() != Some(dtype.name()))
    {
        return Err(bad(
            meta.path,
            format!(
                "mel.npy holds {} but meta.json's dtype ({}) or config ({}) says otherwise",
                dtype.name(),
                named[0],
                named[1]
            ),
        ));
    }
    Ok(dtype)
}

/// An npy split's `meta.json`, parsed, with its path for the words of an error: typed,
/// checked reads of its keys.
struct MetaJson<'a> {
    path: &'a Path,
    json: serde_json::Value,
}

impl<'a> MetaJson<'a> {
    /// Reads `path` (a regular file only, not a link, opened without blocking, read up
    /// to a bound) as JSON of a format version this reader knows.
    fn read(path: &'a Path) -> Result<Self> {
        refuse_link(path)?;
        let bytes = mel_core::input::read_bounded(path, MAX_META_BYTES)
            .map_err(|e| Error::read(path, e))?;
        let json: serde_json::Value = serde_json::from_slice(&bytes)
            .map_err(|e| bad(path, format!("not valid JSON: {e}")))?;
        let version = match &json[meta::FORMAT_VERSION] {
            serde_json::Value::Null => None,
            v => Some(
                v.as_u64()
                    .ok_or_else(|| bad(path, "format_version is not a whole number"))?,
            ),
        };
        mel_core::format::check_version(version).map_err(|why| bad(path, why))?;
        Ok(MetaJson { path, json })
    }

    /// The list of strings at `key`.
    fn strings(&self, key: &str) -> Result<Vec<String>> {
        self.json[key]
            .as_array()
            .and_then(|a| a.iter().map(|v| v.as_str().map(str::to_string)).collect())
            .ok_or_else(|| bad(self.path, format!("{key} is not a list of strings")))
    }

    /// The metadata: `meta_columns` (none without it), each a list of `rows` strings in
    /// the object `meta`.
    fn metadata(&self, rows: usize) -> Result<super::Metadata> {
        if self.json[meta::META_COLUMNS].is_null() {
            if !self.json[meta::META].is_null() {
                return Err(bad(
                    self.path,
                    "a `meta` object without the `meta_columns` list that names its columns",
                ));
            }
            return Ok(super::Metadata::default());
        }
        let columns = self.strings(meta::META_COLUMNS)?;
        super::Metadata::check_columns(self.path, &columns)?;
        let keys = self.json[meta::META]
            .as_object()
            .ok_or_else(|| bad(self.path, "meta is not an object of columns"))?;
        if let Some(extra) = keys.keys().find(|k| !columns.contains(k)) {
            return Err(bad(
                self.path,
                format!("meta.{extra} is not one of the columns meta_columns names"),
            ));
        }
        let mut values = Vec::with_capacity(columns.len());
        for c in &columns {
            let v: Vec<String> = self.json[meta::META][c.as_str()]
                .as_array()
                .and_then(|a| a.iter().map(|v| v.as_str().map(str::to_string)).collect())
                .ok_or_else(|| bad(self.path, format!("meta.{c} is not a list of strings")))?;
            if v.len() != rows {
                return Err(bad(
                    self.path,
                    format!("meta.{c} holds {} values for {rows} rows of mel", v.len()),
                ));
            }
            values.push(v);
        }
        super::Metadata::new(self.path, columns, values)
    }

    /// The list of `len` numbers at `key`, if present.
    fn numbers(&self, key: &str, len: usize) -> Result<Option<Vec<f64>>> {
        match &self.json[key] {
            serde_json::Value::Null => Ok(None),
            v => v
                .as_array()
                .filter(|a| a.len() == len)
                .and_then(|a| a.iter().map(|x| x.as_f64()).collect::<Option<Vec<_>>>())
                .map(Some)
                .ok_or_else(|| bad(self.path, format!("{key} is not a list of {len} numbers"))),
        }
    }

    /// The clips' paths, one per row of mel, and `rows` where given agreeing with mel's.
    fn paths(&self, rows: usize) -> Result<Vec<String>> {
        let paths = self.strings(meta::PATHS)?;
        if paths.len() != rows {
            return Err(bad(
                self.path,
                format!("{} paths for {rows} rows of mel", paths.len()),
            ));
        }
        if let Some(r) = self.json[meta::ROWS].as_u64()
            && r != rows as u64
        {
            return Err(bad(self.path, format!("rows is {r}; mel.npy has {rows}")));
        }
        Ok(paths)
    }

    /// The names of mel's `ndim` axes (the defaults when `mel_dims` is absent).
    fn dims(&self, ndim: usize) -> Result<Vec<String>> {
        let dims = if self.json[meta::MEL_DIMS].is_null() {
            default_dims(ndim)
        } else {
            self.strings(meta::MEL_DIMS)?
        };
        if dims.len() != ndim {
            return Err(bad(
                self.path,
                format!("mel_dims names {} axes, mel has {}", dims.len(), ndim),
            ));
        }
        Ok(dims)
    }

    /// The per-mel-bin statistics, where both lists are present and count some values.
    fn stats(&self, n_mels: usize) -> Result<Option<MelStats>> {
        Ok(match (
            self.numbers(meta::MEL_MEAN, n_mels)?,
            self.numbers(meta::MEL_STD, n_mels)?,
        ) {
            (Some(mean), Some(std)) => Some(MelStats {
                mean,
                std,
                count: self.json[meta::STATS_COUNT].as_u64().unwrap_or(0),
            }),
            _ => None,
        }
        .filter(|s| s.count > 0))
    }

    /// The column of `rows` counts at `key`, if present: whole numbers from 0 to `max`.
    fn int_column(&self, key: &str, rows: usize, max: f64) -> Result<Option<Vec<f64>>> {
        let v = self.numbers(key, rows)?;
        if let Some(v) = &v
            && v.iter().any(|&x| x < 0.0 || x > max || x.fract() != 0.0)
        {
            return Err(bad(
                self.path,
                format!("{key} holds a value that is not a count"),
            ));
        }
        Ok(v)
    }

    /// Each clip's source rate, channels and frames, where recorded.
    fn provenance(&self, rows: usize) -> Result<Provenance> {
        Ok(Provenance {
            source_rate: self
                .int_column(meta::SOURCE_RATE, rows, u32::MAX as f64)?
                .map(|v| v.into_iter().map(|x| x as u32).collect()),
            source_channels: self
                .int_column(meta::SOURCE_CHANNELS, rows, u16::MAX as f64)?
                .map(|v| v.into_iter().map(|x| x as u16).collect()),
            source_frames: self
                .int_column(meta::SOURCE_FRAMES, rows, u64::MAX as f64)?
                .map(|v| v.into_iter().map(|x| x as u64).collect()),
        })
    }
}

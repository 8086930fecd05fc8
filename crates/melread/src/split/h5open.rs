//! Opening `OUT/{split}.h5`: every dataset comes through [`H5Input`]'s checks, then `mel`'s
//! read path is chosen (map, positioned reads, chunks decoded here, or the library).

use std::path::Path;

use hdf5::types::{FloatSize, IntSize, TypeDescriptor, VarLenAscii, VarLenUnicode};
use mel_core::format::{self, h5 as key};
use mel_core::stats::MelStats;
use mel_core::{Dtype, Error, Result};

use super::checks::{check_labels, check_shape};
use super::chunks::ChunkStore;
use super::store::{Library, Store, contiguous, h5err};
use super::{
    Access, Format, Metadata, OpenOptions, Provenance, ReadMode, Split, default_dims, stem,
};
use crate::h5file::{Checked, H5Input, Storage, text};
use crate::limits::bad;

/// A scalar string attribute of `loc`, if present and UTF-8.
fn attr_string(loc: &hdf5::Location, name: &str) -> Option<String> {
    let a = loc.attr(name).ok()?;
    if let Ok(v) = a.read_scalar::<VarLenUnicode>() {
        return text(v.as_bytes());
    }
    a.read_scalar::<VarLenAscii>()
        .ok()
        .and_then(|v| text(v.as_bytes()))
}

/// Checks that a dataset is 1-D with `rows` elements.
fn check_rows(path: &Path, c: &Checked, name: &str, rows: usize) -> Result<()> {
    if c.ds.shape() != [rows] {
        return Err(bad(
            path,
            format!("{name} has shape {:?}; [{rows}] is expected", c.ds.shape()),
        ));
    }
    Ok(())
}

/// A 1-D dataset of `rows` elements read as `T`, if present; an error if present with
/// another shape or a structure [`H5Input`] refuses.
fn optional_column<T: hdf5::H5Type>(
    input: &H5Input,
    path: &Path,
    name: &str,
    rows: usize,
) -> Result<Option<Vec<T>>> {
    let Some(c) = input.dataset(name)? else {
        return Ok(None);
    };
    check_rows(path, &c, name, rows)?;
    c.ds.read_raw::<T>()
        .map(Some)
        .map_err(h5err(path, &format!("reading {name}")))
}

/// Strings stored as variable-length UTF-8 or ASCII, each checked to be UTF-8 (the
/// first that is not is named).
fn strings(
    path: &Path,
    what: &str,
    utf8: hdf5::Result<Vec<VarLenUnicode>>,
    ascii: impl FnOnce() -> hdf5::Result<Vec<VarLenAscii>>,
) -> Result<Vec<String>> {
    let checked = |i: usize, bytes: &[u8]| {
        text(bytes).ok_or_else(|| bad(path, format!("{what} {i} is not UTF-8 text")))
    };
    match utf8 {
        Ok(v) => v
            .iter()
            .enumerate()
            .map(|(i, s)| checked(i, s.as_bytes()))
            .collect(),
        Err(_) => ascii()
            .map_err(h5err(path, &format!("reading {what}")))?
            .iter()
            .enumerate()
            .map(|(i, s)| checked(i, s.as_bytes()))
            .collect(),
    }
}

/// mel's element type, from its HDF5 type and what the file says about bfloat16.
fn mel_dtype(
    path: &Path,
    mel: &hdf5::Dataset,
    config: Option<&serde_json::Value>,
) -> Result<(Dtype, bool)> {
    let datatype = mel.dtype().map_err(h5err(path, "mel's element type"))?;
    let little = datatype.byte_order() == hdf5::datatype::ByteOrder::LittleEndian;
    let desc = datatype
        .to_descriptor()
        .map_err(h5err(path, "mel's element type"))?;
    let dtype_note = attr_string(mel, key::DTYPE).unwrap_or_default();
    let says_bf16 = dtype_note.starts_with("bf16")
        || dtype_note.starts_with("bfloat16")
        || config
            .and_then(|c| c.pointer("/output/dtype"))
            .and_then(|d| d.as_str())
            == Some("bf16");
    let dtype = match desc {
        TypeDescriptor::Float(FloatSize::U4) => Dtype::F32,
        TypeDescriptor::Float(FloatSize::U2) => Dtype::F16,
        TypeDescriptor::Unsigned(IntSize::U2) if says_bf16 => Dtype::Bf16,
        TypeDescriptor::Unsigned(IntSize::U2) => {
            return Err(bad(
                path,
                "mel is uint16 but neither its dtype attribute nor the config says bfloat16",
            ));
        }
        other => {
            return Err(Error::unsupported(
                path,
                format!("mel's element type {other} (f32, f16 or bf16 as uint16 are read)"),
            ));
        }
    };
    // What the data is must agree with what the file says it is: f16 data under a bf16
    // attribute, or a config asking another dtype, is not a file melctl wrote.
    let config_dtype = config
        .and_then(|c| c.pointer("/output/dtype"))
        .and_then(|d| d.as_str());
    if (says_bf16 && dtype != Dtype::Bf16) || config_dtype.is_some_and(|d| d != dtype.name()) {
        return Err(bad(
            path,
            format!(
                "mel is stored as {} but its dtype attribute ({dtype_note:?}) or the config ({}) says otherwise",
                dtype.name(),
                config_dtype.unwrap_or("none")
            ),
        ));
    }
    Ok((dtype, little))
}

/// Where `mel`'s bytes are, and how to read them.
fn mel_store(
    input: &H5Input,
    mel: &Checked,
    little: bool,
    shape: &[usize],
    dtype: Dtype,
    data_bytes: u64,
    opts: &OpenOptions,
) -> Result<(Access, Store)> {
    let path = input.path();
    let lib = || Library {
        mel: mel.ds.clone(),
    };
    let direct = matches!(opts.read, ReadMode::Map | ReadMode::Pread);
    if opts.read == ReadMode::Library {
        return Ok((Access::Library("asked for".into()), Store::Library(lib())));
    }
    if !little {
        if direct {
            return Err(Error::unsupported(
                path,
                "big-endian mel can only be read through the HDF5 library",
            ));
        }
        return Ok((
            Access::Library("mel is big-endian".into()),
            Store::Library(lib()),
        ));
    }
    let file = || input.file.try_clone().map_err(|e| Error::read(path, e));
    match &mel.storage {
        Storage::Empty => contiguous(path, file()?, 0, 0, ReadMode::Pread),
        Storage::Contiguous { offset, len } if data_bytes <= *len => {
            contiguous(path, file()?, *offset, data_bytes, opts.read)
        }
        Storage::Contiguous { len, .. } => Err(bad(
            path,
            format!("mel has {len} bytes of storage for {data_bytes} bytes of values"),
        )),
        Storage::Chunked {
            chunk,
            filters,
            chunks,
        } => {
            if direct {
                return Err(Error::unsupported(
                    path,
                    "mel is chunked: it is read chunk by chunk, not mapped",
                ));
            }
            let clip_bytes = data_bytes / shape[0].max(1) as u64;
            let store = ChunkStore::new(
                file()?,
                chunk,
                filters,
                chunks,
                shape,
                dtype.size(),
                clip_bytes,
            );
            match store {
                Ok(store) => Ok((store.access(), Store::Chunks(store))),
                Err(why) => Ok((Access::Library(why), Store::Library(lib()))),
            }
        }
    }
}

/// Opens `path` as a melctl HDF5 output.
pub(super) fn open_hdf5(path: &Path, opts: &OpenOptions) -> Result<Split> {
    let input = H5Input::open(path)?;
    let h5 = &input.h5;
    // The format version first: a newer layout is named as such, not as damage.
    let version = format_version(path, h5)?;
    format::check_version(version).map_err(|why| bad(path, why))?;
    let mel = input.require(key::MEL)?;
    let shape = mel.ds.shape();
    let config = config_attr(path, h5)?;
    let (dtype, little) = mel_dtype(path, &mel.ds, config.as_ref())?;
    let data_bytes = check_shape(path, &shape, dtype.size())?;
    let rows = shape[0];
    let (access, store) = mel_store(&input, &mel, little, &shape, dtype, data_bytes, opts)?;

    // Labels, paths, names, provenance, statistics.
    let labels = read_labels(&input, rows)?;
    let paths = read_paths(&input, rows)?;
    let meta = read_meta(&input, rows)?;
    let label_names = read_label_names(&input)?;
    check_labels(path, &labels, label_names.len())?;
    let dims = mel_dims(path, h5, shape.len())?;
    let stats = read_stats(&input, shape[shape.len() - 2])?;
    let provenance = Provenance {
        source_rate: optional_column(&input, path, key::SOURCE_RATE, rows)?,
        source_channels: optional_column(&input, path, key::SOURCE_CHANNELS, rows)?,
        source_frames: optional_column(&input, path, key::SOURCE_FRAMES, rows)?,
    };
    let name = attr_string(h5, key::SPLIT).unwrap_or_else(|| stem(path, format::HDF5_SUFFIX));
    Ok(Split {
        path: path.to_path_buf(),
        format: Format::Hdf5,
        name,
        shape,
        dims,
        dtype,
        label_names,
        labels,
        paths,
        meta,
        config,
        version: attr_string(h5, key::MELCTL_VERSION),
        build: attr_string(h5, key::BUILD_ID),
        stats,
        provenance,
        access,
        store,
        chunk_cache: opts.chunk_cache,
        whole: None,
        windows: None,
    })
}

/// The `format_version` attribute, if present: an unsigned integer scalar, or an error.
fn format_version(path: &Path, h5: &hdf5::File) -> Result<Option<u64>> {
    Ok(match h5.attr(format::FORMAT_VERSION) {
        Err(_) => None,
        Ok(a) => {
            // The library converts on read (an int8 -1 would read as 0, a float 2.7 as 2):
            // only the unsigned integer scalar melctl writes is a version.
            let unsigned = a
                .dtype()
                .and_then(|t| t.to_descriptor())
                .is_ok_and(|d| matches!(d, hdf5::types::TypeDescriptor::Unsigned(_)));
            if !unsigned || a.ndim() != 0 {
                return Err(bad(
                    path,
                    "the format_version attribute is not an unsigned whole number (melctl writes one)",
                ));
            }
            Some(
                a.read_scalar::<u64>()
                    .map_err(h5err(path, "the format_version attribute"))?,
            )
        }
    })
}

/// The `config` attribute, if present, parsed as the JSON melctl writes there.
fn config_attr(path: &Path, h5: &hdf5::File) -> Result<Option<serde_json::Value>> {
    Ok(match attr_string(h5, key::CONFIG) {
        Some(text) => Some(serde_json::from_str(&text).map_err(|e| {
            bad(
                path,
                format!("the `config` attribute is not the JSON melctl writes ({e})"),
            )
        })?),
        None => None,
    })
}

/// The `label` dataset: `rows` whole-number class ids.
fn read_labels(input: &H5Input, rows: usize) -> Result<Vec<i64>> {
    let path = input.path();
    let label = input.require(key::LABEL)?;
    check_rows(path, &label, key::LABEL, rows)?;
    // The library converts on read: float labels would be truncated (1.7 read as 1).
    let label_type = label
        .ds
        .dtype()
        .and_then(|t| t.to_descriptor())
        .map_err(h5err(path, "label's element type"))?;
    if !matches!(
        label_type,
        TypeDescriptor::Integer(_) | TypeDescriptor::Unsigned(_)
    ) {
        return Err(bad(
            path,
            format!("label holds {label_type}, not the whole-number class ids melctl writes"),
        ));
    }
    label
        .ds
        .read_raw::<i64>()
        .map_err(h5err(path, "reading label"))
}

/// The `path` dataset: `rows` strings.
fn read_paths(input: &H5Input, rows: usize) -> Result<Vec<String>> {
    let path = input.path();
    let pds = input.require(key::PATH)?;
    check_rows(path, &pds, key::PATH, rows)?;
    strings(path, key::PATH, pds.ds.read_raw::<VarLenUnicode>(), || {
        pds.ds.read_raw::<VarLenAscii>()
    })
}

/// The metadata: the columns the root attribute `meta_columns` names (none without it),
/// each a dataset of `rows` strings in the group `meta`, which may hold no links.
fn read_meta(input: &H5Input, rows: usize) -> Result<Metadata> {
    let path = input.path();
    let Ok(attr) = input.h5.attr(key::META_COLUMNS) else {
        if input.h5.link_exists(key::META) {
            return Err(bad(
                path,
                "a `meta` group without the `meta_columns` attribute that names its columns",
            ));
        }
        return Ok(Metadata::default());
    };
    input.check_attr(&attr, key::META_COLUMNS)?;
    let columns = strings(
        path,
        key::META_COLUMNS,
        attr.read_raw::<VarLenUnicode>(),
        || attr.read_raw::<VarLenAscii>(),
    )?;
    Metadata::check_columns(path, &columns)?;
    let group = input.h5.group(key::META).map_err(|e| {
        bad(
            path,
            format!("`meta_columns` names columns but `meta` is not a group: {e}"),
        )
    })?;
    input.refuse_links(&group, "the group `meta`")?;
    let members = group
        .member_names()
        .map_err(|e| bad(path, format!("listing the group `meta`: {e}")))?;
    if let Some(extra) = members.iter().find(|m| !columns.contains(m)) {
        return Err(bad(
            path,
            format!("`meta/{extra}` is not one of the columns `meta_columns` names"),
        ));
    }
    let mut values = Vec::with_capacity(columns.len());
    for c in &columns {
        let name = format!("{}/{c}", key::META);
        let ds = input.dataset(&name)?.ok_or_else(|| {
            bad(
                path,
                format!("no `{name}` dataset, which `meta_columns` names"),
            )
        })?;
        check_rows(path, &ds, &name, rows)?;
        values.push(strings(
            path,
            &name,
            ds.ds.read_raw::<VarLenUnicode>(),
            || ds.ds.read_raw::<VarLenAscii>(),
        )?);
    }
    Metadata::new(path, columns, values)
}

/// The `label_names` attribute (required), through [`H5Input`]'s checks.
fn read_label_names(input: &H5Input) -> Result<Vec<String>> {
    let path = input.path();
    let names_attr = input
        .h5
        .attr(key::LABEL_NAMES)
        .map_err(h5err(path, "no `label_names` attribute"))?;
    input.check_attr(&names_attr, key::LABEL_NAMES)?;
    strings(
        path,
        key::LABEL_NAMES,
        names_attr.read_raw::<VarLenUnicode>(),
        || names_attr.read_raw::<VarLenAscii>(),
    )
}

/// The names of mel's `ndim` axes: the `mel_dims` attribute, or the defaults.
fn mel_dims(path: &Path, h5: &hdf5::File, ndim: usize) -> Result<Vec<String>> {
    let dims: Vec<String> = match attr_string(h5, key::MEL_DIMS) {
        Some(d) => d.split(',').map(|s| s.trim().to_string()).collect(),
        None => default_dims(ndim),
    };
    if dims.len() != ndim {
        return Err(bad(
            path,
            format!("mel_dims names {} axes, mel has {}", dims.len(), ndim),
        ));
    }
    Ok(dims)
}

/// The per-mel-bin statistics, where both `mel_mean` and `mel_std` are present and
/// count some values.
fn read_stats(input: &H5Input, n_mels: usize) -> Result<Option<MelStats>> {
    let (path, h5) = (input.path(), &input.h5);
    Ok(match (
        optional_column::<f64>(input, path, key::MEL_MEAN, n_mels)?,
        optional_column::<f64>(input, path, key::MEL_STD, n_mels)?,
    ) {
        (Some(mean), Some(std)) => {
            let count = h5
                .attr(key::STATS_COUNT)
                .or_else(|_| {
                    h5.dataset(key::MEL_MEAN)
                        .and_then(|d| d.attr(key::STATS_COUNT))
                })
                .and_then(|a| a.read_scalar::<u64>())
                .unwrap_or(0);
            Some(MelStats { mean, std, count })
        }
        _ => None,
    }
    // Statistics over no values (a split with no clips) are not statistics.
    .filter(|s| s.count > 0))
}

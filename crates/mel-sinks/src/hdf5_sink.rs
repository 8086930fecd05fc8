//! The HDF5 sink: one file per split holding `mel`, `label`, `path` and attributes,
//! written under a temporary name and renamed on commit.

use std::path::{Path, PathBuf};

use hdf5::types::VarLenUnicode;
use hdf5::{Dataset, File, Hyperslab, SliceOrIndex};
use mel_core::{ClipMeta, Dtype, Error, OutputBuf, Result, Sink, SinkSpec};

use crate::atomic;

/// Writes `OUT/{split}.h5`.
pub struct Hdf5Sink {
    final_path: PathBuf,
    temp_path: PathBuf,
    file: Option<File>,
    mel: Dataset,
    spec: SinkSpec,
    labels: Vec<Option<i64>>,
    paths: Vec<Option<String>>,
    written: usize,
}

impl Hdf5Sink {
    /// Creates the temporary file and the `mel` dataset for `spec` in `out_dir`.
    pub fn create(out_dir: &Path, spec: SinkSpec) -> Result<Self> {
        let final_path = out_dir.join(format!("{}.h5", spec.split));
        let temp_path = atomic::temp_path_for(&final_path);
        let err = |e: hdf5::Error| Error::Sink {
            path: final_path.clone(),
            message: e.to_string(),
        };
        let file = File::create(&temp_path).map_err(err)?;
        let clip_shape = spec.plan.clip_shape();
        let mut shape = vec![spec.rows];
        shape.extend(&clip_shape);
        let h5 = &spec.plan.config.hdf5;
        let chunk_clips = h5.chunk_clips.min(spec.rows.max(1));
        let builder = match spec.plan.dtype {
            Dtype::F32 => file.new_dataset::<f32>(),
            Dtype::F16 => file.new_dataset::<half::f16>(),
            Dtype::Bf16 => file.new_dataset::<u16>(),
        };
        let mut builder = builder.shape(shape);
        if chunk_clips > 0 && spec.rows > 0 {
            let mut chunk = vec![chunk_clips];
            chunk.extend(&clip_shape);
            builder = builder.chunk(chunk);
            if h5.gzip > 0 {
                builder = builder.deflate(h5.gzip);
            }
        } else {
            builder = builder.no_chunk();
        }
        let mel = builder.create("mel").map_err(err)?;
        let rows = spec.rows;
        Ok(Hdf5Sink {
            final_path,
            temp_path,
            file: Some(file),
            mel,
            spec,
            labels: vec![None; rows],
            paths: vec![None; rows],
            written: 0,
        })
    }

    fn err(&self, message: impl std::fmt::Display) -> Error {
        Error::Sink {
            path: self.final_path.clone(),
            message: message.to_string(),
        }
    }

    fn finish(&mut self) -> Result<()> {
        let file = self.file.as_ref().expect("file is open until commit");
        let labels: Vec<i64> = self.labels.iter().map(|l| l.expect("checked")).collect();
        let paths: Vec<VarLenUnicode> = self
            .paths
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
        text_attr("config", &self.spec.plan.config.resolved_json())?;
        text_attr("melctl_version", env!("CARGO_PKG_VERSION"))?;
        text_attr("split", &self.spec.split)?;
        let dims: Vec<&str> = ["clip"]
            .into_iter()
            .chain(self.spec.plan.long_count.map(|_| "long"))
            .chain(self.spec.plan.short_count.map(|_| "short"))
            .chain(["mel", "frame"])
            .collect();
        text_attr("mel_dims", &dims.join(","))?;
        let dtype_note = match self.spec.plan.dtype {
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
        "hdf5"
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
            || data.dtype() != self.spec.plan.dtype
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

    fn commit(mut self: Box<Self>) -> Result<PathBuf> {
        if let Some(missing) = self.labels.iter().position(Option::is_none) {
            return Err(self.err(format!(
                "{} of {} rows were never written (first: row {missing}); the output was not committed",
                self.labels.iter().filter(|l| l.is_none()).count(),
                self.spec.rows
            )));
        }
        self.finish()?;
        if let Some(f) = self.file.take() {
            f.close().map_err(|e| self.err(e))?;
        }
        atomic::commit(&self.temp_path, &self.final_path)?;
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

//! The npy sink: one folder per split of plain arrays that numpy, PyTorch and Rust can
//! memory-map with no HDF5 library:
//!
//! ```text
//! OUT/{split}.npy.d/mel.npy     [N, long?, short?, n_mels, frames]  <f4 | <f2 | <u2 (bf16 bits)
//! OUT/{split}.npy.d/label.npy   [N] <i8
//! OUT/{split}.npy.d/meta.json   paths (in row order), label_names, config, dims, dtype, version
//! ```
//!
//! The folder is built as `.{split}.npy.d.partial-PID` and renamed into place when
//! complete; an existing output is swapped out atomically (Linux `renameat2` with
//! `RENAME_EXCHANGE`) and then removed, so the final path always holds either the old or
//! the new complete output. The `.npy` header is written here, not by ndarray-npy: it
//! must name `<f2` for f16 and be rewritten in place (same length) when the row count
//! shrinks after failed files.

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::Path;

use mel_core::atomic::{self, Staged};
use mel_core::{ClipMeta, Dtype, Error, Finished, OutputBuf, Result, Sink, SinkSpec};

use crate::errors::write_failed;
use crate::rows::RowLedger;
use mel_core::format::meta;
use mel_core::format::npy::{self, HEADER_LEN, NpyType};
use mel_core::row_stats::RowStats;

/// Options of the npy sink.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct NpyOptions {
    /// Flush the files to disk before swapping the folder into place.
    pub fsync: bool,
}

/// Writes `OUT/{split}.npy.d/`.
pub struct NpySink {
    staged: Staged,
    mel: Option<File>,
    spec: SinkSpec,
    ledger: RowLedger,
    stats: RowStats,
    opts: NpyOptions,
    /// The build this output belongs to (`build_id` in `meta.json`).
    build_id: Option<String>,
}

impl NpySink {
    /// Creates, beside `final_dir` (where the build decided the split goes: melkit's
    /// `final_path`), the temporary folder and a `mel.npy` sized for `spec.rows` rows.
    pub fn create(final_dir: &Path, spec: SinkSpec, opts: NpyOptions) -> Result<Self> {
        let final_dir = final_dir.to_path_buf();
        atomic::remove_stale_partials(&final_dir);
        let staged = Staged::dir(&final_dir)?;
        let path = staged.path().join(mel_core::format::NPY_MEL);
        let file = File::create(&path).map_err(|e| Error::io(&path, e))?;
        let mut shape = vec![spec.rows];
        shape.extend(spec.plan.clip_shape());
        let failed = |what, e| write_failed(&final_dir, what, &e);
        file.write_all_at(&npy::header(NpyType::of(spec.plan.dtype()), &shape), 0)
            .map_err(|e| failed("writing the header of mel.npy", e))?;
        file.set_len((HEADER_LEN + spec.rows * spec.plan.bytes_per_clip()) as u64)
            .map_err(|e| failed("sizing mel.npy", e))?;
        let rows = spec.rows;
        let stats = RowStats::new(&spec.plan);
        Ok(NpySink {
            staged,
            mel: Some(file),
            ledger: RowLedger::new(rows, spec.meta_columns.len()),
            spec,
            stats,
            opts,
            build_id: None,
        })
    }

    /// The same sink, writing `build_id` into `meta.json` so that readers can tell which
    /// build of the folder the output comes from ([`mel_core::record`]).
    pub fn with_build(mut self, build_id: &str) -> Self {
        self.build_id = Some(build_id.to_string());
        self
    }

    fn err(&self, message: impl std::fmt::Display) -> Error {
        Error::output(self.staged.final_path(), message)
    }

    fn write_small_files(&self, rows: usize) -> Result<()> {
        let dir = self.staged.path();
        let final_dir = self.staged.final_path();
        let io = |p: &Path, e| {
            let name = p.file_name().unwrap_or_default().to_string_lossy();
            write_failed(final_dir, &format!("writing {name}"), &e)
        };
        let label_path = dir.join(mel_core::format::NPY_LABEL);
        let mut bytes = npy::header(NpyType::I64, &[rows]);
        bytes.extend(
            self.ledger
                .labels(rows)
                .iter()
                .flat_map(|l| l.to_le_bytes()),
        );
        std::fs::write(&label_path, bytes).map_err(|e| io(&label_path, e))?;
        let plan = &self.spec.plan;
        let stats = self.stats.finish();
        let mut meta = serde_json::json!({
            (meta::FORMAT_VERSION): mel_core::format::VERSION,
            (meta::MELCTL_VERSION): env!("CARGO_PKG_VERSION"),
            (meta::SPLIT): self.spec.split,
            (meta::ROWS): rows,
            (meta::MEL_DIMS): plan.dim_names(),
            (meta::DTYPE): plan.dtype().name(),
            (meta::DTYPE_NOTE): if plan.dtype() == Dtype::Bf16 { "bfloat16 stored as uint16 bit patterns" } else { "" },
            (meta::LABEL_NAMES): self.spec.label_names,
            (meta::PATHS): self.ledger.paths(rows),
            (meta::MEL_MEAN): stats.mean,
            (meta::MEL_STD): stats.std,
            (meta::STATS_COUNT): self.stats.count(),
            (meta::SOURCE_RATE): self.ledger.sources(rows).iter().map(|s| s.rate).collect::<Vec<_>>(),
            (meta::SOURCE_CHANNELS): self.ledger.sources(rows).iter().map(|s| s.channels).collect::<Vec<_>>(),
            (meta::SOURCE_FRAMES): self.ledger.sources(rows).iter().map(|s| s.frames).collect::<Vec<_>>(),
            (meta::CONFIG): serde_json::from_str::<serde_json::Value>(&self.spec.provenance).unwrap_or_default(),
            (meta::BUILD_ID): self.build_id,
        });
        if !self.spec.meta_columns.is_empty() {
            let values: serde_json::Map<String, serde_json::Value> = (self.spec.meta_columns)
                .iter()
                .enumerate()
                .map(|(i, c)| (c.clone(), self.ledger.meta_column(i, rows).into()))
                .collect();
            meta[meta::META_COLUMNS] = self.spec.meta_columns.clone().into();
            meta[meta::META] = values.into();
        }
        let meta_path = dir.join(mel_core::format::NPY_META);
        std::fs::write(
            &meta_path,
            serde_json::to_vec_pretty(&meta).expect("meta serialises"),
        )
        .map_err(|e| io(&meta_path, e))?;
        Ok(())
    }
}

impl Sink for NpySink {
    fn name(&self) -> &str {
        "npy"
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
        let offset = (HEADER_LEN + first_row * self.spec.plan.bytes_per_clip()) as u64;
        let file = self.mel.as_ref().expect("open until finish");
        file.write_all_at(data.as_bytes(), offset).map_err(|e| {
            write_failed(
                self.staged.final_path(),
                &format!("writing rows {first_row}.."),
                &e,
            )
        })
    }

    fn finish(mut self: Box<Self>, rows: usize) -> Result<Finished> {
        if let Err(m) = self.ledger.check(rows) {
            return Err(self.err(m));
        }
        if let Err(m) = self.stats.check_complete() {
            return Err(self.err(m));
        }
        let file = self.mel.take().expect("open until finish");
        if rows < self.ledger.capacity() {
            let mut shape = vec![rows];
            shape.extend(self.spec.plan.clip_shape());
            let failed = |what, e| write_failed(self.staged.final_path(), what, &e);
            file.write_all_at(&npy::header(NpyType::of(self.spec.plan.dtype()), &shape), 0)
                .map_err(|e| failed("rewriting the header of mel.npy", e))?;
            file.set_len((HEADER_LEN + rows * self.spec.plan.bytes_per_clip()) as u64)
                .map_err(|e| failed("shrinking mel.npy", e))?;
        }
        drop(file);
        self.write_small_files(rows)?;
        let bytes = std::fs::read_dir(self.staged.path())
            .and_then(|d| {
                d.map(|e| e.and_then(|e| e.metadata()).map(|m| m.len()))
                    .sum()
            })
            .map_err(|e| Error::io(self.staged.path(), e))?;
        let provenance = self.ledger.provenance(rows, &self.spec.plan);
        let NpySink { staged, opts, .. } = *self;
        Ok(Finished::new(staged, opts.fsync, bytes).with_provenance(provenance))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use mel_core::{Config, MelPlan};

    /// Where split `split` goes under `out`.
    fn npy_dir(out: &Path, split: &str) -> std::path::PathBuf {
        out.join(mel_core::format::output_name(
            split,
            mel_core::format::NPY_SUFFIX,
        ))
    }

    fn spec(rows: usize, dtype: Dtype) -> SinkSpec {
        let mut c = Config::default();
        c.output.dtype = dtype;
        c.audio.clip_seconds = 1.0;
        c.output.fsync = false;
        SinkSpec {
            split: "train".into(),
            rows,
            plan: MelPlan::from_config(&c).unwrap(),
            label_names: vec!["a".into(), "b".into()],
            meta_columns: vec![],
            provenance: c.resolved_json(),
        }
    }

    fn batch(plan: &MelPlan, first: usize, n: usize) -> (Vec<ClipMeta>, OutputBuf) {
        let mut data = OutputBuf::zeros(Dtype::F32, n * plan.values_per_clip());
        if let OutputBuf::F32(v) = &mut data {
            for (i, x) in v.iter_mut().enumerate() {
                *x = (first * plan.values_per_clip() + i) as f32;
            }
        }
        let meta = (first..first + n)
            .map(|i| ClipMeta {
                index: i,
                source: mel_core::SourceInfo::default(),
                label: (i % 2) as i64,
                path: format!("c/{i}.wav"),
                meta: std::sync::Arc::from([]),
            })
            .collect();
        (meta, data)
    }

    #[test]
    fn rows_out_of_order_shrink_and_an_atomic_replace() {
        let t = tempfile::tempdir().unwrap();
        let s = spec(5, Dtype::F32);
        let plan = s.plan.clone();
        let mut sink = Box::new(
            NpySink::create(
                &npy_dir(t.path(), &s.split),
                s.clone(),
                NpyOptions::default(),
            )
            .unwrap(),
        );
        let (m, d) = batch(&plan, 2, 2);
        sink.write(2, &m, &d).unwrap();
        let (m, d) = batch(&plan, 0, 2);
        sink.write(0, &m, &d).unwrap();
        assert!(
            sink.write(1, &m[..1], &batch(&plan, 1, 1).1).is_err(),
            "row 1 twice"
        );
        let dir = sink.finish(4).unwrap().publish().unwrap();
        let bytes = std::fs::read(dir.join("mel.npy")).unwrap();
        let header = String::from_utf8_lossy(&bytes[..HEADER_LEN]);
        assert!(header.starts_with("\u{93}NUMPY") || bytes.starts_with(b"\x93NUMPY"));
        assert!(
            header.contains("'descr': '<f4'") && header.contains("'shape': (4, 7, 3, 32, 5)"),
            "{header}"
        );
        assert_eq!(bytes.len(), HEADER_LEN + 4 * plan.bytes_per_clip());
        let last = f32::from_le_bytes(bytes[bytes.len() - 4..].try_into().unwrap());
        assert_eq!(last, (4 * plan.values_per_clip() - 1) as f32);
        let meta: serde_json::Value =
            serde_json::from_slice(&std::fs::read(dir.join(mel_core::format::NPY_META)).unwrap())
                .unwrap();
        assert_eq!(meta["paths"][3], "c/3.wav");
        assert_eq!(
            std::fs::read(dir.join(mel_core::format::NPY_LABEL))
                .unwrap()
                .len(),
            HEADER_LEN + 4 * 8
        );

        // A second build replaces the first whole; an uncommitted one leaves it untouched.
        let mut again = Box::new(
            NpySink::create(
                &npy_dir(t.path(), "train"),
                spec(1, Dtype::F32),
                NpyOptions::default(),
            )
            .unwrap(),
        );
        let (m, d) = batch(&plan, 0, 1);
        again.write(0, &m, &d).unwrap();
        again.finish(1).unwrap().publish().unwrap();
        let meta: serde_json::Value =
            serde_json::from_slice(&std::fs::read(dir.join(mel_core::format::NPY_META)).unwrap())
                .unwrap();
        assert_eq!(meta["rows"], 1);
        drop(Box::new(
            NpySink::create(
                &npy_dir(t.path(), "train"),
                spec(3, Dtype::F32),
                NpyOptions::default(),
            )
            .unwrap(),
        ));
        let names: Vec<_> = std::fs::read_dir(t.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(
            names,
            vec![std::ffi::OsString::from("train.npy.d")],
            "no leftovers"
        );
    }
}

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
use std::path::{Path, PathBuf};

use mel_core::{ClipMeta, Dtype, Error, OutputBuf, Result, Sink, SinkSpec};

/// Header bytes reserved for `mel.npy` (a multiple of 64, room for any shape).
const HEADER_LEN: usize = 256;

/// Options of the npy sink.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct NpyOptions {
    /// Flush the files to disk before swapping the folder into place.
    pub fsync: bool,
}

/// Writes `OUT/{split}.npy.d/`.
pub struct NpySink {
    final_dir: PathBuf,
    temp_dir: PathBuf,
    mel: Option<File>,
    spec: SinkSpec,
    labels: Vec<Option<i64>>,
    paths: Vec<Option<String>>,
    opts: NpyOptions,
}

/// The `.npy` v1.0 header for `descr` and `shape`, padded to `HEADER_LEN` bytes.
fn npy_header(descr: &str, shape: &[usize]) -> Vec<u8> {
    let dims: Vec<String> = shape.iter().map(|d| d.to_string()).collect();
    let shape_text = if dims.len() == 1 {
        format!("({},)", dims[0])
    } else {
        format!("({})", dims.join(", "))
    };
    let dict = format!("{{'descr': '{descr}', 'fortran_order': False, 'shape': {shape_text}, }}");
    let mut h = b"\x93NUMPY\x01\x00".to_vec();
    let len = (HEADER_LEN - 10) as u16;
    h.extend_from_slice(&len.to_le_bytes());
    h.extend_from_slice(dict.as_bytes());
    h.resize(HEADER_LEN - 1, b' ');
    h.push(b'\n');
    h
}

fn descr(dtype: Dtype) -> &'static str {
    match dtype {
        Dtype::F32 => "<f4",
        Dtype::F16 => "<f2",
        Dtype::Bf16 => "<u2",
    }
}

impl NpySink {
    /// Creates the temporary folder and a `mel.npy` sized for `spec.rows` rows.
    pub fn create(out_dir: &Path, spec: SinkSpec, opts: NpyOptions) -> Result<Self> {
        let final_dir = out_dir.join(format!("{}.npy.d", spec.split));
        crate::atomic::remove_stale_partials(&final_dir);
        let temp_dir = out_dir.join(format!(
            ".{}.npy.d.partial-{}",
            spec.split,
            std::process::id()
        ));
        let _ = std::fs::remove_dir_all(&temp_dir);
        std::fs::create_dir_all(&temp_dir).map_err(|e| Error::io(&temp_dir, e))?;
        let path = temp_dir.join("mel.npy");
        let file = File::create(&path).map_err(|e| Error::io(&path, e))?;
        let mut shape = vec![spec.rows];
        shape.extend(spec.plan.clip_shape());
        file.write_all_at(&npy_header(descr(spec.plan.dtype()), &shape), 0)
            .map_err(|e| Error::io(&path, e))?;
        file.set_len((HEADER_LEN + spec.rows * spec.plan.bytes_per_clip()) as u64)
            .map_err(|e| Error::io(&path, e))?;
        let rows = spec.rows;
        Ok(NpySink {
            final_dir,
            temp_dir,
            mel: Some(file),
            spec,
            labels: vec![None; rows],
            paths: vec![None; rows],
            opts,
        })
    }

    fn err(&self, message: impl std::fmt::Display) -> Error {
        Error::Output {
            path: self.final_dir.clone(),
            message: message.to_string(),
        }
    }

    fn write_small_files(&self, rows: usize) -> Result<()> {
        let io = |p: &Path, e| Error::io(p, e);
        let labels: Vec<i64> = self.labels[..rows]
            .iter()
            .map(|l| l.expect("checked"))
            .collect();
        let label_path = self.temp_dir.join("label.npy");
        let mut bytes = npy_header("<i8", &[rows]);
        bytes.extend(labels.iter().flat_map(|l| l.to_le_bytes()));
        std::fs::write(&label_path, bytes).map_err(|e| io(&label_path, e))?;
        let plan = &self.spec.plan;
        let dims: Vec<&str> = ["clip"]
            .into_iter()
            .chain(plan.long_count().map(|_| "long"))
            .chain(plan.short_count().map(|_| "short"))
            .chain(["mel", "frame"])
            .collect();
        let meta = serde_json::json!({
            "melctl_version": env!("CARGO_PKG_VERSION"),
            "split": self.spec.split,
            "rows": rows,
            "mel_dims": dims,
            "dtype": plan.dtype().name(),
            "dtype_note": if plan.dtype() == Dtype::Bf16 { "bfloat16 stored as uint16 bit patterns" } else { "" },
            "label_names": self.spec.label_names,
            "paths": self.paths[..rows].iter().map(|p| p.as_deref().expect("checked")).collect::<Vec<_>>(),
            "config": serde_json::from_str::<serde_json::Value>(&self.spec.provenance).unwrap_or_default(),
        });
        let meta_path = self.temp_dir.join("meta.json");
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
        let offset = (HEADER_LEN + first_row * self.spec.plan.bytes_per_clip()) as u64;
        let file = self.mel.as_ref().expect("open until commit");
        file.write_all_at(data.as_bytes(), offset)
            .map_err(|e| self.err(format!("writing rows {first_row}..: {e}")))
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
                self.labels[..rows].iter().filter(|l| l.is_none()).count()
            )));
        }
        if let Some(extra) = self.labels[rows..].iter().position(Option::is_some) {
            return Err(self.err(format!(
                "row {} was written but the output holds {rows} rows; the output was not committed",
                rows + extra
            )));
        }
        let file = self.mel.take().expect("open until commit");
        if rows < self.spec.rows {
            let mut shape = vec![rows];
            shape.extend(self.spec.plan.clip_shape());
            file.write_all_at(&npy_header(descr(self.spec.plan.dtype()), &shape), 0)
                .map_err(|e| self.err(e))?;
            file.set_len((HEADER_LEN + rows * self.spec.plan.bytes_per_clip()) as u64)
                .map_err(|e| self.err(e))?;
        }
        let durable = self.opts.fsync;
        if durable {
            file.sync_all().map_err(|e| self.err(e))?;
        }
        drop(file);
        self.write_small_files(rows)?;
        if durable {
            for f in ["label.npy", "meta.json"] {
                let p = self.temp_dir.join(f);
                File::open(&p)
                    .and_then(|f| f.sync_all())
                    .map_err(|e| Error::io(&p, e))?;
            }
        }
        replace_dir(&self.temp_dir, &self.final_dir)?;
        Ok(self.final_dir.clone())
    }
}

/// Moves the complete folder `temp` to `dest`: a plain rename when `dest` does not exist,
/// otherwise an atomic exchange followed by removing the old output.
fn replace_dir(temp: &Path, dest: &Path) -> Result<()> {
    if !dest.exists() {
        return std::fs::rename(temp, dest).map_err(|e| Error::io(dest, e));
    }
    #[cfg(target_os = "linux")]
    {
        use std::ffi::CString;
        use std::os::unix::ffi::OsStrExt;
        let a = CString::new(temp.as_os_str().as_bytes())
            .map_err(|_| Error::Shape("NUL in path".into()))?;
        let b = CString::new(dest.as_os_str().as_bytes())
            .map_err(|_| Error::Shape("NUL in path".into()))?;
        // SAFETY: two valid NUL-terminated paths; the call swaps the two names atomically.
        let r = unsafe {
            libc::renameat2(
                libc::AT_FDCWD,
                a.as_ptr(),
                libc::AT_FDCWD,
                b.as_ptr(),
                libc::RENAME_EXCHANGE,
            )
        };
        if r == 0 {
            // `temp` now names the old output.
            let _ = std::fs::remove_dir_all(temp);
            return Ok(());
        }
    }
    // No atomic exchange here: move the old output aside first.
    let old = dest.with_extension(format!("old-{}", std::process::id()));
    std::fs::rename(dest, &old).map_err(|e| Error::io(dest, e))?;
    std::fs::rename(temp, dest).map_err(|e| Error::io(dest, e))?;
    let _ = std::fs::remove_dir_all(old);
    Ok(())
}

impl Drop for NpySink {
    /// An uncommitted sink removes its temporary folder.
    fn drop(&mut self) {
        if self.temp_dir.exists() {
            let _ = std::fs::remove_dir_all(&self.temp_dir);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use mel_core::{Config, MelPlan};

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
                label: (i % 2) as i64,
                path: format!("c/{i}.wav"),
            })
            .collect();
        (meta, data)
    }

    #[test]
    fn rows_out_of_order_shrink_and_an_atomic_replace() {
        let t = tempfile::tempdir().unwrap();
        let s = spec(5, Dtype::F32);
        let plan = s.plan.clone();
        let mut sink =
            Box::new(NpySink::create(t.path(), s.clone(), NpyOptions::default()).unwrap());
        let (m, d) = batch(&plan, 2, 2);
        sink.write(2, &m, &d).unwrap();
        let (m, d) = batch(&plan, 0, 2);
        sink.write(0, &m, &d).unwrap();
        assert!(
            sink.write(1, &m[..1], &batch(&plan, 1, 1).1).is_err(),
            "row 1 twice"
        );
        let dir = sink.commit(4).unwrap();
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
            serde_json::from_slice(&std::fs::read(dir.join("meta.json")).unwrap()).unwrap();
        assert_eq!(meta["paths"][3], "c/3.wav");
        assert_eq!(
            std::fs::read(dir.join("label.npy")).unwrap().len(),
            HEADER_LEN + 4 * 8
        );

        // A second build replaces the first whole; an uncommitted one leaves it untouched.
        let mut again = Box::new(
            NpySink::create(t.path(), spec(1, Dtype::F32), NpyOptions::default()).unwrap(),
        );
        let (m, d) = batch(&plan, 0, 1);
        again.write(0, &m, &d).unwrap();
        again.commit(1).unwrap();
        let meta: serde_json::Value =
            serde_json::from_slice(&std::fs::read(dir.join("meta.json")).unwrap()).unwrap();
        assert_eq!(meta["rows"], 1);
        drop(Box::new(
            NpySink::create(t.path(), spec(3, Dtype::F32), NpyOptions::default()).unwrap(),
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

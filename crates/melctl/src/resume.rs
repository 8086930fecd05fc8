//! `--resume`: a journal of finished batches beside the output, so that an interrupted
//! build continues where it stopped.
//!
//! `OUT/.{split}.resume/` holds `fingerprint` (what the journal was made for) and one
//! file per finished batch, `b-{first file index}.bin`, written under a temporary name and
//! renamed, each checksummed:
//!
//! ```text
//! "MELJRNL1" | clips u64 | values per clip u64 | dtype u64 | file indices (clips × u64)
//! | spectrograms (clips × values, native layout) | xxh3-64 of everything before (u64)
//! ```
//!
//! A resumed run computes only the files no batch holds, then writes the final output
//! from the journal in file order, so it is identical to an uninterrupted build. A
//! batch file that is truncated or fails its checksum is deleted and its files are done
//! again. A changed configuration, backend or file (list, size, mtime) starts over. After
//! the split is committed, the batches are deleted and `committed` records the
//! fingerprint, so a later `--resume` of the same build skips the split.

use std::collections::HashMap;
use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use mel_audio::{FileEntry, Split};
use mel_core::{ClipMeta, Config, Dtype, MelPlan, OutputBuf, Sink};
use mel_loaders::CacheKey;
use xxhash_rust::xxh3::{Xxh3, xxh3_64};

const MAGIC: &[u8; 8] = b"MELJRNL1";
const HEADER: usize = 32;

/// The journal of one split.
pub struct Journal {
    dir: PathBuf,
    fingerprint: String,
    dtype: Dtype,
    values_per_clip: usize,
    /// Valid batch files with the file indices each holds.
    batches: Vec<(PathBuf, Vec<usize>)>,
    /// What opening it found, in words.
    pub note: String,
}

fn dtype_code(d: Dtype) -> u64 {
    match d {
        Dtype::F32 => 0,
        Dtype::F16 => 1,
        Dtype::Bf16 => 2,
    }
}

/// The fingerprint of a build of `split`: every setting that changes output values
/// (the configuration less the run settings that only change speed, plus the backend
/// that actually runs), the class names, and each file's path, label, size and mtime.
fn fingerprint(
    root: &Path,
    split: &Split,
    config: &Config,
    backend: &str,
    label_names: &[String],
) -> Result<String> {
    let mut c = config.clone();
    let defaults = mel_core::config::RunConfig::default();
    c.run = mel_core::config::RunConfig {
        device: c.run.device.clone(),
        ..defaults
    };
    let files = CacheKey::new(root, root, &split.name, &split.files, &config.audio)?;
    let mut h = Xxh3::new();
    h.update(c.resolved_json().as_bytes());
    h.update(backend.as_bytes());
    h.update(label_names.join("\0").as_bytes());
    h.update(&files.fingerprint.to_le_bytes());
    Ok(format!("{:032x}", h.digest128()))
}

/// Reads and checks a batch file; returns its file indices and spectrogram bytes.
fn read_batch(path: &Path, dtype: Dtype, vpc: usize) -> Result<(Vec<usize>, Vec<u8>)> {
    let b = std::fs::read(path)?;
    if b.len() < HEADER + 8 || &b[..8] != MAGIC {
        bail!("not a journal batch");
    }
    let word = |i: usize| u64::from_le_bytes(b[i..i + 8].try_into().expect("8 bytes"));
    let (clips, values, code) = (word(8) as usize, word(16) as usize, word(24));
    if values != vpc || code != dtype_code(dtype) {
        bail!("written for another shape or dtype");
    }
    let data = clips
        .checked_mul(vpc * dtype.size())
        .context("impossible size")?;
    let end = HEADER + clips * 8 + data;
    if b.len() != end + 8 {
        bail!("truncated ({} bytes, {} expected)", b.len(), end + 8);
    }
    if xxh3_64(&b[..end]) != word(end) {
        bail!("checksum mismatch");
    }
    let indices = (0..clips).map(|i| word(HEADER + 8 * i) as usize).collect();
    Ok((indices, b[HEADER + clips * 8..end].to_vec()))
}

impl Journal {
    /// Opens (or starts) the journal of `split` under `out`, keeping the batches of an
    /// interrupted build of the same thing and dropping anything else.
    pub fn open(
        out: &Path,
        root: &Path,
        split: &Split,
        config: &Config,
        plan: &MelPlan,
        backend: &str,
        label_names: &[String],
    ) -> Result<Journal> {
        let dir = out.join(format!(".{}.resume", split.name));
        let fingerprint = fingerprint(root, split, config, backend, label_names)?;
        let mut j = Journal {
            dir: dir.clone(),
            fingerprint,
            dtype: plan.dtype(),
            values_per_clip: plan.values_per_clip(),
            batches: Vec::new(),
            note: String::new(),
        };
        let previous = std::fs::read_to_string(dir.join("fingerprint")).ok();
        if previous.as_deref() != Some(j.fingerprint.as_str()) {
            j.note = match previous {
                Some(_) => "resume: the journal is from another configuration, backend or file set; starting over".into(),
                None => "resume: no journal; starting".into(),
            };
            let _ = std::fs::remove_dir_all(&dir);
            std::fs::create_dir_all(&dir)
                .with_context(|| format!("cannot create {}", dir.display()))?;
            std::fs::write(dir.join("fingerprint"), &j.fingerprint)?;
            return Ok(j);
        }
        let mut dropped = Vec::new();
        let mut names: Vec<PathBuf> = std::fs::read_dir(&dir)?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .collect();
        names.sort();
        for path in names {
            let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
            if name.starts_with(".tmp-") {
                let _ = std::fs::remove_file(&path); // a write cut short
            } else if name.starts_with("b-") {
                match read_batch(&path, j.dtype, j.values_per_clip) {
                    Ok((indices, _)) => j.batches.push((path, indices)),
                    Err(e) => {
                        dropped.push(format!("{name}: {e}"));
                        let _ = std::fs::remove_file(&path);
                    }
                }
            }
        }
        j.note = format!(
            "resume: {} clips in {} journal batches{}",
            j.done_count(),
            j.batches.len(),
            if dropped.is_empty() {
                String::new()
            } else {
                format!("; dropped and redone: {}", dropped.join(", "))
            }
        );
        Ok(j)
    }

    /// Whether the split was committed by an earlier run of the same build.
    pub fn committed(&self) -> bool {
        std::fs::read_to_string(self.dir.join("committed"))
            .ok()
            .as_deref()
            == Some(self.fingerprint.as_str())
    }

    /// Clips the journal holds.
    pub fn done_count(&self) -> usize {
        self.batches.iter().map(|(_, i)| i.len()).sum()
    }

    /// `split` without the files the journal holds.
    pub fn remaining(&self, split: &Split) -> Split {
        let mut done = vec![false; split.files.len()];
        for &i in self.batches.iter().flat_map(|(_, i)| i) {
            if let Some(d) = done.get_mut(i) {
                *d = true;
            }
        }
        Split {
            name: split.name.clone(),
            files: split
                .files
                .iter()
                .zip(&done)
                .filter(|(_, d)| !**d)
                .map(|(f, _)| f.clone())
                .collect(),
        }
    }

    /// A sink that adds each batch it receives to the journal (`files`: the whole split).
    pub fn sink(&self, files: &[FileEntry]) -> Box<dyn Sink> {
        Box::new(JournalSink {
            dir: self.dir.clone(),
            index_of: files
                .iter()
                .enumerate()
                .map(|(i, f)| (f.rel.clone(), i))
                .collect(),
            dtype: self.dtype,
            values_per_clip: self.values_per_clip,
        })
    }

    /// Writes every journaled clip into `sink` in file order, commits it, records the
    /// commit and deletes the batches. Returns the output path and the clip count.
    pub fn assemble(
        &mut self,
        mut sink: Box<dyn Sink>,
        files: &[FileEntry],
    ) -> Result<(PathBuf, usize)> {
        // Reread: a run just added batches.
        let reopened = std::fs::read_dir(&self.dir)?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| {
                p.file_name()
                    .and_then(|n| n.to_str())
                    .is_some_and(|n| n.starts_with("b-"))
            });
        let mut batches = Vec::new();
        for path in reopened {
            let (indices, data) = read_batch(&path, self.dtype, self.values_per_clip)
                .with_context(|| format!("journal batch {}", path.display()))?;
            batches.push((indices, data));
        }
        let mut all: Vec<usize> = batches
            .iter()
            .flat_map(|(i, _)| i.iter().copied())
            .collect();
        all.sort_unstable();
        if all.windows(2).any(|w| w[0] == w[1]) {
            bail!("the journal in {} holds a clip twice", self.dir.display());
        }
        let row_of: HashMap<usize, usize> = all.iter().enumerate().map(|(r, &i)| (i, r)).collect();
        let bytes_per_clip = self.values_per_clip * self.dtype.size();
        for (indices, data) in &batches {
            // Runs of consecutive rows go to the sink in one write.
            let mut k = 0;
            while k < indices.len() {
                let first = row_of[&indices[k]];
                let mut n = 1;
                while k + n < indices.len() && row_of[&indices[k + n]] == first + n {
                    n += 1;
                }
                let meta: Vec<ClipMeta> = indices[k..k + n]
                    .iter()
                    .map(|&i| ClipMeta {
                        label: files[i].label,
                        path: files[i].rel.clone(),
                    })
                    .collect();
                let buf = OutputBuf::from_bytes(
                    self.dtype,
                    &data[k * bytes_per_clip..(k + n) * bytes_per_clip],
                )
                .context("journal batch size")?;
                sink.write(first, &meta, &buf)?;
                k += n;
            }
        }
        let output = sink.commit(all.len())?;
        std::fs::write(self.dir.join("committed"), &self.fingerprint)?;
        for (path, _) in self.batches.drain(..) {
            let _ = std::fs::remove_file(path);
        }
        for e in std::fs::read_dir(&self.dir)?.flatten() {
            if e.file_name().to_string_lossy().starts_with("b-") {
                let _ = std::fs::remove_file(e.path());
            }
        }
        Ok((output, all.len()))
    }
}

/// Removes the journals of `splits` under `out` (after a whole build succeeded).
pub fn remove_all(out: &Path, splits: &[String]) {
    for s in splits {
        let _ = std::fs::remove_dir_all(out.join(format!(".{s}.resume")));
    }
}

/// A sink whose output is journal batches.
struct JournalSink {
    dir: PathBuf,
    index_of: HashMap<String, usize>,
    dtype: Dtype,
    values_per_clip: usize,
}

impl Sink for JournalSink {
    fn name(&self) -> &str {
        "journal"
    }

    fn write(
        &mut self,
        _first_row: usize,
        meta: &[ClipMeta],
        data: &OutputBuf,
    ) -> mel_core::Result<()> {
        let io = |e: std::io::Error| mel_core::Error::io(&self.dir, e);
        let indices: Vec<u64> = meta
            .iter()
            .map(|m| self.index_of.get(&m.path).map(|&i| i as u64))
            .collect::<Option<_>>()
            .ok_or_else(|| {
                mel_core::Error::Shape("a clip not in the split reached the journal".into())
            })?;
        let mut b = Vec::with_capacity(HEADER + indices.len() * 8 + data.as_bytes().len() + 8);
        b.extend_from_slice(MAGIC);
        b.extend_from_slice(&(indices.len() as u64).to_le_bytes());
        b.extend_from_slice(&(self.values_per_clip as u64).to_le_bytes());
        b.extend_from_slice(&dtype_code(self.dtype).to_le_bytes());
        indices
            .iter()
            .for_each(|i| b.extend_from_slice(&i.to_le_bytes()));
        b.extend_from_slice(data.as_bytes());
        let sum = xxh3_64(&b);
        b.extend_from_slice(&sum.to_le_bytes());
        let first = indices.first().copied().unwrap_or(0);
        let tmp = self.dir.join(format!(".tmp-{first:010}"));
        let mut f = std::fs::File::create(&tmp).map_err(io)?;
        f.write_all(&b).map_err(io)?;
        f.sync_data().map_err(io)?;
        std::fs::rename(&tmp, self.dir.join(format!("b-{first:010}.bin"))).map_err(io)?;
        Ok(())
    }

    fn commit(self: Box<Self>, _rows: usize) -> mel_core::Result<PathBuf> {
        Ok(self.dir)
    }
}

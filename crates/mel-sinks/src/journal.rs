//! The resume journal: finished batches kept beside the output, so that an interrupted
//! build continues where it stopped and ends with an output identical to an
//! uninterrupted one.
//!
//! `OUT/.{split}.resume/` holds `fingerprint` (what the journal was made for, in hex) and
//! one file per finished batch, `b-{first file index:010}.bin`, in melctl's checksummed
//! container format ([`mel_core::container`]): the fingerprint in the header, then three
//! sections, the batch's file indices (u64 each), its clips' sources (rate u32, channels
//! u32, frames u64 each) and its spectrograms (native layout).
//! Each batch file is built under a temporary name and renamed (flushed first).
//!
//! Opening keeps the batches of an interrupted build of the same thing (same
//! fingerprint: the caller's hash of the settings, backend, labels and files); a batch
//! whose header, layout or checksums do not hold is deleted and its clips are done again;
//! anything from another fingerprint starts the journal over. Assembling streams: it
//! reads one batch at a time, so memory does not grow with the split. After the build's
//! outputs are published, `committed` records the fingerprint and the build id the
//! output carries; a later resume keeps the split only if the output at the final path
//! still carries that id and the folder's build record names it (the caller checks:
//! [`Journal::committed_build`]). Every file of a journal is opened as a regular file
//! only, without blocking (a FIFO named like a batch is dropped, not waited on).

use std::path::{Path, PathBuf};

use mel_core::atomic::Staged;
use mel_core::container::{self, Section};
use mel_core::input::{open_regular, read_bounded_text};
use mel_core::{ClipMeta, Dtype, Error, Finished, MelPlan, OutputBuf, Result, Sink, SourceInfo};

const MAGIC: &[u8; 8] = b"MELJRNL3";
const VERSION: u32 = 3;
/// Sections of a batch file: indices, sources, spectrograms.
const SECTIONS: usize = 3;
/// Bytes of one clip's source in a batch file.
const SOURCE_BYTES: usize = 16;
/// The most bytes the `fingerprint` and `committed` files hold.
const MAX_NOTE_BYTES: u64 = 4096;

/// The text of a small journal file, `None` when it is missing, not a regular file or
/// not text.
fn read_note(path: &Path) -> Option<String> {
    read_bounded_text(path, MAX_NOTE_BYTES).ok()
}

fn encode_sources(sources: &[SourceInfo]) -> Vec<u8> {
    let mut b = Vec::with_capacity(sources.len() * SOURCE_BYTES);
    for s in sources {
        b.extend_from_slice(&s.rate.to_le_bytes());
        b.extend_from_slice(&u32::from(s.channels).to_le_bytes());
        b.extend_from_slice(&s.frames.to_le_bytes());
    }
    b
}

fn decode_sources(b: &[u8]) -> Vec<SourceInfo> {
    b.chunks_exact(SOURCE_BYTES)
        .map(|c| SourceInfo {
            rate: u32::from_le_bytes(c[0..4].try_into().expect("4 bytes")),
            channels: u32::from_le_bytes(c[4..8].try_into().expect("4 bytes")) as u16,
            frames: u64::from_le_bytes(c[8..16].try_into().expect("8 bytes")),
        })
        .collect()
}

/// One batch file's contents: file indices, their sources, and (when asked for) the
/// spectrogram bytes.
type BatchContents = (Vec<usize>, Vec<SourceInfo>, Vec<u8>);

/// What opening a journal found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum JournalState {
    /// There was no journal; a new one was started.
    Started,
    /// The journal was made for another fingerprint (configuration, backend or files);
    /// it was discarded and started over.
    Restarted,
    /// Batches of an interrupted build of the same thing were found.
    Resumed {
        /// Clips they hold.
        clips: usize,
        /// Valid batch files.
        batches: usize,
        /// Batch files that failed a check and were deleted (name: reason); their clips
        /// are computed again.
        dropped: Vec<String>,
    },
}

/// The journal of one split.
#[derive(Debug)]
pub struct Journal {
    dir: PathBuf,
    fingerprint: u128,
    dtype: Dtype,
    bytes_per_clip: usize,
    files: usize,
    /// Valid batch files with the file indices each holds, in file-index order.
    batches: Vec<(PathBuf, Vec<usize>)>,
    state: JournalState,
}

/// The folder of the journal of `split` under `out`.
pub fn journal_dir(out: &Path, split: &str) -> PathBuf {
    out.join(format!(".{split}.resume"))
}

/// Whether `name` is a file melctl writes in a resume journal: its `fingerprint`, the
/// `committed` note, batches `b-NNNNNNNNNN.bin`, and their temporary names.
pub fn is_journal_file(name: &str) -> bool {
    let batch = name
        .strip_prefix("b-")
        .and_then(|n| n.strip_suffix(".bin"))
        .is_some_and(|n| n.len() == 10 && n.bytes().all(|b| b.is_ascii_digit()));
    batch
        || ["fingerprint", "committed"].contains(&name)
        || (name.starts_with('.') && name.contains(".partial-"))
}

/// Removes the journal of `split` under `out`, if any.
pub fn remove_journal(out: &Path, split: &str) -> Result<()> {
    let dir = journal_dir(out, split);
    match std::fs::remove_dir_all(&dir) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(Error::io(dir, e)),
        _ => Ok(()),
    }
}

impl Journal {
    /// Opens (or starts) the journal of `split` under `out` for a split of `files` files,
    /// keeping the batches of an interrupted build with the same `fingerprint`.
    pub fn open(
        out: &Path,
        split: &str,
        fingerprint: u128,
        plan: &MelPlan,
        files: usize,
    ) -> Result<Journal> {
        let dir = journal_dir(out, split);
        let mut j = Journal {
            dir: dir.clone(),
            fingerprint,
            dtype: plan.dtype(),
            bytes_per_clip: plan.bytes_per_clip(),
            files,
            batches: Vec::new(),
            state: JournalState::Started,
        };
        let previous = read_note(&dir.join("fingerprint"));
        if previous.as_deref() != Some(j.hex().as_str()) {
            j.state = if previous.is_some() {
                JournalState::Restarted
            } else {
                JournalState::Started
            };
            remove_journal(out, split)?;
            std::fs::create_dir_all(&dir).map_err(|e| Error::io(&dir, e))?;
            let (staged, mut f) = Staged::file(&dir.join("fingerprint"))?;
            std::io::Write::write_all(&mut f, j.hex().as_bytes())
                .map_err(|e| Error::io(staged.path(), e))?;
            drop(f);
            staged.commit(true)?;
            return Ok(j);
        }
        let mut dropped = Vec::new();
        for path in j.batch_files()? {
            let name = path.file_name().map(|n| n.to_string_lossy().into_owned());
            match j.read(&path, true) {
                Ok((indices, _, _)) => j.batches.push((path, indices)),
                Err(reason) => {
                    dropped.push(format!("{}: {reason}", name.unwrap_or_default()));
                    std::fs::remove_file(&path).map_err(|e| Error::io(&path, e))?;
                }
            }
        }
        j.state = JournalState::Resumed {
            clips: j.batches.iter().map(|(_, i)| i.len()).sum(),
            batches: j.batches.len(),
            dropped,
        };
        Ok(j)
    }

    fn hex(&self) -> String {
        format!("{:032x}", self.fingerprint)
    }

    /// What opening found.
    pub fn state(&self) -> &JournalState {
        &self.state
    }

    /// The build id of the output an earlier run of the same build published for this
    /// split, if the journal says one did. Not proof: the output at the final path may
    /// have been replaced since; the caller compares.
    pub fn committed_build(&self) -> Option<String> {
        let note = read_note(&self.dir.join("committed"))?;
        let (hex, build) = note.split_once('\n')?;
        (hex == self.hex() && !build.is_empty()).then(|| build.to_string())
    }

    /// For each file of the split, whether the journal holds its clip.
    pub fn done(&self) -> Vec<bool> {
        let mut done = vec![false; self.files];
        for &i in self.batches.iter().flat_map(|(_, i)| i) {
            done[i] = true;
        }
        done
    }

    /// The batch files present, sorted (by first file index).
    fn batch_files(&self) -> Result<Vec<PathBuf>> {
        let mut names: Vec<PathBuf> = Vec::new();
        for e in std::fs::read_dir(&self.dir).map_err(|e| Error::io(&self.dir, e))? {
            let e = e.map_err(|e| Error::io(&self.dir, e))?;
            let name = e.file_name().to_string_lossy().into_owned();
            if name.starts_with("b-") && name.ends_with(".bin") {
                names.push(e.path());
            } else if name.starts_with(".b-") {
                // A batch write cut short by a kill.
                let _ = std::fs::remove_file(e.path());
            }
        }
        names.sort();
        Ok(names)
    }

    /// Reads and checks the batch file at `path`: its header and file indices, and with
    /// `with_data` its spectrograms too (checksummed), which are returned. Without, only
    /// the header and the index section are read. The error is the reason, in words.
    fn read(&self, path: &Path, with_data: bool) -> std::result::Result<BatchContents, String> {
        use std::io::{Read, Seek, SeekFrom};
        let mut f = open_regular(path, false).map_err(|e| e.to_string())?;
        let file_len = f.metadata().map_err(|e| e.to_string())?.len();
        let start = container::header_len(SECTIONS);
        let mut head = vec![0u8; start.min(file_len as usize)];
        f.read_exact(&mut head).map_err(|e| e.to_string())?;
        let h = container::decode(
            &head,
            file_len,
            MAGIC,
            "journal batch",
            VERSION,
            start as u64,
        )
        .map_err(|e| e.to_string())?;
        if h.fingerprint != self.fingerprint || h.sections.len() != SECTIONS {
            return Err("written for another build".into());
        }
        let (ix, src, data) = (h.sections[0], h.sections[1], h.sections[2]);
        let clips = (ix.len / 8) as usize;
        if ix.len % 8 != 0
            || clips > self.files
            || src.len != (clips * SOURCE_BYTES) as u64
            || data.len != (clips * self.bytes_per_clip) as u64
        {
            return Err("section sizes do not match the plan".into());
        }
        let mut read_section = |s: &container::Section, name: &str| {
            let mut b = vec![0u8; s.len as usize];
            f.seek(SeekFrom::Start(s.offset))
                .map_err(|e| e.to_string())?;
            f.read_exact(&mut b).map_err(|e| e.to_string())?;
            container::verify(&b, s, name).map_err(|e| e.to_string())?;
            Ok::<_, String>(b)
        };
        let indices: Vec<usize> = container::bytes_to_u64s(&read_section(&ix, "the file indices")?)
            .into_iter()
            .map(|i| i as usize)
            .collect();
        if indices.iter().any(|&i| i >= self.files) || indices.windows(2).any(|w| w[0] >= w[1]) {
            return Err("file indices out of range or out of order".into());
        }
        let sources = decode_sources(&read_section(&src, "the sources")?);
        if !with_data {
            return Ok((indices, sources, Vec::new()));
        }
        let bytes = read_section(&data, "the spectrograms")?;
        Ok((indices, sources, bytes))
    }

    /// A sink that adds each batch it receives to the journal (file indices from
    /// [`ClipMeta::index`]).
    pub fn sink(&self) -> Box<dyn Sink> {
        Box::new(JournalSink {
            dir: self.dir.clone(),
            fingerprint: self.fingerprint,
        })
    }

    /// Writes every journaled clip into `sink` in file order, one batch file at a time,
    /// and finishes it. `meta(i)` describes file `i`.
    pub fn assemble(
        &mut self,
        mut sink: Box<dyn Sink>,
        meta: &dyn Fn(usize) -> ClipMeta,
    ) -> Result<Finished> {
        // Pass 1: which files the journal holds (indices only), each once.
        let mut batches = Vec::new();
        let mut row_of: Vec<Option<usize>> = vec![None; self.files];
        for path in self.batch_files()? {
            let (indices, _, _) = self
                .read(&path, false)
                .map_err(|why| Error::output(&path, format!("journal batch: {why}")))?;
            for &i in &indices {
                if row_of[i].replace(0).is_some() {
                    return Err(Error::output(
                        &self.dir,
                        format!("the journal holds file {i} twice"),
                    ));
                }
            }
            batches.push(path);
        }
        let mut rows = 0;
        for r in row_of.iter_mut().flatten() {
            *r = rows;
            rows += 1;
        }
        // Pass 2: one batch in memory at a time, runs of consecutive rows per write.
        for path in batches {
            let (indices, sources, data) = self
                .read(&path, true)
                .map_err(|why| Error::output(&path, format!("journal batch: {why}")))?;
            let mut k = 0;
            while k < indices.len() {
                let first = row_of[indices[k]].expect("recorded in pass 1");
                let mut n = 1;
                while k + n < indices.len() && row_of[indices[k + n]] == Some(first + n) {
                    n += 1;
                }
                let metas: Vec<ClipMeta> = indices[k..k + n]
                    .iter()
                    .zip(&sources[k..k + n])
                    .map(|(&i, &source)| ClipMeta { source, ..meta(i) })
                    .collect();
                let buf = OutputBuf::from_bytes(
                    self.dtype,
                    &data[k * self.bytes_per_clip..(k + n) * self.bytes_per_clip],
                )
                .ok_or_else(|| Error::Shape("journal batch size".into()))?;
                sink.write(first, &metas, &buf)?;
                k += n;
            }
        }
        sink.finish(rows)
    }

    /// Records that the split's output, carrying `build_id`, was published, and deletes
    /// the batches.
    pub fn mark_committed(&mut self, build_id: &str) -> Result<()> {
        let (staged, mut f) = Staged::file(&self.dir.join("committed"))?;
        let note = format!("{}\n{build_id}", self.hex());
        std::io::Write::write_all(&mut f, note.as_bytes())
            .map_err(|e| Error::io(staged.path(), e))?;
        drop(f);
        staged.commit(true)?;
        for path in self.batch_files()? {
            std::fs::remove_file(&path).map_err(|e| Error::io(&path, e))?;
        }
        self.batches.clear();
        Ok(())
    }
}

/// A sink whose output is journal batches.
struct JournalSink {
    dir: PathBuf,
    fingerprint: u128,
}

impl Sink for JournalSink {
    fn name(&self) -> &str {
        "journal"
    }

    fn write(&mut self, _first_row: usize, meta: &[ClipMeta], data: &OutputBuf) -> Result<()> {
        let indices: Vec<u64> = meta.iter().map(|m| m.index as u64).collect();
        let index_bytes = container::u64s_to_bytes(&indices);
        let sources: Vec<SourceInfo> = meta.iter().map(|m| m.source).collect();
        let source_bytes = encode_sources(&sources);
        let start = container::header_len(SECTIONS) as u64;
        let mut sections = Vec::with_capacity(SECTIONS);
        let mut at = start;
        for part in [&index_bytes[..], &source_bytes, data.as_bytes()] {
            sections.push(Section {
                offset: at,
                len: part.len() as u64,
                checksum: container::checksum(part),
            });
            at += part.len() as u64;
        }
        let header = container::encode(MAGIC, VERSION, self.fingerprint, &sections, 0);
        let first = indices.first().copied().unwrap_or(0);
        let (staged, mut f) = Staged::file(&self.dir.join(format!("b-{first:010}.bin")))?;
        let io = |e| Error::io(staged.path(), e);
        use std::io::Write;
        f.write_all(&header).map_err(io)?;
        f.write_all(&index_bytes).map_err(io)?;
        f.write_all(&source_bytes).map_err(io)?;
        f.write_all(data.as_bytes()).map_err(io)?;
        drop(f);
        staged.commit(true)?;
        Ok(())
    }

    fn finish(self: Box<Self>, _rows: usize) -> Result<Finished> {
        Ok(Finished::in_place(self.dir, 0))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use mel_core::Config;

    fn plan() -> MelPlan {
        let mut c = Config::default();
        c.audio.clip_seconds = 0.25;
        c.output.dtype = Dtype::F32;
        MelPlan::from_config(&c).unwrap()
    }

    fn batch(plan: &MelPlan, indices: &[usize]) -> (Vec<ClipMeta>, OutputBuf) {
        let v = plan.values_per_clip();
        let data = indices
            .iter()
            .flat_map(|&i| (0..v).map(move |k| (i * v + k) as f32))
            .collect();
        (
            indices.iter().map(|&i| meta(i)).collect(),
            OutputBuf::F32(data),
        )
    }

    fn meta(i: usize) -> ClipMeta {
        ClipMeta {
            meta: Default::default(),
            index: i,
            source: SourceInfo {
                rate: 4096 + i as u32,
                channels: 1,
                frames: 10,
            },
            label: i as i64 % 2,
            path: format!("{i}.wav"),
        }
    }

    /// A sink that records rows in memory.
    struct Memory(std::sync::Arc<std::sync::Mutex<Vec<(usize, usize, f32)>>>);

    impl Sink for Memory {
        fn name(&self) -> &str {
            "memory"
        }
        fn write(&mut self, first: usize, meta: &[ClipMeta], data: &OutputBuf) -> Result<()> {
            let per = data.len() / meta.len();
            for (k, m) in meta.iter().enumerate() {
                // Each clip's source comes back from the journal with it.
                assert_eq!(m.source.rate, 4096 + m.index as u32);
                self.0
                    .lock()
                    .unwrap()
                    .push((first + k, m.index, data.get_f64(k * per) as f32));
            }
            Ok(())
        }
        fn finish(self: Box<Self>, rows: usize) -> Result<Finished> {
            Ok(Finished::in_place(PathBuf::from("mem"), rows as u64))
        }
    }

    #[test]
    fn resumes_drops_a_damaged_batch_and_assembles_in_file_order() {
        let t = tempfile::tempdir().unwrap();
        let p = plan();
        let v = p.values_per_clip();
        let j = Journal::open(t.path(), "training", 7, &p, 10).unwrap();
        assert_eq!(j.state(), &JournalState::Started);
        let mut sink = j.sink();
        for b in [&[5, 6, 7][..], &[0, 1][..], &[9][..]] {
            let (m, d) = batch(&p, b);
            sink.write(0, &m, &d).unwrap();
        }
        // Damage the batch of file 9; reopen.
        let nine = journal_dir(t.path(), "training").join("b-0000000009.bin");
        let mut bytes = std::fs::read(&nine).unwrap();
        let last = bytes.len() - 1;
        bytes[last] ^= 1;
        std::fs::write(&nine, bytes).unwrap();
        let mut j = Journal::open(t.path(), "training", 7, &p, 10).unwrap();
        match j.state() {
            JournalState::Resumed {
                clips,
                batches,
                dropped,
            } => {
                assert_eq!((*clips, *batches), (5, 2));
                assert!(dropped[0].contains("b-0000000009.bin"), "{dropped:?}");
            }
            s => panic!("{s:?}"),
        }
        assert_eq!(
            j.done(),
            [
                true, true, false, false, false, true, true, true, false, false
            ]
        );
        let rows = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let f = j.assemble(Box::new(Memory(rows.clone())), &meta).unwrap();
        assert_eq!(f.bytes(), 5);
        let mut got = rows.lock().unwrap().clone();
        got.sort_by_key(|r| r.0);
        let want: Vec<(usize, usize, f32)> = [0, 1, 5, 6, 7]
            .iter()
            .enumerate()
            .map(|(r, &i)| (r, i, (i * v) as f32))
            .collect();
        assert_eq!(got, want);
        // Another fingerprint starts over; a committed journal says which build.
        j.mark_committed("b1").unwrap();
        assert_eq!(
            Journal::open(t.path(), "training", 7, &p, 10)
                .unwrap()
                .committed_build()
                .as_deref(),
            Some("b1")
        );
        let j = Journal::open(t.path(), "training", 8, &p, 10).unwrap();
        assert_eq!(j.state(), &JournalState::Restarted);
        assert_eq!(j.committed_build(), None);
        assert_eq!(j.done(), [false; 10]);
    }

    #[test]
    fn a_fifo_named_like_a_batch_is_dropped_without_blocking() {
        let t = tempfile::tempdir().unwrap();
        let p = plan();
        let j = Journal::open(t.path(), "s", 1, &p, 4).unwrap();
        let (m, d) = batch(&p, &[0]);
        j.sink().write(0, &m, &d).unwrap();
        let dir = journal_dir(t.path(), "s");
        let fifo = dir.join("b-0000000002.bin");
        let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
        // SAFETY: a valid NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o644) }, 0);
        // A FIFO as `committed` is no commit either.
        let note = dir.join("committed");
        let c = std::ffi::CString::new(note.to_str().unwrap()).unwrap();
        // SAFETY: a valid NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o644) }, 0);
        let (tx, rx) = std::sync::mpsc::channel();
        let out = t.path().to_path_buf();
        std::thread::spawn(move || {
            let j = Journal::open(&out, "s", 1, &plan(), 4).unwrap();
            tx.send((j.state().clone(), j.committed_build())).unwrap();
        });
        let (state, committed) = rx
            .recv_timeout(std::time::Duration::from_secs(20))
            .expect("opening the journal blocks on a FIFO");
        match state {
            JournalState::Resumed { clips, dropped, .. } => {
                assert_eq!(clips, 1);
                assert!(
                    dropped.len() == 1 && dropped[0].contains("not a regular file (a FIFO)"),
                    "{dropped:?}"
                );
            }
            s => panic!("{s:?}"),
        }
        assert_eq!(committed, None);
        assert!(!fifo.exists());
    }

    #[test]
    fn every_corruption_of_a_batch_file_is_caught() {
        let t = tempfile::tempdir().unwrap();
        let p = plan();
        let j = Journal::open(t.path(), "s", 1, &p, 4).unwrap();
        let (m, d) = batch(&p, &[1, 2]);
        j.sink().write(0, &m, &d).unwrap();
        let path = journal_dir(t.path(), "s").join("b-0000000001.bin");
        let good = std::fs::read(&path).unwrap();
        let j = Journal::open(t.path(), "s", 1, &p, 4).unwrap();
        assert!(j.read(&path, true).is_ok());
        // Every byte of the header and index section, and a sample of the data.
        let data_start = container::header_len(SECTIONS) + 16 + 2 * SOURCE_BYTES;
        let probes = (0..data_start).chain((data_start..good.len()).step_by(997));
        for i in probes {
            let mut b = good.clone();
            b[i] ^= 0x40;
            std::fs::write(&path, &b).unwrap();
            assert!(
                j.read(&path, true).is_err(),
                "flipped byte {i} went unnoticed"
            );
        }
        std::fs::write(&path, &good[..good.len() - 1]).unwrap();
        assert!(j.read(&path, true).is_err());
    }
}

//! The loader of files read whole: each file decoded at its own length and cut into rows
//! ([`Cutting`]): the blocks of a whole clip (`audio.length = "whole"`), or windows
//! (`audio.windows`).
//!
//! A sink sizes its output before the first row, so [`WholeLoader::start`] first finds
//! every file's length (PCM WAV from its header, other codecs by counting their packets:
//! [`mel_audio::probe_length`]); a file too long (`audio.max_seconds`) or too short for a
//! frame is a named failure there. Batches then hold whole files only (a clip's blocks are
//! never split over two batches), decoded in parallel on the loader's threads.

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Instant;

use mel_audio::FileEntry;
use mel_core::plan::Cutting;
use mel_core::spec::AudioConfig;
use mel_core::{
    AudioLoader, ClipBatch, ClipFailure, Error, LoaderStats, MelPlan, Result, SampleBlock,
    SourceInfo,
};
use rayon::prelude::*;

use crate::io::{ReadOptions, read_file};

/// Files above this size are decoded from the file rather than read into memory first.
const READ_LIMIT: u64 = 256 << 20;

/// The whole-clip loader (see the module documentation).
pub struct WholeLoader {
    files: Vec<FileEntry>,
    audio: AudioConfig,
    geometry: Cutting,
    sample_limit: f32,
    opts: ReadOptions,
    pool: rayon::ThreadPool,
    batch_rows: usize,
    /// Each file's blocks, `None` for a file that failed its probe.
    blocks: Vec<Option<u64>>,
    next: usize,
    failures: Vec<ClipFailure>,
    cancel: Arc<AtomicBool>,
    decode_ns: AtomicU64,
    bytes: AtomicU64,
}

/// One file decoded and cut into its blocks.
struct Decoded {
    index: usize,
    rows: Vec<f32>,
    source: SourceInfo,
    blocks: usize,
}

impl WholeLoader {
    /// Finds the length of each of `files` (on `threads` threads), for batches of about
    /// `batch_rows` blocks of `plan`'s whole clips. `cancel` stops the probe and the decoding.
    pub fn start(
        files: Vec<FileEntry>,
        plan: &MelPlan,
        batch_rows: usize,
        threads: usize,
        opts: ReadOptions,
        cancel: Arc<AtomicBool>,
    ) -> Result<Self> {
        let geometry = plan.cutting().ok_or_else(|| {
            Error::Internal("the whole-file loader needs a plan of whole clips or windows".into())
        })?;
        let audio = plan.spec().audio.clone();
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(threads.max(1))
            .thread_name(|i| format!("melctl-whole-{i}"))
            .build()
            .map_err(|e| Error::Internal(format!("cannot start the reader threads: {e}")))?;
        let lengths: Vec<Result<u64>> = pool.install(|| {
            files
                .par_iter()
                .map(|f| {
                    if cancel.load(Ordering::Relaxed) {
                        return Err(Error::Cancelled);
                    }
                    blocks_of(&f.path, &audio, &geometry)
                })
                .collect()
        });
        let mut failures = Vec::new();
        let blocks = lengths
            .into_iter()
            .enumerate()
            .map(|(i, r)| {
                r.map_err(|e| failures.push(ClipFailure::from_error(i, &files[i].path, &e)))
                    .ok()
            })
            .collect();
        Ok(WholeLoader {
            files,
            audio,
            geometry,
            sample_limit: plan.sample_limit(),
            opts,
            pool,
            batch_rows: batch_rows.max(1),
            blocks,
            next: 0,
            failures,
            cancel,
            decode_ns: AtomicU64::new(0),
            bytes: AtomicU64::new(0),
        })
    }

    /// Rows (blocks) of every file whose length was found: what the output holds at most.
    pub fn rows(&self) -> usize {
        self.blocks.iter().flatten().sum::<u64>() as usize
    }

    /// Decodes file `index` whole and cuts it into its blocks.
    fn decode(&self, index: usize, blocks: usize, bytes: &mut Vec<u8>) -> Result<Decoded> {
        let path = &self.files[index].path;
        let t0 = Instant::now();
        let max = self.geometry.max_samples();
        let mut clip = Vec::new();
        let len =
            read_file(path, self.opts, READ_LIMIT, bytes).map_err(|e| Error::read(path, e))?;
        let info = if len > READ_LIMIT {
            mel_audio::decode_whole(path, &self.audio, max, &mut clip)?
        } else {
            mel_audio::decode_bytes_whole(bytes, path, &self.audio, max, &mut clip)?
        };
        self.bytes.fetch_add(len, Ordering::Relaxed);
        let what = path.display().to_string();
        if self.geometry.rows(clip.len() as u64) != blocks as u64 {
            return Err(Error::decode(
                path,
                format!(
                    "decoded {} samples, not the length its probe found ({blocks} blocks): the file changed during the build?",
                    clip.len()
                ),
            ));
        }
        if let Some(i) = clip.iter().position(|x| x.abs() > self.sample_limit) {
            return Err(Error::limit(
                what,
                format!(
                    "sample {i} is {:e}, beyond the {:e} the transform takes",
                    clip[i], self.sample_limit
                ),
            ));
        }
        let n = self.geometry.row_samples();
        let mut rows = vec![0.0f32; blocks * n];
        for (k, row) in rows.chunks_mut(n).enumerate() {
            self.geometry.fill(&clip, k, row);
        }
        self.decode_ns
            .fetch_add(t0.elapsed().as_nanos() as u64, Ordering::Relaxed);
        Ok(Decoded {
            index,
            rows,
            source: SourceInfo {
                rate: info.rate,
                channels: info.channels,
                frames: info.frames as u64,
            },
            blocks,
        })
    }
}

/// The blocks of the file at `path` as a whole clip, from its length.
fn blocks_of(path: &Path, audio: &AudioConfig, geometry: &Cutting) -> Result<u64> {
    let from_start = AudioConfig {
        trim: mel_core::spec::TrimPolicy::Start,
        ..audio.clone()
    };
    let (rate, frames) = mel_audio::probe_length(path, &from_start)?;
    let samples = (frames as u128 * audio.sample_rate as u128).div_ceil(rate.max(1) as u128) as u64;
    geometry.check_samples(&path.display().to_string(), samples, audio.sample_rate)?;
    Ok(geometry.rows(samples))
}

impl AudioLoader for WholeLoader {
    fn name(&self) -> &str {
        "whole"
    }

    fn next_batch(&mut self) -> Option<Result<ClipBatch>> {
        loop {
            if self.next >= self.files.len() {
                return None;
            }
            // Whole files, up to about `batch_rows` blocks (at least one file).
            let mut take = Vec::new();
            let mut rows = 0usize;
            while self.next < self.files.len() && (take.is_empty() || rows < self.batch_rows) {
                if let Some(b) = self.blocks[self.next] {
                    take.push((self.next, b as usize));
                    rows += b as usize;
                }
                self.next += 1;
            }
            if self.cancel.load(Ordering::Relaxed) {
                return Some(Err(Error::Cancelled));
            }
            let this = &*self;
            let decoded: Vec<Result<Decoded>> = self.pool.install(|| {
                take.par_iter()
                    .map_init(Vec::new, |bytes, &(i, b)| {
                        std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                            this.decode(i, b, bytes)
                        }))
                        .unwrap_or_else(|panic| {
                            let what = mel_core::error::panic_message(panic.as_ref());
                            Err(Error::Internal(format!(
                                "{}: reading failed ({what})",
                                this.files[i].path.display()
                            )))
                        })
                    })
                    .collect()
            });
            let mut batch = ClipBatch {
                indices: Vec::with_capacity(rows),
                sources: Vec::with_capacity(rows),
                samples: SampleBlock::owned(Vec::new()),
            };
            let mut samples = Vec::with_capacity(rows * self.geometry.row_samples());
            for (r, &(i, _)) in decoded.into_iter().zip(&take) {
                match r {
                    Ok(d) => {
                        batch.indices.extend(std::iter::repeat_n(d.index, d.blocks));
                        batch
                            .sources
                            .extend(std::iter::repeat_n(d.source, d.blocks));
                        samples.extend_from_slice(&d.rows);
                    }
                    Err(e) => {
                        let f = ClipFailure::from_error(i, &self.files[i].path, &e);
                        self.failures.push(f);
                    }
                }
            }
            self.failures.sort_by_key(|f| f.index);
            if batch.indices.is_empty() {
                continue;
            }
            batch.samples = SampleBlock::owned(samples);
            return Some(Ok(batch));
        }
    }

    fn failures(&self) -> &[ClipFailure] {
        &self.failures
    }

    fn stats(&self) -> LoaderStats {
        LoaderStats {
            workers: self.pool.current_num_threads(),
            decode_seconds: self.decode_ns.load(Ordering::Relaxed) as f64 * 1e-9,
            bytes_read: self.bytes.load(Ordering::Relaxed),
            files: self.next as u64,
            note: format!(
                "{} files read whole: {} rows of {} samples",
                self.files.len(),
                self.rows(),
                self.geometry.row_samples()
            ),
        }
    }
}

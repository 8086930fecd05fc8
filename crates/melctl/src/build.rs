//! `melctl build`: scan → per split: preload (decode) → mel backend → HDF5 sink.
//! The sink runs on its own thread behind a bounded queue, so the HDF5 write of
//! batch k overlaps the mel computation of batch k+1.

use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use mel_audio::Dataset;
use mel_core::{
    ClipFailure, ClipMeta, Config, Loader, MelBackend, MelPlan, OutputBuf, Sink, SinkSpec,
};
use mel_cpu::CpuBackend;
use mel_loaders::PreloadLoader;
use mel_sinks::Hdf5Sink;

use crate::cli::OnError;
use crate::progress::Progress;

/// What happened to one split.
#[derive(Debug, Clone)]
pub struct SplitReport {
    /// Split name.
    pub split: String,
    /// Files found.
    pub files: usize,
    /// Clips written.
    pub clips: usize,
    /// Files left out, with reasons.
    pub skipped: Vec<ClipFailure>,
    /// The committed output file.
    pub output: PathBuf,
    /// Its size in bytes.
    pub output_bytes: u64,
    /// Decoding into RAM (wall).
    pub load: Duration,
    /// Mel backend busy time.
    pub mel: Duration,
    /// Sink busy time (HDF5 writes, metadata, flush and rename).
    pub write: Duration,
    /// Whole split, wall.
    pub wall: Duration,
    /// Bytes of decoded audio held in RAM.
    pub arena_bytes: usize,
}

/// What happened in the whole build.
#[derive(Debug, Clone)]
pub struct BuildReport {
    /// One entry per split built.
    pub splits: Vec<SplitReport>,
    /// Whole build, wall.
    pub wall: Duration,
    /// Peak resident memory of the process, if the OS reports it.
    pub peak_rss_bytes: Option<u64>,
    /// Worker threads used.
    pub threads: usize,
}

/// Builds every split of `dataset` (or those named in `only`) into `out`.
pub fn build(
    dataset: &Dataset,
    config: &Config,
    out: &Path,
    on_error: OnError,
    only: &[String],
    progress: &Progress,
) -> Result<BuildReport> {
    let plan = MelPlan::new(config)?;
    std::fs::create_dir_all(out)
        .with_context(|| format!("cannot create output folder {}", out.display()))?;
    for name in only {
        if !dataset.splits.iter().any(|s| &s.name == name) {
            let known: Vec<_> = dataset.splits.iter().map(|s| s.name.as_str()).collect();
            bail!(
                "no split named {name:?} in {} (found: {})",
                dataset.root.display(),
                known.join(", ")
            );
        }
    }
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(config.run.threads)
        .thread_name(|i| format!("melctl-worker-{i}"))
        .build()
        .context("cannot start worker threads")?;
    let started = Instant::now();
    let mut splits = Vec::new();
    for split in dataset
        .splits
        .iter()
        .filter(|s| only.is_empty() || only.contains(&s.name))
    {
        let t0 = Instant::now();
        let bar = progress.bar(split.files.len() as u64, &format!("decode {}", split.name));
        let loader = pool.install(|| {
            PreloadLoader::load(&split.files, &config.audio, config.run.batch_clips, &|| {
                bar.inc(1)
            })
        })?;
        bar.finish_and_clear();
        let load = t0.elapsed();
        if on_error == OnError::Fail
            && let Some(f) = loader.failures().first()
        {
            bail!(
                "{}: {} ({} of {} files in split {} failed; --on-error fail stops before writing)",
                f.path.display(),
                f.reason,
                loader.failures().len(),
                split.files.len(),
                split.name
            );
        }
        let skipped = loader.failures().to_vec();
        let arena_bytes = loader.arena_bytes();
        let spec = SinkSpec {
            split: split.name.clone(),
            rows: loader.clips(),
            plan: plan.clone(),
            label_names: dataset.label_names.clone(),
        };
        let sink = Hdf5Sink::create(out, spec)?;
        let mut backend = CpuBackend::new(plan.clone());
        let bar = progress.bar(loader.clips() as u64, &format!("mel    {}", split.name));
        let (mel, write, output) =
            pool.install(|| run_stages(loader, &mut backend, Box::new(sink), &split.files, &bar))?;
        bar.finish_and_clear();
        let output_bytes = std::fs::metadata(&output).map(|m| m.len()).unwrap_or(0);
        splits.push(SplitReport {
            split: split.name.clone(),
            files: split.files.len(),
            clips: split.files.len() - skipped.len(),
            skipped,
            output,
            output_bytes,
            load,
            mel,
            write,
            wall: t0.elapsed(),
            arena_bytes,
        });
    }
    Ok(BuildReport {
        splits,
        wall: started.elapsed(),
        peak_rss_bytes: peak_rss_bytes(),
        threads: pool.current_num_threads(),
    })
}

type Batch = (usize, Vec<ClipMeta>, OutputBuf);

/// Runs backend and sink over every batch of `loader`; the sink works on its own thread.
/// Returns (mel busy, sink busy, committed path).
fn run_stages(
    mut loader: PreloadLoader,
    backend: &mut dyn MelBackend,
    sink: Box<dyn Sink>,
    files: &[mel_audio::FileEntry],
    bar: &indicatif::ProgressBar,
) -> Result<(Duration, Duration, PathBuf)> {
    let plan = backend.plan().clone();
    let (tx, rx) = mpsc::sync_channel::<Batch>(2);
    let (free_tx, free_rx) = mpsc::channel::<OutputBuf>();
    std::thread::scope(|scope| {
        let writer = scope.spawn(move || -> Result<(Duration, PathBuf)> {
            let mut sink = sink;
            let mut busy = Duration::ZERO;
            for (first_row, meta, data) in rx {
                let t = Instant::now();
                sink.write(first_row, &meta, &data)?;
                busy += t.elapsed();
                let _ = free_tx.send(data);
            }
            let t = Instant::now();
            let path = sink.commit()?;
            Ok((busy + t.elapsed(), path))
        });
        let mut mel_busy = Duration::ZERO;
        let mut row = 0;
        let mut send_failed = false;
        while let Some(batch) = loader.next_batch() {
            let batch = batch?;
            let n = batch.indices.len();
            let mut out = free_rx
                .try_recv()
                .unwrap_or_else(|_| OutputBuf::zeros(plan.dtype, 0));
            out.resize(n * plan.values_per_clip());
            let t = Instant::now();
            backend.compute(batch.samples.samples(), out.as_mut_slice())?;
            mel_busy += t.elapsed();
            let meta = batch
                .indices
                .iter()
                .map(|&i| ClipMeta {
                    label: files[i].label,
                    path: files[i].rel.clone(),
                })
                .collect();
            if tx.send((row, meta, out)).is_err() {
                send_failed = true; // the writer stopped: its error is reported below
                break;
            }
            row += n;
            bar.inc(n as u64);
        }
        drop(tx);
        let (write_busy, path) = writer.join().expect("the writer thread does not panic")?;
        debug_assert!(!send_failed);
        Ok((mel_busy, write_busy, path))
    })
}

/// Peak resident set size (VmHWM) of this process, on Linux.
pub fn peak_rss_bytes() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb * 1024)
}

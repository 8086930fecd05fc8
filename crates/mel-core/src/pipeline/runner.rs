//! Runs one split: a loader thread, the backend on the calling thread, a sink thread.
//!
//! Batches carry their first output row (assigned in file order by the loader stage),
//! so the sink may receive them in any order. Queues are bounded: a slow stage makes
//! the others wait (backpressure) instead of memory growing. Every thread is joined
//! before `run` returns; the sink commits only after an explicit end-of-input message,
//! so an error or a cancellation anywhere drops the sink uncommitted (its temporary
//! file is removed and nothing appears at the final path).
//!
//! Between the backend and the sink, every clip goes through [`super::finite`]: one whose
//! samples or spectrogram are not finite is taken out of its batch (the rows after it
//! move up), named among the run's failures like a file that did not decode, and never
//! reaches the sink or its statistics.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use super::finite;
use super::metrics::{QueueMetrics, StageMetrics};
use super::queue::bounded;
use crate::buffer::OutputBuf;
use crate::error::{Error, FailureKind, Result};
use crate::traits::{
    ClipBatch, ClipFailure, ClipMeta, Finished, Loader, LoaderStats, MelBackend, Sink,
};

/// How to run.
#[derive(Debug, Clone)]
pub struct RunOptions {
    /// Batches each queue holds at most.
    pub queue_depth: usize,
    /// Stop at the first file that fails to load, with its error.
    pub stop_on_failure: bool,
    /// Set from outside (Ctrl-C) to stop the run; the output is not committed.
    pub cancel: Arc<AtomicBool>,
    /// Output buffers kept between runs: a build's splits share one pool, so the
    /// buffers' pages are faulted in once per build, not once per split.
    pub buffers: OutputPool,
}

/// Output buffers handed from one run to the next (cloning shares the pool).
#[derive(Debug, Clone, Default)]
pub struct OutputPool(Arc<std::sync::Mutex<Vec<OutputBuf>>>);

impl OutputPool {
    /// Up to `n` pooled buffers of `dtype` (others are dropped), topped up with empty ones.
    fn take(&self, dtype: crate::config::Dtype, n: usize) -> Vec<OutputBuf> {
        let mut kept = std::mem::take(&mut *self.0.lock().unwrap_or_else(|p| p.into_inner()));
        kept.retain(|b| b.dtype() == dtype);
        kept.truncate(n);
        kept.resize_with(n, || OutputBuf::zeros(dtype, 0));
        kept
    }

    /// Buffers the pool holds now (between runs: those the last run handed back).
    pub fn held(&self) -> usize {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).len()
    }

    /// Returns buffers for the next run.
    fn give(&self, bufs: impl IntoIterator<Item = OutputBuf>) {
        self.0
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .extend(bufs);
    }
}

/// What a run produced.
#[derive(Debug)]
pub struct RunResult {
    /// The finished output, not yet published.
    pub output: Finished,
    /// Clips written.
    pub rows: usize,
    /// Files left out, in file order.
    pub failures: Vec<ClipFailure>,
    /// The loader's own account of its work.
    pub loader: LoaderStats,
    /// load, mel, write.
    pub stages: Vec<StageMetrics>,
    /// load->mel, mel->write.
    pub queues: Vec<QueueMetrics>,
    /// Wall time of the whole run.
    pub wall: Duration,
}

enum Loaded {
    Batch(usize, ClipBatch),
    End(usize),
}

enum Computed {
    Batch(usize, Vec<ClipMeta>, OutputBuf),
    End(usize),
}

type LoadOutcome = (Vec<ClipFailure>, LoaderStats, StageMetrics);

/// Runs `loader` → `backend` → `sink` to completion and finishes the sink (the caller
/// publishes the output).
/// `meta(i)` gives the index, label and path of file `i` (its source comes from the
/// loader's batch); `progress(n)` is called as clips finish.
pub fn run(
    loader: Box<dyn Loader>,
    backend: &mut dyn MelBackend,
    sink: Box<dyn Sink>,
    meta: &(dyn Fn(usize) -> ClipMeta + Sync),
    opts: &RunOptions,
    progress: &(dyn Fn(usize) + Sync),
) -> Result<RunResult> {
    let started = Instant::now();
    let depth = opts.queue_depth.max(1);
    let (load_tx, load_rx) = bounded::<Loaded>("load->mel", depth);
    let (mel_tx, mel_rx) = bounded::<Computed>("mel->write", depth);
    // A fixed set of output buffers, recycled first-in first-out: the queue's worth, one
    // being computed and one being written. Peak memory does not depend on the run's length.
    let (free_tx, free_rx) = mpsc::channel::<OutputBuf>();
    for buf in opts.buffers.take(backend.plan().dtype(), depth + 2) {
        let _ = free_tx.send(buf);
    }
    let stop_flag = AtomicBool::new(false);
    let stop = &stop_flag;
    let stopped = move || stop.load(Ordering::Relaxed) || opts.cancel.load(Ordering::Relaxed);
    let plan = backend.plan().clone();
    let backend_name = backend.name().to_string();

    std::thread::scope(|scope| {
        let loader_thread = std::thread::Builder::new()
            .name("melctl-load".into())
            .spawn_scoped(scope, move || -> Result<LoadOutcome> {
                let mut loader = loader;
                let mut m = StageMetrics::new("load", loader.name());
                let mut row = 0;
                let r = (|| {
                    loop {
                        if stopped() {
                            return Err(Error::Cancelled);
                        }
                        let t = Instant::now();
                        let next = loader.next_batch();
                        m.busy(t.elapsed());
                        if opts.stop_on_failure
                            && let Some(f) = loader.failures().first()
                        {
                            return Err(f.to_error());
                        }
                        let Some(batch) = next else { break };
                        let batch = batch?;
                        let n = batch.indices.len();
                        m.items += n as u64;
                        m.batches += 1;
                        m.bytes += (batch.samples.samples().len() * 4) as u64;
                        match load_tx.send(Loaded::Batch(row, batch)) {
                            Ok(w) => m.wait_output(w),
                            Err(()) => return Err(Error::Cancelled),
                        }
                        row += n;
                    }
                    load_tx
                        .send(Loaded::End(row))
                        .map_err(|()| Error::Cancelled)?;
                    Ok(())
                })();
                if r.is_err() {
                    stop.store(true, Ordering::Relaxed);
                }
                r.map(|()| (loader.failures().to_vec(), loader.stats(), m))
            })
            .map_err(|e| Error::io("load thread", e))?;

        let sink_thread = std::thread::Builder::new()
            .name("melctl-write".into())
            .spawn_scoped(
                scope,
                move || -> Result<(Finished, usize, StageMetrics, QueueMetrics)> {
                    let mut sink = sink;
                    let mut m = StageMetrics::new("write", sink.name());
                    let r = loop {
                        let (msg, waited) = mel_rx.recv();
                        m.wait_input(waited);
                        match msg {
                            Some(Computed::Batch(row, metas, data)) => {
                                let t = Instant::now();
                                if let Err(e) = sink.write(row, &metas, &data) {
                                    break Err(e);
                                }
                                m.busy(t.elapsed());
                                m.items += metas.len() as u64;
                                m.batches += 1;
                                m.bytes += data.as_bytes().len() as u64;
                                let _ = free_tx.send(data);
                            }
                            Some(Computed::End(rows)) => {
                                let t = Instant::now();
                                let out = sink.finish(rows);
                                m.busy(t.elapsed());
                                m.finish_seconds = t.elapsed().as_secs_f64();
                                break out.map(|p| (p, rows));
                            }
                            // Upstream stopped without an end: never commit.
                            None => break Err(Error::Cancelled),
                        }
                    };
                    if r.is_err() {
                        stop.store(true, Ordering::Relaxed);
                    }
                    let q = mel_rx.metrics();
                    r.map(|(p, rows)| (p, rows, m, q))
                },
            )
            .map_err(|e| Error::io("write thread", e))?;

        // The mel stage, on this thread (the backend's device context lives here).
        let mut m = StageMetrics::new("mel", &backend_name);
        // Clips the check took out (their rows are given to the clips after them), and a
        // buffer left unsent because every clip of its batch was taken out.
        let mut screened: Vec<ClipFailure> = Vec::new();
        let mut spare: Option<OutputBuf> = None;
        let mel_result = (|| -> Result<()> {
            loop {
                let (msg, waited) = load_rx.recv();
                m.wait_input(waited);
                if stopped() {
                    return Err(Error::Cancelled);
                }
                match msg {
                    Some(Loaded::Batch(row, batch)) => {
                        let n = batch.indices.len();
                        let (out, waited) = {
                            let t = Instant::now();
                            let out = match spare.take() {
                                Some(b) => b,
                                None => free_rx.recv().map_err(|_| Error::Cancelled)?,
                            };
                            (out, t.elapsed())
                        };
                        m.wait_output(waited);
                        let mut out = out;
                        out.resize(n * plan.values_per_clip());
                        let t = Instant::now();
                        backend.compute(batch.samples.samples(), out.as_mut_slice())?;
                        m.busy(t.elapsed());
                        m.items += n as u64;
                        m.batches += 1;
                        m.bytes += (batch.samples.samples().len() * 4) as u64;
                        let row = row - screened.len();
                        let mut metas: Vec<ClipMeta> = batch
                            .indices
                            .iter()
                            .zip(&batch.sources)
                            .map(|(&i, &source)| ClipMeta { source, ..meta(i) })
                            .collect();
                        // (k in the batch, its index in the run, why)
                        let bad: Vec<(usize, usize, String)> = (0..n)
                            .filter_map(|k| {
                                finite::check_clip(&plan, batch.samples.samples(), &out, k)
                                    .map(|reason| (k, batch.indices[k], reason))
                            })
                            .collect();
                        drop(batch);
                        if !bad.is_empty() {
                            for (k, index, reason) in &bad {
                                let failure = ClipFailure {
                                    index: *index,
                                    path: metas[*k].path.clone().into(),
                                    kind: FailureKind::NonFinite,
                                    reason: reason.clone(),
                                };
                                if opts.stop_on_failure {
                                    return Err(failure.to_error());
                                }
                                screened.push(failure);
                            }
                            let keep: Vec<bool> = (0..n)
                                .map(|k| bad.binary_search_by_key(&k, |b| b.0).is_err())
                                .collect();
                            out.retain_clips(plan.values_per_clip(), &keep);
                            let mut flags = keep.iter();
                            metas.retain(|_| *flags.next().expect("one flag per clip"));
                        }
                        if metas.is_empty() {
                            spare = Some(out);
                            continue;
                        }
                        let written = metas.len();
                        match mel_tx.send(Computed::Batch(row, metas, out)) {
                            Ok(w) => m.wait_output(w),
                            Err(()) => return Err(Error::Cancelled),
                        }
                        progress(written);
                    }
                    Some(Loaded::End(rows)) => {
                        return mel_tx
                            .send(Computed::End(rows - screened.len()))
                            .map(|_| ())
                            .map_err(|()| Error::Cancelled);
                    }
                    None => return Err(Error::Cancelled),
                }
            }
        })();
        if mel_result.is_err() {
            stop.store(true, Ordering::Relaxed);
        }
        opts.buffers.give(spare.take());
        let load_probe = load_rx.probe();
        drop(load_rx);
        drop(mel_tx);
        let loaded = loader_thread.join().map_err(|_| panicked("load"))?;
        let written = sink_thread.join().map_err(|_| panicked("write"))?;
        // Every buffer the sink handed back is kept for the next run.
        opts.buffers.give(free_rx.try_iter());
        let load_q = load_probe.metrics();
        match (loaded, mel_result, written) {
            (
                Ok((mut failures, loader_stats, load_m)),
                Ok(()),
                Ok((output, rows, write_m, mel_q)),
            ) => {
                failures.append(&mut screened);
                failures.sort_by_key(|f| f.index);
                Ok(RunResult {
                    output,
                    rows,
                    failures,
                    loader: loader_stats,
                    stages: vec![load_m, m, write_m],
                    queues: vec![load_q, mel_q],
                    wall: started.elapsed(),
                })
            }
            (l, me, w) => Err(root_cause([l.err(), me.err(), w.err()])),
        }
    })
}

fn panicked(stage: &str) -> Error {
    Error::Internal(format!("the {stage} stage's thread panicked"))
}

/// The error that caused the others: the first that is not the `Cancelled` it led to.
fn root_cause(errors: [Option<Error>; 3]) -> Error {
    errors
        .into_iter()
        .flatten()
        .reduce(|a, b| if matches!(a, Error::Cancelled) { b } else { a })
        .unwrap_or(Error::Cancelled)
}

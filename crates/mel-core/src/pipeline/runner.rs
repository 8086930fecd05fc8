//! Runs one split: a loader thread, the backend on the calling thread, a sink thread.
//!
//! Batches carry their first output row (assigned in file order by the loader stage),
//! so the sink may receive them in any order. Queues are bounded: a slow stage makes
//! the others wait (backpressure) instead of memory growing. Every thread is joined
//! before `run` returns; the sink commits only after an explicit end-of-input message,
//! so an error or a cancellation anywhere drops the sink uncommitted (its temporary
//! file is removed and nothing appears at the final path).
//!
//! Every clip goes through [`super::finite`]: its samples from the load thread, its stored
//! values from the write thread (off the mel stage, which a fast device makes short), on
//! the run's [`CheckPool`] (as are the sink's statistics). A
//! clip that fails is taken out of its batch before the sink (the rows after it move
//! up), named among the run's failures like a file that did not decode, and never
//! reaches the output or its statistics.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use super::checks::CheckPool;
use super::finite::{self, Rejected, Screen};
use super::metrics::{QueueMetrics, StageMetrics};
use super::queue::{Rx, Tx, bounded};
use crate::buffer::OutputBuf;
use crate::error::{Error, Result};
use crate::plan::MelPlan;
use crate::traits::{
    AudioLoader, ClipBatch, ClipFailure, ClipMeta, Finished, LoaderStats, MelBackend, Sink,
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
    /// The threads the finite checks and the sink's statistics run on (a build's splits
    /// share them).
    pub checks: CheckPool,
}

/// Output buffers handed from one run to the next (cloning shares the pool).
pub type OutputPool = crate::buffer::Spares<OutputBuf>;

/// Up to `n` of `pool`'s buffers of `dtype` (others are dropped), topped up with empty ones.
fn take_outputs(pool: &OutputPool, dtype: crate::spec::Dtype, n: usize) -> Vec<OutputBuf> {
    let mut kept = pool.take_all();
    kept.retain(|b| b.dtype() == dtype);
    kept.truncate(n);
    kept.resize_with(n, || OutputBuf::zeros(dtype, 0));
    kept
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

/// A batch, its first row, and the clips whose samples cannot be computed.
enum Loaded {
    Batch(usize, ClipBatch, Rejected),
    End(usize),
}

/// A computed batch: its first row, the run's indices of its clips, their metadata,
/// their values, and the clips whose samples could not be computed.
enum Computed {
    Batch(usize, Vec<usize>, Vec<ClipMeta>, OutputBuf, Rejected),
    End(usize),
}

/// What the write stage gives back: the output, its rows, the clips taken out, metrics.
type WriteOutcome = (
    Finished,
    usize,
    Vec<ClipFailure>,
    StageMetrics,
    QueueMetrics,
);

type LoadOutcome = (Vec<ClipFailure>, LoaderStats, StageMetrics);

/// What every stage shares: the plan, the run's options and the stop signal.
#[derive(Clone, Copy)]
struct StageContext<'a> {
    plan: &'a MelPlan,
    opts: &'a RunOptions,
    /// Set by a stage that failed, so the others stop.
    failed: &'a AtomicBool,
}

impl StageContext<'_> {
    /// Whether a stage failed or the run was cancelled from outside.
    fn stopped(self) -> bool {
        self.failed.load(Ordering::Relaxed) || self.opts.cancel.load(Ordering::Relaxed)
    }

    /// Tells the other stages to stop: this one failed.
    fn stop_others(self) {
        self.failed.store(true, Ordering::Relaxed);
    }
}

/// Runs `loader` → `backend` → `sink` to completion and finishes the sink (the caller
/// publishes the output).
/// `meta(i)` gives the index, label and path of file `i` (its source comes from the
/// loader's batch); `progress(n)` is called as clips finish.
pub fn run(
    loader: Box<dyn AudioLoader>,
    backend: &mut dyn MelBackend,
    sink: Box<dyn Sink>,
    meta: &(dyn Fn(usize) -> ClipMeta + Sync),
    opts: &RunOptions,
    progress: &(dyn Fn(usize) + Sync),
) -> Result<RunResult> {
    let started = Instant::now();
    // An interrupt stops the backend inside a batch, not only between batches.
    backend.watch_cancel(opts.cancel.clone());
    let depth = opts.queue_depth.max(1);
    let (load_tx, load_rx) = bounded::<Loaded>("load->mel", depth);
    let (mel_tx, mel_rx) = bounded::<Computed>("mel->write", depth);
    let (free_tx, free_rx) = recycled_outputs(opts, backend.plan().dtype(), depth);
    let failed = AtomicBool::new(false);
    let plan = backend.plan().clone();
    let cx = StageContext {
        plan: &plan,
        opts,
        failed: &failed,
    };
    let mut mel_metrics = StageMetrics::new("mel", backend.name());

    std::thread::scope(|scope| {
        let loader_thread = std::thread::Builder::new()
            .name("melctl-load".into())
            .spawn_scoped(scope, move || load_stage(loader, load_tx, cx))
            .map_err(|e| Error::io("load thread", e))?;
        let sink_thread = std::thread::Builder::new()
            .name("melctl-write".into())
            .spawn_scoped(scope, move || {
                write_stage(sink, free_tx, mel_rx, progress, cx)
            })
            .map_err(|e| Error::io("write thread", e))?;

        // The mel stage, on this thread (the backend's device context lives here).
        let mel_queues = MelQueues {
            input: &load_rx,
            output: &mel_tx,
            free: &free_rx,
        };
        let mel_result = mel_stage(backend, &mel_queues, meta, cx, &mut mel_metrics);
        if mel_result.is_err() {
            cx.stop_others();
        }
        let load_probe = load_rx.probe();
        drop(load_rx);
        drop(mel_tx);
        let loaded = loader_thread.join().map_err(|_| panicked("load"))?;
        let written = sink_thread.join().map_err(|_| panicked("write"))?;
        // Every buffer the sink handed back is kept for the next run.
        opts.buffers.give(free_rx.try_iter());
        let load_q = load_probe.metrics();
        let mel = mel_result.map(|()| mel_metrics);
        outcome(loaded, mel, written, load_q, started)
    })
}

/// A fixed set of output buffers, recycled first-in first-out: the queue's worth, one
/// being computed and one being written. Peak memory does not depend on the run's length.
fn recycled_outputs(
    opts: &RunOptions,
    dtype: crate::spec::Dtype,
    depth: usize,
) -> (mpsc::Sender<OutputBuf>, mpsc::Receiver<OutputBuf>) {
    let (free_tx, free_rx) = mpsc::channel::<OutputBuf>();
    for buf in take_outputs(&opts.buffers, dtype, super::batches_in_flight(depth)) {
        let _ = free_tx.send(buf);
    }
    (free_tx, free_rx)
}

/// The load stage, on its own thread: the loader's batches, their samples screened, sent
/// to the mel stage with their first rows, then the end with the row count.
fn load_stage(
    loader: Box<dyn AudioLoader>,
    load_tx: Tx<Loaded>,
    cx: StageContext<'_>,
) -> Result<LoadOutcome> {
    let mut loader = loader;
    let mut m = StageMetrics::new("load", loader.name());
    let r = load_batches(loader.as_mut(), &load_tx, cx, &mut m);
    if r.is_err() {
        cx.stop_others();
    }
    r.map(|()| (loader.failures().to_vec(), loader.stats(), m))
}

/// The load stage's loop: until the loader runs out, the run stops, or (with
/// `stop_on_failure`) a file fails.
fn load_batches(
    loader: &mut dyn AudioLoader,
    load_tx: &Tx<Loaded>,
    cx: StageContext<'_>,
    m: &mut StageMetrics,
) -> Result<()> {
    let mut row = 0;
    loop {
        if cx.stopped() {
            return Err(Error::Cancelled);
        }
        let t = Instant::now();
        let next = loader.next_batch();
        m.busy(t.elapsed());
        if cx.opts.stop_on_failure
            && let Some(f) = loader.failures().first()
        {
            return Err(f.to_error());
        }
        let Some(batch) = next else { break };
        let batch = batch?;
        let n = batch.indices.len();
        let t = Instant::now();
        let samples = batch.samples.samples();
        let rejected = cx
            .opts
            .checks
            .install(|| finite::reject_samples(cx.plan, samples))?;
        m.busy(t.elapsed());
        m.items += n as u64;
        m.batches += 1;
        m.bytes += (batch.samples.samples().len() * 4) as u64;
        match load_tx.send(Loaded::Batch(row, batch, rejected)) {
            Ok(w) => m.wait_output(w),
            Err(()) => return Err(Error::Cancelled),
        }
        row += n;
    }
    load_tx
        .send(Loaded::End(row))
        .map_err(|()| Error::Cancelled)?;
    Ok(())
}

/// The mel stage's queue ends: batches in, computed batches out, and the free output
/// buffers the write stage hands back.
struct MelQueues<'a> {
    input: &'a Rx<Loaded>,
    output: &'a Tx<Computed>,
    free: &'a mpsc::Receiver<OutputBuf>,
}

/// The mel stage: each batch computed into a free output buffer and sent on with its
/// clips' metadata, until the end (passed on), a stop or an error.
fn mel_stage(
    backend: &mut dyn MelBackend,
    queues: &MelQueues<'_>,
    meta: &(dyn Fn(usize) -> ClipMeta + Sync),
    cx: StageContext<'_>,
    m: &mut StageMetrics,
) -> Result<()> {
    loop {
        let (msg, waited) = queues.input.recv();
        m.wait_input(waited);
        if cx.stopped() {
            return Err(Error::Cancelled);
        }
        match msg {
            Some(Loaded::Batch(row, batch, rejected)) => {
                let n = batch.indices.len();
                let (out, waited) = {
                    let t = Instant::now();
                    (
                        queues.free.recv().map_err(|_| Error::Cancelled)?,
                        t.elapsed(),
                    )
                };
                m.wait_output(waited);
                let mut out = out;
                out.resize(n * cx.plan.values_per_clip());
                let t = Instant::now();
                backend.compute(batch.samples.samples(), out.as_mut_slice())?;
                m.busy(t.elapsed());
                m.items += n as u64;
                m.batches += 1;
                m.bytes += (batch.samples.samples().len() * 4) as u64;
                let metas = batch
                    .indices
                    .iter()
                    .zip(&batch.sources)
                    .map(|(&i, &source)| ClipMeta { source, ..meta(i) })
                    .collect();
                let indices = batch.indices;
                drop(batch.samples);
                match queues
                    .output
                    .send(Computed::Batch(row, indices, metas, out, rejected))
                {
                    Ok(w) => m.wait_output(w),
                    Err(()) => return Err(Error::Cancelled),
                }
            }
            Some(Loaded::End(rows)) => {
                return queues
                    .output
                    .send(Computed::End(rows))
                    .map(|_| ())
                    .map_err(|()| Error::Cancelled);
            }
            None => return Err(Error::Cancelled),
        }
    }
}

/// The write stage, on its own thread: each computed batch screened and written, its
/// buffer handed back to the mel stage; the sink finished at the end, never without one.
fn write_stage(
    sink: Box<dyn Sink>,
    free_tx: mpsc::Sender<OutputBuf>,
    mel_rx: Rx<Computed>,
    progress: &(dyn Fn(usize) + Sync),
    cx: StageContext<'_>,
) -> Result<WriteOutcome> {
    let mut sink = sink;
    let mut m = StageMetrics::new("write", sink.name());
    let mut screen = Screen::new(cx.plan, cx.opts.stop_on_failure);
    let r = loop {
        let (msg, waited) = mel_rx.recv();
        m.wait_input(waited);
        match msg {
            Some(Computed::Batch(row, indices, mut metas, mut data, rejected)) => {
                let t = Instant::now();
                // The check and the sink's write (its statistics) on the
                // check pool, whose parallel loops they use.
                let written = cx.opts.checks.install(|| {
                    let row = screen.apply(row, &indices, &mut metas, &mut data, rejected)?;
                    if !metas.is_empty() {
                        sink.write(row, &metas, &data)?;
                    }
                    Ok(())
                });
                if let Err(e) = written.and_then(|r| r) {
                    break Err(e);
                }
                m.busy(t.elapsed());
                m.items += metas.len() as u64;
                m.batches += 1;
                m.bytes += data.as_bytes().len() as u64;
                let _ = free_tx.send(data);
                progress(metas.len());
            }
            Some(Computed::End(rows)) => {
                let t = Instant::now();
                let rows = screen.rows(rows);
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
        cx.stop_others();
    }
    let q = mel_rx.metrics();
    r.map(|(p, rows)| (p, rows, screen.failures, m, q))
}

/// The run's result from its stages' outcomes (the mel stage's is its metrics), or the
/// error that caused the others.
fn outcome(
    loaded: Result<LoadOutcome>,
    mel: Result<StageMetrics>,
    written: Result<WriteOutcome>,
    load_q: QueueMetrics,
    started: Instant,
) -> Result<RunResult> {
    match (loaded, mel, written) {
        (
            Ok((mut failures, loader_stats, load_m)),
            Ok(mel_m),
            Ok((output, rows, mut screened, write_m, mel_q)),
        ) => {
            failures.append(&mut screened);
            failures.sort_by_key(|f| f.index);
            Ok(RunResult {
                output,
                rows,
                failures,
                loader: loader_stats,
                stages: vec![load_m, mel_m, write_m],
                queues: vec![load_q, mel_q],
                wall: started.elapsed(),
            })
        }
        (l, me, w) => Err(root_cause([l.err(), me.err(), w.err()])),
    }
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

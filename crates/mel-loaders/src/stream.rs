//! The streaming loader: a pool of reader threads reads (`O_NOATIME`, `posix_fadvise`,
//! fixed read size) and decodes tasks of consecutive files straight into batch buffers;
//! batches are handed out in file order. At most `in_flight` tasks are outstanding, so
//! memory is bounded by a few batches whatever the number of clips.

use std::collections::VecDeque;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, Sender, channel};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Instant;

use mel_audio::FileEntry;
use mel_core::config::StreamConfig;
use mel_core::spec::AudioConfig;
use mel_core::{AudioLoader, ClipBatch, ClipFailure, Error, LoaderStats, Result, SourceInfo};

use crate::io::{ReadOptions, load_clip};
use crate::pool::{BufferPool, PooledSamples, SpareBuffers};

/// Work for one reader: files `first..first + count` decoded into `dst` (count × clip samples).
struct Task {
    batch: usize,
    first: usize,
    count: usize,
    dst: SendPtr,
}

/// A raw pointer to a task's region of a batch buffer. The region is written by exactly
/// one reader and read by the loader only after the reader reported the task done.
struct SendPtr(*mut f32);
// SAFETY: each pointer addresses a region no other thread touches until the task's
// completion message (a happens-before edge through the channel) arrives.
unsafe impl Send for SendPtr {}

/// A finished task: its batch, its first file, each file's source (a default for those
/// that failed) and the files of it that failed.
struct Done {
    batch: usize,
    first: usize,
    sources: Vec<SourceInfo>,
    failures: Vec<ClipFailure>,
}

/// A batch being filled.
struct Pending {
    first: usize,
    count: usize,
    tasks_left: usize,
    buf: Vec<f32>,
    sources: Vec<SourceInfo>,
    failures: Vec<ClipFailure>,
}

/// Counters shared with the readers.
#[derive(Default)]
struct Counters {
    /// Reading and decoding, summed over readers.
    decode_ns: AtomicU64,
    bytes: AtomicU64,
    files: AtomicU64,
}

/// The streaming loader (see the module documentation).
pub struct StreamLoader {
    files: Arc<Vec<FileEntry>>,
    clip_samples: usize,
    batch_clips: usize,
    files_per_task: usize,
    in_flight: usize,
    tasks: Option<Sender<Task>>,
    done: Receiver<Done>,
    readers: Vec<JoinHandle<()>>,
    stop: Arc<AtomicBool>,
    counters: Arc<Counters>,
    pool: BufferPool,
    /// Batches issued and not yet handed out, in file order.
    pending: VecDeque<Pending>,
    next_file: usize,
    outstanding_tasks: usize,
    failures: Vec<ClipFailure>,
}

impl StreamLoader {
    /// Starts the readers for `files`. `held` is how many batches the consumer may hold at
    /// once (queued or in use): the loader creates at most that many batch buffers beyond
    /// those it is filling, so peak memory does not depend on the number of clips.
    pub fn start(
        files: Vec<FileEntry>,
        audio: &AudioConfig,
        batch_clips: usize,
        threads: usize,
        cfg: &StreamConfig,
        held: usize,
    ) -> Result<Self> {
        if cfg.files_per_task == 0 {
            return Err(Error::config(
                "run.stream.files_per_task",
                "must be at least 1",
            ));
        }
        let batch_clips = batch_clips.max(1);
        let shape = mel_core::pipeline::StreamShape::new(cfg, batch_clips, threads);
        let (readers, files_per_task, in_flight) =
            (shape.readers, shape.files_per_task, shape.in_flight);
        let clip_samples = audio.clip_samples();
        let files = Arc::new(files);
        let (task_tx, task_rx) = channel::<Task>();
        let task_rx = Arc::new(Mutex::new(task_rx));
        let (done_tx, done_rx) = channel::<Done>();
        let stop = Arc::new(AtomicBool::new(false));
        let counters = Arc::new(Counters::default());
        let opts = ReadOptions {
            read_size: cfg.read_size,
            noatime: cfg.noatime,
            fadvise: cfg.fadvise,
        };
        let mut handles = Vec::with_capacity(readers);
        for i in 0..readers {
            let reader = Reader {
                files: files.clone(),
                audio: audio.clone(),
                clip_samples,
                opts,
                tasks: task_rx.clone(),
                done: done_tx.clone(),
                stop: stop.clone(),
                counters: counters.clone(),
            };
            let h = std::thread::Builder::new()
                .name(format!("melctl-reader-{i}"))
                .spawn(move || reader.run())
                .map_err(|e| Error::io("reader thread", e))?;
            handles.push(h);
        }
        Ok(StreamLoader {
            files,
            clip_samples,
            batch_clips,
            files_per_task,
            in_flight,
            tasks: Some(task_tx),
            done: done_rx,
            readers: handles,
            stop,
            counters,
            pool: BufferPool::new(shape.batch_buffers(held)),
            pending: VecDeque::new(),
            next_file: 0,
            outstanding_tasks: 0,
            failures: Vec::new(),
        })
    }

    /// The same loader, its batch buffers taken from `spares` first and left there when
    /// it and its batches are gone (a build's splits share them). Call it right after
    /// [`start`](Self::start), before the first batch.
    pub fn with_spares(mut self, spares: SpareBuffers) -> Self {
        self.pool = BufferPool::with_spares(self.pool.limit(), spares);
        self
    }

    /// Issues the tasks of the next batch if the in-flight limit allows it.
    fn issue_batch(&mut self) -> bool {
        let n = self.files.len();
        if self.next_file >= n {
            return false;
        }
        let count = self.batch_clips.min(n - self.next_file);
        let tasks = count.div_ceil(self.files_per_task);
        if self.outstanding_tasks > 0 && self.outstanding_tasks + tasks > self.in_flight {
            return false;
        }
        // Wait for a buffer only when nothing is in flight; otherwise go consume first.
        let mut buf = if self.pending.is_empty() {
            self.pool.take(count * self.clip_samples)
        } else {
            match self.pool.try_take(count * self.clip_samples) {
                Some(b) => b,
                None => return false,
            }
        };
        let base = buf.as_mut_ptr();
        let tx = self.tasks.as_ref().expect("tasks open until drop");
        let batch_id = self.next_file;
        for t in 0..tasks {
            let first = t * self.files_per_task;
            let task_count = self.files_per_task.min(count - first);
            // SAFETY: `first * clip_samples + task_count * clip_samples <= buf.len()`; the
            // buffer's heap block stays put while it sits in `pending` (never resized there).
            let dst = SendPtr(unsafe { base.add(first * self.clip_samples) });
            let _ = tx.send(Task {
                batch: batch_id,
                first: self.next_file + first,
                count: task_count,
                dst,
            });
        }
        self.pending.push_back(Pending {
            first: self.next_file,
            count,
            tasks_left: tasks,
            buf,
            sources: vec![SourceInfo::default(); count],
            failures: Vec::new(),
        });
        self.outstanding_tasks += tasks;
        self.next_file += count;
        true
    }

    /// Turns a complete batch into a `ClipBatch`, compacting out failed files.
    fn finish(&mut self, p: Pending) -> ClipBatch {
        let tasks = p.count.div_ceil(self.files_per_task);
        self.outstanding_tasks -= tasks;
        let mut buf = p.buf;
        let mut ok = vec![true; p.count];
        let mut failures = p.failures;
        failures.sort_by_key(|f| f.index);
        for f in &failures {
            ok[f.index - p.first] = false;
        }
        self.failures.extend(failures);
        let indices: Vec<usize> = (0..p.count)
            .filter(|&k| ok[k])
            .map(|k| p.first + k)
            .collect();
        let sources: Vec<SourceInfo> = (0..p.count)
            .filter(|&k| ok[k])
            .map(|k| p.sources[k])
            .collect();
        let kept = crate::arena::compact(&mut buf, self.clip_samples, &ok);
        buf.truncate(kept * self.clip_samples);
        let len = buf.len();
        ClipBatch {
            indices,
            sources,
            samples: mel_core::SampleBlock::new(
                Arc::new(PooledSamples::new(buf, self.pool.clone())),
                0,
                len,
            ),
        }
    }
}

impl AudioLoader for StreamLoader {
    fn name(&self) -> &str {
        "stream"
    }

    fn next_batch(&mut self) -> Option<Result<ClipBatch>> {
        loop {
            while self.issue_batch() {}
            let front = self.pending.front()?;
            if front.tasks_left == 0 {
                let p = self.pending.pop_front().expect("front exists");
                let batch = self.finish(p);
                if batch.indices.is_empty() {
                    continue; // every file of this batch failed
                }
                return Some(Ok(batch));
            }
            let Ok(done) = self.done.recv() else {
                return Some(Err(Error::Internal(
                    "a reader thread of the stream loader stopped unexpectedly".into(),
                )));
            };
            let p = self
                .pending
                .iter_mut()
                .find(|p| p.first == done.batch)
                .expect("a done task belongs to a pending batch");
            p.tasks_left -= 1;
            let at = done.first - p.first;
            p.sources[at..at + done.sources.len()].copy_from_slice(&done.sources);
            p.failures.extend(done.failures);
        }
    }

    fn failures(&self) -> &[ClipFailure] {
        &self.failures
    }

    fn stats(&self) -> LoaderStats {
        let c = &self.counters;
        LoaderStats {
            workers: self.readers.len(),
            decode_seconds: c.decode_ns.load(Ordering::Relaxed) as f64 * 1e-9,
            bytes_read: c.bytes.load(Ordering::Relaxed),
            files: c.files.load(Ordering::Relaxed),
            note: format!(
                "{} readers, {} files per task, at most {} tasks in flight",
                self.readers.len(),
                self.files_per_task,
                self.in_flight
            ),
        }
    }
}

impl Drop for StreamLoader {
    /// Stops the readers and waits for them before any batch buffer is freed.
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        self.tasks = None;
        for h in self.readers.drain(..) {
            let _ = h.join();
        }
    }
}

/// One reader thread's state.
struct Reader {
    files: Arc<Vec<FileEntry>>,
    audio: AudioConfig,
    clip_samples: usize,
    opts: ReadOptions,
    tasks: Arc<Mutex<Receiver<Task>>>,
    done: Sender<Done>,
    stop: Arc<AtomicBool>,
    counters: Arc<Counters>,
}

impl Reader {
    fn run(self) {
        let mut bytes = Vec::new();
        loop {
            let task = {
                let Ok(rx) = self.tasks.lock() else { return };
                match rx.recv() {
                    Ok(t) => t,
                    Err(_) => return,
                }
            };
            let mut failures = Vec::new();
            let mut sources = vec![SourceInfo::default(); task.count];
            for (k, source) in sources.iter_mut().enumerate() {
                let i = task.first + k;
                // SAFETY: see `SendPtr`; this region belongs to this task alone.
                let row = unsafe {
                    std::slice::from_raw_parts_mut(
                        task.dst.0.add(k * self.clip_samples),
                        self.clip_samples,
                    )
                };
                let path = &self.files[i].path;
                if self.stop.load(Ordering::Relaxed) {
                    failures.push(ClipFailure::from_error(i, path, &Error::Cancelled));
                    continue;
                }
                // A panic must not end this thread: its task would never be reported done
                // and the loader would wait for it forever.
                let loaded = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                    self.load_one(path, row, &mut bytes)
                }))
                .unwrap_or_else(|panic| {
                    let what = mel_core::error::panic_message(panic.as_ref());
                    Err(Error::Internal(format!(
                        "{}: reading failed ({what})",
                        path.display()
                    )))
                });
                match loaded {
                    Ok(s) => *source = s,
                    Err(e) => failures.push(ClipFailure::from_error(i, path, &e)),
                }
            }
            if self
                .done
                .send(Done {
                    batch: task.batch,
                    first: task.first,
                    sources,
                    failures,
                })
                .is_err()
            {
                return;
            }
        }
    }

    fn load_one(&self, path: &Path, row: &mut [f32], bytes: &mut Vec<u8>) -> Result<SourceInfo> {
        let t0 = Instant::now();
        let r = load_clip(path, &self.audio, self.opts, row, bytes);
        self.counters
            .decode_ns
            .fetch_add(t0.elapsed().as_nanos() as u64, Ordering::Relaxed);
        self.counters.files.fetch_add(1, Ordering::Relaxed);
        self.counters
            .bytes
            .fetch_add(bytes.len() as u64, Ordering::Relaxed);
        r
    }
}

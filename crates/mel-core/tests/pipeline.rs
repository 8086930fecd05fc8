//! The runner with stand-in stages: rows, failures, metrics, errors and cancellation.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use mel_core::pipeline::{CheckPool, OutputPool, RunOptions, run};
use mel_core::{
    AudioLoader, ClipBatch, ClipFailure, ClipMeta, Config, Error, Finished, MelBackend, MelPlan,
    OutputBuf, OutputSlice, Result, SampleBlock, Sink, SourceInfo,
};

fn plan() -> MelPlan {
    MelPlan::from_config(&Config::default()).unwrap()
}

/// Yields `batches` batches of 3 clips; file 4 fails. Clip i's samples are all `i`, or
/// the value `poison` gives file i.
struct FakeLoader {
    next: usize,
    batches: usize,
    clip: usize,
    failures: Vec<ClipFailure>,
    poison: Vec<(usize, f32)>,
}

impl AudioLoader for FakeLoader {
    fn name(&self) -> &str {
        "fake"
    }
    fn next_batch(&mut self) -> Option<Result<ClipBatch>> {
        if self.next >= self.batches {
            return None;
        }
        let b = self.next;
        self.next += 1;
        let mut indices: Vec<usize> = (b * 3..b * 3 + 3).collect();
        if indices.contains(&4) {
            indices.retain(|&i| i != 4);
            self.failures.push(ClipFailure {
                index: 4,
                path: "f4.wav".into(),
                kind: mel_core::FailureKind::Decode,
                reason: "broken".into(),
            });
        }
        let samples = indices
            .iter()
            .flat_map(|&i| {
                let p = self.poison.iter().find(|p| p.0 == i);
                std::iter::repeat_n(p.map_or(i as f32, |p| p.1), self.clip)
            })
            .collect();
        let sources = indices
            .iter()
            .map(|&i| SourceInfo {
                rate: 1000 + i as u32,
                channels: 2,
                frames: 7,
            })
            .collect();
        Some(Ok(ClipBatch {
            indices,
            sources,
            samples: SampleBlock::owned(samples),
        }))
    }
    fn failures(&self) -> &[ClipFailure] {
        &self.failures
    }
}

thread_local! {
    /// Where each output buffer the backend wrote lives (the mel stage runs on the thread
    /// that called `run`, so each test sees only its own).
    static OUTPUT_BUFFERS: std::cell::RefCell<std::collections::HashSet<usize>> =
        Default::default();
}

/// Writes the first sample of each clip as every value; fails on request.
struct FakeBackend {
    plan: MelPlan,
    fail_at_call: Option<usize>,
    calls: usize,
}

impl MelBackend for FakeBackend {
    fn name(&self) -> &str {
        "fake"
    }
    fn plan(&self) -> &MelPlan {
        &self.plan
    }
    fn compute(&mut self, clips: &[f32], out: OutputSlice<'_>) -> Result<()> {
        self.calls += 1;
        if Some(self.calls) == self.fail_at_call {
            return Err(Error::Device {
                backend: "fake".into(),
                message: "device lost".into(),
            });
        }
        let OutputSlice::F16(o) = out else {
            panic!("f16")
        };
        OUTPUT_BUFFERS.with(|b| b.borrow_mut().insert(o.as_ptr() as usize));
        let per = self.plan.values_per_clip();
        let cs = self.plan.clip_samples();
        for (k, chunk) in o.chunks_mut(per).enumerate() {
            chunk.fill(half::f16::from_f32(clips[k * cs]));
        }
        Ok(())
    }
}

#[derive(Default)]
struct Seen {
    rows: Vec<(usize, usize, f32, String)>,
    /// Whether every value of every batch written was finite.
    all_finite: bool,
    writes: usize,
    sources: Vec<(usize, u32)>,
    committed: Option<usize>,
}

struct FakeSink {
    seen: Arc<Mutex<Seen>>,
    fail: bool,
}

impl Sink for FakeSink {
    fn name(&self) -> &str {
        "fake"
    }
    fn write(&mut self, first_row: usize, meta: &[ClipMeta], data: &OutputBuf) -> Result<()> {
        if self.fail {
            return Err(Error::Output {
                path: "x.h5".into(),
                message: "disk full".into(),
            });
        }
        let per = data.len() / meta.len();
        let mut s = self.seen.lock().unwrap();
        let finite = (0..data.len()).all(|i| data.get_f64(i).is_finite());
        s.all_finite = (s.writes == 0 || s.all_finite) && finite;
        s.writes += 1;
        for (k, m) in meta.iter().enumerate() {
            s.rows.push((
                first_row + k,
                m.label as usize,
                data.get_f64(k * per) as f32,
                m.path.clone(),
            ));
            s.sources.push((m.index, m.source.rate));
        }
        Ok(())
    }
    fn finish(self: Box<Self>, rows: usize) -> Result<Finished> {
        self.seen.lock().unwrap().committed = Some(rows);
        Ok(Finished::in_place("x.h5".into(), 0))
    }
}

fn go(
    batches: usize,
    fail_backend: Option<usize>,
    fail_sink: bool,
    stop_on_failure: bool,
    cancel: bool,
) -> (Result<mel_core::pipeline::RunResult>, Seen) {
    let pool = OutputPool::default();
    go_with(
        &pool,
        batches,
        fail_backend,
        fail_sink,
        stop_on_failure,
        cancel,
    )
}

fn go_with(
    pool: &OutputPool,
    batches: usize,
    fail_backend: Option<usize>,
    fail_sink: bool,
    stop_on_failure: bool,
    cancel: bool,
) -> (Result<mel_core::pipeline::RunResult>, Seen) {
    go_poisoned(
        pool,
        batches,
        fail_backend,
        fail_sink,
        stop_on_failure,
        cancel,
        vec![],
    )
}

fn go_poisoned(
    pool: &OutputPool,
    batches: usize,
    fail_backend: Option<usize>,
    fail_sink: bool,
    stop_on_failure: bool,
    cancel: bool,
    poison: Vec<(usize, f32)>,
) -> (Result<mel_core::pipeline::RunResult>, Seen) {
    let plan = plan();
    let seen = Arc::new(Mutex::new(Seen::default()));
    let loader = FakeLoader {
        next: 0,
        batches,
        clip: plan.clip_samples(),
        failures: vec![],
        poison,
    };
    let mut backend = FakeBackend {
        plan,
        fail_at_call: fail_backend,
        calls: 0,
    };
    let sink = FakeSink {
        seen: seen.clone(),
        fail: fail_sink,
    };
    let opts = RunOptions {
        queue_depth: 1,
        stop_on_failure,
        cancel: Arc::new(AtomicBool::new(cancel)),
        buffers: pool.clone(),
        checks: CheckPool::new(2),
    };
    let done = std::sync::atomic::AtomicUsize::new(0);
    let r = run(
        Box::new(loader),
        &mut backend,
        Box::new(sink),
        &|i| ClipMeta {
            meta: Default::default(),
            index: i,
            source: SourceInfo::default(),
            label: i as i64 * 10,
            path: format!("f{i}.wav"),
        },
        &opts,
        &|n| {
            done.fetch_add(n, Ordering::Relaxed);
        },
    );
    if let Ok(result) = &r {
        assert_eq!(done.load(Ordering::Relaxed), result.rows);
    }
    let s = std::mem::take(&mut *seen.lock().unwrap());
    (r, s)
}

#[test]
fn rows_are_assigned_in_file_order_with_failures_compacted_out() {
    let (r, seen) = go(20, None, false, false, false);
    let r = r.unwrap();
    assert_eq!(r.rows, 59);
    assert_eq!(seen.committed, Some(59));
    assert_eq!(r.failures.len(), 1);
    let mut rows = seen.rows;
    rows.sort_by_key(|x| x.0);
    for (row, (r_, label, value, path)) in rows.iter().enumerate() {
        let file = if row < 4 { row } else { row + 1 };
        assert_eq!(
            (*r_, *label, *value, path.as_str()),
            (row, file * 10, file as f32, format!("f{file}.wav").as_str())
        );
    }
    // Each clip's source comes from the loader's batch, matched to its file.
    assert_eq!(seen.sources.len(), 59);
    assert!(
        seen.sources
            .iter()
            .all(|&(i, rate)| rate == 1000 + i as u32)
    );
    let names: Vec<_> = r.stages.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names, ["load", "mel", "write"]);
    for s in &r.stages {
        assert_eq!(s.items, 59, "{}", s.name);
        assert_eq!(s.batches, 20);
    }
    assert_eq!(r.queues.len(), 2);
    assert!(
        r.queues.iter().all(|q| q.pushes == 21 && q.max_depth == 1),
        "{:?}",
        r.queues
    );
}

#[test]
fn a_backend_error_is_reported_and_nothing_is_committed() {
    let (r, seen) = go(20, Some(5), false, false, false);
    let e = r.unwrap_err();
    assert!(e.to_string().contains("device lost"), "{e}");
    assert_eq!(seen.committed, None);
}

#[test]
fn a_sink_error_is_reported_and_nothing_is_committed() {
    let (r, seen) = go(20, None, true, false, false);
    let e = r.unwrap_err();
    assert!(e.to_string().contains("disk full"), "{e}");
    assert_eq!(seen.committed, None);
}

#[test]
fn stop_on_failure_names_the_file_and_commits_nothing() {
    let (r, seen) = go(20, None, false, true, false);
    let e = r.unwrap_err();
    assert!(
        e.to_string().contains("f4.wav") && e.to_string().contains("broken"),
        "{e}"
    );
    assert_eq!(seen.committed, None);
}

#[test]
fn cancellation_stops_the_run_without_committing() {
    let (r, seen) = go(20, None, false, false, true);
    assert!(matches!(r.unwrap_err(), Error::Cancelled));
    assert_eq!(seen.committed, None);
}

#[test]
fn runs_sharing_a_pool_reuse_its_buffers_and_write_only_their_own_rows() {
    // queue_depth 1: three buffers in flight at most. The second run (fewer batches,
    // other values) takes its buffers from the pool, still holding the first run's
    // values, and must write exactly what a run with a fresh pool writes.
    let pool = OutputPool::default();
    let buffers = || OUTPUT_BUFFERS.with(|b| std::mem::take(&mut *b.borrow_mut()));
    buffers();
    let (first, _) = go_with(&pool, 20, None, false, false, false);
    first.unwrap();
    let first_buffers = buffers();
    assert_eq!(pool.held(), 3);
    let (second, seen_second) = go_with(&pool, 7, None, false, false, false);
    let second_buffers = buffers();
    assert_eq!(pool.held(), 3, "the pool does not grow from run to run");
    assert!(
        second_buffers.is_subset(&first_buffers),
        "the second run wrote only into the first run's buffers"
    );
    let (fresh, seen_fresh) = go(7, None, false, false, false);
    assert_eq!(second.unwrap().rows, fresh.unwrap().rows);
    let sorted = |mut rows: Vec<(usize, usize, f32, String)>| {
        rows.sort_by_key(|r| r.0);
        rows
    };
    assert_eq!(sorted(seen_second.rows), sorted(seen_fresh.rows));
}

/// Files 1 (a NaN sample), 7 (1e6: finite, but +inf in f16), 9, 10 and 11 (a whole
/// batch: 1e30, beyond what the f32 arithmetic takes) and 13 (-inf).
fn poison() -> Vec<(usize, f32)> {
    vec![
        (1, f32::NAN),
        (7, 1e6),
        (9, 1e30),
        (10, 1e30),
        (11, 1e30),
        (13, f32::NEG_INFINITY),
    ]
}

#[test]
fn clips_that_are_not_finite_are_named_failures_and_later_rows_move_up() {
    let (r, seen) = go_poisoned(
        &OutputPool::default(),
        20,
        None,
        false,
        false,
        false,
        poison(),
    );
    let r = r.unwrap();
    let failed: Vec<usize> = r.failures.iter().map(|f| f.index).collect();
    assert_eq!(failed, [1, 4, 7, 9, 10, 11, 13], "{:?}", r.failures);
    for f in r.failures.iter().filter(|f| f.index != 4) {
        assert_eq!(f.kind, mel_core::FailureKind::NonFinite, "{f:?}");
        assert_eq!(
            f.path,
            std::path::PathBuf::from(format!("f{}.wav", f.index))
        );
        assert!(f.reason.starts_with("non-finite spectrogram"), "{f:?}");
    }
    let reason = |i: usize| &r.failures.iter().find(|f| f.index == i).unwrap().reason;
    assert!(reason(1).contains("NaN"), "{}", reason(1));
    assert!(
        reason(7).contains("inf") && reason(7).contains("f16"),
        "{}",
        reason(7)
    );
    assert!(
        reason(9).contains("1e30") && reason(9).contains("overflow"),
        "{}",
        reason(9)
    );
    assert!(reason(13).contains("-inf"), "{}", reason(13));
    assert_eq!(r.rows, 60 - 7);
    assert_eq!(seen.committed, Some(53));
    assert!(
        seen.all_finite,
        "a value that is not finite reached the sink"
    );
    // Rows 0..53 hold the remaining files in order, each once.
    let mut rows = seen.rows;
    rows.sort_by_key(|x| x.0);
    let files: Vec<usize> = (0..60).filter(|i| !failed.contains(i)).collect();
    assert_eq!(rows.len(), files.len());
    for (row, (r_, _, value, path)) in rows.iter().enumerate() {
        assert_eq!(
            (*r_, *value, path.as_str()),
            (
                row,
                files[row] as f32,
                format!("f{}.wav", files[row]).as_str()
            )
        );
    }
    // The batch whose every clip failed was not written.
    assert_eq!(seen.writes, 19);
}

#[test]
fn stop_on_failure_stops_at_a_clip_that_is_not_finite() {
    // One batch (files 0-2): file 4, which the loader fails, is never reached.
    let (r, seen) = go_poisoned(
        &OutputPool::default(),
        1,
        None,
        false,
        true,
        false,
        vec![(2, 1e6)],
    );
    let e = r.unwrap_err().to_string();
    assert!(e.contains("f2.wav") && e.contains("non-finite"), "{e}");
    assert_eq!(seen.committed, None);
}

/// A run started from a job on the global rayon pool, whose one worker is then the mel
/// stage waiting for batches: the load and write stages' checks must not need that pool
/// (they did, and the run never finished).
#[test]
fn a_run_started_inside_a_global_pool_job_finishes() {
    rayon::ThreadPoolBuilder::new()
        .num_threads(1)
        .build_global()
        .expect("no test of this binary starts the global pool before this one");
    let (tx, rx) = std::sync::mpsc::channel();
    rayon::spawn(move || {
        let _ = tx.send(go(4, None, false, false, false).0.map(|r| r.rows));
    });
    let rows = rx
        .recv_timeout(std::time::Duration::from_secs(60))
        .expect("the run finished (no deadlock)");
    assert_eq!(rows.unwrap(), 11);
}

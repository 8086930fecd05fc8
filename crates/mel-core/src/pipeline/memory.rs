//! What the pipeline holds in memory at once, written once beside the pipeline that
//! allocates it: the runner's output buffers, the streaming loader's decoded batches and
//! the check that refuses a configuration too large for the machine all use
//! [`batches_in_flight`].

use crate::config::{Config, LoaderKind, StreamConfig};
use crate::error::{Error, Result};
use crate::plan::MelPlan;

/// Batches of one kind (decoded input, or computed output) in flight at once: a queue's
/// worth (`queue_depth`, at least 1), one being produced and one being consumed.
pub fn batches_in_flight(queue_depth: usize) -> usize {
    queue_depth.max(1) + 2
}

/// How the streaming loader cuts its work: tasks of whole files, and how many may be
/// decoded ahead of the consumer. One home for the loader and the memory check.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StreamShape {
    /// Reader threads.
    pub readers: usize,
    /// Files one task decodes.
    pub files_per_task: usize,
    /// Tasks in one batch.
    pub tasks_per_batch: usize,
    /// Tasks decoded and not yet consumed, at most.
    pub in_flight: usize,
}

impl StreamShape {
    /// The shape `stream` gives batches of `batch_clips` clips with `threads` worker
    /// threads (the readers' count when `stream.readers` is 0).
    pub fn new(stream: &StreamConfig, batch_clips: usize, threads: usize) -> StreamShape {
        let readers = if stream.readers == 0 {
            threads.max(1)
        } else {
            stream.readers
        };
        let batch_clips = batch_clips.max(1);
        let files_per_task = stream.files_per_task.clamp(1, batch_clips);
        let tasks_per_batch = batch_clips.div_ceil(files_per_task);
        let in_flight = if stream.in_flight == 0 {
            (2 * readers).max(2 * tasks_per_batch)
        } else {
            stream.in_flight.max(tasks_per_batch)
        };
        StreamShape {
            readers,
            files_per_task,
            tasks_per_batch,
            in_flight,
        }
    }

    /// The batch buffers the loader may hold at once: those its tasks in flight fill,
    /// one more being issued, and the `held` ones its consumer holds.
    pub fn batch_buffers(&self, held: usize) -> usize {
        self.in_flight.div_ceil(self.tasks_per_batch) + 1 + held
    }
}

/// Estimates the memory the pipeline's buffers take (input and output batches in flight)
/// and refuses a configuration that would take more than half of `available` bytes,
/// naming the fields, the figure and the limit. The preload loader's arena is sized
/// separately (the automatic choice never picks it: it maps a cache or streams).
pub fn check_memory(config: &Config, plan: &MelPlan, available: u64) -> Result<()> {
    let batch = config.run.batch_clips as u128;
    let input = batch * plan.clip_samples() as u128 * 4;
    let output = batch * plan.bytes_per_clip() as u128;
    // Input and output batches in flight, each counted at the size of both (the sink's
    // staging rides on the same bound): conservative.
    let held = batches_in_flight(config.run.queue_depth);
    let batches = 2 * held as u128;
    let pipeline = batches * (input + output);
    // The streaming loader's read-ahead beyond what its consumer holds (`auto` may pick
    // it): every setting that sizes it counts, `run.stream.in_flight` first.
    let read_ahead = match config.run.loader {
        LoaderKind::Stream | LoaderKind::Auto => {
            let threads = match config.run.threads {
                0 => std::thread::available_parallelism().map_or(1, |n| n.get()),
                n => n,
            };
            let shape = StreamShape::new(&config.run.stream, config.run.batch_clips, threads);
            (shape.batch_buffers(held) - held) as u128
        }
        LoaderKind::Preload | LoaderKind::Memmap => 0,
    };
    let need = pipeline + read_ahead * input;
    let limit = available as u128 / 2;
    if need > limit {
        let gb = |b: u128| b as f64 / 1e9;
        let fields = if read_ahead * input > pipeline {
            "run.stream.in_flight × run.batch_clips"
        } else {
            "run.batch_clips × run.queue_depth"
        };
        return Err(Error::limit(
            fields,
            format!(
                "the pipeline would hold about {:.2} GB of buffers ({} batches of {} clips × ({:.1} kB in + {:.1} kB out), and {read_ahead} batches decoded ahead by the streaming loader); the limit is half the available memory, {:.2} GB",
                gb(need),
                batches,
                config.run.batch_clips,
                plan.clip_samples() as f64 * 4.0 / 1e3,
                plan.bytes_per_clip() as f64 / 1e3,
                gb(limit)
            ),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_configuration_whose_buffers_exceed_half_the_memory_is_refused() {
        let mut c = Config::default();
        c.run.batch_clips = 100_000;
        c.check_options().unwrap();
        let plan = MelPlan::from_config(&c).unwrap();
        let e = check_memory(&c, &plan, 8 << 30).unwrap_err().to_string();
        assert!(
            e.contains("run.batch_clips × run.queue_depth") && e.contains("GB"),
            "{e}"
        );
        let c = Config::default();
        check_memory(&c, &MelPlan::from_config(&c).unwrap(), 8 << 30).unwrap();
        // The streaming loader's read-ahead counts: 65,536 tasks in flight decoded the
        // whole split ahead, past the check.
        let mut c = Config::default();
        c.run.stream.in_flight = 1 << 16;
        c.run.loader = LoaderKind::Stream;
        c.check_options().unwrap();
        let plan = MelPlan::from_config(&c).unwrap();
        let e = check_memory(&c, &plan, 8 << 30).unwrap_err().to_string();
        assert!(e.contains("run.stream.in_flight"), "{e}");
        c.run.loader = LoaderKind::Memmap;
        check_memory(&c, &plan, 8 << 30).unwrap();
        assert_eq!(batches_in_flight(0), 3);
        assert_eq!(batches_in_flight(4), 6);
    }
}

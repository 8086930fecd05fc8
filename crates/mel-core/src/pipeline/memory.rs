//! What the pipeline holds in memory at once, written once beside the pipeline that
//! allocates it: the runner's output buffers, the streaming loader's decoded batches and
//! the check that refuses a configuration too large for the machine all use
//! [`batches_in_flight`].

use crate::config::Config;
use crate::error::{Error, Result};
use crate::plan::MelPlan;

/// Batches of one kind (decoded input, or computed output) in flight at once: a queue's
/// worth (`queue_depth`, at least 1), one being produced and one being consumed.
pub fn batches_in_flight(queue_depth: usize) -> usize {
    queue_depth.max(1) + 2
}

/// Estimates the memory the pipeline's buffers take (input and output batches in flight)
/// and refuses a configuration that would take more than half of `available` bytes,
/// naming the fields, the figure and the limit. The preload loader's arena is sized
/// separately (the automatic choice never picks it: it maps a cache or streams).
pub fn check_memory(config: &Config, plan: &MelPlan, available: u64) -> Result<()> {
    let batch = config.run.batch_clips as u128;
    let input = batch * plan.clip_samples() as u128 * 4;
    let output = batch * plan.bytes_per_clip() as u128;
    // Input and output batches in flight, each counted at the size of both (the streaming
    // loader's read-ahead and the sink's staging ride on the same bound): conservative.
    let batches = 2 * batches_in_flight(config.run.queue_depth) as u128;
    let need = batches * (input + output);
    let limit = available as u128 / 2;
    if need > limit {
        let gb = |b: u128| b as f64 / 1e9;
        return Err(Error::limit(
            "run.batch_clips × run.queue_depth",
            format!(
                "the pipeline would hold about {:.2} GB of buffers ({batches} batches of {} clips × ({:.1} kB in + {:.1} kB out)); the limit is half the available memory, {:.2} GB",
                gb(need),
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
        assert_eq!(batches_in_flight(0), 3);
        assert_eq!(batches_in_flight(4), 6);
    }
}

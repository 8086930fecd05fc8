//! What each stage and queue did during a run.

use std::time::Duration;

/// Time and work of one stage.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize)]
pub struct StageMetrics {
    /// `load`, `mel` or `write`.
    pub name: String,
    /// The implementation (e.g. `stream`, `cpu`, `hdf5`).
    pub implementation: String,
    /// Seconds doing its own work.
    pub busy_seconds: f64,
    /// Seconds blocked waiting for input from the previous stage.
    pub wait_input_seconds: f64,
    /// Seconds blocked because the next stage's queue was full (backpressure).
    pub wait_output_seconds: f64,
    /// Clips handled.
    pub items: u64,
    /// Bytes handled (samples in for `load`/`mel`, spectrogram bytes for `write`).
    pub bytes: u64,
    /// Batches handled.
    pub batches: u64,
    /// Seconds of the final step, included in `busy_seconds` (the sink's commit: metadata,
    /// flush, rename).
    pub finish_seconds: f64,
}

impl StageMetrics {
    /// An empty record for stage `name` run by `implementation`.
    pub fn new(name: &str, implementation: &str) -> Self {
        StageMetrics {
            name: name.into(),
            implementation: implementation.into(),
            ..Default::default()
        }
    }

    /// Adds busy time.
    pub fn busy(&mut self, d: Duration) {
        self.busy_seconds += d.as_secs_f64();
    }

    /// Adds time spent waiting on the input queue.
    pub fn wait_input(&mut self, d: Duration) {
        self.wait_input_seconds += d.as_secs_f64();
    }

    /// Adds time spent waiting on the output queue.
    pub fn wait_output(&mut self, d: Duration) {
        self.wait_output_seconds += d.as_secs_f64();
    }

    /// Clips per busy second (what the stage could sustain alone).
    pub fn capacity_per_second(&self) -> f64 {
        self.items as f64 / self.busy_seconds.max(1e-9)
    }
}

/// Occupancy of one bounded queue, sampled at every push.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize)]
pub struct QueueMetrics {
    /// e.g. `load->mel`.
    pub name: String,
    /// Batches it can hold.
    pub capacity: usize,
    /// Mean depth seen by pushes (after the push).
    pub mean_depth: f64,
    /// Deepest it got.
    pub max_depth: usize,
    /// Pushes.
    pub pushes: u64,
}

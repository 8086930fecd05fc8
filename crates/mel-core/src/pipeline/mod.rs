//! The pipeline runner: loader → mel backend → sink as concurrent stages joined by
//! bounded queues, with per-stage metrics and a bottleneck verdict, and the one check
//! that keeps every value stored finite.

mod checks;
pub mod finite;
mod memory;
mod metrics;
mod queue;
mod runner;
mod verdict;

pub use checks::CheckPool;
pub use memory::{StreamShape, batches_in_flight, check_memory};
pub use metrics::{QueueMetrics, StageMetrics};
pub use runner::{OutputPool, RunOptions, RunResult, run};
pub use verdict::{Stage, Verdict, verdict};

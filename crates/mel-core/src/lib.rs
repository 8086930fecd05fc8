//! melctl's core: the configuration model, the validated plan, the DSP reference
//! definitions, and the traits that loaders, mel backends and sinks implement.
#![warn(missing_docs)]

pub mod atomic;
pub mod buffer;
pub mod config;
pub mod container;
pub mod dsp;
pub mod error;
pub mod format;
pub mod input;
pub mod named;
pub mod outputs;
pub mod pipeline;
pub mod plan;
pub mod record;
pub mod reference;
pub mod row_stats;
pub mod spec;
pub mod stats;
pub mod traits;

#[cfg(test)]
pub(crate) mod test_devices;

pub use buffer::{OutputBuf, OutputSlice};
pub use config::{Config, Preset};
pub use error::{Error, FailureKind, Result};
pub use plan::MelPlan;
pub use spec::{Dtype, LogScale, MelSpec};
pub use traits::{
    AdjustmentCounts, AudioLoader, ClipBatch, ClipFailure, ClipMeta, DeviceTimes, Finished,
    LoaderStats, MelBackend, SampleBlock, SampleStore, Sink, SinkSpec, SourceInfo,
};

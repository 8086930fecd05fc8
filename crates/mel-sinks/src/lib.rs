//! melctl's sinks: where finished spectrograms go.
#![warn(missing_docs)]

mod chunks;
mod errors;
pub mod hdf5_sink;
pub mod journal;
pub mod npy_sink;
pub mod publish;
mod rows;

pub use hdf5_sink::{Hdf5Options, Hdf5Sink};
pub use journal::{Journal, JournalState, remove_journal};
pub use npy_sink::{NpyOptions, NpySink};
pub use publish::publish_build;

//! melctl's sinks: where finished spectrograms go.
#![warn(missing_docs)]

pub mod atomic;
mod chunks;
pub mod hdf5_sink;
pub mod npy_sink;

pub use hdf5_sink::{Hdf5Options, Hdf5Sink};
pub use npy_sink::{NpyOptions, NpySink};

//! **melread**: the training side of melctl. Reads the datasets `melctl build` writes
//! (`OUT/{split}.h5`, contiguous or chunked, f32/f16/bf16, or `OUT/{split}.npy.d/`) back
//! for a Rust trainer:
//!
//! - [`Split`]: one split with its label names, labels, paths, configuration,
//!   provenance and statistics; random access to a clip or a single segment (one
//!   `[n_mels, frames]` spectrogram). Contiguous data is memory-mapped (or read with
//!   positioned reads) instead of going through the HDF5 library's global lock; chunked
//!   data is inflated on the calling thread.
//! - [`Loader`]: epochs of batches of segments or clips, in a seeded order (uniform, or
//!   clip order plus a bounded segment shuffle buffer), sharded by rank and world size,
//!   resumable from any (epoch, batch), read ahead by worker threads into a bounded
//!   number of batch buffers ([`Loader::memory_bound`]).
//! - [`MelStats`]: per-mel-bin mean and standard deviation, stored by `melctl build` or
//!   computed in one pass; the loader normalises with them on request.
//! - [`eval`]: file-level decisions from per-segment probabilities (mean probability,
//!   majority vote, binary thresholds), accuracy and confusion matrix.
//! - With the `candle` feature: batches as candle-core `Tensor`s on any candle device
//!   (the `tensor` module).
//!
//! ```no_run
//! use std::sync::Arc;
//! use melread::{Loader, LoaderOptions, Shuffle, Split, Unit};
//!
//! # fn main() -> melread::Result<()> {
//! let split = Arc::new(Split::open_in("out", "training")?);
//! let stats = split.stats(2)?; // stored by melctl build, or computed once
//! let loader = Loader::new(
//!     split.clone(),
//!     LoaderOptions {
//!         unit: Unit::Segment,
//!         batch_size: 5632,
//!         shuffle: Shuffle::Buffered { buffer: 65_536 },
//!         seed: 7,
//!         drop_last: true,
//!         normalize: Some(stats),
//!         ..LoaderOptions::default()
//!     },
//! )?;
//! for epoch in 0..10 {
//!     for batch in loader.epoch(epoch) {
//!         let batch = batch?;
//!         let x = batch.view().expect("f32 output"); // [5632, 32, 5]
//!         let y = batch.labels();                     // [5632]
//!         # let _ = (x, y);
//!     }
//! }
//! # Ok(())
//! # }
//! ```
//!
//! The library reads no environment variables and never panics on a hostile file:
//! every size it allocates from a file is checked against the file's length first.
#![warn(missing_docs)]

pub mod augment;
pub mod buckets;
pub mod commit;
mod compat;
mod convert;
pub mod eval;
mod h5file;
mod limits;
mod loader;
mod order;
pub mod sigbus;
mod split;
#[cfg(feature = "candle")]
pub mod tensor;
pub mod verify;
pub mod widen;
pub mod widen_mixed;

pub use augment::{Augment, Mixed, Mixup};
pub use convert::Affine;
pub use limits::{
    MAX_CHUNK_BYTES, MAX_LABEL_NAME_BYTES, MAX_META_BYTES, MAX_PATH_BYTES, MAX_VALUES_PER_CLIP,
};
pub use loader::{
    Batch, BufferStats, Epoch, ItemId, Loader, LoaderOptions, MAX_BATCH_BYTES, Output, Values,
    Waited,
};
pub use mel_core::stats::MelStats;
pub use mel_core::{Dtype, Error, Result};
pub use order::{Shuffle, Unit};
pub use split::{
    Access, DEFAULT_CHUNK_CACHE, Format, Metadata, OpenOptions, Provenance, ReadMode, Reader,
    Split, WholeIndex, WindowIndex,
};
#[cfg(feature = "candle")]
pub use tensor::TensorFloat;

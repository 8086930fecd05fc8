//! melctl's audio side: finding the clips of a dataset and decoding each into a
//! fixed-length mono f32 row.
#![warn(missing_docs)]

pub mod decode;
pub mod scan;

pub use decode::{DecodeInfo, decode_into};
pub use scan::{Dataset, FileEntry, Split, scan};

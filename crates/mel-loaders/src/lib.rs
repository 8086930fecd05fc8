//! melctl's loaders: each turns a split's file list into batches of fixed-length clips.
#![warn(missing_docs)]

pub mod preload;

pub use preload::PreloadLoader;

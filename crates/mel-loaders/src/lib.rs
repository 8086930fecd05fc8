//! melctl's loaders: how audio reaches memory. RAM preload, a persistent memory-mapped
//! cache of decoded audio, and streaming reads with bounded memory, all behind
//! [`mel_core::Loader`] and all yielding clips in file order.
#![warn(missing_docs)]

pub mod arena;
pub mod cache;
pub mod io;
pub mod lazy;
pub mod pool;
pub mod preload;
pub mod select;
pub mod stream;
pub mod whole;

pub use cache::{CacheKey, CacheLoader, CacheOutcome};
pub use lazy::Lazy;
pub use preload::PreloadLoader;
pub use select::{LoaderChoice, choose};
pub use stream::StreamLoader;
pub use whole::WholeLoader;

//! A loader built on its first `next_batch` call, so that up-front work (a preload's
//! decoding, a cache build or check) runs, and is measured, inside the pipeline's load stage.

use mel_core::{AudioLoader, ClipBatch, ClipFailure, LoaderStats, Result};

type Make = Box<dyn FnOnce() -> Result<Box<dyn AudioLoader>> + Send>;

/// A loader made by `make` when first asked for a batch.
pub struct Lazy {
    name: &'static str,
    make: Option<Make>,
    inner: Option<Box<dyn AudioLoader>>,
}

impl Lazy {
    /// A loader named `name` that `make` builds on first use.
    pub fn new(
        name: &'static str,
        make: impl FnOnce() -> Result<Box<dyn AudioLoader>> + Send + 'static,
    ) -> Self {
        Lazy {
            name,
            make: Some(Box::new(make)),
            inner: None,
        }
    }
}

impl AudioLoader for Lazy {
    fn name(&self) -> &str {
        self.name
    }

    fn next_batch(&mut self) -> Option<Result<ClipBatch>> {
        if let Some(make) = self.make.take() {
            match make() {
                Ok(l) => self.inner = Some(l),
                Err(e) => return Some(Err(e)),
            }
        }
        self.inner.as_mut()?.next_batch()
    }

    fn failures(&self) -> &[ClipFailure] {
        self.inner.as_ref().map(|l| l.failures()).unwrap_or(&[])
    }

    fn stats(&self) -> LoaderStats {
        self.inner.as_ref().map(|l| l.stats()).unwrap_or_default()
    }
}

//! Rows of decoded clips in one buffer: the loaders' shared bookkeeping, and the one
//! loader that hands them out ([`ArenaLoader`]), made by the preload loader (rows in RAM,
//! [`crate::preload`]) and the memmap cache (rows in a mapped file, [`crate::cache`]).

use std::sync::Arc;

use mel_core::{
    AudioLoader, ClipBatch, ClipFailure, LoaderStats, Result, SampleBlock, SampleStore, SourceInfo,
};

/// What the loader found in the cache folder.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CacheOutcome {
    /// A valid cache was mapped.
    Hit,
    /// There was no cache file; one was built.
    Miss,
    /// A cache file existed but was unusable (the reason); it was rebuilt.
    Rebuilt(String),
}

impl CacheOutcome {
    /// `hit`, `miss` or `rebuild`.
    pub fn kind(&self) -> &'static str {
        match self {
            CacheOutcome::Hit => "hit",
            CacheOutcome::Miss => "miss",
            CacheOutcome::Rebuilt(_) => "rebuild",
        }
    }
}

/// Batches viewing one arena of decoded clip rows, in file order: the preload's
/// ([`ArenaLoader::load`]) or the memmap cache's ([`ArenaLoader::open`]).
pub struct ArenaLoader {
    pub(crate) arena: Arc<dyn SampleStore>,
    /// Split indices of the clips held, in arena order.
    pub(crate) indices: Vec<usize>,
    /// Their source files.
    pub(crate) sources: Vec<SourceInfo>,
    pub(crate) failures: Vec<ClipFailure>,
    pub(crate) clip_samples: usize,
    pub(crate) batch_clips: usize,
    pub(crate) next: usize,
    /// `"preload"` or `"memmap"`.
    pub(crate) name: &'static str,
    /// What [`Loader::stats`] says of the loader.
    pub(crate) stats: LoaderStats,
    /// Over the memmap cache: whether it was hit, missed or rebuilt (and why).
    pub(crate) outcome: Option<CacheOutcome>,
}

impl ArenaLoader {
    /// Clips held (files that decoded).
    pub fn clips(&self) -> usize {
        self.indices.len()
    }

    /// Bytes of decoded samples the arena holds.
    pub fn arena_bytes(&self) -> usize {
        std::mem::size_of_val(self.arena.as_f32())
    }

    /// Over the memmap cache: whether it was hit, missed or rebuilt (and why).
    pub fn outcome(&self) -> Option<&CacheOutcome> {
        self.outcome.as_ref()
    }
}

impl AudioLoader for ArenaLoader {
    fn name(&self) -> &str {
        self.name
    }

    fn next_batch(&mut self) -> Option<Result<ClipBatch>> {
        if self.next >= self.indices.len() {
            return None;
        }
        let end = (self.next + self.batch_clips).min(self.indices.len());
        let batch = ClipBatch {
            indices: self.indices[self.next..end].to_vec(),
            sources: self.sources[self.next..end].to_vec(),
            samples: SampleBlock::new(
                self.arena.clone(),
                self.next * self.clip_samples,
                (end - self.next) * self.clip_samples,
            ),
        };
        self.next = end;
        Some(Ok(batch))
    }

    fn failures(&self) -> &[ClipFailure] {
        &self.failures
    }

    fn stats(&self) -> LoaderStats {
        self.stats.clone()
    }
}

/// Moves the rows whose `ok` flag is set to the front of `arena` (rows of `clip_samples`
/// samples, in order) and returns how many were kept; the caller truncates.
pub fn compact(arena: &mut [f32], clip_samples: usize, ok: &[bool]) -> usize {
    let mut kept = 0;
    for (i, _) in ok.iter().enumerate().filter(|(_, ok)| **ok) {
        if kept != i {
            arena.copy_within(
                i * clip_samples..(i + 1) * clip_samples,
                kept * clip_samples,
            );
        }
        kept += 1;
    }
    kept
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kept_rows_move_to_the_front_in_order() {
        let mut a = vec![0.0, 0.0, 1.0, 1.0, 2.0, 2.0, 3.0, 3.0];
        assert_eq!(compact(&mut a, 2, &[false, true, false, true]), 2);
        assert_eq!(&a[..4], &[1.0, 1.0, 3.0, 3.0]);
        assert_eq!(compact(&mut a, 2, &[true, true, true, true]), 4);
        assert_eq!(compact(&mut a, 2, &[false; 4]), 0);
    }
}

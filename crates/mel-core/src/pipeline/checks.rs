//! The threads the finite checks and the statistics run on: a pool of the pipeline's
//! own, so the load and write stages never wait behind a backend's work on the global
//! pool, and never on a pool whose worker may be the mel stage itself (a run started
//! from inside a rayon job would otherwise deadlock: the mel stage waits for the load
//! stage, which waits for a worker).

use std::sync::{Arc, OnceLock};

use crate::error::{Error, Result};

/// A lazily started pool for the checks and statistics (cloning shares it: a build's
/// splits use one).
#[derive(Debug, Clone)]
pub struct CheckPool {
    threads: usize,
    pool: Arc<OnceLock<std::result::Result<rayon::ThreadPool, String>>>,
}

impl CheckPool {
    /// A pool of `threads` threads (at least 1), started on first use.
    pub fn new(threads: usize) -> Self {
        CheckPool {
            threads: threads.max(1),
            pool: Arc::default(),
        }
    }

    /// Threads the pool runs.
    pub fn threads(&self) -> usize {
        self.threads
    }

    /// Runs `f` on the pool (its parallel iterators spread over the pool's threads) and
    /// returns its result; an error if the pool's threads cannot be started.
    pub fn install<R: Send>(&self, f: impl FnOnce() -> R + Send) -> Result<R> {
        let pool = self.pool.get_or_init(|| {
            rayon::ThreadPoolBuilder::new()
                .num_threads(self.threads)
                .thread_name(|i| format!("melctl-check-{i}"))
                .build()
                .map_err(|e| e.to_string())
        });
        match pool {
            Ok(p) => Ok(p.install(f)),
            Err(e) => Err(Error::Internal(format!(
                "cannot start the check threads: {e}"
            ))),
        }
    }
}

impl Default for CheckPool {
    /// One thread per core.
    fn default() -> Self {
        CheckPool::new(std::thread::available_parallelism().map_or(1, |n| n.get()))
    }
}

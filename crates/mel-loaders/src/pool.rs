//! Recycled sample buffers: a batch's buffer goes back to its loader's pool when the
//! last stage drops the batch. The pool hands buffers out first-in first-out and never
//! creates more than its limit, so a run's peak memory is a fixed number of buffers,
//! whatever the number of clips.

use std::collections::VecDeque;
use std::sync::{Arc, Condvar, Mutex};

use mel_core::SampleStore;

#[derive(Default)]
struct State {
    free: VecDeque<Vec<f32>>,
    created: usize,
}

struct Inner {
    state: Mutex<State>,
    returned: Condvar,
    limit: usize,
    /// Where the buffers go when the pool is gone (the next loader of a build).
    spares: Option<SpareBuffers>,
}

impl Drop for Inner {
    fn drop(&mut self) {
        if let (Some(spares), Ok(state)) = (&self.spares, self.state.get_mut()) {
            spares.give(std::mem::take(&mut state.free));
        }
    }
}

/// Sample buffers handed from one loader to the next (cloning shares them): a build's
/// splits reuse one set, so their pages are faulted in once per build, not once per
/// split (a fresh buffer's page faults were 11% of a 3,000-clip build's CPU).
pub type SpareBuffers = mel_core::buffer::Spares<Vec<f32>>;

/// A shared, bounded pool of sample buffers.
#[derive(Clone)]
pub struct BufferPool(Arc<Inner>);

impl Default for BufferPool {
    fn default() -> Self {
        BufferPool::new(usize::MAX)
    }
}

fn sized(mut buf: Vec<f32>, len: usize) -> Vec<f32> {
    if buf.len() >= len {
        buf.truncate(len);
        buf
    } else if buf.capacity() >= len {
        buf.resize(len, 0.0);
        buf
    } else {
        // A fresh zeroed allocation (calloc: the kernel maps zero pages lazily, so the
        // pages are touched first by the readers that fill them, in parallel).
        vec![0.0; len]
    }
}

impl BufferPool {
    /// A pool that creates at most `limit` buffers.
    pub fn new(limit: usize) -> Self {
        BufferPool::of(limit, VecDeque::new(), None)
    }

    /// A pool that creates at most `limit` buffers, starting from up to `limit` of
    /// `spares` (they count as created) and leaving its buffers there when it is gone.
    pub fn with_spares(limit: usize, spares: SpareBuffers) -> Self {
        let free = spares.take(limit.max(1)).into();
        BufferPool::of(limit, free, Some(spares))
    }

    /// A pool of at most `limit` buffers holding `free` (counted as created).
    fn of(limit: usize, free: VecDeque<Vec<f32>>, spares: Option<SpareBuffers>) -> Self {
        BufferPool(Arc::new(Inner {
            state: Mutex::new(State {
                created: free.len(),
                free,
            }),
            returned: Condvar::new(),
            limit: limit.max(1),
            spares,
        }))
    }

    /// Buffers this pool may create at most.
    pub fn limit(&self) -> usize {
        self.0.limit
    }

    /// A buffer of exactly `len` samples, waiting for one to come back if the limit is
    /// reached. Contents are unspecified (the loaders overwrite every sample they hand out).
    pub fn take(&self, len: usize) -> Vec<f32> {
        let mut s = self.0.state.lock().expect("pool lock");
        loop {
            if let Some(buf) = s.free.pop_front() {
                return sized(buf, len);
            }
            if s.created < self.0.limit {
                s.created += 1;
                return sized(Vec::new(), len);
            }
            s = self.0.returned.wait(s).expect("pool lock");
        }
    }

    /// Like [`take`](Self::take), but `None` instead of waiting.
    pub fn try_take(&self, len: usize) -> Option<Vec<f32>> {
        let mut s = self.0.state.lock().expect("pool lock");
        if let Some(buf) = s.free.pop_front() {
            return Some(sized(buf, len));
        }
        if s.created < self.0.limit {
            s.created += 1;
            return Some(sized(Vec::new(), len));
        }
        None
    }

    /// Returns a buffer to the pool.
    pub fn give(&self, buf: Vec<f32>) {
        if let Ok(mut s) = self.0.state.lock() {
            s.free.push_back(buf);
        }
        self.0.returned.notify_one();
    }

    /// Buffers waiting for reuse.
    pub fn idle(&self) -> usize {
        self.0.state.lock().map(|s| s.free.len()).unwrap_or(0)
    }

    /// Buffers created so far.
    pub fn created(&self) -> usize {
        self.0.state.lock().map(|s| s.created).unwrap_or(0)
    }
}

/// A buffer that returns to its pool when dropped.
pub struct PooledSamples {
    buf: Vec<f32>,
    pool: BufferPool,
}

impl PooledSamples {
    /// Wraps `buf`, to be returned to `pool`.
    pub fn new(buf: Vec<f32>, pool: BufferPool) -> Self {
        PooledSamples { buf, pool }
    }
}

impl SampleStore for PooledSamples {
    fn as_f32(&self) -> &[f32] {
        &self.buf
    }
}

impl Drop for PooledSamples {
    fn drop(&mut self) {
        self.pool.give(std::mem::take(&mut self.buf));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_pool_starts_from_the_first_pools_buffers_within_its_limit() {
        let spares = SpareBuffers::default();
        let first = BufferPool::with_spares(3, spares.clone());
        let bufs: Vec<Vec<f32>> = (0..3).map(|_| first.take(100)).collect();
        let ptrs: Vec<usize> = bufs.iter().map(|b| b.as_ptr() as usize).collect();
        for b in bufs {
            drop(PooledSamples::new(b, first.clone()));
        }
        assert_eq!(spares.held(), 0, "buffers stay with a live pool");
        drop(first);
        assert_eq!(spares.held(), 3, "a pool that is gone leaves its buffers");
        let second = BufferPool::with_spares(2, spares.clone());
        assert_eq!(spares.held(), 1, "a pool takes no more than its limit");
        let a = second.take(80);
        let b = second.take(120);
        assert!(ptrs.contains(&(a.as_ptr() as usize)));
        assert_eq!((a.len(), b.len()), (80, 120));
        assert!(
            second.try_take(10).is_none(),
            "the spares count toward the limit"
        );
        second.give(a);
        second.give(b);
        drop(second);
        assert_eq!(spares.held(), 3);
    }

    #[test]
    fn buffers_are_reused_first_in_first_out_and_the_limit_holds() {
        let pool = BufferPool::new(2);
        let a = pool.take(10);
        let b = pool.take(10);
        let (pa, pb) = (a.as_ptr(), b.as_ptr());
        assert!(pool.try_take(10).is_none(), "limit of 2 reached");
        drop(PooledSamples::new(a, pool.clone()));
        drop(PooledSamples::new(b, pool.clone()));
        assert_eq!(pool.idle(), 2);
        let first = pool.take(8);
        assert_eq!(first.as_ptr(), pa, "oldest first");
        let second = pool.take(12);
        assert_eq!(second.len(), 12);
        assert_ne!(second.as_ptr(), pa);
        let _ = pb;
        pool.give(first);
        pool.give(second);
        let _ = (pool.take(1), pool.take(1));
        assert_eq!(pool.created(), 2);
        // A blocked take wakes when a buffer comes back.
        let p2 = pool.clone();
        let t = std::thread::spawn(move || p2.take(4).len());
        std::thread::sleep(std::time::Duration::from_millis(20));
        pool.give(vec![0.0; 4]);
        assert_eq!(t.join().unwrap(), 4);
    }
}

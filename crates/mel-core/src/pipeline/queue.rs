//! A bounded queue that measures its occupancy and how long each side waited.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::mpsc::{Receiver, SyncSender, sync_channel};
use std::time::{Duration, Instant};

use super::metrics::QueueMetrics;

#[derive(Default)]
struct Stats {
    capacity: usize,
    depth: AtomicUsize,
    max: AtomicUsize,
    sum: AtomicU64,
    pushes: AtomicU64,
}

/// The sending half.
pub struct Tx<T> {
    inner: SyncSender<T>,
    stats: Arc<Stats>,
}

/// The receiving half.
pub struct Rx<T> {
    inner: Receiver<T>,
    stats: Arc<Stats>,
    name: String,
    capacity: usize,
}

/// A queue holding at most `capacity` items.
pub fn bounded<T>(name: &str, capacity: usize) -> (Tx<T>, Rx<T>) {
    let (tx, rx) = sync_channel(capacity);
    let stats = Arc::new(Stats {
        capacity,
        ..Stats::default()
    });
    (
        Tx {
            inner: tx,
            stats: stats.clone(),
        },
        Rx {
            inner: rx,
            stats,
            name: name.into(),
            capacity,
        },
    )
}

impl<T> Tx<T> {
    /// Sends, blocking while full; returns the time blocked, or `Err` when the receiver is gone.
    /// The push is counted before the item is handed over, so a receiver that has the item
    /// also sees it counted.
    pub fn send(&self, item: T) -> Result<Duration, ()> {
        let t = Instant::now();
        // Count before sending so the receiver's decrement never underflows.
        let depth = (self.stats.depth.fetch_add(1, Ordering::AcqRel) + 1).min(self.stats.capacity);
        self.stats.max.fetch_max(depth, Ordering::Relaxed);
        self.stats.sum.fetch_add(depth as u64, Ordering::Relaxed);
        self.stats.pushes.fetch_add(1, Ordering::AcqRel);
        if self.inner.send(item).is_err() {
            self.stats.depth.fetch_sub(1, Ordering::AcqRel);
            self.stats.sum.fetch_sub(depth as u64, Ordering::Relaxed);
            self.stats.pushes.fetch_sub(1, Ordering::AcqRel);
            return Err(());
        }
        Ok(t.elapsed())
    }
}

impl<T> Rx<T> {
    /// Receives, blocking while empty; `None` once every sender is gone and the queue is empty.
    pub fn recv(&self) -> (Option<T>, Duration) {
        let t = Instant::now();
        let r = self.inner.recv().ok();
        if r.is_some() {
            self.stats.depth.fetch_sub(1, Ordering::AcqRel);
        }
        (r, t.elapsed())
    }

    /// A handle that reads the queue's metrics even after this end is dropped.
    pub fn probe(&self) -> Probe {
        Probe {
            stats: self.stats.clone(),
            name: self.name.clone(),
            capacity: self.capacity,
        }
    }

    /// The queue's occupancy so far.
    pub fn metrics(&self) -> QueueMetrics {
        self.probe().metrics()
    }
}

/// Reads a queue's metrics.
pub struct Probe {
    stats: Arc<Stats>,
    name: String,
    capacity: usize,
}

impl Probe {
    /// The queue's occupancy so far.
    pub fn metrics(&self) -> QueueMetrics {
        let pushes = self.stats.pushes.load(Ordering::Relaxed);
        QueueMetrics {
            name: self.name.clone(),
            capacity: self.capacity,
            mean_depth: self.stats.sum.load(Ordering::Relaxed) as f64 / pushes.max(1) as f64,
            max_depth: self.stats.max.load(Ordering::Relaxed),
            pushes,
        }
    }
}

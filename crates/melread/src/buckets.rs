//! Duration buckets for whole clips (`max_frames`): an epoch's batches, each of clips of
//! similar length holding at most `max_frames` frames once padded to its longest clip.
//!
//! Like Lhotse's dynamic bucketing, and deterministic: the epoch's items are shuffled
//! (seed, epoch), cut into pools of [`POOL`] items, each pool sorted by length (ties in
//! shuffled order) and cut greedily into batches (a batch closes when one more clip would
//! make `items × longest > max_frames`, or at `batch_size` items); then the batches are
//! shuffled. Every rank computes the same plan and takes every `world`-th batch from its
//! rank, so ranks get the same number of batches (the last ones dropped, or with
//! `drop_last = false` the first ones repeated, as `DistributedSampler` pads). The plan
//! depends only on (seed, epoch, the clips' lengths, the options): the same whatever the
//! number of workers, and again on a resume.

use crate::order::{Permutation, epoch_seed};

/// Items sorted together: a batch draws its clips from a pool of this many.
pub const POOL: usize = 4096;

/// What the plan of an epoch depends on beyond the lengths.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct BucketSpec {
    pub max_frames: usize,
    /// Whether clips and batches are shuffled (`Shuffle::None`: clips in order, sorted
    /// within pools, batches in order).
    pub shuffle: bool,
    pub batch_size: usize,
    pub seed: u64,
    pub rank: usize,
    pub world: usize,
    pub drop_last: bool,
}

/// The batches (clip ids) of `epoch` for `spec.rank`, from each clip's frames.
pub(crate) fn plan(frames: &[usize], spec: BucketSpec, epoch: u64) -> Vec<Vec<u64>> {
    let n = frames.len() as u64;
    if n == 0 {
        return Vec::new();
    }
    let order = Permutation::new(n, epoch_seed(spec.seed, epoch, 11));
    let shuffled: Vec<u64> = match spec.shuffle {
        true => (0..n).map(|i| order.apply(i)).collect(),
        false => (0..n).collect(),
    };
    let mut batches = Vec::new();
    for pool in shuffled.chunks(POOL) {
        let mut pool = pool.to_vec();
        pool.sort_by_key(|&id| frames[id as usize]);
        let mut batch: Vec<u64> = Vec::new();
        let mut longest = 0usize;
        for id in pool {
            let f = frames[id as usize];
            let wider = longest.max(f);
            if !batch.is_empty()
                && ((batch.len() + 1) * wider > spec.max_frames || batch.len() == spec.batch_size)
            {
                batches.push(std::mem::take(&mut batch));
                longest = 0;
            }
            longest = longest.max(f);
            batch.push(id);
        }
        if !batch.is_empty() {
            batches.push(batch);
        }
    }
    let total = batches.len() as u64;
    let shuffle = Permutation::new(total, epoch_seed(spec.seed, epoch, 12));
    let world = spec.world as u64;
    let per_rank = if spec.drop_last {
        total / world
    } else {
        total.div_ceil(world)
    };
    (0..per_rank)
        .map(|q| {
            let g = (spec.rank as u64 + q * world) % total;
            let b = if spec.shuffle { shuffle.apply(g) } else { g };
            batches[b as usize].clone()
        })
        .collect()
}

/// The share of an epoch's padded frames that are padding, over `batches`.
pub(crate) fn padding_share(frames: &[usize], batches: &[Vec<u64>]) -> f64 {
    let (mut real, mut padded) = (0u64, 0u64);
    for b in batches {
        let longest = b.iter().map(|&i| frames[i as usize]).max().unwrap_or(0);
        real += b.iter().map(|&i| frames[i as usize] as u64).sum::<u64>();
        padded += (longest * b.len()) as u64;
    }
    if padded == 0 {
        0.0
    } else {
        1.0 - real as f64 / padded as f64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(rank: usize, world: usize) -> BucketSpec {
        BucketSpec {
            max_frames: 4000,
            shuffle: true,
            batch_size: 256,
            seed: 7,
            rank,
            world,
            drop_last: false,
        }
    }

    fn lengths(n: usize) -> Vec<usize> {
        // 0.5 to 10 s at 100 frames a second, spread evenly but scrambled.
        (0..n).map(|i| 50 + (i * 7919) % 951).collect()
    }

    #[test]
    fn every_clip_once_each_batch_within_the_bound_and_little_padding() {
        let frames = lengths(5000);
        let batches = plan(&frames, spec(0, 1), 3);
        let mut seen: Vec<u64> = batches.iter().flatten().copied().collect();
        seen.sort_unstable();
        assert_eq!(seen, (0..5000).collect::<Vec<_>>());
        for b in &batches {
            let longest = b.iter().map(|&i| frames[i as usize]).max().unwrap();
            assert!(b.len() * longest <= 4000, "{} × {longest}", b.len());
        }
        let share = padding_share(&frames, &batches);
        assert!(share < 0.05, "{share}");
        // Another epoch, other batches; the same epoch, the same batches.
        assert_ne!(plan(&frames, spec(0, 1), 4), batches);
        assert_eq!(plan(&frames, spec(0, 1), 3), batches);
    }

    #[test]
    fn ranks_get_as_many_batches_and_share_the_epoch() {
        let frames = lengths(1000);
        let all = plan(&frames, spec(0, 1), 0);
        let parts: Vec<_> = (0..3).map(|r| plan(&frames, spec(r, 3), 0)).collect();
        let n = parts[0].len();
        assert!(parts.iter().all(|p| p.len() == n));
        assert_eq!(n, all.len().div_ceil(3));
        let mut seen: Vec<u64> = parts.iter().flatten().flatten().copied().collect();
        seen.sort_unstable();
        seen.dedup();
        assert_eq!(seen.len(), 1000);
    }
}

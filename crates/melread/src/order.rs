//! The order of an epoch's items: seeded, sharded by rank, and reproducible from any
//! batch without reading anything.
//!
//! An epoch is one global sequence of item ids (the same on every rank); rank `r` of
//! `w` takes the positions `r, r + w, r + 2w, ...`. So shards are a partition of the
//! epoch, and batch `b` of a shard is positions `b·B .. (b+1)·B` of the shard. Every rank
//! gets the same number of items, as torch's `DistributedSampler` gives (a rank with fewer
//! would run out of batches first and leave the others waiting in a collective for ever):
//! `total / w` with `drop_last`, else `ceil(total / w)`, positions past the epoch's end
//! wrapping to its start, so fewer than `w` items of an epoch are seen twice.

/// What one item of a batch is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Unit {
    /// One spectrogram `[n_mels, frames]`: one (long, short) window of a clip. Without
    /// segmentation a clip is one segment.
    Segment,
    /// A whole clip `[long?, short?, n_mels, frames]`.
    Clip,
}

/// How an epoch's items are ordered.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Shuffle {
    /// File order (clip by clip, segments in order).
    None,
    /// Every item equally likely anywhere: a seeded pseudorandom permutation of all
    /// items (a Feistel network with cycle walking; no memory per item).
    Uniform,
    /// Clip order shuffled, then the clips' segments pass through a shuffle buffer of
    /// `buffer` items (memory: 8 bytes each): a batch holds segments of roughly
    /// `buffer / segments_per_clip` clips, which keeps reads local. For clips (and data
    /// without segmentation) it is the same as `Uniform` over clips.
    Buffered {
        /// Items the shuffle buffer holds.
        buffer: usize,
    },
}

/// SplitMix64's output function: a bijective 64-bit mixer.
pub(crate) fn mix64(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// SplitMix64: a small, seedable generator for the shuffle buffer.
#[derive(Debug, Clone)]
pub(crate) struct SplitMix(u64);

impl SplitMix {
    pub(crate) fn new(seed: u64) -> Self {
        SplitMix(seed)
    }

    pub(crate) fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        mix64(self.0)
    }

    /// Uniform in `0..n` (n > 0), by Lemire's multiply-shift.
    pub(crate) fn below(&mut self, n: u64) -> u64 {
        ((self.next_u64() as u128 * n as u128) >> 64) as u64
    }
}

/// A seeded pseudorandom permutation of `0..n`: a balanced Feistel network on the
/// smallest even number of bits covering `n`, with cycle walking (each step lands in
/// range with probability above 1/4).
#[derive(Debug, Clone)]
pub(crate) struct Permutation {
    n: u64,
    half_bits: u32,
    keys: [u64; 6],
}

impl Permutation {
    pub(crate) fn new(n: u64, seed: u64) -> Self {
        let bits = 64 - n.saturating_sub(1).leading_zeros();
        let half_bits = bits.div_ceil(2).max(1);
        let mut rng = SplitMix::new(seed);
        let keys = std::array::from_fn(|_| rng.next_u64());
        Permutation { n, half_bits, keys }
    }

    /// The image of `i` (< n).
    pub(crate) fn apply(&self, i: u64) -> u64 {
        debug_assert!(i < self.n);
        let mut x = i;
        loop {
            x = self.round_trip(x);
            if x < self.n {
                return x;
            }
        }
    }

    fn round_trip(&self, x: u64) -> u64 {
        let mask = (1u64 << self.half_bits) - 1;
        let (mut l, mut r) = (x >> self.half_bits, x & mask);
        for k in self.keys {
            let f = mix64(r ^ k) & mask;
            (l, r) = (r, l ^ f);
        }
        (l << self.half_bits) | r
    }
}

/// Seed of epoch `epoch` under the loader's `seed`, for one purpose (`salt`).
pub(crate) fn epoch_seed(seed: u64, epoch: u64, salt: u64) -> u64 {
    mix64(mix64(seed ^ 0x6D65_6C72_6561_6400) ^ epoch.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ salt)
}

/// Geometry of the items an order ranges over.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Items {
    /// Clips in the split.
    pub clips: u64,
    /// Items per clip (segments per clip for segments, 1 for clips).
    pub per_clip: u64,
}

impl Items {
    pub(crate) fn total(&self) -> u64 {
        self.clips * self.per_clip
    }
}

/// One rank's sequence of item ids for one epoch, generated in order.
#[derive(Debug, Clone)]
pub(crate) struct ShardOrder {
    rank: u64,
    world: u64,
    /// Items in the whole epoch.
    total: u64,
    /// The shard's length (items it yields this epoch).
    len: u64,
    /// Shard positions already yielded.
    pos: u64,
    source: Source,
}

#[derive(Debug, Clone)]
enum Source {
    /// Global position → id.
    Identity,
    /// Global position → permuted id.
    Permuted(Permutation),
    /// A sequential global stream (clip order permuted, segments through a buffer).
    Buffered(Box<BufferedStream>),
}

/// The global stream of the buffered shuffle.
#[derive(Debug, Clone)]
struct BufferedStream {
    clips: Permutation,
    per_clip: u64,
    total: u64,
    /// Items taken from the clip sequence so far.
    fed: u64,
    buffer: Vec<u64>,
    capacity: usize,
    rng: SplitMix,
    /// Global positions yielded so far.
    at: u64,
    /// The ids of the first global positions, kept for the positions that wrap to them.
    head: Vec<u64>,
    /// How many first ids `head` keeps.
    head_len: usize,
}

impl BufferedStream {
    /// Discards items until `at` global positions have been yielded.
    fn advance_to(&mut self, at: u64) {
        while self.at < at && self.next().is_some() {}
    }

    fn feed(&mut self) -> Option<u64> {
        (self.fed < self.total).then(|| {
            let clip = self.clips.apply(self.fed / self.per_clip);
            let id = clip * self.per_clip + self.fed % self.per_clip;
            self.fed += 1;
            id
        })
    }

    /// The next id of the global stream.
    fn next(&mut self) -> Option<u64> {
        while self.buffer.len() < self.capacity {
            match self.feed() {
                Some(id) => self.buffer.push(id),
                None => break,
            }
        }
        if self.buffer.is_empty() {
            return None;
        }
        self.at += 1;
        let j = self.rng.below(self.buffer.len() as u64) as usize;
        let id = match self.feed() {
            Some(id) => std::mem::replace(&mut self.buffer[j], id),
            None => self.buffer.swap_remove(j),
        };
        if self.head.len() < self.head_len {
            self.head.push(id);
        }
        Some(id)
    }

    /// The id at global position `g` (`g` < `head_len`), generating up to it (the stream
    /// starts at position 0, so `head` holds every first id it has passed).
    fn head_id(&mut self, g: u64) -> u64 {
        self.advance_to(g + 1);
        self.head[g as usize]
    }
}

impl ShardOrder {
    /// The order of `epoch` for rank `rank` of `world`. Every rank gets the same number
    /// of items: with `drop_last` `total / world` (the rest of the epoch is left out),
    /// else `ceil(total / world)`, positions past the end taking the epoch's first items
    /// again (every item is seen; fewer than `world` twice).
    pub(crate) fn new(
        items: Items,
        shuffle: Shuffle,
        seed: u64,
        epoch: u64,
        rank: u64,
        world: u64,
        drop_last: bool,
    ) -> Self {
        let total = items.total();
        let len = if drop_last {
            total / world
        } else {
            total.div_ceil(world)
        };
        let source = match shuffle {
            Shuffle::None => Source::Identity,
            Shuffle::Uniform => {
                Source::Permuted(Permutation::new(total.max(1), epoch_seed(seed, epoch, 1)))
            }
            Shuffle::Buffered { .. } if items.per_clip == 1 => {
                Source::Permuted(Permutation::new(total.max(1), epoch_seed(seed, epoch, 1)))
            }
            Shuffle::Buffered { buffer } => Source::Buffered(Box::new(BufferedStream {
                clips: Permutation::new(items.clips.max(1), epoch_seed(seed, epoch, 2)),
                per_clip: items.per_clip,
                total,
                fed: 0,
                buffer: Vec::with_capacity(buffer.max(1)),
                capacity: buffer.max(1),
                rng: SplitMix::new(epoch_seed(seed, epoch, 3)),
                at: 0,
                head: Vec::new(),
                head_len: world.min(total) as usize,
            })),
        };
        ShardOrder {
            rank,
            world,
            total,
            len,
            pos: 0,
            source,
        }
    }

    /// Items this shard yields in the epoch.
    pub(crate) fn len(&self) -> u64 {
        self.len
    }

    /// Items in the whole epoch (every rank's positions wrap at this count).
    fn total(&self) -> u64 {
        match &self.source {
            Source::Identity | Source::Permuted(_) => self.total,
            Source::Buffered(s) => s.total,
        }
    }

    /// Items not yet yielded.
    pub(crate) fn remaining(&self) -> u64 {
        self.len - self.pos
    }

    /// Skips `n` items (at most the remaining ones).
    pub(crate) fn skip(&mut self, n: u64) {
        let n = n.min(self.remaining());
        if let Source::Buffered(s) = &mut self.source {
            // Sequential: replay the global stream (indices only, nothing is read).
            let end = self.rank + (self.pos + n) * self.world;
            s.advance_to(end.min(s.total));
        }
        self.pos += n;
    }

    /// Appends the next `n` ids (at most the remaining ones) to `out`.
    pub(crate) fn take(&mut self, n: u64, out: &mut Vec<u64>) {
        let n = n.min(self.remaining());
        let (rank, world) = (self.rank, self.world);
        let positions = (self.pos..self.pos + n).map(|q| rank + q * world);
        let total = self.total();
        match &mut self.source {
            Source::Identity => out.extend(positions.map(|g| g % total)),
            Source::Permuted(p) => out.extend(positions.map(|g| p.apply(g % total))),
            Source::Buffered(s) => {
                for g in positions {
                    if g >= total {
                        out.push(s.head_id(g % total));
                        continue;
                    }
                    s.advance_to(g);
                    out.push(
                        s.next()
                            .expect("the stream holds every position of the shard"),
                    );
                }
            }
        }
        self.pos += n;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    #[test]
    fn permutations_are_bijections_and_depend_on_the_seed() {
        for n in [1u64, 2, 3, 7, 64, 1000, 4097] {
            let p = Permutation::new(n, 42);
            let image: HashSet<u64> = (0..n).map(|i| p.apply(i)).collect();
            assert_eq!(image.len() as u64, n);
            assert!(image.iter().all(|&x| x < n));
        }
        let a: Vec<u64> = (0..1000)
            .map(|i| Permutation::new(1000, 1).apply(i))
            .collect();
        let b: Vec<u64> = (0..1000)
            .map(|i| Permutation::new(1000, 2).apply(i))
            .collect();
        assert_ne!(a, b);
        // Not the identity, and not a rotation: few fixed points, displaced far.
        let fixed = a
            .iter()
            .enumerate()
            .filter(|&(i, &x)| i as u64 == x)
            .count();
        assert!(fixed < 10, "{fixed} fixed points");
    }

    fn all_ids(order: &mut ShardOrder) -> Vec<u64> {
        let mut v = Vec::new();
        order.take(u64::MAX, &mut v);
        v
    }

    #[test]
    fn shards_partition_every_shuffle_and_skipping_equals_taking() {
        let items = Items {
            clips: 23,
            per_clip: 7,
        };
        for shuffle in [
            Shuffle::None,
            Shuffle::Uniform,
            Shuffle::Buffered { buffer: 10 },
            Shuffle::Buffered { buffer: 1 },
        ] {
            for world in [1u64, 2, 3, 5, 7, 200] {
                let mut seen = Vec::new();
                for rank in 0..world {
                    let mut o = ShardOrder::new(items, shuffle, 9, 4, rank, world, false);
                    let ids = all_ids(&mut o);
                    assert_eq!(ids.len() as u64, o.len());
                    assert_eq!(o.len(), items.total().div_ceil(world), "equal shards");
                    // Resuming part-way gives the same continuation.
                    for cut in [0u64, 1, 5, ids.len() as u64].map(|c| c.min(ids.len() as u64)) {
                        let mut r = ShardOrder::new(items, shuffle, 9, 4, rank, world, false);
                        let mut head = Vec::new();
                        r.take(cut.min(3), &mut head);
                        r.skip(cut.saturating_sub(3));
                        let rest = all_ids(&mut r);
                        assert_eq!(
                            rest,
                            ids[cut as usize..],
                            "{shuffle:?} {world} {rank} {cut}"
                        );
                    }
                    seen.extend(ids);
                }
                // Every rank the same length; every item seen; the padding (fewer than
                // `world` items) repeats the epoch's first positions.
                let len = items.total().div_ceil(world);
                assert_eq!(seen.len() as u64, len * world, "{shuffle:?} {world}");
                let first: Vec<u64> = {
                    let mut o = ShardOrder::new(items, shuffle, 9, 4, 0, 1, false);
                    all_ids(&mut o)
                };
                let pad = (len * world - items.total()) as usize;
                let mut want: Vec<u64> = first.clone();
                want.extend(&first[..pad]);
                want.sort_unstable();
                seen.sort_unstable();
                assert_eq!(seen, want, "{shuffle:?} {world}");
                // drop_last: equal shard lengths.
                let lens: Vec<u64> = (0..world)
                    .map(|r| ShardOrder::new(items, shuffle, 9, 4, r, world, true).len())
                    .collect();
                assert!(lens.iter().all(|&l| l == items.total() / world), "{lens:?}");
            }
        }
    }

    /// 2,160 clips on 7 ranks in batches of 154 gave ranks 3, 3, 3, 3, 2, 2 and 2 batches
    /// (DDP's last all-reduce then waits for ever).
    #[test]
    fn every_rank_gets_as_many_batches() {
        let items = Items {
            clips: 2160,
            per_clip: 1,
        };
        for drop_last in [false, true] {
            let batches: Vec<u64> = (0..7)
                .map(|r| {
                    let len = ShardOrder::new(items, Shuffle::Uniform, 1, 0, r, 7, drop_last).len();
                    if drop_last {
                        len / 154
                    } else {
                        len.div_ceil(154)
                    }
                })
                .collect();
            assert!(batches.iter().all(|&b| b == batches[0]), "{batches:?}");
        }
    }

    #[test]
    fn buffered_shuffle_keeps_reads_local_and_epochs_differ() {
        let items = Items {
            clips: 100,
            per_clip: 20,
        };
        let mut o = ShardOrder::new(items, Shuffle::Buffered { buffer: 40 }, 1, 0, 0, 1, false);
        let ids = all_ids(&mut o);
        // A window of 64 consecutive items touches few clips (about buffer/per_clip + 64/per_clip).
        let clips: HashSet<u64> = ids[500..564].iter().map(|i| i / 20).collect();
        assert!(clips.len() <= 12, "{} clips in a window", clips.len());
        let mut o2 = ShardOrder::new(items, Shuffle::Buffered { buffer: 40 }, 1, 1, 0, 1, false);
        assert_ne!(ids, all_ids(&mut o2));
        let mut u = ShardOrder::new(items, Shuffle::Uniform, 1, 0, 0, 1, false);
        let uniform = all_ids(&mut u);
        let clips: HashSet<u64> = uniform[500..564].iter().map(|i| i / 20).collect();
        assert!(clips.len() > 40, "uniform spreads: {} clips", clips.len());
    }
}

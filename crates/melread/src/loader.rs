//! Batches for training: an epoch's items in a seeded, sharded, resumable order, read
//! by worker threads into a bounded set of batch buffers and handed out in order.
//!
//! Memory: at most [`LoaderOptions::prefetch`] + 1 batch buffers exist while the caller
//! holds one batch at a time (`prefetch` filled ahead or being filled, one in the
//! caller's hands); a dropped batch's buffer is reused. A loop that frees a batch only
//! once it has the next (Python's `for`) holds two at the handover: the loader keeps the
//! returning buffer for its next batch rather than allocate one, `prefetch + 2` in all.
//! Batches the caller keeps beyond one are its own. [`Loader::memory_bound`] states the
//! figure in bytes.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;

use half::{bf16, f16};
use mel_core::{Dtype, Error, Result};
use ndarray::{ArrayD, ArrayViewD};

use crate::augment::{Augment, Augmenter, BatchKey, Layout, Mixed};
use crate::convert::{self, Affine, OutSlice};
use crate::order::{Items, ShardOrder, Shuffle, Unit, mix64};
use crate::split::{GroupItem, GroupMember, Split};
use crate::widen::{self, RowMap};
use mel_core::stats::MelStats;

/// The element type of batches.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Output {
    /// f32 (f16 and bf16 widened exactly; normalisation applies).
    #[default]
    F32,
    /// As stored: f16 and bf16 kept (half the bytes to move to a GPU), f32 as f32.
    Stored,
}

/// How batches are made. Every field has a default; set what you need.
#[derive(Debug, Clone, PartialEq)]
pub struct LoaderOptions {
    /// What one item is: a segment `[n_mels, frames]` or a whole clip.
    pub unit: Unit,
    /// Items per batch.
    pub batch_size: usize,
    /// The order of items in an epoch.
    pub shuffle: Shuffle,
    /// The shuffle's seed (every epoch derives its own order from it).
    pub seed: u64,
    /// Drops each shard's last, partial batch. Every rank gets the same number of items
    /// and batches either way: `items / world` with it, else `ceil(items / world)`, the
    /// last positions wrapping to the epoch's first items (as torch's
    /// `DistributedSampler` pads).
    pub drop_last: bool,
    /// Worker threads reading batches.
    pub workers: usize,
    /// Batches read ahead at most (being filled or waiting to be taken); memory is
    /// `prefetch + 2` batches ([`Loader::memory_bound`]).
    pub prefetch: usize,
    /// This process's rank among `world` (multi-GPU data parallelism).
    pub rank: usize,
    /// Processes sharing each epoch; rank `r` takes every `world`-th item from `r`
    /// (wrapping past the end: see `drop_last`).
    pub world: usize,
    /// The element type of batches.
    pub output: Output,
    /// Per-mel-bin normalisation `(x - mean) / std` (f32 output only).
    pub normalize: Option<MelStats>,
    /// A random crop: each item yields `N` consecutive frames of its own, from an offset
    /// drawn anew each epoch from `(seed, epoch, item)` (so the same whatever the number
    /// of workers, and again on a resume); every axis but the last is kept. `None`: the
    /// whole item. On whole clips (`audio.length = "whole"`), a clip shorter than `N` is
    /// padded with zeros after its frames ([`Batch::lengths`] says how many are real).
    pub crop_frames: Option<usize>,
    /// Whole clips only: duration buckets. Each batch holds clips of similar length, padded
    /// with zeros to its longest, at most `M` frames in all (and at most `batch_size`
    /// clips); [`Batch::lengths`] gives each clip's frames. See [`crate::buckets`].
    pub max_frames: Option<usize>,
    /// Augmentation of f32 batches (masks, mixup, gain), drawn from `(seed, epoch, item)`;
    /// off by default. See [`crate::augment`].
    pub augment: Augment,
}

impl Default for LoaderOptions {
    fn default() -> Self {
        LoaderOptions {
            unit: Unit::Segment,
            batch_size: 256,
            shuffle: Shuffle::Buffered { buffer: 16_384 },
            seed: 0,
            drop_last: false,
            workers: std::thread::available_parallelism().map_or(2, |n| n.get()),
            prefetch: 4,
            rank: 0,
            world: 1,
            output: Output::F32,
            normalize: None,
            crop_frames: None,
            max_frames: None,
            augment: Augment::default(),
        }
    }
}

/// Makes epochs of batches from one [`Split`].
#[derive(Debug, Clone)]
pub struct Loader {
    split: Arc<Split>,
    opts: LoaderOptions,
    norm: Option<Arc<Affine>>,
    items: Items,
    /// Values of one item as a batch holds it (after the crop; for buckets, the most
    /// values a batch holds).
    item_values: usize,
    item_shape: Vec<usize>,
    /// Whole clips: each clip's frames, and how items are shaped.
    whole: Option<WholeItems>,
    /// Buffers an epoch left for the next (clones share them).
    spare: Arc<Spare>,
}

/// Batch buffers passed from a loader's epoch to the next, so a new epoch reuses memory
/// already faulted in instead of allocating and zeroing it again. An epoch leaves its
/// free buffers in `free` (at most `prefetch + 2`, the memory bound) when it ends, and
/// the next starts with them; a batch of an ended epoch that the caller frees later (the last one, held while
/// the next epoch starts) goes to the epoch running now if that one has room, as any of
/// its own would, else here while none runs, else it is freed.
#[derive(Default)]
struct Spare {
    free: Mutex<Vec<Buffer>>,
    /// The pool of the loader's latest epoch.
    current: Mutex<std::sync::Weak<Pool>>,
}

impl std::fmt::Debug for Spare {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let n = self.free.lock().map_or(0, |v| v.len());
        write!(f, "Spare({n} buffers)")
    }
}

impl Spare {
    /// A buffer of an ended epoch, freed by the caller: to the running epoch if it has
    /// room, kept while no epoch runs, else dropped.
    fn adopt(&self, b: Buffer, prefetch: usize) {
        let current = self.current.lock().expect("spare lock").upgrade();
        let b = match current {
            Some(pool) => match pool.accept(b) {
                Some(b) => b,
                None => return,
            },
            None => b,
        };
        let mut free = self.free.lock().expect("spare lock");
        if free.len() < most_buffers(prefetch) {
            free.push(b);
        }
    }
}

/// How a loader over whole clips shapes its items.
#[derive(Debug, Clone)]
struct WholeItems {
    /// Each clip's frames.
    frames: Arc<Vec<usize>>,
    /// `Some(M)`: duration buckets of at most `M` frames; `None`: crops.
    max_frames: Option<usize>,
}

/// The most batches a loader reads ahead.
pub const MAX_PREFETCH: usize = 1024;

/// Refuses augmentation the output cannot take: stored f16/bf16 batches, or a gain that
/// normalisation by `norm` would carry past float32.
fn check_augment(split: &Split, opts: &LoaderOptions, norm: Option<&Affine>) -> Result<()> {
    if opts.augment.is_off() {
        return Ok(());
    }
    if opts.output == Output::Stored && split.dtype() != Dtype::F32 {
        return Err(Error::config(
            "augment",
            "applies to f32 output; with stored f16/bf16 output augment on the device",
        ));
    }
    let gain = opts.augment.gain_db;
    let log_kind = split
        .config()
        .and_then(|c| c.get("log")?.get("kind")?.as_str());
    if gain > 0.0
        && let Some(kind) = log_kind
        && kind != "db"
    {
        return Err(Error::config(
            "augment.gain_db",
            format!(
                "a gain in dB is added to dB values; this split's log.kind is {kind:?} (build with log.kind = \"db\", or leave gain_db at 0)"
            ),
        ));
    }
    if let Some(n) = norm
        && gain > 0.0
        && (gain * n.max_scale()).partial_cmp(&(f32::MAX / 4.0)) != Some(std::cmp::Ordering::Less)
    {
        return Err(Error::config(
            "augment.gain_db",
            format!(
                "±{gain} dB divided by the smallest standard deviation of the statistics ({}) is not finite in float32",
                1.0 / n.max_scale()
            ),
        ));
    }
    Ok(())
}

/// The largest batch buffer the loader allocates: 4 GiB.
pub const MAX_BATCH_BYTES: u64 = 4 << 30;

/// Keeps the crops' draws apart from the shuffle's, which hash the same seed.
const CROP_STREAM: u64 = 0x6372_6f70_2d66_726d;

/// An item's values and shape after a crop of `crop` frames, checked against the split.
fn cropped(
    split: &Split,
    crop: usize,
    values: usize,
    mut shape: Vec<usize>,
) -> Result<(usize, Vec<usize>)> {
    let frames = split.frames();
    if crop == 0 || crop > frames {
        return Err(Error::config(
            "crop_frames",
            format!(
                "{crop} frames: a crop is 1 to {frames} frames (the split's items are {frames} frames long)"
            ),
        ));
    }
    *shape.last_mut().expect("an item has a frame axis") = crop;
    Ok((values / frames * crop, shape))
}

impl Loader {
    /// A loader over `split` with `opts`, checked: batch size, workers, prefetch and
    /// world at least 1, rank below world, statistics matching the split's mel bins,
    /// normalisation only with f32 output, and a batch buffer within [`MAX_BATCH_BYTES`].
    pub fn new(split: Arc<Split>, opts: LoaderOptions) -> Result<Loader> {
        let positive = |field: &str, v: usize| {
            if v == 0 {
                Err(Error::config(field, "must be at least 1"))
            } else {
                Ok(())
            }
        };
        positive("batch_size", opts.batch_size)?;
        positive("workers", opts.workers)?;
        if opts.workers > mel_core::config::MAX_THREADS {
            return Err(Error::config(
                "workers",
                format!(
                    "{} is above the limit of {} threads",
                    opts.workers,
                    mel_core::config::MAX_THREADS
                ),
            ));
        }
        positive("prefetch", opts.prefetch)?;
        if opts.prefetch > MAX_PREFETCH {
            return Err(Error::config(
                "prefetch",
                format!(
                    "{} batches read ahead; at most {MAX_PREFETCH} (memory is prefetch + 2 batches)",
                    opts.prefetch
                ),
            ));
        }
        positive("world", opts.world)?;
        if let Shuffle::Buffered { buffer } = opts.shuffle {
            positive("shuffle.buffer", buffer)?;
        }
        if opts.rank >= opts.world {
            return Err(Error::config(
                "rank",
                format!("{} is not below world = {}", opts.rank, opts.world),
            ));
        }
        let norm = match &opts.normalize {
            None => None,
            Some(_) if opts.output == Output::Stored && split.dtype() != Dtype::F32 => {
                return Err(Error::config(
                    "normalize",
                    "applies to f32 output; with stored f16/bf16 output normalise on the device",
                ));
            }
            Some(s) if s.mean.len() != split.n_mels() || s.std.len() != split.n_mels() => {
                return Err(Error::config(
                    "normalize",
                    format!(
                        "statistics of {} means and {} standard deviations; the split has {} mel bins",
                        s.mean.len(),
                        s.std.len(),
                        split.n_mels()
                    ),
                ));
            }
            Some(s) if let Some(why) = s.unusable() => {
                return Err(Error::config("normalize", why));
            }
            // Applied to what a batch holds: windows of `crop_frames` where it crops.
            Some(s) => Some(Arc::new(Affine::from_stats(
                s,
                opts.crop_frames.unwrap_or(split.frames()),
            ))),
        };
        check_augment(&split, &opts, norm.as_deref())?;
        if let Some(index) = split.whole() {
            return Loader::over_whole(split.clone(), opts, norm, index.all_frames());
        }
        if opts.max_frames.is_some() {
            return Err(Error::config(
                "max_frames",
                format!(
                    "buckets clips of different lengths; every clip of this split is {} frames (audio.length = \"fixed\"): use batch_size",
                    split.frames()
                ),
            ));
        }
        let (per_clip, item_values, item_shape) = match opts.unit {
            Unit::Segment => (
                split.segments_per_clip(),
                split.values_per_segment(),
                split.segment_shape().to_vec(),
            ),
            Unit::Clip => (1, split.values_per_clip(), split.clip_shape().to_vec()),
        };
        let (item_values, item_shape) = match opts.crop_frames {
            None => (item_values, item_shape),
            Some(crop) => cropped(&split, crop, item_values, item_shape)?,
        };
        let frames = *item_shape.last().expect("a frame axis");
        opts.augment.check(split.n_mels(), frames)?;
        let loader = Loader {
            items: Items {
                clips: split.clips() as u64,
                per_clip: per_clip as u64,
            },
            split,
            opts,
            norm,
            item_values,
            item_shape,
            whole: None,
            spare: Arc::default(),
        };
        loader.check_batch_bytes()?;
        Ok(loader)
    }

    /// A loader over a split of whole clips of `frames` frames each: crops or buckets.
    fn over_whole(
        split: Arc<Split>,
        opts: LoaderOptions,
        norm: Option<Arc<Affine>>,
        frames: &[usize],
    ) -> Result<Loader> {
        let longest = frames.iter().copied().max().unwrap_or(0);
        let n_mels = split.n_mels();
        let (item_values, width) = match (opts.crop_frames, opts.max_frames) {
            (Some(_), Some(_)) => {
                return Err(Error::config(
                    "max_frames",
                    "cannot be given with crop_frames: crop every clip to N frames, or bucket whole clips by length, not both",
                ));
            }
            (None, None) => {
                return Err(Error::config(
                    "crop_frames",
                    "(or max_frames) is needed: this split holds whole clips of different lengths; crop_frames = N crops each clip, max_frames = M batches whole clips by length",
                ));
            }
            (Some(crop), None) if crop == 0 || crop > longest => {
                return Err(Error::config(
                    "crop_frames",
                    format!("{crop} frames: a crop is 1 to {longest} frames (the longest clip)"),
                ));
            }
            (Some(crop), None) => (n_mels.saturating_mul(crop), crop),
            (None, Some(m)) if m < longest => {
                let at = frames.iter().position(|&f| f == longest).unwrap_or(0);
                let path = split.whole().map_or(0, |w| w.first_rows()[at]);
                return Err(Error::config(
                    "max_frames",
                    format!(
                        "{m} is smaller than the longest clip ({longest} frames: clip {at}, {}): a batch must hold it",
                        split.paths()[path]
                    ),
                ));
            }
            (None, Some(m)) => (n_mels.saturating_mul(m), 0),
        };
        // The widest item: the crop, or (buckets) the longest clip.
        opts.augment
            .check(n_mels, opts.crop_frames.unwrap_or(longest))?;
        let loader = Loader {
            items: Items {
                clips: frames.len() as u64,
                per_clip: 1,
            },
            split,
            whole: Some(WholeItems {
                frames: Arc::new(frames.to_vec()),
                max_frames: opts.max_frames,
            }),
            opts,
            norm,
            item_values,
            item_shape: vec![n_mels, width],
            spare: Arc::default(),
        };
        loader.check_batch_bytes()?;
        Ok(loader)
    }

    /// Refuses a batch buffer over [`MAX_BATCH_BYTES`].
    fn check_batch_bytes(&self) -> Result<()> {
        let loader = self;
        let buckets = self.whole.as_ref().and_then(|w| w.max_frames);
        let items = if buckets.is_some() {
            1
        } else {
            loader.batch_items() as u64
        };
        let bytes = items.checked_mul(loader.item_bytes() as u64);
        if let Some(m) = buckets
            && bytes.is_none_or(|b| b > MAX_BATCH_BYTES)
        {
            return Err(Error::limit(
                "max_frames",
                format!(
                    "{m} frames of {} mel bins exceed the {MAX_BATCH_BYTES}-byte limit on one batch",
                    self.split.n_mels()
                ),
            ));
        }
        if bytes.is_none_or(|b| b > MAX_BATCH_BYTES) {
            return Err(Error::limit(
                "batch_size",
                format!(
                    "{} items of {} bytes exceed the {MAX_BATCH_BYTES}-byte limit on one batch",
                    loader.batch_items(),
                    loader.item_bytes()
                ),
            ));
        }
        Ok(())
    }

    /// The first frame of item `id`'s crop in `epoch` (0 without a crop): a hash of the
    /// seed, the epoch and the item, uniform over the offsets that fit.
    pub fn crop_offset(&self, epoch: u64, item: ItemId) -> usize {
        let Some(crop) = self.opts.crop_frames else {
            return 0;
        };
        let frames = match &self.whole {
            Some(w) => w.frames[item.clip],
            None => self.split.frames(),
        };
        // A clip shorter than the crop starts at 0 (and is padded).
        let room = (frames.saturating_sub(crop) + 1) as u64;
        let id = item.clip as u64 * self.items.per_clip + item.segment as u64;
        let h = mix64(self.opts.seed ^ mix64(epoch ^ mix64(id ^ CROP_STREAM)));
        // Lemire's multiply-shift: uniform enough for any room below 2^32.
        ((h as u128 * room as u128) >> 64) as usize
    }

    /// With duration buckets, the width in frames of a batch of `ids`: its longest clip.
    fn bucket_width(&self, ids: &[u64]) -> Option<usize> {
        let w = self.whole.as_ref()?;
        w.max_frames?;
        Some(ids.iter().map(|&i| w.frames[i as usize]).max().unwrap_or(0))
    }

    /// The split read.
    pub fn split(&self) -> &Arc<Split> {
        &self.split
    }

    /// The options.
    pub fn options(&self) -> &LoaderOptions {
        &self.opts
    }

    /// One item's shape (`[n_mels, frames]` for segments, the clip shape for clips).
    pub fn item_shape(&self) -> &[usize] {
        &self.item_shape
    }

    /// Values a batch buffer holds at most.
    fn buffer_values(&self) -> usize {
        match &self.whole {
            Some(WholeItems {
                max_frames: Some(_),
                ..
            }) => self.item_values,
            _ => self.batch_items() * self.item_values,
        }
    }

    /// Bytes of one item in a batch.
    pub fn item_bytes(&self) -> usize {
        self.item_values.saturating_mul(self.elem_bytes())
    }

    fn elem_bytes(&self) -> usize {
        match (self.opts.output, self.split.dtype()) {
            (Output::Stored, d) => d.size(),
            (Output::F32, _) => 4,
        }
    }

    /// Items this rank gets per epoch (with buckets: in epoch 0; see [`Self::bucket_plan`]).
    pub fn items_per_epoch(&self) -> usize {
        match self.bucket_plan(0) {
            Some(p) => p.iter().map(Vec::len).sum(),
            None => self.order(0).len() as usize,
        }
    }

    /// Batches this rank gets per epoch (with buckets, the count varies by epoch: this
    /// is epoch 0's; [`batches_in`](Self::batches_in) gives any epoch's).
    pub fn batches_per_epoch(&self) -> usize {
        self.batches_in(0)
    }

    /// With duration buckets (`max_frames`), the clip ids of each of this rank's batches
    /// of `epoch` ([`crate::buckets`]); `None` otherwise.
    pub fn bucket_plan(&self, epoch: u64) -> Option<Vec<Vec<u64>>> {
        let w = self.whole.as_ref()?;
        let max_frames = w.max_frames?;
        let spec = crate::buckets::BucketSpec {
            max_frames,
            shuffle: self.opts.shuffle != Shuffle::None,
            batch_size: self.opts.batch_size,
            seed: self.opts.seed,
            rank: self.opts.rank,
            world: self.opts.world,
            drop_last: self.opts.drop_last,
        };
        Some(crate::buckets::plan(&w.frames, spec, epoch))
    }

    /// The share of `epoch`'s padded frames (this rank's) that are padding: what duration
    /// buckets save, or crops of short clips cost. 0 for fixed-length clips.
    pub fn padding_share(&self, epoch: u64) -> f64 {
        let Some(w) = &self.whole else { return 0.0 };
        match self.bucket_plan(epoch) {
            Some(plan) => crate::buckets::padding_share(&w.frames, &plan),
            None => {
                let crop = self.opts.crop_frames.unwrap_or(0);
                let mut order = self.order(epoch);
                let mut ids = Vec::new();
                order.take(order.remaining(), &mut ids);
                let real: usize = ids.iter().map(|&i| w.frames[i as usize].min(crop)).sum();
                let all = ids.len() * crop;
                if all == 0 {
                    0.0
                } else {
                    1.0 - real as f64 / all as f64
                }
            }
        }
    }

    /// Batches this rank gets in `epoch`.
    pub fn batches_in(&self, epoch: u64) -> usize {
        if let Some(p) = self.bucket_plan(epoch) {
            return p.len();
        }
        let items = self.order(epoch).len() as usize;
        if self.opts.drop_last {
            items / self.opts.batch_size
        } else {
            items.div_ceil(self.opts.batch_size)
        }
    }

    /// The most items one batch holds: `batch_size`, or fewer where the epoch has fewer
    /// (a `batch_size` far above the split's items allocates nothing for them).
    fn batch_items(&self) -> usize {
        let items = self.items.clips.saturating_mul(self.items.per_clip);
        self.opts
            .batch_size
            .min(usize::try_from(items).unwrap_or(usize::MAX))
    }

    /// Bytes of one full batch: values plus labels and item ids.
    pub fn batch_bytes(&self) -> usize {
        let values = self.buffer_values().saturating_mul(self.elem_bytes());
        values.saturating_add(self.batch_items().saturating_mul(8 + 8))
    }

    /// The most memory the loader's batch buffers take: `prefetch + 2` full batches (the
    /// loader's own `prefetch + 1`, and the one the caller is using; a caller that frees
    /// each batch before taking the next needs one fewer), plus each worker's
    /// decoded-chunk cache for chunked layouts, or for whole clips in batches of 4 MiB
    /// or more its scratch for streaming them past the caches (an item of at most 256
    /// KiB, three with mixup). Batches the caller keeps beyond one are
    /// its own. The buffers an epoch leaves for the next are the same ones (per epoch
    /// running at once).
    pub fn memory_bound(&self) -> usize {
        let chunk = match self.split.access() {
            crate::Access::Chunks {
                clips_per_chunk, ..
            } => clips_per_chunk * self.split.values_per_clip() * self.split.dtype().size(),
            _ => 0,
        };
        // The scratch of a batch streamed past the caches: an item, or mixup's group.
        let group = match self.opts.augment.mixup {
            Some(_) => 3,
            None => 1,
        };
        let streams = self.whole.is_some() && self.batch_bytes() >= STREAM_BATCH_BYTES;
        let scratch = if streams {
            group * STREAM_ITEM_BYTES
        } else {
            0
        };
        let per_worker = self
            .split
            .chunk_cache()
            .saturating_mul(chunk)
            .saturating_add(scratch);
        most_buffers(self.opts.prefetch)
            .saturating_mul(self.batch_bytes())
            .saturating_add(self.opts.workers.saturating_mul(per_worker))
    }

    fn order(&self, epoch: u64) -> ShardOrder {
        ShardOrder::new(
            self.items,
            self.opts.shuffle,
            self.opts.seed,
            epoch,
            self.opts.rank as u64,
            self.opts.world as u64,
            self.opts.drop_last,
        )
    }

    /// The item ids of each batch of `epoch` from batch `from`, without reading
    /// anything: what [`resume`](Self::resume) would deliver.
    pub fn plan(&self, epoch: u64, from: usize) -> impl Iterator<Item = Vec<ItemId>> + '_ {
        let mut order = self.epoch_order(epoch, from);
        let batches = self.batches_in(epoch);
        (from.min(batches)..batches).map(move |b| {
            let mut ids = Vec::with_capacity(self.batch_items());
            order.take(b, self.opts.batch_size, &mut ids);
            ids.into_iter().map(|id| self.item_id(id)).collect()
        })
    }

    /// The order of `epoch`'s items from batch `from` on.
    fn epoch_order(&self, epoch: u64, from: usize) -> EpochOrder {
        if let Some(plan) = self.bucket_plan(epoch) {
            return EpochOrder::Batches(plan);
        }
        let mut order = self.order(epoch);
        order.skip((from * self.opts.batch_size) as u64);
        EpochOrder::Items(order)
    }

    fn item_id(&self, id: u64) -> ItemId {
        ItemId {
            clip: (id / self.items.per_clip) as usize,
            segment: (id % self.items.per_clip) as usize,
        }
    }

    /// Epoch `epoch` from its first batch; workers start reading at once.
    pub fn epoch(&self, epoch: u64) -> Epoch {
        self.resume(epoch, 0)
    }

    /// Epoch `epoch` from batch `batch` on: the same batches, in the same order, as an
    /// epoch run from the start would deliver from there.
    pub fn resume(&self, epoch: u64, batch: usize) -> Epoch {
        Epoch::start(self.clone(), epoch, batch)
    }
}

/// An epoch's items: taken `batch_size` at a time from a shard's order, or a plan of
/// batches (duration buckets).
enum EpochOrder {
    Items(ShardOrder),
    Batches(Vec<Vec<u64>>),
}

impl EpochOrder {
    /// Appends batch `index`'s ids (the next `batch_size` items of the order) to `out`.
    fn take(&mut self, index: usize, batch_size: usize, out: &mut Vec<u64>) {
        match self {
            EpochOrder::Items(o) => o.take(batch_size as u64, out),
            EpochOrder::Batches(plan) => out.extend(plan.get(index).into_iter().flatten()),
        }
    }
}

/// Which clip (and which of its segments) an item of a batch is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ItemId {
    /// The clip's row in the split.
    pub clip: usize,
    /// The segment within the clip (0 for whole clips).
    pub segment: usize,
}

/// The values of a batch.
#[derive(Debug)]
enum Buffer {
    F32(Vec<f32>),
    /// f16 or bf16 bits.
    Half(Vec<u16>),
}

impl Buffer {
    /// Room for a batch of `total` values: the buffer grows (zeroed) only past the most it
    /// has held, and is never cut, so a short batch (an epoch's last, a narrow bucket)
    /// costs the next full one no zeroing. A batch's values are its shape's first
    /// `total`; those after are a former batch's, never read.
    fn hold(&mut self, total: usize) {
        match self {
            Buffer::F32(v) if v.len() < total => v.resize(total, 0.0),
            Buffer::Half(v) if v.len() < total => v.resize(total, 0),
            _ => {}
        }
    }
}

/// Counters of one epoch's batch buffers, for checking the memory bound.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct BufferStats {
    /// Buffers allocated during the epoch.
    pub allocated: usize,
    /// The most buffers live at once: the loader's (free, being filled, filled) plus
    /// one if the caller held a batch.
    pub max_live: usize,
    /// The bound on `max_live`: `prefetch + 2` (`prefetch + 1` of the loader's own).
    pub bound: usize,
    /// Buffers the epoch got from the loader's previous epoch: those it left free, and
    /// its batches the caller freed after it ended.
    pub reused: usize,
}

/// The epoch's batch buffers. The loader owns `owned` of them (free, being filled, or
/// filled and waiting); the caller holds `out`. The loader allocates only while
/// `owned + min(out, 1) < prefetch + 1`, and keeps a buffer the caller gives back while
/// it owns fewer than `prefetch + 1`: with a caller that drops each batch before the
/// next, `prefetch + 1` buffers exist in all and are reused; one that drops a batch only
/// once it has the next gets `prefetch + 2`, reused too (the buffer coming back is the
/// next batch's, not dropped to allocate another); batches the caller keeps beyond one
/// are its own, and the loader still owns up to `prefetch` (so it never waits on a
/// caller that keeps batches).
struct Pool {
    state: Mutex<PoolState>,
    freed: Condvar,
    prefetch: usize,
    /// Where the free buffers go when the epoch ends.
    spare: Arc<Spare>,
}

struct PoolState {
    free: Vec<Buffer>,
    owned: usize,
    out: usize,
    stats: BufferStats,
    stopped: bool,
}

impl PoolState {
    fn room(&self, prefetch: usize) -> bool {
        self.owned + self.out.min(1) < prefetch + 1
    }

    /// Keeps a buffer coming back (from the caller, or from the loader's ended epoch)
    /// while the loader owns fewer than `prefetch + 1`; else gives it back to be freed.
    fn keep(&mut self, b: Buffer, prefetch: usize) -> Option<Buffer> {
        if self.owned > prefetch {
            return Some(b);
        }
        self.owned += 1;
        self.free.push(b);
        self.note();
        None
    }

    fn note(&mut self) {
        self.stats.max_live = self.stats.max_live.max(self.owned + self.out.min(1));
    }
}

impl Pool {
    /// A buffer for a worker: a free one, a new one while there is room, or `None` once
    /// stopped.
    fn take(&self, make: impl Fn() -> Buffer) -> Option<Buffer> {
        let mut s = self.state.lock().expect("pool lock");
        loop {
            if s.stopped {
                return None;
            }
            if let Some(b) = s.free.pop() {
                return Some(b);
            }
            if s.room(self.prefetch) {
                s.owned += 1;
                s.stats.allocated += 1;
                s.note();
                return Some(make());
            }
            s = self.freed.wait(s).expect("pool lock");
        }
    }

    /// A filled buffer goes to the caller.
    fn hand_out(&self) {
        let mut s = self.state.lock().expect("pool lock");
        s.owned -= 1;
        s.out += 1;
        s.note();
        drop(s);
        self.freed.notify_one();
    }

    /// A buffer the loader owned is gone (its batch failed).
    fn lost(&self) {
        let mut s = self.state.lock().expect("pool lock");
        s.owned -= 1;
        drop(s);
        self.freed.notify_one();
    }

    /// A buffer comes back from the caller (its batch was dropped), or leaves for good
    /// (`None`: moved into a tensor). Kept while there is room; once the epoch is over,
    /// offered to the loader's next ([`Spare::adopt`]).
    fn give_back(&self, b: Option<Buffer>) {
        let mut s = self.state.lock().expect("pool lock");
        s.out -= 1;
        let late = match b {
            Some(b) if s.stopped => Some(b),
            Some(b) => {
                // Dropped when the loader has all it may own.
                drop(s.keep(b, self.prefetch));
                None
            }
            None => None,
        };
        drop(s);
        self.freed.notify_one();
        if let Some(b) = late {
            self.spare.adopt(b, self.prefetch);
        }
    }

    /// A buffer another (ended) epoch of the loader handed on: kept if this epoch runs
    /// and has room, as one of its own coming back would be (else dropped); given back
    /// if this epoch has ended too.
    fn accept(&self, b: Buffer) -> Option<Buffer> {
        let mut s = self.state.lock().expect("pool lock");
        if s.stopped {
            return Some(b);
        }
        if s.keep(b, self.prefetch).is_none() {
            s.stats.reused += 1;
            drop(s);
            self.freed.notify_one();
        }
        None
    }

    /// A worker's unused buffer goes back to the free list.
    fn put_free(&self, b: Buffer) {
        let mut s = self.state.lock().expect("pool lock");
        s.free.push(b);
        drop(s);
        self.freed.notify_one();
    }

    fn stop(&self) {
        self.state.lock().expect("pool lock").stopped = true;
        self.freed.notify_all();
    }

    /// The epoch is over (its workers joined): its free buffers become the loader's
    /// spare ones, up to `prefetch + 2`.
    fn retire(&self) {
        let free = std::mem::take(&mut self.state.lock().expect("pool lock").free);
        let mut spare = self.spare.free.lock().expect("spare lock");
        let room = most_buffers(self.prefetch).saturating_sub(spare.len());
        spare.extend(free.into_iter().take(room));
    }
}

/// The most batch buffers a loader has at once with `prefetch`: its own `prefetch + 1`
/// and the one the caller is using (the memory bound; the spare buffers between epochs).
fn most_buffers(prefetch: usize) -> usize {
    prefetch + 2
}

/// A batch: `len()` items of [`Loader::item_shape`], their labels and ids. Its buffer
/// returns to the loader when it is dropped.
pub struct Batch {
    epoch: u64,
    index: usize,
    shape: Vec<usize>,
    dtype: Dtype,
    values: Option<Buffer>,
    labels: Vec<i64>,
    ids: Vec<ItemId>,
    /// Each item's first frame (all 0 without a crop).
    offsets: Vec<usize>,
    /// Each item's real frames (the rest, to the batch's width, is zero padding).
    lengths: Vec<usize>,
    /// What mixup did, where it is on (boxed: a batch moves through channels).
    mixed: Option<Box<Mixed>>,
    pool: Arc<Pool>,
    /// Whether the caller got it (else it is still the loader's, e.g. left unread).
    handed_out: bool,
}

impl std::fmt::Debug for Batch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Batch")
            .field("epoch", &self.epoch)
            .field("index", &self.index)
            .field("shape", &self.shape)
            .finish_non_exhaustive()
    }
}

impl Drop for Batch {
    fn drop(&mut self) {
        if self.handed_out {
            self.pool.give_back(self.values.take());
        }
    }
}

/// A batch's values, borrowed in their element type.
#[derive(Debug, Clone, Copy)]
pub enum Values<'a> {
    /// f32 values.
    F32(&'a [f32]),
    /// f16 values as stored.
    F16(&'a [f16]),
    /// bf16 values as stored.
    Bf16(&'a [bf16]),
}

impl Batch {
    /// The epoch this batch belongs to.
    pub fn epoch(&self) -> u64 {
        self.epoch
    }

    /// The batch's number within its epoch (for resuming).
    pub fn index(&self) -> usize {
        self.index
    }

    /// Items in the batch.
    pub fn len(&self) -> usize {
        self.labels.len()
    }

    /// Whether the batch holds no items.
    pub fn is_empty(&self) -> bool {
        self.labels.is_empty()
    }

    /// `[items, ...item shape]`.
    pub fn shape(&self) -> &[usize] {
        &self.shape
    }

    /// Each item's class id.
    pub fn labels(&self) -> &[i64] {
        &self.labels
    }

    /// Each item's clip and segment.
    pub fn ids(&self) -> &[ItemId] {
        &self.ids
    }

    /// Each item's first frame in its clip (its crop's offset; 0 without a crop).
    pub fn offsets(&self) -> &[usize] {
        &self.offsets
    }

    /// Each item's real frames: the batch's width, except for whole clips shorter than
    /// it (a crop of a short clip, or a bucket's shorter clips), zero-padded after.
    pub fn lengths(&self) -> &[usize] {
        &self.lengths
    }

    /// With mixup, each item's partner and weight (its label is the same mixture:
    /// [`Mixed::soft_labels`]); `None` without.
    pub fn mixed(&self) -> Option<&Mixed> {
        self.mixed.as_deref()
    }

    /// The values in their element type (f32, or f16/bf16 as stored).
    pub fn values(&self) -> Values<'_> {
        use half::slice::HalfBitsSliceExt;
        let n = self.value_count();
        match self.values.as_ref().expect("a live batch has values") {
            Buffer::F32(v) => Values::F32(&v[..n]),
            Buffer::Half(v) if self.dtype == Dtype::Bf16 => Values::Bf16(v[..n].reinterpret_cast()),
            Buffer::Half(v) => Values::F16(v[..n].reinterpret_cast()),
        }
    }

    /// How many values the batch holds (its buffer may hold more: [`Buffer::hold`]).
    fn value_count(&self) -> usize {
        self.shape.iter().product()
    }

    /// The f32 values as an array of [`shape`](Self::shape), if the batch holds f32.
    pub fn view(&self) -> Option<ArrayViewD<'_, f32>> {
        match self.values() {
            Values::F32(v) => {
                Some(ArrayViewD::from_shape(self.shape.clone(), v).expect("batch shape"))
            }
            _ => None,
        }
    }

    /// The values widened to f32 (a copy), as an array of [`shape`](Self::shape).
    pub fn to_f32(&self) -> ArrayD<f32> {
        use half::slice::HalfFloatSliceExt;
        let v = match self.values() {
            Values::F32(v) => v.to_vec(),
            Values::F16(v) => v.to_f32_vec(),
            Values::Bf16(v) => v.to_f32_vec(),
        };
        ArrayD::from_shape_vec(self.shape.clone(), v).expect("batch shape")
    }

    /// The f32 values moved out without a copy (the buffer leaves the loader for good,
    /// which allocates another); `None` for a batch of f16/bf16 values (read them with
    /// [`values`](Self::values) first).
    pub fn into_f32(mut self) -> Option<Vec<f32>> {
        self.take_f32()
    }

    /// Takes the f32 values out (the buffer then leaves the loader for good).
    pub(crate) fn take_f32(&mut self) -> Option<Vec<f32>> {
        let n = self.value_count();
        match self.values.take() {
            Some(Buffer::F32(mut v)) => {
                v.truncate(n);
                Some(v)
            }
            other => {
                self.values = other;
                None
            }
        }
    }
}

struct Shared {
    loader: Loader,
    epoch: u64,
    order: Mutex<(EpochOrder, usize)>,
    end: usize,
    pool: Arc<Pool>,
    done: Mutex<Done>,
    ready: Condvar,
    stop: AtomicBool,
}

#[derive(Default)]
struct Done {
    batches: BTreeMap<usize, Result<Batch>>,
    workers_left: usize,
}

/// One epoch's batches, in order, read ahead by worker threads. Dropping it stops and
/// joins the workers.
pub struct Epoch {
    shared: Arc<Shared>,
    next: usize,
    workers: Vec<JoinHandle<()>>,
    failed: bool,
}

impl std::fmt::Debug for Epoch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Epoch")
            .field("epoch", &self.shared.epoch)
            .field("next", &self.next)
            .field("end", &self.shared.end)
            .finish_non_exhaustive()
    }
}

impl Epoch {
    fn start(loader: Loader, epoch: u64, from: usize) -> Epoch {
        let end = loader.batches_in(epoch);
        let from = from.min(end);
        let order = loader.epoch_order(epoch, from);
        let workers = loader.opts.workers.min(end - from).max(1);
        // The buffers the previous epoch left (a clone's epoch running at the same time
        // finds none): owned by this one from the start.
        let mut free = std::mem::take(&mut *loader.spare.free.lock().expect("spare lock"));
        free.truncate(most_buffers(loader.opts.prefetch));
        let shared = Arc::new(Shared {
            epoch,
            order: Mutex::new((order, from)),
            end,
            pool: Arc::new(Pool {
                state: Mutex::new(PoolState {
                    owned: free.len(),
                    out: 0,
                    stats: BufferStats {
                        bound: most_buffers(loader.opts.prefetch),
                        reused: free.len(),
                        ..BufferStats::default()
                    },
                    free,
                    stopped: false,
                }),
                freed: Condvar::new(),
                prefetch: loader.opts.prefetch,
                spare: Arc::clone(&loader.spare),
            }),
            loader,
            done: Mutex::new(Done {
                batches: BTreeMap::new(),
                workers_left: workers,
            }),
            ready: Condvar::new(),
            stop: AtomicBool::new(false),
        });
        *shared.loader.spare.current.lock().expect("spare lock") = Arc::downgrade(&shared.pool);
        // Workers the system refuses to start are counted out; with none at all the epoch
        // says why at its first batch (never a panic, never a wait for ever).
        let mut handles = Vec::with_capacity(workers);
        let mut refused = None;
        for w in 0..workers {
            let shared = Arc::clone(&shared);
            match std::thread::Builder::new()
                .name(format!("melread-{w}"))
                .spawn(move || worker(&shared))
            {
                Ok(h) => handles.push(h),
                Err(e) => {
                    refused = Some(e);
                    break;
                }
            }
        }
        if let Some(e) = refused {
            let mut done = shared.done.lock().expect("loader lock");
            done.workers_left -= workers - handles.len();
            if handles.is_empty() {
                done.batches.insert(
                    from,
                    Err(Error::limit(
                        "workers",
                        format!(
                            "no loader worker thread could be started ({e}): ask for fewer threads"
                        ),
                    )),
                );
            }
            drop(done);
            shared.ready.notify_all();
        }
        Epoch {
            shared,
            next: from,
            workers: handles,
            failed: false,
        }
    }

    /// The epoch's number.
    pub fn epoch(&self) -> u64 {
        self.shared.epoch
    }

    /// The number of the batch `next()` returns.
    pub fn next_index(&self) -> usize {
        self.next
    }

    /// Buffer counters so far (allocations and the most the loader owned at once).
    pub fn buffer_stats(&self) -> BufferStats {
        self.shared.pool.state.lock().expect("pool lock").stats
    }
}

/// What [`Epoch::next_within`] found.
#[derive(Debug)]
pub enum Waited {
    /// What `next()` returns: a batch, the error that ended the epoch, or `None` at its end.
    Ready(Option<Result<Batch>>),
    /// The next batch was not ready within the time given; ask again.
    Pending,
}

impl Epoch {
    /// Like `next()`, but waits at most `timeout` for the next batch: a caller that must
    /// stay responsive (to Ctrl-C, say) polls with it.
    pub fn next_within(&mut self, timeout: std::time::Duration) -> Waited {
        self.next_until(Some(std::time::Instant::now() + timeout))
    }

    fn next_until(&mut self, deadline: Option<std::time::Instant>) -> Waited {
        if self.failed || self.next >= self.shared.end {
            return Waited::Ready(None);
        }
        let mut done = self.shared.done.lock().expect("loader lock");
        loop {
            if let Some(r) = done.batches.remove(&self.next) {
                drop(done);
                self.next += 1;
                return Waited::Ready(Some(match r {
                    Ok(mut batch) => {
                        // The batch's buffer now belongs to the caller.
                        self.shared.pool.hand_out();
                        batch.handed_out = true;
                        Ok(batch)
                    }
                    Err(e) => {
                        self.failed = true;
                        Err(e)
                    }
                }));
            }
            if done.workers_left == 0 {
                self.failed = true;
                return Waited::Ready(Some(Err(Error::Internal(format!(
                    "the loader's workers stopped before batch {}",
                    self.next
                )))));
            }
            done = match deadline {
                None => self.shared.ready.wait(done).expect("loader lock"),
                Some(d) => {
                    let left = d.saturating_duration_since(std::time::Instant::now());
                    if left.is_zero() {
                        return Waited::Pending;
                    }
                    self.shared
                        .ready
                        .wait_timeout(done, left)
                        .expect("loader lock")
                        .0
                }
            };
        }
    }
}

impl Iterator for Epoch {
    type Item = Result<Batch>;

    fn next(&mut self) -> Option<Result<Batch>> {
        match self.next_until(None) {
            Waited::Ready(r) => r,
            Waited::Pending => unreachable!("no deadline"),
        }
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let n = self.shared.end.saturating_sub(self.next);
        (n, Some(n))
    }
}

impl Drop for Epoch {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::SeqCst);
        self.shared.pool.stop();
        for h in self.workers.drain(..) {
            let _ = h.join();
        }
        self.shared.pool.retire();
    }
}

/// A worker: takes a buffer, claims the next batch number, fills it, hands it over.
/// Buffers are taken before numbers are claimed, so the batch the consumer waits for
/// always has a buffer: no deadlock whatever the bound.
fn worker(shared: &Shared) {
    let loader = &shared.loader;
    let split = &*loader.split;
    let mut reader = split.reader();
    // The mapped file is looked at once a batch, after its reads (`check_file` below).
    reader.check_file_per_batch();
    let mut ids = Vec::with_capacity(loader.batch_items());
    let values = loader.buffer_values();
    let half = loader.opts.output == Output::Stored && split.dtype() != Dtype::F32;
    let make = || {
        if half {
            Buffer::Half(vec![0; values])
        } else {
            Buffer::F32(vec![0.0; values])
        }
    };
    // The scratch items of batches streamed past the caches, kept from batch to batch:
    // allocated for each, three crops of 300 frames (288 KiB) were mapped, faulted in
    // and unmapped every batch, the unmapping stopping the other workers' core too.
    let mut scratch = Vec::new();
    // Counted out however the loop ends, a panic included: the consumer is told, not
    // left waiting.
    let _gone = Leaving(shared);
    loop {
        if shared.stop.load(Ordering::SeqCst)
            || shared.order.lock().expect("order lock").1 >= shared.end
        {
            break;
        }
        let Some(mut buffer) = shared.pool.take(make) else {
            break;
        };
        let index = {
            let mut o = shared.order.lock().expect("order lock");
            if o.1 >= shared.end {
                drop(o);
                shared.pool.put_free(buffer);
                break;
            }
            let index = o.1;
            o.1 += 1;
            ids.clear();
            o.0.take(index, loader.opts.batch_size, &mut ids);
            index
        };
        // The batch's shape, known before it is read (buckets: its longest clip).
        let mut shape = vec![ids.len()];
        shape.extend(&loader.item_shape);
        if let Some(w) = loader.bucket_width(&ids) {
            *shape.last_mut().expect("a frame axis") = w;
        }
        let key = BatchKey {
            seed: loader.opts.seed,
            epoch: shared.epoch,
            rank: loader.opts.rank as u64,
            index: index as u64,
        };
        // Augmentation is applied item by item as the batch is filled (f32 output only).
        let aug = (!loader.opts.augment.is_off() && matches!(buffer, Buffer::F32(_)))
            .then(|| Augmenter::new(&loader.opts.augment, &key, &ids, layout_of(&shape)));
        let filled = caught(index, || match &loader.whole {
            #[cfg(test)]
            _ if loader.opts.seed == tests::PANICS_AT_BATCH_2 && index == 2 => {
                panic!("injected at batch 2\nsecond line")
            }
            Some(w) => fill_whole(
                loader,
                w,
                &mut reader,
                (shared.epoch, &ids),
                (&mut buffer, &mut scratch),
                aug.as_ref(),
            ),
            None => fill(
                loader,
                &mut reader,
                (shared.epoch, &ids),
                &mut buffer,
                aug.as_ref(),
            ),
        });
        // A batch is handed out only if the file was as it was mapped after every read of
        // it: a truncation within the map's last page, or an overwrite in place, faults
        // nothing (the values read would be zeros, or another file's).
        let filled = filled.and_then(|f| reader.check_file().map(|()| f));
        let mixed = aug.and_then(Augmenter::mixed);
        let result = filled.map(|f| {
            let Filled {
                labels,
                ids: item_ids,
                offsets,
                lengths,
            } = f;
            Batch {
                epoch: shared.epoch,
                index,
                shape,
                dtype: split.dtype(),
                values: Some(buffer),
                labels,
                ids: item_ids,
                offsets,
                lengths,
                mixed: mixed.map(Box::new),
                pool: Arc::clone(&shared.pool),
                handed_out: false,
            }
        });
        if result.is_err() {
            // The failed batch's buffer is gone; the loader owns one fewer.
            shared.pool.lost();
            shared.stop.store(true, Ordering::SeqCst);
        }
        let mut d = shared.done.lock().expect("loader lock");
        d.batches.insert(index, result);
        drop(d);
        shared.ready.notify_all();
    }
}

/// A worker leaving (its loop ended, or a panic unwinds it): one fewer is counted and the
/// consumer woken, so that it sees the batches that will not come as an error.
struct Leaving<'s>(&'s Shared);

impl Drop for Leaving<'_> {
    fn drop(&mut self) {
        // A lock poisoned by the panic still counts.
        let mut d = self.0.done.lock().unwrap_or_else(|e| e.into_inner());
        d.workers_left -= 1;
        drop(d);
        self.0.ready.notify_all();
    }
}

/// Runs `fill` for batch `index`, a panic in it (a bug: every input is checked before)
/// becoming the batch's one-line error instead of a worker gone and a consumer waiting.
fn caught<T>(index: usize, fill: impl FnOnce() -> Result<T>) -> Result<T> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(fill)).unwrap_or_else(|p| {
        let what = p
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| p.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "a panic".into());
        let what = what.lines().next().unwrap_or_default().to_string();
        Err(Error::Internal(format!(
            "batch {index}: the loader failed ({what}): a bug in melread, please report it"
        )))
    })
}

/// How a batch of `shape` (`[items, .., n_mels, frames]`) lays out each item.
fn layout_of(shape: &[usize]) -> Layout {
    let d = shape.len();
    Layout {
        planes: shape[1..d - 2].iter().product(),
        n_mels: shape[d - 2],
        width: shape[d - 1],
    }
}

/// The groups a batch's items are read in: mixup's (items mixed together), or one by one.
fn groups_of<'g>(
    n: usize,
    aug: Option<&'g Augmenter<'_>>,
    singles: &'g [usize],
) -> Vec<&'g [usize]> {
    match aug {
        Some(a) => a.groups().collect(),
        None => singles[..n].chunks(1).collect(),
    }
}

/// Reads the items `ids` of `epoch` into `buffer` (trimmed to their number of values),
/// each cropped to its window where the loader crops, and augmented by `aug`: each of
/// mixup's groups read, given its gain, mixed and masked before the next.
fn fill(
    loader: &Loader,
    reader: &mut crate::Reader<'_>,
    (epoch, ids): (u64, &[u64]),
    buffer: &mut Buffer,
    aug: Option<&Augmenter<'_>>,
) -> Result<Filled> {
    let n = loader.item_values;
    let split = reader.split();
    let labels_all = split.labels();
    let norm = loader.norm.as_deref();
    let frames = *loader.item_shape.last().expect("a frame axis");
    let mut f = Filled::new(ids.len(), frames);
    let total = ids.len() * n;
    buffer.hold(total);
    let singles: Vec<usize> = (0..ids.len()).collect();
    let mut maps: [Vec<RowMap>; 3] = Default::default();
    let mut masks = GroupMasks::default();
    // Masked items (f32 out of a map of f16) are read with the masks as zeros by the
    // mixing kernel; without mixup, two at a time (weight 1 each: each its own values).
    let spans = norm.is_none_or(|nm| nm.spans(n));
    let masks_read = match (aug, &*buffer) {
        (Some(a), Buffer::F32(_)) => a.masks() && reader.reads_groups() && spans,
        _ => false,
    };
    let groups = match aug {
        Some(a) if masks_read && !a.mixup() => singles.chunks(2).collect(),
        _ => groups_of(ids.len(), aug, &singles),
    };
    for group in groups {
        if let (Some(a), Buffer::F32(v)) = (aug, &mut *buffer)
            && (masks_read || spans && reads_mixed(reader, aug, group))
        {
            // Read, mapped, mixed (a member of weight 1: its own values) and time-masked
            // in one pass; frequency masks after.
            let how = (norm, a, &mut maps, &mut masks);
            fill_item_group(loader, reader, (epoch, ids, group), (v, &mut f), how)?;
            continue;
        }
        for &j in group {
            let item = loader.item_id(ids[j]);
            let segment = (loader.opts.unit == Unit::Segment).then_some(item.segment);
            let out = match buffer {
                Buffer::F32(v) => OutSlice::F32(&mut v[j * n..(j + 1) * n]),
                Buffer::Half(v) => OutSlice::Half(&mut v[j * n..(j + 1) * n]),
            };
            let at = loader.crop_offset(epoch, item);
            // The gain is added as the item is converted (f32 output only: augmentation
            // needs it).
            let how = (norm, aug.and_then(|a| a.gain(j)));
            match loader.opts.crop_frames {
                // Only the window is read and converted.
                Some(crop) => reader.read_window_into(item.clip, segment, (at, crop), out, how)?,
                None => reader.read_into(item.clip, segment, out, how)?,
            }
            f.set(j, labels_all[item.clip], item, at);
        }
        if let (Some(a), Buffer::F32(v)) = (aug, &mut *buffer) {
            a.mix_group(group, v, 0..frames);
            a.group_done(group, v, &mut f.lengths);
        }
    }
    Ok(f)
}

/// Each member's masks in a group read together (fixed-length items mixed, or masked and
/// read two at a time; whole clips mixed), drawn before it is read ([`Augmenter::time_keep`]): its time
/// masks' keep bits, its frequency masks' rows. Kept from group to group.
#[derive(Default)]
struct GroupMasks {
    keep: [Vec<u32>; 3],
    rows: [Vec<(usize, usize)>; 3],
}

/// [`fill`] for a group of items that mixup mixes (or masked items read together unmixed,
/// members of weight 1, or one alone), from a split that [`Reader::read_group_into`] reads: each member's window (its crop, or the whole item)
/// widened, normalised, given its gain, mixed and time-masked in one pass into its place
/// in `values` (a masked value stored as zero instead of zeroed in a pass after: ~150
/// spans an item, 6% of a masked epoch), then its frequency masks' rows zeroed; each
/// member noted in `f`. The masks are the ones [`Augmenter::group_done`] applies after.
#[allow(clippy::type_complexity)]
fn fill_item_group(
    loader: &Loader,
    reader: &mut crate::Reader<'_>,
    (epoch, ids, group): (u64, &[u64], &[usize]),
    (values, f): (&mut [f32], &mut Filled),
    (norm, a, maps, masks): (
        Option<&Affine>,
        &Augmenter<'_>,
        &mut [Vec<RowMap>; 3],
        &mut GroupMasks,
    ),
) -> Result<()> {
    let n = loader.item_values;
    let width = *loader.item_shape.last().expect("a frame axis");
    let rows = n / width.max(1);
    let segmented = loader.opts.unit == Unit::Segment;
    let labels = reader.split().labels();
    // Every fixed-length item is `width` frames long, mixed or not: the masks can be
    // drawn before the group is read, on the lengths `group_done` would draw them on.
    a.mixed_lengths(group, &mut f.lengths);
    for (k, &j) in group.iter().enumerate() {
        let gain = a.gain(j);
        maps[k].clear();
        match norm {
            // One map for every row (built row by row, the maps were 6% of a masked epoch).
            None => maps[k].resize(rows, convert::row_map(None, gain, 0)),
            Some(_) => maps[k].extend((0..rows).map(|r| convert::row_map(norm, gain, r))),
        }
        let item = loader.item_id(ids[j]);
        f.set(j, labels[item.clip], item, loader.crop_offset(epoch, item));
        if a.masks() {
            let (keep, rows) = (&mut masks.keep[k], &mut masks.rows[k]);
            a.time_keep(j, (f.lengths[j], width), keep, rows);
        }
    }
    let member = |k: usize| {
        let j = group[k];
        GroupMember {
            clip: f.ids[j].clip,
            segment: segmented.then_some(f.ids[j].segment),
            at: f.offsets[j],
            maps: &maps[k],
            weight: a.weight(j),
            keep: match a.masks() {
                true => &masks.keep[k],
                false => &[],
            },
        }
    };
    let span = |k: usize| group[k] * n..(group[k] + 1) * n;
    match group.len() {
        1 => reader.read_group_into([member(0)], width, [&mut values[span(0)]])?,
        2 => {
            let out = values.get_disjoint_mut([span(0), span(1)]);
            let out = out.expect("a batch's items are apart");
            reader.read_group_into([member(0), member(1)], width, out)?;
        }
        3 => {
            let out = values.get_disjoint_mut([span(0), span(1), span(2)]);
            let out = out.expect("a batch's items are apart");
            reader.read_group_into([member(0), member(1), member(2)], width, out)?;
        }
        _ => unreachable!("an item alone, or mixup's pairs and one three-cycle"),
    }
    if a.masks() {
        for (k, &j) in group.iter().enumerate() {
            a.zero_freq(&masks.rows[k], f.lengths[j], &mut values[span(k)]);
        }
    }
    Ok(())
}

/// What filling a batch gave: each item's label, id, first frame and real frames.
struct Filled {
    labels: Vec<i64>,
    ids: Vec<ItemId>,
    offsets: Vec<usize>,
    lengths: Vec<usize>,
}

impl Filled {
    /// Room for `n` items of `frames` real frames each (until told otherwise).
    fn new(n: usize, frames: usize) -> Filled {
        Filled {
            labels: vec![0; n],
            ids: vec![
                ItemId {
                    clip: 0,
                    segment: 0
                };
                n
            ],
            offsets: vec![0; n],
            lengths: vec![frames; n],
        }
    }

    /// Item `j` is `item`, of class `label`, from frame `at`.
    fn set(&mut self, j: usize, label: i64, item: ItemId, at: usize) {
        self.labels[j] = label;
        self.ids[j] = item;
        self.offsets[j] = at;
    }
}

/// [`fill`] for whole clips: each item a crop (padded when the clip is shorter), or for
/// buckets the whole clip padded to the batch's longest; `scratch`, the worker's, for
/// [`fill_streamed`].
fn fill_whole(
    loader: &Loader,
    whole: &WholeItems,
    reader: &mut crate::Reader<'_>,
    (epoch, ids): (u64, &[u64]),
    (buffer, scratch): (&mut Buffer, &mut Vec<f32>),
    aug: Option<&Augmenter<'_>>,
) -> Result<Filled> {
    let split = reader.split();
    let index = split.whole_index()?;
    let n_mels = split.n_mels();
    let width = loader
        .bucket_width(ids)
        .unwrap_or(loader.opts.crop_frames.unwrap_or(0));
    let per = n_mels * width;
    let norm = match (&loader.opts.normalize, whole.max_frames) {
        (Some(s), Some(_)) => Some(Affine::from_stats(s, width)),
        _ => loader.norm.as_deref().cloned(),
    };
    let labels_all = split.labels();
    let mut f = Filled::new(ids.len(), 0);
    let total = ids.len() * per;
    let mut part = Vec::new();
    buffer.hold(total);
    for (j, &id) in ids.iter().enumerate() {
        let item = loader.item_id(id);
        let at = loader.crop_offset(epoch, item);
        f.set(j, labels_all[index.first_rows()[item.clip]], item, at);
        f.lengths[j] = whole.frames[item.clip].min(width);
    }
    let v = match buffer {
        Buffer::F32(v) => &mut v[..total],
        Buffer::Half(_) => {
            // As stored (no normalisation or augmentation with f16/bf16 output).
            for j in 0..ids.len() {
                let real = f.lengths[j];
                part.resize(n_mels * real, 0.0f32);
                reader.read_whole_window(f.ids[j].clip, (f.offsets[j], real), &mut part, None)?;
                write_padded(buffer, j * per, &part, (real, width), split.dtype());
            }
            return Ok(f);
        }
    };
    // Straight into the batch (rows of `width`), normalised and given its gain as it is
    // widened, the padding after each row zero; a batch too large for the caches through
    // a scratch item instead ([`fill_streamed`]). A group that mixup mixes is read four
    // blocks of frames at a time, so mixing finds those frames of every member in cache
    // (measured: 23% against 35% a block at a time, 25% an item at a time; journal,
    // 2026-11-29); anything else an item at once. A mixed group of f16 clips in a map is
    // read and mixed in one pass instead ([`Reader::read_whole_group`]), its items whole.
    let singles: Vec<usize> = (0..ids.len()).collect();
    let groups = groups_of(ids.len(), aug, &singles);
    let how = (norm.as_ref(), aug);
    if streams(v.len(), per) {
        return fill_streamed(reader, (&mut f, v, scratch), &groups, per, how).map(|()| f);
    }
    let (mut maps, mut masks) = Default::default();
    for group in groups {
        let mixed_apart = aug.is_some_and(|a| a.mixes(group)) && !reads_mixed(reader, aug, group);
        let step = match mixed_apart {
            true => 4 * index.block_frames(),
            false => width,
        }
        .max(1);
        let starts: Vec<usize> = group.iter().map(|&j| j * per).collect();
        for c0 in (0..width).step_by(step) {
            let cols = (c0, (c0 + step).min(width), width);
            let scratch = (&mut maps, &mut masks);
            fill_group_step(reader, &f, (group, &starts), v, cols, how, scratch)?;
        }
        if let Some(a) = aug {
            let rows = time_masks_as_read(reader, a, group).then_some(&masks.rows);
            a.group_done_at(group, &starts, rows, v, &mut f.lengths);
        }
    }
    Ok(f)
}

/// Whether `group`'s time masks are applied as it is read ([`fill_mixed`], with its
/// frequency masks' rows drawn for after): a group [`reads_mixed`], masked.
fn time_masks_as_read(reader: &crate::Reader<'_>, a: &Augmenter<'_>, group: &[usize]) -> bool {
    a.masks() && reads_mixed(reader, Some(a), group)
}

/// Whether `group` is a pair or a three-cycle that mixup mixes and `reader` reads in one
/// pass ([`Reader::read_whole_group`]).
fn reads_mixed(reader: &crate::Reader<'_>, aug: Option<&Augmenter<'_>>, group: &[usize]) -> bool {
    matches!(group.len(), 2 | 3) && aug.is_some_and(|a| a.mixes(group)) && reader.reads_groups()
}

/// Fills frames `c0..c1` of each member of `group` (member `k`'s rows of `width` from
/// `starts[k]` in `values`): read, normalised and given its gain as it is widened (by
/// `maps`, set per member), the padding zeroed, then mixed; a group [`reads_mixed`] takes
/// all in one pass, its time masks too (drawn into `masks`: [`time_masks_as_read`]).
#[allow(clippy::type_complexity)]
fn fill_group_step(
    reader: &mut crate::Reader<'_>,
    f: &Filled,
    (group, starts): (&[usize], &[usize]),
    values: &mut [f32],
    (c0, c1, width): (usize, usize, usize),
    (norm, aug): (Option<&Affine>, Option<&Augmenter<'_>>),
    (maps, masks): (&mut [Vec<RowMap>; 3], &mut GroupMasks),
) -> Result<()> {
    let split = reader.split();
    let n_mels = split.n_mels();
    let per = n_mels * width;
    if let (Some(a), true) = (aug, reads_mixed(reader, aug, group)) {
        let how = (values, (c0, c1, width), (norm, a), (maps, masks));
        match (group, starts) {
            (&[j0, j1], &[s0, s1, ..]) => fill_mixed(reader, f, ([j0, j1], [s0, s1]), how)?,
            (&[j0, j1, j2], &[s0, s1, s2, ..]) => {
                fill_mixed(reader, f, ([j0, j1, j2], [s0, s1, s2]), how)?
            }
            _ => unreachable!("mixup's groups are pairs and one three-cycle"),
        };
        return Ok(());
    }
    let maps = &mut maps[0];
    for (&j, &start) in group.iter().zip(starts) {
        let (clip, real) = (f.ids[j].clip, f.lengths[j]);
        let filled = real.clamp(c0, c1) - c0;
        let dst = &mut values[start + c0..start + per];
        if filled > 0 {
            row_maps(maps, n_mels, norm, aug.and_then(|a| a.gain(j)));
            let at = (f.offsets[j] + c0, filled);
            if !reader.read_whole_rows(clip, at, dst, width, maps)? {
                return Err(not_finite_normalised(clip, split));
            }
        }
        zero_padding(dst, (width, filled, c1 - c0));
    }
    if let Some(a) = aug {
        a.mix_group_at(group, values, starts, c0..c1);
    }
    Ok(())
}

/// [`fill_group_step`] for a group [`reads_mixed`]: items `group` (at `starts` in
/// `values`) read, mapped, mixed and time-masked in one pass, each member's masks drawn
/// first (on its length once mixed, as [`Augmenter::group_done`] draws them) into `masks`.
#[allow(clippy::type_complexity)]
fn fill_mixed<const N: usize>(
    reader: &mut crate::Reader<'_>,
    f: &Filled,
    (group, starts): ([usize; N], [usize; N]),
    (values, (c0, c1, width), (norm, a), (maps, masks)): (
        &mut [f32],
        (usize, usize, usize),
        (Option<&Affine>, &Augmenter<'_>),
        (&mut [Vec<RowMap>; 3], &mut GroupMasks),
    ),
) -> Result<()> {
    let split = reader.split();
    let n_mels = split.n_mels();
    let per = n_mels * width;
    for (k, &j) in group.iter().enumerate() {
        row_maps(&mut maps[k], n_mels, norm, a.gain(j));
        if a.masks() {
            let (keep, rows) = (&mut masks.keep[k], &mut masks.rows[k]);
            a.time_keep(j, (a.mixed_length(j, &f.lengths), width), keep, rows);
        }
    }
    let items: [GroupItem<'_>; N] = std::array::from_fn(|k| GroupItem {
        clip: f.ids[group[k]].clip,
        at: f.offsets[group[k]],
        real: f.lengths[group[k]],
        maps: &maps[k],
        weight: a.weight(group[k]),
        keep: match a.masks() {
            true => &masks.keep[k],
            false => &[],
        },
    });
    let out = values
        .get_disjoint_mut(starts.map(|s| s + c0..s + per))
        .expect("a batch's items are apart");
    match reader.read_whole_group(items, out, (c0, c1, width))? {
        Some(k) => Err(not_finite_normalised(items[k].clip, split)),
        None => Ok(()),
    }
}

/// Batches from this size (in bytes) up are written past the caches ([`fill_streamed`]):
/// 4 MiB, twice a core's L2 here, so that a batch and the ones in flight after it could
/// not wait in the caches for their reader anyway.
const STREAM_BATCH_BYTES: usize = 4 << 20;

/// Items up to this size (in bytes) are finished in a scratch item before they are
/// streamed into the batch: a group of mixup's (three items at most) then stays in a
/// core's L2 here (2 MiB), and the scratch is at most 768 KiB a worker.
const STREAM_ITEM_BYTES: usize = 256 << 10;

/// Whether a batch of `values` f32 values, `per` an item, is filled by [`fill_streamed`].
fn streams(values: usize, per: usize) -> bool {
    let (batch, item) = (values * 4, per * 4);
    batch >= STREAM_BATCH_BYTES && item <= STREAM_ITEM_BYTES
}

/// [`fill_whole`] for a batch too large for the caches, `per` values an item: each of
/// mixup's groups (or each item) read, finished (padding, normalisation, gain), mixed
/// and masked in scratch items that stay in cache, then copied into the batch with
/// streaming stores, so that each of the batch's lines is written to memory once and
/// never read for ownership (journal, 2026-11-29).
fn fill_streamed(
    reader: &mut crate::Reader<'_>,
    (f, batch, scratch): (&mut Filled, &mut [f32], &mut Vec<f32>),
    groups: &[&[usize]],
    per: usize,
    (norm, aug): (Option<&Affine>, Option<&Augmenter<'_>>),
) -> Result<()> {
    let width = per / reader.split().n_mels().max(1);
    let most = groups.iter().map(|g| g.len()).max().unwrap_or(0);
    // Every value of a scratch item is written (its padding zeroed) before it is read.
    if scratch.len() < most * per {
        scratch.resize(most * per, 0.0);
    }
    let items = &mut scratch[..most * per];
    let starts: Vec<usize> = (0..most).map(|k| k * per).collect();
    let (mut maps, mut masks) = Default::default();
    // Whatever way this returns (an error, a panic), the streaming stores are ordered
    // before the batch's memory is used again.
    let _fence = Fence;
    for group in groups {
        let at = (*group, &starts[..group.len()]);
        let cols = (0, width, width);
        let scratch = (&mut maps, &mut masks);
        fill_group_step(reader, f, at, items, cols, (norm, aug), scratch)?;
        if let Some(a) = aug {
            let rows = time_masks_as_read(reader, a, group).then_some(&masks.rows);
            a.group_done_at(group, at.1, rows, items, &mut f.lengths);
        }
        for (&j, item) in group.iter().zip(items.chunks_exact_mut(per)) {
            widen::stream_copy(item, &mut batch[j * per..(j + 1) * per]);
        }
    }
    Ok(())
}

/// Calls [`widen::fence`] when dropped: the end of a fill that streamed, however it ends.
struct Fence;

impl Drop for Fence {
    fn drop(&mut self) {
        widen::fence();
    }
}

/// Sets `maps` to each of `n_mels` bins' map from stored values to the batch's:
/// normalised by `norm`, then `gain` dB added (scaled by it: [`crate::convert::gain_in_bin`]);
/// empty when every bin is kept as stored.
fn row_maps(maps: &mut Vec<RowMap>, n_mels: usize, norm: Option<&Affine>, gain: Option<f32>) {
    maps.clear();
    if norm.is_none() && gain.is_none() {
        return;
    }
    maps.extend((0..n_mels).map(|b| {
        let add = gain.map(|g| crate::convert::gain_in_bin(g, norm, b));
        match norm {
            Some(n) => {
                let (shift, scale) = n.shift_scale(b);
                RowMap::Normalise {
                    shift,
                    scale,
                    add: add.unwrap_or(0.0),
                }
            }
            None => RowMap::Add(add.unwrap_or(0.0)),
        }
    }));
}

/// Zeros the padding of the rows just read into `dst` (each mel bin's row `width` apart,
/// `filled` of its `len` frames real).
fn zero_padding(dst: &mut [f32], (width, filled, len): (usize, usize, usize)) {
    if filled < len {
        for row in dst.chunks_mut(width) {
            let end = len.min(row.len());
            row[filled.min(end)..end].fill(0.0);
        }
    }
}

/// The error for whole clip `clip` of `split` whose normalised values are not finite.
fn not_finite_normalised(clip: usize, split: &Split) -> Error {
    Error::config(
        "normalize",
        format!(
            "clip {clip} of {}: normalising it by the statistics given (with its gain, and mixed, if augmented) gives a value that is not finite in float32 (a standard deviation too small for its values?)",
            split.path().display()
        ),
    )
}

/// Writes `part` (`n_mels × real` f32 values) into `buffer` from `start` as `n_mels`
/// rows of `width`, zeros after each row's `real` values; f16/bf16 buffers get the
/// stored values back (widened exactly, so narrowed exactly).
fn write_padded(
    buffer: &mut Buffer,
    start: usize,
    part: &[f32],
    (real, width): (usize, usize),
    dtype: Dtype,
) {
    let rows = part.len().checked_div(real).unwrap_or(0);
    for b in 0..rows {
        let src = &part[b * real..(b + 1) * real];
        let at = start + b * width;
        match buffer {
            Buffer::F32(v) => {
                v[at..at + real].copy_from_slice(src);
                v[at + real..at + width].fill(0.0);
            }
            Buffer::Half(v) => {
                for (d, &x) in v[at..at + real].iter_mut().zip(src) {
                    *d = match dtype {
                        Dtype::Bf16 => bf16::from_f32(x).to_bits(),
                        _ => f16::from_f32(x).to_bits(),
                    };
                }
                v[at + real..at + width].fill(0);
            }
        }
    }
}

/// The integration tests' datasets, for the tests here.
#[cfg(test)]
#[path = "../tests/common/mod.rs"]
mod test_data;

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::time::Duration;

    use super::test_data::build_leak;
    use super::*;
    use crate::Split;
    use crate::augment::Mixup;

    /// Fixed-length items masked as they are mixed or read (a group's time masks stored as
    /// zeros by the mixing kernel, an item alone as a group of one; its frequency masks'
    /// rows zeroed after) are the items without masks, then masked by
    /// `Augmenter::mask_item`: the same draws and zeros, bit for bit. Mixup on every item,
    /// on some (pairs left unmixed read alone) or off. leak-4k segments of 5 frames (all in a run's tail), their crops and whole
    /// clips of segments; speech items of 101 frames (twelve vectors and a tail a row) and
    /// their crops; normalised or not; a gain or not; batches of 9 (pairs and a
    /// three-cycle).
    #[test]
    fn fixed_items_masked_as_they_are_mixed_are_the_mixed_items_masked_after() {
        let t = tempfile::tempdir().unwrap();
        let contiguous = test_data::Out::Hdf5 {
            chunk_clips: 0,
            gzip: 0,
        };
        let (leak, speech) = (t.path().join("leak"), t.path().join("speech"));
        let leak = build_leak(&leak, Dtype::F16, &[("training", 4)]);
        let speech = test_data::build(
            &speech,
            melkit::Preset::Speech16k,
            Dtype::F16,
            contiguous,
            &[("training", 30)],
        );
        let cases = [
            (&leak, 3, Unit::Segment, None),
            (&leak, 3, Unit::Segment, Some(3)),
            (&leak, 3, Unit::Clip, None),
            (&speech, 20, Unit::Segment, None),
            (&speech, 20, Unit::Segment, Some(50)),
        ];
        let (mut time_zeros, mut items) = (0, 0);
        for (out, time_mask_frames, unit, crop) in cases {
            let split = Arc::new(Split::open_in(out, "training").unwrap());
            let stats = split.stats(1).unwrap();
            let masks = Augment {
                time_masks: 2,
                time_mask_frames,
                freq_masks: 2,
                freq_mask_bins: 6,
                ..Augment::default()
            };
            let mixups = [1.0, 0.3].map(|prob| Some(Mixup { alpha: 0.5, prob }));
            for (normalize, mix) in [None, Some(stats)].iter().flat_map(|n| {
                [None]
                    .into_iter()
                    .chain(mixups)
                    .map(move |m| (n.clone(), m))
            }) {
                for gain_db in [0.0, 5.0] {
                    let mixup = Augment {
                        mixup: mix,
                        gain_db,
                        ..Augment::default()
                    };
                    let both = Augment {
                        mixup: mixup.mixup,
                        gain_db,
                        ..masks.clone()
                    };
                    let opts = |augment: Augment| LoaderOptions {
                        batch_size: 9,
                        seed: 7,
                        unit,
                        crop_frames: crop,
                        normalize: normalize.clone(),
                        augment,
                        ..LoaderOptions::default()
                    };
                    let plain = Loader::new(split.clone(), opts(mixup)).unwrap();
                    let masked = Loader::new(split.clone(), opts(both)).unwrap();
                    let per_clip = plain.items.per_clip;
                    for (x, y) in plain.epoch(0).zip(masked.epoch(0)) {
                        let (x, y) = (x.unwrap(), y.unwrap());
                        let ids: Vec<u64> = (x.ids().iter())
                            .map(|i| i.clip as u64 * per_clip + i.segment as u64)
                            .collect();
                        let key = BatchKey {
                            seed: 7,
                            epoch: 0,
                            rank: 0,
                            index: x.index() as u64,
                        };
                        let after = Augmenter::new(&masks, &key, &ids, layout_of(x.shape()));
                        let mut want = x.to_f32().into_raw_vec_and_offset().0;
                        let per = want.len() / ids.len();
                        for (i, item) in want.chunks_exact_mut(per).enumerate() {
                            after.mask_item(i, x.lengths()[i], item);
                        }
                        let got = y.to_f32().into_raw_vec_and_offset().0;
                        let bits = |v: &[f32]| v.iter().map(|f| f.to_bits()).collect::<Vec<_>>();
                        let what = format!("{out:?} {unit:?} crop {crop:?} gain {gain_db}");
                        assert_eq!(bits(&got), bits(&want), "{what} batch {}", x.index());
                        if mix.is_some_and(|m| m.prob == 1.0) {
                            assert!(y.mixed().is_some_and(|m| m.weight.iter().any(|&w| w < 1.0)));
                        }
                        let width = *x.shape().last().unwrap();
                        // Frames zeroed in every row of an item: its time masks' work.
                        for item in got.chunks_exact(per) {
                            time_zeros += (0..width)
                                .filter(|&c| item.iter().skip(c).step_by(width).all(|&v| v == 0.0))
                                .count();
                        }
                        items += ids.len();
                    }
                }
            }
        }
        assert!(items > 100 && time_zeros > items, "{time_zeros} in {items}");
    }

    /// The seed whose loaders panic in batch 2 (injected above, in tests only).
    pub(super) const PANICS_AT_BATCH_2: u64 = 0x5EED_0B0E;

    #[test]
    fn a_panic_in_a_worker_is_the_batch_error_not_a_wait_forever() {
        let t = tempfile::tempdir().unwrap();
        let out = build_leak(t.path(), Dtype::F16, &[("training", 4)]);
        let split = Arc::new(Split::open_in(out, "training").unwrap());
        for workers in [1, 3] {
            let opts = LoaderOptions {
                batch_size: 16,
                seed: PANICS_AT_BATCH_2,
                workers,
                ..LoaderOptions::default()
            };
            let mut epoch = Loader::new(split.clone(), opts).unwrap().epoch(0);
            assert!(epoch.size_hint().0 > 3);
            let mut seen = Vec::new();
            loop {
                match epoch.next_within(Duration::from_secs(60)) {
                    Waited::Ready(Some(b)) => seen.push(b.map(|b| b.index())),
                    Waited::Ready(None) => break,
                    Waited::Pending => panic!("{workers} workers: the epoch hangs after {seen:?}"),
                }
            }
            let e = seen.pop().unwrap().unwrap_err().to_string();
            assert!(
                e.contains("batch 2: the loader failed (injected at batch 2)") && !e.contains('\n'),
                "{e}"
            );
            assert_eq!(
                seen.into_iter().map(Result::unwrap).collect::<Vec<_>>(),
                [0, 1]
            );
        }
    }
}

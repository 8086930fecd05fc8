//! Augmentation in the loader's threads: SpecAugment's time and frequency masks, mixup and
//! a random gain, applied to each f32 batch after it is read (and normalised).
//!
//! Every draw is a function of the loader's seed, the epoch and the item (its clip and
//! segment), and mixup's pairing of the batch's number: never of the worker that fills the
//! batch or of the batches before it. So an epoch's augmented batches are the same for 1
//! or 16 threads, and a run resumed mid-epoch from `(epoch, batch)` gets bit-identical
//! batches. The generator is ChaCha8 (`rand_chacha`, value-stable across platforms) and
//! mixup's weight a Beta draw (`rand_distr`).
//!
//! Order, per batch: gain, then mixup, then masks, each on an item's real frames only
//! (padding after a short whole clip stays zero, unless mixup joins it with a longer
//! partner: its padding then holds `(1 − w)` of the partner, and its length is the longer
//! one's).

use mel_core::{Error, Result};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use rand_distr::{Beta, Distribution};

use crate::convert::Affine;
use crate::order::mix64;

/// Augmentation of training batches; every part is off by default.
#[derive(Debug, Clone, PartialEq)]
pub struct Augment {
    /// Time masks per item (SpecAugment's `m_T`).
    pub time_masks: usize,
    /// The widest time mask, in frames (SpecAugment's `T`): each mask's width is drawn
    /// uniformly from `0..=T` (at most the item's real frames), its start uniformly where
    /// it fits.
    pub time_mask_frames: usize,
    /// The widest time mask as a share of the item's real frames (SpecAugment's `p`, in
    /// `(0, 1]`; 1: no bound but the frames): short clips of a set of many lengths keep
    /// most of their frames.
    pub time_mask_share: f32,
    /// Frequency masks per item (SpecAugment's `m_F`).
    pub freq_masks: usize,
    /// The widest frequency mask, in mel bins (SpecAugment's `F`), drawn as time masks are.
    pub freq_mask_bins: usize,
    /// A random gain, uniform in `[-gain_db, +gain_db]` dB, added to each item's log-mel
    /// values (after normalisation: the same gain divided by each bin's std).
    pub gain_db: f32,
    /// Mixup, or `None`.
    pub mixup: Option<Mixup>,
}

impl Default for Augment {
    fn default() -> Self {
        Augment {
            time_masks: 0,
            time_mask_frames: 0,
            time_mask_share: 1.0,
            freq_masks: 0,
            freq_mask_bins: 0,
            gain_db: 0.0,
            mixup: None,
        }
    }
}

/// Mixup (Zhang et al., 2018): an item becomes `w·x_i + (1 − w)·x_j` with another item `j`
/// of its batch (the pairing one random cycle through the batch: never itself, for a batch
/// of two or more), its label the same mixture ([`Mixed`]).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Mixup {
    /// The Beta(α, α) distribution's α that weights are drawn from (0.2 to 1 are usual).
    pub alpha: f64,
    /// The share of items mixed, in `[0, 1]`; the others keep weight 1.
    pub prob: f64,
}

/// The smallest mixup α: below it Beta(α, α) draws 0 or 1 (no mixing) in float32.
pub const MIN_ALPHA: f64 = 1e-3;

/// The largest mixup α: above it Beta(α, α) is 0.5 to float32's precision (and its
/// sampler may not stay finite).
pub const MAX_ALPHA: f64 = 1e3;

/// The most masks of each kind per item: a guard against a typo, far above use.
pub const MAX_MASKS: usize = 64;

/// The largest `gain_db`: 96 dB is the whole range of 16-bit audio.
pub const MAX_GAIN_DB: f32 = 96.0;

/// What mixup did to a batch: item `i` is `weight[i]·x_i + (1 − weight[i])·x_partner[i]`
/// (as the batch holds them), and so is its label.
#[derive(Debug, Clone, PartialEq)]
pub struct Mixed {
    /// Each item's partner: its position in the batch (with weight 1 it is not mixed).
    pub partner: Vec<usize>,
    /// Each item's own weight, in `[0, 1]` (1 when not mixed).
    pub weight: Vec<f32>,
}

impl Mixed {
    /// Soft labels `[items × classes]`, row-major: `weight` on the item's class, the rest
    /// on its partner's (what `torch.nn.functional.cross_entropy` takes as a target).
    pub fn soft_labels(&self, labels: &[i64], classes: usize) -> Vec<f32> {
        let mut out = vec![0.0f32; labels.len() * classes];
        for (i, row) in out.chunks_exact_mut(classes.max(1)).enumerate() {
            let (a, b) = (labels[i], labels[self.partner[i]]);
            let w = self.weight[i];
            if let Ok(a) = usize::try_from(a)
                && a < classes
            {
                row[a] += w;
            }
            if let Ok(b) = usize::try_from(b)
                && b < classes
            {
                row[b] += 1.0 - w;
            }
        }
        out
    }
}

/// Keep each kind of draw apart from the others and from the shuffle and crops: an item's
/// gain, mixup and masks come from three generators of its own.
const GAIN_STREAM: u64 = 0x6175_676d_2d67_6169;
const MIX_STREAM: u64 = 0x6175_676d_2d6d_6978;
const MASK_STREAM: u64 = 0x6175_676d_2d6d_6173;
const PAIR_STREAM: u64 = 0x6175_676d_2d70_6169;

impl Augment {
    /// Whether every part is off.
    pub fn is_off(&self) -> bool {
        *self == Augment::default()
    }

    /// Checks the settings against items of `n_mels` bins and at most `frames` frames (the
    /// longest clip, or the crop): one-line errors naming the field.
    pub fn check(&self, n_mels: usize, frames: usize) -> Result<()> {
        let field = |f: &str| format!("augment.{f}");
        for (count, name) in [
            (self.time_masks, "time_masks"),
            (self.freq_masks, "freq_masks"),
        ] {
            if count > MAX_MASKS {
                return Err(Error::config(
                    field(name),
                    format!("{count} masks per item; at most {MAX_MASKS}"),
                ));
            }
        }
        if self.time_masks > 0 && self.time_mask_frames > frames {
            return Err(Error::config(
                field("time_mask_frames"),
                format!(
                    "a mask of up to {} frames is wider than the items ({frames} frames)",
                    self.time_mask_frames
                ),
            ));
        }
        if !(self.time_mask_share > 0.0 && self.time_mask_share <= 1.0) {
            return Err(Error::config(
                field("time_mask_share"),
                format!(
                    "{}: the widest time mask as a share of an item's frames is above 0, at most 1",
                    self.time_mask_share
                ),
            ));
        }
        if self.freq_masks > 0 && self.freq_mask_bins > n_mels {
            return Err(Error::config(
                field("freq_mask_bins"),
                format!(
                    "a mask of up to {} mel bins is wider than the items ({n_mels} mel bins)",
                    self.freq_mask_bins
                ),
            ));
        }
        if !(0.0..=MAX_GAIN_DB).contains(&self.gain_db) {
            return Err(Error::config(
                field("gain_db"),
                format!(
                    "{}: a gain range is 0 to {MAX_GAIN_DB} dB (drawn in ±gain_db)",
                    self.gain_db
                ),
            ));
        }
        if let Some(m) = self.mixup {
            if !(MIN_ALPHA..=MAX_ALPHA).contains(&m.alpha) {
                return Err(Error::config(
                    field("mixup_alpha"),
                    format!("{}: Beta(α, α)'s α is {MIN_ALPHA} to {MAX_ALPHA}", m.alpha),
                ));
            }
            if !(0.0..=1.0).contains(&m.prob) {
                return Err(Error::config(
                    field("mixup_prob"),
                    format!("{}: the share of items mixed is 0 to 1", m.prob),
                ));
            }
        }
        Ok(())
    }
}

/// Where an item's values lie in a batch: `planes` spectrograms of `n_mels` rows of
/// `width` frames (planes: the leading axes of a clip of several segments or channels).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Layout {
    pub planes: usize,
    pub n_mels: usize,
    pub width: usize,
}

impl Layout {
    fn per_item(&self) -> usize {
        self.planes * self.n_mels * self.width
    }
}

/// The draws of one batch: who it is, where.
pub(crate) struct BatchKey {
    pub seed: u64,
    pub epoch: u64,
    pub rank: u64,
    pub index: u64,
}

/// The generator of `stream` for `id` (an item, or a batch's number): the id is mixed
/// before the stream is, so no two (id, stream) pairs share a generator.
fn rng(seed: u64, epoch: u64, id: u64, stream: u64) -> ChaCha8Rng {
    ChaCha8Rng::seed_from_u64(mix64(seed ^ mix64(epoch ^ mix64(mix64(id) ^ stream))))
}

/// Augments one batch as it is filled, item by item while each is still in cache: the
/// filler reads items in [`order`](Self::order) and calls
/// [`item_filled`](Self::item_filled) after each. The order walks mixup's pairing one
/// cycle at a time (item `i` is mixed with `partner[i]`, which is filled right after it),
/// so an item is mixed with its partner's original as soon as that is read, and only a
/// cycle's first item is copied aside (its original is needed at the cycle's end). The
/// result is [`apply`]'s: gain, then mixup, then masks.
pub(crate) struct Augmenter<'a> {
    aug: &'a Augment,
    layout: Layout,
    norm: Option<&'a Affine>,
    ids: &'a [u64],
    key: (u64, u64),
    /// Mixup's pairing and weights (the identity and 1 without mixup).
    partner: Vec<usize>,
    weight: Vec<f32>,
    /// Positions in fill order: the pairing's cycles one after another.
    order: Vec<usize>,
    /// Whose partner each item is (the cycle's previous item).
    previous: Vec<usize>,
    /// The first item (in fill order) of each item's cycle.
    cycle_first: Vec<usize>,
    /// Each item's real frames before mixing.
    filled_lengths: Vec<usize>,
    /// The original of the current cycle's first item.
    first_original: &'a mut Vec<f32>,
}

impl<'a> Augmenter<'a> {
    /// The batch `ids` (item ids, in batch order) of the batch `key`, laid out as `layout`;
    /// `norm` the normalisation the filler applies; `scratch` the worker's reused copy.
    pub(crate) fn new(
        aug: &'a Augment,
        key: &BatchKey,
        ids: &'a [u64],
        layout: Layout,
        norm: Option<&'a Affine>,
        scratch: &'a mut Vec<f32>,
    ) -> Self {
        let n = ids.len();
        let (partner, weight) = match aug.mixup {
            Some(m) => pairing(m, key, ids),
            None => ((0..n).collect(), vec![1.0; n]),
        };
        let mut previous = vec![0; n];
        for (i, &p) in partner.iter().enumerate() {
            previous[p] = i;
        }
        let mut order = Vec::with_capacity(n);
        let mut cycle_first = vec![usize::MAX; n];
        for first in 0..n {
            let mut i = first;
            while cycle_first[i] == usize::MAX {
                cycle_first[i] = first;
                order.push(i);
                i = partner[i];
            }
        }
        Augmenter {
            aug,
            layout,
            norm,
            ids,
            key: (key.seed, key.epoch),
            partner,
            weight,
            order,
            previous,
            cycle_first,
            filled_lengths: vec![0; n],
            first_original: scratch,
        }
    }

    /// The order the filler reads items in (positions in the batch).
    pub(crate) fn order(&self) -> &[usize] {
        &self.order
    }

    fn item_rng(&self, j: usize, stream: u64) -> ChaCha8Rng {
        rng(self.key.0, self.key.1, self.ids[j], stream)
    }

    /// Item `j` of the batch `values` has just been filled with `lengths[j]` real frames:
    /// its gain is added; the item whose partner it is gets mixed (and masked); and where
    /// `j` closes its cycle, `j` itself.
    pub(crate) fn item_filled(&mut self, j: usize, values: &mut [f32], lengths: &mut [usize]) {
        let per = self.layout.per_item();
        self.filled_lengths[j] = lengths[j];
        if self.aug.gain_db > 0.0 {
            let g = self
                .item_rng(j, GAIN_STREAM)
                .random_range(-self.aug.gain_db..=self.aug.gain_db);
            add_gain(
                &mut values[j * per..(j + 1) * per],
                self.layout,
                lengths[j],
                g,
                self.norm,
            );
        }
        let first = self.cycle_first[j];
        if j == first {
            let last = self.previous[j];
            if last == j {
                // Mixed with itself: nothing to wait for.
                self.finish_item(j, values, lengths, false);
            } else if self.weight[last] < 1.0 {
                self.first_original.clear();
                self.first_original
                    .extend_from_slice(&values[j * per..(j + 1) * per]);
            }
        } else {
            // The cycle's previous item has its partner's original now.
            self.finish_item(self.previous[j], values, lengths, false);
            if self.partner[j] == first {
                // The cycle's last item: its partner, the first, is already mixed.
                self.finish_item(j, values, lengths, true);
            }
        }
    }

    /// Mixes item `i` with its partner's original (in place, or the copy aside), then
    /// masks it: the item is done.
    fn finish_item(&mut self, i: usize, values: &mut [f32], lengths: &mut [usize], aside: bool) {
        let per = self.layout.per_item();
        let (p, w) = (self.partner[i], self.weight[i]);
        if p != i && w < 1.0 {
            let (item, other) = if aside {
                (
                    &mut values[i * per..(i + 1) * per],
                    &self.first_original[..],
                )
            } else {
                pair(values, per, i, p)
            };
            for (v, &o) in item.iter_mut().zip(other) {
                *v = w * *v + (1.0 - w) * o;
            }
            lengths[i] = self.filled_lengths[i].max(self.filled_lengths[p]);
        }
        if self.aug.time_masks > 0 || self.aug.freq_masks > 0 {
            let mut r = self.item_rng(i, MASK_STREAM);
            mask(
                self.aug,
                &mut r,
                self.layout,
                lengths[i],
                &mut values[i * per..(i + 1) * per],
            );
        }
    }

    /// What mixup did (`None` without mixup).
    pub(crate) fn mixed(self) -> Option<Mixed> {
        self.aug.mixup.map(|_| Mixed {
            partner: self.partner,
            weight: self.weight,
        })
    }
}

#[cfg(test)]
/// A batch being augmented after it was filled: its items' ids, its f32 values and each
/// item's real frames.
pub(crate) struct Items<'a> {
    pub ids: &'a [u64],
    pub values: &'a mut [f32],
    pub lengths: &'a mut [usize],
}

/// Augments a filled `batch`, its items laid out as `layout` (`lengths` updated where
/// mixup joins a shorter item with a longer one); `norm` is the normalisation applied
/// (the gain is scaled by it). The same values as filling through an [`Augmenter`].
#[cfg(test)]
pub(crate) fn apply(
    aug: &Augment,
    key: &BatchKey,
    layout: Layout,
    norm: Option<&Affine>,
    batch: Items<'_>,
    scratch: &mut Vec<f32>,
) -> Option<Mixed> {
    let Items {
        ids,
        values,
        lengths,
    } = batch;
    let mut a = Augmenter::new(aug, key, ids, layout, norm, scratch);
    for k in 0..a.order().len() {
        let j = a.order()[k];
        a.item_filled(j, values, lengths);
    }
    a.mixed()
}

/// Adds `g` dB (scaled per bin by `norm`) to an item's first `len` frames.
fn add_gain(item: &mut [f32], layout: Layout, len: usize, g: f32, norm: Option<&Affine>) {
    for plane in item.chunks_exact_mut(layout.n_mels * layout.width) {
        for (b, row) in plane.chunks_exact_mut(layout.width).enumerate() {
            let d = norm.map_or(g, |n| g * n.scale(b));
            for v in &mut row[..len] {
                *v += d;
            }
        }
    }
}

/// Mixup's pairing of a batch (a permutation drawn from the batch's key) and each item's
/// weight (from the item's own generator: 1 where it is not mixed).
fn pairing(m: Mixup, key: &BatchKey, ids: &[u64]) -> (Vec<usize>, Vec<f32>) {
    let n = ids.len();
    let mut pairing = rng(
        key.seed,
        key.epoch,
        key.index ^ key.rank.rotate_left(32),
        PAIR_STREAM,
    );
    // Sattolo's algorithm: a uniformly random permutation of one cycle, so every item
    // (of a batch of two or more) is mixed with another, never with itself.
    let mut partner: Vec<usize> = (0..n).collect();
    for i in (1..n).rev() {
        partner.swap(i, pairing.random_range(0..i));
    }
    let beta = Beta::new(m.alpha, m.alpha).expect("alpha checked above 0");
    let weight = ids
        .iter()
        .enumerate()
        .map(|(i, &id)| {
            let mut r = rng(key.seed, key.epoch, id, MIX_STREAM);
            let u: f64 = r.random();
            let w = beta.sample(&mut r) as f32;
            if u < m.prob && partner[i] != i && w.is_finite() {
                w
            } else {
                1.0
            }
        })
        .collect();
    (partner, weight)
}

/// Item `i` (mutable) and item `p` (`p != i`) of `values`, `per` values each.
fn pair(values: &mut [f32], per: usize, i: usize, p: usize) -> (&mut [f32], &[f32]) {
    if i < p {
        let (a, b) = values.split_at_mut(p * per);
        (&mut a[i * per..(i + 1) * per], &b[..per])
    } else {
        let (a, b) = values.split_at_mut(i * per);
        (&mut b[..per], &a[p * per..(p + 1) * per])
    }
}

/// SpecAugment's masks on one item's first `len` frames: each width uniform in `0..=W`
/// (clamped to what there is), each start uniform where the mask fits; masked values
/// become 0 (the mean, after normalisation).
fn mask(aug: &Augment, r: &mut ChaCha8Rng, layout: Layout, len: usize, item: &mut [f32]) {
    let span = |r: &mut ChaCha8Rng, widest: usize, size: usize| {
        let w = r.random_range(0..=widest).min(size);
        let start = r.random_range(0..=size - w);
        (start, w)
    };
    let times: Vec<(usize, usize)> = (0..aug.time_masks)
        .map(|_| {
            let widest = (aug.time_mask_share as f64 * len as f64).floor() as usize;
            span(r, aug.time_mask_frames.min(widest), len)
        })
        .collect();
    let bins: Vec<(usize, usize)> = (0..aug.freq_masks)
        .map(|_| span(r, aug.freq_mask_bins, layout.n_mels))
        .collect();
    for plane in item.chunks_exact_mut(layout.n_mels * layout.width) {
        for (b, row) in plane.chunks_exact_mut(layout.width).enumerate() {
            if bins
                .iter()
                .any(|&(start, w)| (start..start + w).contains(&b))
            {
                row[..len].fill(0.0);
                continue;
            }
            for &(start, w) in &times {
                row[start..start + w].fill(0.0);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(index: u64) -> BatchKey {
        BatchKey {
            seed: 7,
            epoch: 2,
            rank: 0,
            index,
        }
    }

    fn run(
        aug: &Augment,
        key: &BatchKey,
        ids: &[u64],
        values: &mut [f32],
        lengths: &mut [usize],
    ) -> Option<Mixed> {
        let items = Items {
            ids,
            values,
            lengths,
        };
        apply(aug, key, L, None, items, &mut Vec::new())
    }

    const L: Layout = Layout {
        planes: 1,
        n_mels: 8,
        width: 20,
    };

    fn batch(n: usize) -> Vec<f32> {
        (0..n * L.per_item())
            .map(|i| 1.0 + i as f32 * 1e-3)
            .collect()
    }

    #[test]
    fn masks_zero_whole_rows_and_columns_within_the_real_frames() {
        let aug = Augment {
            time_masks: 2,
            time_mask_frames: 6,
            freq_masks: 1,
            freq_mask_bins: 3,
            ..Augment::default()
        };
        let ids: Vec<u64> = (0..16).collect();
        let mut v = batch(16);
        let mut lengths = vec![12; 16];
        run(&aug, &key(0), &ids, &mut v, &mut lengths);
        let mut masked_any = false;
        for item in v.chunks_exact(L.per_item()) {
            // Padding frames (12..20) are untouched, and a zeroed frame is zero in every bin
            // not entirely masked by frequency.
            for row in item.chunks_exact(L.width) {
                assert!(row[12..].iter().all(|&x| x != 0.0));
            }
            let zero_bins: Vec<bool> = item
                .chunks_exact(L.width)
                .map(|r| r[..12].iter().all(|&x| x == 0.0))
                .collect();
            let live = zero_bins.iter().position(|z| !z).expect("a bin unmasked");
            for t in 0..12 {
                let column_zero = item[live * L.width + t] == 0.0;
                masked_any |= column_zero;
                for (b, z) in zero_bins.iter().enumerate() {
                    if !z {
                        assert_eq!(item[b * L.width + t] == 0.0, column_zero);
                    }
                }
            }
            assert!(zero_bins.iter().filter(|&&z| z).count() <= 3);
        }
        assert!(
            masked_any,
            "16 items with 2 masks of up to 6 frames masked nothing"
        );
    }

    #[test]
    fn a_time_mask_share_bounds_each_mask_by_the_items_frames() {
        let aug = Augment {
            time_masks: 1,
            time_mask_frames: 20,
            time_mask_share: 0.25,
            ..Augment::default()
        };
        let ids: Vec<u64> = (0..64).collect();
        let mut v = batch(64);
        let mut lengths = vec![12; 64];
        run(&aug, &key(0), &ids, &mut v, &mut lengths);
        let mut widest = 0;
        for item in v.chunks_exact(L.per_item()) {
            let zeros = item[..L.width].iter().filter(|&&x| x == 0.0).count();
            widest = widest.max(zeros);
        }
        assert_eq!(widest, 3, "12 frames × 0.25: masks of 0 to 3 frames");
        for share in [0.0, 1.5, f32::NAN] {
            let bad = Augment {
                time_mask_share: share,
                ..Augment::default()
            };
            let e = bad.check(8, 32).unwrap_err().to_string();
            assert!(e.contains("augment.time_mask_share"), "{e}");
        }
    }

    #[test]
    fn draws_depend_on_the_item_not_its_place_in_the_batch() {
        let aug = Augment {
            time_masks: 1,
            time_mask_frames: 10,
            gain_db: 6.0,
            ..Augment::default()
        };
        let mut a = batch(2);
        let mut b = batch(2);
        let (first, second) = b.split_at_mut(L.per_item());
        first.swap_with_slice(second);
        let mut la = vec![20; 2];
        let mut lb = vec![20; 2];
        run(&aug, &key(0), &[3, 9], &mut a, &mut la);
        run(&aug, &key(5), &[9, 3], &mut b, &mut lb);
        assert_eq!(a[..L.per_item()], b[L.per_item()..]);
        assert_eq!(a[L.per_item()..], b[..L.per_item()]);
        // Another epoch draws again.
        let mut c = batch(2);
        let other = BatchKey { epoch: 3, ..key(0) };
        run(&aug, &other, &[3, 9], &mut c, &mut la);
        assert_ne!(a, c);
    }

    #[test]
    fn mixup_mixes_values_and_labels_with_the_same_weight() {
        let aug = Augment {
            mixup: Some(Mixup {
                alpha: 0.4,
                prob: 1.0,
            }),
            ..Augment::default()
        };
        let ids: Vec<u64> = (0..32).collect();
        let before = batch(32);
        let mut v = before.clone();
        let mut lengths: Vec<usize> = (0..32).map(|i| 10 + i % 10).collect();
        let old = lengths.clone();
        let m = run(&aug, &key(1), &ids, &mut v, &mut lengths).expect("mixup on");
        let per = L.per_item();
        let mut mixed = 0;
        for i in 0..32 {
            let (w, p) = (m.weight[i], m.partner[i]);
            assert!((0.0..=1.0).contains(&w));
            for k in [0, per / 2, per - 1] {
                let want = w * before[i * per + k] + (1.0 - w) * before[p * per + k];
                assert_eq!(
                    v[i * per + k],
                    if w == 1.0 { before[i * per + k] } else { want }
                );
            }
            if w < 1.0 {
                mixed += 1;
                assert_eq!(lengths[i], old[i].max(old[p]));
            }
        }
        let labels: Vec<i64> = (0..32).map(|i| i % 3).collect();
        let soft = m.soft_labels(&labels, 3);
        for row in soft.chunks_exact(3) {
            assert!((row.iter().sum::<f32>() - 1.0).abs() < 1e-6);
        }
        // Never an item with itself, however many items (Sattolo's single cycle).
        assert!(m.partner.iter().enumerate().all(|(i, &p)| p != i));
        assert_eq!(mixed, 32, "prob 1 mixes every item");
        // A permutation: every item is someone's partner once.
        let mut seen = m.partner.clone();
        seen.sort_unstable();
        assert_eq!(seen, (0..32).collect::<Vec<_>>());
    }

    #[test]
    fn bad_settings_are_one_line_errors_naming_the_field() {
        let cases = [
            (
                Augment {
                    time_masks: 1,
                    time_mask_frames: 33,
                    ..Augment::default()
                },
                "augment.time_mask_frames",
            ),
            (
                Augment {
                    freq_masks: 1,
                    freq_mask_bins: 9,
                    ..Augment::default()
                },
                "augment.freq_mask_bins",
            ),
            (
                Augment {
                    gain_db: f32::NAN,
                    ..Augment::default()
                },
                "augment.gain_db",
            ),
            (
                Augment {
                    mixup: Some(Mixup {
                        alpha: 0.2,
                        prob: 1.5,
                    }),
                    ..Augment::default()
                },
                "augment.mixup_prob",
            ),
            (
                Augment {
                    mixup: Some(Mixup {
                        alpha: 0.0,
                        prob: 1.0,
                    }),
                    ..Augment::default()
                },
                "augment.mixup_alpha",
            ),
        ];
        for (aug, field) in cases {
            let e = aug.check(8, 32).expect_err(field).to_string();
            assert!(e.contains(field) && !e.contains('\n'), "{e}");
        }
        assert!(Augment::default().check(8, 32).is_ok());
        // A width without masks asks for nothing.
        let unused = Augment {
            time_mask_frames: 99,
            freq_mask_bins: 99,
            ..Augment::default()
        };
        assert!(unused.check(8, 32).is_ok());
    }
}

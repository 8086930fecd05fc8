//! Augmentation in the loader's threads: SpecAugment's time and frequency masks, mixup and
//! a random gain, applied to each f32 batch after it is read (and normalised).
//!
//! Every draw is a function of the loader's seed, the epoch and the item (its clip and
//! segment), and mixup's pairing of the batch's number: never of the worker that fills the
//! batch or of the batches before it. So an epoch's augmented batches are the same for 1
//! or 16 threads, and a run resumed mid-epoch from `(epoch, batch)` gets bit-identical
//! batches. The generator is xoshiro256++ (`rand_xoshiro`, value-stable across platforms,
//! seeded by SplitMix64 in a few nanoseconds: ChaCha8's seeding, 256 bytes of keystream,
//! was ~70 ns an item and generator) and mixup's weight a Beta draw (`rand_distr`).
//!
//! Order, per batch: gain, then mixup, then masks, each on an item's real frames only
//! (padding after a short whole clip stays zero, unless mixup joins it with a longer
//! partner: its padding then holds `(1 − w)` of the partner, and its length is the longer
//! one's).

use mel_core::{Error, Result};
use rand::{Rng, SeedableRng};
use rand_distr::{Beta, Distribution};
use rand_xoshiro::Xoshiro256PlusPlus;

#[cfg(test)]
use crate::convert::{Affine, gain_in_bin};
use crate::order::mix64;
use crate::widen_mixed::mixed;

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
/// of its batch, its label the same mixture ([`Mixed`]). The batch is paired at random into
/// pairs mixed with each other (as timm's mixup pairs a batch with its reverse), plus one
/// three-cycle in a batch of odd size: never an item with itself, for a batch of two or
/// more. Each item draws its own weight.
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
fn rng(seed: u64, epoch: u64, id: u64, stream: u64) -> Xoshiro256PlusPlus {
    Xoshiro256PlusPlus::seed_from_u64(mix64(seed ^ mix64(epoch ^ mix64(mix64(id) ^ stream))))
}

/// Augments one batch as it is filled. Mixup pairs the batch's items (a random matching,
/// and one three-cycle in a batch of odd size): each [group](Self::groups) is read
/// together. A group of whole clips stored as f16 in a map is widened and mixed in one
/// pass (`Reader::read_whole_group`, with [`weight`](Self::weight)); any other group a few
/// blocks of frames of each member at a time, mixed while those frames of every member
/// are in cache ([`mix_group`](Self::mix_group)), each from the others' originals. The
/// filler adds each item's [`gain`](Self::gain) (scaled by the normalisation) as it writes the
/// item's values, and calls [`group_done`](Self::group_done) once a group is complete
/// (lengths, then masks).
/// The result is [`apply`]'s: gain, then mixup, then masks.
pub(crate) struct Augmenter<'a> {
    aug: &'a Augment,
    layout: Layout,
    ids: &'a [u64],
    key: (u64, u64),
    /// Mixup's pairing and weights (the identity and 1 without mixup).
    partner: Vec<usize>,
    weight: Vec<f32>,
    /// Items mixed together, one group after another (single items without mixup).
    groups: Vec<usize>,
    /// Where each group starts in `groups`, then its length.
    group_starts: Vec<usize>,
    /// Each item's gain in dB (0 without one).
    gain: Vec<f32>,
}

impl<'a> Augmenter<'a> {
    /// The batch `ids` (item ids, in batch order) of the batch `key`, laid out as
    /// `layout`.
    pub(crate) fn new(aug: &'a Augment, key: &BatchKey, ids: &'a [u64], layout: Layout) -> Self {
        let n = ids.len();
        let (partner, weight, groups, group_starts) = match aug.mixup {
            Some(m) => pairing(m, key, ids),
            None => (
                (0..n).collect(),
                vec![1.0; n],
                (0..n).collect(),
                (0..=n).collect(),
            ),
        };
        let gain = ids
            .iter()
            .map(|&id| match aug.gain_db > 0.0 {
                true => rng(key.seed, key.epoch, id, GAIN_STREAM)
                    .random_range(-aug.gain_db..=aug.gain_db),
                false => 0.0,
            })
            .collect();
        Augmenter {
            aug,
            layout,
            ids,
            key: (key.seed, key.epoch),
            partner,
            weight,
            groups,
            group_starts,
            gain,
        }
    }

    /// The groups of items mixed together (positions in the batch), in the order they
    /// are filled: every item once.
    pub(crate) fn groups(&self) -> impl Iterator<Item = &[usize]> + '_ {
        self.group_starts
            .windows(2)
            .map(|w| &self.groups[w[0]..w[1]])
    }

    /// Item `j`'s gain in dB, or `None` without one.
    pub(crate) fn gain(&self, j: usize) -> Option<f32> {
        let g = self.gain[j];
        (g != 0.0).then_some(g)
    }

    /// Item `j`'s own share of its mixture (1 where mixup leaves it as it is).
    pub(crate) fn weight(&self, j: usize) -> f32 {
        self.weight[j]
    }

    /// Whether mixup mixes any item of `group`.
    pub(crate) fn mixes(&self, group: &[usize]) -> bool {
        group.len() > 1 && group.iter().any(|&i| self.weight[i] < 1.0)
    }

    /// Mixes the items of `group` over frames `cols` of every row of theirs in `values`
    /// (the batch, each item's originals there with their gain): item `i` becomes
    /// `w_i·x_i + (1 − w_i)·x_partner`, every member from the others' originals.
    pub(crate) fn mix_group(
        &self,
        group: &[usize],
        values: &mut [f32],
        cols: std::ops::Range<usize>,
    ) {
        let per = self.layout.per_item();
        let starts: Vec<usize> = group.iter().map(|&i| i * per).collect();
        self.mix_group_at(group, values, &starts, cols);
    }

    /// [`Augmenter::mix_group`] for a group whose items start at `starts` in `values`
    /// (the `k`-th member at `starts[k]`) rather than at their places in the batch.
    pub(crate) fn mix_group_at(
        &self,
        group: &[usize],
        values: &mut [f32],
        starts: &[usize],
        cols: std::ops::Range<usize>,
    ) {
        if !self.mixes(group) {
            return;
        }
        let width = self.layout.width;
        let rows = self.layout.planes * self.layout.n_mels;
        let w: Vec<f32> = group.iter().map(|&i| self.weight[i]).collect();
        let starts: Vec<usize> = starts.iter().map(|&s| s + cols.start).collect();
        let run = MixRuns {
            rows,
            width,
            len: cols.len(),
        };
        #[cfg(target_arch = "x86_64")]
        if crate::widen::has_avx() {
            // SAFETY: the CPU has AVX (checked just above).
            unsafe { mix_rows_avx(values, &starts, &w, run) };
            return;
        }
        mix_rows(values, &starts, &w, run);
    }

    /// The items of `group` are filled and mixed: a mixed item's real frames become the
    /// longer of its own and its partner's, then its masks are drawn on them.
    pub(crate) fn group_done(&self, group: &[usize], values: &mut [f32], lengths: &mut [usize]) {
        let per = self.layout.per_item();
        let mut starts = [0usize; 3];
        for (s, &i) in starts.iter_mut().zip(group) {
            *s = i * per;
        }
        self.group_done_at(group, &starts, None, values, lengths);
    }

    /// [`group_done`](Self::group_done) for a group whose `k`-th member starts at
    /// `starts[k]` in `values`; with `freq_rows` (each member's frequency masks' rows from
    /// [`time_keep`](Self::time_keep): its time masks were applied as it was read), only
    /// those rows are zeroed.
    pub(crate) fn group_done_at(
        &self,
        group: &[usize],
        starts: &[usize],
        freq_rows: Option<&[Vec<(usize, usize)>; 3]>,
        values: &mut [f32],
        lengths: &mut [usize],
    ) {
        let per = self.layout.per_item();
        self.mixed_lengths(group, lengths);
        for (k, (&i, &s)) in group.iter().zip(starts).enumerate() {
            let item = &mut values[s..s + per];
            match freq_rows {
                Some(rows) => self.zero_freq(&rows[k], lengths[i], item),
                None => self.mask_item(i, lengths[i], item),
            }
        }
    }

    /// The items of `group` are mixed: a mixed item's real frames become the longer of
    /// its own and its partner's.
    pub(crate) fn mixed_lengths(&self, group: &[usize], lengths: &mut [usize]) {
        // A group is a pair or a three-cycle (one item without mixup).
        let mut mixed = [0usize; 3];
        for (m, &i) in mixed.iter_mut().zip(group) {
            *m = self.mixed_length(i, lengths);
        }
        for (&m, &i) in mixed.iter().zip(group) {
            lengths[i] = m;
        }
    }

    /// Item `i`'s real frames once mixed, from every item's own (`lengths`): the longer of
    /// its own and its partner's if mixup mixes it, else its own.
    pub(crate) fn mixed_length(&self, i: usize, lengths: &[usize]) -> usize {
        let p = self.partner[i];
        match p != i && self.weight[i] < 1.0 {
            true => lengths[i].max(lengths[p]),
            false => lengths[i],
        }
    }

    /// Draws item `i`'s masks on its first `length` frames in `values` (the item alone);
    /// nothing without masks.
    pub(crate) fn mask_item(&self, i: usize, length: usize, values: &mut [f32]) {
        if self.masks() {
            let mut r = rng(self.key.0, self.key.1, self.ids[i], MASK_STREAM);
            mask(self.aug, &mut r, self.layout, length, values);
        }
    }

    /// Whether mixup is on.
    pub(crate) fn mixup(&self) -> bool {
        self.aug.mixup.is_some()
    }

    /// Whether items are masked.
    pub(crate) fn masks(&self) -> bool {
        self.aug.time_masks > 0 || self.aug.freq_masks > 0
    }

    /// Draws item `i`'s masks on its first `length` frames as [`mask_item`](Self::mask_item)
    /// does, to be applied as the item is written: its time masks as each frame's keep bits
    /// (`u32::MAX` kept, `0` masked) in `keep`, `width + 7` of them rounded up to eight (a
    /// run from any frame `c` reads its bits from `keep[c..]`, its length rounded up to
    /// eight); its frequency masks' rows in `rows`, for [`zero_freq`](Self::zero_freq)
    /// after.
    pub(crate) fn time_keep(
        &self,
        i: usize,
        (length, width): (usize, usize),
        keep: &mut Vec<u32>,
        rows: &mut Vec<(usize, usize)>,
    ) {
        keep.clear();
        keep.resize((width + 7).next_multiple_of(8), u32::MAX);
        rows.clear();
        let mut r = rng(self.key.0, self.key.1, self.ids[i], MASK_STREAM);
        let mut state = (keep, rows);
        each_mask(
            self.aug,
            &mut r,
            self.layout,
            length,
            &mut state,
            |(keep, _), start, w| keep[start..start + w].fill(0),
            |(_, rows), start, w| rows.push((start, w)),
        );
    }

    /// Zeroes the frequency masks `rows` ([`time_keep`](Self::time_keep)) of an item
    /// (`values`, the item alone) over its first `length` frames.
    pub(crate) fn zero_freq(&self, rows: &[(usize, usize)], length: usize, values: &mut [f32]) {
        for &span in rows {
            zero_rows(self.layout, length, span, values);
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

/// The rows of a group's items mixed over `len` frames: `rows` rows `width` apart.
#[derive(Clone, Copy)]
struct MixRuns {
    rows: usize,
    width: usize,
    len: usize,
}

/// [`mix_rows`] compiled for AVX (eight lanes a step; no FMA, so the values are the
/// same bits as the plain build's).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx")]
fn mix_rows_avx(values: &mut [f32], starts: &[usize], w: &[f32], run: MixRuns) {
    mix_rows(values, starts, w, run);
}

/// Mixes a group (a pair or a three-cycle) whose items' row `r` starts at
/// `starts[k] + r·width`, each member `k` with the next (`w[k]` its own weight), all from
/// the originals.
#[inline(always)]
fn mix_rows(values: &mut [f32], starts: &[usize], w: &[f32], run: MixRuns) {
    let span = |start: usize, r: usize| {
        let at = start + r * run.width;
        at..at + run.len
    };
    for r in 0..run.rows {
        match *starts {
            [a, b] => {
                let [x, y] = values
                    .get_disjoint_mut([span(a, r), span(b, r)])
                    .expect("a batch's items are apart");
                mix_pair(x, y, (w[0], w[1]));
            }
            [a, b, c] => {
                let [x, y, z] = values
                    .get_disjoint_mut([span(a, r), span(b, r), span(c, r)])
                    .expect("a batch's items are apart");
                mix_cycle3(x, y, z, (w[0], w[1], w[2]));
            }
            _ => unreachable!("mixup's groups are pairs and one three-cycle"),
        }
    }
}

/// Mixes two items' values with each other: `x ← wx·x + (1 − wx)·y`,
/// `y ← wy·y + (1 − wy)·x`, both from the originals ([`mixed`]).
#[inline(always)]
fn mix_pair(x: &mut [f32], y: &mut [f32], (wx, wy): (f32, f32)) {
    for (a, b) in x.iter_mut().zip(y.iter_mut()) {
        let (u, v) = (*a, *b);
        *a = mixed(wx, u, v);
        *b = mixed(wy, v, u);
    }
}

/// Mixes a three-cycle: `x` with `y`, `y` with `z`, `z` with `x`, all from the originals.
#[inline(always)]
fn mix_cycle3(x: &mut [f32], y: &mut [f32], z: &mut [f32], (wx, wy, wz): (f32, f32, f32)) {
    for ((a, b), c) in x.iter_mut().zip(y.iter_mut()).zip(z.iter_mut()) {
        let (u, v, t) = (*a, *b, *c);
        *a = mixed(wx, u, v);
        *b = mixed(wy, v, t);
        *c = mixed(wz, t, u);
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
/// (the gain is scaled by it). The reference the loader's fused filling is tested
/// against: whole items, one step after another.
#[cfg(test)]
pub(crate) fn apply(
    aug: &Augment,
    key: &BatchKey,
    layout: Layout,
    norm: Option<&Affine>,
    batch: Items<'_>,
) -> Option<Mixed> {
    let Items {
        ids,
        values,
        lengths,
    } = batch;
    let a = Augmenter::new(aug, key, ids, layout);
    let per = layout.per_item();
    for group in a.groups() {
        for &j in group {
            for (r, row) in values[j * per..(j + 1) * per]
                .chunks_exact_mut(layout.width)
                .enumerate()
            {
                if let Some(d) = a.gain(j).map(|g| gain_in_bin(g, norm, r % layout.n_mels)) {
                    for v in &mut row[..lengths[j]] {
                        *v += d;
                    }
                }
            }
        }
        a.mix_group(group, values, 0..layout.width);
        a.group_done(group, values, lengths);
    }
    a.mixed()
}

/// Mixup's pairing of a batch, drawn from the batch's key: a random matching into pairs
/// mixed with each other (timm's convention), and in a batch of odd size one three-cycle,
/// so no item of a batch of two or more is mixed with itself. Each item's weight comes
/// from its own generator (1 where it is not mixed). Returns each item's partner and
/// weight, and the groups one after another with where each starts.
fn pairing(
    m: Mixup,
    key: &BatchKey,
    ids: &[u64],
) -> (Vec<usize>, Vec<f32>, Vec<usize>, Vec<usize>) {
    let n = ids.len();
    let mut order: Vec<usize> = (0..n).collect();
    let mut r = rng(
        key.seed,
        key.epoch,
        key.index ^ key.rank.rotate_left(32),
        PAIR_STREAM,
    );
    for i in (1..n).rev() {
        order.swap(i, r.random_range(0..=i));
    }
    let mut starts: Vec<usize> = (0..n / 2).map(|g| 2 * g).collect();
    if n % 2 == 1 {
        // The last pair takes the odd item: a three-cycle (a lone item when n is 1).
        if n > 1 {
            starts.pop();
        }
        starts.push(n.saturating_sub(3).min(n - 1));
    }
    starts.push(n);
    let mut partner: Vec<usize> = (0..n).collect();
    for g in starts.windows(2) {
        let members = &order[g[0]..g[1]];
        for (k, &i) in members.iter().enumerate() {
            partner[i] = members[(k + 1) % members.len()];
        }
    }
    let beta = Beta::new(m.alpha, m.alpha).expect("alpha checked above 0");
    let weight = ids
        .iter()
        .enumerate()
        .map(|(i, &id)| {
            let mut r = rng(key.seed, key.epoch, id, MIX_STREAM);
            let u: f64 = r.random();
            // The weight is drawn only for an item mixed (the draw after `u`, so the
            // same either way).
            let w = (u < m.prob && partner[i] != i).then(|| beta.sample(&mut r) as f32);
            w.filter(|w| w.is_finite()).unwrap_or(1.0)
        })
        .collect();
    (partner, weight, order, starts)
}

/// SpecAugment's masks on one item's first `len` frames: each width uniform in `0..=W`
/// (clamped to what there is), each start uniform where the mask fits; masked values
/// become 0 (the mean, after normalisation).
fn mask(aug: &Augment, r: &mut Xoshiro256PlusPlus, layout: Layout, len: usize, item: &mut [f32]) {
    // Each mask applied as it is drawn (time masks first, as drawn: a frequency mask
    // zeroes its rows' real frames whole, time masks within them included), so nothing
    // is held: two arrays of MAX_MASKS spans zeroed an item cost more than the masks.
    let width = layout.width;
    let time = |item: &mut [f32], start: usize, w: usize| {
        if w > 0 {
            for row in item.chunks_exact_mut(width) {
                zero_span(&mut row[start..start + w]);
            }
        }
    };
    each_mask(aug, r, layout, len, item, time, |item, start, w| {
        zero_rows(layout, len, (start, w), item)
    });
}

/// Draws an item's masks on its first `len` frames, in order (time masks, then frequency
/// masks): `time(state, start, frames)` for each time mask, `freq(state, start, bins)` for
/// each frequency mask. The one place masks are drawn, whether they are applied after the
/// item is written ([`mask`]) or as it is ([`Augmenter::time_keep`]).
fn each_mask<S: ?Sized>(
    aug: &Augment,
    r: &mut Xoshiro256PlusPlus,
    layout: Layout,
    len: usize,
    state: &mut S,
    mut time: impl FnMut(&mut S, usize, usize),
    mut freq: impl FnMut(&mut S, usize, usize),
) {
    let span = |r: &mut Xoshiro256PlusPlus, widest: usize, size: usize| {
        let w = r.random_range(0..=widest).min(size);
        let start = r.random_range(0..=size - w);
        (start, w)
    };
    let widest = (aug.time_mask_share as f64 * len as f64).floor() as usize;
    for _ in 0..aug.time_masks {
        let (start, w) = span(r, aug.time_mask_frames.min(widest), len);
        time(state, start, w);
    }
    for _ in 0..aug.freq_masks {
        let (start, w) = span(r, aug.freq_mask_bins, layout.n_mels);
        freq(state, start, w);
    }
}

/// Zeroes a frequency mask's rows `start..start + bins` of every plane of `item` over
/// their first `len` frames.
fn zero_rows(layout: Layout, len: usize, (start, bins): (usize, usize), item: &mut [f32]) {
    let width = layout.width;
    for plane in item.chunks_exact_mut(layout.n_mels * width) {
        for row in plane[start * width..(start + bins) * width].chunks_exact_mut(width) {
            row[..len].fill(0.0);
        }
    }
}

/// Zeroes a time mask's span of one row (a few to a few dozen values) with whole
/// eight-value stores, the last overlapping, rather than a `memset` call a span: with
/// ~150 spans an item, the calls were 8% of a masked fixed-length epoch (perf,
/// 2026-11-29).
#[inline(always)]
fn zero_span(span: &mut [f32]) {
    let n = span.len();
    let mut eight = |at: usize| {
        let v: &mut [f32; 8] = (&mut span[at..at + 8]).try_into().expect("eight values");
        *v = [0.0; 8];
    };
    if n >= 8 {
        let mut i = 0;
        while i + 8 < n {
            eight(i);
            i += 8;
        }
        eight(n - 8);
    } else if n >= 4 {
        span[..4].copy_from_slice(&[0.0; 4]);
        span[n - 4..].copy_from_slice(&[0.0; 4]);
    } else if n > 0 {
        // 1–3 values: the first, the last and the middle one.
        span[0] = 0.0;
        span[n - 1] = 0.0;
        span[n / 2] = 0.0;
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
        apply(aug, key, L, None, items)
    }

    const L: Layout = Layout {
        planes: 1,
        n_mels: 8,
        width: 20,
    };

    /// Mixup alone, with `alpha` and `prob`.
    fn mixup_only(alpha: f64, prob: f64) -> Augment {
        Augment {
            mixup: Some(Mixup { alpha, prob }),
            ..Augment::default()
        }
    }

    fn batch(n: usize) -> Vec<f32> {
        (0..n * L.per_item())
            .map(|i| 1.0 + i as f32 * 1e-3)
            .collect()
    }

    #[test]
    fn a_span_is_zeroed_exactly_whatever_its_length_and_place() {
        for n in 0..=40 {
            for at in 0..=48 - n {
                let mut row: Vec<f32> = (1..=48).map(|v| v as f32).collect();
                zero_span(&mut row[at..at + n]);
                for (i, &v) in row.iter().enumerate() {
                    let want = if (at..at + n).contains(&i) {
                        0.0
                    } else {
                        (i + 1) as f32
                    };
                    assert_eq!(v.to_bits(), want.to_bits(), "span {at}..{} at {i}", at + n);
                }
            }
        }
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
        let aug = mixup_only(0.4, 1.0);
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
        // Never an item with itself; pairs mixed with each other.
        assert!(m.partner.iter().enumerate().all(|(i, &p)| p != i));
        assert!(
            m.partner
                .iter()
                .enumerate()
                .all(|(i, &p)| m.partner[p] == i)
        );
        assert_eq!(mixed, 32, "prob 1 mixes every item");
    }

    /// Every batch size from 1 to 40: a permutation of pairs, and for an odd size one
    /// three-cycle; never an item with itself (but the lone item of a batch of one); the
    /// groups hold every item once, partners within a group.
    #[test]
    fn mixup_pairs_a_batch_and_closes_an_odd_one_with_a_three_cycle() {
        let aug = mixup_only(0.4, 1.0);
        for n in 1..=40usize {
            let ids: Vec<u64> = (100..100 + n as u64).collect();
            let a = Augmenter::new(&aug, &key(n as u64), &ids, L);
            let groups: Vec<Vec<usize>> = a.groups().map(<[usize]>::to_vec).collect();
            let mut all: Vec<usize> = groups.concat();
            all.sort_unstable();
            assert_eq!(all, (0..n).collect::<Vec<_>>(), "n {n}");
            let sizes: Vec<usize> = groups.iter().map(Vec::len).collect();
            let want_threes = usize::from(n % 2 == 1 && n > 1);
            assert_eq!(
                sizes.iter().filter(|&&k| k == 3).count(),
                want_threes,
                "n {n}"
            );
            assert!(sizes.iter().all(|&k| k == 2 || k == 3 || n == 1), "n {n}");
            for g in &groups {
                for &i in g {
                    let p = a.partner[i];
                    assert!(g.contains(&p), "n {n}: a partner outside the group");
                    assert!(p != i || n == 1, "n {n}: item {i} with itself");
                }
            }
        }
    }

    /// The loader fills a group a few frames at a time: the gain of each row's real
    /// frames, then the mix over those frames of every member. Bit for bit what
    /// augmenting whole filled items gives ([`apply`]), for every chunk width.
    #[test]
    fn mixing_a_group_a_few_frames_at_a_time_equals_mixing_whole_items() {
        let aug = Augment {
            time_masks: 2,
            time_mask_frames: 5,
            freq_masks: 1,
            freq_mask_bins: 3,
            gain_db: 6.0,
            mixup: Some(Mixup {
                alpha: 0.5,
                prob: 0.8,
            }),
            ..Augment::default()
        };
        let ids: Vec<u64> = (0..9).map(|i| i * 7 + 1).collect();
        let lengths: Vec<usize> = (0..9).map(|i| 6 + (i * 5) % 15).collect();
        // Filled items: values in the real frames, zeros after.
        let mut filled = batch(9);
        for (i, item) in filled.chunks_exact_mut(L.per_item()).enumerate() {
            for row in item.chunks_exact_mut(L.width) {
                row[lengths[i]..].fill(0.0);
            }
        }
        let mut want = filled.clone();
        let mut want_lengths = lengths.clone();
        let items = Items {
            ids: &ids,
            values: &mut want,
            lengths: &mut want_lengths,
        };
        let mixed = apply(&aug, &key(3), L, None, items).expect("mixup on");
        assert!(mixed.weight.iter().any(|&w| w < 1.0));
        for step in [1, 3, 8, L.width] {
            let a = Augmenter::new(&aug, &key(3), &ids, L);
            let (mut v, mut got_lengths) = (filled.clone(), lengths.clone());
            let per = L.per_item();
            for group in a.groups() {
                for c0 in (0..L.width).step_by(step) {
                    let c1 = (c0 + step).min(L.width);
                    for &j in group {
                        let real = lengths[j].clamp(c0, c1);
                        for row in v[j * per..(j + 1) * per].chunks_exact_mut(L.width) {
                            // No normalisation here: the gain in dB as it is.
                            if let Some(d) = a.gain(j) {
                                row[c0..real].iter_mut().for_each(|x| *x += d);
                            }
                        }
                    }
                    a.mix_group(group, &mut v, c0..c1);
                }
                a.group_done(group, &mut v, &mut got_lengths);
            }
            assert_eq!(v, want, "frames {step} at a time");
            assert_eq!(got_lengths, want_lengths);
        }
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

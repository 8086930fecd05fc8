//! Per-mel-bin statistics of spectrograms: the mean and standard deviation of every value
//! of each mel bin over a split (all clips, segments and frames), accumulated in f64 with
//! Chan, Golub and LeVeque's pairwise update, numerically stable. The sinks accumulate them
//! as they write (no second pass over the output); melread computes them from a file that
//! lacks them and normalises with them.

use rayon::prelude::*;

use crate::OutputBuf;

/// Mean and standard deviation of each mel bin over a split.
///
/// The standard deviation is the population one (numpy's `std` with `ddof=0`).
#[derive(Debug, Clone, PartialEq)]
pub struct MelStats {
    /// Mean of each mel bin.
    pub mean: Vec<f64>,
    /// Standard deviation of each mel bin.
    pub std: Vec<f64>,
    /// Values each bin's figures were taken over.
    pub count: u64,
}

impl MelStats {
    /// Mel bins described.
    pub fn n_mels(&self) -> usize {
        self.mean.len()
    }

    /// Why these statistics cannot normalise f32 values, naming the first bad bin
    /// (`mean[3] is …`), or `None`: normalising computes `(x - mean) * (1 / std)` in f32,
    /// so each mean must be finite there, and each deviation finite, not negative, and
    /// zero (a constant bin: only centred) or with a reciprocal finite in f32 (1e-300's
    /// is not). The one check of stored statistics and of statistics a caller gives.
    pub fn unusable(&self) -> Option<String> {
        let shown = |v: f64| {
            if v == 0.0 || !v.is_finite() || (1e-4..1e6).contains(&v.abs()) {
                format!("{v}")
            } else {
                format!("{v:e}")
            }
        };
        if let Some(bin) = self.mean.iter().position(|&m| !(m as f32).is_finite()) {
            return Some(format!(
                "mel_mean[{bin}] is {}, which is not finite in float32",
                shown(self.mean[bin])
            ));
        }
        let usable =
            |s: f64| s.is_finite() && (s == 0.0 || (s > 0.0 && ((1.0 / s) as f32).is_finite()));
        self.std.iter().position(|&s| !usable(s)).map(|bin| {
            let s = self.std[bin];
            let why = if s.is_finite() && s > 0.0 {
                "too small: its reciprocal is not finite in float32"
            } else if s < 0.0 {
                "negative"
            } else {
                "not finite"
            };
            format!("mel_std[{bin}] is {}, {why}", shown(s))
        })
    }

    /// The per-bin `(shift, scale)` that normalisation applies as `(x - shift) * scale`:
    /// the mean and `1 / std`; a bin whose deviation is zero or not finite is only centred
    /// (scale 1), so a constant bin becomes zeros rather than infinities.
    pub fn affine(&self) -> (Vec<f32>, Vec<f32>) {
        let shift = self.mean.iter().map(|&m| m as f32).collect();
        let scale = self
            .std
            .iter()
            .map(|&s| {
                if s.is_finite() && s > 0.0 {
                    (1.0 / s) as f32
                } else {
                    1.0
                }
            })
            .collect();
        (shift, scale)
    }
}

/// Accumulates per-bin statistics block by block: each block's mean and sum of squared
/// deviations are computed exactly in f64 in two passes, then merged (Chan, Golub and
/// LeVeque's pairwise update), so large offsets cost no precision. Blocks are runs of a
/// fixed number of spectrograms counted from the first one added, whatever the sizes of
/// the calls that add them, so the result depends only on the values and their order:
/// not on a build's batch size, nor on how a resumed build's batches fell.
#[derive(Debug, Clone)]
pub struct StatsAccumulator {
    n_mels: usize,
    frames: usize,
    count: u64,
    mean: Vec<f64>,
    m2: Vec<f64>,
    /// The figures of the last block closed here: its means, then its m2 (kept to reuse
    /// the allocation).
    block_part: Vec<f64>,
    /// Spectrograms per block.
    block: usize,
    /// Widened values of the block being filled, and how many spectrograms it holds.
    pending: Vec<f32>,
    filled: usize,
    /// Sums and centres for blocks closed on this thread.
    scratch: Scratch,
}

impl StatsAccumulator {
    /// An empty accumulator for spectrograms of `n_mels × frames`.
    pub fn new(n_mels: usize, frames: usize) -> Self {
        let per = n_mels * frames;
        let block = (STATS_CHUNK_VALUES / per.max(1)).max(1);
        StatsAccumulator {
            n_mels,
            frames,
            count: 0,
            mean: vec![0.0; n_mels],
            m2: vec![0.0; n_mels],
            block_part: vec![0.0; 2 * n_mels],
            block,
            pending: vec![0.0; block * per],
            filled: 0,
            scratch: Scratch::new(per),
        }
    }

    /// Adds a block of whole spectrograms `[k, n_mels, frames]` (k ≥ 0) in f32.
    pub fn add_block(&mut self, values: &[f32]) {
        self.add_with(values.len(), |start, out| {
            out.copy_from_slice(&values[start..start + out.len()])
        });
    }

    /// Adds every value of `data` (whole spectrograms, frames last; f16/bf16 widened).
    pub fn add_output(&mut self, data: &OutputBuf) {
        use half::slice::HalfFloatSliceExt;
        match data {
            OutputBuf::F32(v) => self.add_block(v),
            OutputBuf::F16(v) => self.add_with(v.len(), |start, out| {
                v[start..start + out.len()].convert_to_f32_slice(out)
            }),
            OutputBuf::Bf16(v) => self.add_with(v.len(), |start, out| {
                v[start..start + out.len()].convert_to_f32_slice(out)
            }),
        }
    }

    /// Adds `len` values (whole spectrograms, frames last); `fill(start, out)` writes
    /// values `start..start + out.len()` as f32 (exact for every stored dtype), a run of
    /// whole spectrograms at a time, into a block. The block being filled is completed
    /// first; from [`PARALLEL_BLOCKS`] whole blocks on, those after it are computed in
    /// parallel (on the current rayon pool) and merged in order; the rest go one block at
    /// a time. Each block's figures are the same function of the same values whichever
    /// thread computes them, so the result is bit-identical for any thread count.
    fn add_with(&mut self, len: usize, fill: impl Fn(usize, &mut [f32]) + Sync) {
        let per = self.n_mels * self.frames;
        if per == 0 || len < per {
            return;
        }
        debug_assert_eq!(len % per, 0);
        let k = len / per;
        let mut first = 0;
        if self.filled > 0 {
            first = self.fill_pending(&fill, 0, k);
        }
        let whole = (k - first) / self.block;
        let threads = rayon::current_num_threads();
        if whole >= PARALLEL_BLOCKS && threads > 1 {
            let (block, n_mels, frames) = (self.block, self.n_mels, self.frames);
            // Each block's figures side by side in one buffer; blocks in runs of at least
            // `whole / threads`, so each thread widens into one buffer of its own.
            let mut parts = vec![0.0f64; 2 * n_mels * whole];
            parts
                .par_chunks_mut(2 * n_mels)
                .enumerate()
                .with_min_len(whole.div_ceil(threads))
                .for_each_init(
                    || (vec![0.0f32; block * per], Scratch::new(per)),
                    |(values, scratch), (b, out)| {
                        fill((first + b * block) * per, values);
                        block_moments(values, frames, scratch, out);
                    },
                );
            for part in parts.chunks_exact(2 * n_mels) {
                self.merge_part(part, block);
            }
            first += whole * block;
        }
        while first < k {
            first = self.fill_pending(&fill, first, k);
        }
    }

    /// Copies spectrograms `first..` (up to `k`) into the block being filled, closing it
    /// when full; returns the first spectrogram not taken.
    fn fill_pending(&mut self, fill: &impl Fn(usize, &mut [f32]), first: usize, k: usize) -> usize {
        let per = self.n_mels * self.frames;
        let run = (self.block - self.filled).min(k - first);
        let at = self.filled * per;
        fill(first * per, &mut self.pending[at..at + run * per]);
        self.filled += run;
        if self.filled == self.block {
            self.close_block();
        }
        first + run
    }

    /// Folds the block being filled into the totals.
    fn close_block(&mut self) {
        let per = self.n_mels * self.frames;
        let k = self.filled;
        if k == 0 || per == 0 {
            return;
        }
        let values = &self.pending[..k * per];
        block_moments(values, self.frames, &mut self.scratch, &mut self.block_part);
        let part = std::mem::take(&mut self.block_part);
        self.merge_part(&part, k);
        self.block_part = part;
        self.filled = 0;
    }

    /// Merges one block's figures (its means, then its m2; `spectrograms` of them) into
    /// the totals.
    fn merge_part(&mut self, part: &[f64], spectrograms: usize) {
        let (mean, m2) = part.split_at(self.n_mels);
        let other = StatsPart {
            count: (spectrograms * self.frames) as u64,
            mean,
            m2,
        };
        merge(&mut self.count, &mut self.mean, &mut self.m2, other);
    }

    /// Merges another accumulator's values (after this one's) into this one.
    pub fn merge(&mut self, other: &StatsAccumulator) {
        self.close_block();
        let mut other = other.clone();
        other.close_block();
        let part = StatsPart {
            count: other.count,
            mean: &other.mean,
            m2: &other.m2,
        };
        merge(&mut self.count, &mut self.mean, &mut self.m2, part);
    }

    /// Values seen per mel bin so far.
    pub fn count(&self) -> u64 {
        self.count + (self.filled * self.frames) as u64
    }

    /// The statistics (zeros and a count of 0 when nothing was added).
    pub fn finish(&self) -> MelStats {
        let mut all = self.clone();
        all.close_block();
        let n = all.count as f64;
        MelStats {
            std: all
                .m2
                .iter()
                .map(|&m2| if n > 0.0 { (m2 / n).sqrt() } else { 0.0 })
                .collect(),
            mean: all.mean,
            count: all.count,
        }
    }
}

/// Working space of one block: a sum and a centre per spectrogram position.
#[derive(Debug, Clone)]
struct Scratch {
    acc: Vec<f64>,
    centre: Vec<f64>,
}

impl Scratch {
    fn new(per: usize) -> Self {
        Scratch {
            acc: vec![0.0; per],
            centre: vec![0.0; per],
        }
    }
}

/// The figures of one block of whole spectrograms (`values`, frames last) into `part`:
/// each mel bin's mean, then each one's sum of squared deviations from it. Two passes (its mean, then its squared deviations from it), each summing every
/// position of a spectrogram in its own f64 accumulator, so the inner loops run across
/// positions, vectorise and carry no long dependency chain.
fn block_moments(values: &[f32], frames: usize, scratch: &mut Scratch, part: &mut [f64]) {
    let n_mels = part.len() / 2;
    let (part_mean, part_m2) = part.split_at_mut(n_mels);
    let per = n_mels * frames;
    let n = (values.len() / per * frames) as f64;
    let Scratch { acc, centre } = scratch;
    acc.fill(0.0);
    for spec in values.chunks_exact(per) {
        for (a, &x) in acc.iter_mut().zip(spec) {
            *a += x as f64;
        }
    }
    for ((sums, centres), mean) in acc
        .chunks_exact(frames)
        .zip(centre.chunks_exact_mut(frames))
        .zip(part_mean.iter_mut())
    {
        *mean = sums.iter().sum::<f64>() / n;
        centres.fill(*mean);
    }
    acc.fill(0.0);
    for spec in values.chunks_exact(per) {
        for ((a, &x), &c) in acc.iter_mut().zip(spec).zip(centre.iter()) {
            let d = x as f64 - c;
            *a += d * d;
        }
    }
    for (sums, m2) in acc.chunks_exact(frames).zip(part_m2.iter_mut()) {
        *m2 = sums.iter().sum();
    }
}

/// Whole blocks a call needs before they are computed in parallel (fewer: the hand-over
/// to the pool costs more than it saves; a leak-4k clip is 2 blocks, a batch of 512
/// clips 1,189).
const PARALLEL_BLOCKS: usize = 8;

/// Values per block of [`StatsAccumulator`] (64 KiB of f32: stays in L2; a spectrogram
/// larger than that is a block of its own).
const STATS_CHUNK_VALUES: usize = 16 << 10;

struct StatsPart<'a> {
    count: u64,
    mean: &'a [f64],
    m2: &'a [f64],
}

fn merge(count: &mut u64, mean: &mut [f64], m2: &mut [f64], other: StatsPart<'_>) {
    if other.count == 0 {
        return;
    }
    let (na, nb) = (*count as f64, other.count as f64);
    let n = na + nb;
    for m in 0..mean.len() {
        let delta = other.mean[m] - mean[m];
        mean[m] += delta * nb / n;
        m2[m] += other.m2[m] + delta * delta * na * nb / n;
    }
    *count += other.count;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blocks_and_merges_match_a_direct_computation() {
        let (n_mels, frames) = (3, 4);
        let values: Vec<f32> = (0..5 * n_mels * frames)
            .map(|i| 1000.0 + ((i * 37) % 23) as f32 * 0.25 - (i % 3) as f32)
            .collect();
        let per = n_mels * frames;
        let mut a = StatsAccumulator::new(n_mels, frames);
        a.add_block(&values[..2 * per]);
        let mut b = StatsAccumulator::new(n_mels, frames);
        b.add_block(&values[2 * per..3 * per]);
        b.add_block(&values[3 * per..]);
        a.merge(&b);
        let s = a.finish();
        assert_eq!(s.count, 5 * frames as u64);
        for m in 0..n_mels {
            let bin: Vec<f64> = (0..5)
                .flat_map(|k| &values[k * per + m * frames..k * per + (m + 1) * frames])
                .map(|&v| v as f64)
                .collect();
            let mean = bin.iter().sum::<f64>() / bin.len() as f64;
            let var = bin.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / bin.len() as f64;
            assert!((s.mean[m] - mean).abs() < 1e-12, "{} {mean}", s.mean[m]);
            assert!(
                (s.std[m] - var.sqrt()).abs() < 1e-12,
                "{} {}",
                s.std[m],
                var.sqrt()
            );
        }
    }

    /// A build's batch size, or where a resumed build's batches fell, must not change the
    /// stored statistics by a single bit (they differed by ~5e-15 between batch sizes).
    #[test]
    fn statistics_are_bit_identical_whatever_the_batches() {
        let (n_mels, frames) = (64, 40);
        let per = n_mels * frames;
        let clips = 37;
        let values: Vec<f32> = (0..clips * per)
            .map(|i| -80.0 + ((i * 7919) % 1009) as f32 * 0.0731 + (i % 13) as f32 * 1e-3)
            .collect();
        let run = |batch: usize| {
            let mut a = StatsAccumulator::new(n_mels, frames);
            for c in values.chunks(batch * per) {
                a.add_block(c);
            }
            a.finish()
        };
        let one = run(clips);
        for batch in [1, 2, 3, 5, 6, 7, 16, 36] {
            let s = run(batch);
            assert_eq!(s.count, one.count);
            let same =
                |a: &[f64], b: &[f64]| a.iter().zip(b).all(|(x, y)| x.to_bits() == y.to_bits());
            assert!(same(&s.mean, &one.mean), "batch {batch}: mean");
            assert!(same(&s.std, &one.std), "batch {batch}: std");
        }
    }

    /// The whole blocks of a call are computed in parallel: the figures must not depend
    /// on the number of threads, and must equal the serial path's (one spectrogram per
    /// call never completes a block inside a call).
    #[test]
    fn statistics_are_bit_identical_whatever_the_threads() {
        let (n_mels, frames) = (32, 5);
        let per = n_mels * frames;
        let clips = 3000;
        let values: Vec<half::f16> = (0..clips * per)
            .map(|i| half::f16::from_f32(-90.0 + ((i * 7919) % 1009) as f32 * 0.0731))
            .collect();
        let run = |threads: usize, batch: usize| {
            let pool = rayon::ThreadPoolBuilder::new()
                .num_threads(threads)
                .build()
                .expect("a pool");
            pool.install(|| {
                let mut a = StatsAccumulator::new(n_mels, frames);
                for c in values.chunks(batch * per) {
                    a.add_output(&OutputBuf::F16(c.to_vec()));
                }
                a.finish()
            })
        };
        let serial = run(1, 1);
        let bits = |v: &[f64]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
        // 3,000 spectrograms are 29 blocks of 102; 1,100 start a call inside a block and
        // still leave 10 whole ones (parallel from 8); 237 and 511 stay serial.
        for (threads, batch) in [
            (1, clips),
            (2, clips),
            (7, clips),
            (4, 1100),
            (4, 237),
            (3, 511),
        ] {
            let s = run(threads, batch);
            assert_eq!(s.count, serial.count);
            assert_eq!(
                bits(&s.mean),
                bits(&serial.mean),
                "{threads} threads, batch {batch}"
            );
            assert_eq!(
                bits(&s.std),
                bits(&serial.std),
                "{threads} threads, batch {batch}"
            );
        }
    }

    #[test]
    fn a_constant_bin_is_only_centred() {
        let s = MelStats {
            mean: vec![2.0, -1.0],
            std: vec![0.0, 4.0],
            count: 10,
        };
        assert_eq!(s.affine(), (vec![2.0, -1.0], vec![1.0, 0.25]));
    }

    #[test]
    fn output_buffers_of_uneven_batches_merge_to_the_two_pass_statistics() {
        // 7 spectrograms of 3 mels × 4 frames, values far from zero (as dB values are), in
        // f32 and in f16 (widened exactly), added 2 spectrograms at a time (the last alone).
        let values: Vec<f32> = (0..7 * 12)
            .map(|i| -60.0 + ((i * 37) % 23) as f32 * 0.75 + (i / 12) as f32)
            .collect();
        let halves: Vec<half::f16> = values.iter().map(|&v| half::f16::from_f32(v)).collect();
        for buffers in [
            values
                .chunks(24)
                .map(|c| OutputBuf::F32(c.to_vec()))
                .collect::<Vec<_>>(),
            halves
                .chunks(24)
                .map(|c| OutputBuf::F16(c.to_vec()))
                .collect(),
        ] {
            let mut a = StatsAccumulator::new(3, 4);
            buffers.iter().for_each(|b| a.add_output(b));
            let s = a.finish();
            assert_eq!(s.count, 7 * 4);
            for mel in 0..3 {
                let v: Vec<f64> = (0..7)
                    .flat_map(|sp| (0..4).map(move |f| sp * 12 + mel * 4 + f))
                    .map(|i| buffers[i / 24].get_f64(i % 24))
                    .collect();
                let mean = v.iter().sum::<f64>() / v.len() as f64;
                let var = v.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / v.len() as f64;
                assert!((s.mean[mel] - mean).abs() < 1e-12, "{mel}");
                assert!((s.std[mel] - var.sqrt()).abs() < 1e-12, "{mel}");
            }
        }
    }

    #[test]
    fn a_batch_larger_than_the_widening_buffer_gives_the_direct_statistics() {
        // 300 spectrograms of 32 mels × 5 frames (48,000 values: three widening chunks and
        // a partial one), bf16 and f32, against the direct two-pass figures.
        let (n_mels, frames, k) = (32, 5, 300);
        let per = n_mels * frames;
        let values: Vec<f32> = (0..k * per)
            .map(|i| -80.0 + ((i * 7919) % 1013) as f32 * 0.125 + (i % per) as f32 * 0.5)
            .collect();
        let bf16s: Vec<half::bf16> = values.iter().map(|&v| half::bf16::from_f32(v)).collect();
        for buf in [OutputBuf::F32(values.clone()), OutputBuf::Bf16(bf16s)] {
            let mut a = StatsAccumulator::new(n_mels, frames);
            a.add_output(&buf);
            let s = a.finish();
            assert_eq!(s.count, (k * frames) as u64);
            for m in 0..n_mels {
                let v: Vec<f64> = (0..k)
                    .flat_map(|sp| (0..frames).map(move |f| sp * per + m * frames + f))
                    .map(|i| buf.get_f64(i))
                    .collect();
                let mean = v.iter().sum::<f64>() / v.len() as f64;
                let var = v.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / v.len() as f64;
                assert!((s.mean[m] - mean).abs() < 1e-9, "{m}: {} {mean}", s.mean[m]);
                assert!((s.std[m] - var.sqrt()).abs() < 1e-9, "{m}");
            }
        }
    }

    #[test]
    fn spectrograms_larger_than_the_widening_buffer_and_repeated_calls_give_the_direct_statistics()
    {
        // 128 mels × 160 frames = 20,480 values per spectrogram (over the 16,384-value
        // buffer: widened one spectrogram at a time), in f16, added in three calls.
        let (n_mels, frames, k) = (128, 160, 5);
        let per = n_mels * frames;
        let values: Vec<half::f16> = (0..k * per)
            .map(|i| half::f16::from_f32(-50.0 + ((i * 7919) % 997) as f32 * 0.0625))
            .collect();
        let mut a = StatsAccumulator::new(n_mels, frames);
        for part in [&values[..per], &values[per..3 * per], &values[3 * per..]] {
            a.add_output(&OutputBuf::F16(part.to_vec()));
        }
        let s = a.finish();
        assert_eq!(s.count, (k * frames) as u64);
        for m in (0..n_mels).step_by(17) {
            let v: Vec<f64> = (0..k)
                .flat_map(|sp| (0..frames).map(move |f| sp * per + m * frames + f))
                .map(|i| values[i].to_f64())
                .collect();
            let mean = v.iter().sum::<f64>() / v.len() as f64;
            let var = v.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / v.len() as f64;
            assert!((s.mean[m] - mean).abs() < 1e-9, "{m}: {} {mean}", s.mean[m]);
            assert!((s.std[m] - var.sqrt()).abs() < 1e-9, "{m}");
        }
    }
}

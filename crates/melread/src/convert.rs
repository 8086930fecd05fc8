//! Stored bytes → output values: f16 and bf16 widened to f32 ([`crate::widen`]: F16C on
//! x86-64 where the CPU has it), optionally normalised per mel bin, or copied as stored.

use mel_core::Dtype;

use crate::widen::{self, RowMap};

use mel_core::stats::MelStats;

/// Per-mel-bin normalisation `(x - shift[m]) * scale[m]`, applied to whole spectrograms
/// `[.., n_mels, frames]`.
#[derive(Debug, Clone, PartialEq)]
pub struct Affine {
    shift: Vec<f32>,
    scale: Vec<f32>,
    frames: usize,
}

impl Affine {
    /// Normalisation by `stats` (mean and `1 / std`, see [`MelStats::affine`]) for
    /// spectrograms of `frames` frames.
    pub fn from_stats(stats: &MelStats, frames: usize) -> Affine {
        let (shift, scale) = stats.affine();
        Affine {
            shift,
            scale,
            frames,
        }
    }

    /// Whether `len` values are whole spectrograms of this normalisation's bins and
    /// frames (at least one frame).
    pub(crate) fn spans(&self, len: usize) -> bool {
        let per = self.shift.len() * self.frames;
        per > 0 && len.is_multiple_of(per)
    }

    /// Mel bins this normalisation is for.
    pub fn n_mels(&self) -> usize {
        self.shift.len()
    }

    /// Applies the normalisation in place to one spectrogram of `frames` frames (whatever
    /// the frames it was made for).
    pub fn apply_rows(&self, values: &mut [f32], frames: usize) {
        if frames == 0 {
            return;
        }
        for ((row, &s), &k) in values
            .chunks_exact_mut(frames)
            .zip(&self.shift)
            .zip(&self.scale)
        {
            for v in row {
                *v = (*v - s) * k;
            }
        }
    }

    /// The largest scale of any mel bin (`1 / std` of the smallest std).
    pub fn max_scale(&self) -> f32 {
        self.scale.iter().copied().fold(0.0, f32::max)
    }

    /// Mel bin `bin`'s scale (`1 / std`).
    pub fn scale(&self, bin: usize) -> f32 {
        self.scale[bin]
    }

    /// Mel bin `bin`'s shift (its mean) and scale: a value `x` becomes `(x − shift)·scale`.
    pub fn shift_scale(&self, bin: usize) -> (f32, f32) {
        (self.shift[bin], self.scale[bin])
    }

    /// Applies the normalisation in place to whole spectrograms.
    pub fn apply(&self, values: &mut [f32]) {
        let per = self.shift.len() * self.frames;
        if per == 0 {
            return;
        }
        for spec in values.chunks_exact_mut(per) {
            for ((row, &s), &k) in spec
                .chunks_exact_mut(self.frames)
                .zip(&self.shift)
                .zip(&self.scale)
            {
                for v in row {
                    *v = (*v - s) * k;
                }
            }
        }
    }
}

/// What a gain of `g` dB adds to the values of mel bin `bin` normalised by `norm`.
pub(crate) fn gain_in_bin(g: f32, norm: Option<&Affine>, bin: usize) -> f32 {
    norm.map_or(g, |n| g * n.scale(bin))
}

/// Where an item's values go.
pub(crate) enum OutSlice<'a> {
    /// Widened to f32 (f32 stays f32).
    F32(&'a mut [f32]),
    /// f16 / bf16 bit patterns as stored.
    Half(&'a mut [u16]),
}

impl OutSlice<'_> {
    pub(crate) fn len(&self) -> usize {
        match self {
            OutSlice::F32(v) => v.len(),
            OutSlice::Half(v) => v.len(),
        }
    }
}

/// Converts the little-endian `bytes` of `dtype` values into `out` (its length already
/// checked to match), normalising f32 output by `norm`. `halves` is scratch for bytes
/// that are not 2-byte aligned. Returns whether every stored value was finite (checked
/// before normalising; a file is never trusted to hold only what melctl writes).
pub(crate) fn convert(
    bytes: &[u8],
    dtype: Dtype,
    out: OutSlice<'_>,
    norm: Option<&Affine>,
    halves: &mut Vec<u16>,
) -> bool {
    convert_gained(bytes, dtype, out, (norm, None), halves)
}

/// [`convert`] with `gain` dB (if any) added to each f32 value after its normalisation
/// (scaled by it, as [`gain_in_bin`] says); f16 widened, normalised and
/// given its gain in one pass ([`widen::runs_mapped_by`], each mel bin's run by its map:
/// the bits of the steps one after another, `+ (−0)` where there is no gain).
pub(crate) fn convert_gained(
    bytes: &[u8],
    dtype: Dtype,
    out: OutSlice<'_>,
    (norm, gain): (Option<&Affine>, Option<f32>),
    halves: &mut Vec<u16>,
) -> bool {
    let spans = |len: usize| norm.is_none_or(|n| n.spans(len));
    match (dtype, out) {
        (Dtype::F16, OutSlice::F32(out))
            if (norm.is_some() || gain.is_some()) && spans(out.len()) =>
        {
            let (rows, len) = match norm {
                Some(n) => (out.len() / n.frames, n.frames),
                None => (1, out.len()),
            };
            let runs = widen::Runs {
                rows,
                len,
                src_stride: len,
                dst_stride: len,
            };
            let found = widen::runs_mapped_by(false, bytes, out, runs, |r| row_map(norm, gain, r));
            found.stored && found.normalised
        }
        (dtype, OutSlice::F32(out)) if gain.is_some() => {
            let finite = convert_gained(bytes, dtype, OutSlice::F32(out), (norm, None), halves);
            let g = gain.expect("checked just above");
            // Judged once gained too: a gain may overflow what normalising did not.
            let gained = match norm {
                Some(n) if n.frames > 0 => add_gain(out, n.frames, norm, g),
                _ => add_gain(out, out.len(), None, g),
            };
            finite && gained
        }
        (dtype, out) => convert_plain(bytes, dtype, out, norm, halves),
    }
}

/// Adds `g` dB to `values`, rows of `row` values, row `r` in mel bin `r % n_mels` of
/// `norm` (its share scaled by the bin's std: [`gain_in_bin`]); the same to every row
/// without a normalisation. A pass after the conversion, for what is not converted in one;
/// whether every value stays finite.
pub(crate) fn add_gain(values: &mut [f32], row: usize, norm: Option<&Affine>, g: f32) -> bool {
    let mut finite = true;
    for (r, row) in values.chunks_exact_mut(row.max(1)).enumerate() {
        let bin = norm.map_or(0, |n| r % n.n_mels());
        finite &= RowMap::Add(gain_in_bin(g, norm, bin)).apply_all(row);
    }
    finite
}

/// Row `r`'s map for a normalisation and a gain (rows of `norm`'s frames, mel bin `r %
/// n_mels`; one row without a normalisation).
pub(crate) fn row_map(norm: Option<&Affine>, gain: Option<f32>, r: usize) -> RowMap {
    match norm {
        Some(n) => {
            let b = r % n.n_mels();
            let (shift, scale) = n.shift_scale(b);
            let add = gain.map_or(-0.0, |g| gain_in_bin(g, norm, b));
            RowMap::Normalise { shift, scale, add }
        }
        None => gain.map_or(RowMap::Keep, RowMap::Add),
    }
}

/// [`convert`] in passes: widened or copied, then normalised.
fn convert_plain(
    bytes: &[u8],
    dtype: Dtype,
    out: OutSlice<'_>,
    norm: Option<&Affine>,
    halves: &mut Vec<u16>,
) -> bool {
    match (dtype, out) {
        (Dtype::F32, OutSlice::F32(out)) => {
            match bytemuck::try_cast_slice::<u8, f32>(bytes) {
                Ok(v) => out.copy_from_slice(v),
                Err(_) => {
                    for (o, b) in out.iter_mut().zip(bytes.chunks_exact(4)) {
                        *o = f32::from_le_bytes([b[0], b[1], b[2], b[3]]);
                    }
                }
            }
            let finite = all_finite_f32(out);
            normalised(out, norm) && finite
        }
        (Dtype::F32, OutSlice::Half(_)) => {
            unreachable!("f32 data is never copied into half-precision output")
        }
        (dtype, OutSlice::F32(out)) => {
            // Widening is exact, so the f32 values are finite exactly when the stored were.
            let finite = if dtype == Dtype::F16 {
                widen::f16_into(bytes, out)
            } else {
                widen::bf16_into(bytes, out)
            };
            normalised(out, norm) && finite
        }
        (dtype, OutSlice::Half(out)) => {
            out.copy_from_slice(aligned_u16(bytes, halves));
            all_finite_half(out, dtype)
        }
    }
}

/// Applies `norm` (if any) to `out`; whether the normalised values are still finite (a
/// value far from the mean over a tiny std could overflow f32).
pub(crate) fn normalised(out: &mut [f32], norm: Option<&Affine>) -> bool {
    match norm {
        Some(n) => {
            n.apply(out);
            all_finite_f32(out)
        }
        None => true,
    }
}

/// Whether no value is NaN or infinite: an all-ones exponent, tested without branches so
/// the loop vectorises.
fn all_finite_f32(values: &[f32]) -> bool {
    values.iter().fold(0u32, |acc, v| {
        acc | u32::from(v.to_bits() & 0x7f80_0000 == 0x7f80_0000)
    }) == 0
}

/// [`all_finite_f32`] for f16 or bf16 bit patterns.
fn all_finite_half(bits: &[u16], dtype: Dtype) -> bool {
    let exponent: u16 = if dtype == Dtype::F16 { 0x7c00 } else { 0x7f80 };
    bits.iter()
        .fold(0u16, |acc, &b| acc | u16::from(b & exponent == exponent))
        == 0
}

/// `bytes` as u16 values: borrowed when aligned, else copied into `scratch`.
fn aligned_u16<'a>(bytes: &'a [u8], scratch: &'a mut Vec<u16>) -> &'a [u16] {
    match bytemuck::try_cast_slice::<u8, u16>(bytes) {
        Ok(v) => v,
        Err(_) => {
            scratch.clear();
            scratch.extend(
                bytes
                    .chunks_exact(2)
                    .map(|b| u16::from_le_bytes([b[0], b[1]])),
            );
            scratch
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use half::{bf16, f16};

    /// f16 converted with a normalisation and a gain (one pass) gives the bits of widening,
    /// normalising and adding each bin's gain (three passes), −0 included, for one to
    /// three spectrograms of every width up to 20 frames; the verdict says no for a stored
    /// infinity or NaN and for a normalised overflow, anywhere.
    #[test]
    fn normalising_as_widened_equals_widening_then_normalising() {
        let stats = |bins: usize, std: f64| MelStats {
            count: 10,
            mean: (0..bins).map(|b| b as f64 * 0.5 - 1.0).collect(),
            std: (0..bins).map(|b| std * (1.0 + b as f64 * 0.1)).collect(),
        };
        for (bins, frames, specs) in (1..=20).flat_map(|f| [(3, f, 1), (5, f, 2), (2, f, 3)]) {
            let n = Affine::from_stats(&stats(bins, 0.37), frames);
            let len = bins * frames * specs;
            let vals: Vec<f32> = (0..len)
                .map(|k| match k % 11 {
                    0 => -0.0,
                    1 => n.shift[(k / frames) % bins],
                    _ => ((k * 37) % 101) as f32 * 0.41 - 20.0,
                })
                .collect();
            let mut bits: Vec<u16> = vals.iter().map(|&v| f16::from_f32(v).to_bits()).collect();
            let bytes =
                |bits: &[u16]| -> Vec<u8> { bits.iter().flat_map(|b| b.to_le_bytes()).collect() };
            let mut halves = Vec::new();
            // One pass of `bits` through `convert_gained` into `got`.
            let one_pass = |bits: &[u16], how, got: &mut [f32], halves: &mut Vec<u16>| {
                convert_gained(&bytes(bits), Dtype::F16, OutSlice::F32(got), how, halves)
            };
            let mut want = vec![0f32; len];
            assert!(widen::f16_into(&bytes(&bits), &mut want));
            n.apply(&mut want);
            let mut got = vec![f32::MIN; len];
            let fine = one_pass(&bits, (Some(&n), None), &mut got, &mut halves);
            let as_bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
            assert!(fine, "{bins} bins, {frames} frames");
            assert_eq!(
                as_bits(&got),
                as_bits(&want),
                "{bins} bins, {frames} frames"
            );
            // With a gain, normalised or not: each row then gets its bin's share.
            for norm in [Some(&n), None] {
                let mut want = vec![0f32; len];
                assert!(widen::f16_into(&bytes(&bits), &mut want));
                if let Some(n) = norm {
                    n.apply(&mut want);
                }
                for (r, row) in want.chunks_exact_mut(frames).enumerate() {
                    let d = gain_in_bin(-4.5, norm, r % bins);
                    row.iter_mut().for_each(|x| *x += d);
                }
                let fine = one_pass(&bits, (norm, Some(-4.5)), &mut got, &mut halves);
                assert!(fine, "{bins} bins, {frames} frames, gain");
                assert_eq!(as_bits(&got), as_bits(&want), "gain, {norm:?}");
            }
            for at in [0, len / 2, len - 1] {
                let keep = bits[at];
                bits[at] = 0xfc00;
                let fine = one_pass(&bits, (Some(&n), None), &mut got, &mut halves);
                assert!(!fine, "a stored −∞ at {at}");
                bits[at] = keep;
            }
            let tiny = Affine::from_stats(&stats(bins, 1e-38), frames);
            let fine = one_pass(&bits, (Some(&tiny), None), &mut got, &mut halves);
            assert!(!fine, "a normalised overflow");
        }
    }

    #[test]
    fn widening_is_exact_aligned_or_not() {
        let vals = [1.5f32, -0.25, 65504.0, 0.0, -3.0];
        let f16s: Vec<u8> = vals
            .iter()
            .flat_map(|&v| f16::from_f32(v).to_le_bytes())
            .collect();
        let bf16s: Vec<u8> = vals
            .iter()
            .flat_map(|&v| bf16::from_f32(v).to_le_bytes())
            .collect();
        let f32s: Vec<u8> = vals.iter().flat_map(|&v| v.to_le_bytes()).collect();
        let mut scratch = Vec::new();
        for (bytes, dtype) in [(f16s, Dtype::F16), (bf16s, Dtype::Bf16), (f32s, Dtype::F32)] {
            // The same bytes at an odd address take the unaligned path.
            let mut shifted = vec![0u8; bytes.len() + 1];
            shifted[1..].copy_from_slice(&bytes);
            for b in [&bytes[..], &shifted[1..]] {
                let mut out = [0f32; 5];
                convert(b, dtype, OutSlice::F32(&mut out), None, &mut scratch);
                let expect: Vec<f32> = match dtype {
                    Dtype::Bf16 => vals.iter().map(|&v| bf16::from_f32(v).to_f32()).collect(),
                    _ => vals.to_vec(),
                };
                assert_eq!(out.to_vec(), expect, "{dtype:?}");
            }
        }
    }

    #[test]
    fn normalisation_is_per_mel_bin() {
        let stats = MelStats {
            mean: vec![1.0, 10.0],
            std: vec![2.0, 0.0],
            count: 4,
        };
        let n = Affine::from_stats(&stats, 3);
        let mut v = vec![
            1.0, 3.0, 5.0, 10.0, 11.0, 12.0, 3.0, 3.0, 3.0, 9.0, 9.0, 9.0,
        ];
        n.apply(&mut v);
        assert_eq!(
            v,
            vec![
                0.0, 1.0, 2.0, 0.0, 1.0, 2.0, 1.0, 1.0, 1.0, -1.0, -1.0, -1.0
            ]
        );
    }
}

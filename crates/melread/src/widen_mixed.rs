//! A pair of items that mixup mixes, widened from their stored f16 runs, mapped (normalised,
//! given a gain) and mixed in one pass: each output value is stored once, as
//! `w·u + (1 − w)·v` of the two members' mapped values, instead of each member being widened
//! into the batch and a second pass loading and storing both again.
//!
//! The separate pass cost mixup 37–47% of a bucket epoch; one kernel costs less than
//! widening the two members apart (`examples/mix_bench.rs`: 0.27 against 0.30 ns a value,
//! apart and mixed after 0.42; docs/bench-log/journal.md, 2026-11-29). Each step is rounded
//! as the steps done one after another are (no FMA), so the values are the same bits.

use crate::widen::{Finite, RowMap};

/// One member of a mixed pair's runs: run `r` of its stored f16 values starts at value
/// `r·stride` of `src` (a stride of 0 reads one run for every row: a run of zeros stands
/// for padding), is mapped by `maps[r]` (empty: kept as widened) and mixed with weight
/// `weight` (its partner's values weighing `1 − weight`).
#[derive(Debug, Clone, Copy)]
pub struct Member<'a> {
    /// The stored little-endian f16 bytes (two a value, any alignment).
    pub src: &'a [u8],
    /// Values from one run's start to the next's in `src`.
    pub stride: usize,
    /// Each run's map, or none (every run kept).
    pub maps: &'a [RowMap],
    /// The member's own share of its output (mixup's λ).
    pub weight: f32,
}

/// The runs to write: `rows` runs of `len` values each, `dst_stride` apart in each output.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PairRuns {
    /// Runs per member.
    pub rows: usize,
    /// Values in each run.
    pub len: usize,
    /// Values from one run's start to the next's in each output.
    pub dst_stride: usize,
}

impl Member<'_> {
    /// Panics unless every run lies within `src` and the maps are none or one a row.
    fn check(&self, runs: PairRuns) {
        if runs.rows == 0 || runs.len == 0 {
            return;
        }
        assert!(
            2 * ((runs.rows - 1) * self.stride + runs.len) <= self.src.len(),
            "runs {runs:?} of stride {} beyond a source of {} bytes",
            self.stride,
            self.src.len()
        );
        assert!(
            self.maps.is_empty() || self.maps.len() == runs.rows,
            "{} maps for {} runs",
            self.maps.len(),
            runs.rows
        );
    }

    /// The stored bytes of run `r`.
    fn run(&self, r: usize, len: usize) -> &[u8] {
        &self.src[2 * r * self.stride..2 * (r * self.stride + len)]
    }

    /// Run `r`'s map as `(shift, scale, add)`: `(x − shift)·scale + add`, the same bits as
    /// [`RowMap::apply`] (`x − 0`, `x·1` and `x + (−0)` are `x` exactly).
    fn affine(&self, r: usize) -> (f32, f32, f32) {
        match self.maps.get(r).copied().unwrap_or(RowMap::Keep) {
            RowMap::Keep => (0.0, 1.0, -0.0),
            RowMap::Add(d) => (0.0, 1.0, d),
            RowMap::Normalise { shift, scale, add } => (shift, scale, add),
        }
    }
}

/// Widens, maps and mixes a pair's runs: output `k`'s value is
/// `w_k·m_k + (1 − w_k)·m_other`, each `m` the member's widened value mapped by its run's
/// map. Returns each member's verdict: `stored` whether every value read was finite,
/// `normalised` whether every value was finite after its map's normalising step (its
/// value as stored where the map does not normalise). Panics if a run lies outside a
/// source or an output.
pub fn pair_mixed_into(
    members: [Member<'_>; 2],
    dst: [&mut [f32]; 2],
    runs: PairRuns,
) -> [Finite; 2] {
    for m in &members {
        m.check(runs);
    }
    if runs.rows > 0 && runs.len > 0 {
        let need = (runs.rows - 1) * runs.dst_stride + runs.len;
        for d in &dst {
            assert!(
                need <= d.len(),
                "runs {runs:?} beyond an output of {} values",
                d.len()
            );
        }
    }
    #[cfg(target_arch = "x86_64")]
    if crate::widen::has_f16c() {
        let [dx, dy] = dst;
        // SAFETY: the CPU has AVX and F16C (checked just above); every run lies within
        // its source and output (checked above).
        if unsafe { x86::pair_mixed_into(members, [&mut *dx, &mut *dy], runs) } {
            return [Finite::default(); 2];
        }
        // Something is not finite (or a tail's unused lane overflowed): the loop value
        // by value writes the same bits and says which member, and whether as stored.
        return pair_mixed_portable(members, [dx, dy], runs);
    }
    pair_mixed_portable(members, dst, runs)
}

/// [`pair_mixed_into`] one value at a time (for CPUs without F16C, and the reference the
/// tests compare the kernel with).
pub fn pair_mixed_portable(
    members: [Member<'_>; 2],
    dst: [&mut [f32]; 2],
    runs: PairRuns,
) -> [Finite; 2] {
    let [x, y] = members;
    let [dx, dy] = dst;
    let mut found = [Finite::default(); 2];
    let (cx, cy) = (1.0 - x.weight, 1.0 - y.weight);
    for r in 0..runs.rows {
        let (mx, my) = (x.affine(r), y.affine(r));
        let (sx, sy) = (x.run(r, runs.len), y.run(r, runs.len));
        let at = r * runs.dst_stride;
        let (ox, oy) = (&mut dx[at..at + runs.len], &mut dy[at..at + runs.len]);
        for i in 0..runs.len {
            let u = widened(sx, i, mx, &mut found[0]);
            let v = widened(sy, i, my, &mut found[1]);
            ox[i] = x.weight * u + cx * v;
            oy[i] = y.weight * v + cy * u;
        }
    }
    found
}

/// Value `i` of a run widened and mapped by `(shift, scale, add)`, its verdicts noted.
#[inline(always)]
fn widened(run: &[u8], i: usize, (shift, scale, add): (f32, f32, f32), found: &mut Finite) -> f32 {
    let bits = u16::from_le_bytes([run[2 * i], run[2 * i + 1]]);
    found.stored &= bits & 0x7c00 != 0x7c00;
    let y = (half::f16::from_bits(bits).to_f32() - shift) * scale;
    found.normalised &= y.is_finite();
    y + add
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use std::arch::x86_64::{
        __m256, __m256i, _mm256_add_ps, _mm256_castps_si256, _mm256_cvtph_ps, _mm256_maskstore_ps,
        _mm256_mul_ps, _mm256_or_ps, _mm256_set1_ps, _mm256_setzero_ps, _mm256_storeu_ps,
        _mm256_sub_ps, _mm256_testz_si256,
    };

    use super::{Member, PairRuns};

    /// Lanes `0..k` all ones, the rest zero, for `k` in `0..=8`: `LANES[8 - k..16 - k]`.
    const LANES: [u32; 16] = [
        u32::MAX,
        u32::MAX,
        u32::MAX,
        u32::MAX,
        u32::MAX,
        u32::MAX,
        u32::MAX,
        u32::MAX,
        0,
        0,
        0,
        0,
        0,
        0,
        0,
        0,
    ];

    /// A run's map in registers.
    #[derive(Clone, Copy)]
    struct Affine {
        shift: __m256,
        scale: __m256,
        add: __m256,
    }

    /// Eight stored values widened and mapped; `y − y` of the normalised values ORed into
    /// `seen` (zero for a finite value, a NaN for an infinity or a NaN, stored or
    /// normalised: one subtraction, no constant held in a register).
    #[target_feature(enable = "avx,f16c")]
    #[inline]
    fn widen_map(h: [u8; 16], m: Affine, seen: &mut __m256) -> __m256 {
        let y = _mm256_mul_ps(
            _mm256_sub_ps(_mm256_cvtph_ps(bytemuck::cast(h)), m.shift),
            m.scale,
        );
        *seen = _mm256_or_ps(*seen, _mm256_sub_ps(y, y));
        _mm256_add_ps(y, m.add)
    }

    /// [`super::pair_mixed_into`] with F16C, eight values of each member a step, each run's
    /// last 0–7 through zeroed lane buffers. Returns whether every value (and every zero
    /// of a tail's unused lanes) was finite as stored and normalised; the verdicts per
    /// member are left to the caller, which needs them only where this says no.
    ///
    /// # Safety
    /// Every run of both sources and both outputs lies within them ([`Member::check`]
    /// and the output check of the caller), and the CPU has AVX and F16C.
    #[target_feature(enable = "avx,f16c")]
    pub(super) unsafe fn pair_mixed_into(
        members: [Member<'_>; 2],
        dst: [&mut [f32]; 2],
        runs: PairRuns,
    ) -> bool {
        let [x, y] = members;
        let [dx, dy] = dst;
        let mut seen = _mm256_setzero_ps();
        let k = runs.len % 8;
        let set = |v: f32| _mm256_set1_ps(v);
        let (wx, cx, wy, cy) = (
            set(x.weight),
            set(1.0 - x.weight),
            set(y.weight),
            set(1.0 - y.weight),
        );
        let affine = |m: &Member<'_>, r: usize| {
            let (shift, scale, add) = m.affine(r);
            Affine {
                shift: set(shift),
                scale: set(scale),
                add: set(add),
            }
        };
        let mix = |u: __m256, v: __m256| {
            (
                _mm256_add_ps(_mm256_mul_ps(wx, u), _mm256_mul_ps(cx, v)),
                _mm256_add_ps(_mm256_mul_ps(wy, v), _mm256_mul_ps(cy, u)),
            )
        };
        let len = runs.len;
        let first_k: __m256i =
            bytemuck::cast::<[u32; 8], _>(LANES[8 - k..16 - k].try_into().expect("eight lanes"));
        for r in 0..runs.rows {
            let (mx, my) = (affine(&x, r), affine(&y, r));
            // SAFETY: the caller checked that run `r` of each source lies within it
            // (`2·(r·stride + len)` bytes) and of each output within it (`r·dst_stride +
            // len` values); the loads are unaligned, the two outputs distinct slices.
            unsafe {
                let (sx, sy) = (
                    x.src.as_ptr().add(2 * r * x.stride),
                    y.src.as_ptr().add(2 * r * y.stride),
                );
                let at = r * runs.dst_stride;
                let (ox, oy) = (dx.as_mut_ptr().add(at), dy.as_mut_ptr().add(at));
                let mut i = 0;
                while i + 8 <= len {
                    let u = widen_map(
                        sx.add(2 * i).cast::<[u8; 16]>().read_unaligned(),
                        mx,
                        &mut seen,
                    );
                    let v = widen_map(
                        sy.add(2 * i).cast::<[u8; 16]>().read_unaligned(),
                        my,
                        &mut seen,
                    );
                    let (a, b) = mix(u, v);
                    _mm256_storeu_ps(ox.add(i), a);
                    _mm256_storeu_ps(oy.add(i), b);
                    i += 8;
                }
                if k > 0 {
                    // The run's last k values: where sixteen bytes from them lie within
                    // the source, loaded as they are (the lanes past the run are the
                    // next values stored: finite, and at worst a false alarm that the
                    // caller's value-by-value pass settles), else through a zeroed
                    // buffer; stored through the mask of the first k lanes.
                    let tail = |m: &Member<'_>, s: *const u8| -> [u8; 16] {
                        let from = 2 * (r * m.stride + i);
                        match from + 16 <= m.src.len() {
                            true => s.add(2 * i).cast::<[u8; 16]>().read_unaligned(),
                            false => {
                                let mut h = [0u8; 16];
                                h[..2 * k].copy_from_slice(&m.src[from..from + 2 * k]);
                                h
                            }
                        }
                    };
                    let u = widen_map(tail(&x, sx), mx, &mut seen);
                    let v = widen_map(tail(&y, sy), my, &mut seen);
                    let (a, b) = mix(u, v);
                    _mm256_maskstore_ps(ox.add(i), first_k, a);
                    _mm256_maskstore_ps(oy.add(i), first_k, b);
                }
            }
        }
        // Every bit zero: no lane saw a NaN (of either sign).
        let seen = _mm256_castps_si256(seen);
        _mm256_testz_si256(seen, seen) == 1
    }
}

#[cfg(test)]
mod tests {
    use half::f16;

    use super::*;

    /// Stored f16 bytes of `values`.
    fn stored(values: &[f32]) -> Vec<u8> {
        values
            .iter()
            .flat_map(|&v| f16::from_f32(v).to_bits().to_le_bytes())
            .collect()
    }

    /// The loader's steps one after another: each member widened and mapped (padding: a
    /// zero, not mapped), then `a ← wx·u + (1 − wx)·v`, `b ← wy·v + (1 − wy)·u`.
    fn apart(members: [Member<'_>; 2], zero: [bool; 2], runs: PairRuns) -> [Vec<f32>; 2] {
        let n = (runs.rows - 1) * runs.dst_stride + runs.len;
        let mut out = [vec![f32::MIN; n], vec![f32::MIN; n]];
        for r in 0..runs.rows {
            for i in 0..runs.len {
                let val = |k: usize| {
                    let m = members[k];
                    if zero[k] {
                        return 0.0;
                    }
                    let at = 2 * (r * m.stride + i);
                    let x = f16::from_bits(u16::from_le_bytes([m.src[at], m.src[at + 1]])).to_f32();
                    m.maps.get(r).copied().unwrap_or(RowMap::Keep).apply(x).0
                };
                let (u, v) = (val(0), val(1));
                let (wx, wy) = (members[0].weight, members[1].weight);
                out[0][r * runs.dst_stride + i] = wx * u + (1.0 - wx) * v;
                out[1][r * runs.dst_stride + i] = wy * v + (1.0 - wy) * u;
            }
        }
        out
    }

    fn bits(v: &[f32]) -> Vec<u32> {
        v.iter().map(|x| x.to_bits()).collect()
    }

    /// Every kind of map on either side (sources ending where the last run does, so that
    /// tails are read both ways), a padding member (zeros, stride 0) on either side,
    /// weights of 1 and between, lengths with and without a tail, outputs at every
    /// alignment: the kernel and the portable loop give the bits of the steps apart, and
    /// write nothing outside the runs.
    #[test]
    fn one_pass_equals_widening_mapping_then_mixing() {
        let (rows, block, stride) = (4usize, 40usize, 45usize);
        let values: Vec<f32> = (0..rows * block)
            .map(|k| ((k * 53) % 97) as f32 * 0.41 - 20.0 + if k % 13 == 0 { -0.0 } else { 0.0 })
            .collect();
        let mut signed = values.clone();
        signed[5] = -0.0;
        let (a, b) = (
            stored(&signed),
            stored(&values.iter().rev().copied().collect::<Vec<_>>()),
        );
        let zeros = vec![0u8; 2 * block];
        let maps = [
            RowMap::Keep,
            RowMap::Add(-2.5),
            RowMap::Normalise {
                shift: -3.0,
                scale: 0.2,
                add: 0.0,
            },
            RowMap::Normalise {
                shift: 1.5,
                scale: 3.0,
                add: 1.25,
            },
        ];
        let turned: Vec<RowMap> = maps.iter().rev().copied().collect();
        let (srcs, map_sets): ([&[u8]; 2], [&[RowMap]; 2]) = ([&a, &b], [&maps, &turned]);
        for (len, offset, w, padded) in [1usize, 7, 8, 9, 16, 23, 32, 40]
            .into_iter()
            .flat_map(|len| (0..3).map(move |o| (len, o)))
            .flat_map(|(l, o)| [[1.0f32, 0.25], [0.7, 0.3], [0.0, 1.0]].map(|w| (l, o, w)))
            .flat_map(|(l, o, w)| {
                [[false, false], [true, false], [false, true]].map(|p| (l, o, w, p))
            })
        {
            let runs = PairRuns {
                rows,
                len,
                dst_stride: stride,
            };
            let members = [0, 1].map(|k| match padded[k] {
                true => Member {
                    src: &zeros,
                    stride: 0,
                    maps: &[],
                    weight: w[k],
                },
                false => Member {
                    src: &srcs[k][..2 * ((rows - 1) * block + len)],
                    stride: block,
                    maps: map_sets[k],
                    weight: w[k],
                },
            });
            let case = format!("len {len}, offset {offset}, weights {w:?}, padded {padded:?}");
            let want = apart(members, padded, runs);
            let n = want[0].len();
            for which in ["kernel", "portable"] {
                let (mut x, mut y) = (vec![f32::MIN; n + offset], vec![f32::MIN; n + offset]);
                let out = [&mut x[offset..], &mut y[offset..]];
                let found = match which {
                    "kernel" => pair_mixed_into(members, out, runs),
                    _ => pair_mixed_portable(members, out, runs),
                };
                assert_eq!(bits(&x[offset..]), bits(&want[0]), "{which}: {case}");
                assert_eq!(bits(&y[offset..]), bits(&want[1]), "{which}: {case}");
                assert!(
                    x[..offset]
                        .iter()
                        .chain(&y[..offset])
                        .all(|&v| v == f32::MIN)
                );
                assert_eq!(found, [Finite::default(); 2], "{which}: {case}");
            }
        }
    }

    /// An infinity stored in either member, in the body or a tail, and a normalised value
    /// that overflows, are each that member's verdict only; the zero lanes filling a tail
    /// are not judged (a map that overflows on zero).
    #[test]
    fn verdicts_are_each_members_and_only_of_real_lanes() {
        let len = 21; // two eight-value steps and a tail of five
        let fine = stored(&vec![2.0; len]);
        let runs = PairRuns {
            rows: 1,
            len,
            dst_stride: len,
        };
        for which in ["kernel", "portable"] {
            let run = |m: [Member<'_>; 2]| {
                let (mut x, mut y) = (vec![0f32; len], vec![0f32; len]);
                match which {
                    "kernel" => pair_mixed_into(m, [&mut x, &mut y], runs),
                    _ => pair_mixed_portable(m, [&mut x, &mut y], runs),
                }
            };
            fn plain(src: &[u8]) -> Member<'_> {
                Member {
                    src,
                    stride: 21,
                    maps: &[],
                    weight: 0.5,
                }
            }
            // An infinity, and NaNs of either sign, in the body and in the tail.
            for (at, pattern) in [3usize, 19]
                .into_iter()
                .flat_map(|a| [0x7c00u16, 0xfc00, 0x7e00, 0xfe01, 0x7c01].map(|p| (a, p)))
            {
                let mut bad = vec![f16::from_f32(2.0).to_bits(); len];
                bad[at] = pattern;
                let bad: Vec<u8> = bad.iter().flat_map(|b| b.to_le_bytes()).collect();
                let [x, y] = run([plain(&fine), plain(&bad)]);
                assert!(x.stored && !y.stored, "{which}, at {at}, {pattern:#06x}");
                let [x, y] = run([plain(&bad), plain(&fine)]);
                assert!(!x.stored && y.stored, "{which}, at {at}");
                let mut big = vec![f16::from_f32(1.0).to_bits(); len];
                big[at] = f16::from_f32(-60000.0).to_bits();
                let big: Vec<u8> = big.iter().flat_map(|b| b.to_le_bytes()).collect();
                let huge = [RowMap::Normalise {
                    shift: 1.0,
                    scale: 1e35,
                    add: 0.0,
                }];
                let m = Member {
                    maps: &huge,
                    ..plain(&big)
                };
                let [x, y] = run([plain(&fine), m]);
                assert!(
                    x.normalised && y.stored && !y.normalised,
                    "{which}, at {at}"
                );
            }
            // Zero overflows this map; the tail's unused lanes hold zeros.
            let high = stored(&vec![60000.0; len]);
            let tight = [RowMap::Normalise {
                shift: 60000.0,
                scale: 1e35,
                add: 0.0,
            }];
            let m = Member {
                maps: &tight,
                ..plain(&high)
            };
            assert_eq!(run([m, plain(&fine)]), [Finite::default(); 2], "{which}");
        }
    }

    #[test]
    #[should_panic(expected = "beyond a source")]
    fn a_run_beyond_a_source_panics_before_reading() {
        let runs = PairRuns {
            rows: 2,
            len: 8,
            dst_stride: 8,
        };
        let m = Member {
            src: &[0u8; 30],
            stride: 8,
            maps: &[],
            weight: 0.5,
        };
        pair_mixed_into([m, m], [&mut [0f32; 16], &mut [0f32; 16]], runs);
    }
}

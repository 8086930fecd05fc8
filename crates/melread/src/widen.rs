//! Stored half-precision bytes widened to f32, each value's finiteness judged in the same
//! pass, for runs of any length and any alignment.
//!
//! `half`'s slice conversion does the widening with F16C too, but it is built for long
//! slices: each call detects the CPU, and each group of 8 values goes through a copy
//! in, a function call and a copy out. A whole clip is read as one run of at most
//! [`BLOCK_FRAMES`](mel_core::plan::BLOCK_FRAMES) values per mel bin per block, so those
//! per-call and per-group costs were most of the reader's time (46% + 11% of a bucket
//! epoch's profile). Here the F16C loop is inlined, loads straight from the stored bytes
//! (no aligned copy) and tests each value's exponent as it goes (no second pass over the
//! f32 output). Measured against `half` by `examples/widen_bench.rs`
//! (docs/bench-log/journal.md, 2026-11-29).

use half::f16;
use half::slice::HalfFloatSliceExt;

/// Widens the little-endian f16 values in `src` (two bytes each, any alignment) into
/// `dst`, one per value; whether every value was finite (not infinite, not NaN).
/// Widening is exact. Panics if `src` does not hold exactly `dst.len()` values.
pub fn f16_into(src: &[u8], dst: &mut [f32]) -> bool {
    assert_eq!(src.len(), 2 * dst.len(), "f16 bytes for every output value");
    #[cfg(target_arch = "x86_64")]
    if has_f16c() {
        // SAFETY: the CPU has AVX and F16C (checked just above), the features the
        // function is compiled with.
        return unsafe { x86::f16_into(src, dst) };
    }
    f16_into_portable(src, dst)
}

/// Runs of values laid out with strides: `rows` runs of `len` values, the `r`-th from
/// value `r * src_stride` of the source and to value `r * dst_stride` of the output.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Runs {
    /// Runs to widen.
    pub rows: usize,
    /// Values in each run.
    pub len: usize,
    /// Values from one run's start to the next's in the source.
    pub src_stride: usize,
    /// Values from one run's start to the next's in the output.
    pub dst_stride: usize,
}

impl Runs {
    /// Panics unless every run lies within `src` (2 bytes a value) and `dst`.
    fn check(&self, src: &[u8], dst: &[f32]) {
        if self.rows == 0 || self.len == 0 {
            return;
        }
        let last = self.rows - 1;
        assert!(
            2 * (last * self.src_stride + self.len) <= src.len()
                && last * self.dst_stride + self.len <= dst.len(),
            "runs {self:?} beyond a source of {} bytes or an output of {} values",
            src.len(),
            dst.len()
        );
    }

    /// Calls `f` on each run: its source bytes and its output values (the runs checked
    /// within both by the caller); whether every call found its run finite.
    #[inline(always)]
    fn each(
        self,
        src: &[u8],
        dst: &mut [f32],
        mut f: impl FnMut(&[u8], &mut [f32]) -> bool,
    ) -> bool {
        let mut finite = true;
        for r in 0..self.rows {
            let (s, d) = (r * self.src_stride, r * self.dst_stride);
            finite &= f(&src[2 * s..2 * (s + self.len)], &mut dst[d..d + self.len]);
        }
        finite
    }
}

/// [`f16_into`] for many runs at once (a block's mel bins into a batch's rows): one
/// check of the CPU and of the bounds for all of them; whether every value read was
/// finite. Panics if a run lies outside `src` or `dst`.
pub fn f16_runs_into(src: &[u8], dst: &mut [f32], runs: Runs) -> bool {
    runs.check(src, dst);
    #[cfg(target_arch = "x86_64")]
    if has_f16c() {
        // SAFETY: the CPU has AVX and F16C (checked just above).
        return unsafe { x86::f16_runs_into(src, dst, runs) };
    }
    runs.each(src, dst, f16_into_portable)
}

/// [`bf16_into`] for many runs at once; whether every value read was finite. Panics if
/// a run lies outside `src` or `dst`.
pub fn bf16_runs_into(src: &[u8], dst: &mut [f32], runs: Runs) -> bool {
    runs.check(src, dst);
    runs.each(src, dst, bf16_into)
}

/// Widens the little-endian bf16 values in `src` into `dst` (a bf16 is the top half of
/// an f32, so widening is a shift); whether every value was finite. Plain Rust that the
/// compiler vectorises. Panics if `src` does not hold exactly `dst.len()` values.
pub fn bf16_into(src: &[u8], dst: &mut [f32]) -> bool {
    assert_eq!(
        src.len(),
        2 * dst.len(),
        "bf16 bytes for every output value"
    );
    let mut bad = 0u16;
    for (o, b) in dst.iter_mut().zip(src.chunks_exact(2)) {
        let bits = u16::from_le_bytes([b[0], b[1]]);
        bad |= u16::from(bits & 0x7f80 == 0x7f80);
        *o = f32::from_bits(u32::from(bits) << 16);
    }
    bad == 0
}

/// [`f16_into`] through `half`'s slice conversion (for CPUs without F16C, and as the
/// reference the tests and the benchmark compare with).
pub fn f16_into_portable(src: &[u8], dst: &mut [f32]) -> bool {
    assert_eq!(src.len(), 2 * dst.len(), "f16 bytes for every output value");
    let mut bits = [0u16; 64];
    let mut bad = 0u16;
    for (s, d) in src.chunks(2 * bits.len()).zip(dst.chunks_mut(bits.len())) {
        let bits = &mut bits[..d.len()];
        for (x, b) in bits.iter_mut().zip(s.chunks_exact(2)) {
            *x = u16::from_le_bytes([b[0], b[1]]);
            bad |= u16::from(*x & 0x7c00 == 0x7c00);
        }
        half::slice::HalfBitsSliceExt::reinterpret_cast::<f16>(&*bits).convert_to_f32_slice(d);
    }
    bad == 0
}

/// Whether this CPU has AVX: loops compiled for it (`#[target_feature(enable = "avx")]`,
/// eight lanes a step instead of four; no FMA, so the same bits) may run.
#[cfg(target_arch = "x86_64")]
pub(crate) fn has_avx() -> bool {
    std::arch::is_x86_feature_detected!("avx")
}

/// Whether this CPU runs the F16C kernel (AVX and F16C).
#[cfg(target_arch = "x86_64")]
fn has_f16c() -> bool {
    std::arch::is_x86_feature_detected!("avx") && std::arch::is_x86_feature_detected!("f16c")
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use std::arch::x86_64::{
        __m128i, _mm_and_si128, _mm_cmpeq_epi16, _mm_movemask_epi8, _mm_or_si128, _mm_set1_epi16,
        _mm_setzero_si128, _mm256_cvtph_ps,
    };

    /// [`f16_into`] over each run of `runs` (checked within both slices by the caller).
    #[target_feature(enable = "avx,f16c")]
    pub(super) fn f16_runs_into(src: &[u8], dst: &mut [f32], runs: super::Runs) -> bool {
        runs.each(src, dst, |s, d| f16_into(s, d))
    }

    /// Eight f16 values at a time: their exponents compared with all ones (infinite or
    /// NaN), widened by `vcvtph2ps`; the last 0–7 through a zeroed lane buffer. Widens
    /// `min(dst.len(), src.len() / 2)` values (the callers pass exactly `dst.len()`).
    /// Lanes are arrays from `as_chunks`, moved in and out of vectors by `bytemuck`: no
    /// pointers, so no `unsafe` and none of a debug build's checks on them in the loop.
    #[target_feature(enable = "avx,f16c")]
    #[inline]
    pub(super) fn f16_into(src: &[u8], dst: &mut [f32]) -> bool {
        let n = dst.len().min(src.len() / 2);
        let (src, dst) = (&src[..2 * n], &mut dst[..n]);
        let exponent = _mm_set1_epi16(0x7c00);
        let mut bad = _mm_setzero_si128();
        let (src_lanes, src_tail) = src.as_chunks::<16>();
        let (dst_lanes, dst_tail) = dst.as_chunks_mut::<8>();
        let mut widen = |lanes: [u8; 16]| -> [f32; 8] {
            let h: __m128i = bytemuck::cast(lanes);
            bad = _mm_or_si128(bad, _mm_cmpeq_epi16(_mm_and_si128(h, exponent), exponent));
            bytemuck::cast(_mm256_cvtph_ps(h))
        };
        for (s, d) in src_lanes.iter().zip(dst_lanes) {
            *d = widen(*s);
        }
        if !dst_tail.is_empty() {
            let mut lanes = [0u8; 16];
            lanes[..src_tail.len()].copy_from_slice(src_tail);
            let k = dst_tail.len();
            dst_tail.copy_from_slice(&widen(lanes)[..k]);
        }
        _mm_movemask_epi8(bad) == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use half::bf16;

    /// Every f16 bit pattern, at an even and an odd address, in runs of every length up
    /// to 40 and one long run: the same values as `half`'s scalar widening, and the same
    /// verdict as a value-by-value test of finiteness.
    #[test]
    fn f16_matches_half_for_every_bit_pattern_length_and_alignment() {
        let all: Vec<u16> = (0..=u16::MAX).collect();
        let plain: Vec<u8> = all.iter().flat_map(|b| b.to_le_bytes()).collect();
        // The same bytes one address further on: an odd address for the loads.
        let mut shifted = vec![0u8];
        shifted.extend(&plain);
        for (offset, src) in [(0, &plain[..]), (1, &shifted[1..])] {
            let mut dst = vec![0f32; all.len()];
            let finite = f16_into(&src[..2 * all.len()], &mut dst);
            assert!(!finite, "the patterns include infinities and NaNs");
            for (k, (&b, &v)) in all.iter().zip(&dst).enumerate() {
                let want = f16::from_bits(b).to_f32();
                assert!(
                    v.to_bits() == want.to_bits() || (v.is_nan() && want.is_nan()),
                    "pattern {b:#06x} (value {k}, offset {offset}): {v} against {want}"
                );
            }
            for start in [0usize, 3, 0x7bf0, 0x7c00 - 20, 0xfbf0] {
                for len in 0..=40 {
                    let s = &src[2 * start..2 * (start + len)];
                    let mut d = vec![0f32; len];
                    let want_finite = all[start..start + len]
                        .iter()
                        .all(|&b| b & 0x7c00 != 0x7c00);
                    assert_eq!(f16_into(s, &mut d), want_finite, "start {start}, len {len}");
                    assert_eq!(f16_into_portable(s, &mut d.clone()), want_finite);
                    for (v, &b) in d.iter().zip(&all[start..]) {
                        let want = f16::from_bits(b).to_f32();
                        assert!(v.to_bits() == want.to_bits() || (v.is_nan() && want.is_nan()));
                    }
                }
            }
        }
    }

    /// A block of 5 bins × 32 frames read from frame 3 for 27 frames into rows of 40:
    /// each run where it belongs, nothing else written, the verdict over the runs only.
    #[test]
    fn runs_land_at_their_strides_and_judge_only_what_they_read() {
        let (bins, block, lo, len, stride) = (5, 32, 3, 27, 40);
        let mut bits: Vec<u16> = (0..bins * block)
            .map(|k| f16::from_f32(k as f32 * 0.5 - 7.0).to_bits())
            .collect();
        bits[block * 2 + 1] = 0x7c00; // infinity in bin 2, frame 1: outside the runs
        let src: Vec<u8> = bits.iter().flat_map(|b| b.to_le_bytes()).collect();
        let runs = Runs {
            rows: bins,
            len,
            src_stride: block,
            dst_stride: stride,
        };
        for (dtype, widen) in [
            ("f16", f16_runs_into as fn(&[u8], &mut [f32], Runs) -> bool),
            ("bf16", bf16_runs_into),
        ] {
            let mut dst = vec![f32::MIN; bins * stride];
            assert!(widen(&src[2 * lo..], &mut dst, runs), "{dtype}");
            for b in 0..bins {
                for t in 0..stride {
                    let v = dst[b * stride + t];
                    if t < len {
                        let stored = bits[b * block + lo + t];
                        let want = match dtype {
                            "f16" => f16::from_bits(stored).to_f32(),
                            _ => bf16::from_bits(stored).to_f32(),
                        };
                        assert_eq!(v.to_bits(), want.to_bits(), "{dtype} bin {b} frame {t}");
                    } else {
                        assert_eq!(v, f32::MIN, "{dtype}: bin {b}, frame {t} is not a run's");
                    }
                }
            }
        }
        // The same infinity inside a run is seen.
        let mut dst = vec![0f32; bins * stride];
        assert!(!f16_runs_into(&src, &mut dst, runs));
    }

    #[test]
    #[should_panic(expected = "beyond a source")]
    fn a_run_beyond_the_source_panics_before_reading() {
        let runs = Runs {
            rows: 2,
            len: 8,
            src_stride: 8,
            dst_stride: 8,
        };
        f16_runs_into(&[0u8; 30], &mut [0f32; 16], runs);
    }

    #[test]
    fn bf16_matches_half_for_every_bit_pattern() {
        let all: Vec<u16> = (0..=u16::MAX).collect();
        let src: Vec<u8> = all.iter().flat_map(|b| b.to_le_bytes()).collect();
        let mut dst = vec![0f32; all.len()];
        assert!(!bf16_into(&src, &mut dst));
        for (&b, &v) in all.iter().zip(&dst) {
            let want = bf16::from_bits(b).to_f32();
            assert!(
                v.to_bits() == want.to_bits() || (v.is_nan() && want.is_nan()),
                "{b:#06x}"
            );
        }
        let finite: Vec<u8> = [1.5f32, -2.0, 0.0]
            .iter()
            .flat_map(|&v| bf16::from_f32(v).to_bits().to_le_bytes())
            .collect();
        assert!(bf16_into(&finite, &mut [0f32; 3]));
    }
}

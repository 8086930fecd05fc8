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
//!
//! [`runs_mapped_into`] also normalises each run and adds a gain in the same registers
//! ([`RowMap`]), so a loader's batch is written once, and judges every value with one
//! register (`y − y` of each mapped value: a NaN for an infinity or a NaN, stored or made
//! by the map), leaving which to a value-by-value pass on the rare run that has one;
//! [`stream_copy`] writes a finished item into a batch larger than the caches with
//! non-temporal stores.

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
}

/// [`f16_into`] for many runs at once (a block's mel bins into a batch's rows): one
/// check of the CPU and of the bounds for all of them; whether every value read was
/// finite. Panics if a run lies outside `src` or `dst`.
pub fn f16_runs_into(src: &[u8], dst: &mut [f32], runs: Runs) -> bool {
    runs_mapped_into(false, src, dst, runs, &[]).stored
}

/// What a run's widened values `x` become on their way to the output.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum RowMap {
    /// `x`, as widened.
    Keep,
    /// `x + add` (a gain in dB on log-mel values).
    Add(f32),
    /// `(x − shift)·scale + add`: normalised, then a gain added (each step rounded to
    /// f32, no fused multiply-add, so the same bits as the steps done one after another).
    Normalise {
        /// What is subtracted (the bin's mean).
        shift: f32,
        /// What the difference is multiplied by (`1 / std`).
        scale: f32,
        /// What is added to the normalised value.
        add: f32,
    },
}

impl RowMap {
    /// The map applied to one value; whether the value it gives is finite (`true` for
    /// [`RowMap::Keep`], whose value is judged as stored).
    #[inline(always)]
    pub fn apply(self, x: f32) -> (f32, bool) {
        match self {
            RowMap::Keep => (x, true),
            RowMap::Add(d) => (x + d, (x + d).is_finite()),
            RowMap::Normalise { shift, scale, add } => {
                let z = (x - shift) * scale + add;
                (z, z.is_finite())
            }
        }
    }

    /// The map as `(shift, scale, add)`: `(x − shift)·scale + add` gives the same bits
    /// for every map (`x − 0`, `x·1` and `x + (−0)` are `x` exactly).
    #[inline(always)]
    pub(crate) fn affine(self) -> (f32, f32, f32) {
        match self {
            RowMap::Keep => (0.0, 1.0, -0.0),
            RowMap::Add(d) => (0.0, 1.0, d),
            RowMap::Normalise { shift, scale, add } => (shift, scale, add),
        }
    }

    /// Whether `self` maps every value to the bits `other` does for certain: the same
    /// kind, each constant the same bits (`0.0` and `−0.0` differ: `−0 + 0` is `+0`).
    pub(crate) fn same_bits(self, other: RowMap) -> bool {
        let bits = |m: RowMap| {
            let (shift, scale, add) = m.affine();
            let kind = std::mem::discriminant(&m);
            (kind, shift.to_bits(), scale.to_bits(), add.to_bits())
        };
        bits(self) == bits(other)
    }

    /// The one map of `maps` if every one has its bits ([`RowMap::same_bits`]): a clip whose
    /// mel bins share a map (a gain alone) hands the kernels one, which they find once
    /// rather than a row at a time; `None` for none or maps that differ.
    pub(crate) fn one_for_all(maps: &[RowMap]) -> Option<RowMap> {
        let &first = maps.first()?;
        maps.iter().all(|&m| m.same_bits(first)).then_some(first)
    }

    /// The map applied in place to every value of `values` ([`RowMap::apply`]); whether
    /// every value it gives is finite. Eight lanes a step where the CPU has AVX (the
    /// same bits: no FMA).
    pub fn apply_all(self, values: &mut [f32]) -> bool {
        if self == RowMap::Keep {
            return true;
        }
        #[cfg(target_arch = "x86_64")]
        if has_avx() {
            // SAFETY: the CPU has AVX (checked just above).
            return unsafe { self.apply_all_avx(values) };
        }
        self.apply_all_in(values)
    }

    /// [`RowMap::apply_all_in`] compiled for AVX.
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx")]
    fn apply_all_avx(self, values: &mut [f32]) -> bool {
        self.apply_all_in(values)
    }

    /// The loop of [`RowMap::apply_all`].
    #[inline(always)]
    fn apply_all_in(self, values: &mut [f32]) -> bool {
        let mut bad = 0u32;
        for x in values {
            let (y, fine) = self.apply(*x);
            bad |= u32::from(!fine);
            *x = y;
        }
        bad == 0
    }
}

/// What [`runs_mapped_into`] found: whether every stored value read was finite, and
/// whether every normalised value was.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Finite {
    /// Every stored value finite (not infinite, not NaN).
    pub stored: bool,
    /// Every normalised value finite, its gain added (a gain may overflow what normalising
    /// did not: what is stored is what is judged).
    pub normalised: bool,
}

impl Default for Finite {
    /// Nothing found that is not finite.
    fn default() -> Self {
        Finite {
            stored: true,
            normalised: true,
        }
    }
}

/// Stored f16 (`bf16`: false) or bf16 runs widened into `dst` and mapped by `maps` (run
/// `r` by `maps[r]`; empty: every run kept as widened) in one pass: the bits [`f16_into`]
/// (or [`bf16_into`]) of each run then [`RowMap::apply`] would give, without a second
/// pass over the output. Panics if a run lies outside `src` or `dst`, or `maps` is
/// neither empty nor one per run.
pub fn runs_mapped_into(
    bf16: bool,
    src: &[u8],
    dst: &mut [f32],
    runs: Runs,
    maps: &[RowMap],
) -> Finite {
    assert!(
        maps.is_empty() || maps.len() == runs.rows,
        "{} maps for {} runs",
        maps.len(),
        runs.rows
    );
    runs_mapped_by(bf16, src, dst, runs, |r| {
        maps.get(r).copied().unwrap_or(RowMap::Keep)
    })
}

/// [`runs_mapped_into`] with run `r`'s map given by `map(r)`. Panics if a run lies
/// outside `src` or `dst`.
pub(crate) fn runs_mapped_by(
    bf16: bool,
    src: &[u8],
    dst: &mut [f32],
    runs: Runs,
    map: impl Fn(usize) -> RowMap + Copy,
) -> Finite {
    runs.check(src, dst);
    #[cfg(target_arch = "x86_64")]
    if !bf16 && has_f16c() {
        // SAFETY: the CPU has AVX and F16C (checked just above).
        if unsafe { x86::f16_runs_mapped_into(src, dst, runs, map) } {
            return Finite::default();
        }
        // Something is not finite: the loop value by value writes the same bits and
        // says whether as stored or once normalised.
    }
    let mut finite = Finite::default();
    for r in 0..runs.rows {
        let (s, d) = (r * runs.src_stride, r * runs.dst_stride);
        let (src, dst) = (&src[2 * s..2 * (s + runs.len)], &mut dst[d..d + runs.len]);
        finite.stored &= if bf16 {
            bf16_into(src, dst)
        } else {
            f16_into_portable(src, dst)
        };
        finite.normalised &= map(r).apply_all(dst);
    }
    finite
}

/// Copies `src` into `dst` (of the same length) past the caches where the CPU can: for an
/// output larger than the caches that nothing reads back soon, each line then costs one
/// write to memory instead of a read for ownership and a write. Call [`fence`] before
/// another thread reads `dst`. Panics if the lengths differ.
pub fn stream_copy(src: &[f32], dst: &mut [f32]) {
    assert_eq!(src.len(), dst.len(), "a copy between slices of one length");
    #[cfg(target_arch = "x86_64")]
    if has_avx() {
        // SAFETY: the CPU has AVX (checked just above).
        return unsafe { x86::stream_copy(src, dst) };
    }
    dst.copy_from_slice(src);
}

/// Orders this thread's streaming stores ([`stream_copy`]) before its later stores (a
/// buffer handed to another thread after it): `sfence` on x86-64, nothing elsewhere.
pub fn fence() {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: `sfence` is SSE, which every x86-64 CPU has; it reads and writes nothing.
    unsafe {
        std::arch::x86_64::_mm_sfence()
    };
}

/// [`bf16_into`] for many runs at once; whether every value read was finite. Panics if
/// a run lies outside `src` or `dst`.
pub fn bf16_runs_into(src: &[u8], dst: &mut [f32], runs: Runs) -> bool {
    runs_mapped_into(true, src, dst, runs, &[]).stored
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

/// How far ahead of the run being read (in stored bytes, in each source) the kernels ask
/// for their sources' lines. The hardware prefetcher follows one whole clip's blocks
/// but not a mixed pair's: a pair widened and mixed in one pass cost 21–24% more a value
/// than its members widened one after the other, 5–9% with this; widening one clip gains
/// 3–5% (`examples/mix_bench.rs`; journal, 2026-11-30).
pub(crate) const PREFETCH_BYTES: usize = 2048;

/// Asks for the cache line holding byte `at + ahead` of `src` where it lies within
/// `src`: a hint that never faults (a page not mapped yet, or beyond a file truncated
/// since, is skipped by the CPU) and reads nothing.
#[inline(always)]
pub(crate) fn prefetch(src: &[u8], at: usize, ahead: usize) {
    #[cfg(target_arch = "x86_64")]
    if let Some(byte) = src.get(at + ahead) {
        use std::arch::x86_64::{_MM_HINT_T0, _mm_prefetch};
        // SAFETY: SSE is part of x86_64; a prefetch reads no memory (it only hints the
        // line into the caches, and is dropped where the address would fault), and the
        // address is of a byte within `src` anyway.
        unsafe { _mm_prefetch::<_MM_HINT_T0>(std::ptr::from_ref(byte).cast()) }
    }
}

/// Whether this CPU runs the F16C kernel (AVX and F16C).
#[cfg(target_arch = "x86_64")]
pub(crate) fn has_f16c() -> bool {
    std::arch::is_x86_feature_detected!("avx") && std::arch::is_x86_feature_detected!("f16c")
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use std::arch::x86_64::{
        __m128i, __m256, _mm_and_si128, _mm_cmpeq_epi16, _mm_movemask_epi8, _mm_or_si128,
        _mm_set1_epi16, _mm_setzero_si128, _mm_stream_si32, _mm256_add_ps, _mm256_castps_si256,
        _mm256_cvtph_ps, _mm256_mul_ps, _mm256_or_ps, _mm256_set1_ps, _mm256_setzero_ps,
        _mm256_stream_ps, _mm256_sub_ps, _mm256_testz_si256,
    };

    use super::RowMap;

    /// [`super::runs_mapped_into`] for f16 with F16C: eight values a step widened,
    /// mapped in registers and stored; each run's last 0–7 one at a time. Returns whether
    /// every value was finite as stored and as mapped (its gain added), judged by one
    /// register: `y − y` of each value as it is stored ORed into it, zero for a finite
    /// value and a NaN for an infinity or a NaN, stored or made by the map (two operations a step where the exponent test of the stored values
    /// and a comparison of the normalised ones took six). Where it says no, the caller's
    /// value-by-value loop says which.
    #[target_feature(enable = "avx,f16c")]
    pub(super) fn f16_runs_mapped_into(
        src: &[u8],
        dst: &mut [f32],
        runs: super::Runs,
        map: impl Fn(usize) -> RowMap,
    ) -> bool {
        let mut seen = _mm256_setzero_ps();
        let mut scalar_fine = true;
        for r in 0..runs.rows {
            let (s, d) = (r * runs.src_stride, r * runs.dst_stride);
            super::prefetch(src, 2 * s, super::PREFETCH_BYTES);
            let src = &src[2 * s..2 * (s + runs.len)];
            let dst = &mut dst[d..d + runs.len];
            let m = map(r);
            let (src_lanes, src_tail) = src.as_chunks::<16>();
            let (dst_lanes, dst_tail) = dst.as_chunks_mut::<8>();
            let (shift, scale, add) = m.affine();
            let (shift, scale, add) = (
                _mm256_set1_ps(shift),
                _mm256_set1_ps(scale),
                _mm256_set1_ps(add),
            );
            let widen = |s: &[u8; 16]| _mm256_cvtph_ps(bytemuck::cast::<[u8; 16], __m128i>(*s));
            let mut judged = |y: __m256| {
                seen = _mm256_or_ps(seen, _mm256_sub_ps(y, y));
                y
            };
            let lanes = src_lanes.iter().zip(dst_lanes);
            // One loop per kind of map: no test of the kind in the loop.
            match m {
                RowMap::Keep => lanes.for_each(|(s, d)| *d = bytemuck::cast(judged(widen(s)))),
                RowMap::Add(_) => lanes.for_each(|(s, d)| {
                    *d = bytemuck::cast(judged(_mm256_add_ps(widen(s), add)));
                }),
                RowMap::Normalise { .. } => lanes.for_each(|(s, d)| {
                    let y = _mm256_mul_ps(_mm256_sub_ps(widen(s), shift), scale);
                    *d = bytemuck::cast(judged(_mm256_add_ps(y, add)));
                }),
            }
            for (b, o) in src_tail.chunks_exact(2).zip(dst_tail) {
                let bits = u16::from_le_bytes([b[0], b[1]]);
                let (x, fine) = m.apply(half::f16::from_bits(bits).to_f32());
                scalar_fine &= fine && bits & 0x7c00 != 0x7c00;
                *o = x;
            }
        }
        // Every bit zero: no lane saw a NaN (of either sign).
        let seen = _mm256_castps_si256(seen);
        scalar_fine && _mm256_testz_si256(seen, seen) == 1
    }

    /// [`super::stream_copy`] with AVX: the lines of `dst` it covers whole are written
    /// with non-temporal stores, eight values at a time, the values of the partial lines at
    /// its ends with non-temporal stores one at a time (plain stores there read each line
    /// from memory first: a batch's items are filled in mixup's random order, so the line
    /// an item shares with its neighbour is rarely in cache; 2% of a mixed crop epoch).
    #[target_feature(enable = "avx")]
    pub(super) fn stream_copy(src: &[f32], dst: &mut [f32]) {
        let head = dst.as_ptr().align_offset(64).min(dst.len());
        let (head_dst, body) = dst.split_at_mut(head);
        let (head_src, body_src) = src.split_at(head);
        stream_each(head_src, head_dst);
        let (src_lines, src_tail) = body_src.as_chunks::<16>();
        let (dst_lines, dst_tail) = body.as_chunks_mut::<16>();
        for (s, d) in src_lines.iter().zip(dst_lines) {
            let [lo, hi]: [[f32; 8]; 2] = bytemuck::cast(*s);
            let p = d.as_mut_ptr();
            // SAFETY: `d` is sixteen f32 this function holds exclusively (a `&mut [f32;
            // 16]`, so `p..p + 16` is valid for writes) starting on a 64-byte boundary
            // (the first `head` values were split off to reach one, and each chunk after
            // it is 64 bytes): both halves are 32-byte aligned, as `vmovntps` needs.
            unsafe {
                _mm256_stream_ps(p, bytemuck::cast::<[f32; 8], __m256>(lo));
                _mm256_stream_ps(p.add(8), bytemuck::cast::<[f32; 8], __m256>(hi));
            }
        }
        stream_each(src_tail, dst_tail);
    }

    /// Copies `src` into `dst` (of one length) with a non-temporal store a value.
    #[target_feature(enable = "avx")]
    fn stream_each(src: &[f32], dst: &mut [f32]) {
        for (s, d) in src.iter().zip(dst) {
            // SAFETY: `d` is an f32 this function holds exclusively: four bytes, valid
            // for writes and aligned to four, as `movnti` needs.
            unsafe { _mm_stream_si32(std::ptr::from_mut(d).cast::<i32>(), s.to_bits() as i32) };
        }
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

    /// Mapped runs (kept, a gain, normalised with and without one), at every alignment
    /// of the output and lengths with and without a tail: the bits of widening then
    /// [`RowMap::apply`], value by value, and the same verdicts; nothing outside the runs
    /// written.
    #[test]
    fn mapped_runs_equal_widening_then_mapping() {
        let (bins, block, stride) = (4usize, 48usize, 53usize);
        let values: Vec<f32> = (0..bins * block)
            .map(|k| ((k * 37) % 101) as f32 * 0.37 - 19.0)
            .collect();
        let maps = [
            RowMap::Keep,
            RowMap::Add(3.25),
            RowMap::Normalise {
                shift: -4.5,
                scale: 0.123,
                add: 0.0,
            },
            RowMap::Normalise {
                shift: 7.0,
                scale: 2.5,
                add: -1.75,
            },
        ];
        for (bf, offset) in [false, true]
            .into_iter()
            .flat_map(|b| (0..9).map(move |o| (b, o)))
        {
            let src: Vec<u8> = values
                .iter()
                .flat_map(|&v| match bf {
                    true => bf16::from_f32(v).to_bits().to_le_bytes(),
                    false => f16::from_f32(v).to_bits().to_le_bytes(),
                })
                .collect();
            for len in [0usize, 1, 7, 8, 9, 23, 40, 48] {
                let runs = Runs {
                    rows: bins,
                    len,
                    src_stride: block,
                    dst_stride: stride,
                };
                let mut want = vec![f32::MIN; offset + bins * stride];
                let mut got = want.clone();
                let mut want_normalised = true;
                for b in 0..bins {
                    let run = &src[2 * b * block..2 * (b * block + len)];
                    let out = &mut want[offset + b * stride..][..len];
                    match bf {
                        true => bf16_into(run, out),
                        false => f16_into_portable(run, out),
                    };
                    for x in out.iter_mut() {
                        let (y, fine) = maps[b].apply(*x);
                        want_normalised &= fine;
                        *x = y;
                    }
                }
                let found = runs_mapped_into(bf, &src, &mut got[offset..], runs, &maps);
                let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
                let case = format!("bf16 {bf}, offset {offset}, len {len}");
                assert_eq!(bits(&got), bits(&want), "{case}");
                let want_found = Finite {
                    stored: true,
                    normalised: want_normalised,
                };
                assert_eq!(found, want_found, "{case}");
            }
        }
    }

    /// Maps that look equal but give other bits are not the same: signed zeros, kinds.
    #[test]
    fn maps_are_the_same_only_with_the_same_bits() {
        let norm = |add| RowMap::Normalise {
            shift: 1.0,
            scale: 2.0,
            add,
        };
        assert!(RowMap::Add(1.5).same_bits(RowMap::Add(1.5)));
        assert!(RowMap::Add(f32::NAN).same_bits(RowMap::Add(f32::NAN)));
        assert!(norm(0.5).same_bits(norm(0.5)));
        assert!(!RowMap::Add(0.0).same_bits(RowMap::Add(-0.0)));
        assert!(!norm(0.0).same_bits(norm(-0.0)));
        assert!(!RowMap::Keep.same_bits(RowMap::Add(-0.0)));
        assert!(!RowMap::Add(1.5).same_bits(RowMap::Add(1.25)));
        assert_eq!(RowMap::Add(0.0), RowMap::Add(-0.0), "why `==` will not do");
        let gains = [RowMap::Add(1.5); 3];
        assert_eq!(RowMap::one_for_all(&gains), Some(RowMap::Add(1.5)));
        let signed = [RowMap::Add(0.0), RowMap::Add(-0.0)];
        assert_eq!(RowMap::one_for_all(&signed), None);
        assert_eq!(RowMap::one_for_all(&[]), None);
    }

    /// An infinity or a NaN of either sign stored in any run, under every kind of map, or
    /// a normalised value that overflows f32, with its gain or without (in the vector body
    /// and in a tail), is reported as such; finite values under every map are not.
    #[test]
    fn mapped_runs_report_what_is_not_finite() {
        let len = 21; // two eight-value steps and a tail of five
        let runs = Runs {
            rows: 1,
            len,
            src_stride: len,
            dst_stride: len,
        };
        let maps = [
            RowMap::Keep,
            RowMap::Add(1.5),
            RowMap::Normalise {
                shift: 1.0,
                scale: 2.0,
                add: 0.5,
            },
        ];
        // Infinities and NaNs of either sign, in the body or the tail, under every map.
        for (at, pattern, map) in [3usize, 19].into_iter().flat_map(|a| {
            [0x7c00u16, 0xfc00, 0x7e00, 0xfe01, 0x7c01]
                .into_iter()
                .flat_map(move |p| maps.map(|m| (a, p, m)))
        }) {
            let mut bits = vec![f16::from_f32(2.0).to_bits(); len];
            bits[at] = pattern;
            let src: Vec<u8> = bits.iter().flat_map(|b| b.to_le_bytes()).collect();
            let mut dst = vec![0f32; len];
            let found = runs_mapped_into(false, &src, &mut dst, runs, &[map]);
            assert!(!found.stored, "at {at}, {pattern:#06x}, {map:?}");
        }
        for at in [3usize, 19] {
            let mut bits = vec![f16::from_f32(2.0).to_bits(); len];
            bits[at] = 0x7c00;
            let src: Vec<u8> = bits.iter().flat_map(|b| b.to_le_bytes()).collect();
            let mut dst = vec![0f32; len];
            let found = runs_mapped_into(false, &src, &mut dst, runs, &[]);
            assert!(!found.stored, "at {at}");
            let fine = vec![f16::from_f32(2.0).to_bits(); len];
            let fine: Vec<u8> = fine.iter().flat_map(|b| b.to_le_bytes()).collect();
            for map in maps {
                let found = runs_mapped_into(false, &fine, &mut dst, runs, &[map]);
                assert_eq!(found, Finite::default(), "{map:?}");
            }
            let mut big = vec![f16::from_f32(60000.0).to_bits(); len];
            big[at] = f16::from_f32(-60000.0).to_bits();
            let src: Vec<u8> = big.iter().flat_map(|b| b.to_le_bytes()).collect();
            let huge = [RowMap::Normalise {
                shift: 60000.0,
                scale: 1e35,
                add: 0.0,
            }];
            let found = runs_mapped_into(false, &src, &mut dst, runs, &huge);
            let over = Finite {
                stored: true,
                normalised: false,
            };
            assert_eq!(found, over, "at {at}");
            assert_eq!(dst[at], f32::NEG_INFINITY);
            assert_eq!(dst[(at + 1) % len], 0.0);
            // Finite once normalised (3e38), not once its gain is added (helper-24).
            let mut two = vec![f16::from_f32(2.0).to_bits(); len];
            two[at] = f16::from_f32(3.0).to_bits();
            let src: Vec<u8> = two.iter().flat_map(|b| b.to_le_bytes()).collect();
            let gained = [RowMap::Normalise {
                shift: 1.0,
                scale: 1.5e38,
                add: 1.0e38,
            }];
            let found = runs_mapped_into(false, &src, &mut dst, runs, &gained);
            assert_eq!(found, over, "a gain that overflows, at {at}");
            assert_eq!(dst[at], f32::INFINITY);
        }
    }

    /// A streamed copy at every alignment of the output within a line and lengths around
    /// whole lines: the source's bits (a −0 and a NaN's payload in the partial lines and
    /// the whole ones), and nothing outside the copy written.
    #[test]
    fn a_streamed_copy_is_a_copy_at_any_alignment_and_length() {
        let odd = |k: usize| match k % 7 {
            3 => -0.0,
            5 => f32::from_bits(0x7fc0_1234 | (k as u32 & 1) << 31),
            _ => k as f32 * 1.5 - 77.0,
        };
        let src: Vec<f32> = (0..200).map(odd).collect();
        let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
        for offset in 0..17 {
            for len in [0usize, 1, 15, 16, 17, 31, 32, 33, 47, 64, 100, 150, 183] {
                let mut dst = vec![f32::MIN; offset + len + 16];
                stream_copy(&src[..len], &mut dst[offset..offset + len]);
                fence();
                assert!(
                    dst[..offset].iter().all(|&v| v == f32::MIN),
                    "{offset}, {len}"
                );
                let (got, want) = (&dst[offset..offset + len], &src[..len]);
                assert_eq!(bits(got), bits(want), "{offset}, {len}");
                assert!(
                    dst[offset + len..].iter().all(|&v| v == f32::MIN),
                    "{offset}, {len}"
                );
            }
        }
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

//! AVX2 + FMA: 8 lanes in a `__m256`.

use std::arch::x86_64::*;

use super::{Lanes, Simd};

/// The AVX2 + FMA token for f32 lanes. Only [`Avx2::new_unchecked`] makes one.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Avx2(());

/// The AVX2 + FMA token for f64 lanes (4 per vector).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Avx2F64(());

impl Avx2 {
    /// The f64 token of the same instruction set.
    #[inline(always)]
    pub(crate) fn f64(self) -> Avx2F64 {
        Avx2F64(())
    }

    /// A token without checking, for code inside `#[target_feature(enable = "avx2,fma")]`
    /// functions.
    ///
    /// # Safety
    /// The CPU must support AVX2 and FMA.
    #[inline(always)]
    pub(crate) unsafe fn new_unchecked() -> Avx2 {
        Avx2(())
    }
}

// SAFETY (for every `unsafe` block below that calls an intrinsic): an `Avx2` token exists
// only once AVX2 and FMA were detected (`Avx2::new`) or promised by the caller
// (`new_unchecked`), so the instructions exist on this CPU.
impl Lanes for Avx2 {
    type E = f32;
    const LANES: usize = 8;
    type V = __m256;

    #[inline(always)]
    fn splat(self, x: f32) -> __m256 {
        // SAFETY: see the impl comment.
        unsafe { _mm256_set1_ps(x) }
    }
    #[inline(always)]
    unsafe fn load(self, p: *const f32) -> __m256 {
        // SAFETY: the caller guarantees 8 readable values; AVX as in the impl comment.
        unsafe { _mm256_loadu_ps(p) }
    }
    #[inline(always)]
    unsafe fn store(self, p: *mut f32, v: __m256) {
        // SAFETY: the caller guarantees 8 writable values; AVX as in the impl comment.
        unsafe { _mm256_storeu_ps(p, v) }
    }
    #[inline(always)]
    unsafe fn store_f32(self, p: *mut f32, v: __m256) {
        // SAFETY: as `store`.
        unsafe { _mm256_storeu_ps(p, v) }
    }
    #[inline(always)]
    fn add(self, a: __m256, b: __m256) -> __m256 {
        // SAFETY: see the impl comment.
        unsafe { _mm256_add_ps(a, b) }
    }
    #[inline(always)]
    fn sub(self, a: __m256, b: __m256) -> __m256 {
        // SAFETY: see the impl comment.
        unsafe { _mm256_sub_ps(a, b) }
    }
    #[inline(always)]
    fn mul(self, a: __m256, b: __m256) -> __m256 {
        // SAFETY: see the impl comment.
        unsafe { _mm256_mul_ps(a, b) }
    }
    #[inline(always)]
    fn mul_add(self, a: __m256, b: __m256, c: __m256) -> __m256 {
        // SAFETY: see the impl comment.
        unsafe { _mm256_fmadd_ps(a, b, c) }
    }
    #[inline(always)]
    fn mul_sub(self, a: __m256, b: __m256, c: __m256) -> __m256 {
        // SAFETY: see the impl comment.
        unsafe { _mm256_fmsub_ps(a, b, c) }
    }
    #[inline(always)]
    fn sqrt(self, a: __m256) -> __m256 {
        // SAFETY: see the impl comment.
        unsafe { _mm256_sqrt_ps(a) }
    }
    #[inline(always)]
    unsafe fn gather(self, rows: &[*const f32], n: usize, slot: &[u32], dst: *mut f32) -> __m256 {
        if !n.is_multiple_of(8) || rows.len() < 8 || slot.len() < n {
            // SAFETY: the same contract.
            return unsafe { gather_scalar(self, rows, n, slot, dst) };
        }
        let r = [
            rows[0], rows[1], rows[2], rows[3], rows[4], rows[5], rows[6], rows[7],
        ];
        // SAFETY: rows are readable for `n` values and each slot's vector is writable
        // (the caller's contract); AVX as in the impl comment.
        unsafe {
            let mut acc = [_mm256_setzero_ps(); 8];
            let mut i = 0;
            while i < n {
                let v = transpose8x8(&r, i);
                for (s, &x) in v.iter().enumerate() {
                    _mm256_storeu_ps(dst.add(*slot.get_unchecked(i + s) as usize * 8), x);
                    acc[s] = _mm256_add_ps(acc[s], x);
                }
                i += 8;
            }
            let a = _mm256_add_ps(_mm256_add_ps(acc[0], acc[1]), _mm256_add_ps(acc[2], acc[3]));
            let b = _mm256_add_ps(_mm256_add_ps(acc[4], acc[5]), _mm256_add_ps(acc[6], acc[7]));
            _mm256_add_ps(a, b)
        }
    }
}

impl Simd for Avx2 {
    #[inline(always)]
    fn div(self, a: __m256, b: __m256) -> __m256 {
        // SAFETY: see the impl comment.
        unsafe { _mm256_div_ps(a, b) }
    }
    #[inline(always)]
    fn max(self, a: __m256, b: __m256) -> __m256 {
        // SAFETY: see the impl comment. maxps returns the second operand for a NaN first.
        unsafe { _mm256_max_ps(a, b) }
    }
    #[inline(always)]
    fn lt(self, a: __m256, b: __m256) -> __m256 {
        // SAFETY: see the impl comment.
        unsafe { _mm256_cmp_ps::<_CMP_LT_OQ>(a, b) }
    }
    #[inline(always)]
    fn eq(self, a: __m256, b: __m256) -> __m256 {
        // SAFETY: see the impl comment.
        unsafe { _mm256_cmp_ps::<_CMP_EQ_OQ>(a, b) }
    }
    #[inline(always)]
    fn le(self, a: __m256, b: __m256) -> __m256 {
        // SAFETY: see the impl comment.
        unsafe { _mm256_cmp_ps::<_CMP_LE_OQ>(a, b) }
    }
    #[inline(always)]
    fn select(self, m: __m256, a: __m256, b: __m256) -> __m256 {
        // SAFETY: see the impl comment.
        unsafe { _mm256_blendv_ps(b, a, m) }
    }
    #[inline(always)]
    fn frexp(self, x: __m256) -> (__m256, __m256) {
        // SAFETY: see the impl comment.
        unsafe {
            let bits = _mm256_castps_si256(x);
            let m = _mm256_or_si256(
                _mm256_and_si256(bits, _mm256_set1_epi32(0x007f_ffff)),
                _mm256_set1_epi32(0x3f80_0000),
            );
            let e = _mm256_sub_epi32(_mm256_srli_epi32::<23>(bits), _mm256_set1_epi32(127));
            (_mm256_castsi256_ps(m), _mm256_cvtepi32_ps(e))
        }
    }
}

/// Samples `o .. o + 8` of 8 rows, transposed: vector `s` holds sample `o + s` of rows
/// 0–7. Two 4×4 transposes inside the 128-bit halves (the low half holds rows 0–3, the
/// high half rows 4–7), so no cross-half shuffle is needed.
///
/// # Safety
/// Each row is readable at `o .. o + 8`; the CPU has AVX.
#[inline(always)]
pub(crate) unsafe fn transpose8x8(r: &[*const f32; 8], o: usize) -> [__m256; 8] {
    // SAFETY: the caller's contract.
    unsafe {
        let mut v = [_mm256_setzero_ps(); 8];
        for half in 0..2 {
            let o = o + 4 * half;
            let pair = |j: usize| {
                _mm256_insertf128_ps::<1>(
                    _mm256_castps128_ps256(_mm_loadu_ps(r[j].add(o))),
                    _mm_loadu_ps(r[j + 4].add(o)),
                )
            };
            let a = [pair(0), pair(1), pair(2), pair(3)];
            let t0 = _mm256_unpacklo_ps(a[0], a[1]);
            let t1 = _mm256_unpackhi_ps(a[0], a[1]);
            let t2 = _mm256_unpacklo_ps(a[2], a[3]);
            let t3 = _mm256_unpackhi_ps(a[2], a[3]);
            v[4 * half] = _mm256_shuffle_ps::<0x44>(t0, t2);
            v[4 * half + 1] = _mm256_shuffle_ps::<0xEE>(t0, t2);
            v[4 * half + 2] = _mm256_shuffle_ps::<0x44>(t1, t3);
            v[4 * half + 3] = _mm256_shuffle_ps::<0xEE>(t1, t3);
        }
        v
    }
}

/// The trait's scalar gather, for sizes the 8×8 transpose does not cover.
///
/// # Safety
/// As for [`Simd::gather`].
#[inline(always)]
unsafe fn gather_scalar(
    s: Avx2,
    rows: &[*const f32],
    n: usize,
    slot: &[u32],
    dst: *mut f32,
) -> __m256 {
    let mut sums = [0f32; 8];
    for (i, &q) in slot[..n].iter().enumerate() {
        for (j, &row) in rows[..8].iter().enumerate() {
            // SAFETY: as for `Simd::gather` (the caller's contract).
            unsafe {
                let x = *row.add(i);
                *dst.add(q as usize * 8 + j) = x;
                sums[j] += x;
            }
        }
    }
    // SAFETY: `sums` holds 8 values.
    unsafe { s.load(sums.as_ptr()) }
}

impl Lanes for Avx2F64 {
    type E = f64;
    const LANES: usize = 4;
    type V = __m256d;

    #[inline(always)]
    fn splat(self, x: f64) -> __m256d {
        // SAFETY: see the `Avx2` impl comment (this token exists only beside one).
        unsafe { _mm256_set1_pd(x) }
    }
    #[inline(always)]
    unsafe fn load(self, p: *const f64) -> __m256d {
        // SAFETY: the caller guarantees 4 readable values; AVX as above.
        unsafe { _mm256_loadu_pd(p) }
    }
    #[inline(always)]
    unsafe fn store(self, p: *mut f64, v: __m256d) {
        // SAFETY: the caller guarantees 4 writable values; AVX as above.
        unsafe { _mm256_storeu_pd(p, v) }
    }
    #[inline(always)]
    unsafe fn store_f32(self, p: *mut f32, v: __m256d) {
        // SAFETY: the caller guarantees 4 writable floats; AVX as above.
        unsafe { _mm_storeu_ps(p, _mm256_cvtpd_ps(v)) }
    }
    #[inline(always)]
    fn add(self, a: __m256d, b: __m256d) -> __m256d {
        // SAFETY: AVX as above.
        unsafe { _mm256_add_pd(a, b) }
    }
    #[inline(always)]
    fn sub(self, a: __m256d, b: __m256d) -> __m256d {
        // SAFETY: AVX as above.
        unsafe { _mm256_sub_pd(a, b) }
    }
    #[inline(always)]
    fn mul(self, a: __m256d, b: __m256d) -> __m256d {
        // SAFETY: AVX as above.
        unsafe { _mm256_mul_pd(a, b) }
    }
    #[inline(always)]
    fn mul_add(self, a: __m256d, b: __m256d, c: __m256d) -> __m256d {
        // SAFETY: FMA as above.
        unsafe { _mm256_fmadd_pd(a, b, c) }
    }
    #[inline(always)]
    fn mul_sub(self, a: __m256d, b: __m256d, c: __m256d) -> __m256d {
        // SAFETY: FMA as above.
        unsafe { _mm256_fmsub_pd(a, b, c) }
    }
    #[inline(always)]
    fn sqrt(self, a: __m256d) -> __m256d {
        // SAFETY: AVX as above.
        unsafe { _mm256_sqrt_pd(a) }
    }

    #[inline(always)]
    unsafe fn gather(self, rows: &[*const f32], n: usize, slot: &[u32], dst: *mut f64) -> __m256d {
        if !n.is_multiple_of(4) || rows.len() < 4 || slot.len() < n {
            let mut sums = [0f64; 4];
            for (i, &q) in slot[..n].iter().enumerate() {
                for (j, &row) in rows[..4].iter().enumerate() {
                    // SAFETY: as for `Lanes::gather` (the caller's contract).
                    unsafe {
                        let x = *row.add(i) as f64;
                        *dst.add(q as usize * 4 + j) = x;
                        sums[j] += x;
                    }
                }
            }
            // SAFETY: `sums` holds 4 values.
            return unsafe { self.load(sums.as_ptr()) };
        }
        // SAFETY: rows are readable for `n` values and each slot's vector is writable
        // (the caller's contract); AVX as above.
        unsafe {
            let mut acc = [_mm256_setzero_pd(); 4];
            let mut i = 0;
            while i < n {
                // A 4×4 f32 transpose, then each row widened to f64.
                let a = [
                    _mm_loadu_ps(rows[0].add(i)),
                    _mm_loadu_ps(rows[1].add(i)),
                    _mm_loadu_ps(rows[2].add(i)),
                    _mm_loadu_ps(rows[3].add(i)),
                ];
                let t0 = _mm_unpacklo_ps(a[0], a[1]);
                let t1 = _mm_unpackhi_ps(a[0], a[1]);
                let t2 = _mm_unpacklo_ps(a[2], a[3]);
                let t3 = _mm_unpackhi_ps(a[2], a[3]);
                let v = [
                    _mm_movelh_ps(t0, t2),
                    _mm_movehl_ps(t2, t0),
                    _mm_movelh_ps(t1, t3),
                    _mm_movehl_ps(t3, t1),
                ];
                for (s, &x) in v.iter().enumerate() {
                    let x = _mm256_cvtps_pd(x);
                    _mm256_storeu_pd(dst.add(*slot.get_unchecked(i + s) as usize * 4), x);
                    acc[s] = _mm256_add_pd(acc[s], x);
                }
                i += 4;
            }
            _mm256_add_pd(_mm256_add_pd(acc[0], acc[1]), _mm256_add_pd(acc[2], acc[3]))
        }
    }
}

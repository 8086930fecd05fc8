//! Vectors of f32 lanes, one lane per frame, behind one trait: every kernel is written
//! once, generic over [`Simd`], and instantiated per instruction set inside a
//! `#[target_feature]` function (the trait's methods are `#[inline(always)]`, so their
//! intrinsics are compiled with that function's features).

#[cfg(target_arch = "x86_64")]
pub(crate) mod avx2;
pub(crate) mod portable;

use mel_core::{Error, Result};

/// The instruction set the CPU backend's kernels run with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Isa {
    /// The best one this CPU has (checked at run time).
    #[default]
    Auto,
    /// Plain Rust on arrays of 8 lanes: runs everywhere; the compiler vectorises it for
    /// the build's baseline (SSE2 on x86-64, NEON on aarch64).
    Portable,
    /// x86-64 AVX2 + FMA intrinsics: f32 stages in 8 lanes, the f64 transform in 4.
    /// (An AVX-512F f64 transform, 8 lanes, was measured 2–3% faster on Zen 4 and
    /// left out: BENCHMARKS.md, 2026-11-23.)
    Avx2,
}

impl Isa {
    /// The best instruction set this CPU supports.
    pub fn detect() -> Isa {
        if Isa::Avx2.is_available() {
            Isa::Avx2
        } else {
            Isa::Portable
        }
    }

    /// Whether this CPU can run kernels built for `self` (`Auto` always can).
    pub fn is_available(self) -> bool {
        match self {
            Isa::Auto | Isa::Portable => true,
            #[cfg(target_arch = "x86_64")]
            Isa::Avx2 => is_x86_feature_detected!("avx2") && is_x86_feature_detected!("fma"),
            #[cfg(not(target_arch = "x86_64"))]
            Isa::Avx2 => false,
        }
    }

    /// `Auto` resolved to the CPU's best; any other choice checked against the CPU.
    pub(crate) fn resolve(self) -> Result<Isa> {
        match self {
            Isa::Auto => Ok(Isa::detect()),
            isa if isa.is_available() => Ok(isa),
            isa => Err(Error::Device {
                backend: "cpu".into(),
                message: format!("instruction set {isa:?} was asked for but this CPU lacks it"),
            }),
        }
    }

    /// A short name for reports and benchmarks.
    pub fn name(self) -> &'static str {
        match self {
            Isa::Auto => "auto",
            Isa::Portable => "portable",
            Isa::Avx2 => "avx2",
        }
    }
}

/// A lane element: f32 or f64.
pub(crate) trait Elem: Copy + Default + std::ops::AddAssign {
    /// `x` rounded to this type.
    fn from_f64(x: f64) -> Self;
    /// `x` converted exactly.
    fn from_f32(x: f32) -> Self;
}

impl Elem for f32 {
    #[inline(always)]
    fn from_f64(x: f64) -> f32 {
        x as f32
    }
    #[inline(always)]
    fn from_f32(x: f32) -> f32 {
        x
    }
}

impl Elem for f64 {
    #[inline(always)]
    fn from_f64(x: f64) -> f64 {
        x
    }
    #[inline(always)]
    fn from_f32(x: f32) -> f64 {
        x as f64
    }
}

/// A vector of `LANES` values of `E` and the arithmetic an FFT needs. Implementors are
/// zero-sized tokens; holding one means the CPU supports the instruction set.
pub(crate) trait Lanes: Copy {
    /// The element type.
    type E: Elem;
    /// Lanes per vector (frames transformed together).
    const LANES: usize;
    /// The vector type.
    type V: Copy;

    /// Every lane `x`.
    fn splat(self, x: Self::E) -> Self::V;
    /// Loads `LANES` values from `p` (any alignment).
    ///
    /// # Safety
    /// `p .. p + LANES` must be readable.
    unsafe fn load(self, p: *const Self::E) -> Self::V;
    /// Stores `v` to `p .. p + LANES` (any alignment).
    ///
    /// # Safety
    /// `p .. p + LANES` must be writable.
    unsafe fn store(self, p: *mut Self::E, v: Self::V);
    /// Stores `v` rounded to f32 at `p .. p + LANES`.
    ///
    /// # Safety
    /// `p .. p + LANES` must be writable.
    unsafe fn store_f32(self, p: *mut f32, v: Self::V);
    /// `a + b`.
    fn add(self, a: Self::V, b: Self::V) -> Self::V;
    /// `a - b`.
    fn sub(self, a: Self::V, b: Self::V) -> Self::V;
    /// `a * b`.
    fn mul(self, a: Self::V, b: Self::V) -> Self::V;
    /// `a * b + c` (fused where the instruction set has FMA).
    fn mul_add(self, a: Self::V, b: Self::V, c: Self::V) -> Self::V;
    /// `a * b - c` (fused where the instruction set has FMA).
    fn mul_sub(self, a: Self::V, b: Self::V, c: Self::V) -> Self::V;
    /// Lane-wise square root.
    fn sqrt(self, a: Self::V) -> Self::V;

    /// Transposes frames into lanes: for every sample `i < n`, the vector whose lane `j`
    /// is `rows[j][i]` (converted to `E`) is stored at `dst + slot[i] · LANES`. Returns
    /// the lane-wise sum of all `n` samples. The default is plain scalar code;
    /// instruction sets override it.
    ///
    /// # Safety
    /// `rows` holds `LANES` pointers, each readable for `n` values; `slot` holds `n`
    /// entries, each with `dst + (slot + 1) · LANES` writable.
    #[inline(always)]
    unsafe fn gather(
        self,
        rows: &[*const f32],
        n: usize,
        slot: &[u32],
        dst: *mut Self::E,
    ) -> Self::V {
        let mut sums = [Self::E::default(); 16];
        for (i, &q) in slot[..n].iter().enumerate() {
            for (j, &row) in rows[..Self::LANES].iter().enumerate() {
                // SAFETY: the caller guarantees `row` is readable for `n` values and the
                // slot's vector is writable.
                unsafe {
                    let x = Self::E::from_f32(*row.add(i));
                    *dst.add(q as usize * Self::LANES + j) = x;
                    sums[j] += x;
                }
            }
        }
        // SAFETY: `sums` holds at least `LANES` (≤ 16) values.
        unsafe { self.load(sums.as_ptr()) }
    }
}

/// f32 lanes, with what the log and the filterbank need beyond [`Lanes`].
pub(crate) trait Simd: Lanes<E = f32> {
    /// `a / b`.
    fn div(self, a: Self::V, b: Self::V) -> Self::V;
    /// Lane-wise maximum; `b` where `a` is NaN (as x86's `maxps`).
    fn max(self, a: Self::V, b: Self::V) -> Self::V;
    /// All-ones lanes where `a < b`, zero elsewhere (false for NaN).
    fn lt(self, a: Self::V, b: Self::V) -> Self::V;
    /// All-ones lanes where `a == b`, zero elsewhere.
    fn eq(self, a: Self::V, b: Self::V) -> Self::V;
    /// All-ones lanes where `a <= b`, zero elsewhere (false for NaN).
    fn le(self, a: Self::V, b: Self::V) -> Self::V;
    /// `a` where `mask` is all-ones, `b` where it is zero.
    fn select(self, mask: Self::V, a: Self::V, b: Self::V) -> Self::V;
    /// For positive normal `x`: `(m, e)` with `x = m · 2^e`, `m` in `[1, 2)`, `e` an
    /// integer as f32 (read from the bits, exact).
    fn frexp(self, x: Self::V) -> (Self::V, Self::V);
}

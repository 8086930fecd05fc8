//! The portable instruction set: 8 f32 lanes or 4 f64 lanes as plain arrays,
//! element-wise Rust that the compiler vectorises for the build's baseline. No fused
//! multiply-add (a software FMA would be slow where the hardware lacks one), so results
//! differ from the AVX2 kernels' in the last bits, within the same tolerance (both are tested).

use super::{Lanes, Simd};

/// The portable f32 token (always available).
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Portable;

/// The portable f64 token (always available).
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct PortableF64;

/// Eight f32 lanes.
#[derive(Debug, Clone, Copy)]
#[repr(C, align(32))]
pub(crate) struct F32x8(pub(crate) [f32; 8]);

/// Four f64 lanes.
#[derive(Debug, Clone, Copy)]
#[repr(C, align(32))]
pub(crate) struct F64x4(pub(crate) [f64; 4]);

/// `[f(a[0]), f(a[1]), ...]` with a plain loop (array `map` and `from_fn` are not always
/// inlined, and a call per vector operation would cost more than the operation).
macro_rules! each {
    ($n:literal, |$i:ident| $e:expr) => {{
        let mut r = [Default::default(); $n];
        let mut $i = 0;
        while $i < $n {
            r[$i] = $e;
            $i += 1;
        }
        r
    }};
}

macro_rules! lanes {
    ($token:ty, $v:ident, $e:ty, $n:literal) => {
        impl Lanes for $token {
            type E = $e;
            const LANES: usize = $n;
            type V = $v;

            #[inline(always)]
            fn splat(self, x: $e) -> $v {
                $v([x; $n])
            }
            #[inline(always)]
            unsafe fn load(self, p: *const $e) -> $v {
                // SAFETY: the caller guarantees LANES readable values at `p`.
                $v(unsafe { p.cast::<[$e; $n]>().read_unaligned() })
            }
            #[inline(always)]
            unsafe fn store(self, p: *mut $e, v: $v) {
                // SAFETY: the caller guarantees LANES writable values at `p`.
                unsafe { p.cast::<[$e; $n]>().write_unaligned(v.0) }
            }
            #[inline(always)]
            unsafe fn store_f32(self, p: *mut f32, v: $v) {
                // SAFETY: the caller guarantees LANES writable values at `p`.
                unsafe { p.cast::<[f32; $n]>().write_unaligned(each!($n, |i| v.0[i] as f32)) }
            }
            #[inline(always)]
            fn add(self, a: $v, b: $v) -> $v {
                $v(each!($n, |i| a.0[i] + b.0[i]))
            }
            #[inline(always)]
            fn sub(self, a: $v, b: $v) -> $v {
                $v(each!($n, |i| a.0[i] - b.0[i]))
            }
            #[inline(always)]
            fn mul(self, a: $v, b: $v) -> $v {
                $v(each!($n, |i| a.0[i] * b.0[i]))
            }
            #[inline(always)]
            fn mul_add(self, a: $v, b: $v, c: $v) -> $v {
                $v(each!($n, |i| a.0[i] * b.0[i] + c.0[i]))
            }
            #[inline(always)]
            fn mul_sub(self, a: $v, b: $v, c: $v) -> $v {
                $v(each!($n, |i| a.0[i] * b.0[i] - c.0[i]))
            }
            #[inline(always)]
            fn sqrt(self, a: $v) -> $v {
                $v(each!($n, |i| a.0[i].sqrt()))
            }
        }
    };
}

lanes!(Portable, F32x8, f32, 8);
lanes!(PortableF64, F64x4, f64, 4);

#[inline(always)]
fn zip(a: F32x8, b: F32x8, f: impl Fn(f32, f32) -> f32) -> F32x8 {
    F32x8(each!(8, |i| f(a.0[i], b.0[i])))
}

#[inline(always)]
fn mask(c: bool) -> f32 {
    f32::from_bits(if c { u32::MAX } else { 0 })
}

impl Simd for Portable {
    #[inline(always)]
    fn div(self, a: F32x8, b: F32x8) -> F32x8 {
        zip(a, b, |x, y| x / y)
    }
    #[inline(always)]
    fn max(self, a: F32x8, b: F32x8) -> F32x8 {
        // As x86's maxps(a, b): `b` unless `a > b` (so `b` for a NaN `a`).
        zip(a, b, |x, y| if x > y { x } else { y })
    }
    #[inline(always)]
    fn lt(self, a: F32x8, b: F32x8) -> F32x8 {
        zip(a, b, |x, y| mask(x < y))
    }
    #[inline(always)]
    fn eq(self, a: F32x8, b: F32x8) -> F32x8 {
        zip(a, b, |x, y| mask(x == y))
    }
    #[inline(always)]
    fn le(self, a: F32x8, b: F32x8) -> F32x8 {
        zip(a, b, |x, y| mask(x <= y))
    }
    #[inline(always)]
    fn select(self, m: F32x8, a: F32x8, b: F32x8) -> F32x8 {
        F32x8(each!(8, |i| {
            let m = m.0[i].to_bits();
            f32::from_bits((a.0[i].to_bits() & m) | (b.0[i].to_bits() & !m))
        }))
    }
    #[inline(always)]
    fn frexp(self, x: F32x8) -> (F32x8, F32x8) {
        let m = F32x8(each!(8, |i| f32::from_bits(
            (x.0[i].to_bits() & 0x007f_ffff) | 0x3f80_0000
        )));
        let e = F32x8(each!(8, |i| ((x.0[i].to_bits() >> 23) as i32 - 127) as f32));
        (m, e)
    }
}

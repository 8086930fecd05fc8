//! Vectorised log compression: `log2` from the exponent bits and a short odd series in
//! `t = (m - 1) / (m + 1)`, scaled with one final rounding (`LogConst`); then top_db per
//! spectrogram. Error against f64: under half an f32 ulp of the result plus ~1e-7 dB
//! (tested over the whole f32 range, subnormals included).

use std::f64::consts::LN_2;

use crate::simd::Simd;
use crate::tables::{Log, LogConst};

/// `2 / ((2j + 1) · ln 2)`: `log2((1 + t) / (1 - t)) = Σ_j C[j] · t^(2j+1)`.
const C: [f32; 5] = [
    (2.0 / LN_2) as f32,
    (2.0 / (3.0 * LN_2)) as f32,
    (2.0 / (5.0 * LN_2)) as f32,
    (2.0 / (7.0 * LN_2)) as f32,
    (2.0 / (9.0 * LN_2)) as f32,
];

/// `k · log2(x)` for every lane: `-inf` at 0, `+inf` at `+inf`, NaN for NaN and x < 0.
#[inline(always)]
pub(crate) fn scaled_log2<S: Simd>(s: S, x: S::V, k: LogConst) -> S::V {
    let tiny = s.lt(x, s.splat(f32::MIN_POSITIVE));
    // Subnormals are scaled into the normal range (exactly) and the exponent corrected.
    let xs = s.select(tiny, s.mul(x, s.splat(8_388_608.0)), x);
    let (m, e) = s.frexp(xs);
    let e = s.select(tiny, s.sub(e, s.splat(23.0)), e);
    let big = s.lt(s.splat(std::f32::consts::SQRT_2), m);
    let m = s.select(big, s.mul(m, s.splat(0.5)), m);
    let e = s.select(big, s.add(e, s.splat(1.0)), e);
    let one = s.splat(1.0);
    let t = s.div(s.sub(m, one), s.add(m, one));
    let t2 = s.mul(t, t);
    let mut p = s.splat(C[4]);
    for &c in C[..4].iter().rev() {
        p = s.mul_add(p, t2, s.splat(c));
    }
    let l = s.mul(t, p); // log2(m), |l| ≤ 0.5
    let small = s.mul_add(s.splat(k.k), l, s.mul(s.splat(k.k_lo), e));
    let r = s.mul_add(s.splat(k.k_hi), e, small);
    // Specials: zero → -inf, +inf → +inf, NaN or negative → NaN.
    let r = s.select(s.eq(x, s.splat(0.0)), s.splat(f32::NEG_INFINITY), r);
    let r = s.select(s.eq(x, s.splat(f32::INFINITY)), x, r);
    let finite_pos = s.le(s.splat(0.0), x); // false for NaN
    s.select(finite_pos, r, s.splat(f32::NAN))
}

/// Applies `log` to `values` (whole spectrograms of `vps` values each, in place), then
/// top_db against each spectrogram's own peak.
#[inline(always)]
pub(crate) fn apply<S: Simd>(s: S, log: &Log, values: &mut [f32], vps: usize) {
    let (k, floor, add) = match *log {
        Log::Db { k, amin, .. } => (k, Some(amin), None),
        Log::Ln { k, offset } => (k, None, Some(offset)),
        Log::None => return,
    };
    let l = S::LANES;
    // No closure here: a closure that the compiler does not inline is compiled without
    // the caller's target features, and its intrinsics would become calls.
    let floor = s.splat(floor.unwrap_or(f32::NEG_INFINITY));
    let add = s.splat(add.unwrap_or(0.0));
    let mut chunks = values.chunks_exact_mut(l);
    for c in &mut chunks {
        // SAFETY: `c` holds exactly LANES values.
        unsafe {
            let x = s.add(s.max(s.load(c.as_ptr()), floor), add);
            s.store(c.as_mut_ptr(), scaled_log2(s, x, k));
        }
    }
    let rest = chunks.into_remainder();
    if !rest.is_empty() {
        let mut tmp = [1f32; 16];
        tmp[..rest.len()].copy_from_slice(rest);
        // SAFETY: `tmp` holds 16 ≥ LANES values.
        unsafe {
            let x = s.add(s.max(s.load(tmp.as_ptr()), floor), add);
            s.store(tmp.as_mut_ptr(), scaled_log2(s, x, k));
        }
        rest.copy_from_slice(&tmp[..rest.len()]);
    }
    if let Log::Db {
        top_db: Some(top), ..
    } = *log
    {
        for seg in values.chunks_exact_mut(vps) {
            let peak = seg.iter().fold(f32::NEG_INFINITY, |a, &b| a.max(b));
            let floor = peak - top;
            seg.iter_mut().for_each(|v| *v = v.max(floor));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::simd::Lanes;
    use crate::simd::portable::Portable;

    /// The worst error of `k · log2` (k = 10 log10 2: decibels) over every 61st positive
    /// f32 bit pattern (subnormals, normals, the amin floor) against f64: at most one ulp
    /// of the f32 result plus 3e-7 dB everywhere, under 1e-5 dB for results within
    /// ±200 dB; plus the special values.
    fn check(log: impl Fn(&[f32; 8], f32) -> [f32; 8]) {
        let k = LogConst::new(10.0 * std::f64::consts::LOG10_2);
        let kf = 10.0 * std::f64::consts::LOG10_2;
        let (mut worst_ulps, mut worst_db) = (0f64, 0f64);
        let mut bits = (1u32..0x7f80_0000)
            .step_by(61)
            .chain([1, 2, 0x007f_ffff, 0x0080_0000]);
        let amin = 1e-10f32;
        let mut buf = [0f32; 8];
        loop {
            let mut n = 0;
            for slot in buf.iter_mut() {
                match bits.next() {
                    Some(b) => {
                        *slot = f32::from_bits(b);
                        n += 1;
                    }
                    None => *slot = amin,
                }
            }
            let out = log(&buf, 0.0);
            for (&x, &y) in buf.iter().zip(&out) {
                let exact = kf * (x as f64).log2();
                let err = (y as f64 - exact).abs();
                let ulp = (exact as f32).abs().max(f32::MIN_POSITIVE);
                let ulp = (f32::from_bits(ulp.to_bits() + 1) - ulp) as f64;
                // One ulp of the result plus 3e-7 absolute (the rounding of t near x = 1).
                worst_ulps = worst_ulps.max((err - 3e-7).max(0.0) / ulp);
                if exact.abs() <= 200.0 {
                    worst_db = worst_db.max(err);
                }
            }
            if n < 8 {
                break;
            }
        }
        assert!(worst_ulps <= 1.0, "worst error {worst_ulps} ulp");
        assert!(worst_db < 1e-5, "worst error {worst_db} dB within ±200 dB");
        let specials = [0.0, -0.0, f32::INFINITY, f32::NAN, -1.0, amin, 1.0, 2.0];
        let out = log(&specials, 0.0);
        assert_eq!(out[0], f32::NEG_INFINITY);
        assert_eq!(out[1], f32::NEG_INFINITY);
        assert_eq!(out[2], f32::INFINITY);
        assert!(out[3].is_nan() && out[4].is_nan());
        assert!((out[5] + 100.0).abs() < 4e-6, "{}", out[5]);
        assert_eq!(out[6], 0.0);
        assert_eq!(out[7], k.k);
    }

    #[test]
    fn portable_log_is_accurate_over_the_whole_f32_range() {
        let k = LogConst::new(10.0 * std::f64::consts::LOG10_2);
        check(|x, _| {
            // SAFETY: `x` holds 8 values.
            let v = unsafe { Portable.load(x.as_ptr()) };
            scaled_log2(Portable, v, k).0
        });
    }

    #[cfg(target_arch = "x86_64")]
    #[test]
    fn avx2_log_is_accurate_over_the_whole_f32_range() {
        use crate::simd::Isa;
        use crate::simd::avx2::Avx2;
        if !Isa::Avx2.is_available() {
            println!("skipped: no AVX2 + FMA on this CPU");
            return;
        }
        #[target_feature(enable = "avx2,fma")]
        fn run(x: &[f32; 8]) -> [f32; 8] {
            // SAFETY: called only after the AVX2 + FMA check above.
            let s = unsafe { Avx2::new_unchecked() };
            let k = LogConst::new(10.0 * std::f64::consts::LOG10_2);
            let mut out = [0f32; 8];
            // SAFETY: both arrays hold 8 values.
            unsafe { s.store(out.as_mut_ptr(), scaled_log2(s, s.load(x.as_ptr()), k)) };
            out
        }
        // SAFETY: AVX2 + FMA are present (checked above).
        check(|x, _| unsafe { run(x) });
    }
}

//! The sparse filterbank on a group's spectra (one frame per lane), and the scatter of
//! its mel values to the clip's `[segment][mel][frame]` buffer.

use crate::frames::Group;
use crate::simd::Simd;
use crate::tables::Span;

/// `mel[m] = Σ_k w[m][k] · power[k]` for every lane, then each lane's values written to
/// `distinct[g.out[j] + m · n_frames]`.
///
/// # Safety
/// `power` is readable for every bin the filters touch (`LANES` floats per bin).
#[inline(always)]
pub(crate) unsafe fn filterbank<S: Simd>(
    s: S,
    filters: &[Span],
    power: *const f32,
    g: &Group,
    n_frames: usize,
    distinct: &mut [f32],
) {
    let l = S::LANES;
    let mut lanes = [0f32; 16];
    for (m, f) in filters.iter().enumerate() {
        // Two accumulators (even and odd bins) halve the FMA latency chain.
        let (mut a0, mut a1) = (s.splat(0.0), s.splat(0.0));
        let mut p = power.wrapping_add(f.start * l);
        let mut pairs = f.weights.chunks_exact(2);
        for w in &mut pairs {
            // SAFETY: bins `start + i`, `start + i + 1` are inside `power` (caller).
            unsafe {
                a0 = s.mul_add(s.splat(w[0]), s.load(p), a0);
                a1 = s.mul_add(s.splat(w[1]), s.load(p.add(l)), a1);
                p = p.add(2 * l);
            }
        }
        if let [w] = pairs.remainder() {
            // SAFETY: the span's last bin is inside `power` (caller).
            a0 = s.mul_add(s.splat(*w), unsafe { s.load(p) }, a0);
        }
        // SAFETY: `lanes` holds 16 ≥ LANES floats.
        unsafe { s.store(lanes.as_mut_ptr(), s.add(a0, a1)) };
        let row = m * n_frames;
        for (&o, &v) in g.out[..g.active].iter().zip(&lanes) {
            distinct[o + row] = v;
        }
    }
}

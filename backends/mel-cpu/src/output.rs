//! Output conversion: f32 as is, f16 and bf16 rounded to nearest even by `half` (F16C
//! where the CPU has it, bit-identical to its software path), one conversion per distinct
//! segment, copied to every output position that uses it.

use half::slice::HalfFloatSliceExt;
use half::{bf16, f16};

use crate::tables::Tables;

/// Output element types and their conversion from f32.
pub(crate) trait OutElem: Copy + Send + Sync {
    /// Converts `src` into `dst` (same length), rounding to nearest even.
    fn convert(src: &[f32], dst: &mut [Self]);
}

impl OutElem for f32 {
    fn convert(src: &[f32], dst: &mut [f32]) {
        dst.copy_from_slice(src);
    }
}

impl OutElem for f16 {
    fn convert(src: &[f32], dst: &mut [f16]) {
        dst.convert_from_f32_slice(src);
    }
}

impl OutElem for bf16 {
    fn convert(src: &[f32], dst: &mut [bf16]) {
        dst.convert_from_f32_slice(src);
    }
}

/// Writes a clip's distinct spectrograms (`[distinct][mel][frame]`) to its output
/// positions `[long][short][mel][frame]`.
pub(crate) fn write<T: OutElem>(t: &Tables, distinct: &[f32], dst: &mut [T]) {
    let vps = t.vps;
    let csr = &t.positions;
    for (d, src) in distinct.chunks_exact(vps).enumerate() {
        let pos = &csr.out[csr.start[d] as usize..csr.start[d + 1] as usize];
        let Some((&first, rest)) = pos.split_first() else {
            continue;
        };
        let first = first as usize * vps;
        T::convert(src, &mut dst[first..first + vps]);
        for &p in rest {
            dst.copy_within(first..first + vps, p as usize * vps);
        }
    }
}

//! The transforms: a batched real FFT for power-of-two sizes with one frame per SIMD
//! lane ([`batched`]), and realfft one frame at a time for every other size ([`single`]).
//! Both take each frame's mean out before the transform and add its exact contribution
//! back afterwards (the DC remedy, docs/numerics.md).

pub(crate) mod batched;
pub(crate) mod single;

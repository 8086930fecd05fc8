//! The DSP reference: the exact definitions every backend must reproduce.

pub mod filterbank;
pub mod framing;
pub mod tables;
pub mod window;

pub use filterbank::{MelFilter, SparseFilterbank, hz_to_mel, mel_to_hz, melscale_fbanks};
pub use framing::{frame_count, pad_segment};
pub use tables::{
    ComplexDw, FilterSpans, SegmentCsr, WindowSpectrum, dft_twiddles, f32_dw, stockham_radices,
    stockham_twiddles, stockham_twiddles_dw, stockham_twiddles_f32, twiddles_dw, twiddles_f32,
};
pub use window::window;

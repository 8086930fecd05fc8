//! Framing identical to `torch.stft(center=..., pad_mode=...)`.

use crate::spec::PadMode;

/// Frames `torch.stft` produces for a signal of `len` samples.
/// Returns 0 when the (padded) signal is shorter than one FFT.
pub fn frame_count(len: usize, n_fft: usize, hop: usize, center: bool) -> usize {
    let padded = if center { len + 2 * (n_fft / 2) } else { len };
    if padded < n_fft || hop == 0 {
        0
    } else {
        1 + (padded - n_fft) / hop
    }
}

/// Writes `segment` padded with `pad` samples on each side into `out` (resized to fit).
/// `Reflect` mirrors without repeating the edge sample and needs `pad < segment.len()`;
/// `Constant` pads zeros. With `pad == 0` the segment is copied unchanged.
pub fn pad_segment<T: Copy + Default>(segment: &[T], pad: usize, mode: PadMode, out: &mut Vec<T>) {
    let n = segment.len();
    out.clear();
    out.resize(n + 2 * pad, T::default());
    out[pad..pad + n].copy_from_slice(segment);
    if mode == PadMode::Reflect && pad > 0 {
        assert!(pad < n, "reflect padding needs pad < segment length");
        for i in 0..pad {
            out[pad - 1 - i] = segment[i + 1];
            out[pad + n + i] = segment[n - 2 - i];
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reflect_matches_numpy() {
        // np.pad([1,2,3,4,5], 2, mode="reflect") == [3,2,1,2,3,4,5,4,3]
        let mut out = vec![];
        pad_segment(&[1, 2, 3, 4, 5], 2, PadMode::Reflect, &mut out);
        assert_eq!(out, vec![3, 2, 1, 2, 3, 4, 5, 4, 3]);
        pad_segment(&[1, 2, 3], 2, PadMode::Constant, &mut out);
        assert_eq!(out, vec![0, 0, 1, 2, 3, 0, 0]);
    }

    #[test]
    fn frame_counts_match_torch() {
        // leak-4k short window: 512 samples, n_fft 512, hop 128, centred: 5 frames.
        assert_eq!(frame_count(512, 512, 128, true), 5);
        // speech-16k: 16000 samples, n_fft 400, hop 160: 101 frames.
        assert_eq!(frame_count(16000, 400, 160, true), 101);
        assert_eq!(frame_count(1000, 400, 160, false), 4);
        assert_eq!(frame_count(300, 400, 160, false), 0);
        // odd n_fft pads n_fft // 2 each side
        assert_eq!(frame_count(100, 11, 10, true), 10);
    }
}

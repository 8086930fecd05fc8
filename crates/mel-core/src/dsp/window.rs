//! Periodic analysis windows, zero-padded to `n_fft` as `torch.stft` does.

use std::f64::consts::PI;

use crate::spec::WindowKind;

/// The periodic window of `win_length` samples, centred in `n_fft` samples of zeros
/// (`torch.stft` pads `(n_fft - win_length) / 2` zeros on the left).
pub fn window(kind: WindowKind, win_length: usize, n_fft: usize) -> Vec<f64> {
    assert!(win_length <= n_fft, "win_length must not exceed n_fft");
    let n = win_length as f64;
    let core = (0..win_length).map(|i| {
        let phase = 2.0 * PI * i as f64 / n;
        match kind {
            WindowKind::Hann => 0.5 - 0.5 * phase.cos(),
            WindowKind::Hamming => 0.54 - 0.46 * phase.cos(),
            WindowKind::Rectangular => 1.0,
        }
    });
    let left = (n_fft - win_length) / 2;
    let mut out = vec![0.0; n_fft];
    for (slot, w) in out[left..left + win_length].iter_mut().zip(core) {
        *slot = w;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn periodic_hann_matches_definition() {
        let w = window(WindowKind::Hann, 8, 8);
        // torch.hann_window(8, periodic=True)
        let expect = [0.0, 0.146447, 0.5, 0.853553, 1.0, 0.853553, 0.5, 0.146447];
        for (a, b) in w.iter().zip(expect) {
            assert!((a - b).abs() < 1e-6, "{w:?}");
        }
    }

    #[test]
    fn short_window_is_centred() {
        let w = window(WindowKind::Rectangular, 4, 8);
        assert_eq!(w, vec![0.0, 0.0, 1.0, 1.0, 1.0, 1.0, 0.0, 0.0]);
        let w = window(WindowKind::Hamming, 3, 6);
        assert_eq!(w[0], 0.0);
        assert!((w[1] - 0.08).abs() < 1e-12);
        assert_eq!(w[4], 0.0);
    }
}

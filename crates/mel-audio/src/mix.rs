//! Downmixing: the one rule every decoder applies to turn a frame of channels into one
//! mono sample (`audio.downmix`: the mean, the first channel, or one chosen channel).

use std::path::Path;

use mel_core::spec::Downmix;
use mel_core::{Error, Result};

/// Whether channel `c` contributes to the mono mix.
pub(crate) fn takes(downmix: Downmix, c: usize) -> bool {
    match downmix {
        Downmix::Mean => true,
        Downmix::First => c == 0,
        Downmix::Channel(k) => c == k as usize,
    }
}

/// The mono sample of a frame whose contributing channels sum to `acc`.
pub(crate) fn mono(acc: f32, downmix: Downmix, channels: usize) -> f32 {
    match downmix {
        Downmix::Mean => acc / channels as f32,
        Downmix::First | Downmix::Channel(_) => acc,
    }
}

/// A picked channel must exist in a file of `channels` channels.
pub(crate) fn check_channel(downmix: Downmix, channels: usize, path: &Path) -> Result<()> {
    match downmix {
        Downmix::Channel(k) if k as usize >= channels => Err(Error::unsupported(
            path,
            format!("has {channels} channel(s); audio.downmix picks channel {k} (counting from 0)"),
        )),
        _ => Ok(()),
    }
}

/// Appends one mono sample per whole frame of `interleaved` (`channels` values each) to `out`.
pub(crate) fn mix_interleaved(
    interleaved: &[f32],
    channels: usize,
    downmix: Downmix,
    out: &mut Vec<f32>,
) {
    out.extend(interleaved.chunks_exact(channels).map(|frame| {
        let acc: f32 = frame
            .iter()
            .enumerate()
            .filter(|&(c, _)| takes(downmix, c))
            .map(|(_, &v)| v)
            .sum();
        mono(acc, downmix, channels)
    }));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mean_first_and_one_channel() {
        let frames = [0.5, 0.25, -0.5, 0.0];
        let mut out = vec![];
        mix_interleaved(&frames, 2, Downmix::Mean, &mut out);
        mix_interleaved(&frames, 2, Downmix::First, &mut out);
        mix_interleaved(&frames, 2, Downmix::Channel(1), &mut out);
        assert_eq!(out, [0.375, -0.25, 0.5, -0.5, 0.25, 0.0]);
        assert!(check_channel(Downmix::Channel(2), 2, Path::new("x.wav")).is_err());
        assert!(check_channel(Downmix::Channel(1), 2, Path::new("x.wav")).is_ok());
    }
}

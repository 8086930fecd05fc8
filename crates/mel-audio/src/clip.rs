//! Clip fitting: the contract every decoding route keeps once it knows what a file holds.
//! The frame count is checked against the header's promise ([`settle`]), the stream's
//! layout and length against the limits ([`check_stream`], [`keep_limit`]), the samples
//! for NaN and infinity ([`check_finite`]), and the audio is brought into a fixed-length
//! row ([`placement`], [`fit_clip`]) the same way for WAV, symphonia and live audio.

use std::path::Path;

use mel_core::spec::{AudioConfig, PadPolicy, TrimPolicy};
use mel_core::{Error, Result};

use crate::mix::check_channel;
use crate::resample::{MAX_FILE_SAMPLES, MAX_RATE, ResampleError, reach, resample};

/// What a decoded file was like.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DecodeInfo {
    /// The file's sample rate, Hz.
    pub rate: u32,
    /// Frames the file holds, counted from its data (never only from its header).
    pub frames: usize,
    /// Channels in the file.
    pub channels: u16,
    /// Bits per sample (0 for codecs without one).
    pub bits: u16,
}

/// The one check every route makes once it knows how many frames the file holds (`held`,
/// counted from the data) and how many its header promised (`promised`, `None` when the
/// format makes no promise): fewer than promised is a truncated file, none is no audio.
/// Returns the frame count to report.
pub(crate) fn settle(path: &Path, promised: Option<u64>, held: u64) -> Result<usize> {
    if let Some(p) = promised.filter(|&p| p > held) {
        return Err(Error::decode(
            path,
            format!("truncated data: the header promises {p} frames, the file holds {held}"),
        ));
    }
    if held == 0 {
        return Err(Error::decode(path, "no audio: the file holds no frames"));
    }
    usize::try_from(held)
        .map_err(|_| Error::decode(path, "more frames than this machine can count"))
}

/// The checks every route makes on a stream's layout before decoding it: the picked
/// channel exists, and the rate is within what melctl resamples.
pub(crate) fn check_stream(
    path: &Path,
    audio: &AudioConfig,
    channels: usize,
    rate: u32,
) -> Result<()> {
    check_channel(audio.downmix, channels, path)?;
    if rate > MAX_RATE {
        return Err(Error::limit(
            path.display().to_string(),
            format!("the sample rate {rate} Hz is above the limit of {MAX_RATE} Hz"),
        ));
    }
    Ok(())
}

/// Source frames read beyond the kept part when trimming from the start, so that the
/// resampler's filter sees real audio around the cut.
pub(crate) const RESAMPLE_MARGIN: usize = 16_384;

/// A file may hold at most this many clip lengths of audio when all of it is needed.
pub const MAX_CLIPS_LONG: usize = 64;

/// How many source frames at `rate` decoding keeps for a `clip`-sample row: beyond this,
/// decoding stops (trim from the start) or the file is refused (trim from the centre
/// needs all of it when it must be resampled). Never more than [`MAX_FILE_SAMPLES`].
pub(crate) fn keep_limit(clip: usize, rate: u32, audio: &AudioConfig) -> usize {
    let needed = (clip as u128 * rate as u128).div_ceil(audio.sample_rate.max(1) as u128);
    let needed = usize::try_from(needed).unwrap_or(usize::MAX);
    match audio.trim {
        // The resampler's filter must see real audio around the cut: its reach grows
        // with the filter the ratio and quality need.
        TrimPolicy::Start => needed.saturating_add(RESAMPLE_MARGIN.max(reach(
            rate,
            audio.sample_rate,
            audio.resample_quality,
        ))),
        TrimPolicy::Center => needed.saturating_mul(MAX_CLIPS_LONG).max(1 << 20),
    }
    .min(MAX_FILE_SAMPLES)
}

/// The error for a file longer than [`keep_limit`] allows when all of it is needed (the
/// same words from decoding, which stops at the limit, and from the probe, which counts
/// the whole file).
pub(crate) fn too_long(path: &Path, limit: usize, rate: u32) -> Error {
    Error::limit(
        path.display().to_string(),
        format!(
            "longer than {MAX_CLIPS_LONG} clip lengths or {MAX_FILE_SAMPLES} samples (over {limit} frames at {rate} Hz); with audio.trim = \"start\" only the beginning is read"
        ),
    )
}

/// A decoded sample that is NaN or infinite, by frame, is an error.
/// `samples` are `channels` interleaved, from frame `first_frame` of the file.
pub(crate) fn check_finite(
    path: &Path,
    samples: &[f32],
    first_frame: usize,
    channels: usize,
) -> Result<()> {
    match samples.iter().position(|x| !x.is_finite()) {
        Some(i) => Err(Error::decode(
            path,
            format!(
                "non-finite sample (NaN or infinity) at frame {}",
                first_frame + i / channels.max(1)
            ),
        )),
        None => Ok(()),
    }
}

/// A decoded float sample (from a float32 or float64 source, exactly as stored) that is NaN,
/// infinite, or finite but beyond the float32 range melctl computes in, by frame: rounded
/// to float32 it would be infinite, and that is no reason to call it "NaN or infinity".
/// `samples` are `channels` interleaved, from frame `first_frame` of the file.
pub(crate) fn check_float(
    path: &Path,
    samples: &[f64],
    first_frame: usize,
    channels: usize,
) -> Result<()> {
    let Some(i) = samples.iter().position(|&x| !(x as f32).is_finite()) else {
        return Ok(());
    };
    let (x, frame) = (samples[i], first_frame + i / channels.max(1));
    if x.is_finite() {
        return Err(Error::decode(
            path,
            format!(
                "corrupt audio data: a sample of {x:e} at frame {frame}, beyond the float32 range (±3.4e38)"
            ),
        ));
    }
    check_finite(path, &[x as f32], frame, 1)
}

/// Where the kept frames of a `frames`-long file go in a `clip`-long row:
/// (frames kept, frames skipped at the start of the file, zeros before them in the row).
pub(crate) fn placement(frames: usize, clip: usize, audio: &AudioConfig) -> (usize, usize, usize) {
    let kept = frames.min(clip);
    let skip = match audio.trim {
        TrimPolicy::Start => 0,
        TrimPolicy::Center => (frames - kept) / 2,
    };
    let pad_before = match audio.pad {
        PadPolicy::End => 0,
        PadPolicy::Both => (clip - kept) / 2,
    };
    (kept, skip, pad_before)
}

/// Brings mono samples at `rate` Hz into a clip row exactly as decoding a file does:
/// resampled to `audio.sample_rate` (`resample`, `audio.resample_quality`), then padded or
/// trimmed per `audio.pad` / `audio.trim`. `dst` is the row, `audio.clip_samples()` long.
/// This is how live audio gets the same treatment as the files a dataset was built from:
/// at the clip's own rate nothing is resampled (so no resampler's limit applies), and with
/// `trim = "start"` only the samples the clip keeps (and the filter's reach past them)
/// are resampled, as decoding keeps only them ([`keep_limit`]).
pub fn fit_clip(
    mono: &[f32],
    rate: u32,
    audio: &AudioConfig,
    dst: &mut [f32],
) -> std::result::Result<(), ResampleError> {
    if rate == audio.sample_rate {
        let (kept, skip, pad_before) = placement(mono.len(), dst.len(), audio);
        place(&mono[skip..skip + kept], pad_before, dst);
        return Ok(());
    }
    let needed = match audio.trim {
        TrimPolicy::Start if rate > 0 => {
            &mono[..mono.len().min(keep_limit(dst.len(), rate, audio))]
        }
        _ => mono,
    };
    let at_rate = resample(needed, rate, audio.sample_rate, audio.resample_quality)?;
    let (kept, skip, pad_before) = placement(at_rate.len(), dst.len(), audio);
    place(&at_rate[skip..skip + kept], pad_before, dst);
    Ok(())
}

/// Where decoding puts a file's audio: a fixed-length row (padded or trimmed), or all of
/// it at the target rate (whole clips, at most `max` samples long: the caller checks the
/// file's length against it, decoding only stops reading past it).
pub(crate) enum Dst<'a> {
    /// A row of `audio.clip_samples()`; the clip is fitted into it.
    Row(&'a mut [f32]),
    /// The whole file at the target rate, replacing what the vector held.
    Whole(&'a mut Vec<f32>, usize),
}

impl Dst<'_> {
    /// The samples decoding keeps at most: the row's length, or the whole clip's bound.
    pub(crate) fn clip(&self) -> usize {
        match self {
            Dst::Row(d) => d.len(),
            Dst::Whole(_, max) => *max,
        }
    }

    /// Brings `mono` (at `rate` Hz) into the destination: fitted into the row as
    /// [`fit_clip`] does, or resampled whole.
    pub(crate) fn put(
        self,
        mono: &[f32],
        rate: u32,
        audio: &AudioConfig,
    ) -> std::result::Result<(), ResampleError> {
        match self {
            Dst::Row(d) => fit_clip(mono, rate, audio, d),
            Dst::Whole(out, _) if rate == audio.sample_rate => {
                out.clear();
                out.extend_from_slice(mono);
                Ok(())
            }
            Dst::Whole(out, _) => {
                *out = resample(mono, rate, audio.sample_rate, audio.resample_quality)?;
                Ok(())
            }
        }
    }

    /// Places `kept` samples at the target rate: into the row from `pad_before`, or as the whole clip.
    pub(crate) fn place(self, kept: &[f32], pad_before: usize) {
        match self {
            Dst::Row(d) => place(kept, pad_before, d),
            Dst::Whole(out, _) => {
                out.clear();
                out.extend_from_slice(kept);
            }
        }
    }
}

/// Writes `kept` into `dst` from `pad_before` and zeros the rest of `dst` (only the
/// padding is written twice over: no pass over the whole row first).
pub(crate) fn place(kept: &[f32], pad_before: usize, dst: &mut [f32]) {
    let (before, rest) = dst.split_at_mut(pad_before);
    let (body, after) = rest.split_at_mut(kept.len());
    before.fill(0.0);
    body.copy_from_slice(kept);
    after.fill(0.0);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn audio() -> AudioConfig {
        AudioConfig {
            sample_rate: 4096,
            clip_seconds: 1.0,
            ..AudioConfig::default()
        }
    }

    /// Live samples longer than the resampler's limit were refused ("resampling 4096 Hz
    /// to 4096 Hz ... over the limit") though a build and a file accept them: at the
    /// clip's rate nothing is resampled, and with trim = "start" only the kept part is.
    #[test]
    fn long_live_samples_are_fitted_as_a_file_would_be() {
        let a = audio();
        let signal = |n: usize, rate: f64| -> Vec<f32> {
            (0..n)
                .map(|i| {
                    (0.3 * (2.0 * std::f64::consts::PI * 300.0 * i as f64 / rate).sin()) as f32
                })
                .collect()
        };
        let mut row = vec![0.0f32; 4096];
        let same = signal(MAX_FILE_SAMPLES + 10, 4096.0);
        fit_clip(&same, 4096, &a, &mut row).unwrap();
        assert_eq!(row, same[..4096]);
        // 2048 Hz to 4096 Hz: the whole would be 2^25 + 2 samples, over the limit.
        let long = signal(MAX_FILE_SAMPLES / 2 + 1, 2048.0);
        fit_clip(&long, 2048, &a, &mut row).unwrap();
        let mut short_row = vec![0.0f32; 4096];
        fit_clip(&long[..100_000], 2048, &a, &mut short_row).unwrap();
        let worst = row
            .iter()
            .zip(&short_row)
            .map(|(x, y)| (x - y).abs())
            .fold(0.0f32, f32::max);
        assert!(worst < 1e-6, "{worst}");
        // From the centre the whole is needed: the limit stays, named.
        let centre = AudioConfig {
            trim: TrimPolicy::Center,
            ..a
        };
        let e = fit_clip(&long, 2048, &centre, &mut row).unwrap_err();
        assert!(e.to_string().contains("over the limit"), "{e}");
    }
}

//! WAV decoding with hound straight into a fixed-length mono row: downmix, pad and
//! trim happen while reading, and no more than the kept frames are ever read.

use std::path::Path;

use hound::{SampleFormat, WavReader};
use mel_core::config::{AudioConfig, Downmix, PadPolicy, TrimPolicy};
use mel_core::{Error, Result};

/// What a decoded file was like.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DecodeInfo {
    /// Frames in the file.
    pub frames: usize,
    /// Channels in the file.
    pub channels: u16,
    /// Bits per sample.
    pub bits: u16,
}

/// Decodes the WAV file at `path` into `dst` (exactly `audio.clip_samples()` long):
/// PCM 8/16/24/32-bit or float 32, any channel count, at `audio.sample_rate`.
/// Short files are padded with zeros, long ones trimmed, per `audio`.
pub fn decode_into(path: &Path, audio: &AudioConfig, dst: &mut [f32]) -> Result<DecodeInfo> {
    let bad = |reason: String| Error::bad_input(path, reason);
    let len = std::fs::metadata(path)
        .map_err(|e| bad(format!("cannot read: {e}")))?
        .len();
    if len == 0 {
        return Err(bad("empty file (0 bytes)".into()));
    }
    let mut reader = WavReader::open(path).map_err(|e| bad(describe(e)))?;
    let spec = reader.spec();
    if spec.channels == 0 {
        return Err(bad("the header says 0 channels".into()));
    }
    if spec.sample_rate != audio.sample_rate {
        return Err(bad(format!(
            "sample rate is {} Hz, the configuration wants {} Hz (audio.sample_rate)",
            spec.sample_rate, audio.sample_rate
        )));
    }
    let frames = reader.duration() as usize;
    let clip = dst.len();
    let kept = frames.min(clip);
    let skip = match audio.trim {
        TrimPolicy::Start => 0,
        TrimPolicy::Center => (frames - kept) / 2,
    };
    let pad_before = match audio.pad {
        PadPolicy::End => 0,
        PadPolicy::Both => (clip - kept) / 2,
    };
    if skip > 0 {
        reader
            .seek(skip as u32)
            .map_err(|e| bad(describe(hound::Error::IoError(e))))?;
    }
    dst.fill(0.0);
    let out = &mut dst[pad_before..pad_before + kept];
    let channels = spec.channels as usize;
    let read = match (spec.sample_format, spec.bits_per_sample) {
        (SampleFormat::Float, 32) => {
            read_frames(reader.samples::<f32>(), channels, audio.downmix, 1.0, out)
        }
        (SampleFormat::Int, 16) => read_frames(
            reader.samples::<i16>(),
            channels,
            audio.downmix,
            1.0 / 32768.0,
            out,
        ),
        (SampleFormat::Int, b @ (8 | 24 | 32)) => {
            let scale = 1.0 / (1u64 << (b - 1)) as f32;
            read_frames(reader.samples::<i32>(), channels, audio.downmix, scale, out)
        }
        (f, b) => return Err(bad(format!("unsupported sample format: {f:?} {b}-bit"))),
    };
    let done = read.map_err(|e| bad(describe(e)))?;
    if done < kept {
        return Err(bad(format!(
            "truncated data: the header promises {frames} frames, the file ends after {}",
            skip + done
        )));
    }
    if let Some(i) = out.iter().position(|s| !s.is_finite()) {
        return Err(bad(format!(
            "non-finite sample (NaN or infinity) at frame {}",
            skip + i
        )));
    }
    Ok(DecodeInfo {
        frames,
        channels: spec.channels,
        bits: spec.bits_per_sample,
    })
}

/// Reads frames into `out`, downmixing; returns how many whole frames were read.
fn read_frames<S, I>(
    mut samples: I,
    channels: usize,
    downmix: Downmix,
    scale: f32,
    out: &mut [f32],
) -> hound::Result<usize>
where
    S: Into<Widened>,
    I: Iterator<Item = hound::Result<S>>,
{
    for (i, slot) in out.iter_mut().enumerate() {
        let mut acc = 0.0f32;
        for c in 0..channels {
            let Some(s) = samples.next() else {
                return Ok(i);
            };
            let v = s?.into().0;
            if c == 0 || downmix == Downmix::Mean {
                acc += v;
            }
        }
        *slot = match downmix {
            Downmix::Mean => acc * scale / channels as f32,
            Downmix::First => acc * scale,
        };
    }
    Ok(out.len())
}

/// A sample widened to f32 (exact for i16; i24/i32 round to f32 precision).
struct Widened(f32);

impl From<f32> for Widened {
    fn from(v: f32) -> Self {
        Widened(v)
    }
}

impl From<i16> for Widened {
    fn from(v: i16) -> Self {
        Widened(v as f32)
    }
}

impl From<i32> for Widened {
    fn from(v: i32) -> Self {
        Widened(v as f32)
    }
}

fn describe(e: hound::Error) -> String {
    match e {
        hound::Error::IoError(io)
            if io.kind() == std::io::ErrorKind::UnexpectedEof
                || io.to_string().contains("read enough bytes") =>
        {
            "truncated: the file ends inside its header or data".into()
        }
        hound::Error::IoError(io) => format!("read error: {io}"),
        hound::Error::FormatError(m) => format!("not a valid WAV file: {m}"),
        hound::Error::TooWide => "samples wider than 32 bits".into(),
        hound::Error::UnfinishedSample => "truncated data: the file ends inside a sample".into(),
        hound::Error::Unsupported => "unsupported WAV variant".into(),
        hound::Error::InvalidSampleFormat => "invalid sample format in header".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hound::{WavSpec, WavWriter};

    fn write(path: &Path, spec: WavSpec, frames: &[Vec<f64>]) {
        let mut w = WavWriter::create(path, spec).unwrap();
        for f in frames {
            for &v in f {
                match (spec.sample_format, spec.bits_per_sample) {
                    (SampleFormat::Float, _) => w.write_sample(v as f32).unwrap(),
                    (_, b) => w
                        .write_sample((v * (1i64 << (b - 1)) as f64).round() as i32)
                        .unwrap(),
                }
            }
        }
        w.finalize().unwrap();
    }

    fn audio(rate: u32, samples: usize) -> AudioConfig {
        AudioConfig {
            sample_rate: rate,
            clip_seconds: samples as f64 / rate as f64,
            ..AudioConfig::default()
        }
    }

    #[test]
    fn every_pcm_width_and_float_decode_to_the_same_values() {
        let t = tempfile::tempdir().unwrap();
        let frames: Vec<Vec<f64>> = [0.5, -0.25, 0.125, -1.0].iter().map(|&v| vec![v]).collect();
        for (fmt, bits) in [
            (SampleFormat::Int, 8),
            (SampleFormat::Int, 16),
            (SampleFormat::Int, 24),
            (SampleFormat::Int, 32),
            (SampleFormat::Float, 32),
        ] {
            let p = t.path().join(format!("{bits}{fmt:?}.wav"));
            let spec = WavSpec {
                channels: 1,
                sample_rate: 1000,
                bits_per_sample: bits,
                sample_format: fmt,
            };
            write(&p, spec, &frames);
            let mut dst = vec![9.0; 4];
            let info = decode_into(&p, &audio(1000, 4), &mut dst).unwrap();
            assert_eq!(info.bits, bits);
            assert_eq!(dst, vec![0.5, -0.25, 0.125, -1.0], "{bits}-bit {fmt:?}");
        }
    }

    #[test]
    fn stereo_is_downmixed_by_mean_or_first_channel() {
        let t = tempfile::tempdir().unwrap();
        let p = t.path().join("s.wav");
        let spec = WavSpec {
            channels: 2,
            sample_rate: 8,
            bits_per_sample: 16,
            sample_format: SampleFormat::Int,
        };
        write(&p, spec, &[vec![0.5, 0.25], vec![-0.5, 0.0]]);
        let mut dst = vec![0.0; 2];
        decode_into(&p, &audio(8, 2), &mut dst).unwrap();
        assert_eq!(dst, vec![0.375, -0.25]);
        let mut a = audio(8, 2);
        a.downmix = Downmix::First;
        decode_into(&p, &a, &mut dst).unwrap();
        assert_eq!(dst, vec![0.5, -0.5]);
    }

    #[test]
    fn short_clips_are_padded_and_long_ones_trimmed_per_policy() {
        let t = tempfile::tempdir().unwrap();
        let p = t.path().join("x.wav");
        let spec = WavSpec {
            channels: 1,
            sample_rate: 8,
            bits_per_sample: 16,
            sample_format: SampleFormat::Int,
        };
        let vals = [0.125, 0.25, 0.375, 0.5];
        write(&p, spec, &vals.iter().map(|&v| vec![v]).collect::<Vec<_>>());
        let mut dst = vec![9.0; 6];
        let mut a = audio(8, 6);
        decode_into(&p, &a, &mut dst).unwrap();
        assert_eq!(dst, vec![0.125, 0.25, 0.375, 0.5, 0.0, 0.0]);
        a.pad = PadPolicy::Both;
        decode_into(&p, &a, &mut dst).unwrap();
        assert_eq!(dst, vec![0.0, 0.125, 0.25, 0.375, 0.5, 0.0]);
        let mut dst = vec![9.0; 2];
        let mut a = audio(8, 2);
        decode_into(&p, &a, &mut dst).unwrap();
        assert_eq!(dst, vec![0.125, 0.25]);
        a.trim = TrimPolicy::Center;
        decode_into(&p, &a, &mut dst).unwrap();
        assert_eq!(dst, vec![0.25, 0.375]);
    }

    #[test]
    fn bad_files_are_errors_with_path_and_reason() {
        let t = tempfile::tempdir().unwrap();
        let a = audio(8, 4);
        let mut dst = vec![0.0; 4];
        let text = t.path().join("text.wav");
        std::fs::write(&text, b"this is not audio at all").unwrap();
        let e = decode_into(&text, &a, &mut dst).unwrap_err().to_string();
        assert!(
            e.contains("text.wav") && e.contains("not a valid WAV"),
            "{e}"
        );

        let empty = t.path().join("empty.wav");
        std::fs::write(&empty, b"").unwrap();
        let e = decode_into(&empty, &a, &mut dst).unwrap_err().to_string();
        assert!(e.contains("empty.wav") && e.contains("empty file"), "{e}");

        let header_only = t.path().join("header.wav");
        std::fs::write(&header_only, b"RIFF\x24\x00\x00\x00WAVEfmt ").unwrap();
        let e = decode_into(&header_only, &a, &mut dst)
            .unwrap_err()
            .to_string();
        assert!(e.contains("header.wav") && e.contains("truncated"), "{e}");

        let good = t.path().join("good.wav");
        let spec = WavSpec {
            channels: 1,
            sample_rate: 8,
            bits_per_sample: 16,
            sample_format: SampleFormat::Int,
        };
        write(&good, spec, &vec![vec![0.1]; 4]);
        let bytes = std::fs::read(&good).unwrap();
        let cut = t.path().join("cut.wav");
        std::fs::write(&cut, &bytes[..bytes.len() - 3]).unwrap();
        let e = decode_into(&cut, &a, &mut dst).unwrap_err().to_string();
        assert!(e.contains("cut.wav") && e.contains("truncated"), "{e}");

        let e = decode_into(&good, &audio(16, 4), &mut dst)
            .unwrap_err()
            .to_string();
        assert!(e.contains("8 Hz") && e.contains("16 Hz"), "{e}");

        let e = decode_into(&t.path().join("missing.wav"), &a, &mut dst)
            .unwrap_err()
            .to_string();
        assert!(e.contains("missing.wav"), "{e}");
    }
}

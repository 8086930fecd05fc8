//! Decoding any supported file straight into a fixed-length mono row.
//!
//! Plain PCM/float WAV at the target rate goes through hound (16-bit PCM converted
//! straight from the bytes); downmix, pad and trim happen while reading, and no more
//! than the kept frames are read. Everything else (FLAC, Ogg Vorbis, MP3, AIFF, WAV
//! variants hound does not take, a file at another rate, a `.wav` that is really FLAC)
//! goes through symphonia, whose probe looks at the content, and rubato when the rate
//! differs (see `generic`).

use std::path::Path;

use hound::{SampleFormat, WavReader};
use mel_core::config::{AudioConfig, Downmix, PadPolicy, TrimPolicy};
use mel_core::{Error, Result};

use crate::mix::{check_channel, mono, takes};

/// What a decoded file was like.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DecodeInfo {
    /// The file's sample rate, Hz.
    pub rate: u32,
    /// Frames in the file (as its header says; decoded frames when it says nothing).
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
    let io = |e: std::io::Error| Error::read(path, e);
    let file = crate::open::open_input(path, false).map_err(io)?;
    let len = file.metadata().map_err(io)?.len();
    if len == 0 {
        return Err(Error::decode(path, "empty file (0 bytes)"));
    }
    match WavReader::new(std::io::BufReader::new(file)) {
        Ok(reader) if hound_takes(reader.spec(), audio) => {
            // Where the data starts, to check the header's length against the file's.
            let (spec, frames) = (reader.spec(), reader.duration() as usize);
            let mut inner = reader.into_inner();
            use std::io::Seek;
            let start = inner.stream_position().map_err(io)?;
            check_claimed(frames, spec, start, len, path)?;
            inner.seek(std::io::SeekFrom::Start(0)).map_err(io)?;
            let reader = WavReader::new(inner).map_err(|e| hound_error(path, e))?;
            decode_wav(reader, path, audio, dst)
        }
        Ok(_) => generic_file(path, None, audio, dst),
        Err(e) if falls_back(&e) => generic_file(path, Some(describe(e)), audio, dst),
        Err(e) => Err(hound_error(path, e)),
    }
}

/// Checks, from its header alone, that the file at `path` would decode under `audio`:
/// a WAV header hound takes whose promised data the file holds, or a container, audio
/// track and codec symphonia can open. No audio is decoded; a file that passes can still
/// fail later on corrupt data, but empty, truncated, foreign and unsupported files are
/// found. This is what `melctl build --dry-run` runs on every file.
pub fn probe(path: &Path, audio: &AudioConfig) -> Result<()> {
    let io = |e: std::io::Error| Error::read(path, e);
    let file = crate::open::open_input(path, false).map_err(io)?;
    let len = file.metadata().map_err(io)?.len();
    if len == 0 {
        return Err(Error::decode(path, "empty file (0 bytes)"));
    }
    match WavReader::new(std::io::BufReader::new(file)) {
        Ok(reader) if hound_takes(reader.spec(), audio) => {
            let (spec, frames) = (reader.spec(), reader.duration() as usize);
            check_channel(audio.downmix, spec.channels as usize, path)?;
            let mut inner = reader.into_inner();
            use std::io::Seek;
            let start = inner.stream_position().map_err(io)?;
            check_claimed(frames, spec, start, len, path)
        }
        Ok(_) => generic_probe(path, None, audio),
        Err(e) if falls_back(&e) => generic_probe(path, Some(describe(e)), audio),
        Err(e) => Err(hound_error(path, e)),
    }
}

fn generic_probe(path: &Path, hound_said: Option<String>, audio: &AudioConfig) -> Result<()> {
    let file = crate::open::open_input(path, false).map_err(|e| Error::read(path, e))?;
    crate::generic::probe(Box::new(file), path, hound_said, audio)
}

/// A header that promises more sample data than the file holds is an error, even when
/// the clip would only need the part that is there: such a file is a cut-short copy.
fn check_claimed(
    frames: usize,
    spec: hound::WavSpec,
    data_start: u64,
    file_len: u64,
    path: &Path,
) -> Result<()> {
    let frame_bytes = spec.channels as u64 * spec.bits_per_sample.div_ceil(8) as u64;
    let held = file_len.saturating_sub(data_start) / frame_bytes.max(1);
    if (frames as u64) > held {
        return Err(Error::decode(
            path,
            format!("truncated data: the header promises {frames} frames, the file holds {held}"),
        ));
    }
    Ok(())
}

/// Whether hound's reader handles this stream (otherwise symphonia does).
fn hound_takes(spec: hound::WavSpec, audio: &AudioConfig) -> bool {
    let format_ok = matches!(
        (spec.sample_format, spec.bits_per_sample),
        (SampleFormat::Float, 32) | (SampleFormat::Int, 8 | 16 | 24 | 32)
    );
    format_ok && spec.channels > 0 && spec.sample_rate == audio.sample_rate && spec.sample_rate > 0
}

/// Whether hound's error means "not something hound reads" (symphonia may), rather than
/// a broken file.
fn falls_back(e: &hound::Error) -> bool {
    matches!(
        e,
        hound::Error::FormatError(_)
            | hound::Error::Unsupported
            | hound::Error::InvalidSampleFormat
    )
}

fn generic_file(
    path: &Path,
    hound_said: Option<String>,
    audio: &AudioConfig,
    dst: &mut [f32],
) -> Result<DecodeInfo> {
    let file = crate::open::open_input(path, false).map_err(|e| Error::read(path, e))?;
    crate::generic::decode(Box::new(file), path, hound_said, audio, dst)
}

/// Decodes a WAV file already read into memory (`bytes`, the whole file at `path`) into
/// `dst`, exactly as [`decode_into`] would decode the file.
pub fn decode_bytes_into(
    bytes: &[u8],
    path: &Path,
    audio: &AudioConfig,
    dst: &mut [f32],
) -> Result<DecodeInfo> {
    if bytes.is_empty() {
        return Err(Error::decode(path, "empty file (0 bytes)"));
    }
    let reader = match WavReader::new(std::io::Cursor::new(bytes)) {
        Ok(r) => r,
        Err(e) if falls_back(&e) => {
            let source = Box::new(std::io::Cursor::new(bytes.to_vec()));
            return crate::generic::decode(source, path, Some(describe(e)), audio, dst);
        }
        Err(e) => return Err(hound_error(path, e)),
    };
    let spec = reader.spec();
    if !hound_takes(spec, audio) {
        let source = Box::new(std::io::Cursor::new(bytes.to_vec()));
        return crate::generic::decode(source, path, None, audio, dst);
    }
    if spec.sample_format == SampleFormat::Int
        && spec.bits_per_sample == 16
        && spec.channels > 0
        && spec.sample_rate == audio.sample_rate
    {
        // Fast path for the common case: hound parsed the header and left the reader at
        // the first sample; convert the little-endian samples straight from the bytes.
        let frames = reader.duration() as usize;
        let start = (reader.into_inner().position() as usize).min(bytes.len());
        check_claimed(frames, spec, start as u64, bytes.len() as u64, path)?;
        return decode_pcm16(&bytes[start..], frames, spec.channels, path, audio, dst);
    }
    let frames = reader.duration() as usize;
    let mut inner = reader.into_inner();
    let start = inner.position();
    check_claimed(frames, spec, start, bytes.len() as u64, path)?;
    inner.set_position(0);
    let reader = WavReader::new(inner).map_err(|e| hound_error(path, e))?;
    decode_wav(reader, path, audio, dst)
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
/// resampled to `audio.sample_rate` (rubato, `audio.resample_quality`), then padded or
/// trimmed per `audio.pad` / `audio.trim`. `dst` is the row, `audio.clip_samples()` long.
/// This is how live audio gets the same treatment as the files a dataset was built from.
pub fn fit_clip(
    mono: &[f32],
    rate: u32,
    audio: &AudioConfig,
    dst: &mut [f32],
) -> std::result::Result<(), crate::resample::ResampleError> {
    let at_rate = crate::resample::resample(mono, rate, audio.sample_rate, audio.resample_quality)?;
    let (kept, skip, pad_before) = placement(at_rate.len(), dst.len(), audio);
    dst.fill(0.0);
    dst[pad_before..pad_before + kept].copy_from_slice(&at_rate[skip..skip + kept]);
    Ok(())
}

/// 16-bit PCM samples from `data` (the data chunk onwards) into `dst`.
fn decode_pcm16(
    data: &[u8],
    frames: usize,
    channels: u16,
    path: &Path,
    audio: &AudioConfig,
    dst: &mut [f32],
) -> Result<DecodeInfo> {
    let (kept, skip, pad_before) = placement(frames, dst.len(), audio);
    let ch = channels as usize;
    check_channel(audio.downmix, ch, path)?;
    let data = data.get(skip * ch * 2..).unwrap_or(&[]);
    dst.fill(0.0);
    let out = &mut dst[pad_before..pad_before + kept];
    let done = if ch == 1 {
        let n = (data.len() / 2).min(kept);
        for (o, b) in out[..n].iter_mut().zip(data.chunks_exact(2)) {
            *o = i16::from_le_bytes([b[0], b[1]]) as f32 * (1.0 / 32768.0);
        }
        n
    } else {
        let samples = data
            .chunks_exact(2)
            .map(|b| Ok::<i16, hound::Error>(i16::from_le_bytes([b[0], b[1]])));
        read_frames(samples, ch, audio.downmix, 1.0 / 32768.0, out)
            .map_err(|e| hound_error(path, e))?
    };
    if done < kept {
        return Err(Error::decode(
            path,
            format!(
                "truncated data: the header promises {frames} frames, the file ends after {}",
                skip + done
            ),
        ));
    }
    Ok(DecodeInfo {
        rate: audio.sample_rate,
        frames,
        channels,
        bits: 16,
    })
}

fn decode_wav<R: std::io::Read + std::io::Seek>(
    mut reader: WavReader<R>,
    path: &Path,
    audio: &AudioConfig,
    dst: &mut [f32],
) -> Result<DecodeInfo> {
    let bad = |reason: String| Error::decode(path, reason);
    let spec = reader.spec();
    if spec.channels == 0 {
        return Err(bad("the header says 0 channels".into()));
    }
    check_channel(audio.downmix, spec.channels as usize, path)?;
    if spec.sample_rate != audio.sample_rate {
        return Err(Error::unsupported(
            path,
            format!(
                "sample rate is {} Hz, the configuration wants {} Hz (audio.sample_rate)",
                spec.sample_rate, audio.sample_rate
            ),
        ));
    }
    let frames = reader.duration() as usize;
    let (kept, skip, pad_before) = placement(frames, dst.len(), audio);
    if skip > 0 {
        reader
            .seek(skip as u32)
            .map_err(|e| hound_error(path, hound::Error::IoError(e)))?;
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
        (f, b) => {
            return Err(Error::unsupported(
                path,
                format!("unsupported sample format: {f:?} {b}-bit"),
            ));
        }
    };
    let done = read.map_err(|e| hound_error(path, e))?;
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
        rate: spec.sample_rate,
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
            let v = match samples.next() {
                None => return Ok(i),
                // The data ends early (inside a sample or frame): report it as truncated
                // data with the frames that were whole, like running out at a boundary.
                Some(Err(e)) if is_eof(&e) => return Ok(i),
                Some(s) => s?.into().0,
            };
            if takes(downmix, c) {
                acc += v;
            }
        }
        *slot = mono(acc * scale, downmix, channels);
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

/// hound's ways of saying the input ended early: an `UnexpectedEof` I/O error, or the
/// `ErrorKind::Other` error hound 3.5 builds for a short read (`read.rs`, "Failed to read
/// enough bytes."), which carries no other mark than its text.
fn is_eof(e: &hound::Error) -> bool {
    matches!(e, hound::Error::IoError(io)
        if io.kind() == std::io::ErrorKind::UnexpectedEof
            || (io.kind() == std::io::ErrorKind::Other
                && io.to_string() == "Failed to read enough bytes."))
}

/// hound's error as the kind it is: a read failure, a truncated or malformed file, or an
/// unsupported variant.
fn hound_error(path: &Path, e: hound::Error) -> Error {
    match e {
        e if is_eof(&e) => Error::decode(path, describe(e)),
        hound::Error::IoError(io) => Error::read(path, io),
        e @ (hound::Error::TooWide | hound::Error::Unsupported) => {
            Error::unsupported(path, describe(e))
        }
        e => Error::decode(path, describe(e)),
    }
}

pub(crate) fn describe(e: hound::Error) -> String {
    match e {
        e if is_eof(&e) => "truncated: the file ends inside its header or data".into(),
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

        // Another rate is resampled (rubato), not refused: 4 frames at 8 Hz are 8 at 16 Hz.
        let mut up = vec![0.0; 8];
        let info = decode_into(&good, &audio(16, 8), &mut up).unwrap();
        assert_eq!(info.frames, 4);
        assert!(
            up.iter().all(|x| x.is_finite()) && up.iter().any(|&x| x != 0.0),
            "{up:?}"
        );

        let e = decode_into(&t.path().join("missing.wav"), &a, &mut dst)
            .unwrap_err()
            .to_string();
        assert!(e.contains("missing.wav"), "{e}");
    }

    #[test]
    fn decoding_from_bytes_equals_decoding_the_file_in_every_case() {
        let t = tempfile::tempdir().unwrap();
        let mut files = Vec::new();
        for (ch, bits, fmt, n) in [
            (1, 16, SampleFormat::Int, 5),
            (1, 16, SampleFormat::Int, 13),
            (2, 16, SampleFormat::Int, 9),
            (3, 16, SampleFormat::Int, 4),
            (1, 24, SampleFormat::Int, 7),
            (2, 32, SampleFormat::Float, 8),
        ] {
            let p = t.path().join(format!("{ch}-{bits}-{n}.wav"));
            let spec = WavSpec {
                channels: ch,
                sample_rate: 8,
                bits_per_sample: bits,
                sample_format: fmt,
            };
            let frames: Vec<Vec<f64>> = (0..n)
                .map(|i| {
                    (0..ch)
                        .map(|c| ((i * 3 + c as usize) % 7) as f64 / 8.0 - 0.4)
                        .collect()
                })
                .collect();
            write(&p, spec, &frames);
            let bytes = std::fs::read(&p).unwrap();
            let cut = t.path().join(format!("cut-{ch}-{bits}-{n}.wav"));
            std::fs::write(&cut, &bytes[..bytes.len() - 5]).unwrap();
            files.push(p);
            files.push(cut);
        }
        for f in &files {
            let bytes = std::fs::read(f).unwrap();
            for (pad, trim, downmix) in [
                (PadPolicy::End, TrimPolicy::Start, Downmix::Mean),
                (PadPolicy::Both, TrimPolicy::Center, Downmix::First),
            ] {
                for clip in [3, 8, 20] {
                    let mut a = audio(8, clip);
                    a.pad = pad;
                    a.trim = trim;
                    a.downmix = downmix;
                    let mut x = vec![7.0; clip];
                    let mut y = vec![7.0; clip];
                    let rx = decode_into(f, &a, &mut x).map_err(|e| e.to_string());
                    let ry = decode_bytes_into(&bytes, f, &a, &mut y).map_err(|e| e.to_string());
                    assert_eq!(rx, ry, "{} clip {clip}", f.display());
                    if rx.is_ok() {
                        assert_eq!(x, y, "{} clip {clip}", f.display());
                    }
                }
            }
        }
    }

    /// A 16-bit mono PCM WAV whose header claims `rate`, holding `samples` samples.
    fn wav_claiming(rate: u32, samples: usize) -> Vec<u8> {
        let data = samples * 2;
        let mut b = Vec::new();
        b.extend_from_slice(b"RIFF");
        b.extend_from_slice(&((36 + data) as u32).to_le_bytes());
        b.extend_from_slice(b"WAVEfmt ");
        b.extend_from_slice(&16u32.to_le_bytes());
        b.extend_from_slice(&1u16.to_le_bytes()); // PCM
        b.extend_from_slice(&1u16.to_le_bytes()); // mono
        b.extend_from_slice(&rate.to_le_bytes());
        b.extend_from_slice(&rate.wrapping_mul(2).to_le_bytes());
        b.extend_from_slice(&2u16.to_le_bytes());
        b.extend_from_slice(&16u16.to_le_bytes());
        b.extend_from_slice(b"data");
        b.extend_from_slice(&(data as u32).to_le_bytes());
        b.extend((0..samples).flat_map(|i| ((i % 200) as i16 * 100).to_le_bytes()));
        b
    }

    #[test]
    fn headers_claiming_absurd_rates_are_refused_without_allocating() {
        let t = tempfile::tempdir().unwrap();
        let audio = AudioConfig::default(); // 4096 Hz, 10 s
        let mut dst = vec![0.0; audio.clip_samples()];
        let huge = t.path().join("huge-rate.wav");
        std::fs::write(&huge, wav_claiming(u32::MAX, 1000)).unwrap();
        let e = decode_into(&huge, &audio, &mut dst).unwrap_err();
        assert_eq!(e.failure_kind(), mel_core::FailureKind::Limit, "{e}");
        assert!(e.to_string().contains("above the limit"), "{e}");
        // 1 Hz, trim from the centre: the whole file is needed, and its resampled length
        // (x4096) is over the per-file limit.
        let slow = t.path().join("one-hz.wav");
        std::fs::write(&slow, wav_claiming(1, 20_000)).unwrap();
        let centre = AudioConfig {
            trim: TrimPolicy::Center,
            ..audio.clone()
        };
        let e = decode_into(&slow, &centre, &mut dst).unwrap_err();
        assert_eq!(e.failure_kind(), mel_core::FailureKind::Limit, "{e}");
        let bytes = std::fs::read(&slow).unwrap();
        let e = decode_bytes_into(&bytes, &slow, &centre, &mut dst).unwrap_err();
        assert_eq!(e.failure_kind(), mel_core::FailureKind::Limit, "{e}");
    }
}

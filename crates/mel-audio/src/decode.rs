//! Decoding any supported file straight into a fixed-length mono row, under one contract
//! whatever the format or the target rate:
//!
//! 1. **One route per file, chosen from its content** ([`crate::sniff`]): RIFF/RF64 WAVE
//!    goes to melctl's own reader ([`crate::wav`]; PCM, float and G.711 are converted
//!    there, ADPCM by symphonia), every other supported container to its symphonia reader
//!    ([`crate::symphonia_read`]); a known foreign format is refused by name. [`route`]
//!    is the one place the choice is made. The target rate
//!    plays no part in the choice: a file at another rate is read the same way, then
//!    resampled.
//! 2. **Frame counts come from the data** and one check, [`settle`](crate::clip::settle), compares them with
//!    what the header promised: fewer frames than promised is "truncated", none at all is
//!    "no audio", on every route. [`DecodeInfo::frames`] (stored as `source_frames`) is the
//!    count the file really holds, so a short file is counted as padded.
//! 3. Downmix ([`crate::mix`]), resampling and pad/trim ([`crate::clip`]) are the same
//!    code for every route.

use std::io::{Read, Seek};
use std::path::Path;

use mel_core::spec::AudioConfig;
use mel_core::{Error, Result};
use symphonia::core::io::MediaSource;

use crate::clip::Dst;
pub use crate::clip::{DecodeInfo, MAX_CLIPS_LONG, fit_clip};
use crate::sniff::{Container, Refusal, sniff};
use crate::wav::{Coding, WavHeader};

/// The formats melctl decodes, as the refusal of an unrecognised file lists them.
pub const FORMATS: &str = "WAV (PCM, float, A-law, µ-law, MS/IMA ADPCM; RIFF and RF64), FLAC, MP3, Ogg Vorbis, Ogg FLAC, AIFF/AIFF-C, CAF, MP4/M4A (AAC, ALAC), ADTS AAC and Matroska/WebM";

/// An input file read as a `Cursor` over its bytes reads, so that a file and its bytes
/// give the same result on any seek: a seek past the end is allowed and reads nothing
/// (`lseek` would refuse offsets beyond `i64::MAX` with EINVAL), a seek before the start
/// is an error.
pub(crate) struct FileSource {
    file: std::fs::File,
    len: u64,
    pos: u64,
}

impl FileSource {
    fn new(file: std::fs::File, len: u64) -> Self {
        FileSource { file, len, pos: 0 }
    }
}

impl Read for FileSource {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        if self.pos >= self.len {
            return Ok(0);
        }
        let n = self.file.read(buf)?;
        self.pos += n as u64;
        Ok(n)
    }
}

impl Seek for FileSource {
    fn seek(&mut self, to: std::io::SeekFrom) -> std::io::Result<u64> {
        let (base, delta) = match to {
            std::io::SeekFrom::Start(n) => (n, 0),
            std::io::SeekFrom::End(d) => (self.len, d),
            std::io::SeekFrom::Current(d) => (self.pos, d),
        };
        let pos = base.checked_add_signed(delta).ok_or_else(|| {
            std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                "invalid seek to a negative or overflowing position",
            )
        })?;
        if pos < self.len {
            self.file.seek(std::io::SeekFrom::Start(pos))?;
        }
        self.pos = pos;
        Ok(pos)
    }
}

impl symphonia::core::io::MediaSource for FileSource {
    fn is_seekable(&self) -> bool {
        true
    }

    fn byte_len(&self) -> Option<u64> {
        Some(self.len)
    }
}

/// Opens `path` for decoding: the file and its length.
fn open_source(path: &Path) -> Result<(FileSource, u64)> {
    let io = |e: std::io::Error| Error::read(path, e);
    let file = crate::open::open_input(path, false).map_err(io)?;
    let len = file.metadata().map_err(io)?.len();
    Ok((FileSource::new(file, len), len))
}

/// Decodes the audio file at `path` into `dst` (exactly `audio.clip_samples()` long), in
/// any supported format, at any rate (resampled to `audio.sample_rate`), any channel count
/// (downmixed per `audio.downmix`). Short files are padded with zeros, long ones trimmed,
/// per `audio`.
pub fn decode_into(path: &Path, audio: &AudioConfig, dst: &mut [f32]) -> Result<DecodeInfo> {
    let (file, len) = open_source(path)?;
    decode_source(file, len, path, audio, Dst::Row(dst))
}

/// Decodes all of the file at `path` into `out` at `audio.sample_rate` (resampled and
/// downmixed as [`decode_into`] does, never padded or trimmed), for whole clips. A file
/// longer than `max_samples` at that rate is a limit error naming it and
/// `audio.max_seconds`; reading stops soon after that length.
pub fn decode_whole(
    path: &Path,
    audio: &AudioConfig,
    max_samples: usize,
    out: &mut Vec<f32>,
) -> Result<DecodeInfo> {
    let (file, len) = open_source(path)?;
    whole_from(file, len, path, audio, max_samples, out)
}

/// [`decode_whole`] of a file already read into memory (`bytes`, the whole file at `path`).
pub fn decode_bytes_whole(
    bytes: &[u8],
    path: &Path,
    audio: &AudioConfig,
    max_samples: usize,
    out: &mut Vec<f32>,
) -> Result<DecodeInfo> {
    let source = std::io::Cursor::new(bytes);
    whole_from(source, bytes.len() as u64, path, audio, max_samples, out)
}

fn whole_from<S: MediaSource>(
    source: S,
    len: u64,
    path: &Path,
    audio: &AudioConfig,
    max_samples: usize,
    out: &mut Vec<f32>,
) -> Result<DecodeInfo> {
    // Read from the start, keep what is read: the bound is checked on the file's length.
    let from_start = AudioConfig {
        trim: mel_core::spec::TrimPolicy::Start,
        pad: mel_core::spec::PadPolicy::End,
        ..audio.clone()
    };
    let dst = Dst::Whole(out, max_samples.saturating_add(1));
    let info = decode_source(source, len, path, &from_start, dst)?;
    let at_rate =
        (info.frames as u128 * audio.sample_rate as u128).div_ceil(info.rate.max(1) as u128);
    if at_rate > max_samples as u128 {
        return Err(Error::limit(
            path.display().to_string(),
            format!(
                "{at_rate} samples at {} Hz, longer than audio.max_seconds ({max_samples} samples); raise it, or use audio.length = \"fixed\"",
                audio.sample_rate
            ),
        ));
    }
    if out.len() as u128 != at_rate {
        return Err(Error::Internal(format!(
            "{}: decoded {} samples where the file's {} frames at {} Hz give {at_rate}",
            path.display(),
            out.len(),
            info.frames,
            info.rate
        )));
    }
    Ok(info)
}

/// Decodes a file already read into memory (`bytes`, the whole file at `path`) into
/// `dst`, exactly as [`decode_into`] would decode the file.
pub fn decode_bytes_into(
    bytes: &[u8],
    path: &Path,
    audio: &AudioConfig,
    dst: &mut [f32],
) -> Result<DecodeInfo> {
    decode_source(
        std::io::Cursor::new(bytes),
        bytes.len() as u64,
        path,
        audio,
        Dst::Row(dst),
    )
}

/// Decodes `source` (the `len` bytes of the file at `path`) along its [`route`].
fn decode_source<S: MediaSource>(
    mut source: S,
    len: u64,
    path: &Path,
    audio: &AudioConfig,
    dst: Dst<'_>,
) -> Result<DecodeInfo> {
    guarded(path, || match route(&mut source, len, path)? {
        Route::Wav(h) => crate::wav::read::decode(&mut source, &h, path, audio, dst),
        Route::Symphonia(c, offset) => {
            crate::symphonia_read::decode(Box::new(source), c, offset, path, audio, dst)
        }
    })
}

/// Checks that the file at `path` would decode under `audio`, without resampling or
/// keeping any audio: the same route and the same frame-count check as [`decode_into`]
/// (PCM WAV from its sizes, other codecs by decoding and counting every packet), the
/// channel pick and the rate limit. A PCM WAV that passes can still fail later on a NaN
/// in its samples; empty, truncated, foreign and unsupported files are found. This is what
/// `melctl build --dry-run` runs on every file.
pub fn probe(path: &Path, audio: &AudioConfig) -> Result<()> {
    probe_length(path, audio).map(|_| ())
}

/// [`probe`], returning the file's sample rate and frame count (PCM WAV from its header,
/// other codecs by decoding and counting every packet): how long a whole clip of it is.
pub fn probe_length(path: &Path, audio: &AudioConfig) -> Result<(u32, u64)> {
    let (mut file, len) = open_source(path)?;
    guarded(path, || match route(&mut file, len, path)? {
        Route::Wav(h) => crate::wav::read::probe(&h, path, audio),
        Route::Symphonia(c, offset) => {
            crate::symphonia_read::probe(Box::new(file), c, offset, path, audio)
        }
    })
}

/// Runs one file's decoding so that a panic anywhere on its route (melctl's own parsers or
/// symphonia's) becomes that file's decode error, naming the file, instead of unwinding
/// into a loader's reader thread (which would stop the reader and stall the build). The
/// panic's own message is a library's internals (an index, a line of its source), not a
/// reason: the error says what happened in melctl's words.
fn guarded<T>(path: &Path, f: impl FnOnce() -> Result<T>) -> Result<T> {
    let outer = DECODING.with(|d| d.replace(true));
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(f));
    DECODING.with(|d| d.set(outer));
    result.unwrap_or_else(|_| {
        Err(Error::decode(
            path,
            "the decoder failed on this file (an internal error on its data: a bug in melctl or its decoding library)",
        ))
    })
}

thread_local! {
    /// Whether this thread is inside [`guarded`]: a panic now is a file's decode error.
    static DECODING: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Keeps a panic inside a decoder off stderr: it becomes that file's decode error, named
/// in melctl's words, and its text (a decoding library's internals, and with
/// `RUST_BACKTRACE` set a whole backtrace) is not a message for the user. Every other
/// panic goes to the hook that was there before. For front ends (the CLI, the Python
/// module): it replaces the process's panic hook, once, however often it is called.
pub fn quiet_decoder_panics() {
    static INSTALLED: std::sync::Once = std::sync::Once::new();
    INSTALLED.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if !DECODING.with(std::cell::Cell::get) {
                previous(info);
            }
        }));
    });
}

/// Where a file goes: melctl's WAV reader with its parsed header, or a symphonia reader
/// for the container found at an offset.
enum Route {
    Wav(WavHeader),
    Symphonia(Container, u64),
}

/// The one routing decision, from the content alone.
fn route<R: Read + Seek>(r: &mut R, len: u64, path: &Path) -> Result<Route> {
    let io = |e: std::io::Error| Error::read(path, e);
    if len == 0 {
        return Err(Error::decode(path, "empty file (0 bytes)"));
    }
    match sniff(r, len).map_err(io)? {
        Err(Refusal::Unsupported(m)) => Err(Error::unsupported(path, m)),
        Err(Refusal::Truncated(m)) => Err(Error::decode(path, m)),
        Err(Refusal::Unrecognised(detail)) => {
            // The name shapes the words, never the route.
            let wav = path
                .extension()
                .and_then(|e| e.to_str())
                .is_some_and(|e| e.eq_ignore_ascii_case("wav") || e.eq_ignore_ascii_case("wave"));
            let what = if wav {
                "not a valid WAV file, nor another audio format melctl reads"
            } else {
                "not a recognised audio format"
            };
            Err(Error::decode(
                path,
                format!("{what} ({detail}); melctl reads {FORMATS}"),
            ))
        }
        Ok((Container::Wav, base)) => match crate::wav::parse(r, base, len).map_err(io)? {
            Ok(h) if h.coding == Coding::Adpcm => Ok(Route::Symphonia(Container::Wav, base)),
            Ok(h) => Ok(Route::Wav(h)),
            Err(e) if e.unsupported => Err(Error::unsupported(path, e.reason)),
            Err(e) => Err(Error::decode(path, e.reason)),
        },
        Ok((c, offset)) => Ok(Route::Symphonia(c, offset)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hound::{SampleFormat, WavSpec, WavWriter};
    use mel_core::spec::{Downmix, PadPolicy, TrimPolicy};

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

        // Another rate is resampled, not refused: 4 frames at 8 Hz are 8 at 16 Hz.
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
    fn an_id3v2_tag_before_a_wav_is_skipped_on_every_route() {
        let t = tempfile::tempdir().unwrap();
        let wav = wav_claiming(8, 6);
        let mut tagged = b"ID3\x03\0\0\0\0\0\x06abc\0\0\0".to_vec();
        tagged.extend_from_slice(&wav);
        let (p, q) = (t.path().join("plain.wav"), t.path().join("tagged.wav"));
        std::fs::write(&p, &wav).unwrap();
        std::fs::write(&q, &tagged).unwrap();
        for rate in [8, 16] {
            let a = audio(rate, 12);
            let (mut x, mut y, mut z) = (vec![0.0; 12], vec![0.0; 12], vec![0.0; 12]);
            let want = decode_into(&p, &a, &mut x).unwrap();
            assert_eq!(want.frames, 6);
            assert_eq!(decode_into(&q, &a, &mut y).unwrap(), want);
            assert_eq!(decode_bytes_into(&tagged, &q, &a, &mut z).unwrap(), want);
            assert_eq!((&x, &x), (&y, &z));
            probe(&q, &a).unwrap();
        }
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

    #[test]
    fn an_rf64_data_size_near_the_top_of_u64_is_truncated_data_not_a_panic() {
        // ds64 says the data is 2^64 - 1 bytes: the chunk walk once added its pad byte to
        // that and overflowed, a panic in a reader thread that stalled the streaming loader.
        let t = tempfile::tempdir().unwrap();
        let mut b = b"RF64\xff\xff\xff\xffWAVE".to_vec();
        b.extend_from_slice(b"ds64");
        b.extend_from_slice(&28u32.to_le_bytes());
        b.extend_from_slice(&0u64.to_le_bytes());
        b.extend_from_slice(&u64::MAX.to_le_bytes());
        b.extend_from_slice(&0u64.to_le_bytes());
        b.extend_from_slice(&0u32.to_le_bytes());
        b.extend_from_slice(b"fmt ");
        b.extend_from_slice(&16u32.to_le_bytes());
        for v in [1u16, 1] {
            b.extend_from_slice(&v.to_le_bytes());
        }
        b.extend_from_slice(&8u32.to_le_bytes());
        b.extend_from_slice(&16u32.to_le_bytes());
        b.extend_from_slice(&2u16.to_le_bytes());
        b.extend_from_slice(&16u16.to_le_bytes());
        b.extend_from_slice(b"data\xff\xff\xff\xff");
        b.extend((0..64i16).flat_map(|i| (i * 300).to_le_bytes()));
        let p = t.path().join("huge-ds64.wav");
        std::fs::write(&p, &b).unwrap();
        let a = audio(8, 16);
        let mut dst = vec![0.0; 16];
        for e in [
            decode_into(&p, &a, &mut dst).unwrap_err(),
            decode_bytes_into(&b, &p, &a, &mut dst).unwrap_err(),
            probe(&p, &a).unwrap_err(),
        ] {
            let m = e.to_string();
            assert!(
                m.contains("huge-ds64.wav") && m.contains("truncated"),
                "{m}"
            );
        }
    }

    #[test]
    fn a_panic_on_any_route_is_the_files_error() {
        let p = Path::new("x/panics.wav");
        let e = guarded::<()>(p, || panic!("index out of bounds")).unwrap_err();
        assert_eq!(e.failure_kind(), mel_core::FailureKind::Decode, "{e}");
        let m = e.to_string();
        assert!(
            m.contains("panics.wav")
                && m.contains("the decoder failed on this file")
                && !m.contains("index out of bounds"),
            "{m}"
        );
    }
}

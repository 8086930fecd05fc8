//! Every format symphonia reads (FLAC, Ogg Vorbis, MP3, AIFF, WAV variants hound does
//! not take: WAVE_FORMAT_EXTENSIBLE, float 64, A-law/µ-law, ADPCM), detected from the
//! content, downmixed, resampled with rubato when the rate differs, then padded or
//! trimmed into the row. Memory stays bounded: with `trim = "start"` decoding stops once
//! enough audio is in hand; otherwise a file longer than `MAX_CLIPS_LONG` clip lengths is
//! refused instead of being held whole.

use std::path::Path;

use mel_core::config::{AudioConfig, TrimPolicy};
use mel_core::{Error, Result};
use symphonia::core::codecs::audio::AudioDecoderOptions;
use symphonia::core::errors::Error as SymError;
use symphonia::core::formats::probe::Hint;
use symphonia::core::formats::{FormatOptions, TrackType};
use symphonia::core::io::{MediaSource, MediaSourceStream};
use symphonia::core::meta::MetadataOptions;

use crate::decode::{DecodeInfo, fit_clip};
use crate::mix::{check_channel, mix_interleaved};
use crate::resample::{MAX_FILE_SAMPLES, MAX_RATE};

/// A file may hold at most this many clip lengths of audio when all of it is needed.
pub const MAX_CLIPS_LONG: usize = 64;

/// Source frames read beyond the kept part when trimming from the start, so that the
/// resampler's filter sees real audio around the cut.
const RESAMPLE_MARGIN: usize = 16_384;

/// symphonia's error as the kind it is.
fn sym_error(path: &Path, e: SymError) -> Error {
    match e {
        SymError::IoError(io) if io.kind() == std::io::ErrorKind::UnexpectedEof => {
            Error::decode(path, "truncated: the file ends inside its header or data")
        }
        SymError::IoError(io) => Error::read(path, io),
        SymError::DecodeError(m) => Error::decode(path, format!("corrupt audio data: {m}")),
        SymError::Unsupported(m) => {
            Error::unsupported(path, format!("unsupported format or codec: {m}"))
        }
        SymError::LimitError(m) => Error::limit(
            path.display().to_string(),
            format!("beyond a decoder limit: {m}"),
        ),
        other => Error::decode(path, other.to_string()),
    }
}

/// Decodes `source` (the file at `path`) into `dst`. `hound_said` is hound's reason for
/// not reading it, kept for the message if symphonia cannot either. A panic inside a
/// third-party decoder on a hostile file becomes this file's error, not the run's end.
pub fn decode(
    source: Box<dyn MediaSource>,
    path: &Path,
    hound_said: Option<String>,
    audio: &AudioConfig,
    dst: &mut [f32],
) -> Result<DecodeInfo> {
    let run = std::panic::AssertUnwindSafe(|| decode_inner(source, path, hound_said, audio, dst));
    std::panic::catch_unwind(run).unwrap_or_else(|panic| {
        let what = panic
            .downcast_ref::<String>()
            .map(String::as_str)
            .or_else(|| panic.downcast_ref::<&str>().copied())
            .unwrap_or("unknown");
        Err(Error::decode(
            path,
            format!("the decoder failed on this file ({what})"),
        ))
    })
}

/// Opens `source` as symphonia would for [`decode`] and checks its first audio track
/// (codec, channels, rate) without decoding any audio.
pub fn probe(
    source: Box<dyn MediaSource>,
    path: &Path,
    hound_said: Option<String>,
    audio: &AudioConfig,
) -> Result<()> {
    let run = std::panic::AssertUnwindSafe(|| -> Result<()> {
        let bad = |reason: &str| Error::decode(path, reason);
        let format = open_format(source, path, hound_said)?;
        let track = format
            .default_track(TrackType::Audio)
            .ok_or_else(|| bad("no audio track"))?;
        let params = track
            .codec_params
            .as_ref()
            .and_then(|p| p.audio())
            .ok_or_else(|| bad("no audio codec parameters"))?;
        if let Some(channels) = &params.channels {
            check_channel(audio.downmix, channels.count(), path)?;
        }
        if let Some(r) = params.sample_rate.filter(|&r| r > MAX_RATE) {
            return Err(Error::limit(
                path.display().to_string(),
                format!("the sample rate {r} Hz is above the limit of {MAX_RATE} Hz"),
            ));
        }
        symphonia::default::get_codecs()
            .make_audio_decoder(params, &AudioDecoderOptions::default())
            .map_err(|e| sym_error(path, e))?;
        Ok(())
    });
    std::panic::catch_unwind(run)
        .unwrap_or_else(|_| Err(Error::decode(path, "the decoder failed on this file")))
}

/// symphonia's format reader for `source`, detected from the content (the extension a
/// hint); `hound_said` is why hound refused it, for the message if symphonia does too.
fn open_format(
    source: Box<dyn MediaSource>,
    path: &Path,
    hound_said: Option<String>,
) -> Result<Box<dyn symphonia::core::formats::FormatReader>> {
    let bad = |reason: String| Error::decode(path, reason);
    let mss = MediaSourceStream::new(source, Default::default());
    let mut hint = Hint::new();
    if let Some(ext) = path.extension().and_then(|e| e.to_str()) {
        hint.with_extension(ext);
    }
    symphonia::default::get_probe()
        .probe(
            &hint,
            mss,
            FormatOptions::default(),
            MetadataOptions::default(),
        )
        .map_err(|e| match (&e, &hound_said) {
            (SymError::Unsupported(_), Some(h)) => bad(format!(
                "{h}, and not another supported audio format either"
            )),
            _ => sym_error(path, e),
        })
}

fn decode_inner(
    source: Box<dyn MediaSource>,
    path: &Path,
    hound_said: Option<String>,
    audio: &AudioConfig,
    dst: &mut [f32],
) -> Result<DecodeInfo> {
    let bad = |reason: String| Error::decode(path, reason);
    let mut format = open_format(source, path, hound_said)?;
    let track = format
        .default_track(TrackType::Audio)
        .ok_or_else(|| bad("no audio track".into()))?;
    let track_id = track.id;
    let header_frames = track.num_frames;
    let params = track
        .codec_params
        .as_ref()
        .and_then(|p| p.audio())
        .ok_or_else(|| bad("no audio codec parameters".into()))?
        .clone();
    let bits = params.bits_per_sample.unwrap_or(0) as u16;
    let mut decoder = symphonia::default::get_codecs()
        .make_audio_decoder(&params, &AudioDecoderOptions::default())
        .map_err(|e| sym_error(path, e))?;

    let clip = dst.len();
    let mut rate: Option<u32> = None;
    let mut channels = 0usize;
    let mut mono: Vec<f32> = Vec::new();
    let mut interleaved: Vec<f32> = Vec::new();
    let mut limit = usize::MAX;
    loop {
        let packet = match format.next_packet() {
            Ok(Some(p)) => p,
            Ok(None) => break,
            Err(SymError::IoError(e)) if e.kind() == std::io::ErrorKind::UnexpectedEof => break,
            Err(e) => return Err(sym_error(path, e)),
        };
        if packet.track_id != track_id {
            continue;
        }
        let buf = decoder.decode(&packet).map_err(|e| sym_error(path, e))?;
        let spec = buf.spec();
        let (r, ch) = (spec.rate(), spec.channels().count());
        if ch == 0 {
            return Err(bad("zero channels".into()));
        }
        if r == 0 {
            return Err(bad("zero sample rate".into()));
        }
        if rate.is_none() {
            check_channel(audio.downmix, ch, path)?;
            if r > MAX_RATE {
                return Err(Error::limit(
                    path.display().to_string(),
                    format!("the sample rate {r} Hz is above the limit of {MAX_RATE} Hz"),
                ));
            }
            // Source frames needed for the clip; beyond the limit decoding stops
            // (trim from the start) or the file is refused (anything else). Never more
            // than MAX_FILE_SAMPLES, whatever the header says.
            let needed =
                (clip as u128 * r as u128).div_ceil(audio.sample_rate.max(1) as u128) as usize;
            limit = match audio.trim {
                TrimPolicy::Start => needed.saturating_add(RESAMPLE_MARGIN.max(
                    crate::resample::reach(r, audio.sample_rate, audio.resample_quality),
                )),
                TrimPolicy::Center => needed.saturating_mul(MAX_CLIPS_LONG).max(1 << 20),
            }
            .min(MAX_FILE_SAMPLES);
        }
        if rate.is_some_and(|x| x != r) || (channels != 0 && channels != ch) {
            return Err(bad(
                "the sample rate or channel count changes inside the file".into(),
            ));
        }
        rate = Some(r);
        channels = ch;
        interleaved.resize(buf.samples_interleaved(), 0.0);
        buf.copy_to_slice_interleaved(&mut interleaved);
        mix_interleaved(&interleaved, ch, audio.downmix, &mut mono);
        if mono.len() >= limit {
            if audio.trim == TrimPolicy::Start {
                mono.truncate(limit);
                break;
            }
            return Err(Error::limit(
                path.display().to_string(),
                format!(
                    "longer than {MAX_CLIPS_LONG} clip lengths or {MAX_FILE_SAMPLES} samples ({:.1} s at {r} Hz so far); with audio.trim = \"start\" only the beginning is read",
                    mono.len() as f64 / r as f64
                ),
            ));
        }
    }
    let rate = rate.ok_or_else(|| bad("no audio samples".into()))?;
    if let Some(i) = mono.iter().position(|x| !x.is_finite()) {
        return Err(bad(format!(
            "non-finite sample (NaN or infinity) at frame {i}"
        )));
    }
    let source_frames = mono.len();
    fit_clip(&mono, rate, audio, dst)
        .map_err(|e| Error::limit(path.display().to_string(), e.to_string()))?;
    Ok(DecodeInfo {
        rate,
        frames: header_frames.map_or(source_frames, |n| n as usize),
        channels: channels as u16,
        bits,
    })
}

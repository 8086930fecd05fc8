//! Reading PCM, float and G.711 WAV data (the header is parsed by [`super::header`]):
//! the frame count from the data chunk's size, then only the frames the clip needs, in
//! bounded chunks, downmixed, through the [clip contract](crate::clip).

use std::io::{Read, Seek};
use std::path::Path;

use mel_core::spec::{AudioConfig, TrimPolicy};
use mel_core::{Error, Result};

use super::header::{Coding, WavHeader, convert};
use crate::clip::{
    DecodeInfo, Dst, check_float, check_stream, keep_limit, placement, settle, too_long,
};

/// PCM, float or G.711 WAV: the frame count from the data chunk's size checked against
/// the file's length ([`settle`]), then only the frames needed are read. At the target
/// rate those are the kept frames; at another rate the beginning (trim from the start) or
/// the whole file (from the centre, bounded), resampled by [`fit_clip`].
pub(crate) fn decode<R: Read + Seek>(
    r: &mut R,
    h: &WavHeader,
    path: &Path,
    audio: &AudioConfig,
    dst: Dst<'_>,
) -> Result<DecodeInfo> {
    check_stream(path, audio, h.channels as usize, h.rate)?;
    let frames = settle(path, h.promised, h.held)?;
    let info = DecodeInfo {
        rate: h.rate,
        frames,
        channels: h.channels,
        bits: h.bits,
    };
    if let Coding::Float { bytes } = h.coding {
        // Every sample of every channel, whatever part the clip keeps: the verdict must
        // not depend on the trim, the clip length or the rate. Checked as stored (a float64
        // beyond the float32 range is named as such, not as an infinity).
        let ch = h.channels as usize;
        let b = bytes as usize;
        r.seek(std::io::SeekFrom::Start(h.data_start))
            .map_err(|e| Error::read(path, e))?;
        let (mut first, mut raw, mut all) = (0, Vec::new(), Vec::new());
        while first < frames {
            // At most 2^16 samples at a time, whatever the channel count.
            let n = ((1usize << 16) / ch).max(1).min(frames - first);
            raw.resize(n * ch * b, 0);
            read_exact(r, &mut raw, path, first, h.held)?;
            all.clear();
            if b == 8 {
                let (whole, _) = raw.as_chunks::<8>();
                all.extend(whole.iter().map(|s| f64::from_le_bytes(*s)));
            } else {
                let (whole, _) = raw.as_chunks::<4>();
                all.extend(whole.iter().map(|s| f32::from_le_bytes(*s) as f64));
            }
            check_float(path, &all, first, ch)?;
            first += n;
        }
    }
    if h.rate == audio.sample_rate {
        let (kept, skip, pad_before) = placement(frames, dst.clip(), audio);
        let mut mono = Vec::with_capacity(kept);
        read_wav_frames(r, h, skip, kept, audio, &mut mono, path)?;
        dst.place(&mono, pad_before);
        return Ok(info);
    }
    let limit = keep_limit(dst.clip(), h.rate, audio);
    let take = match audio.trim {
        TrimPolicy::Start => frames.min(limit),
        TrimPolicy::Center if frames > limit => return Err(too_long(path, limit, h.rate)),
        TrimPolicy::Center => frames,
    };
    let mut mono = Vec::with_capacity(take);
    read_wav_frames(r, h, 0, take, audio, &mut mono, path)?;
    dst.put(&mono, h.rate, audio)
        .map_err(|e| Error::limit(path.display().to_string(), e.to_string()))?;
    Ok(info)
}

/// Reads `count` frames from frame `first` of the WAV data into `mono`, in bounded
/// chunks (whatever the channel count), downmixed.
fn read_wav_frames<R: Read + Seek>(
    r: &mut R,
    h: &WavHeader,
    first: usize,
    count: usize,
    audio: &AudioConfig,
    mono: &mut Vec<f32>,
    path: &Path,
) -> Result<()> {
    let frame = h.frame_bytes() as usize;
    let per_chunk = ((1usize << 16) / frame).max(1);
    r.seek(std::io::SeekFrom::Start(
        h.data_start + first as u64 * frame as u64,
    ))
    .map_err(|e| Error::read(path, e))?;
    let mut buf = vec![0u8; per_chunk.min(count.max(1)) * frame];
    let mut left = count;
    while left > 0 {
        let n = per_chunk.min(left);
        let bytes = &mut buf[..n * frame];
        read_exact(r, bytes, path, first + count - left, h.held)?;
        convert(bytes, h.coding, h.channels as usize, mono, audio.downmix);
        left -= n;
    }
    Ok(())
}

/// Fills `bytes` from `r`, the data from frame `at` (of `held`): a file that ends first was
/// cut while being read.
fn read_exact<R: Read>(
    r: &mut R,
    bytes: &mut [u8],
    path: &Path,
    at: usize,
    held: u64,
) -> Result<()> {
    r.read_exact(bytes).map_err(|e| match e.kind() {
        std::io::ErrorKind::UnexpectedEof => Error::decode(
            path,
            format!("truncated: the file ended while being read, after frame {at} of {held}"),
        ),
        _ => Error::read(path, e),
    })
}

/// Checks a WAV as [`decode`] would, from its header alone: the layout, the frame count
/// against the file's length, and (when all of a resampled file is needed) its length.
/// Returns the file's rate and frame count.
pub(crate) fn probe(h: &WavHeader, path: &Path, audio: &AudioConfig) -> Result<(u32, u64)> {
    check_stream(path, audio, h.channels as usize, h.rate)?;
    let frames = settle(path, h.promised, h.held)?;
    let limit = keep_limit(audio.clip_samples(), h.rate, audio);
    if h.rate != audio.sample_rate && audio.trim == TrimPolicy::Center && frames > limit {
        return Err(too_long(path, limit, h.rate));
    }
    Ok((h.rate, frames as u64))
}

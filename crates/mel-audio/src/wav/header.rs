//! melctl's WAVE header parser: RIFF, RF64 and BW64, with the rules for inconsistent
//! headers written down once. The rules, and what libsndfile 1.2 and ffmpeg 5 do:
//!
//! - Chunks are read in order; a chunk of odd length is followed by a pad byte (RIFF).
//!   The RIFF size field is not trusted (writers get it wrong; both readers ignore it).
//! - `fmt ` must come before `data` and hold at least 16 bytes; anything after the 16
//!   (cbSize and its extension: 18-, 20- and 40-byte chunks) is allowed, and read only for
//!   WAVE_FORMAT_EXTENSIBLE, whose sub-format GUID names the real format tag.
//! - PCM (8-bit unsigned, 16/24/32-bit signed, any bit depth stored in that many whole
//!   bytes), IEEE float 32/64, A-law and µ-law are decoded here; a frame is `channels ×
//!   ceil(bits / 8)` bytes. A `block_align` that says otherwise is refused: the readers
//!   disagree on such files (libsndfile and ffmpeg ignore it for 16-bit mono with
//!   `block_align = 4`, hound then reads 4-byte frames; for 24-bit stereo with
//!   `block_align = 8` hound reads 4-byte containers and libsndfile misaligned 3-byte
//!   samples), so no rule would be right for all of them, and half-reading is worse.
//! - MS and IMA ADPCM go to symphonia; every other format tag is refused by name.
//! - The data size is a promise. More than the file holds is "truncated" (libsndfile and
//!   ffmpeg read what is there; melctl refuses a cut file). `0xFFFFFFFF` (a streaming
//!   writer's "unknown") means "to the end of the file", as in both readers; RF64/BW64 take
//!   the size from `ds64`. A size of 0 is an empty file, refused; when bytes follow it, the
//!   message says so (a writer killed before it wrote the size; ffmpeg would read on,
//!   libsndfile reads nothing: melctl refuses rather than guess). A size that is not a
//!   whole number of frames ends at the last whole frame (both readers do the same).
//! - A second `data` chunk after the first is refused (libsndfile refuses the file, ffmpeg
//!   reads the first chunk only): which one holds the audio is a guess.
//! - So is a second `fmt ` chunk before the data that differs from the first (sox and ffmpeg
//!   read the first, libsndfile refuses the file): the audio was once read at the second
//!   one's rate, pitch-shifted. A repeat of the same bytes is harmless and read.
//! - ADPCM: the data's last block may be partial (a writer stopped mid-block); its whole
//!   frames are decoded, as ffmpeg and sox do ([`WavHeader::adpcm_tail`]). The `fact`
//!   chunk's frame count is not a promise (sox writes the source's length there while padding
//!   the last block; a stereo IMA file cut after 249 bytes of its last block said 27,512
//!   where its blocks hold 27,511), so it is not read, as in ffmpeg, sox and libsndfile.

use std::io::{Read, Seek};

use crate::sniff::read_at;

/// How a WAV file's samples are coded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Coding {
    /// Integer PCM, `bytes` per sample (1: unsigned 8-bit; 2–4: signed little-endian).
    Int {
        /// Bytes per sample.
        bytes: u8,
    },
    /// IEEE float, 4 or 8 bytes.
    Float {
        /// Bytes per sample.
        bytes: u8,
    },
    /// G.711 A-law, one byte a sample.
    ALaw,
    /// G.711 µ-law, one byte a sample.
    MuLaw,
    /// MS or IMA ADPCM: symphonia decodes it.
    Adpcm,
}

impl Coding {
    /// Bytes per sample (0 for ADPCM, whose blocks symphonia reads).
    pub(crate) fn sample_bytes(self) -> usize {
        match self {
            Coding::Int { bytes } | Coding::Float { bytes } => bytes as usize,
            Coding::ALaw | Coding::MuLaw => 1,
            Coding::Adpcm => 0,
        }
    }
}

/// A parsed WAVE header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct WavHeader {
    /// The sample coding.
    pub coding: Coding,
    /// Channels (at least 1).
    pub channels: u16,
    /// Sample rate, Hz (at least 1).
    pub rate: u32,
    /// Bits per sample as the header says.
    pub bits: u16,
    /// Where the sample data starts.
    pub data_start: u64,
    /// Whole frames the header promises (`None`: "to the end of the file").
    pub promised: Option<u64>,
    /// Whole frames the file holds from `data_start`, up to the promise (fewer than
    /// promised: truncated, which `clip::settle` reports).
    pub held: u64,
    /// The format tag (the sub-format's for WAVE_FORMAT_EXTENSIBLE).
    pub format_tag: u16,
    /// Bytes per block (ADPCM) or per frame.
    pub block_align: u16,
    /// Bytes of sample data: the data chunk's size, or to the end of the file.
    pub data_bytes: u64,
}

impl WavHeader {
    /// Bytes per frame (PCM, float and G.711 only).
    pub(crate) fn frame_bytes(&self) -> u64 {
        self.channels as u64 * self.coding.sample_bytes() as u64
    }

    /// ADPCM: the partial block at the end of the data, if there is one: (its offset in the
    /// file, its bytes, the whole frames they hold). symphonia's reader drops such a block;
    /// its whole frames count as ffmpeg counts them (`adpcm.c`, `get_nb_samples`): after a
    /// block header of 4 (IMA) or 7 (MS) bytes per channel giving 1 or 2 frames, IMA holds 8
    /// frames per 4 bytes of each channel, MS one frame per byte of its channels' nibbles.
    pub(crate) fn adpcm_tail(&self) -> Option<(u64, usize, usize)> {
        let (ba, ch) = (self.block_align as u64, self.channels as u64);
        if self.coding != Coding::Adpcm || ba == 0 {
            return None;
        }
        let tail = self.data_bytes % ba;
        let start = self.data_start + self.data_bytes - tail;
        let frames = match self.format_tag {
            0x11 if tail >= 4 * ch => 1 + (tail - 4 * ch) / (4 * ch) * 8,
            2 if tail >= 7 * ch => 2 + (tail - 7 * ch) * 2 / ch,
            _ => 0,
        };
        (frames > 0).then_some((start, tail as usize, frames as usize))
    }
}

/// Why a WAV header is refused: `unsupported` for a format melctl does not decode,
/// otherwise a malformed or truncated file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Refused {
    /// Whether the format is valid but not decoded (vs. a broken file).
    pub unsupported: bool,
    /// The one-line reason.
    pub reason: String,
}

fn bad(reason: impl Into<String>) -> Refused {
    Refused {
        unsupported: false,
        reason: reason.into(),
    }
}

fn unsupported(reason: impl Into<String>) -> Refused {
    Refused {
        unsupported: true,
        reason: reason.into(),
    }
}

/// At most this many chunks are walked before `data` must have been found.
const MAX_CHUNKS: usize = 4096;

/// Parses the WAVE header of `r` (`len` bytes long; sniffed as RIFF/RF64/BW64 WAVE at
/// `base`, after any ID3v2 tags).
pub(crate) fn parse<R: Read + Seek>(
    r: &mut R,
    base: u64,
    len: u64,
) -> std::io::Result<Result<WavHeader, Refused>> {
    let riff = read_at(r, base, 12)?;
    let rf64 = &riff[..4] != b"RIFF";
    let mut pos = base + 12;
    let mut fmt: Option<Vec<u8>> = None;
    let mut ds64_data: Option<u64> = None;
    for _ in 0..MAX_CHUNKS {
        let ck = read_at(r, pos, 8)?;
        if ck.len() < 8 {
            let what = if fmt.is_none() { "fmt" } else { "data" };
            return Ok(Err(bad(format!(
                "truncated: the file ends before its {what} chunk"
            ))));
        }
        let id = [ck[0], ck[1], ck[2], ck[3]];
        let size = u32::from_le_bytes([ck[4], ck[5], ck[6], ck[7]]) as u64;
        let body = pos + 8;
        match &id {
            b"fmt " => {
                if size < 16 {
                    return Ok(Err(bad(format!(
                        "malformed: the fmt chunk is {size} bytes, under the 16 every WAV needs"
                    ))));
                }
                let b = read_at(r, body, size.min(64) as usize)?;
                if (b.len() as u64) < size.min(64) {
                    return Ok(Err(bad("truncated: the file ends inside its fmt chunk")));
                }
                match &fmt {
                    // The same format said twice is one format.
                    Some(first) if first == &b => {}
                    Some(_) => {
                        return Ok(Err(bad(format!(
                            "malformed: a second fmt chunk at byte {pos}, unlike the first (sox and ffmpeg read the first, libsndfile refuses the file)"
                        ))));
                    }
                    None => fmt = Some(b),
                }
            }
            b"ds64" if rf64 => {
                let b = read_at(r, body, 16)?;
                if b.len() < 16 {
                    return Ok(Err(bad("truncated: the file ends inside its ds64 chunk")));
                }
                ds64_data = Some(u64::from_le_bytes(b[8..16].try_into().unwrap()));
            }
            b"data" => {
                let Some(f) = fmt else {
                    return Ok(Err(bad(
                        "malformed: the data chunk comes before any fmt chunk",
                    )));
                };
                let size = match (size, rf64, ds64_data) {
                    (0xffff_ffff, true, Some(d)) => Some(d),
                    (0xffff_ffff, true, None) => {
                        return Ok(Err(bad("malformed: an RF64 file without a ds64 chunk")));
                    }
                    (0xffff_ffff, false, _) => None,
                    (s, _, _) => Some(s),
                };
                let after = size.map(|s| body.saturating_add(s).saturating_add(s & 1));
                if let Some(at) = after.map(|p| second_data(r, p, len)).transpose()?.flatten() {
                    return Ok(Err(bad(format!(
                        "malformed: a second data chunk at byte {at} (libsndfile refuses such a file, ffmpeg reads the first chunk only)"
                    ))));
                }
                return Ok(header(&f, body, size, len));
            }
            _ => {}
        }
        pos = body.saturating_add(size + (size & 1));
    }
    Ok(Err(bad(format!(
        "malformed: no data chunk in the first {MAX_CHUNKS} chunks"
    ))))
}

/// Where a `data` chunk starts among the chunks from `pos` to `len` (after the first data
/// chunk), if one does: which of them holds the audio is anyone's guess.
fn second_data<R: Read + Seek>(r: &mut R, mut pos: u64, len: u64) -> std::io::Result<Option<u64>> {
    for _ in 0..MAX_CHUNKS {
        let ck = read_at(r, pos, 8)?;
        if ck.len() < 8 {
            break;
        }
        if &ck[..4] == b"data" {
            return Ok(Some(pos));
        }
        let size = u32::from_le_bytes([ck[4], ck[5], ck[6], ck[7]]) as u64;
        pos = pos.saturating_add(8 + size + (size & 1));
        if pos >= len {
            break;
        }
    }
    Ok(None)
}

/// The header from the `fmt ` chunk's bytes `f`, the data's start and its declared size.
fn header(f: &[u8], data_start: u64, size: Option<u64>, len: u64) -> Result<WavHeader, Refused> {
    let u16_at = |i: usize| u16::from_le_bytes([f[i], f[i + 1]]);
    let mut tag = u16_at(0);
    let channels = u16_at(2);
    let rate = u32::from_le_bytes([f[4], f[5], f[6], f[7]]);
    let block_align = u16_at(12);
    let bits = u16_at(14);
    if tag == 0xfffe {
        // WAVE_FORMAT_EXTENSIBLE: cbSize 22, then valid bits, channel mask, GUID (whose
        // first two bytes are the format tag).
        if f.len() < 40 {
            return Err(bad(format!(
                "malformed: a WAVE_FORMAT_EXTENSIBLE fmt chunk of {} bytes, under 40",
                f.len()
            )));
        }
        tag = u16_at(24);
    }
    if channels == 0 {
        return Err(bad("malformed: the header says 0 channels"));
    }
    if rate == 0 {
        return Err(bad("malformed: the header says a sample rate of 0 Hz"));
    }
    let whole = bits.div_ceil(8) as u8;
    let coding = match (tag, bits) {
        (1, 1..=32) => Coding::Int { bytes: whole },
        (3, 32) => Coding::Float { bytes: 4 },
        (3, 64) => Coding::Float { bytes: 8 },
        (3, b) => return Err(bad(format!("malformed: {b}-bit IEEE float"))),
        (6, 8) => Coding::ALaw,
        (7, 8) => Coding::MuLaw,
        (6 | 7, b) => return Err(bad(format!("malformed: {b}-bit G.711 (it is 8-bit)"))),
        (1, b) => {
            return Err(unsupported(format!(
                "unsupported sample format: {b}-bit PCM"
            )));
        }
        (2 | 0x11, _) => Coding::Adpcm,
        (t, _) => return Err(unsupported(format!("unsupported codec: {}", tag_name(t)))),
    };
    let frame = channels as u64 * coding.sample_bytes() as u64;
    if coding != Coding::Adpcm && block_align as u64 != frame {
        return Err(bad(format!(
            "inconsistent header: block_align is {block_align}, but {channels} channel(s) of {bits}-bit samples make {frame}-byte frames"
        )));
    }
    let available = len.saturating_sub(data_start);
    if coding == Coding::Adpcm {
        // symphonia decodes 4-bit mono and stereo ADPCM (and would refuse anything else with
        // its own words).
        let name = if tag == 2 { "MS ADPCM" } else { "IMA ADPCM" };
        if channels > 2 {
            return Err(unsupported(format!(
                "unsupported: {name} with {channels} channels (melctl decodes mono and stereo ADPCM)"
            )));
        }
        if bits != 4 {
            return Err(unsupported(format!(
                "unsupported sample format: {bits}-bit {name} (melctl decodes 4-bit ADPCM)"
            )));
        }
        let head = if tag == 2 { 7 } else { 4 } * channels as u64;
        if (block_align as u64) < head {
            return Err(bad(format!(
                "malformed: a {name} block_align of {block_align} bytes, under its {head}-byte block header"
            )));
        }
        // symphonia reads the blocks; the promise is checked on what it decodes.
        if size.is_some_and(|s| s > available) {
            return Err(bad(format!(
                "truncated: the data chunk promises {} bytes, the file holds {available}",
                size.unwrap_or(0)
            )));
        }
        return Ok(WavHeader {
            coding,
            channels,
            rate,
            bits,
            data_start,
            promised: None,
            held: 0,
            format_tag: tag,
            block_align,
            data_bytes: size.unwrap_or(available),
        });
    }
    let promised = size.map(|s| s / frame);
    let held_all = available / frame;
    if size == Some(0) {
        let follow = if available >= frame {
            format!(
                " though {available} bytes follow it (a writer stopped before it wrote the size?)"
            )
        } else {
            String::new()
        };
        return Err(bad(format!("no audio: the data chunk's size is 0{follow}")));
    }
    // A promise beyond the file is judged by `clip::settle`, as on every route.
    Ok(WavHeader {
        coding,
        channels,
        rate,
        bits,
        data_start,
        promised,
        held: promised.map_or(held_all, |p| p.min(held_all)),
        format_tag: tag,
        block_align,
        data_bytes: size.map_or(available, |s| s.min(available)),
    })
}

/// The name of a WAVE format tag melctl does not decode.
fn tag_name(tag: u16) -> String {
    let name = match tag {
        0x0000 => "format tag 0 (unknown)",
        0x0022 => "DSP Group TrueSpeech",
        0x0031 | 0x0032 => "GSM 6.10",
        0x0040 | 0x0064 => "G.721 ADPCM",
        0x0042 => "G.723.1",
        0x0045 | 0x0140 => "G.726 ADPCM",
        0x0050 => "MPEG audio layer I/II",
        0x0055 => "MPEG audio layer III (MP3 in WAV)",
        0x0092 | 0x2000 => "AC-3",
        0x00ff | 0x1600 | 0x1610 | 0x4143 => "AAC",
        0x0160..=0x0163 => "Windows Media Audio",
        0x2001 => "DTS",
        0x3313 | 0x674f..=0x6771 => "Vorbis in WAV",
        0xf1ac => "FLAC in WAV",
        0x5756 => "WavPack",
        0x0010 => "OKI ADPCM",
        0x0012 => "Videologic ADPCM",
        0x0017 | 0x0018 => "Dialogic OKI ADPCM",
        0x0020 => "Yamaha ADPCM",
        _ => return format!("WAVE format tag 0x{tag:04x}"),
    };
    format!("{name} (WAVE format tag 0x{tag:04x})")
}

/// Decodes whole frames of `data` (`coding`, `channels` interleaved) into mono samples,
/// one per frame, appended to `out` through `mix` (the downmix of one frame).
pub(crate) fn convert(
    data: &[u8],
    coding: Coding,
    channels: usize,
    out: &mut Vec<f32>,
    downmix: mel_core::spec::Downmix,
) {
    let sb = coding.sample_bytes();
    let frame = sb * channels;
    if frame == 0 {
        return;
    }
    let sample = |b: &[u8]| -> f32 {
        match coding {
            Coding::Int { bytes: 1 } => u8_sample([b[0]]),
            Coding::Int { bytes: 2 } => i16_sample([b[0], b[1]]),
            Coding::Int { bytes: 3 } => i24_sample([b[0], b[1], b[2]]),
            Coding::Int { .. } => i32_sample([b[0], b[1], b[2], b[3]]),
            Coding::Float { bytes: 4 } => f32::from_le_bytes([b[0], b[1], b[2], b[3]]),
            Coding::Float { .. } => f64_sample(b[..8].try_into().unwrap()),
            Coding::ALaw => alaw(b[0]),
            Coding::MuLaw => mulaw(b[0]),
            Coding::Adpcm => 0.0,
        }
    };
    if channels == 1 {
        // One loop per coding with the sample width known at compile time, so the
        // common 16-bit case vectorises (a per-sample `match` on the coding cost ~10%
        // of a CPU build's time: BENCHMARKS.md, 2026-11-27).
        match coding {
            Coding::Int { bytes: 1 } => mono_samples(data, out, u8_sample),
            Coding::Int { bytes: 2 } => mono_samples(data, out, i16_sample),
            Coding::Int { bytes: 3 } => mono_samples(data, out, i24_sample),
            Coding::Int { .. } => mono_samples(data, out, i32_sample),
            Coding::Float { bytes: 4 } => mono_samples(data, out, f32::from_le_bytes),
            Coding::Float { .. } => mono_samples(data, out, f64_sample),
            _ => out.extend(data.chunks_exact(sb).map(sample)),
        }
        return;
    }
    out.extend(data.chunks_exact(frame).map(|f| {
        let mut acc = 0.0f32;
        for (c, s) in f.chunks_exact(sb).enumerate() {
            if crate::mix::takes(downmix, c) {
                acc += sample(s);
            }
        }
        crate::mix::mono(acc, downmix, channels)
    }));
}

/// Unsigned 8-bit PCM to ±1.
#[inline(always)]
fn u8_sample(b: [u8; 1]) -> f32 {
    (b[0] as f32 - 128.0) * (1.0 / 128.0)
}

/// Signed 16-bit little-endian PCM to ±1.
#[inline(always)]
fn i16_sample(b: [u8; 2]) -> f32 {
    i16::from_le_bytes(b) as f32 * (1.0 / 32768.0)
}

/// Signed 24-bit little-endian PCM to ±1.
#[inline(always)]
fn i24_sample(b: [u8; 3]) -> f32 {
    (i32::from_le_bytes([0, b[0], b[1], b[2]]) >> 8) as f32 * (1.0 / 8_388_608.0)
}

/// Signed 32-bit little-endian PCM to ±1.
#[inline(always)]
fn i32_sample(b: [u8; 4]) -> f32 {
    i32::from_le_bytes(b) as f32 * (1.0 / 2_147_483_648.0)
}

/// Little-endian f64 rounded to f32.
#[inline(always)]
fn f64_sample(b: [u8; 8]) -> f32 {
    f64::from_le_bytes(b) as f32
}

/// Appends one sample per `B` bytes of `data` (whole samples only), converted by `f`.
#[inline(always)]
fn mono_samples<const B: usize>(data: &[u8], out: &mut Vec<f32>, f: impl Fn([u8; B]) -> f32) {
    let (whole, _) = data.as_chunks::<B>();
    let start = out.len();
    out.resize(start + whole.len(), 0.0);
    for (o, b) in out[start..].iter_mut().zip(whole) {
        *o = f(*b);
    }
}

/// G.711 A-law to linear, scaled to ±1 (as libsndfile: the 13-bit value over 2^15).
fn alaw(a: u8) -> f32 {
    let a = a ^ 0x55;
    let seg = (a >> 4) & 7;
    let mant = (a & 0x0f) as i32;
    let mag = if seg == 0 {
        (mant << 4) + 8
    } else {
        ((mant << 4) + 0x108) << (seg - 1)
    };
    let v = if a & 0x80 != 0 { mag } else { -mag };
    v as f32 * (1.0 / 32768.0)
}

/// G.711 µ-law to linear, scaled to ±1 (the 14-bit value over 2^15, as libsndfile).
fn mulaw(u: u8) -> f32 {
    let u = !u;
    let seg = (u >> 4) & 7;
    let mant = (u & 0x0f) as i32;
    let mag = (((mant << 3) + 0x84) << seg) - 0x84;
    let v = if u & 0x80 != 0 { -mag } else { mag };
    v as f32 * (1.0 / 32768.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn g711_tables_match_the_reference_values() {
        // ITU-T G.711 reference points (16-bit linear): A-law 0xd5 = +8, 0x55 = -8,
        // 0xaa = +32256; µ-law 0xff = 0, 0x80 = +32124, 0x00 = -32124.
        assert_eq!(alaw(0xd5) * 32768.0, 8.0);
        assert_eq!(alaw(0x55) * 32768.0, -8.0);
        assert_eq!(alaw(0xaa) * 32768.0, 32256.0);
        assert_eq!(mulaw(0xff) * 32768.0, 0.0);
        assert_eq!(mulaw(0x80) * 32768.0, 32124.0);
        assert_eq!(mulaw(0x00) * 32768.0, -32124.0);
    }

    #[test]
    fn mono_conversion_equals_the_first_channel_of_the_general_path_for_every_coding() {
        use mel_core::spec::Downmix;
        let codings = [
            Coding::Int { bytes: 1 },
            Coding::Int { bytes: 2 },
            Coding::Int { bytes: 3 },
            Coding::Int { bytes: 4 },
            Coding::Float { bytes: 4 },
            Coding::Float { bytes: 8 },
            Coding::ALaw,
            Coding::MuLaw,
        ];
        // Bytes of every value, floats from a fixed list (any bit pattern would hold
        // NaNs, which never compare equal).
        let mut x = 0x2545_f491_4f6c_dd1du64;
        let mut next = || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        for coding in codings {
            let sb = coding.sample_bytes();
            let samples: Vec<Vec<u8>> = (0..1001)
                .map(|_| match coding {
                    Coding::Float { bytes: 4 } => {
                        (next() as i32 as f32 / 3e9).to_le_bytes().to_vec()
                    }
                    Coding::Float { .. } => (next() as i64 as f64 / 1e19).to_le_bytes().to_vec(),
                    _ => next().to_le_bytes()[..sb].to_vec(),
                })
                .collect();
            // Mono, with a partial sample at the end (left out) where samples have
            // several bytes.
            let mut mono_bytes: Vec<u8> = samples.concat();
            if sb > 1 {
                mono_bytes.push(0x7f);
            }
            // Two channels: each sample beside a junk one, the first channel taken.
            let stereo: Vec<u8> = samples
                .iter()
                .flat_map(|s| s.iter().copied().chain(std::iter::repeat_n(0xa5, sb)))
                .collect();
            let (mut mono, mut first) = (vec![1.5], vec![1.5]);
            convert(&mono_bytes, coding, 1, &mut mono, Downmix::Mean);
            convert(&stereo, coding, 2, &mut first, Downmix::First);
            assert_eq!(mono.len(), 1 + samples.len(), "{coding:?}");
            let bits = |v: &[f32]| v.iter().map(|f| f.to_bits()).collect::<Vec<_>>();
            assert_eq!(bits(&mono), bits(&first), "{coding:?}");
            let mut empty = Vec::new();
            convert(&[], coding, 1, &mut empty, Downmix::Mean);
            assert!(empty.is_empty());
        }
    }
}

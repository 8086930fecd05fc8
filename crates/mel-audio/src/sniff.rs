//! The one routing decision: what a file is, read from its first bytes (never from its
//! name, never from the target rate). A supported container at the start of the file
//! (after ID3v2 tags) picks its reader; a known format melctl does not decode is refused by
//! name ("unsupported codec: WavPack"); anything else is refused as unrecognised. Nothing
//! is searched for further in: symphonia's own probe scans up to 1 MiB for any marker,
//! which is how a WavPack file (whose blocks carry a copy of a RIFF header) used to be
//! read as PCM noise.

use std::io::{Read, Seek, SeekFrom};

/// The containers melctl decodes, each with one reader.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Container {
    /// RIFF/RF64/BW64 WAVE: melctl's own parser (`wav`).
    Wav,
    /// Native FLAC.
    Flac,
    /// MPEG-1/2 audio layer III; `tagged` when its first frame carries a Xing/Info/VBRI
    /// tag, whose frame count is then a promise (otherwise symphonia only estimates it).
    Mp3 {
        /// Whether the frame count comes from a tag (a promise) rather than an estimate.
        tagged: bool,
    },
    /// Ogg (Vorbis or FLAC inside).
    Ogg,
    /// AIFF or AIFF-C with a compression symphonia reads.
    Aiff,
    /// Core Audio Format.
    Caf,
    /// ISO base media (MP4/M4A/MOV): AAC or ALAC.
    Mp4,
    /// AAC in ADTS frames.
    Adts,
    /// Matroska / WebM (Vorbis, FLAC, AAC or PCM inside).
    Mkv,
}

impl Container {
    /// The container's name, for messages.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Container::Wav => "WAV",
            Container::Flac => "FLAC",
            Container::Mp3 { .. } => "MP3",
            Container::Ogg => "Ogg",
            Container::Aiff => "AIFF",
            Container::Caf => "CAF",
            Container::Mp4 => "MP4",
            Container::Adts => "ADTS",
            Container::Mkv => "Matroska",
        }
    }
}

/// What the first bytes say: a container at `offset` (past any ID3v2 tags), or why the
/// file is refused.
pub(crate) type Sniffed = std::result::Result<(Container, u64), Refusal>;

/// Why a file is refused before any decoder sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Refusal {
    /// A format melctl knows of and does not decode.
    Unsupported(String),
    /// The file is cut short inside the bytes that identify it.
    Truncated(String),
    /// Not audio melctl recognises; the detail says what was found.
    Unrecognised(String),
}

/// At most this many ID3v2 tags are skipped before the audio must start.
const MAX_TAGS: usize = 8;

/// Identifies the content of `r` (positioned anywhere; it is read from offset 0).
pub(crate) fn sniff<R: Read + Seek>(r: &mut R, len: u64) -> std::io::Result<Sniffed> {
    let mut offset = 0u64;
    for _ in 0..MAX_TAGS {
        let head = read_at(r, offset, 10)?;
        if head.len() == 10 && &head[..3] == b"ID3" {
            // ID3v2: a 10-byte header, a synchsafe size, a 10-byte footer when flagged.
            let size = head[6..10]
                .iter()
                .fold(0u64, |acc, &b| (acc << 7) | (b & 0x7f) as u64);
            let footer = if head[5] & 0x10 != 0 { 10 } else { 0 };
            offset += 10 + size + footer;
            if offset > len {
                return Ok(Err(Refusal::Truncated(
                    "truncated: the file ends inside its ID3v2 tag".into(),
                )));
            }
            continue;
        }
        break;
    }
    let head = read_at(r, offset, 64)?;
    let tagged = offset > 0;
    Ok(match identify(&head) {
        None if tagged || mpeg_sync(&head).is_some() => mp3_at(r, offset, len)?,
        Some(Ok((c, _))) => match c {
            Container::Aiff => aifc_check(r, offset, len)?.map(|()| (c, offset)),
            Container::Ogg => ogg_check(&head).map(|()| (c, offset)),
            c => Ok((c, offset)),
        },
        Some(Err(refusal)) => Err(refusal),
        None => Err(Refusal::Unrecognised(unrecognised(&head))),
    })
}

/// The container or known foreign format that `head` (the first bytes) starts with.
fn identify(head: &[u8]) -> Option<Sniffed> {
    let at = |i: usize, m: &[u8]| head.get(i..i + m.len()) == Some(m);
    let unsupported = |what: &str| Some(Err(Refusal::Unsupported(what.to_string())));
    let ok = |c: Container| Some(Ok((c, 0)));
    if (at(0, b"RIFF") || at(0, b"RF64") || at(0, b"BW64")) && at(8, b"WAVE") {
        return ok(Container::Wav);
    }
    if at(0, b"RIFX") && at(8, b"WAVE") {
        return unsupported("unsupported format: big-endian WAV (RIFX)");
    }
    if at(0, b"RIFF") {
        // Named from a list, never quoted: a file's bytes are not echoed into a message.
        let forms: [(&[u8], &str); 7] = [
            (b"AVI ", "an AVI video"),
            (b"RMID", "a RIFF MIDI file (notes, not audio)"),
            (b"WEBP", "a WebP image"),
            (b"CDXA", "a CD-XA (Video CD) track"),
            (b"RMP3", "an RIFF MP3 file"),
            (b"sfbk", "a SoundFont"),
            (b"DLS ", "a DLS instrument bank"),
        ];
        let what = forms
            .iter()
            .find(|(f, _)| at(8, f))
            .map_or("a RIFF file", |(_, w)| w);
        return unsupported(&format!("unsupported format: {what}, not RIFF WAVE"));
    }
    if at(0, b"FORM") && (at(8, b"AIFF") || at(8, b"AIFC")) {
        return ok(Container::Aiff);
    }
    let foreign: &[(usize, &[u8], &str)] = &[
        (0, b"wvpk", "unsupported codec: WavPack"),
        (0, b"MAC ", "unsupported codec: Monkey's Audio (APE)"),
        (0, b"TTA1", "unsupported codec: TTA"),
        (0, b"OFR ", "unsupported codec: OptimFROG"),
        (0, b"MPCK", "unsupported codec: Musepack"),
        (0, b"MP+", "unsupported codec: Musepack"),
        (0, b"#!AMR", "unsupported codec: AMR"),
        (0, b"#!SILK", "unsupported codec: SILK"),
        (0, b".snd", "unsupported format: Sun/NeXT AU"),
        (0, b"DSD ", "unsupported format: DSF (DSD audio)"),
        (0, b"FRM8", "unsupported format: DSDIFF (DSD audio)"),
        (0, b"MThd", "unsupported format: MIDI (notes, not audio)"),
        (
            0,
            b"Creative Voice File",
            "unsupported format: Creative VOC",
        ),
        (0, b"2BIT", "unsupported format: AVR"),
        (0, b"ajkg", "unsupported codec: Shorten"),
        (
            0,
            b"FORM",
            "unsupported format: an IFF file that is not AIFF",
        ),
    ];
    for &(i, magic, what) in foreign {
        if at(i, magic) {
            return unsupported(what);
        }
    }
    if at(0, b"fLaC") {
        return ok(Container::Flac);
    }
    if at(0, b"OggS") {
        return ok(Container::Ogg);
    }
    if at(0, b"caff") {
        return ok(Container::Caf);
    }
    if at(4, b"ftyp") {
        return ok(Container::Mp4);
    }
    if at(0, &[0x1a, 0x45, 0xdf, 0xa3]) {
        return ok(Container::Mkv);
    }
    // ADTS: 12 sync bits, layer 00, a valid sampling index.
    if head.len() >= 7 && head[0] == 0xff && head[1] & 0xf6 == 0xf0 && (head[2] >> 2) & 0xf < 13 {
        return ok(Container::Adts);
    }
    None
}

/// The length in bytes of the MPEG audio frame whose header starts `b`, with its layer
/// (1–3); `None` when `b` does not start with a valid header.
fn mpeg_sync(b: &[u8]) -> Option<(usize, u8)> {
    if b.len() < 4 || b[0] != 0xff || b[1] & 0xe0 != 0xe0 {
        return None;
    }
    let version = (b[1] >> 3) & 3; // 0: 2.5, 1: reserved, 2: MPEG-2, 3: MPEG-1
    let layer = match (b[1] >> 1) & 3 {
        1 => 3,
        2 => 2,
        3 => 1,
        _ => return None,
    };
    let bitrate_index = (b[2] >> 4) as usize;
    let rate_index = ((b[2] >> 2) & 3) as usize;
    if version == 1 || bitrate_index == 0 || bitrate_index == 15 || rate_index == 3 {
        return None;
    }
    let padding = ((b[2] >> 1) & 1) as usize;
    let mpeg1 = version == 3;
    let kbps: [u16; 15] = match (mpeg1, layer) {
        (true, 1) => [
            0, 32, 64, 96, 128, 160, 192, 224, 256, 288, 320, 352, 384, 416, 448,
        ],
        (true, 2) => [
            0, 32, 48, 56, 64, 80, 96, 112, 128, 160, 192, 224, 256, 320, 384,
        ],
        (true, _) => [
            0, 32, 40, 48, 56, 64, 80, 96, 112, 128, 160, 192, 224, 256, 320,
        ],
        (false, 1) => [
            0, 32, 48, 56, 64, 80, 96, 112, 128, 144, 160, 176, 192, 224, 256,
        ],
        (false, _) => [0, 8, 16, 24, 32, 40, 48, 56, 64, 80, 96, 112, 128, 144, 160],
    };
    let base = [44100usize, 48000, 32000][rate_index];
    let rate = match version {
        3 => base,
        2 => base / 2,
        _ => base / 4,
    };
    let bitrate = kbps[bitrate_index] as usize * 1000;
    let len = match layer {
        1 => (12 * bitrate / rate + padding) * 4,
        3 if !mpeg1 => 72 * bitrate / rate + padding,
        _ => 144 * bitrate / rate + padding,
    };
    Some((len, layer))
}

/// MPEG audio at `offset` (after skipping up to 4 KiB of zero padding): layer III with a
/// second frame header where the first says it ends (or the file ends there), so that
/// stray `0xFFE` bits are not taken for audio.
fn mp3_at<R: Read + Seek>(r: &mut R, offset: u64, len: u64) -> std::io::Result<Sniffed> {
    let window = read_at(r, offset, 4096)?;
    let start = window.iter().position(|&b| b != 0).unwrap_or(window.len());
    let at = offset + start as u64;
    let head = read_at(r, at, 64)?;
    let Some((frame_len, layer)) = mpeg_sync(&head) else {
        if let Some(Ok((c, _))) = identify(&head) {
            // Audio of another kind after an ID3v2 tag (FLAC, WAV, say).
            return Ok(match c {
                Container::Aiff => aifc_check(r, at, len)?.map(|()| (c, at)),
                Container::Ogg => ogg_check(&head).map(|()| (c, at)),
                c => Ok((c, at)),
            });
        }
        let what = if offset > 0 {
            "an ID3v2 tag followed by no MPEG audio frame"
        } else {
            "no MPEG audio frame"
        };
        return Ok(Err(Refusal::Unrecognised(what.into())));
    };
    if layer != 3 {
        return Ok(Err(Refusal::Unsupported(format!(
            "unsupported codec: MPEG audio layer {}",
            ["I", "II"][layer as usize - 1]
        ))));
    }
    let next = at + frame_len as u64;
    if next + 4 <= len {
        let second = read_at(r, next, 4)?;
        if mpeg_sync(&second).is_none() {
            return Ok(Err(Refusal::Unrecognised(
                "an MPEG frame header not followed by another".into(),
            )));
        }
    }
    let frame = read_at(r, at, frame_len.min(256))?;
    let tagged = [b"Xing", b"Info", b"VBRI"]
        .iter()
        .any(|t| frame.windows(4).any(|w| w == *t));
    Ok(Ok((Container::Mp3 { tagged }, at)))
}

/// Ogg: the first packet must be Vorbis or FLAC (symphonia's decoders); Opus and Speex
/// are named.
fn ogg_check(head: &[u8]) -> Result<(), Refusal> {
    // The first page: 27 bytes of header, `segments` lacing values, then the packet.
    let segments = *head.get(26).unwrap_or(&0) as usize;
    let packet = head.get(27 + segments..).unwrap_or(&[]);
    let starts = |m: &[u8]| packet.starts_with(m);
    if starts(b"\x01vorbis") || starts(b"\x7fFLAC") {
        Ok(())
    } else if starts(b"OpusHead") {
        Err(Refusal::Unsupported("unsupported codec: Opus".into()))
    } else if starts(b"Speex   ") {
        Err(Refusal::Unsupported("unsupported codec: Speex".into()))
    } else if starts(b"\x80theora") {
        Err(Refusal::Unsupported(
            "unsupported codec: Theora video (no audio stream first)".into(),
        ))
    } else {
        Err(Refusal::Unsupported(
            "unsupported codec: an Ogg stream that is neither Vorbis nor FLAC".into(),
        ))
    }
}

/// AIFF-C: the COMM chunk's compression must be one symphonia reads.
fn aifc_check<R: Read + Seek>(
    r: &mut R,
    base: u64,
    len: u64,
) -> std::io::Result<Result<(), Refusal>> {
    let head = read_at(r, base, 12)?;
    if &head[8..12] != b"AIFC" {
        return Ok(Ok(()));
    }
    // No COMM: the reader says what is wrong.
    let Some(body) = comm_chunk(r, base, len)? else {
        return Ok(Ok(()));
    };
    let Some(tag) = body.get(18..22) else {
        return Ok(Ok(()));
    };
    const READ: [&[u8]; 12] = [
        b"NONE", b"none", b"sowt", b"twos", b"fl32", b"fl64", b"in24", b"in32", b"23ni", b"raw ",
        b"alaw", b"ulaw",
    ];
    if READ.iter().any(|t| t.eq_ignore_ascii_case(tag)) {
        return Ok(Ok(()));
    }
    // Named from a list, never quoted from the file (its compression name is free text).
    const NAMES: [(&[u8], &str); 10] = [
        (b"GSM ", "GSM 6.10"),
        (b"ima4", "IMA 4:1 ADPCM"),
        (b"MAC3", "MACE 3:1"),
        (b"MAC6", "MACE 6:1"),
        (b"Qclp", "QUALCOMM PureVoice"),
        (b"QDMC", "QDesign Music"),
        (b"QDM2", "QDesign Music 2"),
        (b"ADP4", "Intel/DVI ADPCM"),
        (b"G722", "G.722 ADPCM"),
        (b"G726", "G.726 ADPCM"),
    ];
    let name = NAMES
        .iter()
        .find(|(t, _)| *t == tag)
        .map_or("a compression melctl does not read", |(_, n)| n);
    Ok(Err(Refusal::Unsupported(format!(
        "unsupported codec: AIFF-C with {name} compression"
    ))))
}

/// The frames an AIFF or AIFF-C file's COMM chunk promises (`numSampleFrames`), or `None`
/// without a COMM chunk. symphonia counts frames from the SSND chunk's size instead, so a
/// file cut inside its sound data would look complete without this.
pub(crate) fn aiff_promised_frames<R: Read + Seek>(
    r: &mut R,
    base: u64,
    len: u64,
) -> std::io::Result<Option<u64>> {
    Ok(comm_chunk(r, base, len)?
        .and_then(|body| {
            body.get(2..6)
                .map(|b| u32::from_be_bytes([b[0], b[1], b[2], b[3]]))
        })
        .map(u64::from))
}

/// The first 256 bytes of the COMM chunk of the AIFF form at `base` (64 chunks looked at
/// at most), or `None`.
fn comm_chunk<R: Read + Seek>(r: &mut R, base: u64, len: u64) -> std::io::Result<Option<Vec<u8>>> {
    let mut pos = base + 12;
    for _ in 0..64 {
        let ck = read_at(r, pos, 8)?;
        if ck.len() < 8 {
            break;
        }
        let size = u32::from_be_bytes([ck[4], ck[5], ck[6], ck[7]]) as u64;
        if &ck[..4] == b"COMM" {
            return Ok(Some(read_at(r, pos + 8, size.min(256) as usize)?));
        }
        pos += 8 + size + (size & 1);
        if pos >= len {
            break;
        }
    }
    Ok(None)
}

/// An AIFF's sample rate from its COMM chunk (an 80-bit extended float), as a value and
/// whether it is a whole number of hertz (exactly, from the 64-bit mantissa: a fraction
/// below what a 64-bit float keeps still counts). symphonia would take its integer part
/// (0.9 Hz off at 16000.9 Hz, with no resampling) and saturate the rest (a negative rate
/// read as 0 Hz).
pub(crate) fn aiff_rate<R: Read + Seek>(
    r: &mut R,
    base: u64,
    len: u64,
) -> std::io::Result<Option<(f64, bool)>> {
    let Some(body) = comm_chunk(r, base, len)? else {
        return Ok(None);
    };
    let Some(b) = body.get(8..18) else {
        return Ok(None);
    };
    let negative = b[0] & 0x80 != 0;
    let biased = u16::from_be_bytes([b[0], b[1]]) & 0x7fff;
    let mantissa = u64::from_be_bytes(b[2..10].try_into().unwrap());
    if biased == 0x7fff {
        // Infinity (no fraction bits) or NaN.
        let v = if mantissa << 1 == 0 {
            f64::INFINITY
        } else {
            f64::NAN
        };
        return Ok(Some((if negative { -v } else { v }, false)));
    }
    let exp = biased as i32 - 16383;
    let whole = match 63 - exp {
        _ if mantissa == 0 => true,
        shift if shift <= 0 => true,
        shift if shift >= 64 => false,
        shift => mantissa & ((1u64 << shift) - 1) == 0,
    };
    let v = mantissa as f64 / 2f64.powi(63) * 2f64.powi(exp);
    Ok(Some((if negative { -v } else { v }, whole)))
}

/// What a CAF file's header says that symphonia's reader gets wrong or would refuse
/// unclearly.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub(crate) struct CafHeader {
    /// The sample rate (a 64-bit float in the `desc` chunk).
    pub rate: f64,
    /// The format ID (`lpcm`, `alac`, `ulaw`...).
    pub format: [u8; 4],
    /// Bits per channel.
    pub bits: u32,
    /// Whether the format's packets vary in size (a packet table gives them).
    pub variable: bool,
    /// Where the `data` chunk's size field is, when it is -1 ("to the end of the file", as
    /// a streaming writer leaves it).
    pub streamed_size_at: Option<u64>,
    /// Where the `data` chunk's body starts.
    pub data_start: Option<u64>,
}

/// Reads the chunks of the CAF file at `base` (64 at most): its `desc` and where its
/// `data` chunk is. `None` without a `desc` chunk (the reader says what is wrong).
pub(crate) fn caf_header<R: Read + Seek>(
    r: &mut R,
    base: u64,
    len: u64,
) -> std::io::Result<Option<CafHeader>> {
    let mut h = CafHeader::default();
    let mut desc = false;
    let mut pos = base + 8;
    for _ in 0..64 {
        let ck = read_at(r, pos, 12)?;
        if ck.len() < 12 {
            break;
        }
        let size = i64::from_be_bytes(ck[4..12].try_into().unwrap());
        let body = pos + 12;
        match &ck[..4] {
            b"desc" => {
                let d = read_at(r, body, 32)?;
                if d.len() < 32 {
                    break;
                }
                h.rate = f64::from_be_bytes(d[..8].try_into().unwrap());
                h.format.copy_from_slice(&d[8..12]);
                let bytes_per_packet = u32::from_be_bytes(d[16..20].try_into().unwrap());
                let frames_per_packet = u32::from_be_bytes(d[20..24].try_into().unwrap());
                h.variable = bytes_per_packet == 0 || frames_per_packet == 0;
                h.bits = u32::from_be_bytes(d[28..32].try_into().unwrap());
                desc = true;
            }
            b"data" => {
                h.data_start = Some(body);
                if size == -1 {
                    h.streamed_size_at = Some(pos + 4);
                    break;
                }
            }
            _ => {}
        }
        if size < 0 {
            break;
        }
        pos = body.saturating_add(size as u64);
        if pos >= len {
            break;
        }
    }
    Ok(desc.then_some(h))
}

/// Why `head` (a file's first bytes) is no audio melctl knows, without quoting it: a manifest
/// row may name any file (`/etc/shadow`), and the reason goes to the summary and the JSON
/// report, so a file's bytes are never echoed into it.
fn unrecognised(head: &[u8]) -> String {
    if head.is_empty() {
        return "empty file (0 bytes)".into();
    }
    "no known signature at its start".into()
}

/// Up to `n` bytes of `r` from `offset` (fewer at the end of the file).
pub(crate) fn read_at<R: Read + Seek>(
    r: &mut R,
    offset: u64,
    n: usize,
) -> std::io::Result<Vec<u8>> {
    r.seek(SeekFrom::Start(offset))?;
    let mut buf = Vec::with_capacity(n.min(1 << 16));
    r.take(n as u64).read_to_end(&mut buf)?;
    Ok(buf)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Cursor;

    fn sniffed(b: &[u8]) -> Sniffed {
        sniff(&mut Cursor::new(b), b.len() as u64).unwrap()
    }

    #[test]
    fn the_start_of_the_file_decides_and_foreign_formats_are_named() {
        assert_eq!(sniffed(b"RIFF\0\0\0\0WAVEfmt "), Ok((Container::Wav, 0)));
        assert_eq!(sniffed(b"fLaC\0\0\0\x22"), Ok((Container::Flac, 0)));
        let wv = sniffed(b"wvpk\x20\0\0\0RIFF\0\0\0\0WAVEfmt ");
        assert_eq!(
            wv,
            Err(Refusal::Unsupported("unsupported codec: WavPack".into()))
        );
        // A marker further in is not searched for, and the bytes found are not quoted.
        match sniffed(b"junk....RIFF\0\0\0\0WAVEfmt ") {
            Err(Refusal::Unrecognised(m)) => {
                assert!(!m.contains("6a 75") && !m.contains("junk"), "{m}")
            }
            other => panic!("{other:?}"),
        }
        // An ID3v2 tag is skipped; what follows it decides.
        let mut b = b"ID3\x04\0\0\0\0\0\x04abcd".to_vec();
        b.extend_from_slice(b"fLaC\0\0\0\x22");
        assert_eq!(sniffed(&b), Ok((Container::Flac, 14)));
        let cut = b"ID3\x04\0\0\0\0\x7f\x7fabcd";
        assert!(matches!(sniffed(cut), Err(Refusal::Truncated(_))));
    }

    #[test]
    fn a_lone_mpeg_sync_is_not_audio_and_layer_two_is_named() {
        // MPEG-1 layer III, 128 kb/s, 44.1 kHz: 417 bytes a frame.
        let mut b = vec![0xff, 0xfb, 0x90, 0x64];
        b.resize(417, 0x55);
        b.extend_from_slice(&[0xff, 0xfb, 0x90, 0x64]);
        b.resize(900, 0x55);
        assert_eq!(sniffed(&b), Ok((Container::Mp3 { tagged: false }, 0)));
        b[417] = 0;
        assert!(matches!(sniffed(&b), Err(Refusal::Unrecognised(_))));
        let layer2 = [0xff, 0xfd, 0x90, 0x64];
        match sniffed(&layer2) {
            Err(Refusal::Unsupported(m)) => assert!(m.contains("layer II"), "{m}"),
            other => panic!("{other:?}"),
        }
    }
}
